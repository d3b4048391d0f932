//! Load test of `tavern serve` (not a criterion bench: whole servers under load).
//!
//! On loopback only, bounded in time (~1 minute): `tools/call` of an echo tool over MCP
//! Streamable HTTP and over REST at 1, 16 and 64 concurrent clients, beside the official
//! Python SDK's own server (`benches/fastmcp_echo.py`, also in its JSON-response mode at 16) under the same load; p99 at a fixed
//! 1,000 calls/s; MCP `resources/read` and `prompts/get` at 1, 16 and 64 clients; two replicas sharing a `redis-server` (`--store`): jobs per second made on
//! one replica and read on the other, and MCP calls per second over both; and a reload under
//! `--watch` during load (calls lost, memory before/after).
//! Writes `target/bench-figures/serve_load.json` (`{"<row id>": "<figure>"}`).
//!
//! Run: `cargo bench --bench serve_load` (set `SERVE_LOAD_SECS` to change the 3 s per cell,
//! `TAVERN_BIN` to load another build of the binary).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn secs() -> f64 {
    std::env::var("SERVE_LOAD_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3.0)
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for e in std::fs::read_dir(from).expect("read dir").flatten() {
        let t = to.join(e.file_name());
        if e.path().is_dir() {
            copy_dir(&e.path(), &t);
        } else {
            std::fs::copy(e.path(), &t).expect("copy");
        }
    }
}

fn start_tavern(home: &Path, watch: bool) -> (Proc, String) {
    start_tavern_with(home, watch, &[])
}

fn start_tavern_with(home: &Path, watch: bool, extra: &[&str]) -> (Proc, String) {
    // TAVERN_BIN runs another build of tavern (e.g. a release binary) under the same load.
    let bin =
        std::env::var("TAVERN_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_tavern").to_string());
    let mut cmd = Command::new(bin);
    cmd.arg("--home")
        .arg(home)
        .args(["serve", "--addr", "127.0.0.1:0"])
        .args(extra);
    if watch {
        cmd.arg("--watch");
    }
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start tavern serve");
    let err = child.stderr.take().expect("stderr");
    let mut lines = BufReader::new(err).lines();
    let base = loop {
        let line = lines
            .next()
            .expect("tavern serve printed its address")
            .expect("stderr line");
        if let Some(rest) = line.split("serving MCP at ").nth(1) {
            break rest
                .split_whitespace()
                .next()
                .unwrap_or("")
                .trim_end_matches("/mcp")
                .to_string();
        }
    };
    std::thread::spawn(move || for _ in lines {});
    (Proc(child), base)
}

/// The Python SDK's server; `json`: with `json_response=True` (one JSON message per POST,
/// as tavern answers a session's plain `tools/call`), else its default (an SSE stream).
fn start_fastmcp(json: bool) -> Option<(Proc, String)> {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").ok()?;
        l.local_addr().ok()?.port()
    };
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/fastmcp_echo.py");
    let child = Command::new("python3")
        .arg(script)
        .arg(port.to_string())
        .args(json.then_some("json"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let p = Proc(child);
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Some((p, format!("http://127.0.0.1:{port}")));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    None
}

/// One MCP session over Streamable HTTP (raw HTTP: the load generator must not be the
/// bottleneck).
#[derive(Clone)]
struct Session {
    http: reqwest::Client,
    url: String,
    id: Option<String>,
}

fn sse_json(body: &str) -> Option<Value> {
    if let Ok(v) = serde_json::from_str(body) {
        return Some(v);
    }
    body.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .find(|v| v.get("id").is_some())
}

impl Session {
    async fn open(http: reqwest::Client, base: &str) -> Session {
        let url = format!("{base}/mcp");
        let r = http
            .post(&url)
            .header("accept", "application/json, text/event-stream")
            .json(
                &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "serve_load", "version": "1"}}}),
            )
            .send()
            .await
            .expect("initialize");
        let id = r
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let _ = r.text().await;
        let s = Session { http, url, id };
        let _ = s
            .post(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .send()
            .await
            .map(|r| r.bytes());
        s
    }

    fn post(&self, body: Value) -> reqwest::RequestBuilder {
        let mut b = self
            .http
            .post(&self.url)
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-11-25")
            .json(&body);
        if let Some(id) = &self.id {
            b = b.header("mcp-session-id", id);
        }
        b
    }

    async fn call(&self, tool: &str, n: u64) -> bool {
        self.request(
            "tools/call",
            json!({"name": tool, "arguments": {"text": "ping"}}),
            n,
        )
        .await
    }

    /// One request; true when it was answered with a result that is not an error.
    async fn request(&self, method: &str, params: Value, n: u64) -> bool {
        let body = json!({"jsonrpc": "2.0", "id": n, "method": method, "params": params});
        match self.post(body).send().await {
            Ok(r) if r.status().is_success() => match r.text().await {
                Ok(t) => sse_json(&t).is_some_and(|v| {
                    v.get("result")
                        .is_some_and(|r| r.get("isError") != Some(&json!(true)))
                }),
                Err(_) => false,
            },
            _ => false,
        }
    }
}

