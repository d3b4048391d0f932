//! Process (script) tools: real python3 children in temp plugin directories.

use crate::plugin_support;

use std::path::Path;
use std::time::{Duration, Instant};

use plugin_support::copy_dir;
use serde_json::{json, Value};
use tavern::internal::tools::{Caller, ToolError};
use tavern::Engine;

/// Writes a one-tool process plugin `P` into `<home>/plugins/P`.
fn plugin(home: &Path, processes: bool, config: &str, timeout_ms: u64, script: &str) {
    let dir = home.join("plugins").join("P");
    std::fs::create_dir_all(dir.join("tools")).unwrap();
    std::fs::write(
        dir.join("plugin.yaml"),
        format!("name: P\nversion: 1.0.0\n{config}\npermissions:\n  processes: {processes}\n  fs: {{ write: [out] }}\n"),
    )
    .unwrap();
    std::fs::write(
        dir.join("tools/run.tool.json"),
        json!({
            "id": "P:run",
            "description": "runs the script",
            "parameters": {"type": "object", "additionalProperties": true},
            "implementation": {"type": "script", "command": "python3 tool.py", "timeout_ms": timeout_ms}
        })
        .to_string(),
    )
    .unwrap();
    std::fs::write(dir.join("tool.py"), script).unwrap();
}

fn engine(home: &Path) -> Engine {
    Engine::builder()
        .home(home)
        .builtins(false)
        .build()
        .unwrap()
}

async fn call(e: &Engine, args: Value) -> Result<Value, ToolError> {
    e.tools().invoke("P:run", args, Caller::Cli).await
}

const ECHO_SUM: &str = r#"
import json, sys
a = json.load(sys.stdin)
print(json.dumps({"status": "success", "result": {"sum": a["x"] + a["y"], "cwd_file": open("data.txt").read()}}))
"#;

#[tokio::test]
async fn success_gets_the_result_and_runs_in_the_plugin_dir() {
    let t = tempfile::tempdir().unwrap();
    plugin(t.path(), true, "", 10_000, ECHO_SUM);
    std::fs::write(t.path().join("plugins/P/data.txt"), "here").unwrap();
    let e = engine(t.path());
    assert!(e.problems().is_empty(), "{:?}", e.problems());
    let v = call(&e, json!({"x": 2, "y": 3})).await.unwrap();
    assert_eq!(v, json!({"sum": 5, "cwd_file": "here"}));
}

#[tokio::test]
async fn answers_and_failures_become_typed_errors() {
    let cases: &[(&str, &str, &[&str])] = &[
        (
            "error status",
            r#"print('{"status": "error", "error": "no such player"}')"#,
            &["no such player"],
        ),
        (
            "non-JSON stdout",
            "import sys\nprint('hello there')\nsys.stderr.write('debug info')",
            &[
                "did not answer with JSON",
                "hello there",
                "stderr: debug info",
            ],
        ),
        (
            "non-zero exit",
            "import sys\nsys.stderr.write('Traceback: boom')\nsys.exit(3)",
            &["exit status 3", "Traceback: boom"],
        ),
        (
            "JSON without status",
            r#"print('{"result": 1}')"#,
            &["without \"status\""],
        ),
        ("nothing at all", "pass", &["wrote nothing"]),
    ];
    for (name, script, wants) in cases {
        let t = tempfile::tempdir().unwrap();
        plugin(t.path(), true, "", 10_000, script);
        let e = engine(t.path());
        let err = call(&e, json!({})).await.unwrap_err();
        assert_eq!(err.code(), "execution_failed", "{name}: {err}");
        for w in *wants {
            assert!(err.to_string().contains(w), "{name}: {err}");
        }
    }
}

#[tokio::test]
async fn a_missing_binary_is_a_clear_error() {
    let t = tempfile::tempdir().unwrap();
    plugin(t.path(), true, "", 10_000, "");
    let tool = t.path().join("plugins/P/tools/run.tool.json");
    let text = std::fs::read_to_string(&tool)
        .unwrap()
        .replace("python3 tool.py", "no-such-binary-tavern x");
    std::fs::write(&tool, text).unwrap();
    let e = engine(t.path());
    let err = call(&e, json!({})).await.unwrap_err();
    assert!(
        err.to_string()
            .contains("cannot start 'no-such-binary-tavern': not found"),
        "{err}"
    );
}

fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // A zombie has exited; only its exit status is left for its parent.
        Ok(s) => !s
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z'),
        Err(_) => false,
    }
}

