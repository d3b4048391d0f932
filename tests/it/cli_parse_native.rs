//! `tavern parse --format auto` (and `--format NAME`) reads every hand-written native case
//! and every shared one through the binary: the calls, their `source`, and exit 1 exactly
//! when the case expects an error.

use crate::cli_support;

use cli_support::{home, tavern};
use serde_json::Value;

#[test]
fn tavern_parse_reads_every_native_case() {
    let dir = home();
    let mut failures = Vec::new();
    let mut n = 0;
    for file in [
        include_str!("../data/native_cases.jsonl"),
        include_str!("../data/native_cases_shared.jsonl"),
        include_str!("../data/native_cases_2026.jsonl"),
    ] {
        for line in file.lines().filter(|l| !l.trim().is_empty()) {
            let case: Value = serde_json::from_str(line).unwrap();
            let name = case["name"].as_str().unwrap();
            let input = case["input"].as_str().unwrap();
            let mut formats = vec!["auto"];
            if let Some(own) = case.get("native").and_then(Value::as_str) {
                formats.push(own);
            }
            for f in formats {
                n += 1;
                let run = tavern(dir.path(), &["parse", "--format", f], input.as_bytes());
                let want_err = case["error"].as_bool().unwrap();
                if run.code != i32::from(want_err) {
                    failures.push(format!("{name} ({f}): exit {} {}", run.code, run.stdout));
                    continue;
                }
                let out = run.json();
                let got: Vec<(String, Value)> = out["calls"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|c| (c["tool"].as_str().unwrap().to_string(), c["args"].clone()))
                    .collect();
                let want: Vec<(String, Value)> = case["calls"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|c| (c["tool"].as_str().unwrap().to_string(), c["args"].clone()))
                    .collect();
                if got != want {
                    failures.push(format!("{name} ({f}): {got:?} != {want:?}"));
                }
                for c in out["calls"].as_array().unwrap() {
                    if c["source"] == "auto"
                        || c["line"].as_u64().unwrap_or(0) == 0
                        || c["column"].as_u64().unwrap_or(0) == 0
                    {
                        failures.push(format!("{name} ({f}): call without source or place: {c}"));
                    }
                }
            }
        }
    }
    assert!(n > 100);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
