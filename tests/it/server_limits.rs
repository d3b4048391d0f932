//! Connection and session limits of `tavern serve` (issue 24 item 4) on the real binary over
//! loopback: a client trickling its headers is closed at the header-read timeout, the
//! connection cap answers 503 `too_many_connections` and frees up when a client leaves, and
//! MCP sessions past `--max-sessions` close the oldest idle one. Only generous "within N s"
//! guards, no timing assertions.

use crate::server_support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{json, Value};
use server_support::{temp_home, Server};

pub(crate) fn addr(s: &Server) -> String {
    s.base.trim_start_matches("http://").to_string()
}

/// True once the server has closed `tcp` (a read gives end of file or an error), calling
/// `trickle` between reads (also used by `server_bodies_headers`).
pub(crate) fn closed_within(
    tcp: &mut TcpStream,
    max: Duration,
    mut trickle: impl FnMut(&mut TcpStream),
) -> bool {
    tcp.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let deadline = Instant::now() + max;
    let mut buf = [0u8; 1024];
    while Instant::now() < deadline {
        match tcp.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return true,
        }
        trickle(tcp);
    }
    false
}

#[tokio::test]
async fn a_client_trickling_its_headers_is_closed_at_the_header_timeout() {
    let h = temp_home();
    let s = Server::start(
        h.path(),
        &["--header-timeout-secs", "1", "--idle-timeout-secs", "60"],
    );
    let mut tcp = TcpStream::connect(addr(&s)).unwrap();
    tcp.write_all(b"GET /api/tools HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .unwrap();
    let mut n = 0;
    // One more header byte every 200 ms: never a whole head.
    let closed = closed_within(&mut tcp, Duration::from_secs(20), |t| {
        n += 1;
        let _ = t.write_all(if n % 2 == 0 { b"X" } else { b"-" });
    });
    assert!(closed, "a slowloris connection was still open after 20 s");
    // A client that sends nothing at all is closed too.
    let mut silent = TcpStream::connect(addr(&s)).unwrap();
    assert!(closed_within(&mut silent, Duration::from_secs(20), |_| {}));
    // The server still answers others.
    let r = reqwest::get(format!("{}/api/tools", s.base)).await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
}

#[test]
fn an_idle_kept_alive_connection_is_closed() {
    let h = temp_home();
    let s = Server::start(
        h.path(),
        &["--idle-timeout-secs", "1", "--header-timeout-secs", "60"],
    );
    let mut tcp = TcpStream::connect(addr(&s)).unwrap();
    tcp.write_all(b"GET /api/tools HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .unwrap();
    // Read the answer, then stay connected and silent.
    tcp.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut buf = [0u8; 4096];
    let n = tcp.read(&mut buf).unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
    let closed = closed_within(&mut tcp, Duration::from_secs(20), |_| {});
    assert!(closed, "an idle connection was still open after 20 s");
}

#[tokio::test]
async fn the_connection_cap_answers_503_and_frees_up_when_a_client_leaves() {
    let h = temp_home();
    let s = Server::start(
        h.path(),
        &[
            "--max-connections",
            "2",
            "--header-timeout-secs",
            "60",
            "--idle-timeout-secs",
            "60",
        ],
    );
    let held: Vec<TcpStream> = (0..2)
        .map(|_| TcpStream::connect(addr(&s)).unwrap())
        .collect();
    // Give the server a moment to accept both (a refused third is what we look for).
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let (status, body) = loop {
        let r = client
            .get(format!("{}/api/tools", s.base))
            .send()
            .await
            .unwrap();
        let st = r.status();
        let v: Value = r.json().await.unwrap();
        if st == StatusCode::SERVICE_UNAVAILABLE || Instant::now() > deadline {
            break (st, v);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(body["error"]["code"], "too_many_connections");
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("--max-connections"));
    drop(held);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let r = client
            .get(format!("{}/api/tools", s.base))
            .send()
            .await
            .unwrap();
        if r.status() == StatusCode::OK {
            break;
        }
        assert!(Instant::now() < deadline, "the cap never freed up");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// POSTs one JSON-RPC message to `/mcp` (protocol 2025-11-25); the status, the session id
/// header, and the JSON messages of the answer.
async fn mcp_post(
    c: &reqwest::Client,
    base: &str,
    session: Option<&str>,
    msg: Value,
) -> (StatusCode, Option<String>, Vec<Value>) {
    let a = server_support::mcp_post(c, base, session, Some("2025-11-25"), &msg).await;
    (a.status, a.session, a.msgs)
}

async fn open_session(c: &reqwest::Client, base: &str) -> String {
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "limits-test", "version": "1"}}});
    let (st, sid, msgs) = mcp_post(c, base, None, init).await;
    assert_eq!(st, StatusCode::OK, "{msgs:?}");
    let sid = sid.expect("a session id");
    let (st, _, _) = mcp_post(
        c,
        base,
        Some(&sid),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await;
    assert_eq!(st, StatusCode::ACCEPTED);
    sid
}

async fn lists_tools(c: &reqwest::Client, base: &str, sid: &str) -> StatusCode {
    let (st, _, msgs) = mcp_post(
        c,
        base,
        Some(sid),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
    )
    .await;
    if st == StatusCode::OK {
        assert!(
            msgs.iter().any(|m| m["result"]["tools"].is_array()),
            "{msgs:?}"
        );
    }
    st
}

#[tokio::test]
async fn sessions_past_the_cap_close_the_oldest_idle_one() {
    let h = temp_home();
    let s = Server::start(h.path(), &["--max-sessions", "2"]);
    let c = reqwest::Client::new();
    let a = open_session(&c, &s.base).await;
    let b = open_session(&c, &s.base).await;
    // `a` was used last, so `b` is the oldest idle session when a third one opens.
    assert_eq!(lists_tools(&c, &s.base, &a).await, StatusCode::OK);
    let third = open_session(&c, &s.base).await;
    assert_eq!(lists_tools(&c, &s.base, &third).await, StatusCode::OK);
    assert_eq!(lists_tools(&c, &s.base, &a).await, StatusCode::OK);
    assert_eq!(lists_tools(&c, &s.base, &b).await, StatusCode::NOT_FOUND);
}

/// Issue 24 item 8: every route reads bodies up to `--max-body-bytes` (the agent turn took
/// axum's 2 MB default), refuses more with a JSON 413, and answers every error in JSON.
#[tokio::test]
async fn every_route_honours_the_body_limit_and_answers_json_errors() {
    let h = temp_home();
    let s = Server::start(h.path(), &["--max-body-bytes", "8000000"]);
    let c = reqwest::Client::new();
    // 3 MB is within the server's limit: the turn route reads it and answers its own 404.
    let big = json!({"message": "x".repeat(3_000_000)}).to_string();
    let r = c
        .post(format!("{}/api/agents/nobody/turn", s.base))
        .header("content-type", "application/json")
        .body(big)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    let e: Value = r.json().await.unwrap();
    assert_eq!(e["error"]["code"], "unknown_agent");
    // Past the limit, sent without a length (chunked), to a server with a small limit (a
    // body the server reads whole, so the connection closes cleanly): a JSON 413.
    drop(s);
    let s = Server::start(h.path(), &["--max-body-bytes", "1000"]);
    let c = reqwest::Client::new();
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> = vec![Ok(vec![b' '; 1500])];
    let r = c
        .post(format!("{}/api/agents/nobody/turn", s.base))
        .body(reqwest::Body::wrap_stream(futures_util::stream::iter(
            chunks,
        )))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::PAYLOAD_TOO_LARGE);
    let e: Value = r.json().await.unwrap();
    assert_eq!(e["error"]["code"], "payload_too_large");
    assert!(
        e["error"]["message"].as_str().unwrap().contains("1000"),
        "{e}"
    );

    // axum's rejections and rmcp's plain-text answers, as JSON. (A fresh client: the
    // server closed the connection whose body it did not read.)
    let c = reqwest::Client::new();
    let cases: &[(&str, &str, u16)] = &[
        ("PUT", "/api/tools", 405),
        ("DELETE", "/api/invoke", 405),
        ("GET", "/api/tools?format=a&format=b", 400),
        ("GET", "/api/jobs/%FF%FE", 400),
        ("GET", "/mcp", 400),
    ];
    for (method, path, status) in cases {
        let r = c
            .request(method.parse().unwrap(), format!("{}{path}", s.base))
            .header("accept", "application/json, text/event-stream")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), *status, "{method} {path}");
        let ct = r.headers()["content-type"].to_str().unwrap().to_string();
        assert!(ct.starts_with("application/json"), "{method} {path}: {ct}");
        let v: Value = r.json().await.unwrap();
        let message = if *path == "/mcp" {
            &v["error"]["message"]
        } else {
            assert!(v["error"]["code"].is_string(), "{method} {path}: {v}");
            &v["error"]["message"]
        };
        assert!(
            message.as_str().is_some_and(|m| !m.is_empty()),
            "{method} {path}: {v}"
        );
    }
}

