//! Raw JSON-RPC over `tavern mcp`'s stdin/stdout: what the protocol notes require of the
//! dispatcher, checked byte for byte (no client library in between).

use crate::server_support;

use std::io::Write;
use std::process::{Child, ChildStdin};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{json, Value};
use server_support::{fixture_home, spawn_mcp};

struct Mcp {
    child: Child,
    stdin: ChildStdin,
    rx: mpsc::Receiver<Value>,
}

impl Mcp {
    fn start() -> Mcp {
        Mcp::start_in(&fixture_home())
    }

    fn start_in(home: &std::path::Path) -> Mcp {
        let (child, stdin, rx) = spawn_mcp(home);
        Mcp { child, stdin, rx }
    }

    fn send(&mut self, v: Value) {
        writeln!(self.stdin, "{v}").expect("write request");
        self.stdin.flush().expect("flush");
    }

    /// The next message with this id (notifications are skipped).
    fn response(&self, id: &Value) -> Value {
        loop {
            let v = self
                .rx
                .recv_timeout(Duration::from_secs(30))
                .expect("a response within 30 s");
            if v.get("id") == Some(id) {
                return v;
            }
        }
    }

    /// The next message with this id, and the notifications that came before it.
    fn response_after_notifications(&self, id: &Value) -> (Value, Vec<Value>) {
        let mut notes = Vec::new();
        loop {
            let v = self
                .rx
                .recv_timeout(Duration::from_secs(30))
                .expect("a response within 30 s");
            if v.get("id") == Some(id) {
                return (v, notes);
            }
            if v.get("id").is_none() {
                notes.push(v);
            }
        }
    }

    fn initialize(&mut self, version: &str) -> Value {
        self.send(
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": version, "capabilities": {},
            "clientInfo": {"name": "raw-test", "version": "1"}}}),
        );
        let r = self.response(&json!(0));
        self.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        r
    }
}

impl Drop for Mcp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn discover_and_unknown_methods_get_method_not_found() {
    let mut m = Mcp::start();
    // The stateless-revision opener, as the Python 2.x client sends it first.
    m.send(
        json!({"jsonrpc": "2.0", "id": "d1", "method": "server/discover", "params": {
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientCapabilities": {},
                  "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"}}}}),
    );
    let r = m.response(&json!("d1"));
    assert_eq!(r["error"]["code"], json!(-32601), "{r}");
    let init = m.initialize("2025-11-25");
    assert_eq!(
        init["result"]["protocolVersion"],
        json!("2025-11-25"),
        "{init}"
    );
    assert_eq!(
        init["result"]["serverInfo"]["name"],
        json!("tavern"),
        "{init}"
    );
    assert_eq!(
        init["result"]["capabilities"]["tools"]["listChanged"],
        json!(true)
    );
    m.send(json!({"jsonrpc": "2.0", "id": 7, "method": "no/such_method", "params": {}}));
    let r = m.response(&json!(7));
    assert_eq!(r["error"]["code"], json!(-32601), "{r}");
}

#[test]
fn older_revisions_are_accepted() {
    for v in ["2025-06-18", "2025-03-26"] {
        let mut m = Mcp::start();
        let init = m.initialize(v);
        assert_eq!(init["result"]["protocolVersion"], json!(v), "{init}");
        // Clients send tools/list with no params at all.
        m.send(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}));
        let r = m.response(&json!(1));
        assert!(
            r["result"]["tools"]
                .as_array()
                .is_some_and(|t| !t.is_empty()),
            "{r}"
        );
    }
}

#[test]
fn tool_errors_and_unknown_tools() {
    let mut m = Mcp::start();
    m.initialize("2025-11-25");
    m.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "nope_nope", "arguments": {}}}));
    let r = m.response(&json!(2));
    assert_eq!(r["error"]["code"], json!(-32602), "{r}");
    m.send(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "RhaiDemo_add", "arguments": {"a": 1}}}));
    let r = m.response(&json!(3));
    assert_eq!(r["result"]["isError"], json!(true), "{r}");
    let text = r["result"]["content"][0]["text"].as_str().unwrap_or("");
    assert!(
        text.starts_with("Observation: Error - Invalid parameters"),
        "{text}"
    );
    assert!(text.contains("'b'"), "names the missing parameter: {text}");
}

