//! InternLM2: `<|action_start|><|plugin|>{"name": …, "parameters": {…}}<|action_end|>`.

use super::{lit, Close, FormatEntry, Open, Reader, RegionSyntax};
use crate::protocol::types::{Call, Format, RawDiag, Span};

/// The row.
pub(crate) const ROW: FormatEntry = FormatEntry::native(
    Format::Internlm2,
    "internlm2",
    &["internlm"],
    Reader::Region(RegionSyntax::new(
        Open::Exact(b"<|action_start|><|plugin|>"),
        Close::Exact(b"<|action_end|>"),
        read,
        "<|action_start|><|plugin|>",
        (
            "<|action_start|><|plugin|> has no closing tag; its complete calls were read up to the end of the text",
            "Close the calls' section as the format does.",
        ),
    )),
    super::Lesson::wire(
        |name, args| {
            format!(
                "<|action_start|><|plugin|>\n{}<|action_end|>",
                super::teach::json_call_with(name, "parameters", args)
            )
        },
        "To use a tool or skill, write <|action_start|><|plugin|>, a JSON object with \"name\" and \"parameters\", and <|action_end|>, once per call. If no action is needed, answer in plain text.",
    ),
    super::Grammar::Native("internlm2"),
);

/// The region's reader: JSON call objects or lists of them.
pub(crate) fn read(
    text: &str,
    content: usize,
    close: usize,
    block: usize,
    span: Span,
    diags: &mut Vec<RawDiag>,
    out: &mut Vec<Call>,
) {
    lit::read_json_calls(
        text,
        content,
        close,
        None,
        Format::Internlm2,
        block,
        span,
        diags,
        out,
    );
}