/// Issue 24 item 8: an audit-stream client that stopped reading is dropped (its connection
/// closed) once it falls more than the buffer behind, and no call waits for it.
#[tokio::test]
async fn a_stuck_audit_reader_is_dropped_and_calls_never_wait_for_it() {
    let h = temp_home();
    let s = Server::start(h.path(), &[]);
    let mut stuck = TcpStream::connect(addr(&s)).unwrap();
    stuck
        .write_all(b"GET /api/audit/events HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n")
        .unwrap();
    // Wait for the answer's head: the client is subscribed. Then stop reading.
    stuck
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        assert_eq!(stuck.read(&mut byte).unwrap(), 1, "the stream closed early");
        head.push(byte[0]);
    }
    assert!(String::from_utf8_lossy(&head).starts_with("HTTP/1.1 200"));
    // Far more records than the socket buffers and the client's queue hold.
    let c = reqwest::Client::new();
    let batch: Vec<Value> = (0..1000)
        .map(|_| json!({"tool": "system:get_current_time", "args": {}}))
        .collect();
    for _ in 0..100 {
        let r = c
            .post(format!("{}/api/invoke", s.base))
            .json(&batch)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK);
    }
    // Reading what the buffers hold must reach the end: the server closed the connection.
    stuck
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut buf = vec![0u8; 1 << 16];
    let mut tail = String::new();
    loop {
        match stuck.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                tail = String::from_utf8_lossy(&buf[..n]).to_string();
            }
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) => panic!("the stuck reader's connection was never closed: {e}"),
        }
    }
    let _ = tail;
}

