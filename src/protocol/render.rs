//! From calls back to TAM text (the inverse of the TAM reader).
//!
//! What TAM cannot carry (there is no escaping in TAM, rules 4–6):
//! - a value with a `「末」` followed, on its line and inside the value, by nothing but
//!   spaces and at most one comma and then a line break, a `key:「始」` or the end
//!   marker — that `「末」` would close the value;
//! - a value whose last line (after its first) begins with `key:「始」` (the renderer's
//!   `「末」` would stand on a pair line, which does not close a value, rule 6);
//! - a tool id with surrounding whitespace (ids are trimmed);
//! - keys that are not TAM keys, or that TAM reads as something else (`command`,
//!   `tool_name`, a numbered command in a plain call, `on_error` in a chain step);
//! - non-string values.
//!
//! Everything else is carried, including values with `「末」` mid-line, `#` lines, bare
//! `\r`, other lines that begin with `key:「始」` (their `「末」`s included), and start or end
//! markers on lines of their own: after a value that holds an end-marker line or a pair
//! line, the renderer writes the comment line `# <|[END_TOOL]|>`, so the reader's rule-6
//! look-ahead finds another end marker before any start marker and keeps the value
//! whole.

use serde_json::Value;

use super::chain::{is_tool_key, key_is, split_step};
use super::error::RenderError;
use super::lex::{is_key_char, line_break, match_ci, match_pair_start, skip_ws, CLOSE, M, TAM_END};
use super::types::Call;

/// Why `value` cannot be written between `「始」` and `「末」`, if it cannot.
/// Also says whether it holds an end-marker line or a pair line (after either, the
/// comment line with the end marker must follow, rule 6's look-ahead).
pub(crate) fn value_problem(value: &str) -> Result<bool, &'static str> {
    let s = value.as_bytes();
    let mut needs_end_line = false;
    let mut line = 0;
    let mut first = true;
    loop {
        let next = memchr::memchr2(b'\n', b'\r', &s[line..]).map(|i| line + i);
        let line_end = next.unwrap_or(s.len());
        let q = skip_ws(s, line);
        // A line after the first that begins a pair is text of the value, its 「末」s
        // included, as long as a later line closes it (rule 6).
        let pair_line = !first && matches!(match_pair_start(s, q, true), M::Yes(_));
        if pair_line {
            needs_end_line = true;
            if next.is_none() {
                return Err("the last line begins with key:「始」, so the closing 「末」 would be on a pair line and not close the value");
            }
        } else {
            if !first && matches!(match_ci(s, q, TAM_END, true), M::Yes(_)) {
                needs_end_line = true;
            }
            // A `「末」` that would close the value early.
            let mut from = line;
            while let Some(i) = memchr::memmem::find(&s[from..line_end], CLOSE) {
                let c = from + i;
                from = c + CLOSE.len();
                let mut p = skip_ws(s, from);
                if p < s.len() && s[p] == b',' {
                    p = skip_ws(s, p + 1);
                }
                if p >= s.len() {
                    // Followed by the renderer's own 「末」: not a closer.
                    continue;
                }
                if matches!(line_break(s, p, true), M::Yes(_)) {
                    return Err("a 「末」 at the end of a line would close the value");
                }
                if matches!(match_ci(s, p, TAM_END, true), M::Yes(_)) {
                    return Err("a 「末」 followed by the end marker would close the value");
                }
                if matches!(match_pair_start(s, p, true), M::Yes(_)) {
                    return Err("a 「末」 followed by key:「始」 would close the value");
                }
            }
        }
        let Some(b) = next else {
            break;
        };
        let M::Yes(e) = line_break(s, b, true) else {
            break;
        };
        line = e;
        first = false;
    }
    Ok(needs_end_line)
}

fn check_key(call: usize, key: &str) -> Result<(), RenderError> {
    if key.is_empty() || !key.chars().all(is_key_char) {
        return Err(RenderError::Key {
            call,
            key: key.to_string(),
        });
    }
    Ok(())
}

fn push_pair(out: &mut String, key: &str, value: &str, end_line: bool) {
    out.push_str(key);
    out.push_str(":「始」");
    out.push_str(value);
    out.push_str("「末」\n");
    if end_line {
        out.push_str("# <|[END_TOOL]|>\n");
    }
}

fn value_text(strict: bool, call: usize, key: &str, v: &Value) -> Result<String, RenderError> {
    match v {
        Value::String(s) => Ok(s.clone()),
        _ if strict => Err(RenderError::NotString {
            call,
            key: key.to_string(),
        }),
        other => Ok(other.to_string()),
    }
}

