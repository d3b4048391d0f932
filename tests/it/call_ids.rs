//! Call ids end to end (issue 33): a call keeps the id its input gives (OpenAI
//! `tool_calls[].id`, Anthropic `tool_use.id`, Kimi's `functions.NAME:N`, Mistral's
//! `[CALL_ID]`), gets `call_N` where none is given, and its result carries it as
//! `call_id` in `tavern parse`, `tavern call` and `POST /api/invoke`; values written as
//! text are typed by the tool's schema when it runs, and as JSON literals without one.

use crate::cli_support::{home, tavern};
use crate::server_support::{fixture_home, Server};

use reqwest::StatusCode;
use serde_json::{json, Value};

const OPENAI: &str = r#"{"tool_calls": [{"id": "call_abc123", "type": "function", "function": {"name": "system_echo", "arguments": "{\"text\": \"one\"}"}}, {"id": "call_def456", "type": "function", "function": {"name": "system_echo", "arguments": "{\"text\": \"two\"}"}}]}"#;

#[test]
fn parse_keeps_or_gives_every_call_an_id() {
    let dir = home();
    let cases: &[(&str, &[&str])] = &[
        (OPENAI, &["call_abc123", "call_def456"]),
        (
            r#"{"type": "tool_use", "id": "toolu_01A", "name": "system_echo", "input": {"text": "hi"}}"#,
            &["toolu_01A"],
        ),
        (
            "<|tool_calls_section_begin|><|tool_call_begin|>functions.system_echo:0<|tool_call_argument_begin|>{\"text\": \"k\"}<|tool_call_end|><|tool_calls_section_end|>",
            &["functions.system_echo:0"],
        ),
        (
            "[TOOL_CALLS]system_echo[CALL_ID]Ab3dE5gH9[ARGS]{\"text\": \"m\"}",
            &["Ab3dE5gH9"],
        ),
        (
            "<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call>\n<tool_call>{\"name\": \"b\", \"arguments\": {}}</tool_call>",
            &["call_0", "call_1"],
        ),
    ];
    for (text, ids) in cases {
        let run = tavern(dir.path(), &["parse"], text.as_bytes());
        let out = run.json();
        let got: Vec<&str> = out["calls"]
            .as_array()
            .unwrap_or_else(|| panic!("{text}: {out}"))
            .iter()
            .map(|c| {
                assert_eq!(c["id"], c["call_id"], "{text}");
                c["id"]
                    .as_str()
                    .unwrap_or_else(|| panic!("{text}: no id in {c}"))
            })
            .collect();
        assert_eq!(got, *ids, "{text}");
    }
}

#[test]
fn call_results_carry_the_call_id() {
    let dir = home();
    let run = tavern(dir.path(), &["call", "-"], OPENAI.as_bytes());
    assert_eq!(run.code, 0, "{}", run.stdout);
    let out = run.json();
    let results = out["results"].as_array().unwrap();
    assert_eq!(results.len(), 2);
    assert_eq!(results[0]["call_id"], "call_abc123");
    assert_eq!(results[0]["value"], "one");
    assert_eq!(results[1]["call_id"], "call_def456");
    assert_eq!(results[1]["value"], "two");
    // An Anthropic assistant message: its `tool_use` blocks' ids.
    let anthropic = r#"{"role": "assistant", "content": [{"type": "text", "text": "Echoing."}, {"type": "tool_use", "id": "toolu_01B", "name": "system_echo", "input": {"text": "hi"}}]}"#;
    let out = tavern(dir.path(), &["call", "-"], anthropic.as_bytes()).json();
    assert_eq!(out["results"][0]["call_id"], "toolu_01B", "{out}");
    assert_eq!(out["results"][0]["value"], "hi", "{out}");
}

#[test]
fn values_written_as_text_follow_the_schema_when_the_tool_is_known() {
    let dir = home();
    // `text` is a string parameter: `42` and `"quoted"` stay the strings as written.
    let qwen = "<tool_call>\n<function=system_echo>\n<parameter=text>\n42\n</parameter>\n</function>\n</tool_call>";
    let glm = "<tool_call>system_echo<arg_key>text</arg_key><arg_value>\"quoted\"</arg_value></tool_call>";
    for (text, want_parsed, want_value) in [
        (qwen, json!(42), json!("42")),
        (glm, json!("quoted"), json!("\"quoted\"")),
    ] {
        let parsed = tavern(dir.path(), &["parse"], text.as_bytes()).json();
        assert_eq!(parsed["calls"][0]["args"]["text"], want_parsed, "{text}");
        let run = tavern(dir.path(), &["call", "-"], text.as_bytes());
        assert_eq!(run.code, 0, "{}", run.stdout);
        let out = run.json();
        assert_eq!(out["results"][0]["value"], want_value, "{text}: {out}");
        assert_eq!(out["results"][0]["call_id"], "call_0");
    }
}

#[tokio::test]
async fn rest_invoke_results_carry_the_call_id() {
    let s = Server::start(&fixture_home(), &[]);
    let r = reqwest::Client::new()
        .post(format!("{}/api/invoke", s.base))
        .json(&json!({"tool_calls": [{"id": "call_rest1", "type": "function", "function": {"name": "RhaiDemo_add", "arguments": "{\"a\": 1, \"b\": 2}"}}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["results"][0]["value"], json!(3), "{v}");
    assert_eq!(v["results"][0]["call_id"], "call_rest1", "{v}");
}