/// A `tools/call` result carries its call's id: in `structuredContent` (an object
/// result) and in `_meta["tavern/call_id"]` (every result, a failure's too); the id the
/// client gave in the request's `_meta`, else `call_0`.
#[test]
fn tools_call_results_carry_the_call_id() {
    let mut m = Mcp::start();
    m.initialize("2025-11-25");
    m.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "workflow_text_stats", "arguments": {"text": "one two"},
            "_meta": {"tavern/call_id": "call_abc123"}}}));
    let r = m.response(&json!(2));
    let res = &r["result"];
    assert_eq!(res["structuredContent"]["call_id"], "call_abc123", "{r}");
    assert_eq!(res["structuredContent"]["stats"]["words"], 2, "{r}");
    assert_eq!(res["_meta"]["tavern/call_id"], "call_abc123", "{r}");
    // No id given: the reader's `call_0`.
    m.send(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "workflow_text_stats", "arguments": {"text": "x"}}}));
    let r = m.response(&json!(3));
    assert_eq!(r["result"]["structuredContent"]["call_id"], "call_0", "{r}");
    // A string result has no structured content; its id is in `_meta`, as a failure's.
    m.send(json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
        "params": {"name": "system_echo", "arguments": {"text": "hi"},
            "_meta": {"tavern/call_id": "toolu_01"}}}));
    let r = m.response(&json!(4));
    assert_eq!(r["result"]["_meta"]["tavern/call_id"], "toolu_01", "{r}");
    assert!(r["result"].get("structuredContent").is_none(), "{r}");
    m.send(json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
        "params": {"name": "RhaiDemo_add", "arguments": {"a": 1},
            "_meta": {"tavern/call_id": "call_bad"}}}));
    let r = m.response(&json!(5));
    assert_eq!(r["result"]["isError"], json!(true), "{r}");
    assert_eq!(r["result"]["_meta"]["tavern/call_id"], "call_bad", "{r}");
}

#[test]
fn cancellation_stops_the_call_and_sends_no_response() {
    let mut m = Mcp::start();
    m.initialize("2025-11-25");
    m.send(json!({"jsonrpc": "2.0", "id": 10, "method": "tools/call",
        "params": {"name": "workflow_slow_echo", "arguments": {"text": "x", "ms": 60000}}}));
    std::thread::sleep(Duration::from_millis(200));
    m.send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 10, "reason": "test"}}),
    );
    // The server keeps serving; the cancelled request never gets an answer.
    m.send(json!({"jsonrpc": "2.0", "id": 11, "method": "tools/call",
        "params": {"name": "LuaDemo_echo", "arguments": {"text": "after"}}}));
    let mut got_11 = false;
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while std::time::Instant::now() < deadline {
        let Ok(v) = m.rx.recv_timeout(Duration::from_millis(500)) else {
            if got_11 {
                break;
            }
            continue;
        };
        assert_ne!(
            v.get("id"),
            Some(&json!(10)),
            "a cancelled call was answered: {v}"
        );
        if v.get("id") == Some(&json!(11)) {
            assert_eq!(v["result"]["content"][0]["text"], json!("after"), "{v}");
            got_11 = true;
        }
    }
    assert!(got_11, "the server stopped answering after a cancellation");
}

#[test]
fn conformance_fixture_serves_the_suites_tool_names() {
    let mut m = Mcp::start_in(&conformance_home());
    m.initialize("2025-11-25");
    m.send(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}));
    let r = m.response(&json!(1));
    let names: Vec<&str> = r["result"]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    for want in [
        "test_simple_text",
        "test_image_content",
        "test_audio_content",
        "test_embedded_resource",
        "test_multiple_content_types",
        "test_tool_with_logging",
        "test_tool_with_progress",
        "test_error_handling",
    ] {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }
    let cases = [
        ("test_image_content", "image"),
        ("test_audio_content", "audio"),
        ("test_embedded_resource", "resource"),
    ];
    for (i, (tool, kind)) in cases.iter().enumerate() {
        let id = json!(10 + i);
        m.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": tool, "arguments": {}}}));
        let r = m.response(&id);
        assert_eq!(r["result"]["content"][0]["type"], json!(kind), "{r}");
    }
    m.send(json!({"jsonrpc": "2.0", "id": 20, "method": "tools/call",
        "params": {"name": "test_error_handling", "arguments": {}}}));
    let r = m.response(&json!(20));
    assert_eq!(r["result"]["isError"], json!(true), "{r}");
}

