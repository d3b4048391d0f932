//! Threat: long CPU-bound runs. The wall-clock budget is enforced inside the interpreter
//! (hook / progress callback), not by `tokio::time::timeout`, and script work never blocks
//! the async executor.

use crate::common;

use std::sync::Arc;

use common::*;
use serde_json::json;
use tavern::internal::script::Limits;
use tavern::internal::tools::{Caller, ToolDefinition};

fn slow_limits() -> Limits {
    Limits {
        instructions: u64::MAX / 2,
        wall_ms: 300,
        ..test_limits()
    }
}

#[test]
fn wall_clock_budget_lua_and_rhai() {
    let l = slow_limits();
    assert_contained_with(
        "main.lua",
        "function spin() while true do end end",
        "spin",
        "timeout",
        l,
    );
    assert_contained_with(
        "main.lua",
        "function spin_pcall() while true do pcall(function() while true do end end) end end",
        "spin_pcall",
        "timeout",
        l,
    );
    assert_contained_with("main.rhai", "fn spin() { loop {} }", "spin", "timeout", l);
}

#[tokio::test(flavor = "current_thread")]
async fn scripts_do_not_block_the_executor() {
    not_blocking().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn scripts_do_not_block_a_one_worker_runtime() {
    not_blocking().await;
}

async fn not_blocking() {
    let p = try_plugin(
        "slow",
        &[(
            "main.lua",
            &format!("function spin() while true do end end\n{PING_LUA}"),
        )],
        slow_limits(),
    )
    .unwrap();
    let m = manager();
    let def = ToolDefinition::host("slow:spin", "spins", json!({"type": "object"}));
    m.register(def, Arc::new(p.handler("spin"))).unwrap();
    let m2 = m.clone();
    let task = tokio::spawn(async move { m2.invoke("slow:spin", json!({}), Caller::Cli).await });
    // On a single-threaded runtime this only runs if the script is on another thread.
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    assert!(!task.is_finished(), "the script should still be spinning");
    let t = std::time::Instant::now();
    let e = task.await.unwrap().unwrap_err();
    assert!(t.elapsed() <= bound(&slow_limits()));
    assert_eq!(e.code(), "timeout", "{e}");
    assert_usable(&p);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_calls_stop() {
    use tokio_util::sync::CancellationToken;
    let l = Limits {
        instructions: u64::MAX / 2,
        wall_ms: 60_000,
        ..test_limits()
    };
    for (file, src) in [
        (
            "main.lua",
            format!("function spin() while true do end end\n{PING_LUA}"),
        ),
        (
            "main.rhai",
            format!("fn spin() {{ loop {{}} }}\n{PING_RHAI}"),
        ),
    ] {
        let p = try_plugin("cancel", &[(file, &src)], l).unwrap();
        let m = manager();
        let def = ToolDefinition::host("cancel:spin", "spins", json!({"type": "object"}));
        m.register(def, Arc::new(p.handler("spin"))).unwrap();
        let token = CancellationToken::new();
        let t2 = token.clone();
        let m2 = m.clone();
        let task = tokio::spawn(async move {
            m2.invoke(
                "cancel:spin",
                json!({}),
                tavern::internal::tools::Invocation::new(Caller::Cli).cancel(t2),
            )
            .await
        });
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        token.cancel();
        let e = tokio::time::timeout(std::time::Duration::from_secs(2), task)
            .await
            .expect("a cancelled script stops promptly")
            .unwrap()
            .unwrap_err();
        assert_eq!(e.code(), "cancelled", "{file}: {e}");
        assert_usable(&p);
    }
}
