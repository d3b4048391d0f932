//! Issue 23's serving items on the real binary: shutdown ends every event stream at once,
//! `--watch` reloads only for what the docs list, the server's agents read `world.json`
//! like the CLI's, `--home` that does not exist is an error, and malformed MCP requests get
//! the JSON-RPC codes clients expect. Only generous "within N s" guards.

use crate::server_support;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{json, Value};
use server_support::{tavern, temp_home, Server};

#[tokio::test]
async fn sigterm_ends_every_event_stream_at_once_then_drains() {
    let h = temp_home();
    let s = Server::start(h.path(), &[]);
    let c = reqwest::Client::new();
    let job: Value = c
        .post(format!("{}/api/jobs", s.base))
        .json(&json!({"tool": "workflow:slow_echo", "args": {"text": "done", "ms": 1500}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = job["id"].as_str().unwrap();
    let mut streams = Vec::new();
    for path in [
        "/api/audit/events".to_string(),
        "/api/plugins/events".to_string(),
        format!("/api/jobs/{id}/events"),
    ] {
        let r = c
            .get(format!("{}{path}", s.base))
            .header("accept", "text/event-stream")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK, "{path}");
        streams.push((path, r));
    }
    // SAFETY-free: kill(2) with a pid we started.
    assert_eq!(unsafe { libc::kill(s.pid() as i32, libc::SIGTERM) }, 0);
    for (path, r) in streams {
        let body = tokio::time::timeout(Duration::from_secs(15), r.text()).await;
        assert!(body.is_ok(), "{path} was still open 15 s after SIGTERM");
    }
    assert_eq!(
        s.wait(Duration::from_secs(30)),
        Some(0),
        "exits 0 after draining"
    );
}

async fn reloads(c: &reqwest::Client, base: &str) -> u64 {
    let v: Value = c
        .get(format!("{base}/api/plugins"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    v["reloads"].as_u64().expect("the reload count")
}

#[tokio::test]
async fn watch_reloads_for_what_the_docs_list_and_never_for_state_or_logs() {
    let h = temp_home();
    let s = Server::start_env(h.path(), &["--watch"], &[("TAVERN_LOG", "info")]);
    let c = reqwest::Client::new();
    assert_eq!(reloads(&c, &s.base).await, 0);
    // The server's own state and a log redirected into the home: no reload.
    std::fs::create_dir_all(h.path().join(".tavern/state")).unwrap();
    for i in 0..5 {
        std::fs::write(h.path().join(".tavern/state/x.json"), format!("{i}")).unwrap();
        std::fs::write(h.path().join("serve.log"), format!("line {i}\n")).unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    // A watched change: exactly one reload, the one it caused.
    let wf = std::fs::read_dir(h.path().join("workflows"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "json"))
        .expect("a workflow in the fixture home");
    let text = std::fs::read_to_string(&wf).unwrap();
    std::fs::write(&wf, text).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while reloads(&c, &s.base).await == 0 {
        assert!(
            Instant::now() < deadline,
            "the watched change never reloaded"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert_eq!(
        reloads(&c, &s.base).await,
        1,
        "only the watched change reloaded"
    );
    // A reload that worked is logged at INFO, not WARN.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut seen = Vec::new();
    let line = loop {
        seen.extend(s.stderr_lines());
        if let Some(l) = seen.iter().find(|l| l.contains("reloaded after")) {
            break l.clone();
        }
        assert!(Instant::now() < deadline, "no reload line: {seen:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(line.contains("INFO") && !line.contains("WARN"), "{line}");
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

#[tokio::test]
async fn the_servers_agents_read_world_json_like_the_cli() {
    let replies = root().join("scripts/innkeeper.replies.json");
    let set = format!("llm.base_url=scripted:{}", replies.display());
    let s = Server::start(root(), &["--set", &set]);
    let c = reqwest::Client::new();
    let r = c
        .post(format!("{}/api/agents/innkeeper/turn", s.base))
        .json(&json!({"message": "A traveller named Aria comes in from the rain."}))
        .send()
        .await
        .unwrap();
    let status = r.status();
    let v: Value = r.json().await.unwrap();
    assert_eq!(status, StatusCode::OK, "{v}");
    let obs = v["turn"]["observations"].to_string();
    assert!(
        obs.contains("ReadWorldStateTool executed successfully. Result: rainy"),
        "{v}"
    );
}

#[test]
fn a_home_that_does_not_exist_is_an_error_for_every_command() {
    let missing = "/nonexistent/tavern-home";
    for args in [
        &["tools"][..],
        &["serve", "--addr", "127.0.0.1:0"],
        &["mcp"],
        &["call", "system:uuid"],
        &["plugin", "check"],
    ] {
        let out = Command::new(tavern())
            .arg("--home")
            .arg(missing)
            .args(args)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains(missing) && err.contains("does not exist"),
            "{args:?}: {err}"
        );
    }
}

/// Posts one raw body to `/mcp` (in `session`), returning the JSON-RPC answer.
async fn mcp_raw(c: &reqwest::Client, base: &str, session: Option<&str>, body: &str) -> Value {
    let mut req = c
        .post(format!("{base}/mcp"))
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-protocol-version", "2025-11-25")
        .body(body.to_string());
    if let Some(sid) = session {
        req = req.header("mcp-session-id", sid);
    }
    let r = req.send().await.unwrap();
    let text = r.text().await.unwrap();
    if text.trim_start().starts_with('{') {
        return serde_json::from_str(&text).unwrap();
    }
    text.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .find(|m| m.get("id").is_some())
        .unwrap_or_else(|| panic!("no answer in {text:?}"))
}

#[tokio::test]
async fn malformed_mcp_requests_get_invalid_params_and_parse_errors() {
    let h = temp_home();
    let s = Server::start(h.path(), &[]);
    let c = reqwest::Client::new();
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "malformed-test", "version": "1"}}});
    let r = c
        .post(format!("{}/mcp", s.base))
        .header("accept", "application/json, text/event-stream")
        .json(&init)
        .send()
        .await
        .unwrap();
    let sid = r.headers()["mcp-session-id"].to_str().unwrap().to_string();
    let _ = r.text().await;
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string();
    let r = c
        .post(format!("{}/mcp", s.base))
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-session-id", &sid)
        .body(note)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::ACCEPTED);
    for (params, says) in [
        (
            json!({"name": "system:uuid", "arguments": "x"}),
            "`arguments`",
        ),
        (json!({"arguments": {}}), "`name`"),
        (json!({"name": 5}), "`name`"),
    ] {
        let body = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params});
        let v = mcp_raw(&c, &s.base, Some(&sid), &body.to_string()).await;
        assert_eq!(v["error"]["code"], -32602, "{params}: {v}");
        let m = v["error"]["message"].as_str().unwrap_or("");
        assert!(m.contains(says), "{params}: {v}");
    }
    let v = mcp_raw(&c, &s.base, Some(&sid), "{not json").await;
    assert_eq!(v["error"]["code"], -32700, "{v}");
    // A well-formed call still works in the same session.
    let ok = json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call",
        "params": {"name": "system_uuid", "arguments": {}}});
    let v = mcp_raw(&c, &s.base, Some(&sid), &ok.to_string()).await;
    assert!(v["result"]["content"].is_array(), "{v}");
}

#[test]
fn over_stdio_a_line_that_is_not_json_gets_a_parse_error_and_bad_calls_invalid_params() {
    use std::io::Write;
    let h = temp_home();
    let (mut child, mut stdin, rx) = server_support::spawn_mcp(h.path());
    let send = |stdin: &mut std::process::ChildStdin, v: &str| {
        stdin.write_all(v.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    };
    let next = || rx.recv_timeout(Duration::from_secs(30)).expect("an answer");
    send(
        &mut stdin,
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "stdio-test", "version": "1"}}})
        .to_string(),
    );
    assert_eq!(next()["id"], 1);
    send(
        &mut stdin,
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string(),
    );
    send(&mut stdin, "{not json");
    let v = next();
    assert_eq!(v["error"]["code"], -32700, "{v}");
    assert_eq!(v["id"], Value::Null);
    send(
        &mut stdin,
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": "system:uuid", "arguments": [1]}})
        .to_string(),
    );
    let v = next();
    assert_eq!(v["id"], 2);
    assert_eq!(v["error"]["code"], -32602, "{v}");
    assert!(v["error"]["message"]
        .as_str()
        .unwrap()
        .contains("`arguments`"));
    drop(stdin);
    let _ = child.wait();
}
