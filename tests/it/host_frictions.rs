//! What a game host still tripped on (issue 37): timeouts counted from the call's start,
//! main-thread tools that cannot be stranded, a pump that keeps its budget and names what
//! finished, contained panics that stay quiet, host tools off the script state, and the
//! small seams (suggestions, log callback, async tools after build, mod logs on stderr).
//! Plain `#[test]`s: no runtime on this thread.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;
use tavern::{CallOptions, Engine, ToolDefinition};

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn tam(id: &str) -> String {
    format!("<|[REQUEST_TOOL]|>\ncommand:「始」{id}「末」\n<|[END_TOOL]|>\n")
}

fn def(id: &str) -> ToolDefinition {
    ToolDefinition::host(
        id,
        "host tool",
        json!({"type": "object", "additionalProperties": true}),
    )
}

fn lua_mod(home: &Path, name: &str, lua: &str) {
    let dir = home.join("plugins").join(name);
    write(
        &dir.join("plugin.yaml"),
        &format!("name: {name}\nversion: 1.0.0\npermissions:\n  tools: [\"world:*\"]\n"),
    );
    write(&dir.join("main.lua"), lua);
}

/// Options built once with a 300 ms timeout and cloned after 400 ms: the timeout counts
/// from each call's start, so the calls still run (they used to fail at once, "timed out
/// after 0 ms", because the deadline was fixed when the options were built).
#[test]
fn timeout_counts_from_the_call_not_from_the_options() {
    let home = tempfile::tempdir().unwrap();
    let engine = Engine::builder()
        .home(home.path())
        .plugins(false)
        .host_tool_async(def("world:slowish"), |_ctx, _args| async {
            tokio::time::sleep(Duration::from_millis(20)).await;
            Ok(json!("done"))
        })
        .build()
        .unwrap();
    let opts = CallOptions::new().timeout(Duration::from_millis(300));
    std::thread::sleep(Duration::from_millis(400));

    let report = engine
        .call_blocking(&tam("world:slowish"), opts.clone())
        .unwrap();
    assert_eq!(report.outcomes[0].result, Ok(json!("done")));

    let ticket = engine
        .submit_with(&tam("world:slowish"), opts.clone())
        .unwrap();
    let report = loop {
        engine.pump(Duration::from_millis(5));
        if let Some(r) = engine.take(ticket) {
            break r.unwrap();
        }
    };
    assert_eq!(report.outcomes[0].result, Ok(json!("done")));

    // The timeout still bounds the call: 300 ms from its start (a looping mod stops there).
    // (Instruction limits raised, so the deadline is what ends the loop.)
    let dir = home.path().join("plugins/loop");
    write(
        &dir.join("plugin.yaml"),
        "name: loop\nversion: 1.0.0\nlimits:\n  wallMs: 600000\n  instructions: 1000000000000\n",
    );
    write(
        &dir.join("main.lua"),
        "api.tools.register({id = 'spin', description = 'loops', handler = function() while true do end end})",
    );
    let limits = tavern::Limits {
        instructions: 1_000_000_000_000,
        wall_ms: 600_000,
        ..tavern::Limits::engine_default()
    };
    let looping = Engine::builder()
        .home(home.path())
        .script_limits(limits)
        .build()
        .unwrap();
    assert!(looping.problems().is_empty(), "{:?}", looping.problems());
    let t0 = Instant::now();
    let report = looping.call_blocking(&tam("loop:spin"), opts).unwrap();
    let code = report.outcomes[0].result.as_ref().unwrap_err().code();
    assert_eq!(code, "timeout", "{:?}", report.outcomes[0].result);
    assert!(
        t0.elapsed() >= Duration::from_millis(250),
        "{:?}",
        t0.elapsed()
    );
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
}

