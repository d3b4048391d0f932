//! Replicas sharing a Redis store (`tavern serve --store redis://…`), on the real binary, a
//! real `redis-server` on a free loopback port and loopback HTTP: jobs made on one replica
//! are read, streamed and cancelled on another; jobs of a replica killed with SIGKILL end
//! `succeeded` on another; a rate limit of N allows exactly N calls across replicas; the
//! audit of a call on one replica reaches another's stream; a store that cannot be reached
//! at start is a clear error. No timing assertions: only generous "within N s" guards.

use crate::server_support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{json, Value};
use server_support::{get_job, tavern, temp_home, wait_status, Server};

/// A `redis-server` of the test's own (no persistence) on a free loopback port; stopped on
/// drop.
pub struct Redis {
    child: Child,
    /// `redis://127.0.0.1:<port>`.
    pub url: String,
    port: u16,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Redis {
    /// Starts one and waits until it answers PING.
    pub fn start() -> Redis {
        Self::start_on(None)
    }

    /// Starts one on `port` (a free one when `None`).
    pub fn start_on(port: Option<u16>) -> Redis {
        for _ in 0..5 {
            let port = port.unwrap_or_else(free_port);
            let child = Command::new("redis-server")
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args(["--save", "", "--appendonly", "no"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("redis-server is installed (.ci/run installs Debian's redis-server)");
            let mut r = Redis {
                child,
                url: format!("redis://127.0.0.1:{port}"),
                port,
            };
            let deadline = Instant::now() + Duration::from_secs(20);
            while Instant::now() < deadline {
                if r.ping() {
                    return r;
                }
                if let Ok(Some(_)) = r.child.try_wait() {
                    break; // the port was taken meanwhile: try another
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        panic!("redis-server did not start");
    }

    fn ping(&self) -> bool {
        let Ok(mut s) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
        if s.write_all(b"PING\r\n").is_err() {
            return false;
        }
        let mut buf = [0u8; 16];
        matches!(s.read(&mut buf), Ok(n) if buf[..n].starts_with(b"+PONG"))
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn replica(home: &Path, redis: &Redis, extra: &[&str]) -> Server {
    let mut args = vec!["--store", redis.url.as_str()];
    args.extend_from_slice(extra);
    Server::start(home, &args)
}

async fn post_job(c: &reqwest::Client, base: &str, body: Value) -> String {
    let r = c
        .post(format!("{base}/api/jobs"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::ACCEPTED);
    let v: Value = r.json().await.unwrap();
    v["id"].as_str().expect("job id").to_string()
}

fn slow(text: &str, ms: u64) -> Value {
    json!({"tool": "workflow:slow_echo", "args": {"text": text, "ms": ms}})
}

/// `(event, id, data)` of each server-sent event of a text.
fn parse_sse(text: &str) -> Vec<(String, String, Value)> {
    text.split("\n\n")
        .filter_map(|block| {
            let (mut ev, mut id, mut data) = (None, String::new(), None);
            for line in block.lines() {
                if let Some(v) = line.strip_prefix("event: ") {
                    ev = Some(v.to_string());
                } else if let Some(v) = line.strip_prefix("id: ") {
                    id = v.to_string();
                } else if let Some(v) = line.strip_prefix("data: ") {
                    data = serde_json::from_str(v).ok();
                }
            }
            Some((ev?, id, data?))
        })
        .collect()
}

#[test]
fn a_store_that_cannot_be_reached_at_start_is_a_clear_error() {
    let h = temp_home();
    let port = free_port();
    let out = Command::new(tavern())
        .arg("--home")
        .arg(h.path())
        .args(["serve", "--addr", "127.0.0.1:0", "--store"])
        .arg(format!("redis://127.0.0.1:{port}"))
        .env_remove("TAVERN_STORE")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot reach the store at redis://127.0.0.1"),
        "{err}"
    );
    let out = Command::new(tavern())
        .arg("--home")
        .arg(h.path())
        .args(["serve", "--addr", "127.0.0.1:0", "--store", "http://x"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not a Redis URL"), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn jobs_made_on_one_replica_are_read_streamed_and_cancelled_on_another() {
    let redis = Redis::start();
    let h = temp_home();
    let a = replica(h.path(), &redis, &[]);
    let b = replica(h.path(), &redis, &[]);
    let c = reqwest::Client::new();

    // Made on A, read and streamed on B.
    let id = post_job(&c, &a.base, slow("shared", 300)).await;
    let r = c
        .get(format!("{}/api/jobs/{id}/events", b.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let text = tokio::time::timeout(Duration::from_secs(60), r.text())
        .await
        .expect("the stream ends after `end`")
        .unwrap();
    let events = parse_sse(&text);
    let names: Vec<&str> = events.iter().map(|e| e.0.as_str()).collect();
    assert_eq!(names.first(), Some(&"status"), "{names:?}");
    assert_eq!(names.last(), Some(&"end"), "{names:?}");
    assert!(names.contains(&"node"), "{names:?}");
    let end = &events.last().unwrap().2;
    assert_eq!(end["status"], "succeeded", "{end}");
    assert_eq!(end["result"]["results"][0]["value"], "shared");
    let (st, on_b) = get_job(&c, &b.base, &id).await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(on_b["status"], "succeeded");
    assert_eq!(on_b["attempts"], 1);
    let (_, on_a) = get_job(&c, &a.base, &id).await;
    assert_eq!(on_a["result"], on_b["result"]);
    // A reconnecting client resumes on A after the last event B sent it.
    let (_, mid_id, _) = &events[events.len() - 2];
    let rest = c
        .get(format!("{}/api/jobs/{id}/events", a.base))
        .header("last-event-id", mid_id.as_str())
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let rest = parse_sse(&rest);
    assert_eq!(rest.len(), 1, "{rest:?}");
    assert_eq!(rest[0].0, "end");
    // Both list it.
    let listed: Value = c
        .get(format!("{}/api/jobs", b.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(listed["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .any(|j| j["id"] == id.as_str()));

    // A long job made on B is cancelled through A: the running replica stops it.
    let long = post_job(&c, &b.base, slow("long", 120_000)).await;
    wait_status(&c, &a.base, &long, &["running"], Duration::from_secs(30)).await;
    let r = c
        .delete(format!("{}/api/jobs/{long}", a.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let j = wait_status(&c, &b.base, &long, &["cancelled"], Duration::from_secs(30)).await;
    assert_eq!(j["error"]["code"], "cancelled");

    // Unknown ids are 404 on every replica.
    let (st, e) = get_job(&c, &b.base, "job-nope-1").await;
    assert_eq!(st, StatusCode::NOT_FOUND);
    assert_eq!(e["error"]["code"], "unknown_job");
}

#[tokio::test(flavor = "multi_thread")]
async fn ten_jobs_on_a_replica_killed_with_sigkill_all_succeed_on_another() {
    let redis = Redis::start();
    let h = temp_home();
    let lease = ["--job-lease-ms", "1500"];
    let a = replica(h.path(), &redis, &lease);
    let c = reqwest::Client::new();
    let mut ids = Vec::new();
    for i in 0..10 {
        ids.push(post_job(&c, &a.base, slow(&format!("job {i}"), 3000)).await);
    }
    // All ten run on A before B exists.
    for id in &ids {
        let j = wait_status(&c, &a.base, id, &["running"], Duration::from_secs(30)).await;
        assert_eq!(j["attempts"], 1, "{j}");
    }
    let b = replica(h.path(), &redis, &lease);
    drop(a); // SIGKILL
    for (i, id) in ids.iter().enumerate() {
        let j = wait_status(
            &c,
            &b.base,
            id,
            &["succeeded", "failed", "cancelled"],
            Duration::from_secs(90),
        )
        .await;
        assert_eq!(j["status"], "succeeded", "{j}");
        assert_eq!(j["attempts"], 2, "{j}");
        assert_eq!(j["result"]["results"][0]["value"], format!("job {i}"));
    }
    // The second attempt is in the job's events.
    let text = c
        .get(format!("{}/api/jobs/{}/events", b.base, ids[0]))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let attempts: Vec<Value> = parse_sse(&text)
        .into_iter()
        .filter(|e| e.0 == "status" && e.2["status"] == "running")
        .map(|e| e.2["attempt"].clone())
        .collect();
    assert_eq!(attempts, [json!(1), json!(2)]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rate_limit_of_n_allows_exactly_n_calls_across_replicas() {
    let redis = Redis::start();
    let h = temp_home();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    std::fs::create_dir_all(h.path().join("scripts")).unwrap();
    std::fs::copy(
        root.join("scripts/rate_limit.lua"),
        h.path().join("scripts/rate_limit.lua"),
    )
    .unwrap();
    std::fs::write(
        h.path().join("tavern.toml"),
        "[scripts.rate_limit]\nenabled = true\nmax_calls = 5\nwindow_s = 3600\n",
    )
    .unwrap();
    let a = replica(h.path(), &redis, &[]);
    let b = replica(h.path(), &redis, &[]);
    let c = reqwest::Client::new();
    let mut allowed = 0;
    let mut refused = 0;
    for i in 0..12 {
        let base = if i % 2 == 0 { &a.base } else { &b.base };
        let r: Value = c
            .post(format!("{base}/api/invoke"))
            .json(&json!({"tool": "LuaDemo:echo", "args": {"text": "hi"}}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if r["results"][0]["ok"] == true {
            allowed += 1;
        } else {
            assert_eq!(r["results"][0]["error"]["code"], "vetoed", "{r}");
            assert!(r.to_string().contains("rate limit"), "{r}");
            refused += 1;
        }
    }
    assert_eq!((allowed, refused), (5, 7));
}

#[tokio::test(flavor = "multi_thread")]
async fn the_audit_of_a_call_on_one_replica_reaches_another() {
    let redis = Redis::start();
    let h = temp_home();
    let a = replica(h.path(), &redis, &[]);
    let b = replica(h.path(), &redis, &[]);
    let c = reqwest::Client::new();
    let mut stream = c
        .get(format!("{}/api/audit/events", b.base))
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), StatusCode::OK);
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut seen = String::new();
    let marker = "audit-across-replicas";
    // Calls on A until one of them shows on B's stream (B's client is announced to A
    // through the store within a second or two).
    'outer: loop {
        assert!(Instant::now() < deadline, "no record reached B: {seen}");
        let r = c
            .post(format!("{}/api/invoke", a.base))
            .json(&json!({"tool": "LuaDemo:echo", "args": {"text": marker}}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        let until = Instant::now() + Duration::from_millis(500);
        while let Ok(Ok(Some(chunk))) = tokio::time::timeout(
            until.saturating_duration_since(Instant::now()),
            stream.chunk(),
        )
        .await
        {
            seen.push_str(&String::from_utf8_lossy(&chunk));
            if seen.contains("LuaDemo:echo") {
                break 'outer;
            }
        }
    }
    let rec = parse_sse(&seen)
        .into_iter()
        .find(|e| e.0 == "audit" && e.2.to_string().contains("LuaDemo:echo"))
        .expect("an audit event");
    assert_eq!(rec.2["tool"], "LuaDemo:echo", "{}", rec.2);
}

/// A TCP proxy on a free loopback port handing each new connection to the next of
/// `backends` (`host:port`) in turn; runs until the runtime ends.
async fn round_robin(backends: Vec<String>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut n = 0usize;
        loop {
            let Ok((mut inbound, _)) = listener.accept().await else {
                return;
            };
            let to = backends[n % backends.len()].clone();
            n += 1;
            tokio::spawn(async move {
                if let Ok(mut out) = tokio::net::TcpStream::connect(&to).await {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut out).await;
                }
            });
        }
    });
    format!("http://{addr}")
}

fn python_replicas(url: &str, mode: &str) {
    if Command::new("python3")
        .args(["-c", "import mcp"])
        .status()
        .map_or(true, |s| !s.success())
    {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "python3 with the `mcp` package is required under CI"
        );
        eprintln!("skipping: python3 with the `mcp` package is not installed");
        return;
    }
    let script = format!(
        "{}/tests/server/mcp_replicas.py",
        env!("CARGO_MANIFEST_DIR")
    );
    let out = Command::new("python3")
        .arg(script)
        .args([url, mode])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.lines().last().is_some_and(|l| l.starts_with("OK ")),
        "python MCP client ({mode}) failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_python_client_works_through_a_round_robin_balancer_in_both_protocol_modes() {
    let redis = Redis::start();
    let h = temp_home();
    let a = replica(h.path(), &redis, &[]);
    let b = replica(h.path(), &redis, &[]);
    let hostport = |s: &Server| s.base.trim_start_matches("http://").to_string();
    let proxy = round_robin(vec![hostport(&a), hostport(&b)]).await;
    let url = format!("{proxy}/mcp");
    let u = url.clone();
    tokio::task::spawn_blocking(move || python_replicas(&u, "legacy"))
        .await
        .unwrap();
    tokio::task::spawn_blocking(move || python_replicas(&url, "2026-07-28"))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_store_that_goes_away_fails_only_what_needs_it_and_comes_back() {
    let redis = Redis::start();
    let port = redis.port;
    let h = temp_home();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    std::fs::create_dir_all(h.path().join("scripts")).unwrap();
    std::fs::copy(
        root.join("scripts/rate_limit.lua"),
        h.path().join("scripts/rate_limit.lua"),
    )
    .unwrap();
    std::fs::write(
        h.path().join("tavern.toml"),
        "[scripts.rate_limit]\nenabled = true\nmax_calls = 1000\nwindow_s = 3600\n",
    )
    .unwrap();
    let a = replica(h.path(), &redis, &[]);
    let c = reqwest::Client::new();
    let echo = |base: String| {
        let c = c.clone();
        async move {
            let r = c
                .post(format!("{base}/api/invoke"))
                .json(&json!({"tool": "LuaDemo:echo", "args": {"text": "hi"}}))
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), StatusCode::OK);
            let v: Value = r.json().await.unwrap();
            v
        }
    };
    assert_eq!(echo(a.base.clone()).await["results"][0]["ok"], true);
    drop(redis);
    // Plain calls keep working (the rate limit lets them through while it cannot count).
    for _ in 0..3 {
        let v = echo(a.base.clone()).await;
        assert_eq!(v["results"][0]["ok"], true, "{v}");
    }
    // What needs the store says so.
    let r = c
        .post(format!("{}/api/jobs", a.base))
        .json(&slow("x", 1))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
    let e: Value = r.json().await.unwrap();
    assert_eq!(e["error"]["code"], "store_unavailable", "{e}");
    let (st, e) = get_job(&c, &a.base, "job-x-1").await;
    assert_eq!(st, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(e["error"]["code"], "store_unavailable");
    // The store comes back on the same port: jobs work again, no restart needed.
    let _back = Redis::start_on(Some(port));
    let deadline = Instant::now() + Duration::from_secs(60);
    let id = loop {
        let r = c
            .post(format!("{}/api/jobs", a.base))
            .json(&slow("back", 10))
            .send()
            .await
            .unwrap();
        if r.status() == StatusCode::ACCEPTED {
            let v: Value = r.json().await.unwrap();
            break v["id"].as_str().unwrap().to_string();
        }
        assert!(Instant::now() < deadline, "the store was not reconnected");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let j = wait_status(&c, &a.base, &id, &["succeeded"], Duration::from_secs(60)).await;
    assert_eq!(j["result"]["results"][0]["value"], "back");
}

/// One JSON-RPC request over Streamable HTTP (`session`: the `Mcp-Session-Id`); answers
/// the session id the server gave and the response (from JSON or an SSE body).
async fn mcp(
    c: &reqwest::Client,
    base: &str,
    session: Option<&str>,
    body: Value,
) -> (Option<String>, Value) {
    let mut req = c
        .post(format!("{base}/mcp"))
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-protocol-version", "2025-11-25");
    if let Some(s) = session {
        req = req.header("mcp-session-id", s);
    }
    let r = req.json(&body).send().await.unwrap();
    let sid = r
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let text = r.text().await.unwrap();
    let v = serde_json::from_str(&text).unwrap_or_else(|_| {
        text.lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
            .find(|v| v.get("id").is_some())
            .unwrap_or(Value::Null)
    });
    (sid, v)
}

async fn mcp_session(c: &reqwest::Client, base: &str) -> String {
    let (sid, init) = mcp(
        c,
        base,
        None,
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}},
            "clientInfo": {"name": "replicas-test", "version": "1"}}}),
    )
    .await;
    assert!(init["result"].is_object(), "{init}");
    let sid = sid.expect("a session id");
    let _ = mcp(
        c,
        base,
        Some(&sid),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await;
    sid
}

#[tokio::test(flavor = "multi_thread")]
async fn an_mcp_task_made_on_one_replica_is_polled_and_cancelled_on_another() {
    let redis = Redis::start();
    let h = temp_home();
    let a = replica(h.path(), &redis, &[]);
    let b = replica(h.path(), &redis, &[]);
    let c = reqwest::Client::new();
    let sa = mcp_session(&c, &a.base).await;
    let call = |ms: u64, id: u64| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
            "name": "workflow_slow_echo", "arguments": {"text": "tasked", "ms": ms}}})
    };
    let (_, r) = mcp(&c, &a.base, Some(&sa), call(2500, 2)).await;
    let task = r["result"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("a slow call becomes a task: {r}"))
        .to_string();
    // B polls it (through a session of its own) until it completes.
    let sb = mcp_session(&c, &b.base).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    let done = loop {
        let (_, g) = mcp(
            &c,
            &b.base,
            Some(&sb),
            json!({"jsonrpc": "2.0", "id": 3, "method": "tasks/get", "params": {"taskId": task}}),
        )
        .await;
        if g["result"]["status"] != "working" {
            break g;
        }
        assert!(Instant::now() < deadline, "task still working: {g}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(done["result"]["status"], "completed", "{done}");
    assert!(done.to_string().contains("tasked"), "{done}");
    // A long one made on B is cancelled through A.
    let (_, r) = mcp(&c, &b.base, Some(&sb), call(120_000, 4)).await;
    let long = r["result"]["taskId"].as_str().expect("a task").to_string();
    let (_, x) = mcp(
        &c,
        &a.base,
        Some(&sa),
        json!({"jsonrpc": "2.0", "id": 5, "method": "tasks/cancel", "params": {"taskId": long}}),
    )
    .await;
    assert!(x.get("error").is_none(), "{x}");
    let j = wait_status(&c, &a.base, &long, &["cancelled"], Duration::from_secs(30)).await;
    assert_eq!(j["error"]["code"], "cancelled");
}

/// A connection of the test's own to the store, to read what the replicas keep there.
async fn store_conn(redis: &Redis) -> redis::aio::MultiplexedConnection {
    redis::Client::open(redis.url.as_str())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

/// The store's job accounting: its total, and the sum of the per-job sizes (equal when
/// no write was half done).
async fn store_bytes(con: &mut redis::aio::MultiplexedConnection) -> (u64, u64) {
    let used: Option<u64> = redis::cmd("GET")
        .arg("tavern:jobs:used")
        .query_async(con)
        .await
        .unwrap();
    let sizes: Vec<u64> = redis::cmd("HVALS")
        .arg("tavern:jobs:sizes")
        .query_async(con)
        .await
        .unwrap();
    (used.unwrap_or(0), sizes.iter().sum())
}

async fn assert_expired(c: &reqwest::Client, base: &str, id: &str) {
    let (st, e) = get_job(c, base, id).await;
    assert_eq!(st, StatusCode::GONE, "{id} on {base}: {e}");
    assert_eq!(e["error"]["code"], "job_expired", "{e}");
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--max-job-bytes"),
        "{e}"
    );
}

/// Runs one job of `text` through `base` to its end (on whichever replica takes it) and
/// checks the store stays within `budget` with its total equal to the jobs' sizes.
async fn finish_job(
    c: &reqwest::Client,
    base: &str,
    con: &mut redis::aio::MultiplexedConnection,
    text: &str,
    budget: u64,
) -> (String, Value) {
    let id = post_job(c, base, slow(text, 10)).await;
    let j = wait_status(
        c,
        base,
        &id,
        &["succeeded", "failed", "cancelled"],
        Duration::from_secs(60),
    )
    .await;
    assert_eq!(j["status"], "succeeded", "{j}");
    assert_eq!(j["result"]["results"][0]["value"], text);
    let (used, sizes) = store_bytes(con).await;
    assert!(
        used <= budget,
        "the store keeps {used} bytes of jobs, past {budget}"
    );
    assert_eq!(used, sizes, "the total and the jobs' sizes disagree");
    (id, j)
}

#[tokio::test(flavor = "multi_thread")]
async fn the_job_byte_budget_holds_in_the_store_across_replicas() {
    let redis = Redis::start();
    let mut con = store_conn(&redis).await;
    let h = temp_home();
    let budget: u64 = 24_000;
    let opts = ["--max-job-bytes", "24000", "--job-lease-ms", "1500"];
    let a = replica(h.path(), &redis, &opts);
    let c = reqwest::Client::new();
    let text = |i: usize| format!("{i:03}{}", "x".repeat(5_000));

    // A alone: jobs finish on A until the oldest is evicted to keep the budget.
    let mut on_a = Vec::new();
    let mut n = 0;
    let first = loop {
        let (id, j) = finish_job(&c, &a.base, &mut con, &text(n), budget).await;
        n += 1;
        on_a.push((id, j["replica"].clone()));
        let (st, _) = get_job(&c, &a.base, &on_a[0].0).await;
        if st != StatusCode::OK {
            break on_a[0].0.clone();
        }
        assert!(
            n < 10,
            "no job was evicted after {n} jobs of 5 kB with a 24 kB budget"
        );
    };
    assert_expired(&c, &a.base, &first).await;
    // Kept results are whole, and counted at least at their size.
    let last = &on_a.last().unwrap().0;
    let size: u64 = redis::cmd("HGET")
        .arg("tavern:jobs:sizes")
        .arg(last)
        .query_async(&mut con)
        .await
        .unwrap();
    assert!(size > 5_000, "{size}");
    // An evicted job leaves the listing and its events answer 410 too.
    let listed: Value = c
        .get(format!("{}/api/jobs", a.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(!listed.to_string().contains(&first), "{listed}");
    let r = c
        .get(format!("{}/api/jobs/{first}/events", a.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::GONE);

    // A long job runs on A; B starts, A is killed mid-job, B runs it again.
    // (Long enough to outlast B's start on a loaded machine.)
    let long = post_job(&c, &a.base, slow(&text(99), 6_000)).await;
    wait_status(&c, &a.base, &long, &["running"], Duration::from_secs(30)).await;
    let b = replica(h.path(), &redis, &opts);
    assert_expired(&c, &b.base, &first).await;
    drop(a); // SIGKILL
    let j = wait_status(
        &c,
        &b.base,
        &long,
        &["succeeded", "failed", "cancelled"],
        Duration::from_secs(90),
    )
    .await;
    assert_eq!(j["status"], "succeeded", "{j}");
    assert_eq!(j["attempts"], 2, "{j}");
    let on_b = j["replica"].clone();
    assert_ne!(on_b, on_a[0].1, "the rerun was on the other replica");

    // Jobs finished on B evict the jobs finished on A, oldest first.
    let newest_on_a = on_a.last().unwrap().0.clone();
    let mut more = 0;
    loop {
        let (_, j) = finish_job(&c, &b.base, &mut con, &text(100 + more), budget).await;
        assert_eq!(j["replica"], on_b, "{j}");
        more += 1;
        let (st, _) = get_job(&c, &b.base, &newest_on_a).await;
        if st != StatusCode::OK {
            break;
        }
        assert!(more < 10, "jobs finished on A were never evicted by B");
    }
    for (id, _) in &on_a {
        assert_expired(&c, &b.base, id).await;
    }
    let (used, sizes) = store_bytes(&mut con).await;
    assert!(used <= budget && used == sizes, "{used} {sizes}");
}

#[tokio::test(flavor = "multi_thread")]
async fn running_jobs_past_the_store_budget_refuse_new_ones() {
    let redis = Redis::start();
    let h = temp_home();
    let a = replica(h.path(), &redis, &["--max-job-bytes", "600"]);
    let b = replica(h.path(), &redis, &["--max-job-bytes", "600"]);
    let c = reqwest::Client::new();
    // One running job alone retains more than 600 bytes (its record and first events).
    let long = post_job(&c, &a.base, slow("long", 120_000)).await;
    wait_status(&c, &b.base, &long, &["running"], Duration::from_secs(30)).await;
    let r = c
        .post(format!("{}/api/jobs", b.base))
        .json(&slow("more", 1))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
    let e: Value = r.json().await.unwrap();
    assert_eq!(e["error"]["code"], "job_budget_exceeded", "{e}");
    assert!(e.to_string().contains("--max-job-bytes"), "{e}");
    // Once it ends it is evicted (its bytes alone pass the budget): there is room again.
    let r = c
        .delete(format!("{}/api/jobs/{long}", b.base))
        .send()
        .await
        .unwrap();
    assert!(r.status() == StatusCode::OK || r.status() == StatusCode::GONE);
    // (The new job, too, is evicted as soon as it ends: its bytes alone pass 600.)
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let r = c
            .post(format!("{}/api/jobs", a.base))
            .json(&slow("after", 1))
            .send()
            .await
            .unwrap();
        if r.status() == StatusCode::ACCEPTED {
            break;
        }
        assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert!(
            Instant::now() < deadline,
            "no room after the long job ended"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_expired(&c, &a.base, &long).await;
}

/// A home with one agent, `reader`, whose scripted model reads `weather.now` from the world
/// state at every turn; the home's `world.json` says it rains.
fn world_home() -> tempfile::TempDir {
    let h = temp_home();
    let p = h.path();
    std::fs::create_dir_all(p.join("agents")).unwrap();
    std::fs::create_dir_all(p.join("replies")).unwrap();
    std::fs::write(
        p.join("agents/reader.json"),
        r#"{"id": "reader", "description": "Reads the weather.", "tool_ids_inventory": ["ReadWorldStateTool"], "tool_call_format": "action", "manual_style": "action", "max_turns": 2}"#,
    )
    .unwrap();
    let read = "<ACTION>\n  <ReadWorldStateTool>\n    <path>weather.now</path>\n  </ReadWorldStateTool>\n</ACTION>";
    std::fs::write(p.join("replies/reader.json"), json!([read]).to_string()).unwrap();
    std::fs::write(p.join("world.json"), r#"{"weather": {"now": "rain"}}"#).unwrap();
    std::fs::write(
        p.join("tavern.toml"),
        format!(
            "[llm]\nbase_url = \"scripted:{}\"\nstream = false\n",
            p.join("replies/reader.json").display()
        ),
    )
    .unwrap();
    h
}

/// What the agent `reader` reads as `weather.now` in a new chat session on `base`.
async fn weather_seen(c: &reqwest::Client, base: &str) -> Value {
    let r = c
        .post(format!("{base}/api/agents/reader/turn"))
        .json(&json!({"message": "weather?"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let v: Value = r.json().await.unwrap();
    let call = &v["turn"]["calls"][0];
    assert_eq!(call["tool"], "ReadWorldStateTool", "{v}");
    assert_eq!(call["ok"], true, "{v}");
    call["value"].clone()
}

#[tokio::test(flavor = "multi_thread")]
async fn served_agents_share_the_world_state_in_the_store() {
    let redis = Redis::start();
    let h = world_home();
    let a = replica(h.path(), &redis, &[]);
    let b = replica(h.path(), &redis, &[]);
    let c = reqwest::Client::new();
    // Nothing in the store yet: both read the home's world.json.
    assert_eq!(weather_seen(&c, &a.base).await, "rain");
    // The world changes in the store (as a host sharing it would write it) …
    let store = tavern::internal::store::redis::RedisStore::connect(&redis.url)
        .await
        .unwrap();
    let world = tavern::StoreWorldState::new(
        std::sync::Arc::new(store),
        "home",
        Some(tokio::runtime::Handle::current()),
    );
    let w = world.clone();
    tokio::task::spawn_blocking(move || {
        use tavern::WorldState;
        w.set("weather.now", json!("sun")).unwrap();
    })
    .await
    .unwrap();
    // … and the agents of both replicas see it.
    assert_eq!(weather_seen(&c, &b.base).await, "sun");
    assert_eq!(weather_seen(&c, &a.base).await, "sun");
    // Without a store, a server's world is its own (world.json).
    let solo = Server::start(h.path(), &[]);
    assert_eq!(weather_seen(&c, &solo.base).await, "rain");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_scripts_api_world_set_on_one_replica_is_the_world_of_every_replica() {
    let redis = Redis::start();
    let h = world_home();
    let p = h.path().join("plugins/Weather");
    std::fs::create_dir_all(&p).unwrap();
    std::fs::write(
        p.join("plugin.yaml"),
        "name: Weather\npermissions:\n  world: write\n",
    )
    .unwrap();
    std::fs::write(
        p.join("main.lua"),
        r#"api.tools.register{ id = "set", description = "Sets the weather.",
  handler = function(args) api.world.set("weather.now", args.now) return api.world.get("weather") end }"#,
    )
    .unwrap();
    let a = replica(h.path(), &redis, &[]);
    let b = replica(h.path(), &redis, &[]);
    let c = reqwest::Client::new();
    assert_eq!(weather_seen(&c, &b.base).await, "rain");
    // A script on replica A changes the world …
    let r: Value = c
        .post(format!("{}/api/invoke", a.base))
        .json(&json!({"tool": "Weather:set", "args": {"now": "hail"}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(r["results"][0]["ok"], json!(true), "{r}");
    // … B's agents read it, and so does a host on the same store.
    assert_eq!(weather_seen(&c, &b.base).await, "hail");
    let store = tavern::internal::store::redis::RedisStore::connect(&redis.url)
        .await
        .unwrap();
    let world = tavern::StoreWorldState::new(
        std::sync::Arc::new(store),
        "home",
        Some(tokio::runtime::Handle::current()),
    );
    let seen = tokio::task::spawn_blocking(move || {
        use tavern::WorldState;
        world.get("weather.now")
    })
    .await
    .unwrap();
    assert_eq!(seen, Some(json!("hail")));
}

/// `(id, data)` of each event of an SSE body (`data` null for an event without one).
fn sse_events(text: &str) -> Vec<(String, Value)> {
    text.split("\n\n")
        .filter_map(|block| {
            let mut id = None;
            let mut data = Value::Null;
            for line in block.lines() {
                if let Some(v) = line.strip_prefix("id:") {
                    id = Some(v.trim().to_string());
                } else if let Some(v) = line.strip_prefix("data:") {
                    data = serde_json::from_str(v.trim()).unwrap_or(Value::Null);
                }
            }
            Some((id?, data))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn last_event_id_on_another_replica_replays_the_missed_events_from_the_store() {
    let redis = Redis::start();
    let h = temp_home();
    let a = replica(h.path(), &redis, &[]);
    let b = replica(h.path(), &redis, &[]);
    let c = reqwest::Client::new();
    let sid = mcp_session(&c, &a.base).await;
    // A call with a progress token is answered as an event stream by A.
    let r = c
        .post(format!("{}/mcp", a.base))
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-protocol-version", "2025-11-25")
        .header("mcp-session-id", &sid)
        .json(
            &json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
            "name": "workflow_slow_echo", "arguments": {"text": "replayed", "ms": 50},
            "_meta": {"progressToken": "p7"}}}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let events = sse_events(&r.text().await.unwrap());
    assert!(events.len() >= 2, "a priming event, then more: {events:?}");
    assert!(
        events[0].1.is_null(),
        "the stream opens with a priming event: {events:?}"
    );
    assert_eq!(events.last().unwrap().1["id"], json!(7), "{events:?}");
    // The client lost A after the priming event: B replays everything after it.
    let r = c
        .get(format!("{}/mcp", b.base))
        .header("accept", "text/event-stream")
        .header("mcp-protocol-version", "2025-11-25")
        .header("mcp-session-id", &sid)
        .header("last-event-id", &events[0].0)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let replayed = sse_events(&r.text().await.unwrap());
    assert_eq!(
        replayed,
        events[1..].to_vec(),
        "the same events with the same ids"
    );
    assert!(
        replayed.last().unwrap().1["result"]
            .to_string()
            .contains("replayed"),
        "{replayed:?}"
    );
    // From the middle: only what followed.
    if events.len() > 2 {
        let r = c
            .get(format!("{}/mcp", b.base))
            .header("accept", "text/event-stream")
            .header("mcp-protocol-version", "2025-11-25")
            .header("mcp-session-id", &sid)
            .header("last-event-id", &events[1].0)
            .send()
            .await
            .unwrap();
        assert_eq!(sse_events(&r.text().await.unwrap()), events[2..].to_vec());
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn tavern_world_shows_the_stores_world_and_tells_subscribers_when_it_changes() {
    use std::io::Write as _;
    let redis = Redis::start();
    let h = world_home();
    let (mut child, mut stdin, rx) =
        server_support::spawn_mcp_args(h.path(), &["--store", redis.url.as_str()]);
    let mut send = |v: Value| {
        writeln!(stdin, "{v}").expect("write");
        stdin.flush().expect("flush");
    };
    let answer = |id: u64, notes: &mut Vec<Value>| loop {
        let v = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("an answer within 30 s");
        if v.get("id") == Some(&json!(id)) {
            return v;
        }
        notes.push(v);
    };
    let mut notes = Vec::new();
    send(
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "world-test", "version": "1"}}}),
    );
    answer(0, &mut notes);
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let read = json!({"jsonrpc": "2.0", "id": 1, "method": "resources/read",
        "params": {"uri": "tavern://world"}});
    send(read.clone());
    let r = answer(1, &mut notes);
    let text = r["result"]["contents"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert_eq!(
        serde_json::from_str::<Value>(text).ok(),
        Some(json!({"weather": {"now": "rain"}})),
        "the store holds no world yet: world.json shows: {r}"
    );
    send(
        json!({"jsonrpc": "2.0", "id": 2, "method": "resources/subscribe",
        "params": {"uri": "tavern://world"}}),
    );
    answer(2, &mut notes);
    // A host sharing the store changes the world.
    let store = tavern::internal::store::redis::RedisStore::connect(&redis.url)
        .await
        .unwrap();
    let world = tavern::StoreWorldState::new(
        std::sync::Arc::new(store),
        "home",
        Some(tokio::runtime::Handle::current()),
    );
    tokio::task::spawn_blocking(move || {
        use tavern::WorldState;
        world.set("weather.now", json!("sun")).unwrap();
    })
    .await
    .unwrap();
    let updated = loop {
        let v = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("notifications/resources/updated within 30 s");
        if v["method"] == json!("notifications/resources/updated") {
            break v;
        }
    };
    assert_eq!(
        updated["params"]["uri"],
        json!("tavern://world"),
        "{updated}"
    );
    let mut read = read;
    read["id"] = json!(3);
    send(read);
    let r = answer(3, &mut notes);
    let text = r["result"]["contents"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert_eq!(
        serde_json::from_str::<Value>(text).ok(),
        Some(json!({"weather": {"now": "sun"}})),
        "{r}"
    );
    let _ = child.kill();
    let _ = child.wait();
}
