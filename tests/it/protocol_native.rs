//! The native call formats of open models (`tests/data/native_cases.jsonl`, written by
//! hand from the formats' table, messy shapes included, and the shared worked examples
//! `tests/data/native_cases_shared.jsonl`): every case is read with `auto` and with its
//! own format's name, one-shot and streamed in small chunks (the checks of
//! `protocol_cases`), and every call carries its format as `source` and a place.

use serde_json::Value;
use tavern::internal::protocol::{parse, Format};

use crate::protocol_cases::check_case;

/// The format a shared case is written in, from its name.
fn shared_format(name: &str) -> &'static str {
    let table = [
        ("hermes", "hermes"),
        ("pythonic", "pythonic"),
        ("leadin_fence", "pythonic"),
        ("llama_json", "llama_json"),
        ("mistral", "mistral"),
        ("openai", "json"),
        ("granite", "granite"),
        ("glm", "glm"),
        ("functionary", "functionary"),
    ];
    table
        .iter()
        .find(|(p, _)| name.starts_with(p))
        .map(|(_, f)| *f)
        .unwrap_or_else(|| panic!("no format for shared case {name}"))
}

fn run(text: &str, shared: bool) -> usize {
    let mut failures = Vec::new();
    let mut n = 0;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let case: Value = serde_json::from_str(line).expect("case line is JSON");
        let name = case["name"].as_str().unwrap().to_string();
        let own = match case.get("native").and_then(Value::as_str) {
            Some(f) => f.to_string(),
            None if shared => shared_format(&name).to_string(),
            None => panic!("{name}: no native format"),
        };
        for format in ["auto", own.as_str()] {
            let mut c = case.clone();
            c["format"] = Value::from(format);
            c["name"] = Value::from(format!("{name} (--format {format})"));
            n += 1;
            if let Err(e) = check_case(&c) {
                failures.push(e);
            }
        }
        // Every call says its format and where it is.
        let input = case["input"].as_str().unwrap();
        let want: Format = own.parse().unwrap();
        for f in [Format::Auto, want] {
            for call in parse(input, f).calls {
                if call.source != want || call.span.line == 0 || call.span.column == 0 {
                    failures.push(format!(
                        "{name} ({f}): call {} has source {} at {}:{}, expected {want}",
                        call.tool, call.source, call.span.line, call.span.column
                    ));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {n} readings failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    n
}

#[test]
fn hand_written_native_cases() {
    assert!(run(include_str!("../data/native_cases.jsonl"), false) >= 100);
}

/// The families of 2025–26 (`tests/data/native_cases_2026.jsonl`): each case with `auto`
/// and its own name, one-shot and streamed; a case's `ids` are its calls' ids, and every
/// call has one.
#[test]
fn families_of_2025_26() {
    let text = include_str!("../data/native_cases_2026.jsonl");
    assert!(run(text, false) >= 100);
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let case: Value = serde_json::from_str(line).expect("case line is JSON");
        let input = case["input"].as_str().unwrap();
        let own: Format = case["native"].as_str().unwrap().parse().unwrap();
        for f in [Format::Auto, own] {
            let got = parse(input, f);
            let ids: Vec<&str> = got.calls.iter().filter_map(|c| c.id.as_deref()).collect();
            assert_eq!(
                ids.len(),
                got.calls.len(),
                "{}: every call has an id",
                case["name"]
            );
            if let Some(want) = case.get("ids").and_then(Value::as_array) {
                let want: Vec<&str> = want.iter().filter_map(Value::as_str).collect();
                assert_eq!(ids, want, "{} ({f})", case["name"]);
            }
        }
    }
}

#[test]
fn shared_native_cases() {
    run(include_str!("../data/native_cases_shared.jsonl"), true);
}

/// Arguments are kept as text until first read: JSON-shaped formats keep the JSON the
/// model wrote; pythonic calls keep their source and read as the JSON their literals
/// mean. Either reads as serde_json reads that JSON; JSON arguments it could not hold are
/// an error and no call.
#[test]
fn arguments_are_kept_as_json_text() {
    let kept = [
        (
            Format::Hermes,
            "<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": [1, 2.5], \"y\": \"\\u00e9\"}}\n</tool_call>",
            r#"{"x": [1, 2.5], "y": "\u00e9"}"#,
        ),
        (
            Format::Pythonic,
            "[a(x=[1, 2.5], y='é\\n', z=None, t=(1,), u=(2), v={1: True}, w=data['k'])]",
            r#"{"x":[1,2.5],"y":"é\n","z":null,"t":[1],"u":2,"v":{"1":true},"w":"data['k']"}"#,
        ),
        (Format::Mistral, "[TOOL_CALLS]a[ARGS]{\"x\": 1}", r#"{"x": 1}"#),
        (Format::Functionary, "<function=a>{\"x\": {}}</function>", r#"{"x": {}}"#),
        (Format::Json, r#"{"name": "a", "arguments": {"k": "v", "k": 2}}"#, r#"{"k": "v", "k": 2}"#),
    ];
    for (format, text, written) in kept {
        for f in [format, Format::Auto] {
            let p = parse(text, f);
            assert!(!p.has_errors(), "{f}: {text}: {:?}", p.diagnostics);
            assert_eq!(p.calls.len(), 1, "{f}: {text}");
            let args = &p.calls[0].args;
            let want: serde_json::Map<String, Value> = serde_json::from_str(written).unwrap();
            if format == Format::Pythonic {
                // Not JSON as written: the JSON it means is written when first read.
                assert_eq!(args.as_written(), None, "{f}: {text}");
                let json = serde_json::to_string(&args.to_map()).unwrap();
                assert_eq!(json, written, "{f}: {text}");
            } else {
                assert_eq!(args.as_written(), Some(written), "{f}: {text}");
            }
            assert_eq!(*args, want, "{f}: {text}");
        }
    }
    let refused = [
        (
            Format::Hermes,
            "<tool_call>\n{\"name\": \"a\", \"arguments\": {\"n\": 1e400}}\n</tool_call>",
        ),
        (
            Format::Hermes,
            "<tool_call>\n{\"name\": \"a\", \"arguments\": {\"s\": \"\\ud800\"}}\n</tool_call>",
        ),
    ];
    for (format, text) in refused {
        let p = parse(text, format);
        assert!(
            p.calls.is_empty() && p.has_errors(),
            "{format}: {text}: {p:?}"
        );
    }
    // A pythonic argument that holds a literal serde_json cannot hold is kept as its
    // source text; an argument that is one (a number out of range, a bytes literal) makes
    // its call an error, and the call beside it is read.
    let deep = format!("{}1{}", "[".repeat(101), "]".repeat(101));
    for arg in [deep.as_str(), "[1, B\"c\"]", "{'k': 1e999}"] {
        let p = parse(&format!("[a(n={arg})]"), Format::Pythonic);
        assert_eq!(p.calls.len(), 1, "{arg}");
        assert_eq!(p.calls[0].args["n"], arg, "{arg}");
    }
    for arg in ["1e400", "-2.5e999", "b'ab'", "rB\"c\""] {
        let p = parse(&format!("[a(n={arg}), b(m=1)]"), Format::Pythonic);
        assert_eq!(p.calls.len(), 1, "{arg}");
        assert_eq!(p.calls[0].tool, "b", "{arg}");
        assert!(p.has_errors(), "{arg}");
    }
}

/// A Command R list none of whose calls reads, in its own fence inside an outer one after
/// a lead-in, is one error of its own; a call elsewhere in the answer is still read, by the
/// fast reader and the grammar alike (with `auto`; `--format command_r` reads only the
/// error).
#[test]
fn a_broken_command_r_fence_leaves_calls_elsewhere() {
    use tavern::internal::protocol::grammar::parse_reference;
    let text = "Sure:\n```\nAction: ```json\n[{\"tool_name\": \"c_d\", \"parameters\": {\"y\": }}]\n```\n```\n<tool_call>{\"name\": \"e_f\", \"arguments\": {\"z\": 3}}</tool_call>";
    let fast = parse(text, Format::Auto);
    let grammar = parse_reference(text, Format::Auto).unwrap();
    for p in [&fast, &grammar] {
        let tools: Vec<&str> = p.calls.iter().map(|c| c.tool.as_str()).collect();
        assert_eq!(tools, ["e_f"], "{p:?}");
        assert_eq!(p.calls[0].source, Format::Hermes);
        assert!(p.has_errors(), "{p:?}");
        assert!(
            p.diagnostics
                .iter()
                .any(|d| d.message.contains("command_r")),
            "{p:?}"
        );
    }
    for p in [
        parse(text, Format::CommandR),
        parse_reference(text, Format::CommandR).unwrap(),
    ] {
        assert!(p.calls.is_empty() && p.has_errors(), "{p:?}");
    }
}

/// Command R's cases (`native_cases_2026.jsonl`) read to the same response text with the
/// grammar as with the fast reader, with `auto` and `--format command_r`: the plan and the
/// lead-in stay, the action and the fence it fills go, errors included.
#[test]
fn command_r_cases_give_the_grammar_s_response_text() {
    use tavern::internal::protocol::grammar::parse_reference;
    let mut n = 0;
    for line in include_str!("../data/native_cases_2026.jsonl").lines() {
        let case: Value = serde_json::from_str(line).expect("case line is JSON");
        if case["native"] != "command_r" {
            continue;
        }
        let input = case["input"].as_str().unwrap();
        for f in [Format::Auto, Format::CommandR] {
            let fast = parse(input, f).response_text;
            let grammar = parse_reference(input, f).unwrap().response_text;
            assert_eq!(fast, grammar, "{} ({f})", case["name"]);
            n += 1;
        }
    }
    assert!(n >= 30, "only {n} readings");
}

/// `--format hermes` also reads call objects with no tag, at the start of the answer or
/// as a fenced block's whole content (llama.cpp's Hermes 2 Pro reader does), as the
/// `llama_json` row reads them; from the middle of prose it does not.
#[test]
fn hermes_reads_untagged_call_objects_where_calls_stand() {
    for (text, want) in [
        (
            "{\"name\": \"kettle_fill\", \"arguments\": {\"litres\": 1.5}}",
            1,
        ),
        (
            "```\n  {\"name\": \"kettle_fill\", \"arguments\": {\"litres\": 2}}\n```",
            1,
        ),
        (
            "{\"name\": \"a_b\", \"arguments\": {}}; {\"name\": \"c_d\", \"arguments\": {}}",
            2,
        ),
        (
            "Then {\"name\": \"kettle_fill\", \"arguments\": {}} maybe.",
            0,
        ),
    ] {
        let p = parse(text, Format::Hermes);
        assert!(!p.has_errors(), "{text}: {:?}", p.diagnostics);
        assert_eq!(p.calls.len(), want, "{text}");
        let g = tavern::internal::protocol::grammar::parse_native(text, Some(&["hermes"])).unwrap();
        assert_eq!(g.calls.len(), want, "grammar: {text}");
    }
}

/// `--format granite3` reads Granite 3.1's `<tool_call>` written as text (no closing
/// tag, a list after it), as vLLM's Granite reader does; under `auto` that tag is the
/// `hermes` row's.
#[test]
fn granite3_reads_its_tool_call_written_as_text() {
    let text = "<tool_call> [{\"name\": \"vat_fill\", \"arguments\": {\"litres\": 12}},\n {\"name\": \"vat_stir\", \"arguments\": {}}]";
    let p = parse(text, Format::Granite3);
    assert!(!p.has_errors(), "{:?}", p.diagnostics);
    let names: Vec<&str> = p.calls.iter().map(|c| c.tool.as_str()).collect();
    assert_eq!(names, ["vat_fill", "vat_stir"]);
    assert!(p.calls.iter().all(|c| c.source == Format::Granite3));
    let g = tavern::internal::protocol::grammar::parse_native(text, Some(&["granite3"])).unwrap();
    assert_eq!(g.calls.len(), 2);
    assert_eq!(parse(text, Format::Auto).calls.len(), 2);
}

/// `--format minimax` is vLLM's name for MiniMax-M1, whose calls are `<tool_calls>` JSON
/// lines: the `minimax_m2` row (whose alias it is) reads them too, the fast reader and the
/// grammar alike, and its calls carry the format asked for; `auto` reads them as
/// `tool_calls`.
#[test]
fn the_minimax_name_reads_minimax_m1_tool_calls() {
    use tavern::internal::protocol::grammar::parse_reference;
    let input = "Checking both.\n<tool_calls>\n{\"name\": \"clock_read\", \"arguments\": {\"zone\": \"UTC\"}}\n{\"name\": \"bell_ring\", \"arguments\": {\"times\": 1}}\n</tool_calls>";
    let format: Format = "minimax".parse().unwrap();
    assert_eq!(format, Format::MinimaxM2);
    for (reader, got) in [
        ("fast", parse(input, format)),
        ("grammar", parse_reference(input, format).unwrap()),
    ] {
        let calls: Vec<(&str, String, Format)> = got
            .calls
            .iter()
            .map(|c| {
                (
                    c.tool.as_str(),
                    Value::from(c.args.clone()).to_string(),
                    c.source,
                )
            })
            .collect();
        assert_eq!(
            calls,
            [
                (
                    "clock_read",
                    r#"{"zone":"UTC"}"#.to_string(),
                    Format::MinimaxM2
                ),
                ("bell_ring", r#"{"times":1}"#.to_string(), Format::MinimaxM2),
            ],
            "{reader}"
        );
        assert!(!got.has_errors(), "{reader}");
        assert_eq!(got.response_text.trim(), "Checking both.", "{reader}");
    }
    let auto = parse(input, Format::Auto);
    assert_eq!(auto.calls.len(), 2);
    assert!(auto.calls.iter().all(|c| c.source == Format::ToolCalls));
}

/// llama.cpp's generic format (`{"tool_call": {…}}`, for templates with no native call
/// shape) is a JSON call document, its id kept; a `{"response": …}` answer stays text.
#[test]
fn llama_cpp_generic_tool_call_document() {
    let text = r#"{"tool_call": {"name": "pantry_count", "arguments": {"shelf": 2}, "id": "c7"}}"#;
    for f in [Format::Auto, Format::Json] {
        let p = parse(text, f);
        assert_eq!(p.calls.len(), 1, "{f:?}");
        assert_eq!(p.calls[0].tool, "pantry_count");
        assert_eq!(p.calls[0].args["shelf"], 2);
        assert_eq!(p.calls[0].id.as_deref(), Some("c7"));
        assert!(p.response_text.is_empty(), "{f:?}");
    }
    let p = parse(r#"{"response": "The pantry is full."}"#, Format::Auto);
    assert!(p.calls.is_empty());
}
