//! The host caps every plugin's script limits (`EngineBuilder::script_limits`); a plugin can
//! lower its own limits in plugin.yaml but never raise them past the cap.

use serde_json::json;
use tavern::internal::protocol::Format;
use tavern::internal::script::Limits;
use tavern::internal::tools::{Caller, ToolError};
use tavern::Engine;

/// A home with one Lua plugin whose tool loops `n` times, optionally with its own limits.
fn home(plugin_limits: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("plugins/Loops");
    std::fs::create_dir_all(p.join("tools")).unwrap();
    std::fs::write(
        p.join("plugin.yaml"),
        format!("name: Loops\nversion: 1.0.0\ndescription: Counts.\n{plugin_limits}"),
    )
    .unwrap();
    std::fs::write(
        p.join("main.lua"),
        "function count(args) local s = 0 for i = 1, args.n do s = s + i end return s end\n",
    )
    .unwrap();
    std::fs::write(
        p.join("tools/count.tool.json"),
        r#"{"id": "Loops:count", "description": "Sums 1..n.",
            "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
            "implementation": {"type": "service", "script": "main.lua", "function": "count"}}"#,
    )
    .unwrap();
    dir
}

async fn count(engine: &Engine, n: u64) -> Result<serde_json::Value, ToolError> {
    let text = format!(
        "<|[REQUEST_TOOL]|>\ncommand:「始」Loops.count「末」\nn:「始」{n}「末」\n<|[END_TOOL]|>"
    );
    let (parsed, mut out) = engine
        .run(
            tavern::Request::text(&text)
                .format(Format::Tam)
                .caller(Caller::Host),
        )
        .await
        .map(|r| (r.parsed, r.outcomes))
        .unwrap();
    assert!(!parsed.has_errors(), "{:?}", parsed.diagnostics);
    out.remove(0).result
}

/// An engine whose host cap allows 20,000 instructions per call.
fn capped_engine(home: &std::path::Path) -> Engine {
    let cap = Limits {
        instructions: 20_000,
        ..Limits::engine_default()
    };
    Engine::builder()
        .home(home)
        .script_limits(cap)
        .build()
        .unwrap()
}

fn is_instruction_limit(r: &Result<serde_json::Value, ToolError>) -> bool {
    matches!(r, Err(ToolError::LimitExceeded { limit, .. }) if limit == "instructions")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn default_limits_let_a_moderate_loop_finish() {
    let h = home("");
    let engine = Engine::builder().home(h.path()).build().unwrap();
    assert!(engine.problems().is_empty(), "{:?}", engine.problems());
    assert_eq!(count(&engine, 100_000).await, Ok(json!(5_000_050_000u64)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_host_cap_applies_to_every_plugin() {
    let h = home("");
    let engine = capped_engine(h.path());
    assert!(is_instruction_limit(&count(&engine, 100_000).await));
    // Within the cap the same plugin still serves.
    assert_eq!(count(&engine, 10).await, Ok(json!(55)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_cannot_raise_its_limits_past_the_cap() {
    let h = home("limits:\n  instructions: 1000000000\n");
    let engine = capped_engine(h.path());
    assert!(is_instruction_limit(&count(&engine, 100_000).await));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_may_lower_its_own_limits() {
    let h = home("limits:\n  instructions: 20000\n");
    let engine = Engine::builder().home(h.path()).build().unwrap();
    assert!(is_instruction_limit(&count(&engine, 100_000).await));
    assert_eq!(count(&engine, 10).await, Ok(json!(55)));
}

/// A host that raises its limits gives its plugins the raised ones (a game whose mods run
/// long frames, the embed bench's spinning script): the engine defaults are only the
/// default host limits, not a second, hidden cap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_that_raises_its_limits_raises_them_for_its_plugins() {
    // 50M instructions (the engine default) are not enough for 60M loop turns (two VM
    // instructions each); 2G are.
    let n = 60_000_000u64;
    let h = home("");
    let default = Engine::builder().home(h.path()).build().unwrap();
    let r = count(&default, n).await;
    assert!(
        matches!(r, Err(ToolError::LimitExceeded { .. })),
        "the default limits stop it: {r:?}"
    );
    let raised = Engine::builder()
        .home(h.path())
        .script_limits(Limits {
            instructions: 2_000_000_000,
            wall_ms: 600_000,
            ..Limits::engine_default()
        })
        .build()
        .unwrap();
    assert_eq!(count(&raised, n).await, Ok(json!(n * (n + 1) / 2)));
    // ... and a plugin still lowers its own below the host's.
    let h = home("limits:\n  instructions: 20000\n");
    let raised = Engine::builder()
        .home(h.path())
        .script_limits(Limits {
            instructions: 2_000_000_000,
            ..Limits::engine_default()
        })
        .build()
        .unwrap();
    assert!(is_instruction_limit(&count(&raised, 100_000).await));
}
