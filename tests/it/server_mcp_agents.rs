//! Agents served over MCP (`agent_<id>` tools) thinking with the calling client's model
//! (`--llm mcp-client`, sampling): the real `tavern mcp` on stdio, a client that answers
//! `sampling/createMessage` with scripted replies, the first of which calls a tool. And
//! their world, `tavern://world`, whose subscribers hear of a reload.

use std::io::Write;
use std::process::{Child, ChildStdin};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{json, Value};

use crate::server_support::{spawn_mcp_args, Server};

/// A home with one agent, `helper`, that may call `system:echo`.
fn agent_home() -> tempfile::TempDir {
    let home = tempfile::tempdir().expect("temp home");
    std::fs::create_dir_all(home.path().join("agents")).unwrap();
    std::fs::write(
        home.path().join("agents/helper.json"),
        r#"{"id": "helper", "name": "Helper", "description": "You help with echoes.",
            "tool_ids_inventory": ["system:echo"],
            "tool_call_format": "action", "manual_style": "action", "max_turns": 4}"#,
    )
    .unwrap();
    home
}

struct Client {
    child: Child,
    stdin: ChildStdin,
    rx: mpsc::Receiver<Value>,
}

impl Client {
    fn start(home: &std::path::Path, extra: &[&str], capabilities: Value) -> Client {
        let (child, stdin, rx) = spawn_mcp_args(home, extra);
        let mut c = Client { child, stdin, rx };
        c.send(
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": capabilities,
            "clientInfo": {"name": "sampling-test", "version": "1"}}}),
        );
        c.next_with_id(&json!(0));
        c.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        c
    }

    fn send(&mut self, v: Value) {
        writeln!(self.stdin, "{v}").expect("write request");
        self.stdin.flush().expect("flush");
    }

    fn next(&self) -> Value {
        self.rx
            .recv_timeout(Duration::from_secs(30))
            .expect("a message within 30 s")
    }

    fn next_with_id(&self, id: &Value) -> Value {
        loop {
            let v = self.next();
            if v.get("id") == Some(id) && v.get("method").is_none() {
                return v;
            }
        }
    }

    /// The next `sampling/createMessage` request; fails if the call's answer comes first.
    fn sampling_request(&self, call: &Value) -> Value {
        loop {
            let v = self.next();
            if v["method"] == json!("sampling/createMessage") {
                return v;
            }
            assert!(
                !(v.get("id") == Some(call) && v.get("method").is_none()),
                "the call was answered before the model was asked: {v}"
            );
        }
    }

    fn reply(&mut self, req: &Value, text: &str) {
        self.send(json!({"jsonrpc": "2.0", "id": req["id"], "result": {
            "role": "assistant", "content": {"type": "text", "text": text},
            "model": "client-model", "stopReason": "endTurn"}}));
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn all_text(req: &Value) -> String {
    let mut s = req["params"]["systemPrompt"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    for m in req["params"]["messages"].as_array().into_iter().flatten() {
        s.push('\n');
        s.push_str(m["content"]["text"].as_str().unwrap_or_default());
    }
    s
}

#[test]
fn a_served_agent_thinks_with_the_clients_model_and_runs_its_tool() {
    let home = agent_home();
    let mut c = Client::start(
        home.path(),
        &["--llm", "mcp-client"],
        json!({"sampling": {}}),
    );
    c.send(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}));
    let list = c.next_with_id(&json!(1));
    let tool = list["result"]["tools"]
        .as_array()
        .and_then(|ts| ts.iter().find(|t| t["name"] == json!("agent_helper")))
        .unwrap_or_else(|| panic!("agent_helper is not in tools/list: {list}"))
        .clone();
    assert_eq!(
        tool["inputSchema"]["required"],
        json!(["message"]),
        "{tool}"
    );
    assert_eq!(tool["title"], json!("Agent Helper"), "{tool}");

    c.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "agent_helper", "arguments": {"message": "Echo the word marigold"}}}));
    // Turn 1: the client's model is asked (the manual and the message) and calls a tool.
    let first = c.sampling_request(&json!(2));
    let asked = all_text(&first);
    assert!(asked.contains("Echo the word marigold"), "{first}");
    assert!(
        asked.contains("system:echo"),
        "the manual names the tool: {first}"
    );
    c.reply(
        &first,
        "I will echo it.\n<ACTION>\n    <system:echo>\n        <text>marigold-7</text>\n    </system:echo>\n</ACTION>",
    );
    // Turn 2: the model reads the tool's Observation, and answers without a call.
    let second = c.sampling_request(&json!(2));
    assert!(
        all_text(&second).contains("marigold-7"),
        "the second turn carries the tool's Observation: {second}"
    );
    c.reply(&second, "Done: the echo said marigold-7.");
    let r = c.next_with_id(&json!(2));
    assert_eq!(r["result"]["isError"], json!(false), "{r}");
    let s = &r["result"]["structuredContent"];
    assert_eq!(s["answer"], json!("Done: the echo said marigold-7."), "{r}");
    assert_eq!(s["agent"], json!("helper"), "{r}");
    assert_eq!(s["turns"], json!(2), "{r}");
    assert_eq!(s["stopReason"], json!("no_calls"), "{r}");
    assert_eq!(s["calls"][0]["tool"], json!("system:echo"), "{r}");
    assert_eq!(s["calls"][0]["ok"], json!(true), "{r}");
}

