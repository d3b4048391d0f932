//! Manuals generated from the inventory's tool definitions (seed 000 §6.2, seed 002 §4.2):
//! Tools and Skills apart, each with its parameters and an example call, in TAM,
//! `<ACTION>`, OpenAI or Anthropic tool-JSON style.

use std::fmt::Write as _;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::call_format::{Arg, CallFormat};
use super::profile::Inventory;
use crate::tools::Tool;

/// How a manual is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ManualStyle {
    /// Seed 002 §4.2: `` `<Tool>` `` entries and `<ACTION>` examples.
    #[default]
    Action,
    /// Seed 000 §6.2: `Tool ID:` entries and TAM examples.
    Tam,
    /// OpenAI `tools` (function definitions) as JSON.
    Openai,
    /// Anthropic `tools` (`input_schema`) as JSON.
    Anthropic,
    /// For small models: one line per tool, one example call and one paragraph on how to
    /// call, in a few hundred tokens.
    Short,
}

impl std::str::FromStr for ManualStyle {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "action" | "xml" => Ok(ManualStyle::Action),
            "tam" => Ok(ManualStyle::Tam),
            "openai" => Ok(ManualStyle::Openai),
            "anthropic" => Ok(ManualStyle::Anthropic),
            "short" => Ok(ManualStyle::Short),
            other => Err(format!(
                "unknown manual style '{other}': expected tam, action, openai, anthropic or short"
            )),
        }
    }
}

impl ManualStyle {
    /// True for the JSON styles (tool definitions rather than prose).
    pub fn is_json(self) -> bool {
        matches!(self, ManualStyle::Openai | ManualStyle::Anthropic)
    }
}

struct Param<'a> {
    name: &'a str,
    schema: &'a Value,
    required: bool,
}

fn params(t: &Tool) -> Vec<Param<'_>> {
    let p = &t.definition.parameters;
    let required: Vec<&str> = p
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    p.get("properties")
        .and_then(Value::as_object)
        .map(|props| {
            props
                .iter()
                .map(|(name, schema)| Param {
                    name,
                    schema,
                    required: required.contains(&name.as_str()),
                })
                .collect()
        })
        .unwrap_or_default()
}

fn type_label(p: &Value) -> String {
    if let Some(e) = p.get("enum").and_then(Value::as_array) {
        let opts: Vec<String> = e.iter().map(Value::to_string).collect();
        return format!("one of {}", opts.join(", "));
    }
    match p.get("type") {
        Some(Value::String(t)) => match (t.as_str(), p.pointer("/items/type")) {
            ("array", Some(Value::String(it))) => format!("array of {it}"),
            _ => t.clone(),
        },
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join(" | "),
        _ => "any".into(),
    }
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Placeholders for numbers a schema says nothing about, taken in turn by a tool's
/// numeric parameters, so that two of them (`min`, `max`) never show the same value.
const PLACEHOLDER_INTS: [i64; 4] = [1, 10, 3, 100];

/// A number's bounds from `minimum`/`maximum` and their exclusive forms (a whole number
/// inside an exclusive bound for integers).
fn bounds(p: &Value, integer: bool) -> (Option<f64>, Option<f64>) {
    let step = if integer { 1.0 } else { 0.5 };
    let get = |k: &str| p.get(k).and_then(Value::as_f64);
    let lo = get("minimum").or_else(|| get("exclusiveMinimum").map(|v| v + step));
    let hi = get("maximum").or_else(|| get("exclusiveMaximum").map(|v| v - step));
    (lo, hi)
}

/// An example value for a parameter, from its schema's own values: its default, first enum
/// member, `const` or first example; else a value of its type inside its bounds (the
/// `nth` numeric parameter of the tool takes the `nth` placeholder, so a range's ends
/// differ); else a placeholder of its type.
fn example_value(p: &Value, nth: &mut usize) -> Value {
    if let Some(d) = p.get("default") {
        return d.clone();
    }
    if let Some(e) = p
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        return e.clone();
    }
    if let Some(c) = p.get("const") {
        return c.clone();
    }
    if let Some(e) = p
        .get("examples")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        return e.clone();
    }
    let ty = match p.get("type") {
        Some(Value::String(t)) => Some(t.as_str()),
        // `["integer", "null"]`: the first type that is not null.
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).find(|t| *t != "null"),
        _ => None,
    };
    match ty {
        Some(t @ ("integer" | "number")) => {
            let integer = t == "integer";
            let k = *nth % PLACEHOLDER_INTS.len();
            *nth += 1;
            let mut v = PLACEHOLDER_INTS[k] as f64 + if integer { 0.0 } else { 0.5 };
            let (lo, hi) = bounds(p, integer);
            if let Some(lo) = lo {
                v = v.max(lo);
            }
            if let Some(hi) = hi {
                v = v.min(hi);
            }
            if integer {
                json!(v.round() as i64)
            } else {
                json!(v)
            }
        }
        Some("boolean") => json!(true),
        Some("array") => match p.get("items").filter(|i| i.is_object()) {
            Some(items) => json!([example_value(items, nth)]),
            None => json!(["..."]),
        },
        Some("object") => match p.get("properties").and_then(Value::as_object) {
            Some(props) if !props.is_empty() => {
                let required: Vec<&str> = p
                    .get("required")
                    .and_then(Value::as_array)
                    .map(|r| r.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                let mut m = serde_json::Map::new();
                for (k, s) in props {
                    if required.is_empty() || required.contains(&k.as_str()) {
                        m.insert(k.clone(), example_value(s, nth));
                    }
                }
                Value::Object(m)
            }
            _ => json!({"key": "value"}),
        },
        _ => match p.get("format").and_then(Value::as_str) {
            Some("date-time") => json!("2025-06-01T18:00:00Z"),
            Some("date") => json!("2025-06-01"),
            Some("time") => json!("18:00:00"),
            Some("email") => json!("guest@example.com"),
            Some("uri") | Some("url") => json!("https://example.com/"),
            _ => json!("..."),
        },
    }
}