/// Polls `ticket` frame by frame (pump, then the rest of a 1 ms frame) for at most 30 s.
fn pump_until(engine: &Engine, ticket: tavern::Ticket) -> tavern::CallReport {
    let end = Instant::now() + Duration::from_secs(30);
    loop {
        engine.pump(Duration::from_millis(1));
        if let Some(r) = engine.take(ticket) {
            return r.unwrap();
        }
        assert!(Instant::now() < end, "ticket {ticket:?} never finished");
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn thread_text() -> String {
    format!("{:?}", std::thread::current().id())
}

/// An engine built on a loader thread and pumped on this one: a `Send` main-thread tool
/// runs here (the first thread that pumps owns it), and so does one when the builder
/// names this thread as the pump thread.
#[test]
fn main_thread_tools_of_an_engine_built_on_a_loader_thread_run_where_it_is_pumped() {
    let home = tempfile::tempdir().unwrap();
    let here = std::thread::current().id();
    for named in [false, true] {
        let h = home.path().to_path_buf();
        let engine = std::thread::spawn(move || {
            let mut b = Engine::builder()
                .home(h)
                .plugins(false)
                .main_thread_tool_send(def("world:where"), |_ctx, _args| Ok(json!(thread_text())));
            if named {
                b = b.pump_thread(here);
            }
            b.build().unwrap()
        })
        .join()
        .unwrap();
        let t = engine
            .submit_with(
                &tam("world:where"),
                CallOptions::new().timeout(Duration::from_secs(20)),
            )
            .unwrap();
        let report = pump_until(&engine, t);
        assert_eq!(
            report.outcomes[0].result,
            Ok(json!(thread_text())),
            "named: {named}"
        );
    }
}

/// A non-`Send` main-thread tool registered on a loader thread that never pumps: its calls
/// are logged once (not once per call) and end at their deadline, while this thread pumps.
#[test]
fn a_call_for_a_thread_that_never_pumps_is_logged_once_and_ends_at_its_deadline() {
    let home = tempfile::tempdir().unwrap();
    let lines = Arc::new(Mutex::new(Vec::<String>::new()));
    let sink = lines.clone();
    let h = home.path().to_path_buf();
    let engine = std::thread::spawn(move || {
        let local = std::rc::Rc::new(7); // not `Send`: bound to this loader thread
        Engine::builder()
            .home(h)
            .plugins(false)
            .log_callback(move |r| {
                sink.lock()
                    .unwrap()
                    .push(format!("{}: {}", r.source, r.message))
            })
            .main_thread_tool(def("world:stuck"), move |_ctx, _args| Ok(json!(*local)))
            .build()
            .unwrap()
    })
    .join()
    .unwrap();
    let opts = CallOptions::new().timeout(Duration::from_millis(1800));
    let t0 = Instant::now();
    let tickets = [
        engine
            .submit_with(&tam("world:stuck"), opts.clone())
            .unwrap(),
        engine.submit_with(&tam("world:stuck"), opts).unwrap(),
    ];
    for t in tickets {
        let report = pump_until(&engine, t);
        let err = report.outcomes[0].result.as_ref().unwrap_err();
        assert_eq!(err.code(), "timeout", "{err}");
    }
    assert!(
        t0.elapsed() >= Duration::from_millis(1700),
        "{:?}",
        t0.elapsed()
    );
    let lines = lines.lock().unwrap();
    let stranded: Vec<_> = lines
        .iter()
        .filter(|l| l.contains("world:stuck") && l.contains("waited"))
        .collect();
    assert_eq!(stranded.len(), 1, "{lines:#?}");
    assert!(
        stranded[0].contains(&format!(
            "last pumped on thread {:?}",
            std::thread::current().id()
        )),
        "{}",
        stranded[0]
    );
    assert!(
        stranded[0].contains("ends at its deadline"),
        "{}",
        stranded[0]
    );
}

/// Six calls parked for a 30 ms main-thread tool at once, pumped with a 10 ms budget: each
/// pump starts one handler (the first always, no second past the budget), returns within
/// its budget plus that one run, and hands back the tickets it collected — all six, once.
#[test]
fn pump_keeps_its_budget_when_queued_calls_are_released_together() {
    let home = tempfile::tempdir().unwrap();
    let runs = Arc::new(Mutex::new(Vec::<Duration>::new()));
    let r2 = runs.clone();
    let engine = Engine::builder()
        .home(home.path())
        .plugins(false)
        .main_thread_tool(def("world:heavy"), move |_ctx, _args| {
            let t = Instant::now();
            std::thread::sleep(Duration::from_millis(30));
            r2.lock().unwrap().push(t.elapsed());
            Ok(json!(true))
        })
        .build()
        .unwrap();
    let opts = CallOptions::new().timeout(Duration::from_secs(30));
    let mut tickets: Vec<_> = (0..6)
        .map(|_| {
            engine
                .submit_with(&tam("world:heavy"), opts.clone())
                .unwrap()
        })
        .collect();
    // Let all six park (generous: the engine's threads only read and park them).
    std::thread::sleep(Duration::from_millis(500));
    let budget = Duration::from_millis(10);
    let mut collected = Vec::new();
    let end = Instant::now() + Duration::from_secs(30);
    while collected.len() < tickets.len() {
        let before = runs.lock().unwrap().len();
        let t = Instant::now();
        let finished = engine.pump(budget);
        let took = t.elapsed();
        let ran: Vec<Duration> = runs.lock().unwrap()[before..].to_vec();
        assert!(
            ran.len() <= 1,
            "one 30 ms handler per 10 ms pump, ran {ran:?}"
        );
        let own = ran.iter().copied().max().unwrap_or_default();
        assert!(
            took <= budget + own + Duration::from_millis(25),
            "pump took {took:?}: budget {budget:?}, its handler {own:?}"
        );
        collected.extend(finished);
        assert!(Instant::now() < end, "collected only {collected:?}");
        std::thread::sleep(Duration::from_millis(2));
    }
    collected.sort();
    tickets.sort();
    assert_eq!(collected, tickets, "every ticket handed back once");
    for t in tickets {
        assert!(engine.take(t).unwrap().unwrap().ok());
    }
}

/// With only another thread's work pending (a 2 s host tool), a pump with a long budget
/// returns at once, with nothing finished.
#[test]
fn pump_returns_at_once_while_only_others_work_is_pending() {
    let home = tempfile::tempdir().unwrap();
    let engine = Engine::builder()
        .home(home.path())
        .plugins(false)
        .host_tool_async(def("world:long"), |_ctx, _args| async {
            tokio::time::sleep(Duration::from_secs(2)).await;
            Ok(json!(true))
        })
        .build()
        .unwrap();
    let t = engine.submit(&tam("world:long")).unwrap();
    std::thread::sleep(Duration::from_millis(50));
    let t0 = Instant::now();
    let finished = engine.pump(Duration::from_millis(500));
    assert!(finished.is_empty());
    assert!(
        t0.elapsed() < Duration::from_millis(250),
        "pump waited {:?} for work that was not its own",
        t0.elapsed()
    );
    assert!(engine.cancel(t));
}

const PANICKY_MOD: &str = r#"
api.tools.register({id = "calls_boom", description = "calls the panicking host tool", handler = function()
  local ok, e = pcall(api.tools.call, "world:boom", {})
  return {ok = ok}
end})
"#;

/// Runs this test binary again as a child with `RUST_BACKTRACE=1` and `mode` in
/// `TAVERN_FRICTIONS_CHILD`, running only `test`; its stdout and stderr.
fn run_child(test: &str, mode: &str) -> (String, String) {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env("TAVERN_FRICTIONS_CHILD", mode)
        .env("RUST_BACKTRACE", "1")
        .env_remove("TAVERN_LOG")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "child failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    (stdout, stderr)
}

/// The child's side: a host panic hook set first, then panics in a sync host tool (from
/// text and from a mod), an async one and a main-thread one — all contained, each one
/// record at `Error` — and then a panic of the host's own, which the host's hook sees.
fn contained_panics_child() {
    std::panic::set_hook(Box::new(|info| {
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .copied()
            .unwrap_or("?");
        eprintln!("HOST-HOOK: {msg}");
    }));
    let home = tempfile::tempdir().unwrap();
    lua_mod(home.path(), "m", PANICKY_MOD);
    let records = Arc::new(Mutex::new(Vec::<(tavern::LogLevel, String)>::new()));
    let sink = records.clone();
    let engine = Engine::builder()
        .home(home.path())
        .log_callback(move |r| {
            sink.lock()
                .unwrap()
                .push((r.level, format!("{}: {}", r.source, r.message)))
        })
        .host_tool(def("world:boom"), |_ctx, _args| panic!("sync boom"))
        .host_tool_async(def("world:aboom"), |_ctx, _args| async {
            panic!("async boom")
        })
        .main_thread_tool(def("world:mboom"), |_ctx, _args| panic!("main boom"))
        .build()
        .unwrap();
    assert!(engine.problems().is_empty(), "{:?}", engine.problems());
    for id in ["world:boom", "world:aboom", "world:mboom"] {
        let r = engine.call_blocking(&tam(id), CallOptions::new()).unwrap();
        assert_eq!(
            r.outcomes[0].result.as_ref().unwrap_err().code(),
            "panicked"
        );
    }
    let t = engine.submit(&tam("world:boom")).unwrap();
    let r = pump_until(&engine, t);
    assert_eq!(
        r.outcomes[0].result.as_ref().unwrap_err().code(),
        "panicked"
    );
    let r = engine
        .call_blocking(&tam("m:calls_boom"), CallOptions::new())
        .unwrap();
    assert_eq!(r.outcomes[0].result, Ok(json!({"ok": false})));
    let records = records.lock().unwrap();
    let panics: Vec<_> = records
        .iter()
        .filter(|(_, m)| m.contains("panicked"))
        .collect();
    assert_eq!(panics.len(), 5, "one record per panic: {records:#?}");
    assert!(
        panics.iter().all(|(l, _)| *l == tavern::LogLevel::Error),
        "one level: {records:#?}"
    );
    // The host's own panic still reaches the host's hook.
    let _ = std::panic::catch_unwind(|| panic!("the host's own"));
    println!("CHILD-OK");
}

/// Contained panics never reach the process panic hook: with `RUST_BACKTRACE=1` the child
/// prints no panic message and takes no backtrace; the host's own hook still sees the
/// host's own panic.
#[test]
fn contained_panics_stay_off_the_panic_hook() {
    if std::env::var("TAVERN_FRICTIONS_CHILD").as_deref() == Ok("panics") {
        contained_panics_child();
        return;
    }
    let (stdout, stderr) = run_child(
        "host_frictions::contained_panics_stay_off_the_panic_hook",
        "panics",
    );
    assert!(stdout.contains("CHILD-OK"), "{stdout}\n{stderr}");
    assert!(!stderr.contains("panicked at"), "{stderr}");
    assert!(!stderr.contains("stack backtrace"), "{stderr}");
    assert!(!stderr.contains("boom"), "{stderr}");
    let hooked: Vec<_> = stderr
        .lines()
        .filter(|l| l.starts_with("HOST-HOOK:"))
        .collect();
    assert_eq!(hooked, ["HOST-HOOK: the host's own"], "{stderr}");
}

const CHATTY_MOD: &str = r#"
api.tools.register({id = "hi", description = "says hi", handler = function()
  print("hello from the mod")
  api.log.info("info from the mod")
  return true
end})
"#;

fn mod_logs_child(to_stderr: bool) {
    let home = tempfile::tempdir().unwrap();
    lua_mod(home.path(), "chatty", CHATTY_MOD);
    let engine = Engine::builder()
        .home(home.path())
        .log_to_stderr(to_stderr)
        .build()
        .unwrap();
    let r = engine
        .call_blocking(&tam("chatty:hi"), CallOptions::new())
        .unwrap();
    assert!(r.ok());
    println!("CHILD-OK");
}

/// With no log callback, mods' lines reach stderr at `info` (`[info] plugin:chatty: ...`);
/// `log_to_stderr(false)` turns that off.
#[test]
fn mod_logs_reach_stderr_without_a_callback() {
    match std::env::var("TAVERN_FRICTIONS_CHILD").as_deref() {
        Ok("logs-on") => return mod_logs_child(true),
        Ok("logs-off") => return mod_logs_child(false),
        _ => {}
    }
    let name = "host_frictions::mod_logs_reach_stderr_without_a_callback";
    let (stdout, stderr) = run_child(name, "logs-on");
    assert!(stdout.contains("CHILD-OK"), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("[info] plugin:chatty: hello from the mod"),
        "{stderr}"
    );
    assert!(
        stderr.contains("[info] plugin:chatty: info from the mod"),
        "{stderr}"
    );
    let (stdout, stderr) = run_child(name, "logs-off");
    assert!(stdout.contains("CHILD-OK"), "{stdout}\n{stderr}");
    assert!(!stderr.contains("from the mod"), "{stderr}");
}

/// "Did you mean" offers only the tools a model is shown: never a hidden `node:*` tool.
#[test]
fn suggestions_come_from_model_facing_tools_only() {
    let home = tempfile::tempdir().unwrap();
    let engine = Engine::builder().home(home.path()).build().unwrap();
    assert!(
        engine.tools().find("node:core.Math").is_some(),
        "the hidden node tool exists"
    );
    let r = engine
        .call_blocking(&tam("core.Mathh"), CallOptions::new())
        .unwrap();
    let msg = r.outcomes[0].result.as_ref().unwrap_err().to_string();
    assert!(!msg.contains("node:"), "{msg}");
    // A model-facing tool is still suggested.
    let r = engine
        .call_blocking(&tam("system:ehco"), CallOptions::new())
        .unwrap();
    let msg = r.outcomes[0].result.as_ref().unwrap_err().to_string();
    assert!(msg.contains("did you mean 'system:echo'"), "{msg}");
}

/// The log callback is the same closure type on the builder and after build, and async
/// host tools can be registered after build.
#[test]
fn set_log_callback_and_async_tools_after_build() {
    let home = tempfile::tempdir().unwrap();
    lua_mod(home.path(), "chatty", CHATTY_MOD);
    let engine = Engine::builder().home(home.path()).build().unwrap();
    let lines = Arc::new(Mutex::new(Vec::<String>::new()));
    let sink = lines.clone();
    engine.set_log_callback(move |r| {
        sink.lock()
            .unwrap()
            .push(format!("{}: {}", r.source, r.message))
    });
    engine
        .register_host_tool_async(def("late:wait"), |_ctx, args| async move {
            tokio::time::sleep(Duration::from_millis(5)).await;
            Ok(json!({"got": args}))
        })
        .unwrap();
    let r = engine
        .call_blocking(
            "<|[REQUEST_TOOL]|>\ncommand:「始」late:wait「末」\nx:「始」1「末」\n<|[END_TOOL]|>\n",
            CallOptions::new(),
        )
        .unwrap();
    assert_eq!(r.outcomes[0].result, Ok(json!({"got": {"x": "1"}})));
    engine
        .call_blocking(&tam("chatty:hi"), CallOptions::new())
        .unwrap();
    assert!(
        lines
            .lock()
            .unwrap()
            .contains(&"plugin:chatty: hello from the mod".to_string()),
        "{:?}",
        lines.lock().unwrap()
    );
    engine.clear_log_callback();
}

/// A sync host tool called from text runs on the thread that drives the request (one
/// blocking hop, not two): the async tool after it in the same text is polled there too.
#[test]
fn a_sync_host_tool_from_text_takes_one_hop() {
    let home = tempfile::tempdir().unwrap();
    let engine = Engine::builder()
        .home(home.path())
        .plugins(false)
        .host_tool(def("world:sync"), |_ctx, _args| Ok(json!(thread_text())))
        .host_tool_async(def("world:async"), |_ctx, _args| async {
            Ok(json!(thread_text()))
        })
        .build()
        .unwrap();
    let text = format!("{}{}", tam("world:sync"), tam("world:async"));
    let check = |r: tavern::CallReport| {
        let sync = r.outcomes[0].result.clone().unwrap();
        let driver = r.outcomes[1].result.clone().unwrap();
        assert_eq!(
            sync, driver,
            "the sync tool ran off the request's own thread"
        );
        assert_ne!(sync, json!(thread_text()), "not on the caller's thread");
    };
    check(engine.call_blocking(&text, CallOptions::new()).unwrap());
    let t = engine.submit(&text).unwrap();
    check(pump_until(&engine, t));
}

/// Runs `wait` (which calls the 150 ms host tool) on a thread and, once the tool has
/// started, `quick` here; returns both results after checking that `quick` ended before the
/// host tool returned.
fn quick_while_the_host_tool_sleeps(
    engine: &Arc<Engine>,
    entered: &Mutex<Option<Instant>>,
    returned: &Mutex<Option<Instant>>,
    wait: &str,
    quick: &str,
) -> (tavern::CallReport, tavern::CallReport) {
    *entered.lock().unwrap() = None;
    *returned.lock().unwrap() = None;
    let first = {
        let (engine, wait) = (engine.clone(), tam(wait));
        std::thread::spawn(move || engine.call_blocking(&wait, CallOptions::new()).unwrap())
    };
    let end = Instant::now() + Duration::from_secs(30);
    while entered.lock().unwrap().is_none() {
        assert!(Instant::now() < end, "the host tool never ran");
        std::thread::sleep(Duration::from_millis(1));
    }
    let second = engine
        .call_blocking(&tam(quick), CallOptions::new())
        .unwrap();
    let second_done = Instant::now();
    let first = first.join().unwrap();
    let slow_returned = returned.lock().unwrap().expect("the host tool returned");
    assert!(
        second_done < slow_returned,
        "{quick} waited for the host tool {wait} called: it ended {:?} after the tool returned",
        second_done - slow_returned
    );
    (first, second)
}

/// A mod (one Lua instance) calls a sync host tool that sleeps 150 ms; meanwhile a second
/// call to the same mod (another of its tools) runs on the same Lua state and finishes
/// before the host tool returns: the mod's state is given up while the tool runs, and the
/// first call then goes on where it was (it sees what the second call did to the state).
/// A Rhai mod holds no state between calls, and its calls run side by side already.
#[test]
fn a_sync_host_tool_called_from_a_mod_does_not_hold_the_mod() {
    let home = tempfile::tempdir().unwrap();
    lua_mod(
        home.path(),
        "holder",
        r#"
local served = 0
api.tools.register({id = 'wait', description = 'calls the slow host tool',
  handler = function()
    local before = served
    local r = api.tools.call('world:slow', {})
    return {slow = r, before = before, after = served}
  end})
api.tools.register({id = 'quick', description = 'answers at once',
  handler = function() served = served + 1 return 'quick' end})
-- A mod's own coroutine calls the tool in place (it is not the host's to yield), and the
-- host's coroutine is not the mod's to yield from either.
api.tools.register({id = 'own', description = 'its own coroutine',
  handler = function()
    local top = coroutine.isyieldable()
    local ok, e = pcall(coroutine.yield, 1)
    local co = coroutine.wrap(function() return api.tools.call('world:fast', {}) end)
    return {top = top, yield_ok = ok, yield_error = tostring(e), inner = co()}
  end})
-- A failing host tool's error reaches the script as it did, catchable, with its code.
api.tools.register({id = 'fails', description = 'calls a failing tool',
  handler = function()
    local ok, e = pcall(api.tools.call, 'world:broken', {})
    return {ok = ok, code = e.code}
  end})
"#,
    );
    let rhai = home.path().join("plugins/rhaiholder");
    write(
        &rhai.join("plugin.yaml"),
        "name: rhaiholder\nversion: 1.0.0\npermissions:\n  tools: [\"world:*\"]\n",
    );
    write(
        &rhai.join("main.rhai"),
        "fn wait(args) { api::tools::invoke(\"world:slow\", #{}) }\nfn quick(args) { \"quick\" }\n",
    );
    for name in ["wait", "quick"] {
        write(
            &rhai.join(format!("tools/{name}.tool.json")),
            &format!(
                r#"{{"id": "{name}", "description": "A test tool.", "parameters": {{"type": "object"}},
                    "implementation": {{"type": "service", "script": "main.rhai", "function": "{name}"}}}}"#
            ),
        );
    }
    let entered = Arc::new(Mutex::new(None::<Instant>));
    let returned = Arc::new(Mutex::new(None::<Instant>));
    let (e2, r2) = (entered.clone(), returned.clone());
    let engine = Engine::builder()
        .home(home.path())
        .host_tool(def("world:slow"), move |_ctx, _args| {
            *e2.lock().unwrap() = Some(Instant::now());
            std::thread::sleep(Duration::from_millis(150));
            *r2.lock().unwrap() = Some(Instant::now());
            Ok(json!("slow"))
        })
        .host_tool(def("world:fast"), |_ctx, _args| Ok(json!("fast")))
        .host_tool(def("world:broken"), |_ctx, _args| {
            Err(tavern::ToolError::failed("world:broken", "it broke"))
        })
        .build()
        .unwrap();
    assert!(engine.problems().is_empty(), "{:?}", engine.problems());
    let engine = Arc::new(engine);

    let (first, second) = quick_while_the_host_tool_sleeps(
        &engine,
        &entered,
        &returned,
        "holder:wait",
        "holder:quick",
    );
    assert_eq!(second.outcomes[0].result, Ok(json!("quick")));
    assert_eq!(
        first.outcomes[0].result,
        Ok(json!({"slow": "slow", "before": 0, "after": 1})),
        "the first call goes on in the same state, after the second call's change"
    );

    let (first, second) = quick_while_the_host_tool_sleeps(
        &engine,
        &entered,
        &returned,
        "rhaiholder:wait",
        "rhaiholder:quick",
    );
    assert_eq!(second.outcomes[0].result, Ok(json!("quick")));
    assert_eq!(first.outcomes[0].result, Ok(json!("slow")));

    let own = engine
        .call_blocking(&tam("holder:own"), CallOptions::new())
        .unwrap();
    assert_eq!(
        own.outcomes[0].result,
        Ok(json!({"top": false, "yield_ok": false,
            "yield_error": "attempt to yield from outside a coroutine", "inner": "fast"}))
    );
    let fails = engine
        .call_blocking(&tam("holder:fails"), CallOptions::new())
        .unwrap();
    assert_eq!(
        fails.outcomes[0].result,
        Ok(json!({"ok": false, "code": "execution_failed"}))
    );
}

