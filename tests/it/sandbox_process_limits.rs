//! Process-tool limits (issue 12): defaults, lowered by plugin.yaml `processLimits:` and a
//! tool's `implementation.limits`, capped by the host (builder and `process.*` settings);
//! bad limits are load problems; `tavern plugin check` prints each tool's sandbox.

use std::path::Path;
use std::process::Command;

use serde_json::{json, Value};
use tavern::internal::sandbox::confine::ProcessLimits;
use tavern::Engine;

/// A plugin `P` with one python tool; `yaml_extra` goes into plugin.yaml, `limits` into the
/// tool's implementation.
fn plugin(home: &Path, yaml_extra: &str, limits: Value) {
    let dir = home.join("plugins/P");
    std::fs::create_dir_all(dir.join("tools")).unwrap();
    std::fs::write(
        dir.join("plugin.yaml"),
        format!("name: P\npermissions:\n  processes: true\n  fs: {{ read: [data] }}\n{yaml_extra}"),
    )
    .unwrap();
    std::fs::write(
        dir.join("tools/run.tool.json"),
        json!({
            "id": "P:run",
            "description": "runs",
            "parameters": {"type": "object"},
            "implementation": {"type": "script", "command": "python3 x.py", "limits": limits}
        })
        .to_string(),
    )
    .unwrap();
    std::fs::write(
        dir.join("x.py"),
        "print('{\"status\":\"success\",\"result\":1}')",
    )
    .unwrap();
}

fn sandbox(e: &Engine) -> Value {
    e.tools()
        .get("P:run")
        .unwrap()
        .handler()
        .describe_sandbox()
        .unwrap()
}

#[test]
fn limits_are_lowered_by_plugin_and_tool_and_capped_by_the_host() {
    // (plugin.yaml extra, tool limits, host cap memory, tavern.toml, expected limits)
    let cases: &[(&str, Value, Option<u64>, &str, Value)] = &[
        (
            "",
            Value::Null,
            None,
            "",
            json!({"memoryMb": 512, "cpuSeconds": 30, "processes": 32, "openFiles": 256, "outputBytes": 1048576}),
        ),
        (
            "processLimits: { memoryMb: 128, processes: 4 }\n",
            Value::Null,
            None,
            "",
            json!({"memoryMb": 128, "processes": 4}),
        ),
        (
            "processLimits: { memoryMb: 128 }\n",
            json!({"memoryMb": 64, "cpuSeconds": 2}),
            None,
            "",
            json!({"memoryMb": 64, "cpuSeconds": 2}),
        ),
        (
            "processLimits: { memoryMb: 4096 }\n",
            Value::Null,
            None,
            "",
            json!({"memoryMb": 512}),
        ),
        ("", Value::Null, Some(100), "", json!({"memoryMb": 100})),
        (
            "",
            json!({"openFiles": 10}),
            None,
            "[process]\nmemory_mb = 2048\nprocesses = 8\n",
            json!({"memoryMb": 512, "processes": 8, "openFiles": 10}),
        ),
        (
            "processLimits: { memoryMb: 1024 }\n",
            Value::Null,
            None,
            "[process]\nmemory_mb = 2048\n",
            json!({"memoryMb": 512}),
        ),
    ];
    for (i, (extra, limits, cap, toml, want)) in cases.iter().enumerate() {
        let t = tempfile::tempdir().unwrap();
        plugin(t.path(), extra, limits.clone());
        std::fs::write(t.path().join("tavern.toml"), toml).unwrap();
        let mut b = Engine::builder().home(t.path()).builtins(false);
        if let Some(m) = cap {
            b = b.process_limits(ProcessLimits {
                memory_mb: *m,
                ..ProcessLimits::DEFAULT
            });
        }
        let e = b.build().unwrap();
        assert!(e.problems().is_empty(), "case {i}: {:?}", e.problems());
        let got = sandbox(&e);
        for (k, v) in want.as_object().unwrap() {
            assert_eq!(&got["limits"][k], v, "case {i}: {k} in {got}");
        }
        assert_eq!(got["network"], json!(false));
        assert!(got["read"].to_string().contains("data"), "{got}");
    }
}

#[test]
fn the_host_grants_the_network_to_named_plugins() {
    for (toml, want) in [
        ("", false),
        ("[process]\nnetwork_plugins = [\"Other\"]\n", false),
        ("[process]\nnetwork_plugins = [\"P\"]\n", true),
    ] {
        let t = tempfile::tempdir().unwrap();
        plugin(t.path(), "", Value::Null);
        std::fs::write(t.path().join("tavern.toml"), toml).unwrap();
        let e = Engine::builder()
            .home(t.path())
            .builtins(false)
            .build()
            .unwrap();
        assert!(e.problems().is_empty(), "{:?}", e.problems());
        assert_eq!(sandbox(&e)["network"], json!(want), "{toml}");
    }
}

#[test]
fn bad_limits_are_load_problems() {
    let cases: &[(&str, Value, &str)] = &[
        (
            "processLimits: { memory: 1 }\n",
            Value::Null,
            "unknown field `memory`",
        ),
        (
            "processLimits: { processes: 0 }\n",
            Value::Null,
            "processes must be at least 1",
        ),
        (
            "",
            json!({"cpuSeconds": 0}),
            "cpuSeconds must be at least 1",
        ),
        ("", json!({"openfiles": 3}), "implementation.limits"),
    ];
    for (extra, limits, want) in cases {
        let t = tempfile::tempdir().unwrap();
        plugin(t.path(), extra, limits.clone());
        let e = Engine::builder()
            .home(t.path())
            .builtins(false)
            .build()
            .unwrap();
        let all: Vec<String> = e.problems().iter().map(|p| p.to_string()).collect();
        assert!(all.iter().any(|p| p.contains(want)), "{want}: {all:?}");
        assert!(
            e.tools().get("P:run").is_err(),
            "a tool with bad limits is refused"
        );
    }
}

#[test]
fn plugin_check_prints_each_process_tool_sandbox() {
    let t = tempfile::tempdir().unwrap();
    plugin(
        t.path(),
        "processLimits: { cpuSeconds: 7 }\n",
        json!({"processes": 3}),
    );
    let o = Command::new(env!("CARGO_BIN_EXE_tavern"))
        .arg("--home")
        .arg(t.path())
        .args(["plugin", "check"])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(out.contains("process-tool confinement: Landlock"), "{out}");
    let line = out
        .lines()
        .find(|l| l.starts_with("process tool P:run:"))
        .unwrap_or_else(|| panic!("{out}"));
    for want in [
        // Named from the home, like every path in a message (fs roots are taken from it).
        "read plugins/P, data (+ system paths)",
        "network no",
        "memory 512 MiB",
        "cpu 7 s",
        "processes 3",
        "open files 256",
        "write none",
    ] {
        assert!(line.contains(want), "{want}: {line}");
    }
}
