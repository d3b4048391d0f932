//! Calls to a busy plugin wait their turn (issue 24, finding 7), and a call's deadline holds
//! while its script is blocked in a host call (item 2): a fair queue until each call's own
//! deadline, `instances: N` Lua states serving N calls at once, and a script stuck waiting
//! for a host tool answered `timeout` at its deadline with the plugin serving the next call.

use crate::common::answered_within;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tavern::internal::tools::{Caller, Invocation, ToolError};
use tavern::{Engine, ToolDefinition};

/// What the host tool `test:work` saw: who entered in which order, how many at once.
#[derive(Default)]
struct Seen {
    order: Mutex<Vec<u64>>,
    inside: AtomicUsize,
    most: AtomicUsize,
}

/// A home with plugin `Slow` (its tool `Slow:run` calls `test:work` from Lua) and, when
/// `instances` is given, that many Lua states.
fn home(instances: Option<usize>) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("plugins/Slow");
    std::fs::create_dir_all(p.join("tools")).unwrap();
    let extra = instances.map_or(String::new(), |n| format!("instances: {n}\n"));
    std::fs::write(
        p.join("plugin.yaml"),
        format!(
            "name: Slow\nversion: 1.0.0\ndescription: Waits.\n{extra}permissions:\n  tools: [\"test:*\"]\n"
        ),
    )
    .unwrap();
    std::fs::write(
        p.join("main.lua"),
        "function run(args) return api.tools.call('test:work', {n = args.n}) end\n\
         function wait(args) return api.tools.call('test:block', {}) end\n\
         function quick(args) return 'ok' end\n",
    )
    .unwrap();
    for (name, params) in [
        (
            "run",
            r#"{"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}"#,
        ),
        ("wait", r#"{"type": "object"}"#),
        ("quick", r#"{"type": "object"}"#),
    ] {
        std::fs::write(
            p.join(format!("tools/{name}.tool.json")),
            format!(
                r#"{{"id": "Slow:{name}", "description": "A test tool.", "parameters": {params},
                    "implementation": {{"type": "service", "script": "main.lua", "function": "{name}"}}}}"#
            ),
        )
        .unwrap();
    }
    dir
}

