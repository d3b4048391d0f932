//! JSON call forms: MCP `tools/call` (params or the whole JSON-RPC request), OpenAI
//! function calls (one, a list, or an assistant message's `tool_calls`), and the legacy
//! `function_call` / Anthropic `tool_use` shapes, which cost nothing extra.

use serde_json::{Map, Value};

use super::lead::Lead;
use super::lit;
use crate::protocol::locate::locate_diags;
use crate::protocol::types::{Call, Format, OnError, Parsed, RawDiag, Span};

/// What a JSON document starts with (after blanks): an object or an array.
pub(crate) const OPENS: &[u8] = b"{[";

/// True when the first non-blank character opens a JSON object or array.
pub(crate) fn looks_like_json(text: &str) -> bool {
    text.trim_start()
        .as_bytes()
        .first()
        .is_some_and(|b| OPENS.contains(b))
}

/// The format table's `auto` reader: the calls of a JSON call document, `None` when the
/// text is not one (then `auto` reads it as text).
pub(crate) fn detect(text: &str) -> Option<Parsed> {
    if !looks_like_json(text) {
        return None;
    }
    match read(text) {
        JsonOutcome::Calls(p) => Some(p),
        JsonOutcome::NotCalls | JsonOutcome::Invalid(..) => None,
    }
}

/// The format table's reader for `--format json`: the calls, or a diagnostic saying why
/// the text is not a JSON call document.
pub(crate) fn read_document(text: &str) -> Parsed {
    match read(text) {
        JsonOutcome::Calls(p) => p,
        JsonOutcome::NotCalls => not_calls(text),
        JsonOutcome::Invalid(line, col, msg) => invalid(text, line, col, &msg),
    }
}

/// What a JSON text turned out to be.
enum JsonOutcome {
    /// A tool call document (possibly with errors in some calls).
    Calls(Parsed),
    /// Valid JSON, but no call shape.
    NotCalls,
    /// Not valid JSON: (line, column as serde_json reports it, message).
    Invalid(usize, usize, String),
}

fn byte_offset(text: &str, line: usize, column: usize) -> usize {
    let mut off = 0;
    for _ in 1..line {
        match memchr::memchr(b'\n', &text.as_bytes()[off..]) {
            Some(i) => off += i + 1,
            None => return text.len(),
        }
    }
    let mut o = (off + column.saturating_sub(1)).min(text.len());
    while !text.is_char_boundary(o) {
        o -= 1;
    }
    o
}

/// Reads `text` as a JSON call document.
fn read(text: &str) -> JsonOutcome {
    let value: Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) if e.is_eof() => {
            return JsonOutcome::Invalid(
                e.line(),
                e.column(),
                format!("the output was cut off: the JSON ends before it is complete ({e}); nothing was executed"),
            )
        }
        Err(e) => return JsonOutcome::Invalid(e.line(), e.column(), format!("invalid JSON: {e}")),
    };
    let span = Span {
        start: 0,
        end: text.len(),
        line: 1,
        column: 1,
    };
    let mut response = String::new();
    let mut items: Vec<&Value> = Vec::new();
    if !collect(&value, &mut items, &mut response) {
        return JsonOutcome::NotCalls;
    }
    let mut calls = Vec::new();
    let mut diags = Vec::new();
    for (block, item) in items.into_iter().enumerate() {
        match one_call(item) {
            Ok((tool, args, source)) => calls.push(Call {
                tool,
                args,
                span,
                block,
                step: None,
                on_error: OnError::Stop,
                source,
                dispatch: None,
            }),
            Err(msg) => diags.push(RawDiag::error(
                0,
                format!("JSON tool call {}: {msg}; it was not executed", block + 1),
                "Send {\"name\": \"ToolId\", \"arguments\": {…}} (MCP) or {\"type\": \"function\", \"function\": {\"name\": \"ToolId\", \"arguments\": \"{…}\"}} (OpenAI).".into(),
            )),
        }
    }
    JsonOutcome::Calls(Parsed {
        response_text: response,
        calls,
        diagnostics: locate_diags(text, diags),
    })
}

/// An error diagnostic for text that is not valid JSON.
fn invalid(text: &str, line: usize, column: usize, msg: &str) -> Parsed {
    let off = byte_offset(text, line, column);
    let d = RawDiag::error(
        off,
        msg.to_string(),
        "Send one JSON object (or an array of them) describing the tool call.".into(),
    );
    Parsed {
        response_text: String::new(),
        calls: Vec::new(),
        diagnostics: locate_diags(text, vec![d]),
    }
}

/// An error diagnostic for valid JSON that is not a call.
fn not_calls(text: &str) -> Parsed {
    let d = RawDiag::error(
        0,
        "JSON is not a tool call: expected {\"name\", \"arguments\"}, a tools/call request, or OpenAI function call(s)".into(),
        "Send {\"name\": \"ToolId\", \"arguments\": {…}}.".into(),
    );
    Parsed {
        response_text: String::new(),
        calls: Vec::new(),
        diagnostics: locate_diags(text, vec![d]),
    }
}

fn is_call_object(o: &Map<String, Value>) -> bool {
    o.get("name").is_some_and(Value::is_string)
        || o.get("function").is_some_and(Value::is_object)
        || o.get("function_call").is_some_and(Value::is_object)
}

/// Gathers the call objects in `v`; false when `v` has no call shape at all.
fn collect<'a>(v: &'a Value, items: &mut Vec<&'a Value>, response: &mut String) -> bool {
    match v {
        Value::Array(a) => {
            if a.is_empty() || !a.iter().all(|x| x.as_object().is_some_and(is_call_object)) {
                return false;
            }
            items.extend(a.iter());
            true
        }
        Value::Object(o) => {
            if o.get("method").and_then(Value::as_str) == Some("tools/call") {
                match o.get("params") {
                    Some(p) => items.push(p),
                    None => items.push(v),
                }
                return true;
            }
            if let Some(Value::Array(tc)) = o.get("tool_calls") {
                if let Some(c) = o.get("content").and_then(Value::as_str) {
                    response.push_str(c.trim());
                }
                items.extend(tc.iter());
                return true;
            }
            if let Some(fc) = o.get("function_call").filter(|f| f.is_object()) {
                if let Some(c) = o.get("content").and_then(Value::as_str) {
                    response.push_str(c.trim());
                }
                items.push(fc);
                return true;
            }
            if is_call_object(o) {
                items.push(v);
                return true;
            }
            false
        }
        _ => false,
    }
}

/// The call of one JSON call object; one written with `parameters` instead of
/// `arguments` is Llama 3.1's shape and is marked so.
fn one_call(v: &Value) -> Result<(String, Map<String, Value>, Format), String> {
    let (tool, args) = lit::object_call(v)?;
    Ok((tool, args, lit::json_source(v)))
}

/// The format table's leading reader: a JSON call document filling `text[from..to]` (a
/// fenced block's content; at the start of the text `detect` has already looked).
pub(crate) fn lead(text: &str, from: usize, to: usize) -> Lead {
    let t = &text[from..to];
    let Some(first) = t.trim_start().as_bytes().first() else {
        return Lead::No;
    };
    if !OPENS.contains(first) {
        return Lead::No;
    }
    match read(t) {
        JsonOutcome::Calls(p) if !p.has_errors() => {
            let calls = p
                .calls
                .into_iter()
                .map(|mut c| {
                    c.span = Span {
                        start: from,
                        end: to,
                        line: 0,
                        column: 0,
                    };
                    c
                })
                .collect();
            Lead::calls(calls, from + t.trim_end().len())
        }
        _ => Lead::No,
    }
}
