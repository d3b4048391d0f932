//! What hooks cost: a tool call with the hook registry installed but no handler (target
//! ≤ 50 ns over a plain manager), a no-op Lua `tool:before-invoke` (≤ 2 µs per call), a no-op
//! Lua `node:before-execute` (≤ 1 µs per node, from a 10-node chain); a no-op Rhai
//! `tool:before-invoke` for comparison (no target); and `lua_floor_node_event_call`, the
//! same Lua work with no engine around it (the floor of the node figure, see below).
//!
//! `cargo bench --bench hooks -- --warm-up-time 1 --measurement-time 3`

use std::future::Future;
use std::hint::black_box;
use std::path::Path;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use serde_json::{json, Map, Value};
use tavern::internal::tools::{Caller, ToolDefinition, ToolManager};
use tavern::internal::workflow::RunOptions;
use tavern::Engine;

/// Polls a future that a synchronous tool finishes at once (no runtime: script handlers run
/// inline on this thread).
fn ready<F: Future>(f: F) -> F::Output {
    let mut f = pin!(f);
    match f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(v) => v,
        Poll::Pending => unreachable!("a sync tool completes on the first poll"),
    }
}

fn resize() -> ToolDefinition {
    ToolDefinition::host(
        "bench:resize",
        "three typed parameters",
        json!({"type": "object",
               "properties": {"count": {"type": "integer"}, "ratio": {"type": "number"},
                              "force": {"type": "boolean"}},
               "required": ["count", "ratio"]}),
    )
}

fn manager(hooks: bool) -> Arc<ToolManager> {
    let tools = ToolManager::new();
    if hooks {
        tools.set_interceptor(tavern::internal::hooks::Hooks::new());
    }
    tools
        .register_fn(resize(), |_, args| Ok(args["count"].clone()))
        .expect("bench tool registers");
    tools
}

/// A home with `scripts/noop.lua` (or `.rhai`) hooking `point` with a handler that does
/// nothing, and a 10-node workflow `chain`.
fn home(point: Option<&str>) -> tempfile::TempDir {
    home_in(point, "lua")
}

fn home_in(point: Option<&str>, lang: &str) -> tempfile::TempDir {
    let d = tempfile::tempdir().expect("temp dir");
    if let Some(p) = point {
        std::fs::create_dir_all(d.path().join("scripts")).unwrap();
        let text = match lang {
            "rhai" => format!("api::hooks::on(\"{p}\", |ev| {{}});\n"),
            _ => format!("api.hooks.on('{p}', function(ev) end)\n"),
        };
        std::fs::write(d.path().join(format!("scripts/noop.{lang}")), text).unwrap();
    }
    std::fs::create_dir_all(d.path().join("workflows")).unwrap();
    std::fs::write(d.path().join("workflows/chain.json"), chain(10).to_string()).unwrap();
    d
}

fn chain(n: usize) -> Value {
    let mut nodes = vec![json!({"id": "in", "type": "core:GroupInput"})];
    let mut edges = Vec::new();
    let mut prev = ("in".to_string(), "text".to_string());
    for i in 0..n {
        let id = format!("n{i}");
        nodes.push(json!({"id": id, "type": "core:RegexReplace",
                          "inputValues": {"pattern": "a", "replacement": "b"}}));
        edges.push(
            json!({"source": prev.0, "sourceHandle": prev.1, "target": id, "targetHandle": "text"}),
        );
        prev = (id, "text".to_string());
    }
    nodes.push(json!({"id": "out", "type": "core:GroupOutput"}));
    edges.push(json!({"source": prev.0, "sourceHandle": prev.1, "target": "out", "targetHandle": "result"}));
    json!({"id": "chain",
           "interfaceInputs": {"text": {"dataFlowType": "STRING", "required": true}},
           "interfaceOutputs": {"result": {"dataFlowType": "STRING"}},
           "nodes": nodes, "edges": edges})
}

