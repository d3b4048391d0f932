//! Issue 35 items 1 and 5 on the real `tavern serve` over loopback: request bodies have a
//! deadline and a minimum rate, the bytes of bodies held at once are capped (503 before a
//! declared body is read, as a body without a length arrives), and what a closed client held
//! is given back; a request needs exactly one Host (and at most one Origin), the Bearer
//! scheme is case-insensitive, and every connection past the cap gets its 503. Only
//! generous "within N s" guards, no timing assertions.

use crate::server_support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::server_limits::{addr, closed_within};
use reqwest::StatusCode;
use serde_json::{json, Value};
use server_support::{temp_home, Server};

/// Sends `raw` on a new connection and reads the whole answer (the server closes it, or
/// `max` passes); the status and the JSON body, if any.
fn raw_request(addr: &str, raw: &[u8], max: Duration) -> (u16, Value) {
    let mut tcp = TcpStream::connect(addr).unwrap();
    tcp.write_all(raw).unwrap();
    read_answer(&mut tcp, max)
}

/// Reads one answer from `tcp` (until its Content-Length is in, the connection closes or
/// `max` passes); the status (0 when none came) and the JSON body (null when none).
fn read_answer(tcp: &mut TcpStream, max: Duration) -> (u16, Value) {
    tcp.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let deadline = Instant::now() + max;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while Instant::now() < deadline {
        match tcp.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => break,
        }
        if let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&got[..end]).to_ascii_lowercase();
            let len = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok());
            if len.is_some_and(|l| got.len() >= end + 4 + l) {
                break;
            }
        }
    }
    let text = String::from_utf8_lossy(&got).to_string();
    let status = text
        .strip_prefix("HTTP/1.1 ")
        .and_then(|r| r.get(..3))
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .and_then(|(_, b)| serde_json::from_str(b).ok())
        .unwrap_or(Value::Null);
    (status, body)
}

const SLOW: [&str; 4] = ["--idle-timeout-secs", "60", "--header-timeout-secs", "60"];

fn args<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    SLOW.iter().copied().chain(extra.iter().copied()).collect()
}

/// The head of a POST to /api/invoke declaring `len` bytes of body.
fn post_head(len: usize) -> Vec<u8> {
    format!("POST /api/invoke HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {len}\r\n\r\n").into_bytes()
}

#[test]
fn a_body_that_never_finishes_is_closed_at_the_body_timeout() {
    let h = temp_home();
    let s = Server::start(
        h.path(),
        &args(&["--body-timeout-secs", "2", "--min-body-rate", "0"]),
    );
    let mut tcp = TcpStream::connect(addr(&s)).unwrap();
    tcp.write_all(&post_head(100_000)).unwrap();
    tcp.write_all(b"[{\"tool\"").unwrap();
    // One more byte every 200 ms, for ever: the body never finishes.
    let closed = closed_within(&mut tcp, Duration::from_secs(20), |t| {
        let _ = t.write_all(b" ");
    });
    assert!(
        closed,
        "a request whose body never finished was still open after 20 s"
    );
}