#[derive(Clone, Copy)]
enum Target {
    Mcp,
    Rest,
    /// MCP `resources/read` of the uri given as the tool.
    Resource,
    /// MCP `prompts/get` of the prompt named as the tool.
    Prompt,
}

struct Cell {
    calls: u64,
    failed: u64,
    elapsed: f64,
    lat: Vec<f64>,
}

impl Cell {
    fn rate(&self) -> f64 {
        self.calls as f64 / self.elapsed
    }
    fn pct(&self, p: f64) -> f64 {
        if self.lat.is_empty() {
            return f64::NAN;
        }
        let i = ((self.lat.len() as f64 - 1.0) * p).round() as usize;
        self.lat[i]
    }
}

async fn one_call(target: Target, s: &Session, tool: &str, n: u64) -> bool {
    match target {
        Target::Mcp => s.call(tool, n).await,
        Target::Resource => s.request("resources/read", json!({"uri": tool}), n).await,
        Target::Prompt => s.request("prompts/get", json!({"name": tool}), n).await,
        Target::Rest => {
            let url = s.url.trim_end_matches("/mcp").to_string() + "/api/invoke";
            match s
                .http
                .post(url)
                .json(&json!({"tool": tool, "args": {"text": "ping"}}))
                .send()
                .await
            {
                Ok(r) => r
                    .json::<Value>()
                    .await
                    .is_ok_and(|v| v["results"][0]["ok"] == json!(true)),
                Err(_) => false,
            }
        }
    }
}

/// `conc` clients calling back to back for `secs` (or at `rate` calls/s in total).
async fn load(
    base: &str,
    target: Target,
    tool: &str,
    conc: usize,
    dur: f64,
    rate: Option<f64>,
) -> Cell {
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(conc)
        .build()
        .expect("client");
    let stop = Arc::new(AtomicBool::new(false));
    let failed = Arc::new(AtomicU64::new(0));
    let counter = Arc::new(AtomicU64::new(1));
    let mut tasks = Vec::new();
    let start = Instant::now();
    for w in 0..conc {
        let s = match target {
            Target::Mcp | Target::Resource | Target::Prompt => {
                Session::open(http.clone(), base).await
            }
            Target::Rest => Session {
                http: http.clone(),
                url: format!("{base}/mcp"),
                id: None,
            },
        };
        let stop = stop.clone();
        let failed = failed.clone();
        let counter = counter.clone();
        let tool = tool.to_string();
        let interval = rate.map(|r| Duration::from_secs_f64(conc as f64 / r));
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            let mut next = Instant::now()
                + interval
                    .map(|i| i.mul_f64(w as f64 / conc as f64))
                    .unwrap_or_default();
            while !stop.load(Ordering::Relaxed) {
                if let Some(i) = interval {
                    tokio::time::sleep_until(next.into()).await;
                    next += i;
                }
                let n = counter.fetch_add(1, Ordering::Relaxed);
                let t = Instant::now();
                let ok = one_call(target, &s, &tool, n).await;
                lat.push(t.elapsed().as_secs_f64() * 1000.0);
                if !ok {
                    failed.fetch_add(1, Ordering::Relaxed);
                }
            }
            lat
        }));
    }
    finish(tasks, &stop, &failed, start, dur).await
}

