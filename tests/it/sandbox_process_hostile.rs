//! Hostile process tools (issue 12): real python3 and sh children probing their sandbox.
//! Each probe fails with the right error (the OS error reaches the tool, the tool's error
//! text reaches the caller, limits name themselves and their values), the declared root and
//! the plugin's own files still work, the next call is served, and nothing is left running.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tavern::internal::tools::{Caller, ToolError};
use tavern::Engine;

/// The probe: runs one named case; an `OSError` becomes the tool's error text.
const PROBE: &str = r#"
import json, os, socket, sys, time, resource
a = json.load(sys.stdin)
case, arg = a["case"], a.get("arg")

def run():
    if case == "read":
        return open(arg).read()
    if case == "list":
        return sorted(os.listdir(arg))
    if case == "write":
        with open(arg, "w") as f:
            f.write("pwned")
        return open(arg).read()
    if case == "connect":
        s = socket.create_connection(("127.0.0.1", arg), timeout=3)
        s.sendall(b"hi")
        s.close()
        return "connected"
    if case == "udp":
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.sendto(b"x", ("127.0.0.1", arg))
        return "sent"
    if case == "environ":
        return dict(os.environ)
    if case == "parent_environ":
        return open("/proc/%d/environ" % os.getppid(), "rb").read().decode("latin-1")
    if case == "signal_parent":
        os.kill(os.getppid(), 0)
        return "signalled"
    if case == "raise_limit":
        resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        return "raised"
    if case == "memory":
        blocks = []
        while True:
            blocks.append(bytearray(64 << 20))
    if case == "fork":
        while True:
            if os.fork() == 0:
                time.sleep(60)
                os._exit(0)
    if case == "spin":
        while True:
            pass
    if case == "escape":
        # A grandchild leaves the process group and outlives the answer.
        if os.fork() == 0:
            os.setsid()
            time.sleep(60)
            os._exit(0)
        return "left one behind"
    if case == "tmp":
        p = os.path.join(os.environ["TMPDIR"], "scratch")
        open(p, "w").write("ok")
        return [os.environ["TMPDIR"], open(p).read()]
    raise SystemExit("unknown case " + case)

try:
    print(json.dumps({"status": "success", "result": run()}))
except OSError as e:
    print(json.dumps({"status": "error", "error": "%s: %s" % (type(e).__name__, e)}))
except ValueError as e:
    print(json.dumps({"status": "error", "error": "ValueError: %s" % e}))
"#;

/// A world to attack: the engine home with a settings file, another plugin's secret, a
/// directory outside every root, and the hostile plugin `H` with a declared root.
struct World {
    _t: tempfile::TempDir,
    home: PathBuf,
    root: PathBuf,
    outside: PathBuf,
}

/// A process tool; its wall-clock limit is generous so that on a loaded machine the CPU limit
/// of the `spin` case is reached first.
fn tool(dir: &Path, name: &str, command: &str, limits: Value) {
    std::fs::write(
        dir.join(format!("tools/{name}.tool.json")),
        json!({
            "id": name,
            "description": "probe",
            "parameters": {"type": "object", "additionalProperties": true},
            "implementation": {"type": "script", "command": command, "timeout_ms": 60000, "limits": limits}
        })
        .to_string(),
    )
    .unwrap();
}

fn world() -> World {
    let t = tempfile::tempdir().unwrap();
    let home = std::fs::canonicalize(t.path()).unwrap();
    std::fs::write(
        home.join("tavern.toml"),
        "[extensions.Other]\ntoken = 'engine-secret'\n",
    )
    .unwrap();
    let other = home.join("plugins/Other");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(
        other.join("plugin.yaml"),
        "name: Other\nconfigOptions:\n  - id: token\n    type: string\n",
    )
    .unwrap();
    std::fs::write(other.join("secret.txt"), "other-plugin-secret").unwrap();
    let outside = home.join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret.txt"), "outside-secret").unwrap();

    let h = home.join("plugins/H");
    std::fs::create_dir_all(h.join("tools")).unwrap();
    std::fs::write(
        h.join("plugin.yaml"),
        "name: H\npermissions:\n  processes: true\n  fs: { write: [work] }\nprocessLimits:\n  memoryMb: 256\n",
    )
    .unwrap();
    std::fs::write(h.join("probe.py"), PROBE).unwrap();
    std::fs::write(h.join("own.txt"), "own file").unwrap();
    tool(
        &h,
        "probe",
        "python3 probe.py",
        json!({"cpuSeconds": 2, "processes": 16}),
    );
    std::fs::write(
        h.join("probe.sh"),
        "cat /etc/passwd > /dev/null || exit 3\necho '{\"status\":\"success\",\"result\":\"read\"}'\n",
    )
    .unwrap();
    tool(&h, "shell", "sh probe.sh", json!({}));

    // A plugin that declares the network.
    let n = home.join("plugins/N");
    std::fs::create_dir_all(n.join("tools")).unwrap();
    std::fs::write(
        n.join("plugin.yaml"),
        "name: N\npermissions:\n  processes: true\n  network: true\n",
    )
    .unwrap();
    std::fs::write(n.join("probe.py"), PROBE).unwrap();
    tool(&n, "probe", "python3 probe.py", json!({}));

    let root = home.join("work");
    World {
        _t: t,
        home,
        root,
        outside,
    }
}

