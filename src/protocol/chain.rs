//! From the pairs of one TAM block to calls: plain calls (rule 12) and chains (rule 13),
//! with the errors of rule 14; and the pair helpers VCP blocks (`formats/vcp.rs`) share.

use serde_json::{Map, Value};

use super::block::BlockKind;
use super::locate::Locator;
use super::types::{Call, Format, OnError, RawDiag, RawPair, Span};

/// `file_path`, `filePath`, `FILEPATH` → `filepath` (rule 3).
pub(crate) fn normalize_key(key: &str) -> String {
    key.chars()
        .filter(|&c| c != '_')
        .flat_map(char::to_lowercase)
        .collect()
}

/// True when `key` normalises (rule 3) to `target` (lowercase ASCII without `_`),
/// without allocating.
pub(crate) fn key_is(key: &str, target: &str) -> bool {
    let mut t = target.bytes();
    for b in key.bytes().filter(|&b| b != b'_') {
        match t.next() {
            Some(c) if b.to_ascii_lowercase() == c => {}
            _ => return false,
        }
    }
    t.next().is_none()
}

/// True for the keys that name the tool: `command` and `tool_name` (any case/underscores).
pub(crate) fn is_tool_key(base: &str) -> bool {
    key_is(base, "command") || key_is(base, "toolname")
}

/// Splits a chain suffix: `content2` → (`content`, 2), `command_10` → (`command`, 10).
/// Returns `None` when the key does not end in ASCII digits. The step is `None` inside
/// `Some` when the number does not fit in a `u32`.
pub(crate) fn split_step(key: &str) -> Option<(&str, Option<u32>)> {
    let bytes = key.as_bytes();
    let mut i = bytes.len();
    while i > 0 && bytes[i - 1].is_ascii_digit() {
        i -= 1;
    }
    if i == bytes.len() {
        return None;
    }
    let num = key[i..].parse::<u32>().ok();
    let mut base = &key[..i];
    if let Some(b) = base.strip_suffix('_') {
        base = b;
    }
    Some((base, num))
}

/// True when `a` and `b` are one key by rule 3 (case and `_` ignored), without allocating.
fn same_name(a: &str, b: &str) -> bool {
    if a.is_ascii() && b.is_ascii() {
        if !a.contains('_') && !b.contains('_') {
            return a.eq_ignore_ascii_case(b);
        }
        let mut x = a.bytes().filter(|&c| c != b'_');
        let mut y = b.bytes().filter(|&c| c != b'_');
        loop {
            match (x.next(), y.next()) {
                (None, None) => return true,
                (Some(p), Some(q)) if p.eq_ignore_ascii_case(&q) => {}
                _ => return false,
            }
        }
    }
    a.chars()
        .filter(|&c| c != '_')
        .flat_map(char::to_lowercase)
        .eq(b.chars().filter(|&c| c != '_').flat_map(char::to_lowercase))
}

/// A key's identity: its name by rule 3 and, in a chain, its step number (`content1`,
/// `content_1` and `Content01` are one key), as a string for blocks with many pairs.
fn key_identity(key: &str, chain: bool) -> String {
    match split_step(key) {
        Some((base, Some(n))) if chain => format!("{}\u{0}{n}", normalize_key(base)),
        _ => normalize_key(key),
    }
}