#[tokio::test]
async fn when_every_session_is_busy_a_new_one_is_refused_with_503() {
    let h = temp_home();
    let s = Server::start(h.path(), &["--max-sessions", "1"]);
    let c = reqwest::Client::new();
    let a = open_session(&c, &s.base).await;
    // A slow call keeps the only session busy.
    let slow = {
        let (c, base, a) = (c.clone(), s.base.clone(), a.clone());
        tokio::spawn(async move {
            let call = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
                "name": "workflow:slow_echo", "arguments": {"text": "hi", "ms": 5000}}});
            mcp_post(&c, &base, Some(&a), call).await
        })
    };
    // (Time for the call to reach the server; the call runs 5 s.)
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "limits-test", "version": "1"}}});
    let (st, _, msgs) = mcp_post(&c, &s.base, None, init).await;
    assert_eq!(st, StatusCode::SERVICE_UNAVAILABLE, "{msgs:?}");
    assert_eq!(msgs[0]["error"]["code"], -32000, "{msgs:?}");
    assert!(msgs[0]["error"]["message"]
        .as_str()
        .unwrap()
        .contains("--max-sessions"));
    let (st, _, msgs) = slow.await.unwrap();
    assert_eq!(st, StatusCode::OK, "{msgs:?}");
    // The busy session finished its call: it is idle now, and gives way to a new one.
    open_session(&c, &s.base).await;
}
