//! Reading and writing tool calls: TAM, VCP, `<ACTION>` XML and JSON call forms.
//!
//! This module knows nothing of tools: it turns model output into a [`Parsed`] value
//! (prose, calls in execution order, diagnostics with places) and back into TAM text.
//! Parsing never executes anything and never panics.

mod types;

pub use types::{Call, Diagnostic, Format, OnError, Parsed, Severity, Span};

/// Reads every call in `text` in the given format.
///
/// Never panics; every problem becomes a [`Diagnostic`] with a line and column.
pub fn parse(text: &str, format: Format) -> Parsed {
    let _ = format;
    Parsed {
        response_text: text.to_string(),
        calls: Vec::new(),
        diagnostics: Vec::new(),
    }
}

/// Renders calls as TAM text that [`parse`] reads back to the same calls.
pub fn render_tam(calls: &[Call]) -> String {
    let _ = calls;
    String::new()
}
