//! Process-tool benchmarks (issue 12): one call of a tiny process tool (`/bin/echo` printing
//! the JSON answer) spawned as before, and the same call inside the confinement (Landlock
//! ruleset, seccomp filter, pids cgroup, rlimits, dropped capabilities, private temp dir);
//! and the confinement's preparation alone.
//!
//! Run: `cargo bench --bench process -- --warm-up-time 1 --measurement-time 3`

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use serde_json::{json, Map};
use tavern::internal::sandbox::confine::{Confinement, ProcessLimits};
use tavern::internal::sandbox::process::{self, ProcessSpec};

fn spec(dir: &std::path::Path, confine: Option<Arc<Confinement>>) -> ProcessSpec {
    ProcessSpec {
        argv: vec![
            "/bin/echo".into(),
            r#"{"status":"success","result":1}"#.into(),
        ],
        dir: dir.to_path_buf(),
        env: BTreeMap::from([("PATH".to_string(), "/usr/bin:/bin".to_string())]),
        timeout: Duration::from_secs(10),
        output_cap: 1 << 20,
        extra_args: Map::new(),
        confine,
    }
}

fn process_call(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let confinement = Arc::new(Confinement {
        plugin_dir: Some(tmp.path().to_path_buf()),
        read: Vec::new(),
        write: Vec::new(),
        network: false,
        limits: ProcessLimits::DEFAULT,
        complete: true,
        temp_dirs: Default::default(),
    });
    let plain = spec(tmp.path(), None);
    let confined = spec(tmp.path(), Some(confinement.clone()));
    let mut g = c.benchmark_group("process");
    for (name, s) in [("spawn_unconfined", &plain), ("spawn_confined", &confined)] {
        g.bench_function(name, |b| {
            b.iter(|| {
                rt.block_on(process::run(
                    s,
                    "bench:echo",
                    json!({}),
                    tokio_util::sync::CancellationToken::new(),
                ))
                .unwrap()
            })
        });
    }
    g.bench_function("prepare_confinement", |b| {
        b.iter(|| {
            confinement
                .prepare(std::path::Path::new("/bin/echo"))
                .unwrap()
        })
    });
    g.finish();
}

criterion_group!(benches, process_call);
criterion_main!(benches);
