//! Errors as script values.
//!
//! A failed nested `api.tools.call` reaches the script as a value with `code` and `message`
//! (a Lua table raised with `error`, a Rhai map thrown), so `pcall` / `try … catch` can look
//! at `e.code` instead of parsing text. A script that lets it through fails with that same
//! tool error (same code), as before. A table or map a script raises itself keeps its
//! content in the tool error's message: its `message` (after `code: ` when it has a code),
//! or its JSON.

use serde_json::Value;

use super::host::HostCore;
use crate::tools::ToolError;

/// At most this many nested errors are remembered per plugin (older ones are dropped).
const KEEP: usize = 64;

impl HostCore {
    /// Remembers `e` (handed to the script as a value) and returns its `{code, message}`.
    pub(crate) fn nested_value(&self, e: ToolError) -> Value {
        let v = serde_json::json!({"code": e.code(), "message": e.to_string()});
        let mut n = self.nested.lock().unwrap_or_else(|p| p.into_inner());
        if n.len() >= KEEP {
            n.remove(0);
        }
        n.push(e);
        v
    }

    /// The remembered tool error whose value is `code`/`message`, if any.
    pub(crate) fn nested_error(&self, code: &str, message: &str) -> Option<ToolError> {
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
