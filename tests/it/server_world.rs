//! The served live world: a Lua tool's `api.world.set` and a host's set through the
//! engine reach MCP sessions subscribed to `tavern://world` (`notifications/resources/
//! updated` on the session's event stream, Streamable HTTP on loopback), and
//! `resources/read` (and REST's resource read) then shows the new world. `plugin check`
//! lists `permissions.world` declared beside used.

use crate::server_support;

use std::path::Path;
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{json, Value};
use server_support::{mcp_post, tavern, Server};

const V: Option<&str> = Some("2025-11-25");

fn write(p: &Path, text: &str) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// A home with `world.json` and plugin `Weather` (Lua, `world: write`) whose tool `set`
/// changes the weather.
fn home() -> tempfile::TempDir {
    let t = tempfile::tempdir().unwrap();
    write(
        &t.path().join("world.json"),
        r#"{"weather": {"now": "rain"}}"#,
    );
    write(
        &t.path().join("plugins/Weather/plugin.yaml"),
        "name: Weather\npermissions:\n  world: write\n",
    );
    write(
        &t.path().join("plugins/Weather/main.lua"),
        r#"
api.tools.register{ id = "set", description = "Sets the weather.",
  parameters = {type = "object", properties = {now = {type = "string"}}, required = {"now"}},
  handler = function(args)
    local before = api.world.get("weather.now")
    api.world.set("weather.now", args.now)
    return {before = before, now = api.world.get("weather.now")}
  end }
"#,
    );
    t
}

/// The session's event stream (`GET /mcp`), where server notifications arrive.
struct Events {
    resp: reqwest::Response,
    buf: String,
}

impl Events {
    async fn open(c: &reqwest::Client, base: &str, sid: &str) -> Events {
        let resp = c
            .get(format!("{base}/mcp"))
            .header("accept", "text/event-stream")
            .header("mcp-session-id", sid)
            .header("mcp-protocol-version", "2025-11-25")
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
        Events {
            resp,
            buf: String::new(),
        }
    }

    /// The next message whose `method` is `method` (within 15 s).
    async fn next(&mut self, method: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            while let Some(end) = self.buf.find("\n\n") {
                let event: String = self.buf.drain(..end + 2).collect();
                for data in event.lines().filter_map(|l| l.strip_prefix("data:")) {
                    if let Ok(v) = serde_json::from_str::<Value>(data.trim()) {
                        if v["method"] == method {
                            return v;
                        }
                    }
                }
            }
            let left = deadline.saturating_duration_since(Instant::now());
            let chunk = tokio::time::timeout(left, self.resp.chunk())
                .await
                .unwrap_or_else(|_| panic!("no {method} within 15 s"))
                .unwrap()
                .expect("the event stream ended");
            self.buf.push_str(&String::from_utf8_lossy(&chunk));
        }
    }
}

/// `resources/subscribe` to `tavern://world`.
async fn subscribe(c: &reqwest::Client, base: &str, sid: &str) {
    let sub = json!({"jsonrpc": "2.0", "id": 1, "method": "resources/subscribe",
        "params": {"uri": "tavern://world"}});
    let a = mcp_post(c, base, Some(sid), V, &sub).await;
    assert!(a.answer().get("error").is_none(), "{:?}", a.msgs);
}