/// Lets a cell's client tasks run for `dur` seconds, stops them, and gathers their
/// latencies (sorted) into the cell.
async fn finish(
    tasks: Vec<tokio::task::JoinHandle<Vec<f64>>>,
    stop: &AtomicBool,
    failed: &AtomicU64,
    start: Instant,
    dur: f64,
) -> Cell {
    tokio::time::sleep(Duration::from_secs_f64(dur)).await;
    stop.store(true, Ordering::Relaxed);
    let mut lat = Vec::new();
    for t in tasks {
        lat.extend(t.await.unwrap_or_default());
    }
    let elapsed = start.elapsed().as_secs_f64();
    lat.sort_by(|a, b| a.total_cmp(b));
    Cell {
        calls: lat.len() as u64,
        failed: failed.load(Ordering::Relaxed),
        elapsed,
        lat,
    }
}

/// A `redis-server` without persistence on a free loopback port, or `None` when it is not
/// installed (or does not answer).
fn start_redis() -> Option<(Proc, String)> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .ok()?
        .local_addr()
        .ok()?
        .port();
    let child = Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let p = Proc(child);
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Some((p, format!("redis://127.0.0.1:{port}")));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    None
}

/// `conc` clients (spread over `bases`) each making a job of `tool` on one replica and
/// polling it on the next one until it ends, back to back for `dur`: jobs per second.
async fn jobs_load(bases: &[String], tool: &str, conc: usize, dur: f64) -> Cell {
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(conc)
        .build()
        .expect("client");
    let stop = Arc::new(AtomicBool::new(false));
    let failed = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..conc {
        let (http, stop, failed) = (http.clone(), stop.clone(), failed.clone());
        let make = bases[w % bases.len()].clone();
        let read = bases[(w + 1) % bases.len()].clone();
        let tool = tool.to_string();
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let t = Instant::now();
                let made = http
                    .post(format!("{make}/api/jobs"))
                    .json(&json!({"tool": tool, "args": {"text": "ping"}}))
                    .send()
                    .await;
                let id = match made {
                    Ok(r) => r
                        .json::<Value>()
                        .await
                        .ok()
                        .and_then(|v| v["id"].as_str().map(str::to_string)),
                    Err(_) => None,
                };
                let Some(id) = id else {
                    failed.fetch_add(1, Ordering::Relaxed);
                    continue;
                };
                let ok = loop {
                    let r = http.get(format!("{read}/api/jobs/{id}")).send().await;
                    let st = match r {
                        Ok(r) => r.json::<Value>().await.ok().map(|v| v["status"].clone()),
                        Err(_) => None,
                    };
                    match st.as_ref().and_then(Value::as_str) {
                        Some("succeeded") => break true,
                        Some("failed" | "cancelled") | None => break false,
                        _ => tokio::time::sleep(Duration::from_millis(5)).await,
                    }
                };
                lat.push(t.elapsed().as_secs_f64() * 1000.0);
                if !ok {
                    failed.fetch_add(1, Ordering::Relaxed);
                }
            }
            lat
        }));
    }
    finish(tasks, &stop, &failed, start, dur).await
}

