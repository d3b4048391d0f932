//! Embedding as a game host does it: plain `fn main` threads with no tokio runtime, host
//! tools given on the builder, Lua mods in a temp home, `call_blocking`, `submit`/`pump`/`take`.
//! Every test here is a plain `#[test]`: no runtime exists on the calling thread.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tavern::{CallOptions, Caller, CallerPolicy, CancelToken, Engine, ToolDefinition, ToolError};

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A TAM block calling `id` with string arguments.
fn tam(id: &str, args: &[(&str, &str)]) -> String {
    let mut s = format!("<|[REQUEST_TOOL]|>\ncommand:「始」{id}「末」\n");
    for (k, v) in args {
        s.push_str(&format!("{k}:「始」{v}「末」\n"));
    }
    s.push_str("<|[END_TOOL]|>\n");
    s
}

/// A Lua mod `name` with `main.lua`, allowed to call the host's `world:*` tools.
fn lua_mod(home: &Path, name: &str, lua: &str) {
    let dir = home.join("plugins").join(name);
    write(
        &dir.join("plugin.yaml"),
        &format!("name: {name}\nversion: 1.0.0\npermissions:\n  tools: [\"world:*\"]\n"),
    );
    write(&dir.join("main.lua"), lua);
}

fn one(engine: &Engine, text: &str, opts: CallOptions) -> Result<Value, ToolError> {
    let r = engine.call_blocking(text, opts).unwrap();
    assert_eq!(r.outcomes.len(), 1, "{:?}", r.parsed.diagnostics);
    r.outcomes[0].result.clone()
}

fn world_def(id: &str) -> ToolDefinition {
    ToolDefinition::host(
        id,
        "host tool",
        json!({"type": "object", "additionalProperties": true}),
    )
}

#[test]
fn a_mod_cannot_take_a_host_tools_id() {
    let home = tempfile::tempdir().unwrap();
    // A mod named like the host's namespace registers `world:set` and `world:other`.
    lua_mod(
        home.path(),
        "world",
        r#"
api.tools.register({id = "set", description = "mod's set", handler = function() return "mod" end})
api.tools.register({id = "other", description = "mod's other", handler = function() return "mod" end})
"#,
    );
    let engine = Engine::builder()
        .home(home.path())
        .host_tool(world_def("world:set"), |_, _| Ok(json!("host")))
        .build()
        .unwrap();
    // The host's tool answers, not the mod's; the mod's tools were refused with a reason.
    let got = one(
        &engine,
        &tam("world:set", &[]),
        CallOptions::new().caller(Caller::Model(None)),
    );
    assert_eq!(got, Ok(json!("host")));
    assert!(engine.tools().get("world:other").is_err());
    let problems: Vec<String> = engine.problems().iter().map(|p| p.to_string()).collect();
    assert!(
        problems.iter().any(|p| p.contains("reserved for the host")),
        "{problems:?}"
    );
    // `system` is the builtins' namespace and is reserved too.
    assert!(engine.tools().is_reserved("system"));
}

#[test]
fn a_panicking_host_tool_is_an_error_and_the_engine_keeps_serving() {
    let home = tempfile::tempdir().unwrap();
    lua_mod(
        home.path(),
        "m",
        r#"
api.tools.register({id = "calls_boom", description = "calls the host tool", handler = function()
  local ok, e = pcall(api.tools.call, "world:boom", {})
  return {ok = ok, e = tostring(e)}
end})
"#,
    );
    let engine = Engine::builder()
        .home(home.path())
        .host_tool(world_def("world:boom"), |_, _| panic!("host tool exploded"))
        .host_tool_async(world_def("world:boom_async"), |_, _| async {
            panic!("async host tool exploded")
        })
        .build()
        .unwrap();
    for id in ["world:boom", "world:boom_async"] {
        let err = one(&engine, &tam(id, &[]), CallOptions::new()).unwrap_err();
        assert_eq!(err.code(), "panicked", "{err}");
        assert!(err.to_string().contains("exploded"), "{err}");
    }
    // From a Lua mod: the script sees an error it can catch.
    let v = one(&engine, &tam("m:calls_boom", &[]), CallOptions::new()).unwrap();
    assert_eq!(v["ok"], json!(false), "{v}");
    // Still serving.
    let v = one(
        &engine,
        &tam("system:echo", &[("text", "alive")]),
        CallOptions::new(),
    );
    assert_eq!(v, Ok(json!("alive")));
}

