//! `tavern parse --reader grammar` prints what the fast reader prints; `tavern call` shows
//! which VCP dispatch rule chose each tool.

use crate::cli_support;

use cli_support::{home, tavern};
use serde_json::json;

const MIXED: &str = "Hi.\n<<<[TOOL_REQUEST]>>>\ntool_name:「始」FileOperator「末」,\ncommand1:「始」WriteFile「末」,\nfilePath1:「始」a.txt「末」,\n<<<[END_TOOL_REQUEST]>>>\n<|[REQUEST_TOOL]|>\ncommand1:「始」A「末」\nx1:「始」1「末」\n<|[END_TOOL]|>\n<ACTION><B/></ACTION> after\n<ACTION><C/></ACTION>";

#[test]
fn grammar_reader_prints_the_same_json() {
    let dir = home();
    let fast = tavern(dir.path(), &["parse"], MIXED.as_bytes());
    let grammar = tavern(
        dir.path(),
        &["parse", "--reader", "grammar"],
        MIXED.as_bytes(),
    );
    assert_eq!(fast.code, 0, "{}", fast.stderr);
    assert_eq!(grammar.code, 0, "{}", grammar.stderr);
    assert_eq!(fast.json(), grammar.json());
    let out = fast.json();
    assert_eq!(out["response_text"], "Hi.");
    let calls = out["calls"].as_array().unwrap();
    assert_eq!(calls.len(), 3, "{out}");
    assert_eq!(calls[0]["tool"], "FileOperator");
    assert_eq!(calls[0]["source"], "vcp");
    assert_eq!(
        calls[0]["args"],
        json!({"command1": "WriteFile", "filePath1": "a.txt"})
    );
    assert_eq!(calls[1]["source"], "tam");
    assert_eq!(calls[1]["step"], 1);
    assert_eq!(calls[2]["tool"], "B");
    let warn = &out["diagnostics"][0];
    assert_eq!(warn["severity"], "warning");
    assert!(warn["message"]
        .as_str()
        .unwrap()
        .contains("only the first <ACTION> block runs"));
}

#[test]
fn unknown_reader_is_a_usage_error() {
    let dir = home();
    let run = tavern(dir.path(), &["parse", "--reader", "pest"], MIXED.as_bytes());
    assert_eq!(run.code, 2);
}

#[test]
fn call_reports_the_dispatch_rule() {
    let dir = home();
    let text = "<<<[TOOL_REQUEST]>>>\ntool_name:「始」system「末」,\ncommand:「始」echo「末」,\ntext:「始」你好「末」\n<<<[END_TOOL_REQUEST]>>>";
    let run = tavern(dir.path(), &["call"], text.as_bytes());
    assert_eq!(run.code, 0, "{}", run.stderr);
    let r = &run.json()["results"][0];
    assert_eq!(r["tool"], "system:echo");
    assert_eq!(r["dispatch"], "tool_name+command");
    assert_eq!(r["ok"], true, "{r}");
}
