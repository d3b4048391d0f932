//! Workflow engine costs: per-node overhead of a trivial native node, a 10,000-node chain,
//! validating a 1,000-node random DAG, and two independent CPU-bound script branches
//! against the same work done one after the other.
//!
//! `CARGO_TARGET_DIR=/work/bench-target cargo bench --bench workflow`

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use serde_json::{json, Map};
use tavern::internal::workflow::{compile, NodeRegistry, RunOptions, Workflow, WorkflowNode};

/// `n` `core:Math` nodes, each adding 1 to the previous result.
fn chain(n: usize) -> Workflow {
    let mut wf = Workflow::new("chain").node(
        WorkflowNode::new("n0", "core:Math")
            .input("a", json!(0))
            .input("b", json!(1)),
    );
    for i in 1..n {
        wf = wf
            .node(WorkflowNode::new(format!("n{i}"), "core:Math").input("b", json!(1)))
            .edge(&format!("n{}", i - 1), "result", &format!("n{i}"), "a");
    }
    wf
}

/// `n` nodes; each takes `a` and `b` from random earlier nodes (or constants).
fn random_dag(n: usize, seed: u64) -> Workflow {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut wf = Workflow::new("dag");
    for i in 0..n {
        let mut node = WorkflowNode::new(format!("n{i}"), "core:Math");
        for slot in ["a", "b"] {
            if i > 0 && rng.bool() {
                let src = rng.usize(0..i);
                wf = wf.edge(&format!("n{src}"), "result", &format!("n{i}"), slot);
            } else {
                node = node.input(slot, json!(1));
            }
        }
        wf = wf.node(node);
    }
    wf
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

fn engine(c: &mut Criterion) {
    let reg = NodeRegistry::with_builtins();
    let rt = rt();
    let mut g = c.benchmark_group("workflow");
    g.measurement_time(Duration::from_secs(3)).sample_size(30);

    let plan1k = compile(&chain(1_000), &reg).expect("chain compiles");
    g.bench_function("run_chain_1000_trivial_nodes", |b| {
        b.iter(|| {
            rt.block_on(async {
                black_box(plan1k.run(Map::new(), RunOptions::default()).await.is_ok())
            })
        })
    });

    let plan10k = compile(&chain(10_000), &reg).expect("chain compiles");
    g.bench_function("run_chain_10000", |b| {
        b.iter(|| {
            rt.block_on(async {
                black_box(plan10k.run(Map::new(), RunOptions::default()).await.is_ok())
            })
        })
    });

    let dag = random_dag(1_000, 7);
    g.bench_function("validate_random_dag_1000", |b| {
        b.iter(|| black_box(compile(&dag, &reg).is_ok()))
    });

    let plan_dag = compile(&dag, &reg).expect("dag compiles");
    g.bench_function("run_random_dag_1000", |b| {
        b.iter(|| {
            rt.block_on(async {
                black_box(
                    plan_dag
                        .run(Map::new(), RunOptions::default())
                        .await
                        .is_ok(),
                )
            })
        })
    });
    g.finish();
}

const CPU_LUA: &str = "local s = 0 for i = 1, 1500000 do s = (s + i * 7) % 1000003 end return s";

/// Two Lua script nodes doing the same CPU-bound work, side by side or one after the other
/// (the second takes the first's result as its `inputs`, which forces the order).
fn script_pair(parallel: bool) -> Workflow {
    let mut wf = Workflow::new(if parallel { "parallel" } else { "sequential" })
        .node(WorkflowNode::new("one", "core:Script").input("code", json!(CPU_LUA)))
        .node(WorkflowNode::new("two", "core:Script").input("code", json!(CPU_LUA)));
    if !parallel {
        wf = wf.edge("one", "result", "two", "inputs");
    }
    wf
}

fn scripts(c: &mut Criterion) {
    let reg = NodeRegistry::with_builtins();
    let rt = rt();
    let mut g = c.benchmark_group("workflow_scripts");
    g.measurement_time(Duration::from_secs(3)).sample_size(20);
    for parallel in [false, true] {
        let plan = compile(&script_pair(parallel), &reg).expect("script pair compiles");
        let name = if parallel {
            "two_lua_branches_parallel"
        } else {
            "two_lua_nodes_sequential"
        };
        g.bench_function(name, |b| {
            b.iter(|| {
                rt.block_on(async {
                    let r = plan
                        .run(Map::new(), RunOptions::default())
                        .await
                        .expect("runs");
                    assert_eq!(r.status, tavern::internal::workflow::RunStatus::Succeeded);
                    black_box(r)
                })
            })
        });
    }
    // Baseline: the same two snippets on two plain threads, no workflow engine. When the
    // machine cannot give two cores (other load), this shows it: compare the ratios.
    let limits = tavern::internal::script::Limits::engine_default();
    g.bench_function("two_lua_snippets_raw_threads", |b| {
        b.iter(|| {
            let hs: Vec<_> = (0..2)
                .map(|_| {
                    std::thread::spawn(move || {
                        tavern::internal::script::run_snippet(
                            tavern::internal::script::Lang::Lua,
                            CPU_LUA,
                            json!({}),
                            &limits,
                        )
                        .map(|o| o.value)
                    })
                })
                .collect();
            for h in hs {
                black_box(h.join().expect("thread").expect("snippet"));
            }
        })
    });
    g.finish();
}

criterion_group!(benches, engine, scripts);
criterion_main!(benches);
