//! LongCat: `<longcat_tool_call>{"name": …, "arguments": {…}}</longcat_tool_call>`, one tag per call.

use super::{lit, Close, FormatEntry, Open, Reader, RegionSyntax};
use crate::protocol::types::{Call, Format, RawDiag, Span};

/// The row.
pub(crate) const ROW: FormatEntry = FormatEntry::native(
    Format::Longcat,
    "longcat",
    &[],
    Reader::Region(RegionSyntax::new(
        Open::Tag(b"<longcat_tool_call"),
        Close::Tag(b"</longcat_tool_call"),
        read,
        "<longcat_tool_call>",
        (
            "<longcat_tool_call> has no closing tag; its complete calls were read up to the end of the text",
            "Close the calls' section as the format does.",
        ),
    )),
    super::Lesson::wire(
        |name, args| format!("<longcat_tool_call>{}</longcat_tool_call>", super::teach::json_call(name, args)),
        "To use a tool or skill, write <longcat_tool_call>, a JSON object with \"name\" and \"arguments\", and </longcat_tool_call>, once per call. If no action is needed, answer in plain text.",
    ),
    super::Grammar::Native("longcat"),
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
        Format::Longcat,
        block,
        span,
        diags,
        out,
    );
}
