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
}

impl std::str::FromStr for ManualStyle {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "action" | "xml" => Ok(ManualStyle::Action),
            "tam" => Ok(ManualStyle::Tam),
            "openai" => Ok(ManualStyle::Openai),
            "anthropic" => Ok(ManualStyle::Anthropic),
            other => Err(format!(
                "unknown manual style '{other}': expected tam, action, openai or anthropic"
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

/// An example value for a parameter: its default, first enum value, first example, or a
/// placeholder of its type.
fn example_value(p: &Value) -> Value {
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
    if let Some(e) = p
        .get("examples")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        return e.clone();
    }
    match p.get("type").and_then(Value::as_str) {
        Some("integer") => json!(1),
        Some("number") => json!(1.5),
        Some("boolean") => json!(true),
        Some("array") => json!(["..."]),
        Some("object") => json!({"key": "value"}),
        _ => json!("..."),
    }
}

/// The example arguments of `t`: each parameter with its example value, in schema order.
fn example_args(t: &Tool) -> Vec<Arg<'_>> {
    params(t)
        .into_iter()
        .map(|p| (p.name, example_value(p.schema)))
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

/// The manual's closing section: how to call in `calls`, then how results come back.
pub fn how_to_call(calls: CallFormat) -> String {
    format!("{}\n\n{RESULTS_NOTE}", calls.lesson().how)
}

/// How results come back (issue 24): written into every manual, so the model knows that
/// only an unindented `Observation:` line is a result (`tools::frame_observation`).
pub const RESULTS_NOTE: &str = "Each call's result comes back to you as an Observation that starts a line: `Observation: Tool <id> executed successfully. Result: …` or `Observation: Error - …`. A result of several lines goes on in lines indented by four spaces, and in those lines a line starting with `Observation:` is written `\\Observation:`: it is text of that result, not another Observation.\n";

/// One tool as OpenAI or Anthropic tool JSON.
pub fn tool_json(t: &Tool, style: ManualStyle) -> Value {
    let d = &t.definition;
    match style {
        ManualStyle::Anthropic => json!({
            "name": t.wire_name(),
            "description": d.description,
            "input_schema": d.parameters,
        }),
        _ => json!({
            "type": "function",
            "function": {
                "name": t.wire_name(),
                "description": d.description,
                "parameters": d.parameters,
            }
        }),
    }
}