#[test]
fn tool_logs_and_own_progress_reach_the_mcp_client() {
    let mut m = Mcp::start_in(&conformance_home());
    m.initialize("2025-11-25");

    // api.log.info in a Lua tool → notifications/message, at the default level (info).
    m.send(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "test_tool_with_logging", "arguments": {}}}));
    let (r, notes) = m.response_after_notifications(&json!(1));
    assert_eq!(r["result"]["isError"], json!(false), "{r}");
    let logs: Vec<&Value> = notes
        .iter()
        .filter(|n| n["method"] == json!("notifications/message"))
        .collect();
    let texts: Vec<&str> = logs
        .iter()
        .filter_map(|n| n["params"]["data"].as_str())
        .collect();
    assert_eq!(
        texts,
        [
            "Tool execution started",
            "Tool processing data",
            "Tool execution completed"
        ],
        "{notes:?}"
    );
    assert!(
        logs.iter().all(
            |n| n["params"]["level"] == json!("info") && n["params"]["logger"] == json!("test")
        ),
        "{logs:?}"
    );

    // api.tools.progress → notifications/progress with the tool's own numbers.
    m.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "test_tool_with_progress", "arguments": {},
                   "_meta": {"progressToken": "p-1"}}}));
    let (r, notes) = m.response_after_notifications(&json!(2));
    assert_eq!(r["result"]["isError"], json!(false), "{r}");
    let progress: Vec<(f64, Option<f64>)> = notes
        .iter()
        .filter(|n| n["method"] == json!("notifications/progress"))
        .map(|n| {
            assert_eq!(n["params"]["progressToken"], json!("p-1"), "{n}");
            (
                n["params"]["progress"].as_f64().expect("progress"),
                n["params"]["total"].as_f64(),
            )
        })
        .collect();
    assert_eq!(
        progress,
        [
            (0.0, Some(100.0)),
            (50.0, Some(100.0)),
            (100.0, Some(100.0))
        ],
        "{notes:?}"
    );

    // logging/setLevel error: info messages are no longer sent.
    m.send(
        json!({"jsonrpc": "2.0", "id": 3, "method": "logging/setLevel",
        "params": {"level": "error"}}),
    );
    m.response(&json!(3));
    m.send(json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
        "params": {"name": "test_tool_with_logging", "arguments": {}}}));
    let (_, notes) = m.response_after_notifications(&json!(4));
    assert!(
        !notes
            .iter()
            .any(|n| n["method"] == json!("notifications/message")),
        "{notes:?}"
    );
}

fn conformance_home() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conformance/home")
}

/// The next message, with the time it arrived.
fn next_timed(m: &Mcp) -> (Value, std::time::Instant) {
    let v =
        m.rx.recv_timeout(Duration::from_secs(30))
            .expect("a message within 30 s");
    (v, std::time::Instant::now())
}

#[test]
fn progress_and_logs_arrive_while_the_script_runs() {
    // test:tool_with_progress reports, waits 50 ms, reports, waits 50 ms, reports, returns.
    let mut m = Mcp::start_in(&conformance_home());
    m.initialize("2025-11-25");
    m.send(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "test_tool_with_progress", "arguments": {},
                   "_meta": {"progressToken": 7}}}));
    let mut first = None;
    let mut values = Vec::new();
    let answered = loop {
        let (v, at) = next_timed(&m);
        if v["method"] == json!("notifications/progress") {
            first.get_or_insert(at);
            values.push(v["params"]["progress"].as_f64().unwrap_or(-1.0));
        } else if v.get("id") == Some(&json!(1)) {
            assert_eq!(v["result"]["isError"], json!(false), "{v}");
            break at;
        }
    };
    assert_eq!(values, [0.0, 50.0, 100.0]);
    let first = first.expect("progress before the result");
    // 100 ms of waiting follow the first report: it cannot come in a burst with the result.
    assert!(
        answered.duration_since(first) >= Duration::from_millis(60),
        "the first progress came {:?} before the result",
        answered.duration_since(first)
    );

    // Logs likewise.
    m.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "test_tool_with_logging", "arguments": {}}}));
    let mut first = None;
    let answered = loop {
        let (v, at) = next_timed(&m);
        if v["method"] == json!("notifications/message") {
            first.get_or_insert(at);
            assert_eq!(v["params"]["logger"], json!("test"), "{v}");
        } else if v.get("id") == Some(&json!(2)) {
            break at;
        }
    };
    let first = first.expect("a log before the result");
    assert!(answered.duration_since(first) >= Duration::from_millis(60));
}

