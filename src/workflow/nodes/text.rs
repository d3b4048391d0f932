//! Text nodes: `core:Template`, `core:Concat`, `core:Split`, `core:Join`, `core:Slice`,
//! `core:RegexReplace`.

use serde_json::{json, Map, Value};

use std::sync::Arc;

use super::{display, number, out, text, text_or, Regexes};
use crate::workflow::error::{NodeError, WorkflowError};
use crate::workflow::registry::{NodeDefinition, NodeRegistry};
use crate::workflow::types::{DataFlowType as T, SlotDefinition as S};

pub(super) fn register(r: &NodeRegistry, regexes: &Arc<Regexes>) -> Vec<Result<(), WorkflowError>> {
    let split_regexes = regexes.clone();
    let replace_regexes = regexes.clone();
    vec![
        r.register_fn(
            NodeDefinition::new(
                "core:Template",
                "Fills `{{name}}` placeholders (dotted paths allowed: `{{user.name}}`) from the \
                 `vars` object. A placeholder with no value is an error.",
            )
            .category("Text")
            .input(
                "template",
                S::new(T::String)
                    .required()
                    .describe("Text with {{placeholders}}."),
            )
            .input(
                "vars",
                S::new(T::Object)
                    .default_value(json!({}))
                    .describe("Values by name."),
            )
            .output("text", S::new(T::String).describe("The filled text.")),
            |inputs, _| {
                let t = text(inputs, "template")?;
                let empty = Map::new();
                let vars = match inputs.get("vars") {
                    Some(Value::Object(m)) => m,
                    None | Some(Value::Null) => &empty,
                    Some(v) => {
                        return Err(NodeError::input(
                            "vars",
                            format!("expected an object, got {v}"),
                        ))
                    }
                };
                Ok(out("text", Value::String(fill(t, vars)?)))
            },
        ),
        r.register_fn(
            NodeDefinition::new(
                "core:Concat",
                "Joins every connected value into one text (non-text values as JSON).",
            )
            .category("Text")
            .input(
                "items",
                S::new(T::Wildcard)
                    .multi()
                    .describe("Values to join, in connection order."),
            )
            .input(
                "separator",
                S::new(T::String)
                    .default_value(json!(""))
                    .describe("Put between items."),
            )
            .output("text", S::new(T::String).describe("The joined text.")),
            |inputs, _| {
                let sep = text_or(inputs, "separator", "")?;
                let items = match inputs.get("items") {
                    Some(Value::Array(a)) => a.iter().map(display).collect::<Vec<_>>(),
                    Some(v) => vec![display(v)],
                    None => Vec::new(),
                };
                Ok(out("text", Value::String(items.join(sep))))
            },
        ),
        r.register_fn(
            NodeDefinition::new(
                "core:Split",
                "Splits text by a separator (or a regular expression when `regex` is true); \
                 empty pieces are dropped when `skipEmpty` is true.",
            )
            .category("Text")
            .input(
                "text",
                S::new(T::String).required().describe("Text to split."),
            )
            .input(
                "separator",
                S::new(T::String)
                    .default_value(json!("\n"))
                    .describe("Where to cut."),
            )
            .input(
                "regex",
                S::new(T::Boolean)
                    .default_value(json!(false))
                    .describe("Treat the separator as a regex."),
            )
            .input(
                "skipEmpty",
                S::new(T::Boolean)
                    .default_value(json!(true))
                    .describe("Drop empty pieces."),
            )
            .output("items", S::new(T::Array).describe("The pieces."))
            .output("count", S::new(T::Integer).describe("How many pieces.")),
            move |inputs, _| {
                let t = text(inputs, "text")?;
                let sep = text_or(inputs, "separator", "\n")?;
                let skip = inputs
                    .get("skipEmpty")
                    .and_then(Value::as_bool)
                    .unwrap_or(true);
                let pieces: Vec<String> = if inputs
                    .get("regex")
                    .and_then(Value::as_bool)
                    .unwrap_or(false)
                {
                    let re = split_regexes
                        .get(sep)
                        .map_err(|e| NodeError::input("separator", format!("bad regex: {e}")))?;
                    re.split(t).map(str::to_string).collect()
                } else if sep.is_empty() {
                    t.chars().map(String::from).collect()
                } else {
                    t.split(sep).map(str::to_string).collect()
                };
                let items: Vec<Value> = pieces
                    .into_iter()
                    .filter(|p| !(skip && p.trim().is_empty()))
                    .map(Value::String)
                    .collect();
                let mut m = out("count", json!(items.len()));
                m.insert("items".into(), Value::Array(items));
                Ok(m)
            },
        ),
        r.register_fn(
            NodeDefinition::new("core:Join", "Joins the items of an array into one text.")
                .category("Text")
                .input("items", S::new(T::Array).required().describe("The items."))
                .input(
                    "separator",
                    S::new(T::String)
                        .default_value(json!(" "))
                        .describe("Put between items."),
                )
                .output("text", S::new(T::String).describe("The joined text.")),
            |inputs, _| {
                let sep = text_or(inputs, "separator", " ")?;
                match inputs.get("items") {
                    Some(Value::Array(a)) => Ok(out(
                        "text",
                        Value::String(a.iter().map(display).collect::<Vec<_>>().join(sep)),
                    )),
                    Some(v) => Err(NodeError::input(
                        "items",
                        format!("expected an array, got {v}"),
                    )),
                    None => Err(NodeError::MissingInput("items".into())),
                }
            },
        ),
        r.register_fn(
            NodeDefinition::new(
                "core:Slice",
                "Takes items [start, end) of an array, or characters of a text. Negative \
                 positions count from the end; a missing end means to the end.",
            )
            .category("Text")
            .input(
                "value",
                S::new(T::Wildcard)
                    .required()
                    .describe("An array or a text."),
            )
            .input(
                "start",
                S::new(T::Integer)
                    .default_value(json!(0))
                    .describe("First position."),
            )
            .input(
                "end",
                S::new(T::Integer).describe("Position after the last."),
            )
            .output("value", S::new(T::Wildcard).describe("The slice.")),
            |inputs, _| {
                let start = number(inputs, "start").unwrap_or(0.0) as i64;
                let end = inputs
                    .get("end")
                    .filter(|v| !v.is_null())
                    .map(|_| number(inputs, "end"))
                    .transpose()?;
                let range = |len: usize| {
                    let fix = |p: i64| {
                        if p < 0 {
                            (len as i64 + p).max(0) as usize
                        } else {
                            (p as usize).min(len)
                        }
                    };
                    let s = fix(start);
                    let e = end.map(|e| fix(e as i64)).unwrap_or(len);
                    (s, e.max(s))
                };
                match inputs.get("value") {
                    Some(Value::Array(a)) => {
                        let (s, e) = range(a.len());
                        Ok(out("value", Value::Array(a[s..e].to_vec())))
                    }
                    Some(Value::String(t)) => {
                        let chars: Vec<char> = t.chars().collect();
                        let (s, e) = range(chars.len());
                        Ok(out("value", Value::String(chars[s..e].iter().collect())))
                    }
                    Some(v) => Err(NodeError::input(
                        "value",
                        format!("expected an array or text, got {v}"),
                    )),
                    None => Err(NodeError::MissingInput("value".into())),
                }
            },
        ),
        r.register_fn(
            NodeDefinition::new(
                "core:RegexReplace",
                "Replaces matches of a regular expression; `$1`/`${name}` in the replacement \
                 refer to groups. `limit` 0 replaces every match.",
            )
            .category("Text")
            .input(
                "text",
                S::new(T::String).required().describe("Text to change."),
            )
            .input(
                "pattern",
                S::new(T::String)
                    .required()
                    .describe("Regular expression (Rust regex syntax)."),
            )
            .input(
                "replacement",
                S::new(T::String)
                    .default_value(json!(""))
                    .describe("Replacement."),
            )
            .input(
                "limit",
                S::new(T::Integer)
                    .default_value(json!(0))
                    .describe("Most replacements (0: all)."),
            )
            .output("text", S::new(T::String).describe("The changed text.")),
            move |inputs, _| {
                let t = text(inputs, "text")?;
                let p = text(inputs, "pattern")?;
                let rep = text_or(inputs, "replacement", "")?;
                let limit = number(inputs, "limit").unwrap_or(0.0).max(0.0) as usize;
                let re = replace_regexes
                    .get(p)
                    .map_err(|e| NodeError::input("pattern", format!("bad regex: {e}")))?;
                Ok(out(
                    "text",
                    Value::String(re.replacen(t, limit, rep).into_owned()),
                ))
            },
        ),
    ]
}

