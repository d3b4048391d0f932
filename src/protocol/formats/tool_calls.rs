//! Jamba, Hunyuan, Apriel: `<tool_calls>[{"name": …, "arguments": {…}}]</tool_calls>`.

use super::{lit, Close, FormatEntry, Open, Reader, RegionSyntax};
use crate::protocol::types::{Call, Format, RawDiag, Span};

/// The row.
pub(crate) const ROW: FormatEntry = FormatEntry::native(
    Format::ToolCalls,
    "tool_calls",
    &["jamba", "hunyuan", "apriel"],
    Reader::Region(RegionSyntax::new(
        Open::Tag(b"<tool_calls"),
        Close::Tag(b"</tool_calls"),
        read,
        "<tool_calls>",
        (
            "<tool_calls> has no closing tag; its complete calls were read up to the end of the text",
            "Close the calls' section as the format does.",
        ),
    )),
    super::Lesson::wire(
        |name, args| format!("<tool_calls>[{}]</tool_calls>", super::teach::json_call(name, args)),
        "To use tools or skills, write <tool_calls>, a JSON list of calls, each an object with \"name\" and \"arguments\", and </tool_calls>. If no action is needed, answer in plain text.",
    ),
    super::Grammar::Native("tool_calls"),
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
        Format::ToolCalls,
        block,
        span,
        diags,
        out,
    );
}