#[tokio::test]
async fn timeout_kills_the_whole_process_tree() {
    let t = tempfile::tempdir().unwrap();
    let out = t.path().join("out");
    let script = &format!(
        r#"
import subprocess, time
p = subprocess.Popen(["sleep", "60"])
open("{}/grandchild.pid", "w").write(str(p.pid))
time.sleep(60)
"#,
        out.display()
    );
    // Long enough for a confined python3 to start and write the pid file on a loaded machine.
    plugin(t.path(), true, "", 3000, script);
    let e = engine(t.path());
    let start = Instant::now();
    let err = call(&e, json!({})).await.unwrap_err();
    assert!(
        matches!(err, ToolError::Timeout { after_ms: 3000, .. }),
        "{err}"
    );
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "returned after {:?}",
        start.elapsed()
    );
    let pid: i32 = std::fs::read_to_string(out.join("grandchild.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(3);
    while alive(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!alive(pid), "grandchild {pid} survived the timeout");
    // The tool still works for the next call.
    assert_eq!(call(&e, json!({})).await.unwrap_err().code(), "timeout");
}

#[tokio::test]
async fn leftover_children_are_killed_when_the_tool_answers() {
    let t = tempfile::tempdir().unwrap();
    let out = t.path().join("out");
    let script = &format!(
        r#"
import subprocess, json
p = subprocess.Popen(["sleep", "60"])
open("{}/grandchild.pid", "w").write(str(p.pid))
print(json.dumps({{"status": "success", "result": "done"}}))
"#,
        out.display()
    );
    plugin(t.path(), true, "", 10_000, script);
    let e = engine(t.path());
    let start = Instant::now();
    assert_eq!(call(&e, json!({})).await.unwrap(), json!("done"));
    // The grandchild held stdout open; the call must not wait for it.
    assert!(start.elapsed() < Duration::from_secs(8));
    let pid: i32 = std::fs::read_to_string(out.join("grandchild.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(3);
    while alive(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!alive(pid), "grandchild {pid} outlived the call");
}

#[tokio::test]
async fn output_is_capped() {
    for stream in ["stdout", "stderr"] {
        let t = tempfile::tempdir().unwrap();
        let script = format!("import sys, time\nsys.{stream}.write('x' * (3 << 20))\nsys.{stream}.flush()\ntime.sleep(30)");
        plugin(t.path(), true, "", 20_000, &script);
        let e = engine(t.path());
        let start = Instant::now();
        let err = call(&e, json!({})).await.unwrap_err();
        assert!(
            matches!(&err, ToolError::LimitExceeded { limit, .. } if limit == "output"),
            "{err}"
        );
        assert!(err.to_string().contains(stream), "{err}");
        assert!(start.elapsed() < Duration::from_secs(15));
    }
}

#[tokio::test]
async fn environment_holds_only_path_and_declared_config() {
    let t = tempfile::tempdir().unwrap();
    let config = "configOptions:\n  - id: API_KEY\n    type: string\n    default: secret-from-config\n  - id: retries\n    type: integer\n    default: 2\n";
    let script =
        "import json, os\nprint(json.dumps({'status': 'success', 'result': dict(os.environ)}))";
    plugin(t.path(), true, config, 10_000, script);
    // Run the interpreter itself, not a version-manager shim that adds its own variables.
    let out = std::process::Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .unwrap();
    let exe = String::from_utf8(out.stdout).unwrap().trim().to_string();
    let tool = t.path().join("plugins/P/tools/run.tool.json");
    let text = std::fs::read_to_string(&tool)
        .unwrap()
        .replace("python3 tool.py", &format!("{exe} tool.py"));
    std::fs::write(&tool, text).unwrap();
    let e = engine(t.path());
    let env = call(&e, json!({})).await.unwrap();
    let env = env.as_object().unwrap();
    assert_eq!(env["API_KEY"], json!("secret-from-config"));
    assert_eq!(env["retries"], json!("2"));
    assert!(env.contains_key("PATH"));
    // TMPDIR and HOME name the call's private temporary directory.
    let tmp = env["TMPDIR"].as_str().unwrap();
    assert!(
        tmp.contains("tavern-tool-") && env["HOME"] == env["TMPDIR"],
        "{tmp}"
    );
    for k in env.keys() {
        // Python itself sets LC_CTYPE when the locale is unset (PEP 538).
        assert!(
            ["API_KEY", "retries", "PATH", "LC_CTYPE", "TMPDIR", "HOME"].contains(&k.as_str()),
            "unexpected variable {k}"
        );
    }
    assert!(
        std::env::var_os("CARGO_MANIFEST_DIR").is_some() && !env.contains_key("CARGO_MANIFEST_DIR")
    );
}

#[tokio::test]
async fn config_comes_from_settings() {
    let t = tempfile::tempdir().unwrap();
    let config = "configOptions:\n  - id: API_KEY\n    type: string\n";
    let script = "import json, os\nprint(json.dumps({'status': 'success', 'result': os.environ.get('API_KEY')}))";
    plugin(t.path(), true, config, 10_000, script);
    std::fs::write(
        t.path().join("tavern.toml"),
        "[extensions.P]\nAPI_KEY = \"from-toml\"\n",
    )
    .unwrap();
    let e = engine(t.path());
    assert_eq!(call(&e, json!({})).await.unwrap(), json!("from-toml"));
    let e = Engine::builder()
        .home(t.path())
        .builtins(false)
        .set("extensions.P.API_KEY=from-set")
        .build()
        .unwrap();
    assert_eq!(
        e.tools()
            .invoke("P:run", json!({}), Caller::Cli)
            .await
            .unwrap(),
        json!("from-set")
    );
}

#[tokio::test]
async fn process_tools_need_the_processes_permission() {
    let t = tempfile::tempdir().unwrap();
    plugin(t.path(), false, "", 10_000, ECHO_SUM);
    let e = engine(t.path());
    assert!(e.tools().get("P:run").is_err());
    let p = &e.problems()[0];
    assert!(p.file.ends_with("run.tool.json"), "{p}");
    assert!(p.message.contains("lacks permission `processes`"), "{p}");
    assert!(p.line.is_some(), "{p}");
}

#[tokio::test]
async fn vcp_plugins_run_unchanged() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("plugins/Dice");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("plugin-manifest.json"),
        json!({
            "manifestVersion": "1.0.0",
            "name": "Dice",
            "displayName": "Dice",
            "version": "1.0.0",
            "description": "rolls dice",
            "pluginType": "synchronous",
            "entryPoint": {"type": "python", "command": "python3 dice.py"},
            "communication": {"protocol": "stdio", "timeout": 10000},
            "configSchema": {"SIDES": "integer"},
            "capabilities": {"invocationCommands": [
                {"commandIdentifier": "Roll", "description": "Roll. Parameters: count (number)"},
                {"commandIdentifier": "Sides", "description": "How many sides"}
            ]}
        })
        .to_string(),
    )
    .unwrap();
    std::fs::write(
        dir.join("dice.py"),
        r#"
import json, os, sys
a = json.load(sys.stdin)
sides = int(os.environ.get("SIDES", "6"))
if a["command"] == "Sides":
    print(json.dumps({"status": "success", "result": sides}))
else:
    print(json.dumps({"status": "success", "result": [sides] * int(a.get("count", 1))}))
"#,
    )
    .unwrap();
    let e = Engine::builder()
        .home(t.path())
        .builtins(false)
        .set("extensions.Dice.SIDES=20")
        .build()
        .unwrap();
    assert!(e.problems().is_empty(), "{:?}", e.problems());
    let v = e
        .tools()
        .invoke("Dice.Roll", json!({"count": 3}), Caller::Cli)
        .await
        .unwrap();
    assert_eq!(v, json!([20, 20, 20]));
    let v = e
        .tools()
        .invoke("Dice:Sides", json!({}), Caller::Cli)
        .await
        .unwrap();
    assert_eq!(v, json!(20));
}

#[tokio::test]
async fn bundled_pystats_describes_numbers() {
    let t = tempfile::tempdir().unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("plugins/PyStats");
    copy_dir(&src, &t.path().join("plugins/PyStats"));
    let e = engine(t.path());
    assert!(e.problems().is_empty(), "{:?}", e.problems());
    let v = e
        .tools()
        .invoke(
            "PyStats.describe",
            json!({"numbers": [2, 4, 4, 4, 5, 5, 7, 9]}),
            Caller::Cli,
        )
        .await
        .unwrap();
    assert_eq!(v["count"], json!(8));
    assert_eq!(v["mean"], json!(5.0));
    assert_eq!(v["median"], json!(4.5));
    assert_eq!(v["stdev"], json!(2.0));
    assert_eq!(v["min"], json!(2.0));
    let err = e
        .tools()
        .invoke("PyStats:describe", json!({"numbers": []}), Caller::Cli)
        .await
        .unwrap_err();
    assert_eq!(err.code(), "invalid_parameters", "{err}");
    // A TAM caller writes the list as text; the schema turns it into numbers.
    let v = e
        .tools()
        .invoke(
            "PyStats:describe",
            json!({"numbers": "[1, 2, 3]"}),
            Caller::Cli,
        )
        .await
        .unwrap();
    assert_eq!(v["sum"], json!(6.0));
}
