//! The JSON report of a batch of calls, exactly as `tavern call` prints it and
//! `POST /api/invoke` answers: `{"results": [...], "diagnostics": [...]}`.

use serde_json::{json, Map, Value};

use crate::protocol::{Format, Parsed};
use crate::tools::{CallOutcome, Caller};
use crate::Engine;

/// One result: `tool`, `step` (chains), `ok`, `value` or `error {code, message}`, and the
/// `observation` line a model would read.
pub fn outcome_json(o: &CallOutcome, step: Option<u32>) -> Value {
    let mut m = Map::new();
    m.insert("tool".into(), json!(o.tool));
    if let Some(s) = step {
        m.insert("step".into(), json!(s));
    }
    match &o.result {
        Ok(v) => {
            m.insert("ok".into(), json!(true));
            m.insert("value".into(), v.clone());
        }
        Err(e) => {
            m.insert("ok".into(), json!(false));
            m.insert(
                "error".into(),
                json!({"code": e.code(), "message": e.to_string()}),
            );
        }
    }
    m.insert("observation".into(), json!(o.observation()));
    Value::Object(m)
}

/// A parsed text and its outcomes as one report.
#[derive(Debug, Clone, PartialEq)]
pub struct CallReport {
    /// `{"results": [...], "diagnostics": [...]}`.
    pub json: Value,
    /// True when the text had an error diagnostic or a call failed.
    pub failed: bool,
}

/// Builds the report of `parsed` run as `outcomes` (one outcome per parsed call, in order).
pub fn call_report(parsed: &Parsed, outcomes: &[CallOutcome]) -> CallReport {
    let results: Vec<Value> = outcomes
        .iter()
        .enumerate()
        .map(|(i, o)| {
            let call = parsed.calls.get(i);
            let mut v = outcome_json(o, call.and_then(|c| c.step));
            // Which VCP dispatch rule chose the tool (tools::vcp), when one did.
            if let (Some(d), Some(m)) = (call.and_then(|c| c.dispatch.as_ref()), v.as_object_mut())
            {
                m.insert("dispatch".into(), json!(d));
            }
            v
        })
        .collect();
    // A Diagnostic is plain data; serializing it cannot fail.
    let diagnostics = serde_json::to_value(&parsed.diagnostics).unwrap_or(Value::Array(Vec::new()));
    CallReport {
        json: json!({"results": results, "diagnostics": diagnostics}),
        failed: parsed.has_errors() || outcomes.iter().any(|o| o.result.is_err()),
    }
}

impl Engine {
    /// Parses `text`, runs its calls and shapes the outcome as `tavern call` prints it.
    pub async fn call_report(&self, text: &str, format: Format, caller: Caller) -> CallReport {
        let (parsed, outcomes) = self.call_text(text, format, caller).await;
        call_report(&parsed, &outcomes)
    }
}