/// Two replicas sharing one Redis (`--store`): MCP `tools/call` at 16 clients spread over
/// both, and jobs made on one replica and read on the other, against one replica alone.
async fn replicas(home: &Path, dur: f64, figures: &mut BTreeMap<String, String>) {
    let Some((_redis, url)) = start_redis() else {
        eprintln!("serve_load: redis-server is not available; the two-replica figures are skipped");
        return;
    };
    let store = ["--store", url.as_str()];
    let (a, base_a) = start_tavern_with(home, false, &store);
    let (b, base_b) = start_tavern_with(home, false, &store);
    let both = [base_a.clone(), base_b.clone()];
    let mut row = |id: &str, c: &Cell, unit: &str| report(figures, id, unit, c);
    let one = jobs_load(&both[..1], "system:echo", 16, dur).await;
    row("store_jobs_1replica_c16", &one, "jobs");
    let two = jobs_load(&both, "system:echo", 16, dur).await;
    row("store_jobs_2replicas_c16", &two, "jobs");
    // MCP: 8 clients on each replica at once (sessions live in the store).
    let (x, y) = tokio::join!(
        load(&base_a, Target::Mcp, "system_echo", 8, dur, None),
        load(&base_b, Target::Mcp, "system_echo", 8, dur, None),
    );
    let sum = Cell {
        calls: x.calls + y.calls,
        failed: x.failed + y.failed,
        elapsed: x.elapsed.max(y.elapsed),
        lat: {
            let mut l = x.lat;
            l.extend(y.lat);
            l.sort_by(|a, b| a.total_cmp(b));
            l
        },
    };
    row("store_mcp_2replicas_c16", &sum, "calls");
    drop(a);
    drop(b);
}