/// `tavern://world` as `resources/read` gives it.
async fn read_world(c: &reqwest::Client, base: &str, sid: &str) -> Value {
    let read = json!({"jsonrpc": "2.0", "id": 3, "method": "resources/read",
        "params": {"uri": "tavern://world"}});
    let a = mcp_post(c, base, Some(sid), V, &read).await;
    let r = a.answer();
    let text = r["result"]["contents"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text in {r}"));
    serde_json::from_str(text).unwrap()
}

#[tokio::test]
async fn a_lua_tools_world_change_reaches_subscribed_sessions_and_reads() {
    let t = home();
    let s = Server::start(t.path(), &[]);
    let c = reqwest::Client::new();
    let sid = server_support::mcp_open(&c, &s.base).await;
    let mut events = Events::open(&c, &s.base, &sid).await;
    subscribe(&c, &s.base, &sid).await;
    assert_eq!(
        read_world(&c, &s.base, &sid).await,
        json!({"weather": {"now": "rain"}})
    );
    // The change comes from another session's call.
    let other = server_support::mcp_open(&c, &s.base).await;
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "Weather_set", "arguments": {"now": "sun"}}});
    let a = mcp_post(&c, &s.base, Some(&other), V, &call).await;
    let r = a.answer();
    assert_eq!(r["result"]["isError"], json!(false), "{r}");
    let got = &r["result"]["structuredContent"];
    assert_eq!(
        (&got["before"], &got["now"]),
        (&json!("rain"), &json!("sun")),
        "{r}"
    );
    let updated = events.next("notifications/resources/updated").await;
    assert_eq!(
        updated["params"]["uri"],
        json!("tavern://world"),
        "{updated}"
    );
    assert_eq!(
        read_world(&c, &s.base, &sid).await,
        json!({"weather": {"now": "sun"}})
    );
    // REST reads the same live world.
    let rest: Value = c
        .get(format!(
            "{}/api/resources/read?uri=tavern%3A%2F%2Fworld",
            s.base
        ))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let text = rest.to_string();
    assert!(text.contains(r#"\"now\":\"sun\""#), "{rest}");
    // tavern://world is listed.
    let list = json!({"jsonrpc": "2.0", "id": 4, "method": "resources/list", "params": {}});
    let a = mcp_post(&c, &s.base, Some(&sid), V, &list).await;
    let uris: Vec<&str> = a.answer()["result"]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["uri"].as_str())
        .collect();
    assert!(uris.contains(&"tavern://world"), "{uris:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hosts_set_through_the_engine_reaches_subscribed_sessions() {
    use tavern::internal::server::http::{app, serve};
    use tavern::internal::server::{ServeOptions, Served};
    let t = home();
    let engine = tavern::Engine::builder()
        .home(t.path())
        .log_to_stderr(false)
        .build()
        .unwrap();
    let served = Served::new(engine, ServeOptions::default());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let router = app(served.clone(), &addr);
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(serve(served.clone(), listener, router, async move {
        let _ = stop_rx.await;
    }));
    let base = format!("http://{addr}");
    let c = reqwest::Client::new();
    let sid = server_support::mcp_open(&c, &base).await;
    let mut events = Events::open(&c, &base, &sid).await;
    subscribe(&c, &base, &sid).await;
    // The host's game loop changes the world through the engine it serves.
    let world = served.engine().world_state();
    world.set("weather.now", json!("storm")).expect("set");
    let updated = events.next("notifications/resources/updated").await;
    assert_eq!(
        updated["params"]["uri"],
        json!("tavern://world"),
        "{updated}"
    );
    assert_eq!(
        read_world(&c, &base, &sid).await,
        json!({"weather": {"now": "storm"}})
    );
    // And a script sees what the host set.
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "Weather_set", "arguments": {"now": "calm"}}});
    let a = mcp_post(&c, &base, Some(&sid), V, &call).await;
    let got = &a.answer()["result"]["structuredContent"];
    assert_eq!(
        (&got["before"], &got["now"]),
        (&json!("storm"), &json!("calm")),
        "{:?}",
        a.msgs
    );
    assert_eq!(world.get("weather.now"), Some(json!("calm")));
    let _ = stop_tx.send(());
    let _ = tokio::time::timeout(Duration::from_secs(10), server).await;
}

