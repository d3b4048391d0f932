//! MiniMax-M2: `<minimax:tool_call>` `<invoke name="NAME">` `<parameter name="KEY">value
//! </parameter>` … `</invoke>` … `</minimax:tool_call>`. Values are text (`text.rs`);
//! each `<invoke>` is its own call. MiniMax-M1's `<tool_calls>` JSON lines (vLLM's
//! `minimax` parser) are read too, by the `tool_calls` row's reader.

use super::text;
use super::{Close, FormatEntry, Open, Reader, RegionSyntax};
use crate::protocol::types::{Call, Format, RawDiag, Span};

/// The row. It also reads MiniMax-M1's `<tool_calls>` JSON lines (vLLM's `minimax` parser,
/// whose name is this row's alias), with the `tool_calls` row's reader.
pub(crate) const ROW: FormatEntry = FormatEntry {
    also: &[RegionSyntax::new(
        Open::Tag(b"<tool_calls"),
        Close::Tag(b"</tool_calls"),
        super::tool_calls::read,
        "<tool_calls>",
        (
            "<tool_calls> has no closing tag; its complete calls were read up to the end of the text",
            "Close the calls' section as the format does.",
        ),
    )],
    ..FormatEntry::native(
    Format::MinimaxM2,
    "minimax_m2",
    &["minimax"],
    Reader::Region(RegionSyntax::new(
        Open::Tag(b"<minimax:tool_call"),
        Close::Tag(b"</minimax:tool_call"),
        read,
        "<minimax:tool_call>",
        (
            "<minimax:tool_call> has no closing </minimax:tool_call>; its complete calls were read up to the end of the text",
            "End the calls with </minimax:tool_call>.",
        ),
    )),
    super::Lesson::wire(
        |name, args| {
            let params =
                super::teach::text_params(args, |k| format!("<parameter name=\"{k}\">"), "</parameter>");
            format!("<minimax:tool_call>\n<invoke name=\"{name}\">\n{params}</invoke>\n</minimax:tool_call>")
        },
        "To use tools or skills, write <minimax:tool_call>, then per call <invoke name=\"tool_name\"> with one <parameter name=\"name\">value</parameter> per parameter and </invoke>, and close with </minimax:tool_call>. If no action is needed, answer in plain text.",
    ),
    super::Grammar::Native("minimax_m2"),
)
};

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
        "",
        Format::MinimaxM2,
        block,
        span,
        diags,
        out,
    );
}