#[test]
fn scripts_ask_the_client_model_and_user() {
    let mut m = Mcp::start_in(&conformance_home());
    m.send(
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {"sampling": {}, "elicitation": {"form": {}}},
        "clientInfo": {"name": "raw-test", "version": "1"}}}),
    );
    m.response(&json!(0));
    m.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));

    // api.llm.chat → sampling/createMessage; the client's answer comes back to the script.
    m.send(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "test_sampling", "arguments": {"prompt": "Name a colour"}}}));
    let req = loop {
        let v =
            m.rx.recv_timeout(Duration::from_secs(30))
                .expect("a request");
        if v["method"] == json!("sampling/createMessage") {
            break v;
        }
    };
    assert_eq!(
        req["params"]["messages"][0]["content"],
        json!({"type": "text", "text": "Name a colour"}),
        "{req}"
    );
    assert_eq!(req["params"]["maxTokens"], json!(100), "{req}");
    m.send(json!({"jsonrpc": "2.0", "id": req["id"], "result": {
        "role": "assistant", "content": {"type": "text", "text": "teal"},
        "model": "test-model", "stopReason": "endTurn"}}));
    let r = m.response(&json!(1));
    assert_eq!(
        r["result"]["content"][0]["text"],
        json!("LLM response: teal"),
        "{r}"
    );

    // api.ask → elicitation/create in form mode with the schema as written.
    m.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "test_elicitation_sep1034_defaults", "arguments": {}}}));
    let req = loop {
        let v =
            m.rx.recv_timeout(Duration::from_secs(30))
                .expect("a request");
        if v["method"] == json!("elicitation/create") {
            break v;
        }
    };
    let props = &req["params"]["requestedSchema"]["properties"];
    assert_eq!(req["params"]["mode"], json!("form"), "{req}");
    assert_eq!(props["age"]["default"], json!(30), "{req}");
    assert_eq!(
        props["status"]["enum"],
        json!(["active", "inactive", "pending"]),
        "{req}"
    );
    m.send(json!({"jsonrpc": "2.0", "id": req["id"], "result": {
        "action": "accept", "content": {"name": "Ann", "age": 30}}}));
    let r = m.response(&json!(2));
    let text = r["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(
        text.contains("action=accept") && text.contains("\"name\":\"Ann\""),
        "{r}"
    );
}

#[test]
fn without_the_capability_the_script_gets_a_clear_error() {
    let mut m = Mcp::start_in(&conformance_home());
    m.initialize("2025-11-25"); // no sampling, no elicitation
    m.send(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "test_sampling", "arguments": {"prompt": "x"}}}));
    let r = m.response(&json!(1));
    assert_eq!(r["result"]["isError"], json!(true), "{r}");
    let text = r["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(
        text.contains("client_unsupported") && text.contains("sampling"),
        "{r}"
    );
}

