//! MCP `tools/call` over Streamable HTTP answered as `application/json` (the direct path of
//! `src/server/mcp.rs`): the same result and errors as rmcp's SSE answer, cancellation by
//! `notifications/cancelled`, and every request the direct path does not take (a bad session
//! id, a stale or unknown protocol version, a progress token) still answered by rmcp.

use crate::server_support;

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{json, Value};
use server_support::{mcp_post, temp_home, McpAnswer, Server};

const V: Option<&str> = Some("2025-11-25");

fn call(id: Value, name: &str, args: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": name, "arguments": args}})
}

/// The same call with a progress token, which only rmcp's path (SSE) answers.
fn with_progress(mut msg: Value) -> Value {
    msg["params"]["_meta"] = json!({"progressToken": "p"});
    msg
}

/// Posts `msg` until it is answered as JSON: the session joins the direct path once its
/// `notifications/initialized` has been handled, which happens after its 202.
async fn direct(c: &reqwest::Client, base: &str, sid: &str, msg: &Value) -> McpAnswer {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let a = mcp_post(c, base, Some(sid), V, msg).await;
        if a.is_json() || Instant::now() > deadline {
            return a;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_plain_tools_call_is_answered_as_json_with_the_result_rmcp_gives() {
    let h = temp_home();
    let s = Server::start(h.path(), &[]);
    let c = reqwest::Client::new();
    let sid = server_support::mcp_open(&c, &s.base).await;
    let cases = [
        // A text result, a string id echoed as a string.
        call(json!("a"), "system_echo", json!({"text": "ping"})),
        // An object result (also structuredContent), called by the canonical id.
        call(
            json!(2),
            "workflow:text_stats",
            json!({"text": "one two\nthree"}),
        ),
        // Invalid arguments: an isError result with the Observation line.
        call(json!(3), "RhaiDemo_add", json!({"a": "x", "b": 1})),
        // A failing tool.
        call(json!(4), "LuaDemo_fail", json!({"why": "testing"})),
        // An unknown tool: JSON-RPC error -32602.
        call(json!(5), "no_such_tool", json!({})),
    ];
    for msg in &cases {
        let d = direct(&c, &s.base, &sid, msg).await;
        assert_eq!(d.status, StatusCode::OK, "{:?}", d.msgs);
        assert!(
            d.is_json(),
            "a plain tools/call is answered as application/json, not {}",
            d.content_type
        );
        let sse = mcp_post(&c, &s.base, Some(&sid), V, &with_progress(msg.clone())).await;
        assert!(
            sse.content_type.starts_with("text/event-stream"),
            "a call with a progress token stays on rmcp's SSE path: {}",
            sse.content_type
        );
        let (d, sse) = (d.answer(), sse.answer());
        assert_eq!(d["id"], msg["id"], "the id is echoed with its JSON type");
        assert_eq!(d["jsonrpc"], "2.0");
        if msg["params"]["name"] == "no_such_tool" {
            assert_eq!(d["error"]["code"], -32602, "{d}");
            assert_eq!(d["error"], sse["error"], "the same error on both paths");
        } else {
            assert_eq!(d["result"], sse["result"], "the same result on both paths");
        }
    }
}

#[tokio::test]
async fn requests_the_direct_path_does_not_take_keep_rmcps_answers() {
    let h = temp_home();
    let s = Server::start(h.path(), &[]);
    let c = reqwest::Client::new();
    let sid = server_support::mcp_open(&c, &s.base).await;
    let msg = call(json!(1), "system_echo", json!({"text": "ping"}));
    let ok = direct(&c, &s.base, &sid, &msg).await;
    assert!(ok.is_json(), "{}", ok.content_type);

    // A session id this server never issued: 404, JSON-RPC -32001 (start a new session).
    let a = mcp_post(&c, &s.base, Some("no-such-session"), V, &msg).await;
    assert_eq!(a.status, StatusCode::NOT_FOUND, "{:?}", a.msgs);
    assert_eq!(a.answer()["error"]["code"], -32001, "{:?}", a.msgs);

    // A protocol version nobody knows: rmcp's 400.
    let a = mcp_post(&c, &s.base, Some(&sid), Some("1999-01-01"), &msg).await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST, "{:?}", a.msgs);
    assert!(
        a.answer()["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("1999-01-01")),
        "{:?}",
        a.msgs
    );

    // The stateless revision's header without its per-request `_meta`: rmcp's 400.
    let a = mcp_post(&c, &s.base, Some(&sid), Some("2026-07-28"), &msg).await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST, "{:?}", a.msgs);

    // Another session revision than the one negotiated is still answered (through rmcp).
    let a = mcp_post(&c, &s.base, Some(&sid), Some("2025-06-18"), &msg).await;
    assert_eq!(a.status, StatusCode::OK, "{:?}", a.msgs);
    assert_eq!(a.answer()["result"]["content"][0]["text"], "ping");

    // After DELETE the session is gone on the direct path too.
    let r = c
        .delete(format!("{}/mcp", s.base))
        .header("mcp-session-id", &sid)
        .header("mcp-protocol-version", "2025-11-25")
        .send()
        .await
        .unwrap();
    // 204, which the official clients take without a warning (rmcp's own 202 is not).
    assert_eq!(r.status(), StatusCode::NO_CONTENT);
    let a = mcp_post(&c, &s.base, Some(&sid), V, &msg).await;
    assert_eq!(a.status, StatusCode::NOT_FOUND, "{:?}", a.msgs);
    // Deleting it again, or a session never begun: 404, JSON-RPC -32001.
    let r = c
        .delete(format!("{}/mcp", s.base))
        .header("mcp-session-id", &sid)
        .header("mcp-protocol-version", "2025-11-25")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], -32001, "{body}");
}