#[test]
fn plugin_check_lists_the_world_permission_declared_beside_used() {
    let t = tempfile::tempdir().unwrap();
    write(
        &t.path().join("plugins/Reader/plugin.yaml"),
        "name: Reader\npermissions:\n  world: read\n",
    );
    write(
        &t.path().join("plugins/Reader/main.lua"),
        "local w = api.world.get('weather')\nfunction f() api.world.set('weather.now', 'sun') end\n",
    );
    write(
        &t.path().join("plugins/Writer/plugin.yaml"),
        "name: Writer\npermissions:\n  world: write\n",
    );
    write(
        &t.path().join("plugins/Writer/main.rhai"),
        "fn f(args, ctx) { api::world::set(\"weather.now\", 1); api::world::get(\"weather\") }\n",
    );
    let out = std::process::Command::new(tavern())
        .arg("--home")
        .arg(t.path())
        .args(["plugin", "check", "--json"])
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let row = |plugin: &str| {
        report["permissions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["plugin"] == plugin)
            .and_then(|p| {
                p["permissions"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|r| r["permission"] == "world")
                    .cloned()
            })
            .unwrap_or_else(|| panic!("no world row for {plugin}: {report}"))
    };
    assert_eq!(
        row("Reader"),
        json!({"permission": "world", "declared": ["read"], "used": ["api.world.get", "api.world.set"]})
    );
    assert_eq!(
        row("Writer"),
        json!({"permission": "world", "declared": ["write"], "used": ["api::world::set", "api::world::get"]})
    );
    // The set Reader did not declare is a problem at its line, naming what to declare.
    assert_eq!(out.status.code(), Some(1), "{report}");
    let problems = report["problems"].to_string();
    assert!(
        problems.contains("plugins/Reader/main.lua")
            && problems.contains("api.world.set needs permission `world: write`")
            && problems.contains("add `world: write` under `permissions` in plugin.yaml"),
        "{problems}"
    );
    assert_eq!(
        report["problems"].as_array().map(Vec::len),
        Some(1),
        "{problems}"
    );
    // The text table has the row too.
    let text = std::process::Command::new(tavern())
        .arg("--home")
        .arg(t.path())
        .args(["plugin", "check"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.lines().any(|l| l.trim_start().starts_with("world")
            && l.contains("declared: read")
            && l.contains("used: api.world.get, api.world.set")),
        "{text}"
    );
}

#[test]
fn a_misspelled_or_wrong_world_permission_is_a_problem_at_its_line() {
    for (yaml, says) in [
        ("  wrld: write\n", "did you mean `world`?"),
        ("  world: rw\n", "rw"),
    ] {
        let t = tempfile::tempdir().unwrap();
        write(
            &t.path().join("plugins/P/plugin.yaml"),
            &format!("name: P\npermissions:\n{yaml}"),
        );
        let out = std::process::Command::new(tavern())
            .arg("--home")
            .arg(t.path())
            .args(["plugin", "check"])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(1), "{text}");
        assert!(
            text.contains("plugins/P/plugin.yaml:3") && text.contains(says),
            "{yaml}: {text}"
        );
    }
}

#[tokio::test]
async fn a_reload_keeps_the_live_world_unless_world_json_changed() {
    let t = home();
    let s = Server::start(t.path(), &["--watch"]);
    let c = reqwest::Client::new();
    let sid = server_support::mcp_open(&c, &s.base).await;
    let mut events = Events::open(&c, &s.base, &sid).await;
    subscribe(&c, &s.base, &sid).await;
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "Weather_set", "arguments": {"now": "sun"}}});
    let a = mcp_post(&c, &s.base, Some(&sid), V, &call).await;
    assert_eq!(
        a.answer()["result"]["isError"],
        json!(false),
        "{:?}",
        a.msgs
    );
    events.next("notifications/resources/updated").await;
    // A plugin edit reloads the engine; the world a script changed stays.
    let main = t.path().join("plugins/Weather/main.lua");
    let text = std::fs::read_to_string(&main).unwrap();
    std::fs::write(&main, format!("{text}\n-- edited\n")).unwrap();
    events.next("notifications/tools/list_changed").await;
    assert_eq!(
        read_world(&c, &s.base, &sid).await,
        json!({"weather": {"now": "sun"}})
    );
    // A new world.json starts the world anew from it.
    std::fs::write(
        t.path().join("world.json"),
        r#"{"weather": {"now": "fog"}}"#,
    )
    .unwrap();
    events.next("notifications/tools/list_changed").await;
    assert_eq!(
        read_world(&c, &s.base, &sid).await,
        json!({"weather": {"now": "fog"}})
    );
}
