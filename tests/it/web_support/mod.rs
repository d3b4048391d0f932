//! For the web explorer's tests: the fixture home (a Lua plugin, a broken plugin, workflows
//! of three and more nodes, a slow Lua tool, an agent with scripted replies), and a small
//! W3C WebDriver client over reqwest driving headless Chromium through chromedriver.
//!
//! WebDriver is plain HTTP + JSON; the dozen commands the tests use are written here on
//! the HTTP client the crate already has, rather than pulling a WebDriver crate and its TLS
//! stack into the dev-dependencies.
#![allow(dead_code)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::{engine::general_purpose::STANDARD as BASE64, Engine as _};
use serde_json::{json, Value};

// Every test crate using this module also has `mod server_support`.
use crate::server_support::copy_dir;

/// Where Debian puts the browser and its driver (`apt-get install chromium chromium-driver`).
pub const CHROMIUM: &str = "/usr/bin/chromium";
/// The driver.
pub const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
/// What to run when they are missing.
pub const APT_LINE: &str =
    "apt-get update && apt-get install -y --no-install-recommends chromium chromium-driver";

/// How long a page gets to show what a step waits for.
pub const STEP_TIMEOUT: Duration = Duration::from_secs(30);

/// A private copy of `tests/fixtures/web_home`, with a `tavern.toml` pointing the agents'
/// model at the scripted replies (an absolute path, since the server's cwd is elsewhere).
pub fn web_home() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/web_home"),
        dir.path(),
    );
    let replies = dir.path().join("replies/host.json");
    std::fs::write(
        dir.path().join("tavern.toml"),
        format!(
            "[llm]\nbase_url = \"scripted:{}\"\nstream = false\n",
            replies.display()
        ),
    )
    .expect("write tavern.toml");
    dir
}

/// Where screenshots go: `docs/screenshots/` with `TAVERN_UPDATE_SCREENSHOTS=1`, else a
/// temp dir (kept for looking at after a failure; its path is printed).
pub fn screenshot_dir() -> PathBuf {
    if std::env::var("TAVERN_UPDATE_SCREENSHOTS").as_deref() == Ok("1") {
        let d = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/screenshots");
        std::fs::create_dir_all(&d).expect("create docs/screenshots");
        d
    } else {
        let d = std::env::temp_dir().join(format!("tavern-web-shots-{}", std::process::id()));
        std::fs::create_dir_all(&d).expect("create screenshot dir");
        d
    }
}

/// Whether the browser tests may be skipped (only when asked for explicitly).
pub fn skip_browser() -> bool {
    std::env::var("TAVERN_SKIP_BROWSER").as_deref() == Ok("1")
}

/// Fails (never skips silently) when Chromium or chromedriver is missing, naming the
/// install line; returns false when `TAVERN_SKIP_BROWSER=1` asks to skip.
pub fn require_browser() -> bool {
    if skip_browser() {
        eprintln!("TAVERN_SKIP_BROWSER=1: the browser tests are skipped");
        return false;
    }
    let missing: Vec<&str> = [CHROMIUM, CHROMEDRIVER]
        .into_iter()
        .filter(|p| !Path::new(p).exists())
        .collect();
    assert!(
        missing.is_empty(),
        "the browser tests need {} (missing: {}); install them with `{APT_LINE}`, or set TAVERN_SKIP_BROWSER=1 to skip these tests on purpose",
        "Chromium and chromedriver",
        missing.join(", ")
    );
    true
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// A running chromedriver; killed on drop.
pub struct Driver {
    child: Child,
    /// `http://127.0.0.1:<port>`.
    pub url: String,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Driver {
    /// Starts chromedriver on a free loopback port and waits until it is ready.
    pub async fn start() -> Driver {
        let port = free_port();
        let child = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .arg("--allowed-ips=127.0.0.1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot start {CHROMEDRIVER}: {e}; install it with `{APT_LINE}`")
            });
        let d = Driver {
            child,
            url: format!("http://127.0.0.1:{port}"),
        };
        let http = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(r) = http.get(format!("{}/status", d.url)).send().await {
                if let Ok(v) = r.json::<Value>().await {
                    if v["value"]["ready"] == json!(true) {
                        return d;
                    }
                }
            }
            assert!(
                Instant::now() < deadline,
                "chromedriver did not become ready"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Opens headless Chromium (no sandbox: CI runs as root).
    pub async fn browser(&self) -> Browser {
        let http = reqwest::Client::new();
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": CHROMIUM,
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                         "--disable-dev-shm-usage", "--window-size=1280,900",
                         "--force-device-scale-factor=1", "--lang=en-US"],
            },
        }}});
        let v: Value = http
            .post(format!("{}/session", self.url))
            .json(&caps)
            .send()
            .await
            .expect("new WebDriver session")
            .json()
            .await
            .expect("session JSON");
        let id = v["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {v}"))
            .to_string();
        Browser {
            http,
            base: format!("{}/session/{id}", self.url),
        }
    }
}

