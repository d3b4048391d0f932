//! The game host's loop (issue 27): sync host tools run where blocking is allowed, `pump`
//! sleeps instead of spinning, main-thread host tools run only inside `pump` on the thread
//! that registered them (called from model text and from a Lua mod), the log callback,
//! per-call timeouts and `Engine::cancel`. Plain `#[test]`s: no runtime on this thread.

use std::cell::RefCell;
use std::path::Path;
use std::rc::Rc;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::ThreadId;
use std::time::Duration;

use serde_json::json;
use tavern::{CallOptions, Engine, LogLevel, ToolDefinition};

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn tam(id: &str, args: &[(&str, &str)]) -> String {
    let mut s = format!("<|[REQUEST_TOOL]|>\ncommand:「始」{id}「末」\n");
    for (k, v) in args {
        s.push_str(&format!("{k}:「始」{v}「末」\n"));
    }
    s.push_str("<|[END_TOOL]|>\n");
    s
}

fn lua_mod(home: &Path, name: &str, lua: &str) {
    let dir = home.join("plugins").join(name);
    write(
        &dir.join("plugin.yaml"),
        &format!("name: {name}\nversion: 1.0.0\npermissions:\n  tools: [\"world:*\"]\n"),
    );
    write(&dir.join("main.lua"), lua);
}

fn def(id: &str) -> ToolDefinition {
    ToolDefinition::host(
        id,
        "host tool",
        json!({"type": "object", "additionalProperties": true}),
    )
}

/// Pumps until `ticket` is collected (a bounded number of frames).
fn pump_until(engine: &Engine, ticket: tavern::Ticket) -> tavern::CallReport {
    for _ in 0..20_000 {
        engine.pump(Duration::from_millis(1));
        if let Some(r) = engine.take(ticket) {
            return r.unwrap();
        }
        // The rest of the frame (pump returns as soon as its own work is done).
        std::thread::sleep(Duration::from_millis(1));
    }
    panic!("ticket {ticket:?} never finished");
}