/// The example arguments of `t`: each parameter with its example value, in schema order.
fn example_args(t: &Tool) -> Vec<Arg<'_>> {
    let mut nth = 0;
    params(t)
        .into_iter()
        .map(|p| (p.name, example_value(p.schema, &mut nth)))
        .collect()
}

/// The example call of `t` in `format`, built from its definition.
pub fn example(t: &Tool, format: CallFormat) -> String {
    format.example(t.id(), t.wire_name(), &example_args(t))
}

/// The `<ACTION>` example call of `t` (manuals and the web explorer share it).
pub fn action_example(t: &Tool) -> String {
    example(t, CallFormat::ACTION)
}

/// The TAM example call of `t` (manuals and the web explorer share it).
pub fn tam_example(t: &Tool) -> String {
    example(t, CallFormat::TAM)
}

fn indent(text: &str, by: &str) -> String {
    text.lines().map(|l| format!("{by}{l}\n")).collect()
}

/// The name `t` is called by in `calls`: its id, or its wire name for formats that write those.
fn called_as(t: &Tool, calls: CallFormat) -> &str {
    if calls.uses_wire_names() {
        t.wire_name()
    } else {
        t.id()
    }
}

fn action_entry(t: &Tool, calls: CallFormat) -> String {
    let d = &t.definition;
    let mut s = format!(
        "*   `<{}>`: {}\n",
        called_as(t, calls),
        one_line(&d.description)
    );
    let ps = params(t);
    if ps.is_empty() {
        s.push_str("    *   Parameters: none\n");
    } else {
        s.push_str("    *   Parameters:\n");
        for p in &ps {
            let req = if p.required { "required" } else { "optional" };
            let desc = p
                .schema
                .get("description")
                .and_then(Value::as_str)
                .unwrap_or("");
            let _ = write!(
                s,
                "        *   `<{}>` ({}, {req})",
                p.name,
                type_label(p.schema)
            );
            if desc.is_empty() {
                s.push('\n');
            } else {
                let _ = writeln!(s, ": {}", one_line(desc));
            }
        }
    }
    s.push_str("    *   Example:\n");
    s.push_str(&indent(&example(t, calls), "        "));
    s
}

fn tam_entry(t: &Tool, calls: CallFormat) -> String {
    let mut s = t.manual_entry();
    if calls.uses_wire_names() {
        // The entry names the tool as the format writes it.
        let id_line = format!("- Tool ID: {}\n", t.id());
        if let Some(rest) = s.strip_prefix(&id_line) {
            s = format!("- Tool: {}\n{rest}", t.wire_name());
        }
    }
    s.push_str("  - Example:\n");
    s.push_str(&indent(&example(t, calls), "    "));
    s
}

/// Writes the manual of `inv` in `style`, teaching the style's own call format (`<ACTION>`
/// for `action`, TAM for `tam`). Text styles follow seed 002 §4.2's layout; JSON styles are
/// a JSON array of tool definitions (wire names, which the inventory accepts).
pub fn render(inv: &Inventory, style: ManualStyle) -> String {
    render_teaching(inv, style, None)
}

