//! Starting the real `tavern` binary as a server for the server tests.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// The test-built `tavern` binary.
pub fn tavern() -> &'static str {
    env!("CARGO_BIN_EXE_tavern")
}

/// The fixture home in the repository.
pub fn fixture_home() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/serve_home")
}

/// Copies the directory tree `from` into `to` (created when missing).
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create dir");
    for e in std::fs::read_dir(from).expect("read fixture dir") {
        let e = e.expect("dir entry");
        let target = to.join(e.file_name());
        if e.file_type().expect("file type").is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), &target).expect("copy fixture file");
        }
    }
}

/// A private, writable copy of the fixture home.
pub fn temp_home() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    copy_dir(&fixture_home(), dir.path());
    dir
}

/// A running `tavern serve`; killed on drop.
pub struct Server {
    child: Child,
    /// `http://127.0.0.1:<port>`.
    pub base: String,
    stderr: mpsc::Receiver<String>,
}

impl Server {
    /// Starts `tavern --home <home> serve --addr 127.0.0.1:0 <extra…>` and waits for its
    /// "serving" line.
    pub fn start(home: &Path, extra: &[&str]) -> Server {
        Self::start_env(home, extra, &[])
    }

    /// [`Server::start`] with extra environment variables.
    pub fn start_env(home: &Path, extra: &[&str], env: &[(&str, &str)]) -> Server {
        let mut cmd = Command::new(tavern());
        cmd.arg("--home")
            .arg(home)
            .args(["serve", "--addr", "127.0.0.1:0"])
            .args(extra)
            .env_remove("TAVERN_TOKEN")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("start tavern serve");
        let stderr = child.stderr.take().expect("piped stderr");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut seen = Vec::new();
        loop {
            match rx.recv_timeout(Duration::from_secs(60)) {
                Ok(line) => {
                    if let Some(rest) = line.split("serving MCP at ").nth(1) {
                        let url = rest.split_whitespace().next().unwrap_or("");
                        let base = url.trim_end_matches("/mcp").to_string();
                        return Server {
                            child,
                            base,
                            stderr: rx,
                        };
                    }
                    seen.push(line);
                }
                Err(_) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    panic!("tavern serve did not start; stderr: {seen:?}")
                }
            }
        }
    }

    /// The server's pid (for signals).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits for the process to exit; returns its status code.
    pub fn wait(mut self, max: Duration) -> Option<i32> {
        let deadline = std::time::Instant::now() + max;
        loop {
            if let Ok(Some(st)) = self.child.try_wait() {
                return st.code();
            }
            if std::time::Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stderr lines received so far.
    pub fn stderr_lines(&self) -> Vec<String> {
        self.stderr.try_iter().collect()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `tavern --home HOME mcp` with piped stdio: the child, its stdin, and a receiver of every
/// JSON line it prints (a non-JSON line on stdout fails the test: it would break clients).
pub fn spawn_mcp(home: &Path) -> (Child, ChildStdin, mpsc::Receiver<serde_json::Value>) {
    spawn_mcp_args(home, &[])
}

/// [`spawn_mcp`] with flags after `mcp`.
pub fn spawn_mcp_args(
    home: &Path,
    extra: &[&str],
) -> (Child, ChildStdin, mpsc::Receiver<serde_json::Value>) {
    let mut child = Command::new(tavern())
        .arg("--home")
        .arg(home)
        .arg("mcp")
        .args(extra)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start tavern mcp");
    let stdin = child.stdin.take().expect("stdin");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let v: serde_json::Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("stdout carried a non-JSON line {line:?}: {e}"));
            if tx.send(v).is_err() {
                break;
            }
        }
    });
    (child, stdin, rx)
}

/// `GET /api/jobs/{id}`: the status code and the JSON body.
pub async fn get_job(
    c: &reqwest::Client,
    base: &str,
    id: &str,
) -> (reqwest::StatusCode, serde_json::Value) {
    let r = c.get(format!("{base}/api/jobs/{id}")).send().await.unwrap();
    (r.status(), r.json().await.unwrap())
}

/// Polls a job until its status is one of `want`, within `max` (a generous guard, not a
/// timing assertion).
pub async fn wait_status(
    c: &reqwest::Client,
    base: &str,
    id: &str,
    want: &[&str],
    max: Duration,
) -> serde_json::Value {
    let deadline = std::time::Instant::now() + max;
    loop {
        let (_, j) = get_job(c, base, id).await;
        if want.contains(&j["status"].as_str().unwrap_or("")) {
            return j;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "job never reached {want:?}: {j}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// What `/mcp` answered to one POST.
pub struct McpAnswer {
    /// The HTTP status.
    pub status: reqwest::StatusCode,
    /// The `content-type` header (empty without one).
    pub content_type: String,
    /// The `mcp-session-id` header, if any.
    pub session: Option<String>,
    /// The JSON messages: a JSON body, or the SSE `data:` lines.
    pub msgs: Vec<serde_json::Value>,
}

impl McpAnswer {
    /// The JSON-RPC answer (the message with an `id`).
    pub fn answer(&self) -> &serde_json::Value {
        self.msgs
            .iter()
            .find(|m| m.get("id").is_some())
            .unwrap_or_else(|| panic!("no answer in {:?}", self.msgs))
    }

    /// Whether the answer was one `application/json` message (not an event stream).
    pub fn is_json(&self) -> bool {
        self.content_type.starts_with("application/json")
    }
}

/// POSTs one JSON-RPC message to `/mcp` with the headers a client sends (and the protocol
/// version header when `version` is given).
pub async fn mcp_post(
    c: &reqwest::Client,
    base: &str,
    session: Option<&str>,
    version: Option<&str>,
    msg: &serde_json::Value,
) -> McpAnswer {
    let mut req = c
        .post(format!("{base}/mcp"))
        .header("accept", "application/json, text/event-stream")
        .json(msg);
    if let Some(v) = version {
        req = req.header("mcp-protocol-version", v);
    }
    if let Some(sid) = session {
        req = req.header("mcp-session-id", sid);
    }
    let r = req.send().await.unwrap();
    let status = r.status();
    let session = r
        .headers()
        .get("mcp-session-id")
        .map(|v| v.to_str().unwrap().to_string());
    let content_type = r
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    let text = r.text().await.unwrap();
    let msgs = if text.trim_start().starts_with('{') {
        vec![serde_json::from_str(&text).unwrap()]
    } else {
        text.lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str(d.trim()).ok())
            .collect()
    };
    McpAnswer {
        status,
        content_type,
        session,
        msgs,
    }
}

/// Opens an MCP session over Streamable HTTP (`initialize`, then `notifications/initialized`
/// at revision `2025-11-25`) and returns its id.
pub async fn mcp_open(c: &reqwest::Client, base: &str) -> String {
    let init = serde_json::json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "tavern-tests", "version": "1"}}});
    let a = mcp_post(c, base, None, None, &init).await;
    assert_eq!(a.status, reqwest::StatusCode::OK);
    let sid = a.session.expect("a session id");
    let note = serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert_eq!(
        mcp_post(c, base, Some(&sid), Some("2025-11-25"), &note)
            .await
            .status,
        reqwest::StatusCode::ACCEPTED
    );
    sid
}