/// Three slow host calls queued before a fast one: the fast one answers first. The slow
/// tools wait (up to 2 s) until the fast one has answered, so with sync host tools inline
/// on the engine's two workers the fast one would queue behind them and come last.
#[test]
fn slow_sync_host_tools_do_not_hold_up_a_fast_one() {
    let home = tempfile::tempdir().unwrap();
    let order = Arc::new(Mutex::new(Vec::<&'static str>::new()));
    let fast_done = Arc::new((Mutex::new(false), Condvar::new()));
    let (o1, o2, f1, f2) = (
        order.clone(),
        order.clone(),
        fast_done.clone(),
        fast_done.clone(),
    );
    let engine = Engine::builder()
        .home(home.path())
        .host_tool(def("world:slow"), move |_, _| {
            let (m, cv) = &*f1;
            let guard = m.lock().unwrap();
            let _ = cv
                .wait_timeout_while(guard, Duration::from_secs(2), |done| !*done)
                .unwrap();
            std::thread::sleep(Duration::from_millis(50));
            o1.lock().unwrap().push("slow");
            Ok(json!("slow"))
        })
        .host_tool(def("world:fast"), move |_, _| {
            o2.lock().unwrap().push("fast");
            let (m, cv) = &*f2;
            *m.lock().unwrap() = true;
            cv.notify_all();
            Ok(json!("fast"))
        })
        .build()
        .unwrap();
    let slow: Vec<_> = (0..3)
        .map(|_| engine.submit(&tam("world:slow", &[])).unwrap())
        .collect();
    let fast = engine.submit(&tam("world:fast", &[])).unwrap();
    let report = pump_until(&engine, fast);
    assert_eq!(report.outcomes[0].result, Ok(json!("fast")));
    for t in slow {
        assert_eq!(pump_until(&engine, t).outcomes[0].result, Ok(json!("slow")));
    }
    assert_eq!(*order.lock().unwrap(), ["fast", "slow", "slow", "slow"]);
}

/// CPU time this thread has used.
#[cfg(target_os = "linux")]
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write into; the clock id is a constant.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0);
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// While a long call is pending, pumping neither spins nor waits: each pump returns at once
/// (only others' work is pending), so the pumping thread's CPU time stays well under the
/// budgets it was given (a pump that polls through its budget uses about all of it). The
/// precise figure is in BENCHMARKS.md (`embed/pump_cpu_while_pending`).
#[cfg(target_os = "linux")]
#[test]
fn pump_sleeps_while_a_call_is_pending() {
    let home = tempfile::tempdir().unwrap();
    let engine = Engine::builder()
        .home(home.path())
        .host_tool(def("world:wait"), |_, _| {
            std::thread::sleep(Duration::from_millis(400));
            Ok(json!(true))
        })
        .build()
        .unwrap();
    let ticket = engine.submit(&tam("world:wait", &[])).unwrap();
    let budget = Duration::from_millis(1);
    let cpu0 = thread_cpu();
    let mut pumps = 0u32;
    let report = loop {
        engine.pump(budget);
        pumps += 1;
        if let Some(r) = engine.take(ticket) {
            break r.unwrap();
        }
        assert!(pumps < 100_000, "the call never finished");
        std::thread::sleep(budget); // the rest of the frame
    };
    let cpu = thread_cpu() - cpu0;
    assert!(report.ok());
    assert!(pumps > 20, "the call was pending over many pumps: {pumps}");
    let given = budget * pumps;
    assert!(
        cpu < given / 2,
        "pumping used {cpu:?} of CPU over {pumps} pumps of {budget:?} ({given:?} given)"
    );
}

const SUMMON: &str = r#"
api.tools.register({
  id = "summon",
  description = "Spawns through the host's main-thread tool and reports what it got.",
  handler = function(args)
    local got = api.tools.call("world:spawn", {kind = args.kind})
    return {spawned = got.id, by = "quest"}
  end,
})
"#;

/// A main-thread tool's handler runs only inside `pump`, on the pumping thread (the one
/// that registered it): called directly from text, from a Lua mod (which resumes with the
/// result), from another thread's blocking call, and from this thread's blocking call.
#[test]
fn a_main_thread_tool_runs_only_on_the_pumping_thread() {
    let home = tempfile::tempdir().unwrap();
    lua_mod(home.path(), "quest", SUMMON);
    // Not Send: an Rc'd world, as a game engine's scene would be.
    let world: Rc<RefCell<Vec<(String, ThreadId)>>> = Rc::default();
    let w = world.clone();
    let engine = Engine::builder()
        .home(home.path())
        .main_thread_tool(def("world:spawn"), move |ctx, args| {
            let kind = args["kind"].as_str().unwrap_or("?").to_string();
            assert_eq!(ctx.tool_id.as_ref(), "world:spawn");
            w.borrow_mut().push((kind, std::thread::current().id()));
            Ok(json!({"id": w.borrow().len()}))
        })
        .build()
        .unwrap();
    assert!(engine.problems().is_empty(), "{:?}", engine.problems());
    let me = std::thread::current().id();

    let direct = engine
        .submit(&tam("world:spawn", &[("kind", "goblin")]))
        .unwrap();
    let from_mod = engine
        .submit(&tam("quest:summon", &[("kind", "troll")]))
        .unwrap();
    // Without a pump nothing runs: both calls stay parked.
    std::thread::sleep(Duration::from_millis(50));
    assert!(world.borrow().is_empty(), "ran before any pump");
    assert_eq!(engine.pending(), 2);

    let d = pump_until(&engine, direct);
    let m = pump_until(&engine, from_mod);
    let d = d.outcomes[0].result.clone().unwrap();
    let m = m.outcomes[0].result.clone().unwrap();
    assert!(d["id"].is_number(), "{d}");
    assert_eq!(
        m["by"],
        json!("quest"),
        "the mod resumed with the result: {m}"
    );
    assert!(m["spawned"].is_number(), "{m}");

    // Another thread's blocking call is parked until this thread pumps.
    let engine = Arc::new(engine);
    let e2 = engine.clone();
    let other = std::thread::spawn(move || {
        e2.call_blocking(
            &tam("world:spawn", &[("kind", "orc")]),
            CallOptions::new().timeout(Duration::from_secs(20)),
        )
        .unwrap()
        .outcomes[0]
            .result
            .clone()
    });
    while !other.is_finished() {
        engine.pump(Duration::from_millis(2));
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(other.join().unwrap().is_ok());

    // A blocking call on this thread runs the tool while it waits (no pump can come).
    let r = engine
        .call_blocking(
            &tam("quest:summon", &[("kind", "ogre")]),
            CallOptions::new(),
        )
        .unwrap();
    assert!(r.ok(), "{:?}", r.outcomes);

    let seen = world.borrow();
    let mut kinds: Vec<&str> = seen.iter().map(|(k, _)| k.as_str()).collect();
    kinds.sort();
    assert_eq!(kinds, ["goblin", "ogre", "orc", "troll"]);
    for (kind, thread) in seen.iter() {
        assert_eq!(*thread, me, "{kind} ran off the pumping thread");
    }
}

/// A parked main-thread call still ends at its caller's deadline, and a pump on another
/// thread does not run it.
#[test]
fn a_parked_main_thread_call_ends_at_its_deadline() {
    let home = tempfile::tempdir().unwrap();
    let engine = Engine::builder()
        .home(home.path())
        .main_thread_tool(def("world:spawn"), |_, _| Ok(json!(1)))
        .build()
        .unwrap();
    let engine = Arc::new(engine);
    let ticket = engine
        .submit_with(
            &tam("world:spawn", &[]),
            CallOptions::new().timeout(Duration::from_millis(100)),
        )
        .unwrap();
    // Pumped on another thread only: the handler is not that thread's to run.
    let e2 = engine.clone();
    let report = std::thread::spawn(move || pump_until(&e2, ticket))
        .join()
        .unwrap();
    let err = report.outcomes[0].result.clone().unwrap_err();
    assert_eq!(err.code(), "timeout", "{err}");
}

/// The log callback hears a mod's `print` and `api.log.*` lines with the plugin as source.
#[test]
fn the_log_callback_hears_a_mods_lines() {
    let home = tempfile::tempdir().unwrap();
    lua_mod(
        home.path(),
        "chatty",
        r#"api.tools.register({id = "talk", description = "talks", handler = function()
  print("hello", 42)
  api.log.warn("careful")
  return true
end})"#,
    );
    let lines = Arc::new(Mutex::new(Vec::<(LogLevel, String, String)>::new()));
    let sink = lines.clone();
    let sink_lines = lines.clone();
    let engine = Engine::builder()
        .home(home.path())
        .host_tool(def("world:boom"), |_, _| panic!("the bridge collapsed"))
        .log_callback(move |r| {
            sink.lock()
                .unwrap()
                .push((r.level, r.source.to_string(), r.message.to_string()))
        })
        .build()
        .unwrap();
    let r = engine
        .call_blocking(&tam("chatty:talk", &[]), CallOptions::new())
        .unwrap();
    assert!(r.ok(), "{:?}", r.outcomes);
    let lines = lines.lock().unwrap();
    let src = "plugin:chatty".to_string();
    assert!(
        lines.contains(&(LogLevel::Info, src.clone(), "hello\t42".into())),
        "{lines:?}"
    );
    assert!(
        lines.contains(&(LogLevel::Warning, src, "careful".into())),
        "{lines:?}"
    );
    drop(lines);
    // The engine's own warnings go there too: a panicking host tool, with the tool as source.
    let r = engine
        .call_blocking(&tam("world:boom", &[]), CallOptions::new())
        .unwrap();
    assert_eq!(r.outcomes[0].result.clone().unwrap_err().code(), "panicked");
    let lines = sink_lines.lock().unwrap();
    assert!(
        lines
            .iter()
            .any(|(level, source, message)| *level == LogLevel::Error
                && source == "tool:world:boom"
                && message.contains("the bridge collapsed")),
        "{lines:?}"
    );
}

