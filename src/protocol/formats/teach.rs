//! What a row teaches: how an agent's manual shows one call of a format ([`Lesson`], the
//! `lesson` column of the format table), and the pieces the rows' example writers share.
//! Examples are built from the tools' own definitions (the parameters' defaults, enums,
//! examples or placeholders of their types), never written per tool; what the manual
//! teaches, the format's reader reads back (`agent/call_format.rs` tests it per row).

use serde_json::Value;

/// How a format writes a tool's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Naming {
    /// The tool id as registered (`forge:smelt`, `FileOperator.WriteFile`).
    Id,
    /// The wire name (`forge_smelt`): letters, digits and `_`, what models trained on
    /// function calling write, and a valid identifier for the pythonic form.
    Wire,
}

/// One example argument: the parameter's name and its example value.
pub(crate) type Arg<'a> = (&'a str, Value);

/// How the manual teaches one call format.
#[derive(Debug)]
pub(crate) struct Lesson {
    /// How tool names are written.
    pub naming: Naming,
    /// One call of the tool `name` with `args`, as the model should write it.
    pub example: fn(name: &str, args: &[Arg<'_>]) -> String,
    /// How to call, in a paragraph (several calls, where they go, what else).
    pub how: &'static str,
}

impl Lesson {
    /// A lesson for a format that writes wire names (every native format).
    pub(crate) const fn wire(example: fn(&str, &[Arg<'_>]) -> String, how: &'static str) -> Self {
        Lesson {
            naming: Naming::Wire,
            example,
            how,
        }
    }
}

/// A value as text: a string as itself, anything else as JSON.
pub(crate) fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A value as `<ACTION>` child content: list items as `<item>`, objects as CDATA JSON.
pub(crate) fn xml_value(v: &Value) -> String {
    match v {
        Value::Array(items) => items
            .iter()
            .map(|i| format!("<item>{}</item>", xml_value(i)))
            .collect(),
        Value::Object(_) => format!("<![CDATA[{v}]]>"),
        other => text_of(other),
    }
}

/// `{"name": "x", "<key>": {…}}`, spaced as models write it.
pub(crate) fn json_call_with(name: &str, key: &str, args: &[Arg<'_>]) -> String {
    format!(
        "{{\"name\": {}, \"{key}\": {}}}",
        Value::String(name.into()),
        pretty_inline(args)
    )
}

/// `{"name": "x", "arguments": {…}}`.
pub(crate) fn json_call(name: &str, args: &[Arg<'_>]) -> String {
    json_call_with(name, "arguments", args)
}

/// The arguments as one-line JSON with a space after `:` and `,`.
pub(crate) fn pretty_inline(args: &[Arg<'_>]) -> String {
    if args.is_empty() {
        return "{}".into();
    }
    let inner: Vec<String> = args
        .iter()
        .map(|(k, v)| format!("{}: {}", Value::String((*k).into()), v))
        .collect();
    format!("{{{}}}", inner.join(", "))
}

/// One `<tag name>value</tag>` line per argument, values as text.
pub(crate) fn text_params(args: &[Arg<'_>], open: impl Fn(&str) -> String, close: &str) -> String {
    args.iter()
        .map(|(k, v)| format!("{}{}{close}\n", open(k), text_of(v)))
        .collect()
}

/// One call `name(k=v, …)` with Python literals.
pub(crate) fn python_call(name: &str, args: &[Arg<'_>]) -> String {
    let inner: Vec<String> = args
        .iter()
        .map(|(k, v)| format!("{k}={}", python_literal(v)))
        .collect();
    format!("{name}({})", inner.join(", "))
}

/// A JSON value as the Python literal a model would write.
pub(crate) fn python_literal(v: &Value) -> String {
    match v {
        Value::Null => "None".into(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => {
            let mut out = String::with_capacity(s.len() + 2);
            out.push('\'');
            for c in s.chars() {
                match c {
                    '\\' => out.push_str("\\\\"),
                    '\'' => out.push_str("\\'"),
                    '\n' => out.push_str("\\n"),
                    '\r' => out.push_str("\\r"),
                    '\t' => out.push_str("\\t"),
                    c => out.push(c),
                }
            }
            out.push('\'');
            out
        }
        Value::Array(items) => format!(
            "[{}]",
            items
                .iter()
                .map(python_literal)
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Value::Object(m) => format!(
            "{{{}}}",
            m.iter()
                .map(|(k, v)| format!(
                    "{}: {}",
                    python_literal(&Value::String(k.clone())),
                    python_literal(v)
                ))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// A value as Gemma 4 writes it: strings between `<|"|>` tokens, keys bare.
pub(crate) fn gemma_value(v: &Value) -> String {
    match v {
        Value::String(s) => format!("<|\"|>{s}<|\"|>"),
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(gemma_value).collect::<Vec<_>>().join(",")
        ),
        Value::Object(m) => format!(
            "{{{}}}",
            m.iter()
                .map(|(k, v)| format!("{k}:{}", gemma_value(v)))
                .collect::<Vec<_>>()
                .join(",")
        ),
        other => other.to_string(),
    }
}