/// A value is one value: a block that names a key twice (by rule 3, and in a chain per
/// step) runs nothing. Each repeated key is an error at its second place that names the
/// lines of both. Returns true when there was one.
pub(crate) fn repeated_keys(
    s: &str,
    pairs: &[RawPair],
    span: Span,
    chain: bool,
    diags: &mut Vec<RawDiag>,
) -> bool {
    let mut repeats: Vec<(usize, usize)> = Vec::new();
    if pairs.len() < 2 {
        return false;
    }
    if !chain && pairs.len() <= 16 {
        for j in 1..pairs.len() {
            let kj = text(s, pairs[j].key);
            if let Some(i) = (0..j).find(|&i| same_name(text(s, pairs[i].key), kj)) {
                repeats.push((i, j));
            }
        }
    } else if pairs.len() <= 16 {
        // Each key's base name and step, split once.
        let mut split: [(&str, Option<u32>); 16] = [("", None); 16];
        for (p, slot) in pairs.iter().zip(split.iter_mut()) {
            let k = text(s, p.key);
            *slot = match split_step(k) {
                Some((base, Some(n))) if chain => (base, Some(n)),
                _ => (k, None),
            };
        }
        for j in 1..pairs.len() {
            let (bj, nj) = split[j];
            if let Some(i) = (0..j).find(|&i| {
                let (bi, ni) = split[i];
                match (ni, nj) {
                    (Some(x), Some(y)) => x == y && same_name(bi, bj),
                    _ => same_name(text(s, pairs[i].key), text(s, pairs[j].key)),
                }
            }) {
                repeats.push((i, j));
            }
        }
    } else {
        let mut seen = std::collections::HashMap::with_capacity(pairs.len());
        for (j, q) in pairs.iter().enumerate() {
            if let Some(&i) = seen.get(&key_identity(text(s, q.key), chain)) {
                repeats.push((i, j));
            } else {
                seen.insert(key_identity(text(s, q.key), chain), j);
            }
        }
    }
    if repeats.is_empty() {
        return false;
    }
    // The lines of the keys, counted forward from the block's first line, once.
    let mut loc = Locator::starting(span.start, span.line, span.column);
    let lines: Vec<u32> = pairs
        .iter()
        .map(|p| loc.locate(s.as_bytes(), p.key.0).0)
        .collect();
    for (i, j) in repeats {
        let (a, b) = (text(s, pairs[i].key), text(s, pairs[j].key));
        let spelled = if a == b {
            String::new()
        } else {
            format!(", first as '{a}'")
        };
        diags.push(RawDiag::error(
            pairs[j].key.0,
            format!(
                "'{b}' is given twice in one block (lines {} and {}{spelled}); a block that names a key twice runs nothing",
                lines[i], lines[j]
            ),
            "Give each key once per block. If a value holds a line shaped like key:「始」…「末」, end the value with 「末」 on a line of its own so the whole text stays one value.".into(),
        ));
    }
    true
}