fn engine(w: &World) -> Engine {
    let e = Engine::builder()
        .home(&w.home)
        .builtins(false)
        .build()
        .unwrap();
    assert!(e.problems().is_empty(), "{:?}", e.problems());
    e
}

async fn probe(e: &Engine, tool: &str, case: &str, arg: Value) -> Result<Value, ToolError> {
    e.tools()
        .invoke(tool, json!({"case": case, "arg": arg}), Caller::Cli)
        .await
}

/// Processes whose working directory is inside `dir` (the plugin's or its temp dirs).
fn running_in(dir: &Path) -> Vec<i32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| {
                s.rsplit(')')
                    .next()
                    .unwrap_or("")
                    .trim_start()
                    .starts_with('Z')
            })
            .unwrap_or(true);
        if !zombie && std::fs::read_link(e.path().join("cwd")).is_ok_and(|c| c.starts_with(dir)) {
            out.push(pid);
        }
    }
    out
}

fn assert_nothing_left(dir: &Path) {
    let deadline = Instant::now() + Duration::from_secs(3);
    while !running_in(dir).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(running_in(dir), Vec::<i32>::new(), "processes left running");
}

/// What a case must give: success containing a text, or an error of a code containing
/// every text.
enum Want {
    Ok(&'static str),
    Err(&'static str, &'static [&'static str]),
}

#[tokio::test]
async fn hostile_probes_fail_with_the_right_error_and_allowed_things_work() {
    let w = world();
    let e = engine(&w);
    let h = w.home.join("plugins/H");
    std::os::unix::fs::symlink(w.outside.join("secret.txt"), w.root.join("link-read")).unwrap();
    std::os::unix::fs::symlink(w.outside.join("new.txt"), w.root.join("link-write")).unwrap();
    std::os::unix::fs::symlink(&w.outside, w.root.join("link-dir")).unwrap();
    let s = |p: PathBuf| Value::from(p.display().to_string());
    let denied: &[&str] = &["PermissionError", "Permission denied"];
    let cases: Vec<(&str, &str, Value, Want)> = vec![
        (
            "secret in /etc",
            "read",
            json!("/etc/passwd"),
            Want::Err("execution_failed", denied),
        ),
        (
            "engine settings",
            "read",
            s(w.home.join("tavern.toml")),
            Want::Err("execution_failed", denied),
        ),
        (
            "other plugin",
            "read",
            s(w.home.join("plugins/Other/secret.txt")),
            Want::Err("execution_failed", denied),
        ),
        (
            "outside file",
            "read",
            s(w.outside.join("secret.txt")),
            Want::Err("execution_failed", denied),
        ),
        (
            "list /root",
            "list",
            json!("/root"),
            Want::Err("execution_failed", denied),
        ),
        (
            "list home",
            "list",
            s(w.home.clone()),
            Want::Err("execution_failed", denied),
        ),
        (
            "list plugins",
            "list",
            s(w.home.join("plugins")),
            Want::Err("execution_failed", denied),
        ),
        (
            "write outside",
            "write",
            s(w.outside.join("x.txt")),
            Want::Err("execution_failed", denied),
        ),
        (
            "write own dir",
            "write",
            s(h.join("own.txt")),
            Want::Err("execution_failed", denied),
        ),
        (
            "read via symlink",
            "read",
            s(w.root.join("link-read")),
            Want::Err("execution_failed", denied),
        ),
        (
            "write via symlink",
            "write",
            s(w.root.join("link-write")),
            Want::Err("execution_failed", denied),
        ),
        (
            "write via dir symlink",
            "write",
            s(w.root.join("link-dir/y.txt")),
            Want::Err("execution_failed", denied),
        ),
        (
            "engine environment",
            "parent_environ",
            Value::Null,
            Want::Err("execution_failed", denied),
        ),
        (
            "signal the engine",
            "signal_parent",
            Value::Null,
            Want::Err("execution_failed", &["PermissionError"]),
        ),
        (
            "raise own limit",
            "raise_limit",
            Value::Null,
            Want::Err("execution_failed", &["ValueError", "not allowed to raise"]),
        ),
        (
            "memory",
            "memory",
            Value::Null,
            Want::Err("limit_exceeded", &["memory", "256 MiB"]),
        ),
        (
            "fork bomb",
            "fork",
            Value::Null,
            Want::Err("limit_exceeded", &["processes", "16"]),
        ),
        (
            "spin",
            "spin",
            Value::Null,
            Want::Err("limit_exceeded", &["cpu", "2 s"]),
        ),
        (
            "udp",
            "udp",
            json!(9),
            Want::Err("execution_failed", denied),
        ),
        // Allowed: the declared root, the plugin's own files, the private temp dir.
        (
            "write root",
            "write",
            s(w.root.join("note.txt")),
            Want::Ok("pwned"),
        ),
        (
            "read root",
            "read",
            s(w.root.join("note.txt")),
            Want::Ok("pwned"),
        ),
        ("list root", "list", s(w.root.clone()), Want::Ok("note.txt")),
        (
            "own file",
            "read",
            s(h.join("own.txt")),
            Want::Ok("own file"),
        ),
        ("temp dir", "tmp", Value::Null, Want::Ok("tavern-tool-")),
    ];
    assert!(cases.len() > 20);
    for (name, case, arg, want) in cases {
        let got = probe(&e, "H:probe", case, arg).await;
        match (&got, &want) {
            (Ok(v), Want::Ok(text)) => assert!(v.to_string().contains(text), "{name}: {v}"),
            (Err(err), Want::Err(code, texts)) => {
                assert_eq!(err.code(), *code, "{name}: {err}");
                for t in *texts {
                    assert!(err.to_string().contains(t), "{name}: {err}");
                }
            }
            _ => panic!("{name}: got {got:?}"),
        }
        assert_nothing_left(&h);
    }
    assert!(!w.outside.join("x.txt").exists() && !w.outside.join("new.txt").exists());
    assert!(!w.outside.join("y.txt").exists());
    assert_eq!(
        std::fs::read_to_string(h.join("own.txt")).unwrap(),
        "own file"
    );
}

#[tokio::test]
async fn sockets_need_the_network_permission() {
    let w = world();
    let e = engine(&w);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let err = probe(&e, "H:probe", "connect", json!(port))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("Permission denied"), "{err}");
    // The plugin that declares `network: true` reaches the same listener.
    let accept = std::thread::spawn(move || listener.accept().map(|_| ()));
    assert_eq!(
        probe(&e, "N:probe", "connect", json!(port)).await.unwrap(),
        json!("connected")
    );
    accept.join().unwrap().unwrap();
}

#[tokio::test]
async fn the_engine_environment_stays_out() {
    let w = world();
    // SAFETY: edition 2021; no other thread of this test binary reads this variable.
    std::env::set_var("TAVERN_HOSTILE_SECRET", "engine-env-secret");
    let e = engine(&w);
    let env = probe(&e, "H:probe", "environ", Value::Null).await.unwrap();
    assert!(env.get("PATH").is_some(), "{env}");
    assert!(!env.to_string().contains("engine-env-secret"), "{env}");
}

#[tokio::test]
async fn escaped_grandchildren_are_killed_and_shell_tools_are_confined() {
    let w = world();
    let e = engine(&w);
    let h = w.home.join("plugins/H");
    assert_eq!(
        probe(&e, "H:probe", "escape", Value::Null).await.unwrap(),
        json!("left one behind")
    );
    assert_nothing_left(&h);
    let err = probe(&e, "H:shell", "", Value::Null).await.unwrap_err();
    assert!(
        err.to_string().contains("exit status 3") && err.to_string().contains("Permission denied"),
        "{err}"
    );
    // Served again after every failure.
    assert_eq!(
        probe(
            &e,
            "H:probe",
            "read",
            Value::from(h.join("own.txt").display().to_string())
        )
        .await
        .unwrap(),
        json!("own file")
    );
}

#[tokio::test]
async fn plugin_check_shows_what_each_process_tool_may_do() {
    let w = world();
    let e = engine(&w);
    let t = e.tools().get("H:probe").unwrap();
    let d = t
        .handler()
        .describe_sandbox()
        .expect("a process tool describes its sandbox");
    assert_eq!(d["network"], json!(false));
    assert_eq!(d["limits"]["memoryMb"], json!(256));
    assert_eq!(d["limits"]["cpuSeconds"], json!(2));
    assert_eq!(d["limits"]["processes"], json!(16));
    assert_eq!(d["limits"]["openFiles"], json!(256));
    assert!(d["write"].to_string().contains("work"), "{d}");
}
