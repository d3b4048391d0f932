//! Granite 3.x: `<|tool_call|>[{"name": …, "arguments": {…}}]`, no closing tag: the region ends with its JSON value.
//! Granite 3.1 writes `<tool_call>` as text instead of the token: read the same by
//! `--format granite3` (a `</tool_call>` after the value goes with it); under `auto` the
//! `hermes` row, which holds that tag, reads it.

use super::{lit, Close, FormatEntry, Open, Reader, RegionSyntax};
use crate::protocol::types::{Call, Format, RawDiag, Span};

/// The row.
pub(crate) const ROW: FormatEntry = FormatEntry {
    also: &[RegionSyntax {
        reads_unclosed: false,
        ..RegionSyntax::new(
            Open::Tag(b"<tool_call"),
            Close::Value {
                sep: None,
                name_then: None,
                call_id: None,
                trailer: Some(b"</tool_call"),
            },
            read,
            "<tool_call>",
            (
                "the output was cut off inside a <tool_call> call; it was not executed",
                "Write the whole call list after <|tool_call|>.",
            ),
        )
    }],
    ..FormatEntry::native(
    Format::Granite3,
    "granite3",
    &["granite3_x"],
    Reader::Region(RegionSyntax {
        reads_unclosed: false,
        ..RegionSyntax::new(
        Open::Exact(b"<|tool_call|>"),
        Close::Value { sep: None, name_then: None, call_id: None, trailer: None },
        read,
        "<|tool_call|>",
        (
            "<|tool_call|> has no closing tag; its complete calls were read up to the end of the text",
            "Close the calls' section as the format does.",
        ),
    )}),
    super::Lesson::wire(
        |name, args| format!("<|tool_call|>[{}]", super::teach::json_call(name, args)),
        "To use tools or skills, write <|tool_call|> followed by a JSON list of calls, each an object with \"name\" and \"arguments\". If no action is needed, answer in plain text.",
    ),
    super::Grammar::Native("granite3"),
)
};

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
        Format::Granite3,
        block,
        span,
        diags,
        out,
    );
}