/// The W3C key of an element reference.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// One browser session.
pub struct Browser {
    http: reqwest::Client,
    base: String,
}

/// An element of the page.
#[derive(Clone)]
pub struct Element(String);

impl Browser {
    async fn cmd(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let mut req = self
            .http
            .request(method.clone(), format!("{}{path}", self.base));
        if let Some(b) = body {
            req = req.json(&b);
        }
        let v: Value = req
            .send()
            .await
            .unwrap_or_else(|e| panic!("WebDriver {method} {path}: {e}"))
            .json()
            .await
            .unwrap_or_else(|e| panic!("WebDriver {method} {path}: not JSON: {e}"));
        if let Some(err) = v["value"]["error"].as_str() {
            panic!(
                "WebDriver {method} {path}: {err}: {}",
                v["value"]["message"].as_str().unwrap_or("")
            );
        }
        v["value"].clone()
    }

    /// Goes to `url` and waits until the app has rendered (`body[data-ready]`).
    pub async fn goto(&self, url: &str) {
        self.cmd(reqwest::Method::POST, "/url", Some(json!({"url": url})))
            .await;
        self.wait_js(
            "return document.body.getAttribute('data-ready') === 'true'",
            "the page to render",
        )
        .await;
    }

    /// Runs `script` (a function body) with `args`; its return value.
    pub async fn js(&self, script: &str, args: Value) -> Value {
        self.cmd(
            reqwest::Method::POST,
            "/execute/sync",
            Some(json!({"script": script, "args": args})),
        )
        .await
    }

