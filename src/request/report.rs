//! The [`CallReport`] every run returns, and the JSON `tavern call` prints and
//! `POST /api/invoke`, jobs and the C ABI answer: `{"results": [...], "diagnostics": [...]}`.

use serde_json::{json, Map, Value};

use crate::protocol::{Call, Parsed};
use crate::tools::CallOutcome;

/// What one run produced: what was read and each call's outcome, in order.
#[derive(Debug, Clone, PartialEq)]
pub struct CallReport {
    /// The parse: prose, calls and diagnostics (VCP calls already dispatched).
    pub parsed: Parsed,
    /// One outcome per entry of `parsed.calls`.
    pub outcomes: Vec<CallOutcome>,
}

impl CallReport {
    /// True when nothing failed: no error diagnostic and every call succeeded.
    pub fn ok(&self) -> bool {
        !self.parsed.has_errors() && self.outcomes.iter().all(|o| o.result.is_ok())
    }

    /// True when the text had an error diagnostic or a call failed (`tavern call` then
    /// exits 1).
    pub fn failed(&self) -> bool {
        !self.ok()
    }

    /// The JSON `tavern call` prints: `{"results": [...], "diagnostics": [...]}`. Each
    /// result has `tool` (the canonical id when it resolved), `called_as` (what the caller
    /// wrote, when that differs), `call_id` (the call's id), `step` (chains), `dispatch` (the VCP rule that chose the
    /// tool), `ok`, `value` or `error {code, message}`, and `observation`.
    pub fn to_json(&self) -> Value {
        let results: Vec<Value> = self
            .outcomes
            .iter()
            .enumerate()
            .map(|(i, o)| outcome_json(o, self.parsed.calls.get(i)))
            .collect();
        // A Diagnostic is plain data; serializing it cannot fail.
        let diagnostics =
            serde_json::to_value(&self.parsed.diagnostics).unwrap_or(Value::Array(Vec::new()));
        json!({"results": results, "diagnostics": diagnostics})
    }
}

/// One result as [`CallReport::to_json`] writes it; `call` is the parsed call it came
/// from, when there is one (for `step` and `dispatch`).
pub fn outcome_json(o: &CallOutcome, call: Option<&Call>) -> Value {
    let mut m = Map::new();
    let canonical = o.id.as_deref().unwrap_or(&o.tool);
    m.insert("tool".into(), json!(canonical));
    if canonical != o.tool {
        m.insert("called_as".into(), json!(o.tool));
    }
    // The call's id (as the input gave it, or `call_N`), so a client can answer with
    // `tool_call_id`.
    if let Some(id) = call.and_then(|c| c.id.as_ref()) {
        m.insert("call_id".into(), json!(id));
    }
    if let Some(s) = call.and_then(|c| c.step) {
        m.insert("step".into(), json!(s));
    }
    // Which VCP dispatch rule chose the tool (tools::vcp), when one did.
    if let Some(d) = call.and_then(|c| c.dispatch.as_ref()) {
        m.insert("dispatch".into(), json!(d));
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
    if !o.warnings.is_empty() {
        m.insert("warnings".into(), json!(o.warnings));
    }
    m.insert("observation".into(), json!(o.observation()));
    Value::Object(m)
}