/// Fills `{{path}}` placeholders from `vars`.
pub(crate) fn fill(template: &str, vars: &Map<String, Value>) -> Result<String, NodeError> {
    let mut outp = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find("{{") {
        outp.push_str(&rest[..open]);
        let after = &rest[open + 2..];
        let Some(close) = after.find("}}") else {
            outp.push_str(&rest[open..]);
            return Ok(outp);
        };
        let name = after[..close].trim();
        let value = lookup(vars, name).ok_or_else(|| {
            let known: Vec<&str> = vars.keys().map(String::as_str).collect();
            NodeError::input(
                "vars",
                format!(
                    "template placeholder '{{{{{name}}}}}' has no value (vars has: {})",
                    known.join(", ")
                ),
            )
        })?;
        outp.push_str(&display(value));
        rest = &after[close + 2..];
    }
    outp.push_str(rest);
    Ok(outp)
}

fn lookup<'a>(vars: &'a Map<String, Value>, path: &str) -> Option<&'a Value> {
    if let Some(v) = vars.get(path) {
        return Some(v);
    }
    let mut parts = path.split('.');
    let mut cur = vars.get(parts.next()?)?;
    for p in parts {
        cur = match cur {
            Value::Object(m) => m.get(p)?,
            Value::Array(a) => a.get(p.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(cur)
}