    /// Waits until `script` returns true (checked every 100 ms), else fails naming `what`.
    pub async fn wait_js(&self, script: &str, what: &str) {
        let deadline = Instant::now() + STEP_TIMEOUT;
        loop {
            if self.js(script, json!([])).await == json!(true) {
                return;
            }
            if Instant::now() > deadline {
                let text = self
                    .js(
                        "return document.getElementById('main').innerText",
                        json!([]),
                    )
                    .await;
                panic!(
                    "timed out waiting for {what}; the page says:\n{}",
                    text.as_str().unwrap_or("")
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits until the element matching `css` has text containing `needle`; returns it.
    pub async fn wait_text(&self, css: &str, needle: &str) -> String {
        let script =
            "const e = document.querySelector(arguments[0]); return e ? e.innerText : null;";
        let deadline = Instant::now() + STEP_TIMEOUT;
        loop {
            let v = self.js(script, json!([css])).await;
            if let Some(t) = v.as_str() {
                if t.contains(needle) {
                    return t.to_string();
                }
            }
            if Instant::now() > deadline {
                panic!("timed out waiting for `{css}` to contain {needle:?}; it holds {v}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The first element matching `css` (fails when there is none).
    pub async fn find(&self, css: &str) -> Element {
        let v = self
            .cmd(
                reqwest::Method::POST,
                "/element",
                Some(json!({"using": "css selector", "value": css})),
            )
            .await;
        Element(
            v[ELEMENT]
                .as_str()
                .unwrap_or_else(|| panic!("element reference for {css}: {v}"))
                .to_string(),
        )
    }

    /// Every element matching `css`.
    pub async fn find_all(&self, css: &str) -> Vec<Element> {
        let v = self
            .cmd(
                reqwest::Method::POST,
                "/elements",
                Some(json!({"using": "css selector", "value": css})),
            )
            .await;
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|e| e[ELEMENT].as_str().map(|s| Element(s.to_string())))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Clicks an element.
    pub async fn click(&self, e: &Element) {
        self.cmd(
            reqwest::Method::POST,
            &format!("/element/{}/click", e.0),
            Some(json!({})),
        )
        .await;
    }

    /// Clears a text field and types `text` into it (real key events).
    pub async fn type_into(&self, e: &Element, text: &str) {
        self.cmd(
            reqwest::Method::POST,
            &format!("/element/{}/clear", e.0),
            Some(json!({})),
        )
        .await;
        self.cmd(
            reqwest::Method::POST,
            &format!("/element/{}/value", e.0),
            Some(json!({ "text": text })),
        )
        .await;
    }

    /// Presses keys in whatever has the focus (`\u{E004}` is Tab, `\u{E007}` Enter).
    pub async fn keys(&self, keys: &str) {
        let actions: Vec<Value> = keys
            .chars()
            .flat_map(|c| {
                [
                    json!({"type": "keyDown", "value": c.to_string()}),
                    json!({"type": "keyUp", "value": c.to_string()}),
                ]
            })
            .collect();
        self.cmd(
            reqwest::Method::POST,
            "/actions",
            Some(json!({"actions": [{"type": "key", "id": "keyboard", "actions": actions}]})),
        )
        .await;
    }

    /// Presses `keys` together in whatever has the focus (held down in order, released in
    /// reverse): `chord(&["\u{E009}", "\u{E007}"])` is Ctrl+Enter.
    pub async fn chord(&self, keys: &[&str]) {
        let mut actions: Vec<Value> = keys
            .iter()
            .map(|k| json!({"type": "keyDown", "value": k}))
            .collect();
        actions.extend(
            keys.iter()
                .rev()
                .map(|k| json!({"type": "keyUp", "value": k})),
        );
        self.cmd(
            reqwest::Method::POST,
            "/actions",
            Some(json!({"actions": [{"type": "key", "id": "keyboard", "actions": actions}]})),
        )
        .await;
    }

    /// Picks the `<option>` whose text is `label` in the `<select>` matching `css`.
    pub async fn select(&self, css: &str, label: &str) {
        let opts = self.find_all(&format!("{css} option")).await;
        for o in opts {
            if self.text(&o).await.trim() == label {
                self.click(&o).await;
                return;
            }
        }
        panic!("no option {label:?} in {css}");
    }

    /// The element's rendered text.
    pub async fn text(&self, e: &Element) -> String {
        self.cmd(
            reqwest::Method::GET,
            &format!("/element/{}/text", e.0),
            None,
        )
        .await
        .as_str()
        .unwrap_or_default()
        .to_string()
    }

    /// The rendered text of the element matching `css`.
    pub async fn text_of(&self, css: &str) -> String {
        let e = self.find(css).await;
        self.text(&e).await
    }

    /// Writes a PNG of the whole page (the window is resized to the page's height, up to
    /// 2400 px) to `dir/<name>.png`.
    pub async fn screenshot(&self, dir: &Path, name: &str) -> PathBuf {
        let height = self
            .js(
                "return Math.ceil(document.documentElement.scrollHeight)",
                json!([]),
            )
            .await
            .as_u64()
            .unwrap_or(900)
            .clamp(600, 2400);
        self.cmd(
            reqwest::Method::POST,
            "/window/rect",
            Some(json!({"width": 1280, "height": height + 140})),
        )
        .await;
        // Resizing re-lays the page out; give it a frame.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let b64 = self.cmd(reqwest::Method::GET, "/screenshot", None).await;
        let png = BASE64
            .decode(b64.as_str().expect("screenshot base64"))
            .expect("WebDriver screenshots are standard base64");
        assert!(png.starts_with(b"\x89PNG"), "the screenshot is a PNG");
        let path = dir.join(format!("{name}.png"));
        std::fs::write(&path, png).expect("write screenshot");
        self.cmd(
            reqwest::Method::POST,
            "/window/rect",
            Some(json!({"width": 1280, "height": 900})),
        )
        .await;
        path
    }

    /// Ends the session (closes the browser).
    pub async fn quit(self) {
        let _ = self.http.delete(&self.base).send().await;
    }
}
