//! What callers see of the tools: the JSON list, the prompt manual and the success
//! Observation, all generated from the one [`ToolDefinition`](super::ToolDefinition).

use std::fmt::Write as _;
use std::sync::Arc;

use serde_json::{json, Map, Value};

use super::Tool;

/// The Observation line for a successful call (seed 002 §5.1):
/// `Observation: Tool ReadWorldStateTool executed successfully. Result: sunny`.
/// A string result is written bare; any other value as compact JSON.
pub fn success_observation(tool: &str, value: &Value) -> String {
    match value {
        Value::String(s) => format!("Observation: Tool {tool} executed successfully. Result: {s}"),
        other => format!("Observation: Tool {tool} executed successfully. Result: {other}"),
    }
}

impl Tool {
    /// The tool as JSON: `id`, `wireName`, `displayName`, `description`, `parameters`,
    /// `annotations` (when set), `implementationType`, `examples` (when set).
    pub fn to_json(&self) -> Value {
        let d = &self.definition;
        let mut m = Map::new();
        m.insert("id".into(), json!(d.id));
        m.insert("wireName".into(), json!(self.wire_name()));
        m.insert(
            "displayName".into(),
            json!(d.display_name.as_deref().unwrap_or(&d.id)),
        );
        m.insert("description".into(), json!(d.description));
        m.insert("parameters".into(), d.parameters.clone());
        if let Some(a) = &d.annotations {
            m.insert("annotations".into(), a.clone());
        }
        m.insert("implementationType".into(), json!(d.implementation.kind()));
        if !d.examples.is_empty() {
            m.insert("examples".into(), Value::Array(d.examples.clone()));
        }
        Value::Object(m)
    }

    /// The tool's entry in a prompt manual:
    ///
    /// ```text
    /// - Tool ID: system:random_int
    ///   - Description: A random integer between min and max, both included.
    ///   - Parameters:
    ///     - min (integer, required): Smallest value.
    /// ```
    pub fn manual_entry(&self) -> String {
        let d = &self.definition;
        let mut s = String::new();
        let _ = writeln!(s, "- Tool ID: {}", d.id);
        if !d.description.is_empty() {
            let _ = writeln!(s, "  - Description: {}", one_line(&d.description));
        }
        let props = d.parameters.get("properties").and_then(Value::as_object);
        match props {
            Some(props) if !props.is_empty() => {
                let required: Vec<&str> = d
                    .parameters
                    .get("required")
                    .and_then(Value::as_array)
                    .map(|r| r.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                let _ = writeln!(s, "  - Parameters:");
                for (name, p) in props {
                    let mut facts = vec![type_label(p)];
                    facts.push(if required.contains(&name.as_str()) {
                        "required".into()
                    } else {
                        "optional".into()
                    });
                    if let Some(d) = p.get("default").or_else(|| p.get("defaultValue")) {
                        facts.push(format!("default {d}"));
                    }
                    let desc = p.get("description").and_then(Value::as_str).unwrap_or("");
                    if desc.is_empty() {
                        let _ = writeln!(s, "    - {name} ({})", facts.join(", "));
                    } else {
                        let _ =
                            writeln!(s, "    - {name} ({}): {}", facts.join(", "), one_line(desc));
                    }
                }
            }
            _ => {
                let _ = writeln!(s, "  - Parameters: none");
            }
        }
        s
    }
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn type_label(p: &Value) -> String {
    if let Some(e) = p.get("enum").and_then(Value::as_array) {
        let opts: Vec<String> = e.iter().map(Value::to_string).collect();
        return format!("one of {}", opts.join(", "));
    }
    match p.get("type") {
        Some(Value::String(t)) => match (t.as_str(), p.get("items").and_then(|i| i.get("type"))) {
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

/// The manual for a list of tools, one entry after another.
pub(crate) fn manual(tools: &[Arc<Tool>]) -> String {
    tools.iter().map(|t| t.manual_entry()).collect()
}
