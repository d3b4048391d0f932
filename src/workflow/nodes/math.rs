//! `core:Math`: one node, an `op` input chooses the operation.

use serde_json::{json, Value};

use super::{number, out, text_or};
use crate::workflow::error::{NodeError, WorkflowError};
use crate::workflow::registry::{NodeDefinition, NodeRegistry};
use crate::workflow::types::{DataFlowType as T, SlotDefinition as S};

const OPS: [&str; 9] = [
    "add", "sub", "mul", "div", "mod", "pow", "min", "max", "abs",
];

pub(super) fn register(r: &NodeRegistry) -> Vec<Result<(), WorkflowError>> {
    let def = NodeDefinition::new(
        "core:Math",
        "Arithmetic on two numbers: add, sub, mul, div, mod, pow, min, max, abs (of a). \
         Whole numbers stay whole for add, sub, mul, mod, min, max, abs.",
    )
    .category("Math")
    .input("a", S::new(T::Float).required().describe("First operand."))
    .input(
        "b",
        S::new(T::Float)
            .default_value(json!(0))
            .describe("Second operand."),
    )
    .input(
        "op",
        S::new(T::String)
            .default_value(json!("add"))
            .options(OPS.iter().map(|o| json!(o)))
            .describe("The operation."),
    )
    .output("result", S::new(T::Float).describe("The result."));
    vec![r.register_fn(def, |inputs, _| {
        let op = text_or(inputs, "op", "add")?;
        let a = number(inputs, "a")?;
        let b = if op == "abs" {
            0.0
        } else {
            number(inputs, "b")?
        };
        let ints = |k: &str| inputs.get(k).is_some_and(Value::is_i64);
        let whole = ints("a") && (op == "abs" || ints("b"));
        let r = match op {
            "add" => a + b,
            "sub" => a - b,
            "mul" => a * b,
            "div" | "mod" if b == 0.0 => {
                return Err(NodeError::input("b", "division by zero"));
            }
            "div" => a / b,
            "mod" => a % b,
            "pow" => a.powf(b),
            "min" => a.min(b),
            "max" => a.max(b),
            "abs" => a.abs(),
            other => {
                return Err(NodeError::input(
                    "op",
                    format!("unknown operation '{other}'; use one of {}", OPS.join(", ")),
                ))
            }
        };
        if !r.is_finite() {
            return Err(NodeError::Failed(format!("{op} gave a non-finite result")));
        }
        let v = if whole && op != "div" && op != "pow" && r.abs() < 9.0e15 {
            json!(r as i64)
        } else {
            json!(r)
        };
        Ok(out("result", v))
    })]
}