fn tool_value(call: usize, key: &str, tool: &str) -> Result<bool, RenderError> {
    if tool.is_empty() || tool.trim() != tool {
        return Err(RenderError::ToolId {
            call,
            tool: tool.to_string(),
        });
    }
    value_problem(tool).map_err(|why| RenderError::Value {
        call,
        key: key.to_string(),
        why,
    })
}

/// Renders calls as TAM text, or says which call cannot be carried and why.
///
/// Calls with `step: None` become one block each. Consecutive calls with the same
/// `block` and `Some(step)` become one chain block (`command1`, `content1`, …), with
/// `on_error_N` written when a step continues after a failure.
pub fn try_render_tam(calls: &[Call]) -> Result<String, RenderError> {
    render(calls, true)
}

/// Renders calls as TAM text; values TAM cannot carry are written as they are (the
/// text then reads back differently). Use [`try_render_tam`] to be told instead.
pub fn render_tam(calls: &[Call]) -> String {
    // With `strict == false` every check is skipped, so this cannot fail.
    render(calls, false).unwrap_or_default()
}

/// Writes one parameter pair `key` (the argument `arg` as the call spells it, for errors),
/// checking in strict mode that TAM can carry the value.
fn push_value(
    out: &mut String,
    strict: bool,
    call: usize,
    arg: &str,
    key: &str,
    v: &Value,
) -> Result<(), RenderError> {
    let v = value_text(strict, call, arg, v)?;
    let end = chk(
        strict,
        value_problem(&v).map_err(|why| RenderError::Value {
            call,
            key: arg.to_string(),
            why,
        }),
        false,
    )?;
    push_pair(out, key, &v, end);
    Ok(())
}

/// Passes `r` through when `strict`; otherwise turns any error into `fallback`.
fn chk<T>(strict: bool, r: Result<T, RenderError>, fallback: T) -> Result<T, RenderError> {
    match r {
        Ok(v) => Ok(v),
        Err(e) if strict => Err(e),
        Err(_) => Ok(fallback),
    }
}

fn render(calls: &[Call], strict: bool) -> Result<String, RenderError> {
    let mut out = String::new();
    let mut i = 0;
    while i < calls.len() {
        let c = &calls[i];
        out.push_str("<|[REQUEST_TOOL]|>\n");
        match c.step {
            None => {
                let end = chk(strict, tool_value(i, "command", &c.tool), false)?;
                push_pair(&mut out, "command", &c.tool, end);
                for (k, v) in &c.args {
                    if strict {
                        check_key(i, k)?;
                        if is_tool_key(k) {
                            return Err(RenderError::ReservedKey {
                                call: i,
                                key: k.clone(),
                                reads_as: "the tool id",
                            });
                        }
                        if matches!(split_step(k), Some((base, _)) if is_tool_key(base)) {
                            return Err(RenderError::ReservedKey {
                                call: i,
                                key: k.clone(),
                                reads_as: "a numbered command (a chain)",
                            });
                        }
                    }
                    push_value(&mut out, strict, i, k, k, v)?;
                }
                i += 1;
            }
            Some(_) => {
                let block = c.block;
                let mut last: Option<u32> = None;
                while i < calls.len() && calls[i].block == block {
                    let c = &calls[i];
                    let Some(n) = c.step else { break };
                    if strict && last.is_some_and(|l| n <= l) {
                        return Err(RenderError::StepOrder { call: i, step: n });
                    }
                    last = Some(n);
                    let end = chk(strict, tool_value(i, "command", &c.tool), false)?;
                    push_pair(&mut out, &format!("command{n}"), &c.tool, end);
                    if c.on_error == super::types::OnError::Continue {
                        push_pair(&mut out, &format!("on_error_{n}"), "continue", false);
                    }
                    for (k, v) in &c.args {
                        if strict {
                            check_key(i, k)?;
                            if is_tool_key(k) {
                                return Err(RenderError::ReservedKey {
                                    call: i,
                                    key: k.clone(),
                                    reads_as: "the step's tool id",
                                });
                            }
                            if key_is(k, "onerror") {
                                return Err(RenderError::ReservedKey {
                                    call: i,
                                    key: k.clone(),
                                    reads_as: "the step's on_error setting",
                                });
                            }
                        }
                        let last_char = k.chars().last().unwrap_or('x');
                        let key = if last_char.is_ascii_digit() || last_char == '_' {
                            format!("{k}_{n}")
                        } else {
                            format!("{k}{n}")
                        };
                        push_value(&mut out, strict, i, k, &key, v)?;
                    }
                    i += 1;
                }
            }
        }
        out.push_str("<|[END_TOOL]|>\n");
    }
    Ok(out)
}
