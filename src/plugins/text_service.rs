//! Host service `text.regex_replace`: regular-expression replace with the `regex` crate, whose
//! matching is linear in the text (no catastrophic backtracking), with bounded pattern and
//! result sizes. Bound by `TextTools:regex_replace`.

use std::sync::Arc;

use serde_json::{json, Value};

use super::host_services::{HostServices, ServiceFactory};
use crate::tools::{CallContext, ToolError, ToolFuture, ToolHandler};

/// Name of the service.
pub const NAME: &str = "text.regex_replace";
/// Longest pattern accepted.
pub const MAX_PATTERN: usize = 4096;
/// Largest compiled program (regex `size_limit`).
pub const MAX_PROGRAM: usize = 1 << 20;
/// Largest result text.
pub const MAX_RESULT: usize = 16 << 20;

struct RegexReplace;

/// Replaces up to `limit` matches (0 = all) of `pattern` in `text`.
pub fn regex_replace(
    text: &str,
    pattern: &str,
    replacement: &str,
    limit: usize,
) -> Result<(String, usize), String> {
    if pattern.len() > MAX_PATTERN {
        return Err(format!("the pattern is longer than {MAX_PATTERN} bytes"));
    }
    let re = regex::RegexBuilder::new(pattern)
        .size_limit(MAX_PROGRAM)
        .build()
        .map_err(|e| format!("invalid pattern: {e}"))?;
    let mut count = 0;
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    for caps in re.captures_iter(text) {
        if limit != 0 && count == limit {
            break;
        }
        // Group 0 always exists for a match.
        let Some(m) = caps.get(0) else { continue };
        out.push_str(&text[last..m.start()]);
        caps.expand(replacement, &mut out);
        last = m.end();
        count += 1;
        if out.len() > MAX_RESULT {
            return Err(format!("the result is larger than {MAX_RESULT} bytes"));
        }
    }
    out.push_str(&text[last..]);
    if out.len() > MAX_RESULT {
        return Err(format!("the result is larger than {MAX_RESULT} bytes"));
    }
    Ok((out, count))
}

impl ToolHandler for RegexReplace {
    fn invoke(&self, ctx: CallContext, args: Value) -> ToolFuture {
        Box::pin(async move {
            let text = args
                .get("text")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            let pattern = args
                .get("pattern")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            let replacement = args
                .get("replacement")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            let limit = args.get("limit").and_then(Value::as_u64).unwrap_or(0) as usize;
            // Large texts take CPU time: keep it off the async workers.
            let r = tokio::task::spawn_blocking(move || {
                regex_replace(&text, &pattern, &replacement, limit)
            })
            .await
            .map_err(|e| ToolError::failed(&ctx.tool_id, format!("regex worker failed: {e}")))?;
            match r {
                Ok((text, n)) => Ok(json!({"text": text, "replacements": n})),
                Err(msg) => Err(ToolError::failed(&ctx.tool_id, msg)),
            }
        })
    }
}

/// Adds `text.regex_replace` to `services`.
pub fn register(services: &mut HostServices) {
    let f: ServiceFactory = Arc::new(|_ctx| Arc::new(RegexReplace) as Arc<dyn ToolHandler>);
    services.register(NAME, f);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (text, pattern, replacement, limit, expected (text, count) or error part)
    type Case<'a> = (
        &'a str,
        &'a str,
        &'a str,
        usize,
        Result<(&'a str, usize), &'a str>,
    );

    #[test]
    fn replace_table() {
        let cases: &[Case] = &[
            (
                "2024-05-06",
                r"(\d+)-(\d+)-(\d+)",
                "$3/$2/$1",
                0,
                Ok(("06/05/2024", 1)),
            ),
            ("a a a", "a", "b", 2, Ok(("b b a", 2))),
            ("Hello hello", "(?i)hello", "bye", 0, Ok(("bye bye", 2))),
            ("none", "x", "y", 0, Ok(("none", 0))),
            ("x", "(", "", 0, Err("invalid pattern")),
            // A pattern that makes backtracking engines explode runs in linear time here.
            (
                "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!",
                "(a+)+$",
                "",
                0,
                Ok(("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!", 0)),
            ),
        ];
        for (text, pat, rep, limit, want) in cases {
            match (regex_replace(text, pat, rep, *limit), want) {
                (Ok((t, n)), Ok((wt, wn))) => assert_eq!((t.as_str(), n), (*wt, *wn), "{pat}"),
                (Err(e), Err(w)) => assert!(e.contains(w), "{pat}: {e}"),
                (g, w) => panic!("{pat}: {g:?} vs {w:?}"),
            }
        }
    }
}