#[test]
fn resources_prompts_and_completions_over_stdio() {
    let mut m = Mcp::start_in(&conformance_home());
    let init = m.initialize("2025-11-25");
    let caps = &init["result"]["capabilities"];
    assert_eq!(caps["resources"]["subscribe"], json!(true), "{init}");
    assert!(
        caps["prompts"].is_object() && caps["completions"].is_object(),
        "{init}"
    );

    m.send(json!({"jsonrpc": "2.0", "id": 1, "method": "resources/list"}));
    let r = m.response(&json!(1));
    let uris: Vec<&str> = r["result"]["resources"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|x| x["uri"].as_str())
        .collect();
    assert!(uris.contains(&"test://static-text"), "{r}");
    assert!(uris.contains(&"tavern://workflows/wait"), "{r}");

    m.send(
        json!({"jsonrpc": "2.0", "id": 2, "method": "resources/read",
        "params": {"uri": "test://template/42/data"}}),
    );
    let r = m.response(&json!(2));
    let c = &r["result"]["contents"][0];
    assert_eq!(c["uri"], json!("test://template/42/data"), "{r}");
    let data: Value = serde_json::from_str(c["text"].as_str().unwrap_or("null")).unwrap();
    assert_eq!(data["id"], json!("42"), "{r}");

    m.send(
        json!({"jsonrpc": "2.0", "id": 3, "method": "resources/read",
        "params": {"uri": "test://static-binary"}}),
    );
    let r = m.response(&json!(3));
    assert!(r["result"]["contents"][0]["blob"].is_string(), "{r}");

    m.send(
        json!({"jsonrpc": "2.0", "id": 4, "method": "resources/read",
        "params": {"uri": "test://nothing"}}),
    );
    let r = m.response(&json!(4));
    assert_eq!(r["error"]["code"], json!(-32002), "{r}");

    m.send(json!({"jsonrpc": "2.0", "id": 5, "method": "prompts/get",
        "params": {"name": "test_prompt_with_arguments", "arguments": {"arg1": "a", "arg2": "b"}}}));
    let r = m.response(&json!(5));
    assert_eq!(
        r["result"]["messages"][0]["content"]["text"],
        json!("Prompt with arguments: arg1='a', arg2='b'"),
        "{r}"
    );
    m.send(json!({"jsonrpc": "2.0", "id": 6, "method": "prompts/get",
        "params": {"name": "test_prompt_with_arguments", "arguments": {"arg1": "a"}}}));
    let r = m.response(&json!(6));
    assert_eq!(r["error"]["code"], json!(-32602), "{r}");

    m.send(
        json!({"jsonrpc": "2.0", "id": 7, "method": "completion/complete", "params": {
        "ref": {"type": "ref/prompt", "name": "test_prompt_with_arguments"},
        "argument": {"name": "arg1", "value": "par"}}}),
    );
    let r = m.response(&json!(7));
    assert_eq!(
        r["result"]["completion"]["values"],
        json!(["paris", "park", "party"]),
        "{r}"
    );
    m.send(
        json!({"jsonrpc": "2.0", "id": 8, "method": "completion/complete", "params": {
        "ref": {"type": "ref/resource", "uri": "test://template/{id}/data"},
        "argument": {"name": "id", "value": "1"}}}),
    );
    let r = m.response(&json!(8));
    assert_eq!(
        r["result"]["completion"]["values"],
        json!(["1", "123"]),
        "{r}"
    );
}

#[test]
fn subscribers_hear_of_resources_a_script_says_changed() {
    let mut m = Mcp::start_in(&conformance_home());
    m.initialize("2025-11-25");
    m.send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "resources/subscribe",
        "params": {"uri": "test://watched-resource"}}),
    );
    assert_eq!(m.response(&json!(1))["result"], json!({}));
    m.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "test_notify_watched", "arguments": {}}}));
    let mut seen = false;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let mut answered = false;
    while !(seen && answered) && std::time::Instant::now() < deadline {
        let Ok(v) = m.rx.recv_timeout(Duration::from_secs(10)) else {
            break;
        };
        if v["method"] == json!("notifications/resources/updated") {
            assert_eq!(v["params"]["uri"], json!("test://watched-resource"), "{v}");
            seen = true;
        }
        answered |= v.get("id") == Some(&json!(2));
    }
    assert!(seen && answered, "no notifications/resources/updated");

    // Unsubscribed: no more notifications for it.
    m.send(
        json!({"jsonrpc": "2.0", "id": 3, "method": "resources/unsubscribe",
        "params": {"uri": "test://watched-resource"}}),
    );
    m.response(&json!(3));
    m.send(json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
        "params": {"name": "test_notify_watched", "arguments": {}}}));
    let (_, notes) = m.response_after_notifications(&json!(4));
    m.send(json!({"jsonrpc": "2.0", "id": 5, "method": "ping"}));
    let (_, later) = m.response_after_notifications(&json!(5));
    assert!(
        !notes
            .iter()
            .chain(&later)
            .any(|n| n["method"] == json!("notifications/resources/updated")),
        "{notes:?} {later:?}"
    );
}