#[tokio::test]
async fn a_json_rpc_batch_is_an_invalid_request() {
    let h = temp_home();
    let s = Server::start(h.path(), &[]);
    let c = reqwest::Client::new();
    let sid = server_support::mcp_open(&c, &s.base).await;
    let r = c
        .post(format!("{}/mcp", s.base))
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-session-id", &sid)
        .header("mcp-protocol-version", "2025-11-25")
        .body(r#" [{"jsonrpc": "2.0", "id": 1, "method": "ping"}]"#)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], -32600, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("batch"),
        "{body}"
    );
}

#[tokio::test]
async fn a_batch_on_a_2025_03_26_session_is_answered_as_a_batch() {
    let h = temp_home();
    let s = Server::start(h.path(), &[]);
    let c = reqwest::Client::new();
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-03-26", "capabilities": {},
        "clientInfo": {"name": "batch-test", "version": "1"}}});
    let a = mcp_post(&c, &s.base, None, None, &init).await;
    assert_eq!(a.status, StatusCode::OK);
    let sid = a.session.expect("a session id");
    let old = Some("2025-03-26");
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert_eq!(
        mcp_post(&c, &s.base, Some(&sid), old, &note).await.status,
        StatusCode::ACCEPTED
    );
    // Once a plain call is answered directly, the session is initialized on this replica.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !mcp_post(
        &c,
        &s.base,
        Some(&sid),
        old,
        &call(json!(9), "system:echo", json!({"text": "x"})),
    )
    .await
    .is_json()
    {
        assert!(
            Instant::now() < deadline,
            "the session never took direct calls"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let post = |body: String| {
        c.post(format!("{}/mcp", s.base))
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .header("mcp-session-id", &sid)
            .header("mcp-protocol-version", "2025-03-26")
            .body(body)
            .send()
    };
    let batch = json!([
        call(json!("a"), "system:echo", json!({"text": "first"})),
        {"jsonrpc": "2.0", "method": "notifications/roots/list_changed"},
        {"jsonrpc": "2.0", "id": 2, "method": "ping"},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "no_such_tool"}},
        {"jsonrpc": "2.0", "id": 4, "method": "initialize", "params": {}}
    ]);
    let r = post(batch.to_string()).await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let body: Value = r.json().await.unwrap();
    let answers = body
        .as_array()
        .unwrap_or_else(|| panic!("not a batch: {body}"));
    let ids: Vec<&Value> = answers.iter().map(|a| &a["id"]).collect();
    assert_eq!(
        ids,
        [&json!("a"), &json!(2), &json!(3), &json!(4)],
        "{body}"
    );
    assert_eq!(
        answers[0]["result"]["content"][0]["text"],
        json!("first"),
        "{body}"
    );
    assert_eq!(answers[1]["result"], json!({}), "{body}");
    assert_eq!(answers[2]["error"]["code"], json!(-32602), "{body}");
    assert_eq!(answers[3]["error"]["code"], json!(-32600), "{body}");
    // Notifications only: nothing to answer.
    let r =
        post(json!([{"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}]).to_string())
            .await
            .unwrap();
    assert_eq!(r.status(), StatusCode::ACCEPTED);
    // An empty batch is an invalid request.
    let r = post("[]".into()).await.unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn notifications_cancelled_stops_a_call_answered_directly_and_sends_no_response() {
    let h = temp_home();
    let s = Server::start(h.path(), &[]);
    let c = reqwest::Client::new();
    let sid = server_support::mcp_open(&c, &s.base).await;
    // Joined the direct path.
    let ping = call(json!(1), "system_echo", json!({"text": "ping"}));
    assert!(direct(&c, &s.base, &sid, &ping).await.is_json());
    let slow = call(
        json!(7),
        "workflow_slow_echo",
        json!({"text": "late", "ms": 20000}),
    );
    let running = {
        let (c, base, sid) = (c.clone(), s.base.clone(), sid.clone());
        tokio::spawn(async move { mcp_post(&c, &base, Some(&sid), V, &slow).await })
    };
    // Cancel until the call answers (a cancel that comes before the call is ignored).
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 7, "reason": "test"}});
    let deadline = Instant::now() + Duration::from_secs(15);
    while !running.is_finished() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let a = mcp_post(&c, &s.base, Some(&sid), V, &cancel).await;
        assert_eq!(a.status, StatusCode::ACCEPTED);
    }
    // (Not cancelled, the call would answer "late" after 20 s.)
    let r = running.await.unwrap();
    // As on rmcp's path: a cancelled request gets no response; its POST ends.
    assert_eq!(r.status, StatusCode::OK);
    assert!(
        r.msgs.iter().all(|m| m.get("id").is_none()),
        "no answer to a cancelled call: {:?}",
        r.msgs
    );
    // The session goes on.
    let a = direct(&c, &s.base, &sid, &ping).await;
    assert_eq!(a.answer()["result"]["content"][0]["text"], "ping");
}