fn engine(home: &Path) -> Engine {
    let e = Engine::builder()
        .home(home)
        .plugins(false)
        .build()
        .expect("engine builds");
    e.tools()
        .register_fn(resize(), |_, args| Ok(args["count"].clone()))
        .expect("bench tool registers");
    assert!(e.problems().is_empty(), "{:?}", e.problems());
    e
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("hooks");
    g.measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_secs(1))
        .sample_size(30);
    let typed = json!({"count": 42, "ratio": 4.5, "force": true});

    for (name, hooks) in [
        ("tool_call_plain_manager", false),
        ("tool_call_no_hooks", true),
    ] {
        let tools = manager(hooks);
        g.bench_function(name, |b| {
            b.iter_batched(
                || typed.clone(),
                |args| ready(tools.invoke(black_box("bench:resize"), args, Caller::Host)),
                BatchSize::SmallInput,
            )
        });
    }

    let quiet = home(None);
    let hooked = home(Some("tool:before-invoke"));
    let rhai_hooked = home_in(Some("tool:before-invoke"), "rhai");
    for (name, h) in [
        ("tool_call_engine_no_hooks", &quiet),
        ("tool_call_lua_noop_before_invoke", &hooked),
        ("tool_call_rhai_noop_before_invoke", &rhai_hooked),
    ] {
        let e = engine(h.path());
        g.bench_function(name, |b| {
            b.iter_batched(
                || typed.clone(),
                |args| {
                    ready(
                        e.tools()
                            .invoke(black_box("bench:resize"), args, Caller::Host),
                    )
                },
                BatchSize::SmallInput,
            )
        });
    }

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let node_hooked = home(Some("node:before-execute"));
    for (name, h) in [
        ("workflow_10_nodes_no_hooks", &quiet),
        ("workflow_10_nodes_lua_noop_node_before", &node_hooked),
    ] {
        let e = engine(h.path());
        let wf = e.workflows().get("chain").expect("chain loads");
        let mut args = Map::new();
        args.insert("text".into(), json!("banana"));
        g.bench_function(name, |b| {
            b.iter(|| {
                let opts = RunOptions {
                    tools: Some(e.tools().clone()),
                    hooks: Some(e.hooks().clone()),
                    ..Default::default()
                };
                rt.block_on(wf.plan.run(args.clone(), opts)).expect("runs")
            })
        });
    }
    lua_floor(&mut g);
    g.finish();
}

/// The floor of a Lua node hook, with no engine: a bare mlua state with the sandbox's
/// instruction-count hook and a memory limit, where each event is what the contract asks
/// for (a fresh event table with `workflow`, `node`, `type` and a fresh `inputs` table of
/// three strings, the shape the chain's nodes hand over), built with raw pushes in one
/// protected call (keys read from a table of interned strings, as the engine does) and
/// handed to `function(ev) end` under `lua_pcall`. No budget reset, lock, call record,
/// JSON or Rust event map: what a Lua hook costs before any of the engine's own work.
fn lua_floor(c: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>) {
    use mlua::ffi;
    use std::sync::atomic::{AtomicU64, Ordering};
    let lua = mlua::Lua::new();
    let charged = Arc::new(AtomicU64::new(0));
    let ch = charged.clone();
    lua.set_global_hook(
        mlua::HookTriggers::new().every_nth_instruction(1000),
        move |_, _| {
            ch.fetch_add(1000, Ordering::Relaxed);
            Ok(mlua::VmState::Continue)
        },
    )
    .expect("hook");
    lua.set_memory_limit(64 << 20).expect("memory limit");
    let f: mlua::Function = lua.load("return function(ev) end").eval().expect("handler");
    let keys = lua
        .create_sequence_from(["workflow", "node", "type", "inputs"])
        .expect("keys");
    let nodes: Vec<String> = (0..10).map(|i| format!("n{i}")).collect();
    let texts: Vec<String> = (0..10).map(|i| "b".repeat(i % 3 + 4)).collect();
    let mut i = 0usize;
    c.bench_function("lua_floor_node_event_call", |b| {
        b.iter(|| {
            i = (i + 1) % 10;
            let (node, text) = (nodes[i].as_bytes(), texts[i].as_bytes());
            // SAFETY: the closure runs inside exec_raw's protected call, holds nothing with
            // a destructor and keeps the stack balanced; [1] keys [2] f on entry.
            let r: mlua::Result<()> = unsafe {
                lua.exec_raw((&keys, &f), |state| {
                    let push = |s: &[u8]| ffi::lua_pushlstring(state, s.as_ptr().cast(), s.len());
                    ffi::lua_pushvalue(state, 2);
                    ffi::lua_createtable(state, 0, 4);
                    for (k, v) in [(1, &b"chain"[..]), (2, node), (3, b"core:RegexReplace")] {
                        ffi::lua_rawgeti(state, 1, k);
                        push(v);
                        ffi::lua_rawset(state, -3);
                    }
                    ffi::lua_rawgeti(state, 1, 4);
                    ffi::lua_createtable(state, 0, 3);
                    for (k, v) in [
                        (&b"text"[..], text),
                        (b"pattern", b"a"),
                        (b"replacement", b"b"),
                    ] {
                        push(k);
                        push(v);
                        ffi::lua_rawset(state, -3);
                    }
                    ffi::lua_rawset(state, -3);
                    if ffi::lua_pcall(state, 1, 2, 0) != ffi::LUA_OK {
                        ffi::lua_error(state);
                    }
                    ffi::lua_settop(state, 2);
                })
            };
            r.expect("the floor call runs")
        })
    });
    assert!(
        charged.load(Ordering::Relaxed) > 0,
        "the instruction hook ran"
    );
}

criterion_group!(benches, bench);
criterion_main!(benches);
