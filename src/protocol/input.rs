//! The one reading of a request body. Every way in (`tavern call`, `POST /api/invoke`, jobs,
//! MCP `tools/call`, the C ABI, the host API) hands its body here, so a body means the same
//! thing wherever it is sent:
//!
//! - TAM, `<ACTION>` or VCP text (read by [`parse`] in the format asked for);
//! - `{"tool": ID, "args": {…}}` (also `arguments`, `parameters`, `params` or `input`);
//! - MCP `{"name": ID, "arguments": {…}}` or a whole `tools/call` request;
//! - an OpenAI tool call `{"id", "type": "function", "function": {"name", "arguments"}}`
//!   (`arguments` a JSON text or an object), or an assistant message with `tool_calls`;
//! - an Anthropic `tool_use` block `{"type": "tool_use", "id", "name", "input"}`, or an
//!   assistant message whose `content` holds such blocks;
//! - a list of any of these.
//!
//! JSON shapes the JSON reader does not know are rewritten into ones it does (and only
//! then is the body serialized again), so the JSON reader stays the one place that turns
//! a call object into a [`Call`](super::Call).

use serde_json::{json, Map, Value};

use super::{looks_like_json, parse, Format, Parsed};

/// Keys that may hold a `{tool, …}` call's arguments, in the order they are looked for.
const ARG_KEYS: [&str; 5] = ["args", "arguments", "parameters", "params", "input"];

/// Reads `body` as `format` says. With [`Format::Auto`] or [`Format::Json`], a body that is
/// JSON is read as one of the call shapes above; anything else is text.
///
/// ```
/// use tavern::internal::protocol::{input, Format};
/// let openai = r#"{"id": "call_1", "type": "function",
///                  "function": {"name": "system:echo", "arguments": "{\"text\": \"hi\"}"}}"#;
/// let parsed = input::read(openai, Format::Auto);
/// assert_eq!(parsed.calls[0].tool, "system:echo");
/// let plain = input::read(r#"{"tool": "system:echo", "args": {"text": "hi"}}"#, Format::Json);
/// assert_eq!(parsed.calls[0].args, plain.calls[0].args);
/// ```
pub fn read(body: &str, format: Format) -> Parsed {
    if matches!(format, Format::Auto | Format::Json) && looks_like_json(body) {
        if let Ok(v) = serde_json::from_str::<Value>(body) {
            if let Some(rewritten) = normalize(&v) {
                return parse(&rewritten.to_string(), Format::Json);
            }
        } else if let Some(rewritten) = raw_tool_args(body) {
            // Arguments serde_json cannot hold as a value (`1e400`): the JSON reader keeps
            // them as text and says why they cannot be read.
            return parse(&rewritten, Format::Json);
        }
    }
    parse(body, format)
}

/// A `{"tool": ID, "args": …}` object whose arguments do not decode as a value (a number
/// out of range) but whose JSON is well formed, as `{"name", "arguments"}` text with the
/// arguments as written; `None` for anything else.
fn raw_tool_args(body: &str) -> Option<String> {
    use serde_json::value::RawValue;
    let o: std::collections::HashMap<String, &RawValue> = serde_json::from_str(body).ok()?;
    if ["name", "function", "function_call", "type", "method"]
        .iter()
        .any(|k| o.contains_key(*k))
    {
        return None;
    }
    let args = ARG_KEYS.iter().find_map(|k| o.get(*k))?;
    let name = o.get("tool").or_else(|| o.get("id"))?;
    let name: String = serde_json::from_str(name.get()).ok()?;
    Some(format!(
        "{{\"name\": {}, \"arguments\": {}}}",
        json!(name),
        args.get()
    ))
}

/// Reads an already-decoded JSON body (an MCP `tools/call`'s params, a job's call) as
/// [`read`] reads its text.
pub fn read_value(body: &Value) -> Parsed {
    // A body the reader takes as it is is written out as it is, not copied first.
    let text = match normalize(body) {
        Some(rewritten) => rewritten.to_string(),
        None => body.to_string(),
    };
    parse(&text, Format::Json)
}

/// One call given as a tool id and its arguments (MCP `tools/call`), read like a body.
pub fn read_call(tool: &str, args: Value) -> Parsed {
    // The common shape (a named call with an object of arguments) is the call the JSON
    // reader would build from it, without writing it out and reading it back: this is
    // MCP `tools/call`'s hot path. Anything else goes through the reader and its messages.
    let name = tool.trim();
    match args {
        Value::Object(args) if !name.is_empty() => Parsed {
            response_text: String::new(),
            calls: vec![super::Call {
                source: Format::Json,
                ..super::Call::new(name, args)
            }],
            diagnostics: Vec::new(),
        },
        args => read_value(&json!({"name": tool, "arguments": args})),
    }
}

/// The body rewritten into shapes the JSON reader takes, or `None` when it takes it as is.
fn normalize(v: &Value) -> Option<Value> {
    match v {
        Value::Array(items) => {
            let mut changed = false;
            let mut text = Vec::new();
            let mut calls = Vec::with_capacity(items.len());
            let mut has_message = false;
            for item in items {
                if let Some((t, cs)) = message(item) {
                    has_message = true;
                    changed = true;
                    text.extend(t);
                    calls.extend(cs);
                } else if let Some(c) = tool_args(item) {
                    changed = true;
                    calls.push(c);
                } else {
                    calls.push(item.clone());
                }
            }
            if !changed {
                return None;
            }
            Some(if has_message {
                json!({"content": text.join("\n"), "tool_calls": calls})
            } else {
                Value::Array(calls)
            })
        }
        Value::Object(_) => {
            if let Some((t, cs)) = message(v) {
                return Some(json!({"content": t.unwrap_or_default(), "tool_calls": cs}));
            }
            tool_args(v)
        }
        _ => None,
    }
}

