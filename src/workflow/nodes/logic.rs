//! Logic nodes: `core:Compare` and `core:If`.

use std::sync::Arc;

use serde_json::{json, Value};

use super::{out, text_or, Regexes};
use crate::workflow::error::{NodeError, WorkflowError};
use crate::workflow::registry::{NodeDefinition, NodeRegistry};
use crate::workflow::types::{DataFlowType as T, SlotDefinition as S};

const OPS: [&str; 8] = ["==", "!=", "<", "<=", ">", ">=", "contains", "matches"];

pub(super) fn register(r: &NodeRegistry, regexes: &Arc<Regexes>) -> Vec<Result<(), WorkflowError>> {
    let regexes = regexes.clone();
    vec![
        r.register_fn(
            NodeDefinition::new(
                "core:Compare",
                "Compares `a` with `b`: ==, != (JSON equality, 1 == 1.0), <, <=, >, >= (numbers or \
                 texts), contains (text, array or object key), matches (regex on text).",
            )
            .category("Logic")
            .input("a", S::new(T::Wildcard).required().describe("Left side."))
            .input("b", S::new(T::Wildcard).describe("Right side."))
            .input(
                "op",
                S::new(T::String)
                    .default_value(json!("=="))
                    .options(OPS.iter().map(|o| json!(o)))
                    .describe("The comparison."),
            )
            .output("result", S::new(T::Boolean).describe("The answer.")),
            move |inputs, _| {
                let a = inputs.get("a").unwrap_or(&Value::Null);
                let b = inputs.get("b").unwrap_or(&Value::Null);
                let op = text_or(inputs, "op", "==")?;
                Ok(out("result", Value::Bool(compare(a, b, op, &regexes)?)))
            },
        ),
        r.register_fn(
            NodeDefinition::new(
                "core:If",
                "Selects `then` when `condition` is truthy, else `else` (false, null, 0, \"\", [] \
                 and {} are falsy).",
            )
            .category("Logic")
            .input("condition", S::new(T::Wildcard).required().describe("The test."))
            .input("then", S::new(T::Wildcard).describe("Value when true."))
            .input("else", S::new(T::Wildcard).describe("Value when false."))
            .output("value", S::new(T::Wildcard).describe("The selected value."))
            .output("condition", S::new(T::Boolean).describe("The test as a boolean.")),
            |inputs, _| {
                let c = truthy(inputs.get("condition").unwrap_or(&Value::Null));
                let pick = if c { "then" } else { "else" };
                let mut m = out("condition", Value::Bool(c));
                if let Some(v) = inputs.get(pick) {
                    m.insert("value".into(), v.clone());
                }
                Ok(m)
            },
        ),
    ]
}

/// JSON truthiness.
pub(crate) fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

fn compare(a: &Value, b: &Value, op: &str, regexes: &Regexes) -> Result<bool, NodeError> {
    let num = |v: &Value| v.as_f64();
    let eq = match (num(a), num(b)) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    };
    let ord = || -> Result<std::cmp::Ordering, NodeError> {
        match (a, b) {
            (Value::Number(_), Value::Number(_)) => num(a)
                .zip(num(b))
                .and_then(|(x, y)| x.partial_cmp(&y))
                .ok_or_else(|| NodeError::input("b", "numbers cannot be ordered")),
            (Value::String(x), Value::String(y)) => Ok(x.cmp(y)),
            _ => Err(NodeError::input(
                "b",
                format!("'{op}' needs two numbers or two texts, got {a} and {b}"),
            )),
        }
    };
    use std::cmp::Ordering::*;
    Ok(match op {
        "==" | "eq" => eq,
        "!=" | "ne" => !eq,
        "<" | "lt" => ord()? == Less,
        "<=" | "le" => ord()? != Greater,
        ">" | "gt" => ord()? == Greater,
        ">=" | "ge" => ord()? != Less,
        "contains" => match (a, b) {
            (Value::String(x), Value::String(y)) => x.contains(y.as_str()),
            (Value::Array(x), _) => x.contains(b),
            (Value::Object(x), Value::String(k)) => x.contains_key(k),
            _ => false,
        },
        "matches" => match (a, b) {
            (Value::String(x), Value::String(p)) => regexes
                .get(p)
                .map_err(|e| NodeError::input("b", format!("bad regex: {e}")))?
                .is_match(x),
            _ => return Err(NodeError::input("b", "'matches' needs a text and a regex")),
        },
        other => {
            return Err(NodeError::input(
                "op",
                format!(
                    "unknown comparison '{other}'; use one of {}",
                    OPS.join(", ")
                ),
            ))
        }
    })
}
