//! Mistral: `[TOOL_CALLS] [{"name": …, "arguments": {…}}]` and the newer
//! `[TOOL_CALLS]name[ARGS]{…}`. The marker is a special token, so `auto` takes it
//! anywhere; the region ends with its JSON value.

use super::lit;
use super::{Auto, Close, FormatEntry, Open, Reader, RegionSyntax};
use crate::protocol::types::{Call, Format, RawDiag, Span};

/// The marker, matched exactly.
pub(crate) const OPEN: &[u8] = b"[TOOL_CALLS]";
/// Between a tool name and its arguments in the newer form.
pub(crate) const ARGS: &[u8] = b"[ARGS]";
/// Before a call's id, between the name and `[ARGS]` (Mistral Small 3.2).
pub(crate) const CALL_ID: &[u8] = b"[CALL_ID]";
/// How diagnostics name it.
pub(crate) const SHOWN_AS: &str = "[TOOL_CALLS]";
/// The error for a call the text ends inside.
pub(crate) const UNCLOSED: (&str, &str) = (
    "the output was cut off inside a [TOOL_CALLS] call; it was not executed",
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
        Some(ARGS),
        Format::Mistral,
        block,
        span,
        diags,
        out,
    );
}

/// The row of the format table (`mod.rs`): name, aliases, how `auto` finds it, its reader.
pub(crate) const ROW: FormatEntry = FormatEntry {
    format: Format::Mistral,
    name: "mistral",
    aliases: &[],
    auto: Auto::InText,
    reader: Reader::Region(RegionSyntax {
        open: Open::Exact(OPEN),
        close: Close::Value {
            sep: None,
            name_then: Some(ARGS),
            call_id: Some(CALL_ID),
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
        |name, args| format!("[TOOL_CALLS] [{}]", super::teach::json_call(name, args)),
        "To use tools or skills, write [TOOL_CALLS] followed by a JSON list of calls, each an object with \"name\" and \"arguments\". If no action is needed, answer in plain text.",
    ),
    grammar: super::Grammar::Native("mistral"),
};
