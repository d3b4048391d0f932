//! Issue 35, items 2 and 4: job listings that cannot pin memory, and a shared store that
//! misbehaves without losing or stopping anything. On the real binary, loopback HTTP and a
//! real `redis-server` on a free loopback port (with AOF where the test restarts it). One
//! test per finding; no timing assertions, only generous "within N s" guards.

use crate::server_support;
use crate::store_redis::Redis;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{json, Value};
use server_support::{get_job, temp_home, wait_status, Server};

fn echo(text: &str) -> Value {
    json!({"tool": "system:echo", "args": {"text": text}})
}

async fn post_job(c: &reqwest::Client, base: &str, body: &Value) -> reqwest::Response {
    c.post(format!("{base}/api/jobs"))
        .json(body)
        .send()
        .await
        .unwrap()
}

/// Makes a job of `body` and waits until it succeeded; answers its id.
async fn finished_job(c: &reqwest::Client, base: &str, body: &Value) -> String {
    let r = post_job(c, base, body).await;
    assert_eq!(r.status(), StatusCode::ACCEPTED);
    let v: Value = r.json().await.unwrap();
    let id = v["id"].as_str().unwrap().to_string();
    let j = wait_status(
        c,
        base,
        &id,
        &["succeeded", "failed", "cancelled"],
        Duration::from_secs(60),
    )
    .await;
    assert_eq!(j["status"], "succeeded", "{j}");
    id
}

/// `GET /api/jobs?<query>`: status, body bytes, and the body as JSON.
async fn list(c: &reqwest::Client, base: &str, query: &str) -> (StatusCode, usize, Value) {
    let r = c
        .get(format!("{base}/api/jobs?{query}"))
        .send()
        .await
        .unwrap();
    let st = r.status();
    let bytes = r.bytes().await.unwrap();
    let v = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    (st, bytes.len(), v)
}

/// Every page of a listing: the ids in order, and each page's size in bytes.
async fn all_pages(c: &reqwest::Client, base: &str, query: &str) -> (Vec<Value>, Vec<usize>) {
    let mut jobs = Vec::new();
    let mut sizes = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..100 {
        let q = match &cursor {
            Some(cur) => format!("{query}&cursor={cur}"),
            None => query.to_string(),
        };
        let (st, n, v) = list(c, base, &q).await;
        assert_eq!(st, StatusCode::OK, "{v}");
        sizes.push(n);
        jobs.extend(v["jobs"].as_array().unwrap().iter().cloned());
        match v["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_string()),
            None => return (jobs, sizes),
        }
    }
    panic!("the pages never ended");
}

fn ids(jobs: &[Value]) -> Vec<String> {
    jobs.iter()
        .map(|j| j["id"].as_str().unwrap().to_string())
        .collect()
}

/// The listing answers alike with and without a store: limits refused the same way,
/// cursors and `next_cursor`, results only when asked for.
#[tokio::test(flavor = "multi_thread")]
async fn the_store_listing_answers_as_the_memory_one() {
    let redis = Redis::start();
    let h = temp_home();
    let mem = Server::start(h.path(), &[]);
    let shared = Server::start(h.path(), &["--store", redis.url.as_str()]);
    let c = reqwest::Client::new();
    for base in [&shared.base, &mem.base] {
        let mut made = Vec::new();
        for i in 0..5 {
            made.push(finished_job(&c, base, &echo(&format!("job {i}"))).await);
        }
        made.reverse();
        for bad in ["limit=0", "limit=1001", "limit=x"] {
            let (st, _, v) = list(&c, base, bad).await;
            assert_eq!(st, StatusCode::BAD_REQUEST, "{base} ?{bad}: {v}");
            assert_eq!(v["error"]["code"], "bad_limit", "{v}");
        }
        let (st, _, v) = list(&c, base, "cursor=nonsense").await;
        assert_eq!(st, StatusCode::BAD_REQUEST, "{v}");
        assert_eq!(v["error"]["code"], "bad_cursor", "{v}");
        // Pages of two, newest first, `next_cursor` null on the last.
        let (jobs, sizes) = all_pages(&c, base, "limit=2").await;
        assert_eq!(ids(&jobs), made, "{base}");
        assert_eq!(sizes.len(), 3, "{base}");
        assert!(
            jobs.iter().all(|j| j["result"].is_null()),
            "{base}: {jobs:?}"
        );
        let (_, _, one) = list(&c, base, "limit=1000").await;
        assert_eq!(one["next_cursor"], Value::Null, "{one}");
        assert_eq!(one["warnings"], json!([]), "{one}");
        // With results.
        let (jobs, _) = all_pages(&c, base, "limit=2&results=1").await;
        assert_eq!(ids(&jobs), made);
        assert_eq!(jobs[0]["result"]["results"][0]["value"], "job 4", "{base}");
        assert_eq!(jobs[4]["result"]["results"][0]["value"], "job 0", "{base}");
    }
}

