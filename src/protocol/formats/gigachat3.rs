//! GigaChat 3: `function call<|role_sep|>` then one JSON object `{"name": …, "arguments":
//! {…}}`, at the start of the answer (the marker is the role line of the turn).

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
    )
};

/// The leading reader.
pub(crate) fn lead(text: &str, from: usize, to: usize) -> Lead {
    functools::json_after(
        text,
        from,
        to,
        &[b"function call<|role_sep|>", b"<|role_sep|>"],
        Format::Gigachat3,
    )
}