struct Step<'a> {
    number: u32,
    tool: Option<(&'a str, usize)>,
    args: Vec<(&'a str, &'a str, usize)>,
    on_error: Option<(&'a str, usize)>,
    first_key: usize,
}

pub(crate) fn text(s: &str, r: (usize, usize)) -> &str {
    // Pair ranges always lie on char boundaries (they come from the scanner).
    s.get(r.0..r.1).unwrap_or("")
}

fn parse_on_error(v: &str, at: usize, key: &str, diags: &mut Vec<RawDiag>) -> OnError {
    match v.trim().to_ascii_lowercase().as_str() {
        "continue" => OnError::Continue,
        "stop" => OnError::Stop,
        _ => {
            diags.push(RawDiag::warning(
                at,
                format!("'{key}' is '{}', which is neither 'stop' nor 'continue'; 'stop' is used", v.trim()),
                "Write on_error_N:「始」continue「末」 to run later steps after a failure, or stop (the default).".into(),
            ));
            OnError::Stop
        }
    }
}

/// Turns the pairs of one TAM block into calls (a plain call, or a chain when a tool key
/// is numbered). On any error the block yields no calls.
pub(crate) fn build_calls(
    s: &str,
    pairs: &[RawPair],
    block: usize,
    span: Span,
    kind: BlockKind,
    diags: &mut Vec<RawDiag>,
    out: &mut Vec<Call>,
) {
    let is_chain = pairs
        .iter()
        .any(|p| matches!(split_step(text(s, p.key)), Some((base, _)) if is_tool_key(base)));
    if repeated_keys(s, pairs, span, is_chain, diags) {
        return;
    }
    if is_chain {
        out.extend(build_chain(s, pairs, block, span, kind, diags));
    } else if let Some(call) = build_plain(s, pairs, block, span, kind, diags) {
        out.push(call);
    }
}

/// The pairs of a one-call block: the tool key (where `is_tool` says so) and the arguments.
/// A second tool key is an error (`second` words it: message, hint); a repeated key is
/// refused before (`repeated_keys`). Returns the tool and its place, the arguments, and
/// whether an error was reported.
pub(crate) fn read_pairs<'s>(
    s: &'s str,
    pairs: &[RawPair],
    diags: &mut Vec<RawDiag>,
    is_tool: impl Fn(&str) -> bool,
    second: impl Fn(&str, &str) -> (String, String),
) -> (Option<(&'s str, usize)>, Map<String, Value>, bool) {
    let mut tool: Option<(&str, usize)> = None;
    let mut args = Map::with_capacity(pairs.len().saturating_sub(1));
    let mut failed = false;
    for p in pairs {
        let key = text(s, p.key);
        let value = text(s, p.value);
        if is_tool(key) {
            if let Some((first, _)) = tool {
                let (message, hint) = second(key, first);
                diags.push(RawDiag::error(p.key.0, message, hint));
                failed = true;
            } else {
                tool = Some((value.trim(), p.key.0));
            }
            continue;
        }
        args.insert(key.to_string(), Value::String(value.to_string()));
    }
    (tool, args, failed)
}

/// How a single-call block names its tool: the key, what its value is, an example, the
/// format it came in.
pub(crate) struct Named {
    pub key: &'static str,
    pub noun: &'static str,
    pub example: &'static str,
    pub source: Format,
}

impl Named {
    /// The call of a block whose tool key was found: refused when the name is empty or the
    /// pairs failed (the diagnostics are already in `diags`).
    #[allow(clippy::too_many_arguments)] // The parts of one block, read by the caller.
    pub(crate) fn single_call(
        &self,
        tool: &str,
        at: usize,
        args: Map<String, Value>,
        failed: bool,
        span: Span,
        block: usize,
        diags: &mut Vec<RawDiag>,
    ) -> Option<Call> {
        if tool.is_empty() {
            diags.push(RawDiag::error(
                at,
                format!(
                    "'{}' is empty, so the block names no tool; it was not executed",
                    self.key
                ),
                format!(
                    "Write the tool {} between 「始」 and 「末」, e.g. {}.",
                    self.noun, self.example
                ),
            ));
            return None;
        }
        if failed {
            return None;
        }
        Some(Call {
            tool: tool.to_string(),
            args: args.into(),
            span,
            block,
            step: None,
            on_error: OnError::Stop,
            source: self.source,
            dispatch: None,
            id: None,
            texts: None,
        })
    }
}

fn build_plain(
    s: &str,
    pairs: &[RawPair],
    block: usize,
    span: Span,
    kind: BlockKind,
    diags: &mut Vec<RawDiag>,
) -> Option<Call> {
    let block_name = kind.name();
    let (tool, args, failed) = read_pairs(s, pairs, diags, is_tool_key, |key, first| {
        (
            format!("'{key}' names a second tool in one block (the first was '{first}'); none of this block's calls run"),
            "Use one command per block, or number them (command1, command2, …) to chain them.".into(),
        )
    });
    let Some((tool, at)) = tool else {
        diags.push(RawDiag::error(
            span.start,
            format!(
                "{block_name} block has no 'command' key, so it names no tool; it was not executed"
            ),
            "Add command:「始」ToolId「末」 as the first line of the block.".into(),
        ));
        return None;
    };
    let named = Named {
        key: "command",
        noun: "id",
        example: "command:「始」FileOperator.WriteFile「末」",
        source: kind.format(),
    };
    named.single_call(tool, at, args, failed, span, block, diags)
}

fn build_chain(
    s: &str,
    pairs: &[RawPair],
    block: usize,
    span: Span,
    kind: BlockKind,
    diags: &mut Vec<RawDiag>,
) -> Vec<Call> {
    let mut steps: Vec<Step<'_>> = Vec::new();
    let mut by_number: std::collections::HashMap<u32, usize> = std::collections::HashMap::new();
    let mut common: Vec<(&str, &str)> = Vec::new();
    let mut default_on_error: Option<(&str, usize)> = None;
    let mut failed = false;
    for p in pairs {
        let key = text(s, p.key);
        let value = text(s, p.value);
        let at = p.key.0;
        match split_step(key) {
            Some((base, number)) => {
                let Some(number) = number else {
                    diags.push(RawDiag::error(
                        at,
                        format!("the step number of '{key}' is too large"),
                        "Number chain steps 1, 2, 3, …".into(),
                    ));
                    failed = true;
                    continue;
                };
                if base.is_empty() {
                    diags.push(RawDiag::error(
                        at,
                        format!("key '{key}' is only a number; in a chain it needs a name before the step number"),
                        "Write the parameter name followed by its step number, e.g. content2.".into(),
                    ));
                    failed = true;
                    continue;
                }
                let idx = match by_number.get(&number) {
                    Some(&i) => i,
                    None => {
                        by_number.insert(number, steps.len());
                        steps.push(Step {
                            number,
                            tool: None,
                            args: Vec::new(),
                            on_error: None,
                            first_key: at,
                        });
                        steps.len() - 1
                    }
                };
                let st = &mut steps[idx];
                if is_tool_key(base) {
                    if st.tool.is_some() {
                        diags.push(RawDiag::error(
                            at,
                            format!("step {number} names its tool twice ('{key}'); none of this block's calls run"),
                            "Give each step exactly one commandN.".into(),
                        ));
                        failed = true;
                    }
                    st.tool = Some((value.trim(), at));
                } else if key_is(base, "onerror") {
                    st.on_error = Some((value, at));
                } else {
                    st.args.push((base, value, at));
                }
            }
            None => {
                if is_tool_key(key) {
                    diags.push(RawDiag::error(
                        at,
                        format!("plain '{key}' is mixed with numbered commands in one block; none of this block's calls run"),
                        "Number every command (command1, command2, …), or use one plain command per block.".into(),
                    ));
                    failed = true;
                } else if key.len() > 7 && key[..7].eq_ignore_ascii_case("common_") {
                    let param = &key[7..];
                    if key_is(param, "onerror") {
                        default_on_error = Some((value, at));
                    } else {
                        common.push((param, value));
                    }
                } else {
                    if !key_is(key, "requestid") && !key_is(key, "comment") {
                        diags.push(RawDiag::error(
                            at,
                            format!("'{key}' has no step number in a chained block, so no step owns it; none of this block's calls run"),
                            format!("Write it as '{key}1' for step 1, or 'common_{key}' to give it to every step. Parameters whose names end in digits cannot be used in a chain."),
                        ));
                        failed = true;
                    }
                }
            }
        }
    }
    for st in &steps {
        if st.tool.is_none() {
            let n = st.number;
            diags.push(RawDiag::error(
                st.first_key,
                format!("parameter for step {n} has no command{n}; none of this block's calls run"),
                format!("Add command{n}:「始」ToolId「末」, or renumber the parameter to a step that has a command. Parameters whose names end in digits need the plain (unchained) form."),
            ));
            failed = true;
        } else if st.tool.is_some_and(|(t, _)| t.is_empty()) {
            diags.push(RawDiag::error(
                st.tool.map(|(_, a)| a).unwrap_or(span.start),
                format!(
                    "command{} is empty, so step {} names no tool; none of this block's calls run",
                    st.number, st.number
                ),
                "Write the tool id between 「始」 and 「末」.".into(),
            ));
            failed = true;
        }
    }
    let default = default_on_error
        .map(|(v, at)| parse_on_error(v, at, "common_on_error", diags))
        .unwrap_or(OnError::Stop);
    let mut on_errors = Vec::with_capacity(steps.len());
    for st in &steps {
        on_errors.push(match st.on_error {
            Some((v, at)) => parse_on_error(v, at, &format!("on_error_{}", st.number), diags),
            None => default,
        });
    }
    if failed {
        return Vec::new();
    }
    let mut order: Vec<usize> = (0..steps.len()).collect();
    order.sort_by_key(|&i| steps[i].number);
    order
        .into_iter()
        .map(|i| {
            let st = &steps[i];
            let mut args = Map::new();
            for (k, v, _) in &st.args {
                args.insert((*k).to_string(), Value::String((*v).to_string()));
            }
            let own: std::collections::HashSet<String> = if common.is_empty() {
                Default::default()
            } else {
                st.args.iter().map(|(a, _, _)| normalize_key(a)).collect()
            };
            for (k, v) in &common {
                if !own.contains(&normalize_key(k)) {
                    args.insert((*k).to_string(), Value::String((*v).to_string()));
                }
            }
            Call {
                tool: st.tool.map(|(t, _)| t).unwrap_or_default().to_string(),
                args: args.into(),
                span,
                block,
                step: Some(st.number),
                on_error: on_errors[i],
                source: kind.format(),
                dispatch: None,
                id: None,
                texts: None,
            }
        })
        .collect()
}