/// Pages are bounded in bytes as well as in count; every job is still listed once.
#[tokio::test(flavor = "multi_thread")]
async fn listings_with_big_results_are_paged_by_bytes() {
    let redis = Redis::start();
    let h = temp_home();
    let flags = ["--max-args-bytes", "3000000"];
    let mem = Server::start(h.path(), &flags);
    let shared = Server::start(
        h.path(),
        &["--max-args-bytes", "3000000", "--store", redis.url.as_str()],
    );
    let c = reqwest::Client::new();
    for base in [&shared.base, &mem.base] {
        let mut made = Vec::new();
        for i in 0..6 {
            let text = format!("{i}{}", "y".repeat(1_200_000));
            made.push(finished_job(&c, base, &echo(&text)).await);
        }
        made.reverse();
        let (jobs, sizes) = all_pages(&c, base, "results=1").await;
        assert_eq!(ids(&jobs), made, "{base}");
        assert!(sizes.len() >= 2, "one page of {sizes:?} bytes");
        for n in &sizes {
            assert!(*n <= 4 * 1024 * 1024 + 4096, "a page of {n} bytes");
        }
        for (j, i) in jobs.iter().zip((0..6).rev()) {
            let v = j["result"]["results"][0]["value"].as_str().unwrap();
            assert!(v.starts_with(&i.to_string()) && v.len() == 1_200_001);
        }
    }
}

fn rss_kib(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// A loopback client with a small receive window that asks for a listing and reads nothing.
fn stalled_listing(addr: &str) -> TcpStream {
    use std::os::fd::FromRawFd;
    let addr: std::net::SocketAddr = addr.parse().unwrap();
    // SAFETY: a fresh socket this function owns; each call is checked.
    let s = unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
        assert!(fd >= 0);
        let small: libc::c_int = 4096;
        let r = libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            &small as *const _ as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
        assert_eq!(r, 0);
        TcpStream::from_raw_fd(fd)
    };
    let sock = socket_addr(addr);
    // SAFETY: `sock` is a valid sockaddr_in for the socket's family.
    let r = unsafe {
        libc::connect(
            std::os::fd::AsRawFd::as_raw_fd(&s),
            &sock as *const libc::sockaddr_in as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        )
    };
    assert_eq!(r, 0, "connect");
    let mut s = s;
    write!(
        s,
        "GET /api/jobs?results=1 HTTP/1.1\r\nHost: {addr}\r\nConnection: keep-alive\r\n\r\n"
    )
    .unwrap();
    s
}

fn socket_addr(addr: std::net::SocketAddr) -> libc::sockaddr_in {
    let std::net::SocketAddr::V4(v4) = addr else {
        panic!("loopback v4")
    };
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: v4.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from_ne_bytes(v4.ip().octets()),
        },
        sin_zero: [0; 8],
    }
}

