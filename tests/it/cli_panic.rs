//! The real binary with a host tool that panics (`debug:panic`, enabled by
//! `TAVERN_DEBUG_PANIC_TOOL` in debug builds): the containment turns the panic into an error
//! without the panic hook (issue 37: contained panics stay off it), the engine logs it once
//! (an `ERROR` line on stderr), and the process answers every call and exits 1 (a call
//! failed), not 70.

use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::{json, Value};

#[test]
fn a_panicking_host_tool_called_by_a_script_does_not_end_the_process() {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().join("plugins/m");
    std::fs::create_dir_all(&dir).unwrap();
    // Calling a host tool through `api.tools.call` needs `permissions.tools`.
    std::fs::write(
        dir.join("plugin.yaml"),
        "name: m\nversion: 1.0.0\npermissions:\n  tools: [\"debug:*\"]\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("main.lua"),
        r#"
api.tools.register({id = "calls_boom", description = "calls the panicking host tool", handler = function()
  local ok, e = pcall(api.tools.call, "debug:panic", {})
  return {ok = ok, error = tostring(e)}
end})
"#,
    )
    .unwrap();
    let text = "<|[REQUEST_TOOL]|>\ncommand:「始」m:calls_boom「末」\n<|[END_TOOL]|>\n\
                <|[REQUEST_TOOL]|>\ncommand:「始」debug:panic「末」\n<|[END_TOOL]|>\n\
                <|[REQUEST_TOOL]|>\ncommand:「始」system:echo「末」\ntext:「始」still here「末」\n<|[END_TOOL]|>\n";
    let mut child = Command::new(env!("CARGO_BIN_EXE_tavern"))
        .args(["call", "-"])
        .current_dir(home.path())
        .env_remove("TAVERN_HOME")
        .env_remove("TAVERN_LOG")
        .env("TAVERN_DEBUG_PANIC_TOOL", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(1),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let v: Value = serde_json::from_str(&stdout).unwrap();
    let results = v["results"].as_array().unwrap();
    assert_eq!(results.len(), 3, "{v}");
    assert_eq!(results[0]["ok"], json!(true), "{v}");
    assert_eq!(results[0]["value"]["ok"], json!(false), "{v}");
    assert_eq!(results[1]["error"]["code"], json!("panicked"), "{v}");
    assert_eq!(results[2]["value"], json!("still here"), "{v}");
    // One log line per panic, no Rust panic text and no hook line.
    assert!(!stderr.contains("panicked at"), "{stderr}");
    assert!(!stderr.contains("RUST_BACKTRACE"), "{stderr}");
    assert!(!stderr.contains("tavern: internal error"), "{stderr}");
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("ERROR") && l.contains("panicked: debug:panic was called"))
        .collect();
    assert_eq!(lines.len(), 2, "{stderr}");
}
