//! One-shot reading: [`parse`] dispatches through the format table (a document format
//! reads the whole text; the others, and `auto` when the text is no document, go
//! through the scanner).

use super::formats;
use super::scan::Scanner;
use super::types::{Format, Parsed};

/// Reads every call in `text` in the given format.
///
/// Never panics; every problem becomes a [`Diagnostic`](super::Diagnostic) with a line
/// and column.
pub fn parse(text: &str, format: Format) -> Parsed {
    let mut p = parse_any(text, format);
    super::types::give_ids(&mut p.calls, 0);
    p
}

fn parse_any(text: &str, format: Format) -> Parsed {
    if format == Format::Auto {
        if let Some(parsed) = formats::detect_document(text) {
            return parsed;
        }
    } else if let Some(doc) = formats::document(format) {
        let whole = (doc.read)(text);
        if whole.calls.is_empty() {
            // Not one document: the same shape may fill a fenced block.
            let fenced = parse_text(text, format);
            if !fenced.calls.is_empty() {
                return fenced;
            }
        }
        return whole;
    }
    parse_text(text, format)
}

/// Reads the text formats (everything but document formats) in one pass.
pub(crate) fn parse_text(text: &str, format: Format) -> Parsed {
    let mut sc = Scanner::new(format);
    sc.run(text, true);
    finish_scanner(sc, text)
}

/// The result of a scanner that has read its whole text, with the shapes taken only at
/// the start of the answer or as a whole fenced block.
pub(crate) fn finish_scanner(mut sc: Scanner, text: &str) -> Parsed {
    sc.read_leading(text, &formats::leading_for(sc.format));
    let response_text = sc.response_text(text);
    let diagnostics = sc.diagnostics(text);
    let mut calls = std::mem::take(&mut sc.calls);
    super::types::give_ids(&mut calls, 0);
    Parsed {
        response_text,
        calls,
        diagnostics,
    }
}
