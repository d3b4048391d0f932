//! Errors as script values.
//!
//! Every failure the host raises into a script — a failed nested `api.tools.call`, a refused
//! permission, a bad argument to an `api` function, a file error — reaches the script as a
//! value with `code` and `message` ([`ScriptError::to_value`]: a Lua table, a Rhai map), so
//! `pcall` / `try … catch` can look at `e.code` instead of parsing text. Lua converts where
//! a script can first see an error (`pcall`, `xpcall`, `coroutine.resume`/`close`); Rhai
//! throws the map. A script that lets it through, or raises the value again, fails with that
//! same error (same code): the value is remembered here and found again by its content. A
//! table or map a script raises itself keeps its content in the tool error's message: its
//! `message` (after `code: ` when it has a code), or its JSON.

use serde_json::Value;

use super::host::HostCore;
use super::ScriptError;

/// At most this many raised errors are remembered per plugin (older ones are dropped).
const KEEP: usize = 64;

impl HostCore {
    /// Remembers `e` (handed to the script as a value) and returns its `{code, message}`.
    pub(crate) fn error_value(&self, e: ScriptError) -> Value {
        let v = e.to_value();
        let mut n = self.nested.lock().unwrap_or_else(|p| p.into_inner());
        if n.len() >= KEEP {
            n.remove(0);
        }
        n.push(e);
        v
    }

    /// The remembered error whose value is `code`/`message`, if any.
    pub(crate) fn raised_error(&self, code: &str, message: &str) -> Option<ScriptError> {
        let n = self.nested.lock().unwrap_or_else(|p| p.into_inner());
        n.iter()
            .rev()
            .find(|e| e.code() == code && e.to_string() == message)
            .cloned()
    }
}

/// The text of an error value a script raised: `code: message`, `message`, or its JSON.
pub(crate) fn error_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Object(m) => match (m.get("code"), m.get("message")) {
            (Some(Value::String(c)), Some(Value::String(msg))) => format!("{c}: {msg}"),
            (_, Some(Value::String(msg))) => msg.clone(),
            _ => v.to_string(),
        },
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::error_text;
    use serde_json::json;

    #[test]
    fn error_values_keep_their_content() {
        let cases = [
            (
                json!({"code": "bad_roll", "message": "too high"}),
                "bad_roll: too high",
            ),
            (json!({"message": "too high"}), "too high"),
            (json!({"a": 1}), "{\"a\":1}"),
            (json!("plain"), "plain"),
            (json!(3), "3"),
        ];
        for (v, want) in cases {
            assert_eq!(error_text(&v), want);
        }
    }
}