/// A home whose `guard` plugin asks the user before `guard:wipe` runs (a hook verdict
/// `{confirm = …}`), denying without a client that can ask.
fn guarded_home() -> tempfile::TempDir {
    let home = tempfile::tempdir().expect("temp home");
    let p = home.path().join("plugins/guard");
    std::fs::create_dir_all(p.join("tools")).unwrap();
    std::fs::write(
        p.join("plugin.yaml"),
        "name: guard\ndescription: asks first\npermissions:\n  hooks: [\"tool:before-invoke\"]\n",
    )
    .unwrap();
    std::fs::write(
        p.join("main.lua"),
        r#"
api.hooks.on("tool:before-invoke", function(ev, ctx)
  if ev.tool == "guard:wipe" then return { confirm = "Wipe everything?" } end
end)
function wipe(args, ctx) return "wiped" end
"#,
    )
    .unwrap();
    std::fs::write(
        p.join("tools/wipe.tool.json"),
        r#"{"id": "wipe", "description": "Wipes.", "parameters": {"type": "object", "properties": {}},
           "implementation": {"type": "service", "script": "main.lua", "function": "wipe"}}"#,
    )
    .unwrap();
    home
}

#[test]
fn a_hook_verdict_asks_the_user_to_confirm_a_call() {
    let home = guarded_home();
    let mut m = Mcp::start_in(home.path());
    m.send(
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}},
        "clientInfo": {"name": "raw-test", "version": "1"}}}),
    );
    m.response(&json!(0));
    m.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    for (id, action, want) in [(1, "accept", false), (2, "decline", true)] {
        m.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "guard_wipe", "arguments": {}}}));
        let req = loop {
            let v =
                m.rx.recv_timeout(Duration::from_secs(30))
                    .expect("a request");
            if v["method"] == json!("elicitation/create") {
                break v;
            }
        };
        assert_eq!(req["params"]["message"], json!("Wipe everything?"), "{req}");
        m.send(json!({"jsonrpc": "2.0", "id": req["id"], "result": {"action": action}}));
        let r = m.response(&json!(id));
        assert_eq!(r["result"]["isError"], json!(want), "{action}: {r}");
        let text = r["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default();
        if want {
            assert!(text.contains("did not confirm"), "{r}");
        } else {
            assert_eq!(text, "wiped", "{r}");
        }
    }

    // A client that cannot ask: the verdict's fallback (deny by default) decides.
    let mut m = Mcp::start_in(home.path());
    m.initialize("2025-11-25");
    m.send(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "guard_wipe", "arguments": {}}}));
    let r = m.response(&json!(1));
    assert_eq!(r["result"]["isError"], json!(true), "{r}");
    let text = r["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.contains("could not ask the user"), "{r}");
}

#[test]
fn an_llm_chat_node_with_base_url_mcp_client_asks_the_clients_model() {
    let home = tempfile::tempdir().expect("temp home");
    std::fs::create_dir_all(home.path().join("workflows")).unwrap();
    std::fs::write(
        home.path().join("workflows/ask_model.json"),
        r#"{"id": "ask_model", "description": "Asks the client's model.",
            "interfaceOutputs": {"text": {"key": "text", "dataFlowType": "STRING"}},
            "nodes": [{"id": "chat", "type": "llm:Chat",
                       "inputValues": {"system": "Be brief.", "prompt": "Name a colour"},
                       "configValues": {"base_url": "mcp-client", "max_tokens": 20}},
                      {"id": "out", "type": "core:GroupOutput"}],
            "edges": [{"source": "chat", "sourceHandle": "text", "target": "out", "targetHandle": "text"}]}"#,
    )
    .unwrap();
    let mut m = Mcp::start_in(home.path());
    m.send(
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {"sampling": {}},
        "clientInfo": {"name": "raw-test", "version": "1"}}}),
    );
    m.response(&json!(0));
    m.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    m.send(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "workflow:ask_model", "arguments": {}}}));
    let req = loop {
        let v =
            m.rx.recv_timeout(Duration::from_secs(30))
                .expect("a request");
        if v["method"] == json!("sampling/createMessage") {
            break v;
        }
        assert!(
            v.get("id") != Some(&json!(1)),
            "answered without sampling: {v}"
        );
    };
    assert_eq!(req["params"]["systemPrompt"], json!("Be brief."), "{req}");
    assert_eq!(req["params"]["maxTokens"], json!(20), "{req}");
    m.send(json!({"jsonrpc": "2.0", "id": req["id"], "result": {
        "role": "assistant", "content": {"type": "text", "text": "teal"},
        "model": "m", "stopReason": "endTurn"}}));
    let r = m.response(&json!(1));
    assert_eq!(r["result"]["isError"], json!(false), "{r}");
    assert!(
        r["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or("")
            .contains("teal"),
        "{r}"
    );
}
