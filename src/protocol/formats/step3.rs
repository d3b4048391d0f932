//! Step-3: DeepSeek-like bars `<｜tool_calls_begin｜>` then per call
//! `<｜tool_call_begin｜>function<｜tool_sep｜>` `<steptml:invoke name="NAME">`
//! `<steptml:parameter name="KEY">value</steptml:parameter>` … `</steptml:invoke>`
//! `<｜tool_call_end｜>`, then `<｜tool_calls_end｜>` (an underscore where DeepSeek writes
//! `▁`). Values are text (`text.rs`); each invoke is its own call.

use super::text;
use super::{Close, FormatEntry, Open, Reader, RegionSyntax};
use crate::protocol::types::{Call, Format, RawDiag, Span};

/// The row.
pub(crate) const ROW: FormatEntry = FormatEntry::native(
    Format::Step3,
    "step3",
    &[],
    Reader::Region(RegionSyntax::new(
        Open::Exact("<｜tool_calls_begin｜>".as_bytes()),
        Close::Exact("<｜tool_calls_end｜>".as_bytes()),
        read,
        "<｜tool_calls_begin｜>",
        (
            "<｜tool_calls_begin｜> has no <｜tool_calls_end｜>; its complete calls were read up to the end of the text",
            "End the calls with <｜tool_calls_end｜>.",
        ),
    )),
    super::Lesson::wire(
        |name, args| {
            let params = super::teach::text_params(
                args,
                |k| format!("<steptml:parameter name=\"{k}\">"),
                "</steptml:parameter>",
            );
            format!("<｜tool_calls_begin｜><｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke name=\"{name}\">\n{params}</steptml:invoke><｜tool_call_end｜><｜tool_calls_end｜>")
        },
        "To use tools or skills, write <｜tool_calls_begin｜>, then per call <｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke name=\"tool_name\"> with one <steptml:parameter name=\"name\">value</steptml:parameter> per parameter, </steptml:invoke><｜tool_call_end｜>, and close with <｜tool_calls_end｜>. If no action is needed, answer in plain text.",
    ),
    super::Grammar::Native("step3"),
);

/// The region's reader.
pub(crate) fn read(
    text: &str,
    content: usize,
    close: usize,
    block: usize,
    span: Span,
    diags: &mut Vec<RawDiag>,
    out: &mut Vec<Call>,
) {
    text::read_invokes(
        text,
        content,
        close,
        "steptml:",
        Format::Step3,
        block,
        span,
        diags,
        out,
    );
}