/// Clients that ask for a big listing and never read neither pin the server's memory nor
/// keep their connections: each is dropped (after the write timeout, or once its page,
/// bounded, is written and the connection goes idle).
#[tokio::test(flavor = "multi_thread")]
async fn clients_that_never_read_a_listing_are_dropped() {
    let h = temp_home();
    let server = Server::start(h.path(), &["--max-args-bytes", "3000000"]);
    let c = reqwest::Client::new();
    for i in 0..10 {
        let text = format!("{i}{}", "z".repeat(1_500_000));
        finished_job(&c, &server.base, &echo(&text)).await;
    }
    let before = rss_kib(server.pid());
    let addr = server.base.trim_start_matches("http://").to_string();
    let mut clients: Vec<TcpStream> = (0..4).map(|_| stalled_listing(&addr)).collect();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let during = rss_kib(server.pid());
    assert!(
        during < before + 80 * 1024,
        "4 stalled listings took the server from {before} to {during} KiB"
    );
    // Within the write timeout (10 s) and the close grace, each connection is closed: what
    // the client then reads ends.
    let deadline = Instant::now() + Duration::from_secs(40);
    for s in &mut clients {
        s.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
        let mut buf = vec![0u8; 1 << 16];
        loop {
            assert!(Instant::now() < deadline, "a stalled listing is still open");
            match s.read(&mut buf) {
                Ok(0) => break,
                Ok(_) => std::thread::sleep(Duration::from_millis(2)),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
                Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
    }
    // The server still answers.
    let (st, _, _) = list(&c, &server.base, "limit=1").await;
    assert_eq!(st, StatusCode::OK);
}

async fn store_conn(redis: &Redis) -> redis::aio::MultiplexedConnection {
    redis::Client::open(redis.url.as_str())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

/// A key of another type than tavern writes makes job creation fail whole: nothing is left
/// half made (no record listed `queued` forever); once the key is fixed, jobs run again.
#[tokio::test(flavor = "multi_thread")]
async fn a_wrongly_typed_key_makes_no_half_job() {
    let redis = Redis::start();
    let mut con = store_conn(&redis).await;
    let h = temp_home();
    let a = Server::start(h.path(), &["--store", redis.url.as_str()]);
    let c = reqwest::Client::new();
    for key in ["tavern:jobs:queue", "tavern:jobs:sizes"] {
        let _: () = redis::pipe()
            .cmd("DEL")
            .arg(key)
            .ignore()
            .cmd("SET")
            .arg(key)
            .arg("not what tavern wrote")
            .ignore()
            .query_async(&mut con)
            .await
            .unwrap();
        let r = post_job(&c, &a.base, &echo("never")).await;
        let st = r.status();
        let v: Value = r.json().await.unwrap();
        assert_eq!(st, StatusCode::INTERNAL_SERVER_ERROR, "{key}: {v}");
        assert_eq!(v["error"]["code"], "store_corrupt", "{v}");
        assert!(v["error"]["message"].as_str().unwrap().contains(key), "{v}");
        let (st, _, l) = list(&c, &a.base, "").await;
        assert_eq!(st, StatusCode::OK, "{l}");
        assert_eq!(l["jobs"], json!([]), "a half-made job is listed: {l}");
        let n: i64 = redis::cmd("ZCARD")
            .arg("tavern:jobs:index")
            .query_async(&mut con)
            .await
            .unwrap();
        assert_eq!(n, 0);
        let _: () = redis::cmd("DEL")
            .arg(key)
            .query_async(&mut con)
            .await
            .unwrap();
    }
    let _: () = redis::cmd("XGROUP")
        .arg("CREATE")
        .arg("tavern:jobs:queue")
        .arg("workers")
        .arg("0")
        .arg("MKSTREAM")
        .query_async(&mut con)
        .await
        .unwrap();
    finished_job(&c, &a.base, &echo("after")).await;
}

/// A record that cannot be read is left out of listings with a warning, and its own
/// `GET` answers a typed error; the other jobs are listed as ever.
#[tokio::test(flavor = "multi_thread")]
async fn a_garbled_record_is_skipped_with_a_warning() {
    let redis = Redis::start();
    let mut con = store_conn(&redis).await;
    let h = temp_home();
    let a = Server::start(h.path(), &["--store", redis.url.as_str()]);
    let c = reqwest::Client::new();
    let good = finished_job(&c, &a.base, &echo("fine")).await;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let _: () = redis::pipe()
        .cmd("SET")
        .arg("tavern:job:job-bad-1")
        .arg("a string")
        .ignore()
        .cmd("HSET")
        .arg("tavern:job:job-bad-2")
        .arg("status")
        .arg("sideways")
        .arg("created_ms")
        .arg("yesterday")
        .ignore()
        .cmd("HSET")
        .arg("tavern:job:job-bad-3")
        .arg("status")
        .arg("succeeded")
        .arg("created_ms")
        .arg(now)
        .arg("progress")
        .arg(b"\xff\xfe".as_slice())
        .ignore()
        .cmd("ZADD")
        .arg("tavern:jobs:index")
        .arg(now + 1)
        .arg("job-bad-1")
        .arg(now + 2)
        .arg("job-bad-2")
        .arg(now + 3)
        .arg("job-bad-3")
        .ignore()
        .query_async(&mut con)
        .await
        .unwrap();
    for q in ["", "results=1", "limit=1"] {
        let (jobs, _) = all_pages(&c, &a.base, q).await;
        assert_eq!(ids(&jobs), std::slice::from_ref(&good), "?{q}");
    }
    let (st, _, v) = list(&c, &a.base, "").await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let warned: Vec<&str> = v["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| {
            assert_eq!(w["code"], "job_unreadable", "{w}");
            w["id"].as_str().unwrap()
        })
        .collect();
    assert_eq!(warned, ["job-bad-3", "job-bad-2", "job-bad-1"], "{v}");
    for id in ["job-bad-1", "job-bad-2", "job-bad-3"] {
        let (st, e) = get_job(&c, &a.base, id).await;
        assert_eq!(st, StatusCode::INTERNAL_SERVER_ERROR, "{id}: {e}");
        assert_eq!(e["error"]["code"], "job_unreadable", "{e}");
    }
    let (st, _) = get_job(&c, &a.base, &good).await;
    assert_eq!(st, StatusCode::OK);
}

/// A counter that makes no sense (a negative byte total) is counted again from the jobs,
/// so the byte budget keeps holding; a result counts once though its observation repeats it.
#[tokio::test(flavor = "multi_thread")]
async fn a_negative_byte_counter_is_repaired_from_the_records() {
    let redis = Redis::start();
    let mut con = store_conn(&redis).await;
    let h = temp_home();
    let a = Server::start(
        h.path(),
        &["--store", redis.url.as_str(), "--max-job-bytes", "40000"],
    );
    let c = reqwest::Client::new();
    let _: () = redis::cmd("SET")
        .arg("tavern:jobs:used")
        .arg(-100_000_000)
        .query_async(&mut con)
        .await
        .unwrap();
    let mut made = Vec::new();
    for i in 0..8 {
        let id = finished_job(&c, &a.base, &echo(&format!("{i}{}", "n".repeat(9_000)))).await;
        let used: i64 = redis::cmd("GET")
            .arg("tavern:jobs:used")
            .query_async(&mut con)
            .await
            .unwrap();
        let sizes: Vec<i64> = redis::cmd("HVALS")
            .arg("tavern:jobs:sizes")
            .query_async(&mut con)
            .await
            .unwrap();
        assert_eq!(
            used,
            sizes.iter().sum::<i64>(),
            "the total is not the jobs' sum"
        );
        assert!(used <= 40_000, "{used} bytes kept, past the budget");
        let mine: i64 = redis::cmd("HGET")
            .arg("tavern:jobs:sizes")
            .arg(&id)
            .query_async(&mut con)
            .await
            .unwrap();
        assert!(mine < 12_000, "a 9 kB value counted {mine} bytes");
        made.push(id);
    }
    // The budget evicted the oldest.
    let (st, e) = get_job(&c, &a.base, &made[0]).await;
    assert_eq!(st, StatusCode::GONE, "{e}");
}

/// A `redis-server` with AOF in `dir` on `port`; `load_delay_us`: how long it takes per key
/// when it loads its data.
fn aof_redis(dir: &Path, port: u16, load_delay_us: u32) -> Child {
    Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "yes"])
        .arg("--dir")
        .arg(dir)
        .args(["--key-load-delay", &load_delay_us.to_string()])
        .args(["--loading-process-events-interval-bytes", "1024"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("redis-server is installed")
}

/// What a raw `PING` to `port` answers (`None`: nothing listens).
fn ping(port: u16) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    s.write_all(b"PING\r\n").ok()?;
    let mut buf = [0u8; 128];
    let n = s.read(&mut buf).ok()?;
    Some(String::from_utf8_lossy(&buf[..n]).into_owned())
}

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Redis restarted with AOF answers `LOADING` while it reads its data back: the job routes
/// answer 503 `store_unavailable` meanwhile (retryable), never 500, and the job is there
/// after.
#[tokio::test(flavor = "multi_thread")]
async fn a_store_loading_after_a_restart_answers_503() {
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut r = Killed(aof_redis(dir.path(), port, 0));
    let deadline = Instant::now() + Duration::from_secs(20);
    while ping(port).as_deref() != Some("+PONG\r\n") {
        assert!(Instant::now() < deadline, "redis-server did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    let url = format!("redis://127.0.0.1:{port}");
    let h = temp_home();
    let a = Server::start(h.path(), &["--store", url.as_str()]);
    let c = reqwest::Client::new();
    let id = finished_job(&c, &a.base, &echo("kept")).await;
    // Enough keys that loading them back takes a while, all in the AOF's base.
    let mut con = redis::Client::open(url.as_str())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    for chunk in 0..20 {
        let mut p = redis::pipe();
        for i in 0..1000 {
            p.cmd("SET")
                .arg(format!("filler:{chunk}:{i}"))
                .arg(i)
                .ignore();
        }
        let () = p.query_async(&mut con).await.unwrap();
    }
    let () = redis::cmd("BGREWRITEAOF")
        .query_async(&mut con)
        .await
        .unwrap();
    loop {
        let info: String = redis::cmd("INFO")
            .arg("persistence")
            .query_async(&mut con)
            .await
            .unwrap();
        if info.contains("aof_rewrite_in_progress:0") && info.contains("aof_rewrite_scheduled:0") {
            break;
        }
        assert!(Instant::now() < deadline + Duration::from_secs(20));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop(r);
    // 20,000 keys at 300 µs each: about 6 s of loading.
    r = Killed(aof_redis(dir.path(), port, 300));
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut loading_seen = 0;
    loop {
        assert!(Instant::now() < deadline, "the store never came back");
        let pong = ping(port);
        let (st, e) = get_job(&c, &a.base, &id).await;
        if st == StatusCode::OK {
            assert_eq!(e["status"], "succeeded", "{e}");
            if pong.as_deref() == Some("+PONG\r\n") {
                break;
            }
            continue;
        }
        assert_eq!(st, StatusCode::SERVICE_UNAVAILABLE, "{e}");
        assert_eq!(e["error"]["code"], "store_unavailable", "{e}");
        if pong.is_some_and(|p| p.starts_with("-LOADING")) {
            loading_seen += 1;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(loading_seen > 0, "the store was never seen loading");
    drop(r);
}

/// A client of replica B's audit stream sees a call made on replica A right after its
/// stream opened (and one made after it waited).
#[tokio::test(flavor = "multi_thread")]
async fn an_audit_stream_sees_a_call_made_on_another_replica_right_after_it_opened() {
    let redis = Redis::start();
    let h = temp_home();
    let a = Server::start(h.path(), &["--store", redis.url.as_str()]);
    let b = Server::start(h.path(), &["--store", redis.url.as_str()]);
    let c = reqwest::Client::new();
    // Audit records name the tool (not its arguments): each round calls another one.
    for (marker, wait) in [("LuaDemo:echo", 0u64), ("LuaDemo:shout", 3)] {
        let mut stream = c
            .get(format!("{}/api/audit/events", b.base))
            .send()
            .await
            .unwrap();
        assert_eq!(stream.status(), StatusCode::OK);
        tokio::time::sleep(Duration::from_secs(wait)).await;
        let r = c
            .post(format!("{}/api/invoke", a.base))
            .json(&json!({"tool": marker, "args": {"text": "hi"}}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        let until = Instant::now() + Duration::from_secs(15);
        let mut seen = String::new();
        while !seen.contains(marker) {
            let left = until.saturating_duration_since(Instant::now());
            match tokio::time::timeout(left, stream.chunk()).await {
                Ok(Ok(Some(chunk))) => seen.push_str(&String::from_utf8_lossy(&chunk)),
                _ => panic!("the call on A ({marker}) never reached B's stream: {seen}"),
            }
        }
        drop(stream);
        // B's stream is gone; let the replicas notice before the next one opens.
        tokio::time::sleep(Duration::from_secs(4)).await;
    }
}
