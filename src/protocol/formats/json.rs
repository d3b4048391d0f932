//! JSON call forms: MCP `tools/call` (params or the whole JSON-RPC request), OpenAI
//! function calls (one, a list, or an assistant message's `tool_calls`), and the legacy
//! `function_call` / Anthropic `tool_use` shapes, which cost nothing extra; llama.cpp's
//! generic `{"tool_call": {…}}` is one call.

use serde_json::Value;

use crate::protocol::args::Args;

use super::lead::Lead;
use super::lit::{CallObj, Key};
use super::{Auto, DocumentReader, FormatEntry, Reader};
use crate::protocol::locate::locate_diags;
use crate::protocol::types::{Format, Parsed, RawDiag, Span};

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
    let doc: Doc = match serde_json::from_str(text) {
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
    let Some((items, response)) = doc.into_items() else {
        return JsonOutcome::NotCalls;
    };
    let mut calls = Vec::with_capacity(items.len());
    let mut diags = Vec::new();
    for (block, item) in items.into_iter().enumerate() {
        match one_call(item) {
            Ok((tool, args, source, id)) => {
                let mut c = super::lit::call(tool, args, source, span, block);
                c.id = id;
                calls.push(c);
            }
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
        "Send one JSON object {\"name\": \"ToolId\", \"arguments\": {…}} (or an array of them), complete and with nothing after it.".into(),
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

/// A JSON text read straight into what a call document means (serde builds `Value`s only
/// for the calls' names and arguments): the call objects of each shape it may have, a key
/// written twice counting by its last value as in a `Map`.
enum Doc<'de> {
    /// A list: call objects if every item is one.
    List(Vec<CallObj<'de>>),
    /// An object: a call itself, a `tools/call` request, or an assistant message.
    Object(Box<DocObject<'de>>),
    /// Anything else: no call.
    Other,
}

#[derive(Default)]
struct DocObject<'de> {
    /// The object's own call parts (`name`, `arguments`, `function`, …).
    call: CallObj<'de>,
    /// `method` is `"tools/call"`.
    tools_call: bool,
    params: Option<CallObj<'de>>,
    /// `tool_calls` when it is a list.
    tool_calls: Option<Vec<CallObj<'de>>>,
    /// `content` when it is a string.
    content: Option<String>,
    /// `function_call` when it is an object.
    function_call: Option<CallObj<'de>>,
}

impl<'de> Doc<'de> {
    /// The call objects and the response text beside them; `None` when the document has
    /// no call shape at all.
    fn into_items(self) -> Option<(Vec<CallObj<'de>>, String)> {
        match self {
            Doc::List(items) => (!items.is_empty() && items.iter().all(CallObj::is_call_object))
                .then_some((items, String::new())),
            Doc::Object(o) => {
                let o = *o;
                let content = || {
                    o.content
                        .as_deref()
                        .map(str::trim)
                        .unwrap_or("")
                        .to_string()
                };
                if o.tools_call {
                    return Some((vec![o.params.unwrap_or(o.call)], String::new()));
                }
                if let Some(tc) = o.tool_calls {
                    let response = o
                        .content
                        .as_deref()
                        .map(str::trim)
                        .unwrap_or("")
                        .to_string();
                    return Some((tc, response));
                }
                if let Some(fc) = o.function_call {
                    let response = content();
                    return Some((vec![fc], response));
                }
                o.call
                    .is_call_object()
                    .then(|| (vec![o.call], String::new()))
            }
            Doc::Other => None,
        }
    }
}

impl<'de> serde::Deserialize<'de> for Doc<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Doc<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON call document")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut s: A,
            ) -> Result<Doc<'de>, A::Error> {
                let mut items = Vec::with_capacity(s.size_hint().unwrap_or(0).min(64));
                while let Some(c) = s.next_element::<CallObj<'de>>()? {
                    items.push(c);
                }
                Ok(Doc::List(items))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut m: A,
            ) -> Result<Doc<'de>, A::Error> {
                let mut o = DocObject {
                    call: CallObj::object(),
                    ..DocObject::default()
                };
                while let Some(k) = m.next_key::<Key>()? {
                    match k {
                        Key::Method => {
                            o.tools_call = m.next_value::<Value>()?.as_str() == Some("tools/call");
                        }
                        Key::Params => o.params = Some(m.next_value()?),
                        Key::ToolCalls => {
                            o.tool_calls = match m.next_value::<CallList>()? {
                                CallList::List(l) => Some(l),
                                CallList::Other => None,
                            };
                        }
                        Key::ToolCall => {
                            // llama.cpp's generic shape: one call object under `tool_call`.
                            let c: CallObj<'de> = m.next_value()?;
                            if c.is_call_object() && o.tool_calls.is_none() {
                                o.tool_calls = Some(vec![c]);
                            }
                        }
                        Key::Content => {
                            o.content = match m.next_value::<Value>()? {
                                Value::String(c) => Some(c),
                                _ => None,
                            };
                        }
                        Key::FunctionCall => {
                            let fc: CallObj<'de> = m.next_value()?;
                            o.call.set_function_call(fc.is_object());
                            o.function_call = fc.is_object().then_some(fc);
                        }
                        k => o.call.entry(k, &mut m)?,
                    }
                }
                Ok(Doc::Object(Box::new(o)))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Doc<'de>, E> {
                Ok(Doc::Other)
            }
            fn visit_i64<E>(self, _: i64) -> Result<Doc<'de>, E> {
                Ok(Doc::Other)
            }
            fn visit_u64<E>(self, _: u64) -> Result<Doc<'de>, E> {
                Ok(Doc::Other)
            }
            fn visit_f64<E>(self, _: f64) -> Result<Doc<'de>, E> {
                Ok(Doc::Other)
            }
            fn visit_str<E>(self, _: &str) -> Result<Doc<'de>, E> {
                Ok(Doc::Other)
            }
            fn visit_unit<E>(self) -> Result<Doc<'de>, E> {
                Ok(Doc::Other)
            }
        }
        d.deserialize_any(V)
    }
}

