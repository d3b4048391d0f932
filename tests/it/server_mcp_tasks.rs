//! MCP tasks (SEP-2663) over raw JSON-RPC on `tavern mcp`'s stdin/stdout: a client that
//! declares the tasks extension gets quick calls answered directly, slow ones as a task it
//! polls with `tasks/get` (then the `CallToolResult`), and `tasks/cancel` stops one.

use crate::server_support;

use std::io::Write;
use std::process::{Child, ChildStdin};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use server_support::{spawn_mcp, temp_home};

struct Mcp {
    child: Child,
    stdin: ChildStdin,
    rx: mpsc::Receiver<Value>,
    next: u64,
}

impl Mcp {
    fn start(home: &std::path::Path) -> Mcp {
        let (child, stdin, rx) = spawn_mcp(home);
        let mut m = Mcp {
            child,
            stdin,
            rx,
            next: 1,
        };
        let init = m.request(
            "initialize",
            json!({"protocolVersion": "2025-11-25",
                   "capabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}},
                   "clientInfo": {"name": "tasks-test", "version": "1"}}),
        );
        assert!(
            init["result"]["capabilities"]["extensions"]["io.modelcontextprotocol/tasks"]
                .is_object(),
            "the server declares the tasks extension: {init}"
        );
        writeln!(
            m.stdin,
            "{}",
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
        )
        .unwrap();
        m
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next;
        self.next += 1;
        writeln!(
            self.stdin,
            "{}",
            json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
        )
        .expect("write request");
        self.stdin.flush().expect("flush");
        loop {
            let v = self
                .rx
                .recv_timeout(Duration::from_secs(30))
                .expect("a response within 30 s");
            if v.get("id") == Some(&json!(id)) {
                return v;
            }
        }
    }

    fn get(&mut self, task: &str) -> Value {
        self.request("tasks/get", json!({"taskId": task}))
    }

    /// Polls a task until it leaves `working`.
    fn wait(&mut self, task: &str, max: Duration) -> Value {
        let deadline = Instant::now() + max;
        loop {
            let r = self.get(task);
            if r["result"]["status"] != "working" {
                return r;
            }
            assert!(Instant::now() < deadline, "task still working: {r}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Mcp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn slow_calls_become_tasks_that_complete_or_cancel() {
    let home = temp_home();
    let mut m = Mcp::start(home.path());

    // Quick: answered directly.
    let r = m.request(
        "tools/call",
        json!({"name": "LuaDemo_echo", "arguments": {"text": "now"}}),
    );
    assert_eq!(r["result"]["content"][0]["text"], "now", "{r}");
    assert!(r["result"].get("taskId").is_none());

    // Slow: a task, polled to completion.
    let r = m.request(
        "tools/call",
        json!({"name": "workflow_slow_echo", "arguments": {"text": "later", "ms": 2500}}),
    );
    assert_eq!(r["result"]["resultType"], "task", "{r}");
    assert_eq!(r["result"]["status"], "working");
    let task = r["result"]["taskId"].as_str().expect("taskId").to_string();
    assert!(task.starts_with("job-"));
    assert!(r["result"]["pollIntervalMs"].is_u64());
    let done = m.wait(&task, Duration::from_secs(30));
    assert_eq!(done["result"]["status"], "completed", "{done}");
    assert_eq!(done["result"]["result"]["content"][0]["text"], "later");

    // A failing tool is a completed task whose result is an error.
    let r = m.request(
        "tools/call",
        json!({"name": "workflow_slow_echo", "arguments": {"text": "x", "ms": "not a number"}}),
    );
    let failed = if r["result"]["resultType"] == "task" {
        let t = r["result"]["taskId"].as_str().unwrap().to_string();
        m.wait(&t, Duration::from_secs(30))["result"]["result"].clone()
    } else {
        r["result"].clone()
    };
    assert_eq!(failed["isError"], true, "{failed}");

    // Cancel: the task ends cancelled.
    let r = m.request(
        "tools/call",
        json!({"name": "workflow_slow_echo", "arguments": {"text": "never", "ms": 60000}}),
    );
    let task = r["result"]["taskId"].as_str().expect("taskId").to_string();
    let ack = m.request("tasks/cancel", json!({"taskId": task}));
    assert!(ack.get("error").is_none(), "{ack}");
    let end = m.wait(&task, Duration::from_secs(10));
    assert_eq!(end["result"]["status"], "cancelled", "{end}");

    // Unknown task ids are errors.
    let r = m.get("job-000000000000-9");
    assert_eq!(r["error"]["code"], -32602, "{r}");
}
