//! `tavern call`: results per call, chains and skips, exit statuses, the bundled demo.

use crate::cli_support;

use std::path::Path;

use cli_support::{home, tavern};
use serde_json::{json, Value};

fn codes(out: &Value) -> Vec<String> {
    out["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            if r["ok"] == json!(true) {
                "ok".to_string()
            } else {
                r["error"]["code"].as_str().unwrap().to_string()
            }
        })
        .collect()
}

#[test]
fn runs_the_bundled_demo() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let run = tavern(root, &["call", "scripts/demo.tam"], b"");
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let out = run.json();
    let keys: Vec<&str> = out
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys, ["results", "diagnostics"]);
    assert_eq!(codes(&out), ["ok", "ok", "ok", "ok"]);
    let r = &out["results"];
    assert_eq!(r[0]["tool"], "system:get_current_time");
    assert_eq!(r[0]["value"].as_str().unwrap().len(), 10, "a %Y-%m-%d date");
    let die = r[1]["value"].as_i64().unwrap();
    assert!((1..=6).contains(&die));
    assert_eq!(r[2]["value"], "The die is cast.");
    assert_eq!(r[3]["tool"], "system:uuid");
}

#[test]
fn a_failing_step_skips_the_rest_of_its_chain() {
    let text = "<|[REQUEST_TOOL]|>\n\
        command1:「始」system:random_int「末」\nmin1:「始」5「末」\nmax1:「始」3「末」\n\
        command2:「始」system:echo「末」\ntext2:「始」never「末」\n\
        <|[END_TOOL]|>\n\
        <|[REQUEST_TOOL]|>\ncommand:「始」system:echo「末」\ntext:「始」independent「末」\n<|[END_TOOL]|>\n";
    let dir = home();
    let run = tavern(
        dir.path(),
        &["--home", dir.path().to_str().unwrap(), "call"],
        text.as_bytes(),
    );
    assert_eq!(run.code, 1);
    let out = run.json();
    assert_eq!(codes(&out), ["execution_failed", "skipped", "ok"]);
    assert!(out["results"][0]["error"]["message"]
        .as_str()
        .unwrap()
        .contains("min (5) is greater than max (3)"));
    assert!(out["results"][1]["error"]["message"]
        .as_str()
        .unwrap()
        .contains("step 1"));
    assert_eq!(out["results"][2]["value"], "independent");
}

#[test]
fn unknown_tools_and_bad_parameters_are_results() {
    let text = "<|[REQUEST_TOOL]|>\ncommand:「始」system.randm_int「末」\n<|[END_TOOL]|>\n\
        <|[REQUEST_TOOL]|>\ncommand:「始」system:random_int「末」\nmin:「始」one「末」\nmax:「始」6「末」\n<|[END_TOOL]|>\n";
    let dir = home();
    let run = tavern(dir.path(), &["call"], text.as_bytes());
    assert_eq!(run.code, 1);
    let out = run.json();
    assert_eq!(codes(&out), ["unknown_tool", "invalid_parameters"]);
    assert_eq!(
        out["results"][0]["error"]["message"],
        "Unknown tool 'system.randm_int', did you mean 'system:random_int'?"
    );
    assert_eq!(
        out["results"][1]["error"]["message"],
        "Invalid parameters for system:random_int: parameter 'min' must be an integer, got \"one\""
    );
}

#[test]
fn nothing_from_a_broken_block_runs() {
    let text = "<ACTION>\n<system:echo><text>a</txt></system:echo>\n</ACTION>\n";
    let dir = home();
    let run = tavern(dir.path(), &["call"], text.as_bytes());
    assert_eq!(run.code, 1);
    let out = run.json();
    assert_eq!(out["results"], json!([]));
    assert_eq!(out["diagnostics"][0]["severity"], "error");
}

#[test]
fn action_xml_from_stdin() {
    let text = "Echo please.\n<ACTION>\n  <system:echo>\n    <text>hello</text>\n  </system:echo>\n</ACTION>\n";
    let dir = home();
    let run = tavern(dir.path(), &["call", "-"], text.as_bytes());
    assert_eq!(run.code, 0, "{}", run.stdout);
    let out = run.json();
    assert_eq!(
        out["results"][0],
        json!({
            "tool": "system:echo",
            "call_id": "call_0",
            "ok": true,
            "value": "hello",
            "observation": "Observation: Tool system:echo executed successfully. Result: hello"
        })
    );
}

#[test]
fn usage_errors_exit_2() {
    let dir = home();
    let run = tavern(dir.path(), &["call", "--set", "novalue"], b"");
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("KEY=VALUE"), "{}", run.stderr);
    let run = tavern(dir.path(), &["call", "nope.tam"], b"");
    assert_eq!(run.code, 2);
    let run = tavern(dir.path(), &["call", "--format", "nope"], b"");
    assert_eq!(run.code, 2);
}

#[test]
fn json_calls_may_use_wire_names_and_typed_values() {
    let dir = home();
    let openai = r#"[{"type": "function", "function": {"name": "system_random_int", "arguments": "{\"min\": 2, \"max\": 2}"}},
                    {"type": "function", "function": {"name": "system_echo", "arguments": "{\"text\": \"a\"}"}}]"#;
    let run = tavern(dir.path(), &["call", "--format", "json"], openai.as_bytes());
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let out = run.json();
    assert_eq!(out["results"][0]["value"], 2);
    assert_eq!(out["results"][1]["value"], "a");
}