/// Node (Lua), workflow and process tools from a thread with no runtime.
#[test]
fn node_workflow_and_process_tools_run_without_a_runtime() {
    assert!(tokio::runtime::Handle::try_current().is_err());
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().join("plugins/Mix");
    write(
        &dir.join("plugin.yaml"),
        "name: Mix\npermissions:\n  processes: true\n",
    );
    write(
        &dir.join("main.lua"),
        "function shout(node) return { text = string.upper(node.inputs.text) } end",
    );
    write(
        &dir.join("nodes/shout.node.json"),
        &json!({
            "type": "Shout", "description": "Upper-cases a text.",
            "inputs": {"text": {"dataFlowType": "STRING", "required": true}},
            "outputs": {"text": {"dataFlowType": "STRING"}},
            "script": "main.lua", "function": "shout"
        })
        .to_string(),
    );
    write(
        &dir.join("tools/shout.tool.json"),
        r#"{"id": "shout", "implementation": {"type": "node", "nodeType": "Shout"}}"#,
    );
    write(
        &dir.join("tools/run.tool.json"),
        &json!({
            "id": "Mix:run", "description": "a child process",
            "parameters": {"type": "object", "additionalProperties": true},
            "implementation": {"type": "script", "command": "python3 -c \"import json,sys; a=json.load(sys.stdin); print(json.dumps({'status':'success','result':a['x']*2}))\"", "timeout_ms": 20000}
        })
        .to_string(),
    );
    write(
        &home.path().join("workflows/loud.json"),
        &json!({
            "id": "loud",
            "interfaceInputs": {"text": {"dataFlowType": "STRING", "required": true}},
            "interfaceOutputs": {"loud": {"dataFlowType": "STRING"}},
            "nodes": [
                {"id": "in", "type": "core:GroupInput"},
                {"id": "s", "type": "Mix:Shout"},
                {"id": "out", "type": "core:GroupOutput"}
            ],
            "edges": [
                {"source": "in", "sourceHandle": "text", "target": "s", "targetHandle": "text"},
                {"source": "s", "sourceHandle": "text", "target": "out", "targetHandle": "loud"}
            ]
        })
        .to_string(),
    );
    let engine = Engine::builder().home(home.path()).build().unwrap();
    assert!(engine.problems().is_empty(), "{:?}", engine.problems());
    let cases = [
        (tam("Mix:shout", &[("text", "hey")]), json!("HEY")),
        (tam("workflow:loud", &[("text", "hey")]), json!("HEY")),
        (tam("Mix:run", &[("x", "21")]), json!("2121")),
    ];
    for (text, want) in cases {
        assert_eq!(one(&engine, &text, CallOptions::new()), Ok(want), "{text}");
        // The same through submit/pump/take.
        let t = engine.submit(&text).unwrap();
        let start = Instant::now();
        let report = loop {
            engine.pump(Duration::from_millis(5));
            if let Some(r) = engine.take(t) {
                break r.unwrap();
            }
            std::thread::sleep(Duration::from_millis(1));
            assert!(start.elapsed() < Duration::from_secs(60), "never finished");
        };
        assert!(report.ok(), "{:?}", report.outcomes);
    }
}

