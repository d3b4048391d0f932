//! The grammar of the native call forms (`grammar/native.pest`, read by
//! `protocol::grammar::parse_native`, the reference behind `tavern parse --reader grammar`)
//! reads every hand-written case of `tests/data/grammar/native_cases.jsonl` as the case
//! says: the calls (tool and arguments, types kept), an error for a cut-off call, and the
//! prose. The cases name what a reader must do, so the fast readers are held to the same
//! file; this test does not compare against them.

use serde_json::Value;
use tavern::internal::protocol::grammar::{native_forms, parse_native};

/// Cases of forms the grammar does not define (read by the JSON document reader).
const NOT_GRAMMAR: &[&str] = &["openai_shaped_string_args"];

/// The form a case is about, when its rule names one (`native: hermes, …`).
fn form_of(rule: &str) -> Option<&'static str> {
    let named = rule.strip_prefix("native: ")?;
    let first = named.split([',', ' ']).next()?;
    native_forms().find(|f| *f == first)
}

fn check(name: &str, case: &Value, forms: Option<&[&str]>) {
    let input = case["input"].as_str().unwrap();
    let p = parse_native(input, forms).unwrap_or_else(|e| panic!("{name}: {e}"));
    let got: Vec<Value> = p
        .calls
        .iter()
        .map(|c| serde_json::json!({"tool": c.tool, "args": c.args}))
        .collect();
    assert_eq!(
        Value::Array(got),
        case["calls"],
        "{name} ({forms:?}): {input:?}\n{p:#?}"
    );
    assert_eq!(
        p.has_errors(),
        case["error"].as_bool().unwrap(),
        "{name} ({forms:?}): {:?}",
        p.diagnostics
    );
    for prose in case["prose"].as_array().unwrap() {
        let prose = prose.as_str().unwrap();
        assert!(
            p.response_text.contains(prose),
            "{name} ({forms:?}): response text {:?} lacks {prose:?}",
            p.response_text
        );
    }
    if case["prose"].as_array().unwrap().is_empty() {
        assert_eq!(p.response_text, "", "{name} ({forms:?})");
    }
    for c in &p.calls {
        assert!(c.span.line >= 1 && c.span.column >= 1, "{name}: {c:?}");
    }
}

#[test]
fn the_grammar_reads_every_native_case() {
    let cases = include_str!("../data/grammar/native_cases.jsonl");
    let mut read = 0;
    for line in cases.lines().filter(|l| !l.trim().is_empty()) {
        let case: Value = serde_json::from_str(line).unwrap();
        let name = case["name"].as_str().unwrap();
        if NOT_GRAMMAR.contains(&name) {
            continue;
        }
        // As `auto` reads it (every form, placed by the reading rules)…
        check(name, &case, None);
        // …and with its own form asked for.
        if let Some(form) = form_of(case["rule"].as_str().unwrap()) {
            check(name, &case, Some(&[form]));
        }
        read += 1;
    }
    assert!(read >= 18, "only {read} cases read");
}

#[test]
fn a_form_not_asked_for_is_prose() {
    let text = "<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call>";
    let p = parse_native(text, Some(&["pythonic"])).unwrap();
    assert!(p.calls.is_empty());
    assert_eq!(p.response_text, text);
    // Reasoning is never read.
    let p = parse_native(&format!("<think>{text}</think>ok"), None).unwrap();
    assert!(p.calls.is_empty());
    assert_eq!(p.response_text, "ok");
}

/// The calls of a reading as (tool, arguments, format, id), and whether it has an error.
fn reading(p: &tavern::internal::protocol::Parsed) -> (Vec<Value>, bool) {
    let calls = p
        .calls
        .iter()
        .map(
            |c| serde_json::json!({"tool": c.tool, "args": c.args, "source": c.source, "id": c.id}),
        )
        .collect();
    (calls, p.has_errors())
}

/// `tavern parse --reader grammar` (the grammar, `parse_reference`) and the fast reader read
/// every hand-written native case alike, with `auto` and with the case's own format: the
/// same calls (tool, arguments with their types, format, id) and an error where the other
/// has one. Every case of every file is read, but those of the one format the grammar
/// does not define (`json`, whose row says why) and of TAM (`tam.pest`, checked in
/// `protocol_grammar.rs`); every family the grammar defines has cases here.
#[test]
fn the_grammar_and_the_fast_reader_agree_on_native_cases() {
    use std::collections::BTreeMap;
    use tavern::internal::protocol::grammar::parse_reference;
    use tavern::internal::protocol::{parse, Format};
    let forms: Vec<&str> = native_forms().collect();
    let mut failures = Vec::new();
    let mut n = 0;
    let mut per_form: BTreeMap<&str, usize> = forms.iter().map(|f| (*f, 0)).collect();
    for file in [
        include_str!("../data/native_cases.jsonl"),
        include_str!("../data/grammar/native_cases.jsonl"),
        include_str!("../data/native_cases_shared.jsonl"),
        include_str!("../data/native_cases_2026.jsonl"),
    ] {
        for line in file.lines().filter(|l| !l.trim().is_empty()) {
            let case: Value = serde_json::from_str(line).unwrap();
            let named = case["native"].as_str().or_else(|| {
                case["rule"]
                    .as_str()
                    .and_then(|r| r.strip_prefix("native: "))
                    .and_then(|r| r.split([',', ' ']).next())
            });
            // A case about a format no rule of native.pest defines.
            if named.is_some_and(|f| f.parse::<Format>().is_ok() && !forms.contains(&f)) {
                continue;
            }
            let name = case["name"].as_str().unwrap();
            let input = case["input"].as_str().unwrap();
            let own = named.and_then(|f| forms.iter().copied().find(|g| *g == f));
            let mut formats = vec![Format::Auto];
            formats.extend(own.and_then(|f| f.parse::<Format>().ok()));
            if let Some(f) = own {
                *per_form.entry(f).or_default() += 1;
            }
            for f in formats {
                let fast = reading(&parse(input, f));
                let reference = reading(&parse_reference(input, f).unwrap());
                if fast != reference {
                    failures.push(format!(
                        "{name} (--format {f}): fast {fast:?}\n   grammar {reference:?}"
                    ));
                }
                n += 1;
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {n} readings differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
    // No family of the grammar goes unchecked.
    let unread: Vec<&&str> = per_form
        .iter()
        .filter(|(_, n)| **n == 0)
        .map(|(f, _)| f)
        .collect();
    assert!(unread.is_empty(), "no case read for {unread:?}");
    assert_eq!(per_form.len(), forms.len());
    assert!(forms.len() >= 26, "the grammar defines {forms:?}");
    assert!(n >= 300, "only {n} readings");
}
