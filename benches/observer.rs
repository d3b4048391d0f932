//! The cost of the per-call observer (`tavern::internal::tools::observe`) on a workflow run: a
//! 1,000-node chain of trivial nodes with no observer (the usual case: one `Option` check
//! per report site), with an observer that ignores every event, and with the jobs store's
//! observer (each node's `pending`, `running` and final state appended to a job's event log
//! as JSON, with progress).
//!
//! `cargo bench --bench observer -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use serde_json::{json, Map};
use tavern::internal::server::jobs::journal::Journal;
use tavern::internal::server::jobs::store::Retention;
use tavern::internal::server::jobs::{JobObserver, Jobs, Outcome};
use tavern::internal::tools::CallObserver;
use tavern::internal::workflow::{compile, NodeRegistry, RunOptions, Workflow, WorkflowNode};

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

struct Ignore;
impl CallObserver for Ignore {}

fn observer(c: &mut Criterion) {
    let reg = NodeRegistry::with_builtins();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let plan = compile(&chain(1_000), &reg).expect("chain compiles");
    let mut g = c.benchmark_group("observer");
    g.measurement_time(Duration::from_secs(3)).sample_size(30);
    let run = |opts: RunOptions| {
        rt.block_on(async { black_box(plan.run(Map::new(), opts).await.is_ok()) })
    };
    g.bench_function("workflow_1000_nodes_absent", |b| {
        b.iter(|| run(RunOptions::default()))
    });
    g.bench_function("workflow_1000_nodes_ignoring", |b| {
        b.iter(|| {
            run(RunOptions {
                observer: Some(Arc::new(Ignore)),
                ..RunOptions::default()
            })
        })
    });
    // Finished jobs are evicted past 4, so memory stays flat however long criterion runs.
    let retention = Retention {
        ttl: Duration::from_secs(3600),
        max_jobs: 4,
        max_bytes: 256 << 20,
    };
    let jobs = Jobs::new(retention, Journal::disabled());
    g.bench_function("workflow_1000_nodes_job_events", |b| {
        b.iter(|| {
            let job = jobs.create().expect("room for the job");
            job.start(1);
            let ok = run(RunOptions {
                observer: Some(Arc::new(JobObserver(job.clone()))),
                ..RunOptions::default()
            });
            job.finish(Outcome::Done {
                result: json!(null),
                error: None,
            });
            ok
        })
    });
    g.finish();
}

criterion_group!(benches, observer);
criterion_main!(benches);