/// `tool_calls`: a list of call objects, or something else (then it is no `tool_calls`).
enum CallList<'de> {
    List(Vec<CallObj<'de>>),
    Other,
}

impl<'de> serde::Deserialize<'de> for CallList<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match Doc::deserialize(d)? {
            Doc::List(l) => Ok(CallList::List(l)),
            _ => Ok(CallList::Other),
        }
    }
}

/// The call of one JSON call object; one written with `parameters` instead of
/// `arguments` is Llama 3.1's shape and is marked so.
fn one_call(mut c: CallObj<'_>) -> Result<(String, Args, Format, Option<String>), String> {
    let source = c.source();
    let id = c.take_id();
    let (tool, args) = c.into_call()?;
    Ok((tool, args, source, id))
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

/// The row of the format table (`mod.rs`): name, aliases, how `auto` finds it, its reader.
pub(crate) const ROW: FormatEntry = FormatEntry {
    format: Format::Json,
    name: "json",
    aliases: &["openai", "xlam"],
    auto: Auto::Leading { opens: OPENS },
    reader: Reader::Document(DocumentReader {
        detect,
        read: read_document,
    }),
    exact_keys: false,
    leading: Some(lead),
    // Tool names match loosely, as the other JSON-shaped forms (docs/formats.md).
    names_as_written: true,
    also: &[],
    lesson: super::Lesson::wire(
        super::teach::json_call,
        "To use a tool or skill, answer with only a JSON object {\"name\": <tool name>, \"arguments\": {<parameter>: <value>, …}}, or a JSON list of such objects for several calls, with nothing before or after it. If no action is needed, answer in plain text.",
    ),
    grammar: super::Grammar::Absent(
        "a JSON call document (and OpenAI-shaped JSON) is JSON: both readers read it with serde_json, so no rule restates JSON",
    ),
};