#[tokio::test]
async fn progress_reaches_the_event_stream_while_the_script_runs() {
    // test:tool_with_progress reports, waits 50 ms, reports, waits 50 ms, reports, returns.
    let home = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conformance/home");
    let s = Server::start(&home, &[]);
    let c = reqwest::Client::new();
    let sid = server_support::mcp_open(&c, &s.base).await;
    let msg = with_progress(call(json!(1), "test_tool_with_progress", json!({})));
    let mut r = c
        .post(format!("{}/mcp", s.base))
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", &sid)
        .header("mcp-protocol-version", "2025-11-25")
        .json(&msg)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let mut buf = String::new();
    let mut first_progress = None;
    let mut progress = Vec::new();
    let answered = 'read: loop {
        let chunk = tokio::time::timeout(Duration::from_secs(30), r.chunk())
            .await
            .expect("the stream goes on")
            .unwrap()
            .expect("the stream ended before the answer");
        let at = Instant::now();
        buf.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = buf.find("\n\n") {
            let event: String = buf.drain(..end + 2).collect();
            for data in event.lines().filter_map(|l| l.strip_prefix("data:")) {
                let Ok(v) = serde_json::from_str::<Value>(data.trim()) else {
                    continue;
                };
                if v["method"] == "notifications/progress" {
                    first_progress.get_or_insert(at);
                    progress.push(v["params"]["progress"].as_f64().unwrap_or(-1.0));
                } else if v["id"] == json!(1) {
                    assert_eq!(v["result"]["isError"], json!(false), "{v}");
                    break 'read at;
                }
            }
        }
    };
    assert_eq!(progress, [0.0, 50.0, 100.0]);
    let first = first_progress.expect("progress before the answer");
    assert!(
        answered.duration_since(first) >= Duration::from_millis(60),
        "the first progress came only {:?} before the answer",
        answered.duration_since(first)
    );
}
