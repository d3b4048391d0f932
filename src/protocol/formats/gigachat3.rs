//! GigaChat 3: `function call<|role_sep|>` then one JSON object `{"name": …, "arguments":
//! {…}}`, at the start of the answer (the marker is the role line of the turn). A server
//! that drops the special token leaves `function call{…}`, read the same.

use super::lead::Lead;
use super::{functools, FormatEntry, Reader};
use crate::protocol::types::Format;

/// The row.
pub(crate) const ROW: FormatEntry = FormatEntry {
    leading: Some(lead),
    ..FormatEntry::native(
        Format::Gigachat3,
        "gigachat3",
        &["gigachat"],
        Reader::Leading,
        super::Lesson::wire(
            |name, args| format!("function call<|role_sep|>\n{}", super::teach::json_call(name, args)),
            "To use a tool or skill, answer with function call<|role_sep|> followed by one JSON object with \"name\" and \"arguments\". If no action is needed, answer in plain text.",
        ),
        super::Grammar::Native("gigachat3"),
    )
};

/// The leading reader.
pub(crate) fn lead(text: &str, from: usize, to: usize) -> Lead {
    functools::json_after(
        text,
        from,
        to,
        &[
            b"function call<|role_sep|>",
            b"<|role_sep|>",
            b"function call",
        ],
        Format::Gigachat3,
    )
}
