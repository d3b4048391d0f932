//! Llama 3.1 JSON: `{"name": …, "parameters": {…}}`, after `<|python_tag|>` or alone,
//! several separated by `;`. After the tag it is a region ending with its last value;
//! without it, `auto` takes it only at the start of the answer or as a whole fenced
//! block (a single object is also a JSON document, which the `json` row reads and
//! marks `llama_json` by its `parameters`).

use super::lead::Lead;
use super::lit::{self, Lit, LitErr};
use super::{Auto, Close, FormatEntry, Open, Reader, RegionSyntax};
use crate::protocol::types::{Call, Format, RawDiag, Span};

/// The marker, matched exactly.
pub(crate) const OPEN: &[u8] = b"<|python_tag|>";
/// How diagnostics name it.
pub(crate) const SHOWN_AS: &str = "<|python_tag|>";
/// The error for a call the text ends inside.
pub(crate) const UNCLOSED: (&str, &str) = (
    "the output was cut off inside a <|python_tag|> call; it was not executed",
    "The text ended before the call's JSON was complete; write the whole call again.",
);

/// The format table's reader of the region after `<|python_tag|>`.
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
        Format::LlamaJson,
        block,
        span,
        diags,
        out,
    );
}

/// Call objects at the start of `text[from..to]`, separated by `;`.
pub(crate) fn lead(text: &str, from: usize, to: usize) -> Lead {
    lead_as(text, from, to, Format::LlamaJson)
}

/// [`lead`], its calls marked as `source`'s (`--format hermes` reads them too).
pub(crate) fn lead_as(text: &str, from: usize, to: usize, source: Format) -> Lead {
    let s = text.as_bytes();
    let mut l = Lit::new(s, from, to);
    l.ws();
    if l.peek() != Some(b'{') {
        return Lead::No;
    }
    let mut calls = Vec::new();
    let mut end = l.pos;
    loop {
        let at = l.pos;
        match lit::object_call(text, at, to) {
            Ok((c, e)) => match c {
                Ok((tool, args)) => {
                    let span = Span {
                        start: at,
                        end: e,
                        line: 0,
                        column: 0,
                    };
                    calls.push(lit::call(tool, args, source, span, calls.len()));
                    end = e;
                    l.pos = e;
                }
                Err(_) => return Lead::No,
            },
            Err(LitErr::Cut) if looks_like_call(&s[at..to]) => {
                return Lead::Error(lit::value_error(
                    LitErr::Cut,
                    at,
                    to >= text.len(),
                    "a JSON call",
                    "Write each call as {\"name\": \"ToolId\", \"parameters\": {…}}.",
                ));
            }
            Err(_) => {
                return if calls.is_empty() {
                    Lead::No
                } else {
                    Lead::calls(calls, end)
                }
            }
        }
        l.blanks();
        if !l.eat(b";") {
            break;
        }
        l.ws();
        if l.peek() != Some(b'{') {
            end = l.pos;
            break;
        }
    }
    Lead::calls(calls, end)
}

/// True when a cut-off object had begun as a call (`"name"` near its start).
pub(crate) fn looks_like_call(s: &[u8]) -> bool {
    let head = &s[..s.len().min(200)];
    memchr::memmem::find(head, b"\"name\"").is_some()
        || memchr::memmem::find(head, b"'name'").is_some()
}

/// The row of the format table (`mod.rs`): name, aliases, how `auto` finds it, its reader.
pub(crate) const ROW: FormatEntry = FormatEntry {
    format: Format::LlamaJson,
    name: "llama_json",
    aliases: &["llama"],
    auto: Auto::InText,
    reader: Reader::Region(RegionSyntax {
        open: Open::Exact(OPEN),
        close: Close::Value {
            sep: Some(b';'),
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
    leading: Some(lead),
    names_as_written: true,
    also: &[],
    lesson: super::Lesson::wire(
        |name, args| super::teach::json_call_with(name, "parameters", args),
        "To use a tool or skill, answer with only a JSON object {\"name\": <tool name>, \"parameters\": {<parameter>: <value>, …}}; separate several calls with `;`. If no action is needed, answer in plain text.",
    ),
    grammar: super::Grammar::Native("llama_json"),
};
