//! IBM Granite: `<function_call> {"name": …, "arguments": {…}}`, repeated, with no
//! closing tag: the region ends with its JSON value (found while streaming by bracket
//! counting, strings skipped), and what follows is prose again.

use super::lit;
use super::{Auto, Close, FormatEntry, Open, Reader, RegionSyntax};
use crate::protocol::types::{Call, Format, RawDiag, Span};

/// The marker (matched case-insensitively, then blanks and `>`).
pub(crate) const OPEN: &[u8] = b"<function_call";
/// How diagnostics name it.
pub(crate) const SHOWN_AS: &str = "<function_call>";
/// The error for a call the text ends inside.
pub(crate) const UNCLOSED: (&str, &str) = (
    "the output was cut off inside a <function_call> call; it was not executed",
    "The text ended before the call's JSON was complete; write the whole call again.",
);

/// The format table's reader.
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
        Format::Granite,
        block,
        span,
        diags,
        out,
    );
}

/// The row of the format table (`mod.rs`): name, aliases, how `auto` finds it, its reader.
pub(crate) const ROW: FormatEntry = FormatEntry {
    format: Format::Granite,
    name: "granite",
    aliases: &[],
    auto: Auto::InText,
    reader: Reader::Region(RegionSyntax {
        open: Open::Tag(OPEN),
        close: Close::Value {
            sep: None,
            name_then: None,
            call_id: None,
            trailer: None,
        },
        opaque: &[],
        read,
        shown_as: SHOWN_AS,
        unclosed: UNCLOSED,
        reads_unclosed: false,
        only_first: None,
        prose: None,
    }),
    exact_keys: false,
    leading: None,
    names_as_written: true,
    also: &[],
    lesson: super::Lesson::wire(
        |name, args| format!("<function_call> {}", super::teach::json_call(name, args)),
        "To use a tool or skill, write <function_call> followed by a JSON object with \"name\" and \"arguments\"; write <function_call> again before each further call. If no action is needed, answer in plain text.",
    ),
    grammar: super::Grammar::Native("granite"),
};
