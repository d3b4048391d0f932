//! Rhai tools run in place on the runtime's worker threads by default (here 512 KiB stacks): the
//! per-thread big stack (src/script/big_stack.rs) must still keep a deeply nested value from
//! aborting the process, call after call on the same threads.

use crate::common;

use std::sync::Arc;

use common::*;
use serde_json::json;
use tavern::internal::script::ExecMode;
use tavern::internal::tools::{Caller, ToolDefinition, ToolManager};

#[test]
fn deep_values_in_rhai_tools_on_worker_threads() {
    let mut l = test_limits();
    l.instructions = 50_000_000;
    l.wall_ms = 5_000;
    let p = try_plugin(
        "deep",
        &[(
            "main.rhai",
            &format!(
                "fn deep(args) {{ let a = []; for i in 0..args.n {{ a = [a]; }} 1 }}\n{PING_RHAI}"
            ),
        )],
        l,
    )
    .unwrap();
    let h = p.handler("deep");
    assert_eq!(h.effective_mode(), ExecMode::InPlace);
    let tools = ToolManager::new();
    tools
        .register(
            ToolDefinition::host("deep:deep", "nests", json!({"type": "object"})),
            Arc::new(h),
        )
        .unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_stack_size(512 << 10)
        .enable_all()
        .build()
        .unwrap();
    // Shallow calls first (the segments get mapped and kept), then a deep one, then
    // shallow ones again on the same threads.
    for n in [10, 10, 100_000, 10, 10] {
        // Spawned, so the call runs on a worker thread, not on this one.
        let t = tools.clone();
        let r = rt
            .block_on(
                rt.spawn(async move { t.invoke("deep:deep", json!({"n": n}), Caller::Cli).await }),
            )
            .expect("the task completes");
        match r {
            Ok(v) => assert_eq!(v, json!(1)),
            // The 100,000-level build may hit the wall-clock limit first on a slow machine;
            // what was built is still freed without overflowing.
            Err(e) => assert!(n > 10 && e.code() == "timeout", "n = {n}: {e}"),
        }
    }
    assert_usable(&p);
}
