//! What hooks cost: a tool call with the hook registry installed but no handler (target
//! ≤ 50 ns over a plain manager), a no-op Lua `tool:before-invoke` (≤ 2 µs per call), a no-op
//! Lua `node:before-execute` (≤ 1 µs per node, from a 10-node chain).
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

/// A home with `scripts/noop.lua` hooking `point` with a handler that does nothing, and a
/// 10-node workflow `chain`.
fn home(point: Option<&str>) -> tempfile::TempDir {
    let d = tempfile::tempdir().expect("temp dir");
    if let Some(p) = point {
        std::fs::create_dir_all(d.path().join("scripts")).unwrap();
        std::fs::write(
            d.path().join("scripts/noop.lua"),
            format!("api.hooks.on('{p}', function(ev) end)\n"),
        )
        .unwrap();
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
    for (name, h) in [
        ("tool_call_engine_no_hooks", &quiet),
        ("tool_call_lua_noop_before_invoke", &hooked),
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
                    ..Default::default()
                };
                rt.block_on(wf.plan.run(args.clone(), opts)).expect("runs")
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
