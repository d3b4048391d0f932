//! Command R / R+: `Action:` then a ```` ```json ```` fence holding
//! `[{"tool_name": …, "parameters": {…}}]`. `auto` takes it at the start of the answer
//! (`Action:` and the fence, or the list alone) or as a whole fenced block after a
//! lead-in (`Plan: …`), as the other shapes that could be prose (`lead.rs`).

use serde_json::Value;

use super::lead::Lead;
use super::lit::{self, Lit};
use super::{FormatEntry, Reader};
use crate::protocol::types::{Format, RawDiag, Span};

const HINT: &str = "Write Action: ```json [{\"tool_name\": \"ToolId\", \"parameters\": {…}}] ```.";

/// The row.
pub(crate) const ROW: FormatEntry = FormatEntry {
    leading: Some(lead),
    ..FormatEntry::native(
        Format::CommandR,
        "command_r",
        &["cohere", "command_r_plus", "command_a"],
        Reader::Leading,
        super::Lesson::wire(
            |name, args| {
                format!(
                    "Action: ```json\n[{{\"tool_name\": {}, \"parameters\": {}}}]\n```",
                    serde_json::Value::String(name.into()),
                    super::teach::pretty_inline(args)
                )
            },
            "To use tools or skills, write Action: followed by a ```json fenced block holding a JSON list of calls, each an object with \"tool_name\" and \"parameters\". If no action is needed, answer in plain text.",
        ),
        super::Grammar::Native("command_r"),
    )
};

/// The leading reader.
pub(crate) fn lead(text: &str, from: usize, to: usize) -> Lead {
    let s = text.as_bytes();
    let mut l = Lit::new(s, from, to);
    l.ws();
    // Command R+ plans first (`Plan: …`): the lines before the `Action:` line stay
    // response text.
    let mut prose = Vec::new();
    if !text[l.pos..to].starts_with("Action:") {
        let Some(i) = text[l.pos..to].find("\nAction:") else {
            return Lead::No;
        };
        prose.push((l.pos, l.pos + i));
        l.pos += i + 1;
    }
    let at = l.pos;
    let action = l.eat(b"Action:");
    l.ws();
    let fenced = action && l.eat(b"```");
    if fenced {
        while l.peek().is_some_and(|b| b != b'\n') {
            l.pos += 1;
        }
        l.ws();
    }
    if l.peek() != Some(b'[') {
        return Lead::No;
    }
    let v0 = l.pos;
    let items = match l.value() {
        Ok(Value::Array(a)) => a,
        Ok(_) => return Lead::No,
        Err(e)
            if fenced
                && memchr::memmem::find(&s[v0..to.min(v0 + 200)], b"\"tool_name\"").is_some() =>
        {
            return Lead::Error(lit::value_error(
                e,
                v0,
                to >= text.len(),
                "a command_r call",
                HINT,
            ))
        }
        Err(_) => return Lead::No,
    };
    // A list of objects with `tool_name`, or it is not this shape.
    if items.is_empty()
        || !items
            .iter()
            .all(|i| i.get("tool_name").is_some_and(Value::is_string))
    {
        return Lead::No;
    }
    let mut end = l.pos;
    if fenced {
        l.ws();
        if l.eat(b"```") {
            end = l.pos;
        }
    }
    let span = Span {
        start: at,
        end,
        line: 0,
        column: 0,
    };
    let mut calls = Vec::new();
    for (i, item) in items.into_iter().enumerate() {
        let name = item["tool_name"]
            .as_str()
            .unwrap_or_default()
            .trim()
            .to_string();
        match lit::arguments(item.get("parameters")) {
            Ok(m) if !name.is_empty() => calls.push(lit::call(name, m, Format::CommandR, span, i)),
            Ok(_) => {}
            Err(msg) => {
                return Lead::Error(RawDiag::error(
                    v0,
                    format!("the call to '{name}': {msg}; it was not executed"),
                    HINT.into(),
                ))
            }
        }
    }
    if calls.is_empty() {
        Lead::No
    } else {
        Lead::Calls {
            calls,
            end,
            prose,
            diags: Vec::new(),
        }
    }
}
