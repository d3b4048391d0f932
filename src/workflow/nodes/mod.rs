//! The built-in `core:*` nodes: constants, text, math, JSON, logic, tool calls, delays and
//! inline scripts.

mod constants;
mod json;
mod logic;
mod math;
mod script;
mod text;
mod tool_call;

pub use script::{ScriptNode, SCRIPT};

use serde_json::{Map, Value};

use super::error::NodeError;
use super::registry::{NodeOutputs, NodeRegistry};

/// Registers every built-in node in `registry`.
pub fn register_all(registry: &NodeRegistry) {
    for result in constants::register(registry)
        .into_iter()
        .chain(text::register(registry))
        .chain(math::register(registry))
        .chain(json::register(registry))
        .chain(logic::register(registry))
        .chain(tool_call::register(registry))
        .chain(script::register(registry))
    {
        // Built-in names are distinct and namespaced; a failure here is a bug caught by
        // the registry test, so it is logged rather than allowed to stop an engine.
        if let Err(e) = result {
            tracing::error!("built-in node: {e}");
        }
    }
}

/// One output named `key`.
pub(crate) fn out(key: &str, v: Value) -> NodeOutputs {
    let mut m = Map::with_capacity(1);
    m.insert(key.to_string(), v);
    m
}

/// A string input (required by the caller's contract).
pub(crate) fn text<'a>(inputs: &'a Map<String, Value>, slot: &str) -> Result<&'a str, NodeError> {
    match inputs.get(slot) {
        Some(Value::String(s)) => Ok(s),
        Some(v) => Err(NodeError::input(slot, format!("expected text, got {v}"))),
        None => Err(NodeError::MissingInput(slot.to_string())),
    }
}

/// A string input that may be absent.
pub(crate) fn text_or<'a>(
    inputs: &'a Map<String, Value>,
    slot: &str,
    default: &'a str,
) -> Result<&'a str, NodeError> {
    match inputs.get(slot) {
        None | Some(Value::Null) => Ok(default),
        Some(_) => text(inputs, slot),
    }
}

/// A number input.
pub(crate) fn number(inputs: &Map<String, Value>, slot: &str) -> Result<f64, NodeError> {
    match inputs.get(slot) {
        Some(Value::Number(n)) => n
            .as_f64()
            .ok_or_else(|| NodeError::input(slot, "number out of range")),
        Some(Value::String(s)) => s
            .trim()
            .parse()
            .map_err(|_| NodeError::input(slot, format!("expected a number, got \"{s}\""))),
        Some(v) => Err(NodeError::input(
            slot,
            format!("expected a number, got {v}"),
        )),
        None => Err(NodeError::MissingInput(slot.to_string())),
    }
}

/// Renders a value as text: strings as they are, everything else as JSON.
pub(crate) fn display(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}
