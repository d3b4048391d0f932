//! The agent runtime's own cost per turn: context, the deliberation workflow with its
//! `llm:Chat` node on the scripted backend, reading the output (streamed and not), the
//! inventory, two Rust tool calls, Observations and events — everything but a model.
//! Target ≤ 50 µs.
//!
//! `cargo bench --bench agent -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, Criterion};
use serde_json::json;
use tavern::internal::agent::llm::{LlmSettings, ScriptedBackend};
use tavern::internal::tools::ToolDefinition;
use tavern::Engine;

const REPLY: &str = "I'll add the numbers and shout the name.\n<ACTION>\n  <Add>\n    <a>2</a>\n    <b>40</b>\n  </Add>\n  <Upper>\n    <text>aria</text>\n  </Upper>\n</ACTION>";

fn engine(dir: &std::path::Path) -> Engine {
    std::fs::create_dir_all(dir.join("agents")).expect("temp dir");
    std::fs::write(
        dir.join("agents/bench.json"),
        json!({
            "id": "bench",
            "description": "A benchmark agent.",
            "initial_private_state_values": {"mood": "calm"},
            "tool_ids_inventory": ["Add", "Upper", "ReadWorldStateTool"],
            "tool_call_format": "action",
            "max_tool_calls": u32::MAX,
            "repeat_limit": u32::MAX
        })
        .to_string(),
    )
    .expect("profile");
    let engine = Engine::builder()
        .home(dir)
        .plugins(false)
        .workflows(false)
        .build()
        .expect("engine");
    let num = json!({"type": "integer"});
    engine
        .tools()
        .register_fn(
            ToolDefinition::host(
                "Add",
                "Adds two integers.",
                json!({"type": "object", "properties": {"a": num, "b": num}, "required": ["a", "b"]}),
            ),
            |_, a| Ok(json!(a["a"].as_i64().unwrap_or(0) + a["b"].as_i64().unwrap_or(0))),
        )
        .expect("Add");
    engine
        .tools()
        .register_fn(
            ToolDefinition::host(
                "Upper",
                "Upper-cases a text.",
                json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
            ),
            |_, a| Ok(json!(a["text"].as_str().unwrap_or("").to_uppercase())),
        )
        .expect("Upper");
    engine
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("temp dir");
    let engine = engine(dir.path());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let mut g = c.benchmark_group("agent");
    for (name, stream) in [
        ("turn_two_rust_calls_streamed", true),
        ("turn_two_rust_calls", false),
    ] {
        let mut agent = engine
            .agent("bench")
            .expect("profile")
            .backend(Arc::new(ScriptedBackend::cycling(
                "bench",
                vec![REPLY.into()],
            )))
            .llm(LlmSettings {
                stream: Some(stream),
                ..LlmSettings::default()
            })
            .build()
            .expect("agent");
        // Sanity: both calls run and succeed.
        let t = rt.block_on(agent.turn(Some("go"))).expect("turn");
        assert_eq!(t.results.len(), 2);
        assert!(t.results.iter().all(|r| r.outcome.result.is_ok()));
        assert_eq!(t.streamed, stream);
        g.bench_function(name, |b| {
            b.iter(|| {
                agent.reset();
                let t = rt.block_on(agent.turn(Some("go"))).expect("turn");
                black_box(t.results.len())
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