/// An engine whose `test:work` records `seen` and waits until `gate` opens, or until `most`
/// calls were inside at once; `test:block` never answers.
fn engine(
    home: &std::path::Path,
    seen: Arc<Seen>,
    gate: tokio::sync::watch::Receiver<bool>,
    most: usize,
) -> Engine {
    let def = |id: &str| ToolDefinition::host(id, "A test tool.", json!({"type": "object"}));
    let e = Engine::builder()
        .home(home)
        .host_tool_async(def("test:work"), move |_ctx, args: Value| {
            let (seen, mut gate) = (seen.clone(), gate.clone());
            async move {
                let n = args["n"].as_u64().unwrap_or(0);
                seen.order.lock().unwrap().push(n);
                let now = seen.inside.fetch_add(1, Ordering::SeqCst) + 1;
                seen.most.fetch_max(now, Ordering::SeqCst);
                let enough = async {
                    while seen.most.load(Ordering::SeqCst) < most {
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                };
                tokio::select! {
                    _ = gate.wait_for(|open| *open) => {}
                    _ = enough => {}
                }
                seen.inside.fetch_sub(1, Ordering::SeqCst);
                Ok(json!(n))
            }
        })
        .host_tool_async(def("test:block"), |_ctx, _args| async {
            std::future::pending::<()>().await;
            Ok(Value::Null)
        })
        .build()
        .unwrap();
    assert!(e.problems().is_empty(), "{:?}", e.problems());
    e
}

fn within(ms: u64) -> Invocation {
    Invocation::new(Caller::Host).deadline(Some(Instant::now() + Duration::from_millis(ms)))
}

fn queued(engine: &Engine) -> usize {
    engine
        .plugins()
        .get("Slow")
        .and_then(|p| p.scripts())
        .expect("Slow has scripts")
        .queued()
}

/// Waits (bounded) until `ok` holds; a watchdog against hangs, not a timing assertion.
async fn until(what: &str, ok: impl Fn() -> bool) {
    let end = Instant::now() + Duration::from_secs(30);
    while !ok() {
        assert!(Instant::now() < end, "never happened: {what}");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_calls_to_a_busy_plugin_are_served_in_arrival_order() {
    let h = home(None);
    let seen = Arc::new(Seen::default());
    let (open, gate) = tokio::sync::watch::channel(false);
    let engine = Arc::new(engine(h.path(), seen.clone(), gate, usize::MAX));
    let mut calls = Vec::new();
    for n in 0..20u64 {
        let e = engine.clone();
        calls.push(tokio::spawn(async move {
            e.tools()
                .invoke("Slow:run", json!({"n": n}), within(60_000))
                .await
        }));
        // The next call arrives once this one runs (the first) or waits in the queue.
        if n == 0 {
            until("the first call runs", || {
                seen.order.lock().unwrap().len() == 1
            })
            .await;
        } else {
            until("the call waits its turn", || queued(&engine) == n as usize).await;
        }
    }
    open.send(true).unwrap();
    for (n, c) in calls.into_iter().enumerate() {
        assert_eq!(c.await.unwrap(), Ok(json!(n)), "call {n}");
    }
    assert_eq!(*seen.order.lock().unwrap(), (0..20).collect::<Vec<u64>>());
    assert_eq!(
        seen.most.load(Ordering::SeqCst),
        1,
        "one Lua state: one call at a time"
    );
    assert_eq!(queued(&engine), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_instances_serve_four_calls_at_once_and_no_more() {
    let h = home(Some(4));
    let seen = Arc::new(Seen::default());
    let (open, gate) = tokio::sync::watch::channel(false);
    // Each call waits until four were inside at once (or the gate opens: it does not).
    let engine = Arc::new(engine(h.path(), seen.clone(), gate, 4));
    let calls: Vec<_> = (0..12u64)
        .map(|n| {
            let e = engine.clone();
            tokio::spawn(async move {
                e.tools()
                    .invoke("Slow:run", json!({"n": n}), within(60_000))
                    .await
            })
        })
        .collect();
    for (n, c) in calls.into_iter().enumerate() {
        assert_eq!(c.await.unwrap(), Ok(json!(n)), "call {n}");
    }
    drop(open);
    assert_eq!(
        seen.most.load(Ordering::SeqCst),
        4,
        "four states, four calls at once"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_call_whose_deadline_passes_gets_timeout() {
    let h = home(None);
    let seen = Arc::new(Seen::default());
    let (open, gate) = tokio::sync::watch::channel(false);
    let engine = Arc::new(engine(h.path(), seen.clone(), gate, usize::MAX));
    let first = {
        let e = engine.clone();
        tokio::spawn(async move {
            e.tools()
                .invoke("Slow:run", json!({"n": 1}), within(60_000))
                .await
        })
    };
    until("the first call runs", || {
        seen.order.lock().unwrap().len() == 1
    })
    .await;
    let late = engine
        .tools()
        .invoke("Slow:run", json!({"n": 2}), within(300))
        .await;
    assert!(matches!(late, Err(ToolError::Timeout { .. })), "{late:?}");
    assert_eq!(queued(&engine), 0, "it left the queue");
    open.send(true).unwrap();
    assert_eq!(first.await.unwrap(), Ok(json!(1)));
    assert_eq!(*seen.order.lock().unwrap(), [1], "the late call never ran");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_script_blocked_in_a_host_call_times_out_and_the_plugin_serves_the_next_call() {
    let h = home(None);
    let (_open, gate) = tokio::sync::watch::channel(false);
    let engine = Arc::new(engine(
        h.path(),
        Arc::new(Seen::default()),
        gate,
        usize::MAX,
    ));
    // Without the deadline holding, the call never answers: the watchdog turns that into a
    // failure.
    let e = engine.clone();
    let stuck = answered_within(20, async move {
        e.tools().invoke("Slow:wait", json!({}), within(300)).await
    });
    assert!(matches!(stuck, Err(ToolError::Timeout { .. })), "{stuck:?}");
    let e = engine.clone();
    let next = answered_within(20, async move {
        e.tools()
            .invoke("Slow:quick", json!({}), Caller::Host)
            .await
    });
    assert_eq!(next, Ok(json!("ok")));
}

#[test]
fn instances_out_of_range_is_a_problem_at_its_line() {
    for bad in ["0", "65", "many"] {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("plugins/Slow");
        std::fs::create_dir_all(&p).unwrap();
        std::fs::write(
            p.join("plugin.yaml"),
            format!("name: Slow\nversion: 1.0.0\ndescription: x\ninstances: {bad}\n"),
        )
        .unwrap();
        std::fs::write(p.join("main.lua"), "function f() end\n").unwrap();
        let e = Engine::builder().home(dir.path()).build().unwrap();
        let probs = e.problems();
        assert_eq!(probs.len(), 1, "{bad}: {probs:?}");
        assert_eq!(probs[0].line, Some(4), "{bad}: {:?}", probs[0]);
        assert!(
            probs[0].message.contains("instances"),
            "{bad}: {}",
            probs[0].message
        );
    }
}

/// Threads of this process (Linux: one entry per thread under /proc/self/task).
#[cfg(target_os = "linux")]
fn threads() -> usize {
    std::fs::read_dir("/proc/self/task").unwrap().count()
}

#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_waiting_calls_hold_no_thread_each() {
    let h = home(None);
    let seen = Arc::new(Seen::default());
    let (open, gate) = tokio::sync::watch::channel(false);
    let engine = Arc::new(engine(h.path(), seen.clone(), gate, usize::MAX));
    let first = {
        let e = engine.clone();
        tokio::spawn(async move {
            e.tools()
                .invoke("Slow:run", json!({"n": 0}), within(60_000))
                .await
        })
    };
    until("the first call runs", || {
        seen.order.lock().unwrap().len() == 1
    })
    .await;
    let before = threads();
    let calls: Vec<_> = (1..=200u64)
        .map(|n| {
            let e = engine.clone();
            tokio::spawn(async move {
                e.tools()
                    .invoke("Slow:run", json!({"n": n}), within(60_000))
                    .await
            })
        })
        .collect();
    until("all 200 wait their turn", || queued(&engine) == 200).await;
    let during = threads();
    // Other tests of this binary run beside it: allow their threads, not one per call.
    assert!(
        during < before + 100,
        "{before} threads before, {during} with 200 calls waiting"
    );
    open.send(true).unwrap();
    assert_eq!(first.await.unwrap(), Ok(json!(0)));
    for (i, c) in calls.into_iter().enumerate() {
        assert_eq!(c.await.unwrap(), Ok(json!(i as u64 + 1)));
    }
}