/// An assistant message (OpenAI `tool_calls`, Anthropic `content` blocks): its text and its
/// calls, each in a shape the JSON reader takes.
fn message(v: &Value) -> Option<(Option<String>, Vec<Value>)> {
    let o = v.as_object()?;
    if let Some(Value::Array(tc)) = o.get("tool_calls") {
        let text = o.get("content").and_then(Value::as_str).map(str::to_string);
        let calls = tc
            .iter()
            .map(|c| tool_args(c).unwrap_or_else(|| c.clone()))
            .collect();
        return Some((text, calls));
    }
    // Anthropic: `content` is a list of blocks; `tool_use` blocks are the calls.
    let Some(Value::Array(blocks)) = o.get("content") else {
        return None;
    };
    let is_block = |b: &Value, t: &str| b.get("type").and_then(Value::as_str) == Some(t);
    if !blocks.iter().any(|b| is_block(b, "tool_use")) {
        return None;
    }
    let text: Vec<&str> = blocks
        .iter()
        .filter(|b| is_block(b, "text"))
        .filter_map(|b| b.get("text").and_then(Value::as_str))
        .collect();
    let calls = blocks
        .iter()
        .filter(|b| is_block(b, "tool_use"))
        .cloned()
        .collect();
    Some((Some(text.join("\n")), calls))
}

/// `{"tool": ID, "args": …}` (or `{"id": ID, "args": …}` with no other call keys) as
/// `{"name", "arguments"}`; `None` for every other shape.
fn tool_args(v: &Value) -> Option<Value> {
    let o = v.as_object()?;
    if ["name", "function", "function_call", "type", "method"]
        .iter()
        .any(|k| o.contains_key(*k))
    {
        return None;
    }
    let args = ARG_KEYS.iter().find_map(|k| o.get(*k));
    let name = match o.get("tool").and_then(Value::as_str) {
        Some(n) => n,
        // `id` names the tool only beside arguments: an OpenAI call's `id` never does.
        None => o
            .get("id")
            .and_then(Value::as_str)
            .filter(|_| args.is_some())?,
    };
    let mut m = Map::new();
    m.insert("name".into(), json!(name));
    m.insert(
        "arguments".into(),
        args.cloned().unwrap_or_else(|| json!({})),
    );
    Some(Value::Object(m))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(body: &str) -> (String, Value) {
        let p = read(body, Format::Auto);
        assert_eq!(p.calls.len(), 1, "{body}: {:?}", p.diagnostics);
        (
            p.calls[0].tool.clone(),
            Value::from(p.calls[0].args.clone()),
        )
    }

    #[test]
    fn every_shape_reads_the_same_call() {
        let want = ("t:x".to_string(), json!({"a": 1}));
        for body in [
            r#"{"tool": "t:x", "args": {"a": 1}}"#,
            r#"{"id": "t:x", "arguments": {"a": 1}}"#,
            r#"{"name": "t:x", "arguments": {"a": 1}}"#,
            r#"{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "t:x", "arguments": {"a": 1}}}"#,
            r#"{"id": "call_1", "type": "function", "function": {"name": "t:x", "arguments": "{\"a\": 1}"}}"#,
            r#"{"id": "call_1", "type": "function", "function": {"name": "t:x", "arguments": {"a": 1}}}"#,
            r#"{"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "t:x", "arguments": "{\"a\": 1}"}}]}"#,
            r#"{"type": "tool_use", "id": "toolu_1", "name": "t:x", "input": {"a": 1}}"#,
            r#"{"role": "assistant", "content": [{"type": "text", "text": "ok"}, {"type": "tool_use", "id": "toolu_1", "name": "t:x", "input": {"a": 1}}]}"#,
            r#"[{"tool": "t:x", "args": {"a": 1}}]"#,
        ] {
            assert_eq!(one(body), want, "{body}");
        }
    }

    #[test]
    fn lists_mix_shapes_and_messages() {
        let p = read(
            r#"[{"tool": "a:b", "args": {}}, {"name": "c:d", "arguments": {}},
                {"role": "assistant", "tool_calls": [{"id": "call_9", "type": "function", "function": {"name": "e:f", "arguments": "{}"}}]}]"#,
            Format::Auto,
        );
        let tools: Vec<&str> = p.calls.iter().map(|c| c.tool.as_str()).collect();
        assert_eq!(tools, ["a:b", "c:d", "e:f"], "{:?}", p.diagnostics);
    }

    #[test]
    fn unreadable_arguments_are_a_diagnostic() {
        // Issue 36 item 7: `{tool, args}` with a number out of range is a call that cannot
        // be read, said so, not prose.
        for body in [
            r#"{"tool": "t:x", "args": {"text": 1e400}}"#,
            r#"{"name": "t:x", "arguments": {"text": 1e400}}"#,
        ] {
            let p = read(body, Format::Auto);
            assert!(p.calls.is_empty(), "{body}");
            assert!(p.response_text.is_empty(), "{body}: {:?}", p.response_text);
            assert!(p.has_errors(), "{body}: {:?}", p.diagnostics);
        }
    }

    #[test]
    fn text_stays_text() {
        let p = read(
            "<<<[TOOL_REQUEST]>>>\ntool_name:「始」t:x「末」\n<<<[END_TOOL_REQUEST]>>>",
            Format::Auto,
        );
        assert_eq!(p.calls.len(), 1);
        assert_eq!(p.calls[0].source, Format::Vcp);
        let call = read_call("t:x", json!({"a": 1}));
        assert_eq!(call.calls[0].tool, "t:x");
    }
}
