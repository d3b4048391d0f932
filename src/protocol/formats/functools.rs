//! Phi-4-mini and FireFunction v2: `functools[{"name": …, "arguments": {…}}]`. The word is
//! no special token, so `auto` takes it only at the start of the answer or as a whole
//! fenced block (`lead.rs`).

use super::lead::Lead;
use super::lit::{self, LitErr, ValueEnd};
use super::{FormatEntry, Reader};
use crate::protocol::types::{Format, RawDiag, Severity, Span};

/// The row.
pub(crate) const ROW: FormatEntry = FormatEntry {
    leading: Some(lead),
    ..FormatEntry::native(
        Format::Functools,
        "functools",
        &["phi4_mini", "phi4", "firefunction", "firefunction_v2"],
        Reader::Leading,
        super::Lesson::wire(
            |name, args| format!("functools[{}]", super::teach::json_call(name, args)),
            "To use tools or skills, begin your answer with functools followed by a JSON list of calls, each an object with \"name\" and \"arguments\". If no action is needed, answer in plain text.",
        ),
        super::Grammar::Native("functools"),
    )
};

/// The leading reader.
pub(crate) fn lead(text: &str, from: usize, to: usize) -> Lead {
    json_after(text, from, to, &[b"functools"], Format::Functools)
}

/// At the start of `text[from..to]`: one of `prefixes` (blanks around it allowed), then a
/// JSON call object or list (`{"name", "arguments"}`), read as `source`'s calls.
pub(crate) fn json_after(
    text: &str,
    from: usize,
    to: usize,
    prefixes: &[&[u8]],
    source: Format,
) -> Lead {
    let s = text.as_bytes();
    let mut l = lit::Lit::new(s, from, to);
    l.ws();
    let at = l.pos;
    if !prefixes.iter().any(|p| l.eat(p)) {
        return Lead::No;
    }
    l.ws();
    if !matches!(l.peek(), Some(b'{' | b'[')) {
        return Lead::No;
    }
    let start = l.pos;
    let mut pos = start;
    let mut v = ValueEnd::default();
    let Some(end) = v.feed(&s[..to], &mut pos) else {
        return Lead::Error(lit::value_error(
            LitErr::Cut,
            at,
            to >= text.len(),
            &format!("a {} call", source.name()),
            "Write the whole call list again.",
        ));
    };
    let span = Span {
        start: at,
        end,
        line: 0,
        column: 0,
    };
    let mut diags: Vec<RawDiag> = Vec::new();
    let mut calls = Vec::new();
    lit::read_json_calls(
        text, start, end, None, source, 0, span, &mut diags, &mut calls,
    );
    if calls.is_empty() {
        return match diags.into_iter().find(|d| d.severity == Severity::Error) {
            Some(d) => Lead::Error(d),
            None => Lead::No,
        };
    }
    // A broken call among good ones is a diagnostic of its own.
    Lead::Calls {
        calls,
        end,
        prose: Vec::new(),
        diags,
    }
}
