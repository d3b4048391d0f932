//! JSON nodes: `core:JsonParse`, `core:JsonStringify`, `core:JsonGet`, `core:BuildObject`,
//! `core:BuildArray`, `core:SetField`.

use serde_json::{json, Map, Value};

use super::{display, out, text};
use crate::workflow::error::{NodeError, WorkflowError};
use crate::workflow::registry::{NodeDefinition, NodeRegistry};
use crate::workflow::types::{DataFlowType as T, SlotDefinition as S};

pub(super) fn register(r: &NodeRegistry) -> Vec<Result<(), WorkflowError>> {
    vec![
        r.register_fn(
            NodeDefinition::new("core:JsonParse", "Reads JSON text into a value.")
                .category("JSON")
                .input("text", S::new(T::String).required().describe("JSON text."))
                .output("value", S::new(T::Wildcard).describe("The value.")),
            |inputs, _| {
                let t = text(inputs, "text")?;
                let v: Value = serde_json::from_str(t).map_err(|e| {
                    NodeError::input("text", format!("not valid JSON (line {}, column {}): {e}", e.line(), e.column()))
                })?;
                Ok(out("value", v))
            },
        ),
        r.register_fn(
            NodeDefinition::new("core:JsonStringify", "Writes a value as JSON text.")
                .category("JSON")
                .input("value", S::new(T::Wildcard).required().describe("Any value."))
                .input("pretty", S::new(T::Boolean).default_value(json!(false)).describe("Indent the output."))
                .output("text", S::new(T::String).describe("JSON text.")),
            |inputs, _| {
                let v = inputs.get("value").unwrap_or(&Value::Null);
                let pretty = inputs.get("pretty").and_then(Value::as_bool).unwrap_or(false);
                let s = if pretty {
                    serde_json::to_string_pretty(v)
                } else {
                    serde_json::to_string(v)
                }
                .map_err(|e| NodeError::Failed(e.to_string()))?;
                Ok(out("text", Value::String(s)))
            },
        ),
        r.register_fn(
            NodeDefinition::new(
                "core:JsonGet",
                "Reads a value by path: dotted (`user.tags.0`) or a JSON pointer (`/user/tags/0`). \
                 A missing path gives `default`, or fails when there is none.",
            )
            .category("JSON")
            .input("value", S::new(T::Wildcard).required().describe("Object or array to read."))
            .input("path", S::new(T::String).required().describe("Where to read."))
            .input("default", S::new(T::Wildcard).describe("Value when the path is missing."))
            .output("value", S::new(T::Wildcard).describe("The value found.")),
            |inputs, _| {
                let root = inputs.get("value").unwrap_or(&Value::Null);
                let path = match inputs.get("path") {
                    Some(Value::String(s)) => s.clone(),
                    Some(v @ Value::Number(_)) => v.to_string(),
                    Some(v) => return Err(NodeError::input("path", format!("expected text, got {v}"))),
                    None => return Err(NodeError::MissingInput("path".into())),
                };
                match get_path(root, &path) {
                    Some(v) => Ok(out("value", v.clone())),
                    None => match inputs.get("default") {
                        Some(d) => Ok(out("value", d.clone())),
                        None => Err(NodeError::input("path", format!("nothing at '{path}'"))),
                    },
                }
            },
        ),
        r.register_fn(
            NodeDefinition::new(
                "core:BuildObject",
                "Builds an object: `keys` (an array of names) paired in order with the connected \
                 `values`, merged over `base`.",
            )
            .category("JSON")
            .input("keys", S::new(T::Array).required().describe("Field names, in connection order of `values`."))
            .input("values", S::new(T::Wildcard).multi().describe("Field values."))
            .input("base", S::new(T::Object).default_value(json!({})).describe("Fields to start from."))
            .output("object", S::new(T::Object).describe("The object.")),
            |inputs, _| {
                let mut obj = match inputs.get("base") {
                    Some(Value::Object(m)) => m.clone(),
                    _ => Map::new(),
                };
                let keys = match inputs.get("keys") {
                    Some(Value::Array(k)) => k,
                    Some(v) => return Err(NodeError::input("keys", format!("expected an array, got {v}"))),
                    None => return Err(NodeError::MissingInput("keys".into())),
                };
                let values: Vec<Value> = match inputs.get("values") {
                    Some(Value::Array(v)) => v.clone(),
                    Some(v) => vec![v.clone()],
                    None => Vec::new(),
                };
                if keys.len() != values.len() {
                    return Err(NodeError::input(
                        "values",
                        format!("{} keys but {} values are connected", keys.len(), values.len()),
                    ));
                }
                for (k, v) in keys.iter().zip(values) {
                    obj.insert(display(k), v);
                }
                Ok(out("object", Value::Object(obj)))
            },
        ),
        r.register_fn(
            NodeDefinition::new("core:BuildArray", "Builds an array from every connected value, in connection order.")
                .category("JSON")
                .input("items", S::new(T::Wildcard).multi().describe("The items."))
                .output("array", S::new(T::Array).describe("The array.")),
            |inputs, _| {
                let a = match inputs.get("items") {
                    Some(Value::Array(v)) => v.clone(),
                    Some(v) => vec![v.clone()],
                    None => Vec::new(),
                };
                Ok(out("array", Value::Array(a)))
            },
        ),
        r.register_fn(
            NodeDefinition::new("core:SetField", "Returns `object` with field `key` set to `value`.")
                .category("JSON")
                .input("object", S::new(T::Object).default_value(json!({})).describe("Object to extend."))
                .input("key", S::new(T::String).required().describe("Field name."))
                .input("value", S::new(T::Wildcard).required().describe("Field value."))
                .output("object", S::new(T::Object).describe("The object.")),
            |inputs, _| {
                let mut obj = match inputs.get("object") {
                    Some(Value::Object(m)) => m.clone(),
                    Some(v) => return Err(NodeError::input("object", format!("expected an object, got {v}"))),
                    None => Map::new(),
                };
                let key = text(inputs, "key")?;
                obj.insert(key.to_string(), inputs.get("value").cloned().unwrap_or(Value::Null));
                Ok(out("object", Value::Object(obj)))
            },
        ),
    ]
}

/// Reads `path` (a JSON pointer, or dotted as the world state's paths are) from `root`.
pub(crate) fn get_path<'a>(root: &'a Value, path: &str) -> Option<&'a Value> {
    if path.starts_with('/') {
        return root.pointer(path);
    }
    crate::store::get_path(root, path)
}
