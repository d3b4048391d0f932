//! Plugin self-tests: `tests/*.test.json` files in a plugin directory, run by
//! `tavern plugin test`.
//!
//! ```json
//! { "cases": [
//!   { "name": "greets", "call": "Hello:greet", "args": {"name": "Ada"}, "expect": "Hello, Ada!" },
//!   { "name": "needs a name", "call": "Hello:greet", "args": {}, "expectError": "invalid_parameters" }
//! ] }
//! ```
//! `expect` compares the whole result; `expectSubset` only what it lists (object keys, list
//! items by position, recursively); `expectType` the JSON type of the result (`"integer"`)
//! or of its parts (`{"roll": "integer", "note": "string"}`), for results that are random;
//! `expectError` the error code, and `expectMessage` (when given) a part of the error message.
//! `plugin test` runs the cases with the plugin's fs roots mapped to fresh temporary
//! directories seeded from `tests/fixtures/` (see `isolation.rs`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;
use serde_json::Value;

use super::locate;
use crate::problem::Problem;
use crate::tools::{Caller, ToolManager};

/// Suffix of test files.
pub const TEST_SUFFIX: &str = ".test.json";

/// One test file.
#[derive(Debug, Clone, Deserialize)]
pub struct TestFile {
    /// The cases, run in order.
    pub cases: Vec<TestCase>,
}

/// One call and what it must give.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TestCase {
    /// What the case checks.
    pub name: String,
    /// Tool id (`Plugin:tool` or `Plugin.tool`).
    pub call: String,
    /// Arguments.
    #[serde(default = "empty_object")]
    pub args: Value,
    /// The expected result.
    #[serde(default)]
    pub expect: Option<Value>,
    /// Values the result must contain (object keys and list items, recursively).
    #[serde(default)]
    pub expect_subset: Option<Value>,
    /// The JSON type of the result (a type name) or of its parts (an object of them).
    #[serde(default)]
    pub expect_type: Option<Value>,
    /// The expected error code (`execution_failed`, `invalid_parameters`, …).
    #[serde(default)]
    pub expect_error: Option<String>,
    /// A part of the expected error message.
    #[serde(default)]
    pub expect_message: Option<String>,
}

fn empty_object() -> Value {
    Value::Object(Default::default())
}

/// The outcome of one case.
#[derive(Debug, Clone, PartialEq)]
pub struct CaseOutcome {
    /// The test file.
    pub file: PathBuf,
    /// The case name.
    pub name: String,
    /// `None` when it passed; why it failed otherwise.
    pub failure: Option<String>,
}

/// The test files of a plugin directory, sorted.
pub fn test_files(plugin_dir: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(plugin_dir.join("tests")) else {
        return Vec::new();
    };
    let mut v: Vec<PathBuf> = rd
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.ends_with(TEST_SUFFIX))
        })
        .collect();
    v.sort();
    v
}

/// Reads a test file; a JSON error is a problem with its place.
pub fn read(path: &Path) -> Result<TestFile, Problem> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Problem::new(path, format!("cannot read: {e}")))?;
    serde_json::from_str(&text).map_err(|e| {
        let mut msg = e.to_string();
        if let Some(i) = msg.find(" at line ") {
            msg.truncate(i);
        }
        let p = Problem::new(path, format!("invalid test file: {msg}"));
        if e.line() > 0 {
            p.at(e.line() as u32, Some(e.column() as u32))
        } else {
            p
        }
    })
}

/// Runs every case of one file against `tools`.
pub async fn run_file(tools: &Arc<ToolManager>, path: &Path, file: &TestFile) -> Vec<CaseOutcome> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut out = Vec::new();
    for case in &file.cases {
        let result = tools
            .invoke(&case.call, case.args.clone(), Caller::Cli)
            .await;
        let failure = match (&result, &case.expect, &case.expect_error) {
            (Ok(v), Some(want), None) if v == want => None,
            (Ok(v), Some(want), None) => Some(format!("expected {want}, got {v}")),
            (Ok(v), None, Some(code)) => Some(format!("expected error {code}, got {v}")),
            (Ok(_), None, None) => None,
            (Err(e), _, Some(code)) if e.code() == code => match &case.expect_message {
                Some(m) if !e.to_string().contains(m.as_str()) => {
                    Some(format!("error message lacks '{m}': {e}"))
                }
                _ => None,
            },
            (Err(e), _, _) => Some(format!("{} ({})", e, e.code())),
            (Ok(_), Some(_), Some(_)) => {
                Some("a case gives `expect` or `expectError`, not both".into())
            }
        };
        let failure = failure.or_else(|| match &result {
            Ok(v) => shape_failure(case, v),
            Err(_) => None,
        });
        let failure = failure.map(|f| match find_case_line(&text, &case.name) {
            Some(l) => format!("line {l}: {f}"),
            None => f,
        });
        out.push(CaseOutcome {
            file: path.to_path_buf(),
            name: case.name.clone(),
            failure,
        });
    }
    out
}

/// Why `v` does not meet the case's `expectSubset` / `expectType`, if it does not.
fn shape_failure(case: &TestCase, v: &Value) -> Option<String> {
    if let Some(want) = &case.expect_subset {
        if let Some(at) = subset_mismatch(want, v, "result") {
            return Some(format!("expectSubset: {at}"));
        }
    }
    if let Some(want) = &case.expect_type {
        if let Some(at) = type_mismatch(want, v, "result") {
            return Some(format!("expectType: {at}"));
        }
    }
    None
}

/// Where `got` lacks something of `want` (objects: listed keys; lists: items by position).
pub fn subset_mismatch(want: &Value, got: &Value, at: &str) -> Option<String> {
    match (want, got) {
        (Value::Object(w), Value::Object(g)) => w.iter().find_map(|(k, wv)| match g.get(k) {
            Some(gv) => subset_mismatch(wv, gv, &format!("{at}.{k}")),
            None => Some(format!("{at} has no key '{k}'")),
        }),
        (Value::Array(w), Value::Array(g)) => {
            if g.len() < w.len() {
                return Some(format!(
                    "{at} has {} items, expected at least {}",
                    g.len(),
                    w.len()
                ));
            }
            w.iter()
                .zip(g)
                .enumerate()
                .find_map(|(i, (wv, gv))| subset_mismatch(wv, gv, &format!("{at}[{i}]")))
        }
        (w, g) if w == g => None,
        (w, g) => Some(format!("{at} is {g}, expected {w}")),
    }
}

/// The JSON type name of a value (`integer` for whole numbers).
pub fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Where `got`'s types differ from `want` (a type name, or an object of them by key).
pub fn type_mismatch(want: &Value, got: &Value, at: &str) -> Option<String> {
    match (want, got) {
        (Value::String(t), g) => {
            let actual = json_type(g);
            let ok = actual == t || (t == "number" && actual == "integer");
            (!ok).then(|| format!("{at} is {actual} ({g}), expected {t}"))
        }
        (Value::Object(w), Value::Object(g)) => w.iter().find_map(|(k, wv)| match g.get(k) {
            Some(gv) => type_mismatch(wv, gv, &format!("{at}.{k}")),
            None => Some(format!("{at} has no key '{k}'")),
        }),
        (Value::Object(_), g) => Some(format!("{at} is {}, expected an object", json_type(g))),
        (w, _) => Some(format!(
            "expectType {w} is neither a type name nor an object of them"
        )),
    }
}

fn find_case_line(text: &str, name: &str) -> Option<u32> {
    let quoted = serde_json::to_string(name).ok()?;
    text.find(&quoted).map(|i| locate::line_col(text, i).0)
}
