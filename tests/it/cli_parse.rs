//! `tavern parse`: output shape, exit statuses 0/1/2, stdin and files, malformed input.

use crate::cli_support;

use cli_support::{home, tavern};
use serde_json::json;

const TAM: &str = "Let me echo.\n<|[REQUEST_TOOL]|>\ncommand:「始」system:echo「末」\ntext:「始」hi「末」\n<|[END_TOOL]|>\n";

#[test]
fn reads_stdin_and_prints_one_object() {
    let dir = home();
    let run = tavern(dir.path(), &["parse"], TAM.as_bytes());
    assert_eq!(run.code, 0, "{}", run.stderr);
    let out = run.json();
    let keys: Vec<&str> = out
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys, ["response_text", "calls", "diagnostics"]);
    assert!(out["response_text"]
        .as_str()
        .unwrap()
        .contains("Let me echo."));
    assert_eq!(out["calls"][0]["tool"], "system:echo");
    assert_eq!(out["calls"][0]["args"], json!({"text": "hi"}));
    assert_eq!(out["diagnostics"], json!([]));
}

#[test]
fn reads_a_file_and_dash() {
    let dir = home();
    std::fs::write(dir.path().join("out.txt"), TAM).unwrap();
    let from_file = tavern(dir.path(), &["parse", "out.txt"], b"");
    let from_dash = tavern(dir.path(), &["parse", "-"], TAM.as_bytes());
    assert_eq!(from_file.code, 0);
    assert_eq!(from_file.json(), from_dash.json());
    assert_eq!(from_file.json()["calls"][0]["tool"], "system:echo");
}

#[test]
fn chains_carry_their_steps() {
    let text = "<|[REQUEST_TOOL]|>\ncommand1:「始」system:echo「末」\ntext1:「始」a「末」\ncommand2:「始」system:uuid「末」\non_error_1:「始」continue「末」\n<|[END_TOOL]|>\n";
    let dir = home();
    let out = tavern(dir.path(), &["parse", "--format", "tam"], text.as_bytes()).json();
    assert_eq!(out["calls"][0]["tool"], "system:echo");
    assert_eq!(out["calls"][0]["args"], json!({"text": "a"}));
    assert_eq!(out["calls"][0]["step"], 1);
    assert_eq!(out["calls"][0]["on_error"], "continue");
    assert_eq!(out["calls"][1]["tool"], "system:uuid");
}

#[test]
fn json_calls() {
    let dir = home();
    let mcp = r#"{"name": "system:echo", "arguments": {"text": "x"}}"#;
    let out = tavern(dir.path(), &["parse", "--format", "json"], mcp.as_bytes()).json();
    assert_eq!(out["calls"][0]["tool"], "system:echo");
    assert_eq!(out["calls"][0]["args"], json!({"text": "x"}));
}

#[test]
fn malformed_input_is_an_error_diagnostic_with_a_place() {
    let dir = home();
    let cases = [
        "Here:\n<ACTION>\n  <Tool><a>1</b></Tool>\n</ACTION>\n",
        "text\n<|[REQUEST_TOOL]|>\nfilePath:「始」/x「末」\n<|[END_TOOL]|>\n",
    ];
    for text in cases {
        let run = tavern(dir.path(), &["parse"], text.as_bytes());
        assert_eq!(run.code, 1, "{text}: {}", run.stdout);
        let out = run.json();
        assert_eq!(out["calls"], json!([]), "{text}");
        let d = &out["diagnostics"][0];
        assert_eq!(d["severity"], "error", "{text}");
        assert!(d["line"].as_u64().unwrap() >= 2, "{text}: {d}");
        assert!(d["column"].as_u64().unwrap() >= 1, "{text}: {d}");
        assert!(!d["message"].as_str().unwrap().is_empty());
    }
}

#[test]
fn arbitrary_bytes_never_panic() {
    let dir = home();
    let inputs: [&[u8]; 4] = [
        b"\xff\xfe<|[REQUEST_TOOL]|>\xc3\x28command:",
        "<ACTION><<<<&&&]]>".as_bytes(),
        "<|[REQUEST_TOOL]|>\ncommand:「始」x\n".as_bytes(),
        b"",
    ];
    for input in inputs {
        let run = tavern(dir.path(), &["parse"], input);
        assert!(
            run.code == 0 || run.code == 1,
            "{:?}: {}",
            input,
            run.stderr
        );
        run.json();
    }
}

#[test]
fn usage_errors_exit_2() {
    let dir = home();
    for args in [
        &["parse", "--format", "yaml"][..],
        &["parse", "--bogus"],
        &["parse", "a", "b"],
        &["nosuchcommand"],
    ] {
        let run = tavern(dir.path(), args, b"");
        assert_eq!(run.code, 2, "{args:?}");
        assert!(run.stdout.is_empty(), "{args:?}: {}", run.stdout);
        assert!(!run.stderr.is_empty(), "{args:?}");
    }
    let run = tavern(dir.path(), &["parse", "missing.txt"], b"");
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("missing.txt"), "{}", run.stderr);
    let run = tavern(dir.path(), &["parse", "."], b"");
    assert_eq!(run.code, 2, "a directory is not readable input");
}

#[test]
fn help_exits_0() {
    let dir = home();
    let run = tavern(dir.path(), &["parse", "--help"], b"");
    assert_eq!(run.code, 0);
    assert!(run.stdout.contains("--format"));
}