/// A call that handed a sync host tool over takes its state back only by its deadline: when
/// another call holds the state past it (a loop), the first ends with `timeout` (its
/// coroutine is left to the next call to drop), and the mod serves its next call.
#[test]
fn a_call_that_cannot_take_its_state_back_by_its_deadline_times_out() {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().join("plugins/taker");
    write(
        &dir.join("plugin.yaml"),
        "name: taker\nversion: 1.0.0\npermissions:\n  tools: [\"world:*\"]\nlimits:\n  wallMs: 60000\n  instructions: 100000000000\n",
    );
    write(
        &dir.join("main.lua"),
        r#"
api.tools.register({id = 'wait', description = 'calls the slow host tool',
  handler = function() return api.tools.call('world:slow', {}) end})
api.tools.register({id = 'spin', description = 'loops', handler = function() while true do end end})
api.tools.register({id = 'quick', description = 'answers', handler = function() return 'quick' end})
"#,
    );
    let entered = Arc::new(Mutex::new(None::<Instant>));
    let e2 = entered.clone();
    let engine = Engine::builder()
        .home(home.path())
        .script_limits(tavern::Limits {
            wall_ms: 60_000,
            instructions: 100_000_000_000,
            ..tavern::Limits::engine_default()
        })
        .host_tool(def("world:slow"), move |_ctx, _args| {
            *e2.lock().unwrap() = Some(Instant::now());
            std::thread::sleep(Duration::from_millis(300));
            Ok(json!("slow"))
        })
        .build()
        .unwrap();
    assert!(engine.problems().is_empty(), "{:?}", engine.problems());
    let engine = Arc::new(engine);
    let first = {
        let engine = engine.clone();
        std::thread::spawn(move || {
            let opts = CallOptions::new().timeout(Duration::from_secs(1));
            engine.call_blocking(&tam("taker:wait"), opts).unwrap()
        })
    };
    let end = Instant::now() + Duration::from_secs(30);
    while entered.lock().unwrap().is_none() {
        assert!(Instant::now() < end, "the host tool never ran");
        std::thread::sleep(Duration::from_millis(1));
    }
    // Takes the state while the tool sleeps, and loops until its own deadline (2.5 s).
    let spin = {
        let engine = engine.clone();
        std::thread::spawn(move || {
            let opts = CallOptions::new().timeout(Duration::from_millis(2500));
            engine.call_blocking(&tam("taker:spin"), opts).unwrap()
        })
    };
    let first = first.join().unwrap();
    let code = first.outcomes[0].result.as_ref().map_err(|e| e.code());
    assert_eq!(code, Err("timeout"), "{:?}", first.outcomes[0].result);
    let spin = spin.join().unwrap();
    let code = spin.outcomes[0].result.as_ref().map_err(|e| e.code());
    assert_eq!(code, Err("timeout"), "{:?}", spin.outcomes[0].result);
    let quick = engine
        .call_blocking(&tam("taker:quick"), CallOptions::new())
        .unwrap();
    assert_eq!(quick.outcomes[0].result, Ok(json!("quick")));
    // The state still runs calls that hand tools over.
    let again = engine
        .call_blocking(&tam("taker:wait"), CallOptions::new())
        .unwrap();
    assert_eq!(again.outcomes[0].result, Ok(json!("slow")));
}