/// [`render`] teaching `calls` (an agent's `call_format`): in the text styles every
/// example is a call in that format and the manual ends with how to call in it; `None`
/// teaches the style's own. JSON styles are the same tool definitions whatever `calls` is.
pub fn render_teaching(inv: &Inventory, style: ManualStyle, calls: Option<CallFormat>) -> String {
    // The model-facing list: `node:*` tools only with `tools.list_nodes = true`.
    let tools = inv.manager.model_list();
    let (skills, atomic): (Vec<&Arc<Tool>>, Vec<&Arc<Tool>>) =
        tools.iter().partition(|t| inv.skills.contains(t.id()));
    match style {
        ManualStyle::Openai | ManualStyle::Anthropic => {
            let list = Value::Array(tools.iter().map(|t| tool_json(t, style)).collect());
            // A `Value` always serializes.
            serde_json::to_string_pretty(&list).unwrap_or_default()
        }
        ManualStyle::Short => short(&atomic, &skills, calls.unwrap_or(CallFormat::ACTION)),
        ManualStyle::Action | ManualStyle::Tam => {
            let (entry, own): (fn(&Tool, CallFormat) -> String, CallFormat) =
                if style == ManualStyle::Action {
                    (action_entry, CallFormat::ACTION)
                } else {
                    (tam_entry, CallFormat::TAM)
                };
            let calls = calls.unwrap_or(own);
            let mut s = String::from("You have access to the following tools and skills:\n\n");
            s.push_str("**Tools (direct function calls):**\n\n");
            if atomic.is_empty() {
                s.push_str("(none)\n");
            }
            for t in &atomic {
                s.push_str(&entry(t, calls));
            }
            s.push_str("\n**Skills (workflow executions):**\n\n");
            if skills.is_empty() {
                s.push_str("(none)\n");
            }
            for t in &skills {
                s.push_str(&entry(t, calls));
            }
            s.push('\n');
            s.push_str(&how_to_call(calls));
            s
        }
    }
}

/// The first sentence of a description, on one line.
fn first_sentence(s: &str) -> String {
    let s = one_line(s);
    match s.find(". ") {
        Some(i) => s[..=i].to_string(),
        None => s,
    }
}

/// One tool as a line: `- name(a: integer, b?: one of "x", "y"): What it does.`
fn short_line(t: &Tool, calls: CallFormat) -> String {
    let ps: Vec<String> = params(t)
        .iter()
        .map(|p| {
            let opt = if p.required { "" } else { "?" };
            format!("{}{opt}: {}", p.name, type_label(p.schema))
        })
        .collect();
    format!(
        "- {}({}): {}\n",
        called_as(t, calls),
        ps.join(", "),
        first_sentence(&t.definition.description)
    )
}

/// The short manual ([`ManualStyle::Short`]): a line per tool and skill, the first
/// tool's example call, how to call, and one line on results.
fn short(atomic: &[&Arc<Tool>], skills: &[&Arc<Tool>], calls: CallFormat) -> String {
    let mut s = String::from("Tools:\n");
    for t in atomic.iter().chain(skills) {
        s.push_str(&short_line(t, calls));
    }
    if let Some(t) = atomic.iter().chain(skills).next() {
        s.push_str("\nExample call:\n");
        s.push_str(&example(t, calls));
        s.push('\n');
    }
    s.push('\n');
    s.push_str(calls.lesson().how);
    s.push('\n');
    s.push_str(SHORT_RESULTS_NOTE);
    s
}

/// How results come back, in one line, for [`ManualStyle::Short`].
pub const SHORT_RESULTS_NOTE: &str =
    "Each result comes back as a line `Observation: …`; indented lines under it belong to it.\n";

/// The manual's closing section: how to call in `calls`, then how results come back.
pub fn how_to_call(calls: CallFormat) -> String {
    format!("{}\n\n{RESULTS_NOTE}", calls.lesson().how)
}

/// How results come back (issue 24): written into every manual, so the model knows that
/// only an unindented `Observation:` line is a result (`tools::frame_observation`).
pub const RESULTS_NOTE: &str = "Each call's result comes back to you as an Observation that starts a line: `Observation: Tool <id> executed successfully. Result: …` or `Observation: Error - …`. A result of several lines goes on in lines indented by four spaces, and in those lines a line starting with `Observation:` is written `\\Observation:`: it is text of that result, not another Observation.\n";

/// The provider shapes of a tool-list entry. [`provider_tool_json`] is the one writer of both:
/// an agent's native tool list ([`tool_json`]) and the server's OpenAI/Anthropic exports
/// (`server/export.rs`) call it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProviderShape {
    /// OpenAI function calling: `{"type": "function", "function": {name, description,
    /// parameters}}`.
    OpenAi,
    /// Anthropic tool use: `{name, description, input_schema}`.
    Anthropic,
}

/// One tool in a provider's shape, with `parameters` as its schema (an agent sends the
/// definition's own; the server's exports send the closed `input_schema`).
pub fn provider_tool_json(t: &Tool, shape: ProviderShape, parameters: Value) -> Value {
    let d = &t.definition;
    match shape {
        ProviderShape::Anthropic => json!({
            "name": t.wire_name(),
            "description": d.description,
            "input_schema": parameters,
        }),
        ProviderShape::OpenAi => json!({
            "type": "function",
            "function": {
                "name": t.wire_name(),
                "description": d.description,
                "parameters": parameters,
            }
        }),
    }
}

/// One tool as OpenAI or Anthropic tool JSON (Anthropic for [`ManualStyle::Anthropic`],
/// OpenAI otherwise), with the definition's own parameter schema.
pub fn tool_json(t: &Tool, style: ManualStyle) -> Value {
    let shape = match style {
        ManualStyle::Anthropic => ProviderShape::Anthropic,
        _ => ProviderShape::OpenAi,
    };
    provider_tool_json(t, shape, t.definition.parameters.clone())
}