#[tokio::test]
async fn a_body_below_the_minimum_rate_is_closed() {
    let h = temp_home();
    let s = Server::start(
        h.path(),
        &args(&["--body-timeout-secs", "600", "--min-body-rate", "1000"]),
    );
    let mut tcp = TcpStream::connect(addr(&s)).unwrap();
    tcp.write_all(&post_head(100_000)).unwrap();
    tcp.write_all(&[b' '; 100]).unwrap();
    // Then nothing: far below 1,000 bytes a second, long before the 600 s deadline.
    let stalled = tokio::task::spawn_blocking(move || {
        closed_within(&mut tcp, Duration::from_secs(25), |_| {})
    })
    .await
    .unwrap();
    assert!(stalled, "a stalled body was still open after 25 s");
    // A body that comes at once is read as before.
    let r = reqwest::Client::new()
        .post(format!("{}/api/invoke", s.base))
        .json(&json!({"tool": "system:get_current_time", "args": {}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
}

#[tokio::test]
async fn bodies_held_at_once_are_capped_and_given_back_when_their_client_goes() {
    let h = temp_home();
    let s = Server::start(
        h.path(),
        &args(&["--max-bodies-bytes", "100000", "--max-body-bytes", "80000"]),
    );
    let a = addr(&s);
    // A declares 80,000 bytes and sends a few: they are reserved at its head.
    let mut holder = TcpStream::connect(&a).unwrap();
    holder.write_all(&post_head(80_000)).unwrap();
    holder.write_all(b"[").unwrap();
    std::thread::sleep(Duration::from_millis(500));
    // B declares 30,000 more: 503 at once, before any of its body is sent. (Until the
    // server has read A's head, B may be let in: then its connection waits for a body,
    // and is given up after a moment to try again.)
    let deadline = Instant::now() + Duration::from_secs(20);
    let (status, body) = loop {
        let (st, v) = raw_request(&a, &post_head(30_000), Duration::from_secs(2));
        if st == 503 || Instant::now() > deadline {
            break (st, v);
        }
    };
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"]["code"], "body_budget_exceeded", "{body}");
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("--max-bodies-bytes"));
    // A body without a length counts as it arrives: 10,000-byte chunks pass the cap at
    // the third (80,000 held + 30,000).
    let mut chunked = TcpStream::connect(&a).unwrap();
    chunked
        .write_all(b"POST /api/invoke HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
        .unwrap();
    for _ in 0..3 {
        chunked
            .write_all(format!("{:x}\r\n{}\r\n", 10_000, " ".repeat(10_000)).as_bytes())
            .unwrap();
    }
    let (st, v) = read_answer(&mut chunked, Duration::from_secs(20));
    assert_eq!(st, 503, "{v}");
    assert_eq!(v["error"]["code"], "body_budget_exceeded", "{v}");
    // A leaves without finishing: what it held is given back, so a body as large as B's
    // is read now.
    drop(holder);
    let c = reqwest::Client::new();
    let call = json!({"tool": "system:get_current_time", "args": {}, "pad": " ".repeat(30_000)});
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let r = c
            .post(format!("{}/api/invoke", s.base))
            .body(format!("{call}"))
            .header("content-type", "application/json")
            .send()
            .await
            .unwrap();
        let st = r.status();
        if st != StatusCode::SERVICE_UNAVAILABLE {
            let v: Value = r.json().await.unwrap();
            assert_ne!(v["error"]["code"], "body_budget_exceeded", "{v}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the bytes a closed client held were never given back"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[test]
fn a_request_without_host_is_refused_400() {
    let h = temp_home();
    let s = Server::start(h.path(), &[]);
    let (st, v) = raw_request(
        &addr(&s),
        b"GET /api/tools HTTP/1.1\r\n\r\n",
        Duration::from_secs(10),
    );
    assert_eq!(st, 400, "{v}");
    assert_eq!(v["error"]["code"], "bad_request", "{v}");
    assert!(v["error"]["message"].as_str().unwrap().contains("Host"));
    // With one, it is served.
    let (st, _) = raw_request(
        &addr(&s),
        b"GET /api/tools HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
        Duration::from_secs(10),
    );
    assert_eq!(st, 200);
}

#[test]
fn two_host_or_two_origin_headers_are_refused_400() {
    let h = temp_home();
    let s = Server::start(h.path(), &[]);
    let cases: [&[u8]; 3] = [
        b"GET /api/tools HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: evil.example\r\n\r\n",
        b"GET /api/tools HTTP/1.1\r\nHost: evil.example\r\nHost: 127.0.0.1\r\n\r\n",
        b"GET /api/tools HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: http://localhost:3000\r\nOrigin: http://evil.example\r\n\r\n",
    ];
    for raw in cases {
        let (st, v) = raw_request(&addr(&s), raw, Duration::from_secs(10));
        let what = String::from_utf8_lossy(raw);
        assert_eq!(st, 400, "{what}: {v}");
        assert_eq!(v["error"]["code"], "bad_request", "{what}: {v}");
    }
    // One of each is served.
    let (st, v) = raw_request(
        &addr(&s),
        b"GET /api/tools HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: http://localhost:3000\r\nConnection: close\r\n\r\n",
        Duration::from_secs(10),
    );
    assert_eq!(st, 200, "{v}");
}

#[tokio::test]
async fn the_bearer_scheme_is_accepted_in_any_case() {
    let h = temp_home();
    let s = Server::start(h.path(), &["--token", "s3cret"]);
    let c = reqwest::Client::new();
    for (value, want) in [
        ("Bearer s3cret", StatusCode::OK),
        ("bearer s3cret", StatusCode::OK),
        ("BEARER s3cret", StatusCode::OK),
        ("bEaReR  s3cret", StatusCode::OK),
        ("bearer wrong", StatusCode::UNAUTHORIZED),
        ("Basic s3cret", StatusCode::UNAUTHORIZED),
        ("bearers3cret", StatusCode::UNAUTHORIZED),
    ] {
        let r = c
            .get(format!("{}/api/tools", s.base))
            .header("authorization", value)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), want, "authorization: {value}");
    }
}

#[test]
fn every_connection_past_the_cap_gets_its_503() {
    let h = temp_home();
    let s = Server::start(h.path(), &args(&["--max-connections", "2"]));
    let a = addr(&s);
    let _held: Vec<TcpStream> = (0..2).map(|_| TcpStream::connect(&a).unwrap()).collect();
    // Wait until both are taken (a third is refused).
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (st, _) = raw_request(
            &a,
            b"GET /api/tools HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
            Duration::from_secs(5),
        );
        if st == 503 {
            break;
        }
        assert!(Instant::now() < deadline, "the cap was never reached");
    }
    // A burst far past the cap, every client keeping its connection open until it has read
    // its answer.
    let n = 400;
    let mut burst: Vec<TcpStream> = (0..n)
        .map(|_| {
            let mut t = TcpStream::connect(&a).unwrap();
            t.write_all(b"GET /api/tools HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                .unwrap();
            t
        })
        .collect();
    let mut unanswered = 0;
    for t in &mut burst {
        let (st, v) = read_answer(t, Duration::from_secs(30));
        if st != 503 || v["error"]["code"] != "too_many_connections" {
            unanswered += 1;
        }
    }
    assert_eq!(
        unanswered, 0,
        "{unanswered} of {n} connections past the cap got no 503"
    );
}

#[test]
fn without_a_minimum_rate_an_idle_connection_is_still_closed_on_time() {
    let h = temp_home();
    let s = Server::start(
        h.path(),
        &[
            "--min-body-rate",
            "0",
            "--body-timeout-secs",
            "600",
            "--idle-timeout-secs",
            "1",
            "--header-timeout-secs",
            "60",
        ],
    );
    let mut tcp = TcpStream::connect(addr(&s)).unwrap();
    let body = json!({"tool": "system:get_current_time", "args": {}}).to_string();
    tcp.write_all(&post_head(body.len())).unwrap();
    // The body comes after the connection's timer has fired once with it open.
    std::thread::sleep(Duration::from_millis(2500));
    tcp.write_all(body.as_bytes()).unwrap();
    let (st, v) = read_answer(&mut tcp, Duration::from_secs(20));
    assert_eq!(st, 200, "{v}");
    // The idle close does not wait for the body's (600 s) deadline.
    assert!(
        closed_within(&mut tcp, Duration::from_secs(20), |_| {}),
        "an idle connection was still open after 20 s"
    );
}