const LOOPER: &str = r#"api.tools.register({id = "spin", description = "loops", handler = function()
  while true do end
end})"#;

/// A per-call timeout ends a looping mod; `Engine::cancel` ends another.
#[test]
fn a_timeout_and_cancel_end_a_looping_mod() {
    let home = tempfile::tempdir().unwrap();
    lua_mod(home.path(), "busy", LOOPER);
    // The host's cap is generous, so only the caller's timeout or cancel can end the loop.
    let limits = tavern::Limits {
        instructions: u64::MAX / 2,
        wall_ms: 600_000,
        ..tavern::Limits::engine_default()
    };
    write(
        &home.path().join("plugins/busy/plugin.yaml"),
        "name: busy\nversion: 1.0.0\nlimits:\n  wallMs: 600000\n  instructions: 1000000000000\n",
    );
    let engine = Engine::builder()
        .home(home.path())
        .script_limits(limits)
        .build()
        .unwrap();
    assert!(engine.problems().is_empty(), "{:?}", engine.problems());
    let timed = engine
        .submit_with(
            &tam("busy:spin", &[]),
            CallOptions::new().timeout(Duration::from_millis(200)),
        )
        .unwrap();
    let cancelled = engine.submit(&tam("busy:spin", &[])).unwrap();
    let r = pump_until(&engine, timed);
    let err = r.outcomes[0].result.clone().unwrap_err();
    assert_eq!(err.code(), "timeout", "{err}");
    assert!(engine.cancel(cancelled));
    let r = pump_until(&engine, cancelled);
    let err = r.outcomes[0].result.clone().unwrap_err();
    assert_eq!(err.code(), "cancelled", "{err}");
    assert!(
        !engine.cancel(cancelled),
        "a finished ticket has nothing to cancel"
    );
}
