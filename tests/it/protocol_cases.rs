//! Data-driven parse cases: `tests/data/parse_cases.jsonl` (the shared worked examples)
//! and `tests/data/parse_cases_tavern.jsonl` (one or more cases for every rule, the seed
//! examples, the VCP form and the JSON forms). Each line is `input → expected`; `message`,
//! when given, is text some diagnostic's message must hold.

use serde_json::{Map, Value};
use tavern::internal::protocol::{parse, Format, OnError, Parsed, Severity, StreamReader};

fn norm(k: &str) -> String {
    k.chars()
        .filter(|&c| c != '_')
        .flat_map(char::to_lowercase)
        .collect()
}

fn norm_args(m: &Map<String, Value>) -> Map<String, Value> {
    m.iter().map(|(k, v)| (norm(k), v.clone())).collect()
}

fn check_calls(name: &str, got: &Parsed, want: &[Value], exact: bool) -> Result<(), String> {
    if got.calls.len() != want.len() {
        return Err(format!(
            "{name}: expected {} calls, got {}: {:#?}",
            want.len(),
            got.calls.len(),
            got.calls
        ));
    }
    for (c, w) in got.calls.iter().zip(want) {
        let tool = w["tool"].as_str().unwrap();
        if c.tool != tool {
            return Err(format!("{name}: tool {:?} != {tool:?}", c.tool));
        }
        let wargs = w["args"].as_object().unwrap();
        let ok = if exact {
            &c.args == wargs
        } else {
            norm_args(&c.args) == norm_args(wargs)
        };
        if !ok {
            return Err(format!("{name}: args {:?} != {:?}", c.args, wargs));
        }
        if let Some(step) = w.get("step") {
            if c.step != step.as_u64().map(|s| s as u32) {
                return Err(format!("{name}: step {:?} != {step}", c.step));
            }
        }
        if let Some(oe) = w.get("on_error").and_then(Value::as_str) {
            let want = if oe == "continue" {
                OnError::Continue
            } else {
                OnError::Stop
            };
            if c.on_error != want {
                return Err(format!("{name}: on_error {:?} != {oe}", c.on_error));
            }
        }
    }
    Ok(())
}

pub(crate) fn check_case(case: &Value) -> Result<(), String> {
    let name = case["name"].as_str().unwrap();
    let input = case["input"].as_str().unwrap();
    let format: Format = case
        .get("format")
        .and_then(Value::as_str)
        .unwrap_or("auto")
        .parse()
        .unwrap();
    let exact = case
        .get("args_exact")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let got = parse(input, format);

    match case.get("any_of").filter(|v| !v.is_null()) {
        Some(any) => {
            let lists = any.as_array().unwrap();
            if !lists
                .iter()
                .any(|l| check_calls(name, &got, l.as_array().unwrap(), exact).is_ok())
            {
                return Err(format!(
                    "{name}: calls match none of any_of: {:#?}",
                    got.calls
                ));
            }
        }
        None => check_calls(name, &got, case["calls"].as_array().unwrap(), exact)?,
    }
    let has_err = got
        .diagnostics
        .iter()
        .any(|d| d.severity == Severity::Error);
    let has_warn = got
        .diagnostics
        .iter()
        .any(|d| d.severity == Severity::Warning);
    if case["error"].as_bool().unwrap() != has_err {
        return Err(format!(
            "{name}: error expected {} got {:#?}",
            case["error"], got.diagnostics
        ));
    }
    if case["warn"].as_bool().unwrap() != has_warn {
        return Err(format!(
            "{name}: warning expected {} got {:#?}",
            case["warn"], got.diagnostics
        ));
    }
    for d in &got.diagnostics {
        if d.line == 0 || d.column == 0 || d.message.is_empty() || d.hint.is_none() {
            return Err(format!("{name}: diagnostic without place or hint: {d:?}"));
        }
    }
    for p in case["prose"].as_array().unwrap() {
        let p = p.as_str().unwrap();
        if !got.response_text.contains(p) {
            return Err(format!(
                "{name}: prose {p:?} missing from {:?}",
                got.response_text
            ));
        }
    }
    if let Some(np) = case.get("no_prose").and_then(Value::as_array) {
        for p in np {
            let p = p.as_str().unwrap();
            if got.response_text.contains(p) {
                return Err(format!(
                    "{name}: {p:?} must not be in {:?}",
                    got.response_text
                ));
            }
        }
    }
    if let Some(r) = case.get("response_text").and_then(Value::as_str) {
        if got.response_text != r {
            return Err(format!(
                "{name}: response_text {:?} != {r:?}",
                got.response_text
            ));
        }
    }
    if let Some(d) = case.get("diag") {
        let first = got
            .diagnostics
            .iter()
            .find(|x| x.severity == Severity::Error)
            .ok_or(format!("{name}: no error diagnostic"))?;
        let (l, c) = (
            d["line"].as_u64().unwrap() as u32,
            d["column"].as_u64().unwrap() as u32,
        );
        if (first.line, first.column) != (l, c) {
            return Err(format!(
                "{name}: error at {}:{} not {l}:{c}: {first:?}",
                first.line, first.column
            ));
        }
    }
    if let Some(m) = case.get("message").and_then(Value::as_str) {
        if !got.diagnostics.iter().any(|d| d.message.contains(m)) {
            return Err(format!(
                "{name}: no diagnostic says {m:?}: {:#?}",
                got.diagnostics
            ));
        }
    }
    // Streaming in small chunks gives the same result.
    for size in [1usize, 3, 7] {
        let mut r = StreamReader::new(format);
        let mut streamed = Vec::new();
        let chars: Vec<char> = input.chars().collect();
        for ch in chars.chunks(size) {
            let s: String = ch.iter().collect();
            streamed.extend(r.push(&s));
        }
        let fin = r.finish();
        if fin != got {
            return Err(format!(
                "{name}: streaming (chunks of {size} chars) differs:\n{fin:#?}\nvs\n{got:#?}"
            ));
        }
        // Calls yielded early are the first final calls; the rest come with `finish`.
        if !got.calls.starts_with(&streamed) {
            return Err(format!(
                "{name}: calls yielded while streaming differ from the final calls"
            ));
        }
    }
    Ok(())
}

fn run_file(text: &str) {
    let mut failures = Vec::new();
    let mut n = 0;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let case: Value = serde_json::from_str(line).expect("case line is JSON");
        n += 1;
        if let Err(e) = check_case(&case) {
            failures.push(e);
        }
    }
    assert!(n > 0);
    assert!(
        failures.is_empty(),
        "{} of {n} cases failed:\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

#[test]
fn shared_worked_examples() {
    run_file(include_str!("../data/parse_cases.jsonl"));
}

#[test]
fn tavern_cases_for_every_rule() {
    run_file(include_str!("../data/parse_cases_tavern.jsonl"));
}