#[test]
fn a_client_without_sampling_gets_client_unsupported() {
    let home = agent_home();
    let mut c = Client::start(home.path(), &["--llm", "mcp-client"], json!({}));
    c.send(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "agent_helper", "arguments": {"message": "hi"}}}));
    let r = loop {
        let v = c.next();
        assert_ne!(
            v["method"],
            json!("sampling/createMessage"),
            "asked a client that cannot answer: {v}"
        );
        if v.get("id") == Some(&json!(1)) {
            break v;
        }
    };
    assert_eq!(r["result"]["isError"], json!(true), "{r}");
    let text = r["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.contains("client_unsupported"), "{r}");
    assert!(text.contains("sampling"), "{r}");
}

#[test]
fn the_llm_flag_names_a_model_or_is_refused() {
    let home = agent_home();
    let out = std::process::Command::new(crate::server_support::tavern())
        .arg("--home")
        .arg(home.path())
        .args(["mcp", "--llm", "clever-model"])
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run tavern mcp");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--llm clever-model") && err.contains("mcp-client"),
        "{err}"
    );
}

#[tokio::test]
async fn over_rest_an_agent_on_the_clients_model_is_a_clear_error() {
    let home = agent_home();
    let server = Server::start(home.path(), &["--llm", "mcp-client"]);
    let r = reqwest::Client::new()
        .post(format!("{}/api/agents/helper/turn", server.base))
        .json(&json!({"message": "hi"}))
        .send()
        .await
        .expect("POST turn");
    assert_eq!(r.status().as_u16(), 422);
    let body: Value = r.json().await.expect("JSON error");
    let text = body.to_string();
    assert!(text.contains("client_unsupported"), "{body}");
    assert!(text.contains("agent_helper"), "names the fix: {body}");
}

#[test]
fn subscribers_of_tavern_world_hear_when_world_json_is_reloaded() {
    let home = agent_home();
    let world = home.path().join("world.json");
    std::fs::write(&world, r#"{"weather": "rain"}"#).unwrap();
    let mut c = Client::start(home.path(), &["--watch"], json!({}));
    c.send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "resources/subscribe",
        "params": {"uri": "tavern://world"}}),
    );
    c.next_with_id(&json!(1));
    std::fs::write(&world, r#"{"weather": "sun"}"#).unwrap();
    let updated = loop {
        let v = c.next();
        if v["method"] == json!("notifications/resources/updated") {
            break v;
        }
    };
    assert_eq!(
        updated["params"]["uri"],
        json!("tavern://world"),
        "{updated}"
    );
    c.send(
        json!({"jsonrpc": "2.0", "id": 2, "method": "resources/read",
        "params": {"uri": "tavern://world"}}),
    );
    let r = c.next_with_id(&json!(2));
    let text = r["result"]["contents"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert_eq!(
        serde_json::from_str::<Value>(text).ok(),
        Some(json!({"weather": "sun"})),
        "{r}"
    );
}

/// The same with the official Python client (`pip install mcp`) answering sampling with its
/// `sampling_callback` (tests/server/mcp_agent_sampling.py). Under `CI=true` a missing
/// python3/mcp fails the test instead of skipping it.
#[test]
fn the_official_python_client_answers_a_served_agents_sampling() {
    let ready = std::process::Command::new("python3")
        .args(["-c", "import mcp"])
        .status()
        .is_ok_and(|s| s.success());
    if !ready {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "python3 with the `mcp` package is required under CI"
        );
        eprintln!("skipping: python3 with the `mcp` package is not installed");
        return;
    }
    let home = agent_home();
    let out = std::process::Command::new("python3")
        .arg(format!(
            "{}/tests/server/mcp_agent_sampling.py",
            env!("CARGO_MANIFEST_DIR")
        ))
        .arg(crate::server_support::tavern())
        .arg(home.path())
        .output()
        .expect("run python3");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.lines().last() == Some("OK 6 checks"),
        "python MCP client failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}
