//! Constants: `core:String`, `core:Number`, `core:Integer`, `core:Boolean`, `core:Json`.
//! The value is the node's `inputValues.value` (or an edge, which makes it a typed relay).

use serde_json::{json, Value};

use super::out;
use crate::workflow::error::{NodeError, WorkflowError};
use crate::workflow::registry::{NodeDefinition, NodeRegistry};
use crate::workflow::types::{DataFlowType as T, SlotDefinition as S};

pub(super) fn register(r: &NodeRegistry) -> Vec<Result<(), WorkflowError>> {
    let consts: [(&str, T, Value, &str); 5] = [
        ("core:String", T::String, json!(""), "A constant text."),
        ("core:Number", T::Float, json!(0.0), "A constant number."),
        (
            "core:Integer",
            T::Integer,
            json!(0),
            "A constant whole number.",
        ),
        (
            "core:Boolean",
            T::Boolean,
            json!(false),
            "A constant true/false.",
        ),
        (
            "core:Json",
            T::Wildcard,
            Value::Null,
            "A constant JSON value (object, array, anything).",
        ),
    ];
    consts
        .into_iter()
        .map(|(ty, flow, default, desc)| {
            let def = NodeDefinition::new(ty, desc)
                .category("Constants")
                .input(
                    "value",
                    S::new(flow).default_value(default).describe("The value."),
                )
                .output("value", S::new(flow).describe("The value."));
            r.register_fn(def, move |inputs, _| {
                let v = inputs.get("value").cloned().unwrap_or(Value::Null);
                let fits = match flow {
                    T::String => v.is_string(),
                    T::Float => v.is_number(),
                    T::Integer => v.is_i64() || v.is_u64(),
                    T::Boolean => v.is_boolean(),
                    _ => true,
                };
                if !fits {
                    return Err(NodeError::input(
                        "value",
                        format!("expected {flow}, got {v}"),
                    ));
                }
                Ok(out("value", v))
            })
        })
        .collect()
}
