//! The built-in `core:*` nodes: constants, text, math, JSON, logic, tool calls, delays and
//! inline scripts.

mod constants;
mod json;
mod logic;
mod math;
mod script;
mod text;
mod tool_call;

pub use script::{ScriptNode, SCRIPT};

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::{Map, Value};

use super::error::NodeError;
use super::registry::{NodeOutputs, NodeRegistry};

/// Registers every built-in node in `registry`.
pub fn register_all(registry: &NodeRegistry) {
    let regexes = Arc::new(Regexes::default());
    for result in constants::register(registry)
        .into_iter()
        .chain(text::register(registry, &regexes))
        .chain(math::register(registry))
        .chain(json::register(registry))
        .chain(logic::register(registry, &regexes))
        .chain(tool_call::register(registry))
        .chain(script::register(registry))
    {
        // Built-in names are distinct and namespaced; a failure here is a bug caught by
        // the registry test, so it is logged rather than allowed to stop an engine.
        if let Err(e) = result {
            tracing::error!("built-in node: {e}");
        }
    }
}

/// Compiled regular expressions by pattern, shared by the regex-taking nodes of one
/// registry: a node run again (every run of a workflow, every turn of a loop) finds its
/// pattern compiled, and compiling costs far more than matching. Bounded: at most
/// [`Regexes::MAX`] patterns (past that it starts over), each kept only when it is short
/// ([`Regexes::MAX_PATTERN`]) and compiles small ([`Regexes::KEPT_SIZE`]); any other pattern
/// is compiled with the regex crate's defaults for each use, as before.
#[derive(Default)]
pub(crate) struct Regexes(Mutex<HashMap<String, Arc<regex::Regex>>>);

impl Regexes {
    /// Most patterns kept.
    const MAX: usize = 64;
    /// Longest pattern kept, in bytes.
    const MAX_PATTERN: usize = 4096;
    /// What a kept pattern may take compiled, and its lazy DFA per thread, in bytes: with
    /// [`Regexes::MAX`] this keeps the cache to tens of MiB however hostile the patterns.
    const KEPT_SIZE: usize = 256 * 1024;

    /// `pattern` compiled (from the cache when it was compiled before).
    pub(crate) fn get(&self, pattern: &str) -> Result<Arc<regex::Regex>, regex::Error> {
        let cache = || self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(re) = cache().get(pattern) {
            return Ok(re.clone());
        }
        // Compiled outside the lock: other nodes keep matching meanwhile.
        let small = (pattern.len() <= Self::MAX_PATTERN)
            .then(|| {
                regex::RegexBuilder::new(pattern)
                    .size_limit(Self::KEPT_SIZE)
                    .dfa_size_limit(Self::KEPT_SIZE)
                    .build()
                    .ok()
            })
            .flatten();
        let Some(re) = small else {
            // Too long, too big or malformed: compiled as the crate would (the error, if
            // any, is the crate's own), used once.
            return Ok(Arc::new(regex::Regex::new(pattern)?));
        };
        let re = Arc::new(re);
        let mut c = cache();
        if c.len() >= Self::MAX {
            c.clear();
        }
        c.insert(pattern.to_string(), re.clone());
        Ok(re)
    }
}

/// One output named `key`.
pub(crate) fn out(key: &str, v: Value) -> NodeOutputs {
    let mut m = Map::with_capacity(1);
    m.insert(key.to_string(), v);
    m
}

/// A string input (required by the caller's contract).
pub(crate) fn text<'a>(inputs: &'a Map<String, Value>, slot: &str) -> Result<&'a str, NodeError> {
    match inputs.get(slot) {
        Some(Value::String(s)) => Ok(s),
        Some(v) => Err(NodeError::input(slot, format!("expected text, got {v}"))),
        None => Err(NodeError::MissingInput(slot.to_string())),
    }
}

/// A string input that may be absent.
pub(crate) fn text_or<'a>(
    inputs: &'a Map<String, Value>,
    slot: &str,
    default: &'a str,
) -> Result<&'a str, NodeError> {
    match inputs.get(slot) {
        None | Some(Value::Null) => Ok(default),
        Some(_) => text(inputs, slot),
    }
}

/// A number input.
pub(crate) fn number(inputs: &Map<String, Value>, slot: &str) -> Result<f64, NodeError> {
    match inputs.get(slot) {
        Some(Value::Number(n)) => n
            .as_f64()
            .ok_or_else(|| NodeError::input(slot, "number out of range")),
        Some(Value::String(s)) => s
            .trim()
            .parse()
            .map_err(|_| NodeError::input(slot, format!("expected a number, got \"{s}\""))),
        Some(v) => Err(NodeError::input(
            slot,
            format!("expected a number, got {v}"),
        )),
        None => Err(NodeError::MissingInput(slot.to_string())),
    }
}

/// Renders a value as text: strings as they are, everything else as JSON.
pub(crate) fn display(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod regex_cache_tests {
    use super::*;

    fn kept(r: &Regexes) -> usize {
        r.0.lock().map(|m| m.len()).unwrap_or(usize::MAX)
    }

    #[test]
    fn a_pattern_is_compiled_once_and_bad_ones_are_reported_not_kept() {
        let r = Regexes::default();
        let a = r.get("a+b").expect("compiles");
        let again = r.get("a+b").expect("cached");
        assert!(
            Arc::ptr_eq(&a, &again),
            "the second use finds the first compile"
        );
        assert!(again.is_match("caab"));
        let bad = r.get("(unclosed").expect_err("a bad pattern is an error");
        assert!(bad.to_string().contains("unclosed"), "{bad}");
        assert_eq!(kept(&r), 1);
    }

    #[test]
    fn the_cache_stays_bounded() {
        let r = Regexes::default();
        for i in 0..(Regexes::MAX + 10) {
            r.get(&format!("x{i}")).expect("compiles");
            assert!(kept(&r) <= Regexes::MAX);
        }
        let long = "a".repeat(Regexes::MAX_PATTERN + 1);
        let before = kept(&r);
        assert!(r.get(&long).expect("compiles").is_match(&long));
        assert_eq!(kept(&r), before, "a very long pattern is used but not kept");
        // Short, but compiles past what a kept pattern may take: used, not kept.
        let big = r"\w{100}";
        assert!(regex::RegexBuilder::new(big)
            .size_limit(Regexes::KEPT_SIZE)
            .build()
            .is_err());
        let word = "é".repeat(100);
        assert!(r
            .get(big)
            .expect("compiles with the defaults")
            .is_match(&word));
        assert_eq!(kept(&r), before, "a big pattern is used but not kept");
    }
}
