//! Validating and dispatching one call to a synchronous Rust tool (target ≤ 2 µs), and the
//! string conversion a TAM call needs.
//!
//! `CARGO_TARGET_DIR=/work/bench-target cargo bench --bench dispatch`

use std::future::Future;
use std::hint::black_box;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use serde_json::{json, Value};
use tavern::internal::tools::{Caller, KeyMatching, ToolDefinition, ToolManager};

/// Polls a future that a synchronous tool finishes at once.
fn ready<F: Future>(f: F) -> F::Output {
    let mut f = pin!(f);
    match f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(v) => v,
        Poll::Pending => unreachable!("a sync tool completes on the first poll"),
    }
}

fn manager() -> Arc<ToolManager> {
    let tools = ToolManager::new();
    tavern::internal::tools::builtin::register(&tools).expect("builtins register");
    tools
        .register_fn(
            ToolDefinition::host(
                "bench:resize",
                "three typed parameters",
                json!({
                    "type": "object",
                    "properties": {
                        "count": {"type": "integer", "minimum": 0},
                        "ratio": {"type": "number"},
                        "force": {"type": "boolean"},
                        "label": {"type": "string", "default": "x"}
                    },
                    "required": ["count", "ratio"]
                }),
            ),
            |_, args| Ok(args["count"].clone()),
        )
        .expect("bench tool registers");
    tools
}

fn bench(c: &mut Criterion) {
    let tools = manager();
    let mut g = c.benchmark_group("dispatch");
    g.measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_secs(1))
        .sample_size(30);

    let typed = json!({"count": 42, "ratio": 4.5, "force": true});
    g.bench_function("sync_tool_3_typed_params", |b| {
        b.iter_batched(
            || typed.clone(),
            |args| ready(tools.invoke(black_box("bench:resize"), args, Caller::Host)),
            BatchSize::SmallInput,
        )
    });

    let strings = json!({"count": "42", "ratio": "4.5", "force": "true"});
    g.bench_function("sync_tool_3_string_params", |b| {
        b.iter_batched(
            || strings.clone(),
            |args| ready(tools.invoke(black_box("bench.resize"), args, Caller::Host)),
            BatchSize::SmallInput,
        )
    });
    g.finish();

    let mut g = c.benchmark_group("coerce");
    g.measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_secs(1))
        .sample_size(30);
    let tool = tools.get("bench:resize").expect("registered");
    g.bench_function("3_typed_params", |b| {
        b.iter_batched(
            || typed.clone(),
            |args| tool.prepare(args, KeyMatching::Loose),
            BatchSize::SmallInput,
        )
    });
    let loose: Value = json!({"Count": "42", "RATIO": "4.5", "force_": "yes"});
    g.bench_function("3_string_params_loose_keys", |b| {
        b.iter_batched(
            || loose.clone(),
            |args| tool.prepare(args, KeyMatching::Loose),
            BatchSize::SmallInput,
        )
    });
    let nested = json!({"count": "7", "ratio": "0.5", "label": "[1,2]", "force": "false"});
    g.bench_function("4_string_params_exact_keys", |b| {
        b.iter_batched(
            || nested.clone(),
            |args| tool.prepare(args, KeyMatching::Exact),
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