#[test]
fn a_looping_mod_calling_host_tools_ends_at_its_deadline() {
    let home = tempfile::tempdir().unwrap();
    // The mod's own wall limit is long (60 s): only the caller's deadline can end it soon.
    let dir = home.path().join("plugins/loop");
    write(
        &dir.join("plugin.yaml"),
        "name: loop\npermissions:\n  tools: [\"world:*\"]\nlimits:\n  wallMs: 60000\n  instructions: 100000000000\n",
    );
    write(
        &dir.join("main.lua"),
        r#"
api.tools.register({id = "spin", description = "loops on host calls", handler = function()
  while true do pcall(api.tools.call, "world:tick", {}) end
end})
api.tools.register({id = "ping", description = "answers", handler = function() return "pong" end})
"#,
    );
    let calls = Arc::new(AtomicU64::new(0));
    let seen = calls.clone();
    // The host allows long script calls (60 s, as the mod asks), so neither the engine's
    // default wall limit (5 s) nor the mod's can be what ends the call.
    let engine = Engine::builder()
        .home(home.path())
        .script_limits(tavern::Limits {
            wall_ms: 60_000,
            instructions: 100_000_000_000,
            ..tavern::Limits::engine_default()
        })
        .host_tool(world_def("world:tick"), move |_, _| {
            seen.fetch_add(1, Ordering::Relaxed);
            // Host time: each call sleeps, so instructions alone would never end the loop.
            std::thread::sleep(Duration::from_millis(2));
            Ok(json!(null))
        })
        .build()
        .unwrap();
    assert!(engine.problems().is_empty(), "{:?}", engine.problems());
    let started = Instant::now();
    let err = one(
        &engine,
        &tam("loop:spin", &[]),
        CallOptions::new().timeout(Duration::from_millis(300)),
    )
    .unwrap_err();
    assert_eq!(err.code(), "timeout", "{err}");
    assert!(calls.load(Ordering::Relaxed) > 0);
    // What ended it was the caller's 300 ms deadline (host time counted), not a wall limit
    // of the mod (60 s) or the engine (5 s): the budget the script was given is the deadline.
    assert!(
        matches!(err, ToolError::Timeout { after_ms, .. } if after_ms <= 300),
        "{err:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(60));

    // While it loops, another call into the same plugin is served between its host calls:
    // the mod's state is given up while a sync host tool runs (issue 37, item 5). (A call
    // to a plugin that is busy running script waits at most its own deadline:
    // plugin_turns.rs.)
    let spin = engine
        .submit_with(
            &tam("loop:spin", &[]),
            CallOptions::new().timeout(Duration::from_secs(3)),
        )
        .unwrap();
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(
        one(
            &engine,
            &tam("loop:ping", &[]),
            CallOptions::new().timeout(Duration::from_secs(2)),
        ),
        Ok(json!("pong"))
    );
    assert!(
        engine.take(spin).is_none(),
        "the looping call still runs (it ends at its 3 s deadline)"
    );
    // Once the looping call ended, the plugin answers again.
    while engine.take(spin).is_none() {
        engine.pump(Duration::from_millis(10));
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(
        one(&engine, &tam("loop:ping", &[]), CallOptions::new()),
        Ok(json!("pong"))
    );
}

#[test]
fn two_engines_with_different_homes_share_nothing_a_plugin_sees() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    // The same mod in both homes keeps a counter in its Lua state and reads its setting.
    let src = r#"
count = 0
api.tools.register({id = "bump", description = "counts", handler = function()
  count = count + 1
  return {count = count, who = api.config.get("who")}
end})
"#;
    for (home, who) in [(a.path(), "A"), (b.path(), "B")] {
        let dir = home.join("plugins/shared");
        write(
            &dir.join("plugin.yaml"),
            "name: shared\nconfigOptions:\n  - id: who\n    type: string\n    default: none\n",
        );
        write(&dir.join("main.lua"), src);
        write(
            &home.join("tavern.toml"),
            &format!("[extensions.shared]\nwho = \"{who}\"\n"),
        );
    }
    let ea = Engine::builder()
        .home(a.path())
        .host_tool(world_def("world:name"), |_, _| Ok(json!("world A")))
        .build()
        .unwrap();
    let eb = Engine::builder().home(b.path()).build().unwrap();
    assert!(ea.problems().is_empty(), "{:?}", ea.problems());
    assert!(eb.problems().is_empty(), "{:?}", eb.problems());
    let bump = tam("shared:bump", &[]);
    for n in 1..=3 {
        assert_eq!(
            one(&ea, &bump, CallOptions::new()),
            Ok(json!({"count": n, "who": "A"}))
        );
    }
    // Engine B's copy of the mod starts from zero and sees its own settings.
    assert_eq!(
        one(&eb, &bump, CallOptions::new()),
        Ok(json!({"count": 1, "who": "B"}))
    );
    // A's host tools are not B's; each engine has its own runtime.
    assert!(ea.tools().get("world:name").is_ok());
    assert!(eb.tools().get("world:name").is_err());
    assert!(ea.tools().owns_runtime() && eb.tools().owns_runtime());
    // Both engines serve concurrently from two host threads.
    std::thread::scope(|s| {
        s.spawn(|| one(&ea, &bump, CallOptions::new()).unwrap());
        s.spawn(|| one(&eb, &bump, CallOptions::new()).unwrap());
    });
    assert_eq!(
        one(&ea, &bump, CallOptions::new()).unwrap()["count"],
        json!(5)
    );
    assert_eq!(
        one(&eb, &bump, CallOptions::new()).unwrap()["count"],
        json!(3)
    );
}

#[test]
fn caller_policy_cancel_and_refuse_on_warnings() {
    let home = tempfile::tempdir().unwrap();
    lua_mod(
        home.path(),
        "m",
        r#"
api.tools.register({id = "poke", description = "calls the host", handler = function()
  return api.tools.call("world:secret", {})
end})
"#,
    );
    let engine = Engine::builder()
        .home(home.path())
        .host_tool(world_def("world:secret"), |_, _| Ok(json!("s3cret")))
        .policy("world:secret", CallerPolicy::HOST_ONLY)
        .build()
        .unwrap();
    let text = tam("world:secret", &[]);
    assert_eq!(one(&engine, &text, CallOptions::new()), Ok(json!("s3cret")));
    let err = one(
        &engine,
        &text,
        CallOptions::new().caller(Caller::Model(None)),
    )
    .unwrap_err();
    assert_eq!(err.code(), "not_permitted", "{err}");
    // Through a mod, the caller is the plugin: refused too.
    let err = one(&engine, &tam("m:poke", &[]), CallOptions::new()).unwrap_err();
    assert!(
        err.to_string().contains("may not be called by plugin:m"),
        "{err}"
    );

    // A host's token survives the calls it was given to (it is never fired for them).
    let keep = CancelToken::new();
    for _ in 0..2 {
        let r = one(&engine, &text, CallOptions::new().cancel(keep.clone()));
        assert_eq!(r, Ok(json!("s3cret")));
    }
    assert!(!keep.is_cancelled());
    let r = block_on_plain(engine.call(&text, CallOptions::new().cancel(keep.clone())));
    assert!(r.unwrap().ok());
    assert!(!keep.is_cancelled());

    // A fired cancel token stops the calls before they run.
    let stop = CancelToken::new();
    stop.cancel();
    let err = one(&engine, &text, CallOptions::new().cancel(stop)).unwrap_err();
    assert_eq!(err.code(), "cancelled", "{err}");

    // A block with a warning (an unterminated value recovered) runs unless refused.
    let warned = "<|[REQUEST_TOOL]|>\ncommand:「始」system:echo「末」\ntext:「始」hi「末」\nnot a pair\n<|[END_TOOL]|>\n";
    let r = engine.call_blocking(warned, CallOptions::new()).unwrap();
    let has_warnings = r
        .parsed
        .diagnostics
        .iter()
        .any(|d| d.severity == tavern::Severity::Warning);
    if has_warnings {
        assert!(r.outcomes[0].result.is_ok());
        let r = engine
            .call_blocking(warned, CallOptions::new().refuse_on_warnings(true))
            .unwrap();
        assert_eq!(
            r.outcomes[0].result.as_ref().unwrap_err().code(),
            "refused_warnings"
        );
    } else {
        panic!(
            "the sample text should produce a warning: {:?}",
            r.parsed.diagnostics
        );
    }
}

#[test]
fn outcomes_carry_the_canonical_id_and_elapsed_time() {
    let home = tempfile::tempdir().unwrap();
    let engine = Engine::builder().home(home.path()).build().unwrap();
    let r = engine
        .call_blocking(&tam("system.echo", &[("text", "x")]), CallOptions::new())
        .unwrap();
    assert_eq!(r.outcomes[0].tool, "system.echo");
    assert_eq!(r.outcomes[0].id.as_deref(), Some("system:echo"));
    assert!(r.outcomes[0].elapsed > Duration::ZERO);
    assert_eq!(r.to_json()["results"][0]["value"], json!("x"));
    // pump with nothing queued finishes nothing; take of an unknown ticket is None.
    assert!(engine.pump(Duration::from_millis(1)).is_empty());
    assert!(engine.take(tavern::Ticket(999)).is_none());
}

/// The async entry point under a current-thread runtime and under a plain executor.
#[test]
fn async_call_works_under_any_executor() {
    let home = tempfile::tempdir().unwrap();
    lua_mod(
        home.path(),
        "m",
        "api.tools.register({id = 'hi', description = 'x', handler = function(a) return 'hi ' .. a.name end})",
    );
    let engine = Engine::builder().home(home.path()).build().unwrap();
    let text = tam("m:hi", &[("name", "bob")]);
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let r = rt.block_on(engine.call(&text, CallOptions::new())).unwrap();
    assert_eq!(r.outcomes[0].result, Ok(json!("hi bob")));
    // No runtime at all: a minimal executor polls the future.
    let r = block_on_plain(engine.call(&text, CallOptions::new())).unwrap();
    assert_eq!(r.outcomes[0].result, Ok(json!("hi bob")));
    // call_blocking from inside a current-thread runtime of the host's own.
    let r = rt.block_on(async { engine.call_blocking(&text, CallOptions::new()) });
    assert_eq!(r.unwrap().outcomes[0].result, Ok(json!("hi bob")));
}

fn block_on_plain<F: std::future::Future>(fut: F) -> F::Output {
    struct W(std::thread::Thread);
    impl std::task::Wake for W {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = std::task::Waker::from(Arc::new(W(std::thread::current())));
    let mut cx = std::task::Context::from_waker(&waker);
    let mut fut = std::pin::pin!(fut);
    loop {
        if let std::task::Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::park();
    }
}

/// The nice value of thread `tid` of this process, and its name (`/proc/self/task/<tid>`).
#[cfg(target_os = "linux")]
fn thread_nice(tid: &str) -> Option<(String, i32)> {
    let dir = Path::new("/proc/self/task").join(tid);
    let name = std::fs::read_to_string(dir.join("comm")).ok()?;
    let stat = std::fs::read_to_string(dir.join("stat")).ok()?;
    // Fields after the command's closing parenthesis start at field 3 (state); nice is 19.
    let rest = &stat[stat.rfind(')')? + 2..];
    let nice = rest.split(' ').nth(19 - 3)?.parse().ok()?;
    Some((name.trim().to_string(), nice))
}

#[cfg(target_os = "linux")]
#[test]
fn a_spinning_mod_runs_below_the_hosts_priority_and_pump_keeps_its_budget() {
    let home = tempfile::tempdir().unwrap();
    lua_mod(
        home.path(),
        "busy",
        r#"api.tools.register({id = "spin", description = "loops", handler = function()
  while true do end
end})"#,
    );
    let engine = Engine::builder().home(home.path()).build().unwrap();
    assert!(engine.problems().is_empty(), "{:?}", engine.problems());
    // SAFETY: gettid takes nothing and only returns this thread's id.
    let tid = unsafe { libc::gettid() }.to_string();
    let host_nice = thread_nice(&tid).expect("this thread's own stat").1;
    let spin = engine
        .submit_with(
            &tam("busy:spin", &[]),
            CallOptions::new().timeout(Duration::from_secs(3)),
        )
        .unwrap();
    // Wait until the script is running on one of the engine's threads.
    let started = Instant::now();
    let spinning = loop {
        let mut busy = Vec::new();
        for entry in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
            let tid = entry.file_name().to_string_lossy().into_owned();
            let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
                continue;
            };
            // Running, and with CPU time to show for it (utime + stime, fields 14 and 15, at
            // least 5 ticks): a thread another test's engine has just started is also
            // running, for the instant before it lowers its own priority.
            let running = stat.rfind(')').is_some_and(|i| {
                let rest = &stat[i + 2..];
                let ticks: u64 = rest
                    .split(' ')
                    .skip(14 - 3)
                    .take(2)
                    .filter_map(|f| f.parse::<u64>().ok())
                    .sum();
                rest.starts_with('R') && ticks >= 5
            });
            if let Some((name, nice)) = thread_nice(&tid) {
                if running && name.starts_with("tavern-") {
                    busy.push((name, nice));
                }
            }
        }
        if !busy.is_empty() {
            break busy;
        }
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "no engine thread was seen running the looping script"
        );
        std::thread::sleep(Duration::from_millis(5));
    };
    // The engine's thread runs the mod at a lower priority than the host's threads (nice
    // +10, capped at 19); the host's own thread is untouched.
    for (name, nice) in &spinning {
        assert!(
            *nice >= (host_nice + 10).min(19),
            "engine thread {name} runs at nice {nice}, the host at {host_nice}"
        );
    }
    assert_eq!(
        thread_nice(&tid).expect("this thread's own stat").1,
        host_nice
    );
    // pump returns (nothing finishes while the script loops) and the call ends at a budget:
    // the engine's default instruction limit or the caller's deadline, whichever comes first.
    assert!(engine.pump(Duration::from_millis(1)).is_empty());
    let done = loop {
        engine.pump(Duration::from_millis(10));
        std::thread::sleep(Duration::from_millis(5));
        if let Some(d) = engine.take(spin) {
            break d.unwrap();
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the spin never ended"
        );
    };
    let err = done.outcomes[0].result.clone().unwrap_err();
    assert!(matches!(err.code(), "timeout" | "limit_exceeded"), "{err}");
}