fn rss_kib(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find(|l| l.starts_with("VmRSS:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// Prints one cell (`serve_load/<id>: … <unit>/s, p50, p99, failed`) and records its
/// throughput, p50 and p99 figures.
fn report(figures: &mut BTreeMap<String, String>, id: &str, unit: &str, c: &Cell) {
    println!(
        "serve_load/{id}: {:.0} {unit}/s, p50 {:.2} ms, p99 {:.2} ms, {} failed",
        c.rate(),
        c.pct(0.5),
        c.pct(0.99),
        c.failed
    );
    figures.insert(
        format!("serve_load/{id}_throughput"),
        format!("{:.0} {unit}/s", c.rate()),
    );
    figures.insert(
        format!("serve_load/{id}_p50"),
        format!("{:.2} ms", c.pct(0.5)),
    );
    figures.insert(
        format!("serve_load/{id}_p99"),
        format!("{:.2} ms", c.pct(0.99)),
    );
}

fn main() {
    // `cargo bench` passes `--bench`; a filter that excludes us skips the run.
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    if !args.is_empty() && !args.iter().any(|a| "serve_load".contains(a.as_str())) {
        return;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(run());
}

async fn run() {
    let dur = secs();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let home = root.join("tests/fixtures/serve_home");
    let mut figures: BTreeMap<String, String> = BTreeMap::new();
    let (tavern, base) = start_tavern(&home, false);
    let mut fast = start_fastmcp(false);
    if fast.is_none() {
        eprintln!("serve_load: python3 with mcp is not available; the baseline is skipped");
    }
    let mut rates: BTreeMap<String, f64> = BTreeMap::new();
    for conc in [1usize, 16, 64] {
        let mut rows = vec![
            ("tavern_mcp", base.clone(), Target::Mcp, "system_echo"),
            ("tavern_rest", base.clone(), Target::Rest, "system:echo"),
        ];
        if let Some((_, fb)) = &fast {
            rows.push(("fastmcp_mcp", fb.clone(), Target::Mcp, "echo"));
        }
        for (name, b, target, tool) in rows {
            let c = load(&b, target, tool, conc, dur, None).await;
            report(&mut figures, &format!("{name}_c{conc}"), "calls", &c);
            rates.insert(format!("{name}_c{conc}"), c.rate());
        }
    }
    // A resource read and a prompt get (MCP, the same clients and sessions): a plugin's
    // static text resource and a fixed prompt of the conformance fixture home.
    {
        let (_p, cbase) = start_tavern(&root.join("tests/conformance/home"), false);
        for conc in [1usize, 16, 64] {
            for (name, target, what) in [
                (
                    "tavern_resource_read",
                    Target::Resource,
                    "test://static-text",
                ),
                ("tavern_prompt_get", Target::Prompt, "test_simple_prompt"),
            ] {
                let c = load(&cbase, target, what, conc, dur, None).await;
                report(&mut figures, &format!("{name}_c{conc}"), "requests", &c);
            }
        }
    }
    if let (Some(t), Some(f)) = (rates.get("tavern_mcp_c16"), rates.get("fastmcp_mcp_c16")) {
        let ratio = t / f;
        println!("serve_load/mcp_speedup_c16: {ratio:.1}x");
        figures.insert("serve_load/mcp_speedup_c16".into(), format!("{ratio:.1}x"));
    }
    // The SDK's server in its JSON-response mode too (tavern answers a session's plain
    // tools/call as JSON): the same clients, the same sessions, at 16.
    if fast.is_some() {
        drop(fast.take());
        if let Some((_p, fb)) = start_fastmcp(true) {
            let c = load(&fb, Target::Mcp, "echo", 16, dur, None).await;
            report(&mut figures, "fastmcp_json_mcp_c16", "calls", &c);
            if let Some(t) = rates.get("tavern_mcp_c16") {
                let ratio = t / c.rate();
                println!("serve_load/mcp_speedup_c16_vs_json: {ratio:.1}x");
                figures.insert(
                    "serve_load/mcp_speedup_c16_vs_json".into(),
                    format!("{ratio:.1}x"),
                );
            }
        }
    }
    // p99 at a fixed 1,000 calls/s (16 clients).
    let c = load(&base, Target::Mcp, "system_echo", 16, dur, Some(1000.0)).await;
    println!(
        "serve_load/mcp_1000rps: {:.0} calls/s, p99 {:.2} ms",
        c.rate(),
        c.pct(0.99)
    );
    figures.insert(
        "serve_load/mcp_1000rps_p99".into(),
        format!("{:.2} ms", c.pct(0.99)),
    );
    drop(tavern);
    drop(fast);

    replicas(&home, dur, &mut figures).await;

    // Reload under load: a workflow file changes every 500 ms while 16 clients call.
    let tmp = tempfile::tempdir().expect("temp dir");
    copy_dir(&home, tmp.path());
    let (watched, wbase) = start_tavern(tmp.path(), true);
    let pid = watched.0.id();
    let warm = load(&wbase, Target::Mcp, "system_echo", 16, 1.0, None).await;
    let rss_before = rss_kib(pid).unwrap_or(0);
    let wf: PathBuf = tmp.path().join("workflows/text_stats.json");
    let original = std::fs::read_to_string(&wf).expect("read workflow");
    let toucher = {
        let wf = wf.clone();
        let stop = Instant::now() + Duration::from_secs_f64(dur * 2.0);
        std::thread::spawn(move || {
            let mut n = 0;
            while Instant::now() < stop {
                std::thread::sleep(Duration::from_millis(500));
                let text = original.replace(
                    "The text to measure.",
                    &format!("The text to measure ({n})."),
                );
                let _ = std::fs::write(&wf, text);
                n += 1;
            }
            n
        })
    };
    let c = load(&wbase, Target::Mcp, "system_echo", 16, dur * 2.0, None).await;
    let reloads = toucher.join().unwrap_or(0);
    let rss_after = rss_kib(pid).unwrap_or(0);
    println!(
        "serve_load/reload_under_load: {} calls, {} failed, {reloads} file changes, RSS {} -> {} KiB (warm-up {} calls)",
        c.calls, c.failed, rss_before, rss_after, warm.calls
    );
    figures.insert(
        "serve_load/reload_lost_calls".into(),
        format!("{} of {}", c.failed, c.calls),
    );
    figures.insert(
        "serve_load/reload_rss".into(),
        format!(
            "{:.1} -> {:.1} MiB",
            rss_before as f64 / 1024.0,
            rss_after as f64 / 1024.0
        ),
    );
    drop(watched);

    let out = root.join("target/bench-figures");
    let _ = std::fs::create_dir_all(&out);
    let path = out.join("serve_load.json");
    std::fs::write(
        &path,
        serde_json::to_string_pretty(&figures).unwrap_or_default(),
    )
    .expect("write figures");
    println!("wrote {}", path.display());
}
