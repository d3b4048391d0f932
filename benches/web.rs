//! The web explorer's JSON: `GET /api/catalog` (every tool with its manual entry and TAM and
//! `<ACTION>` examples) and `GET /api/plugins` for an engine with 500 tools, the body the
//! tool list page loads. Target: under 10 ms for 500 tools (well inside a page load).
//!
//! `cargo bench --bench web -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use serde_json::json;
use tavern::internal::server::web::catalog::{catalog, plugins_json};
use tavern::Engine;
use tavern::ToolDefinition;

fn engine(n: usize) -> Engine {
    let mut b = Engine::builder().plugins(false).workflows(false);
    for i in 0..n {
        let def = ToolDefinition::host(
            format!("bench:tool_{i}"),
            "A benchmark tool with three parameters: a number, a choice and a flag.",
            json!({
                "type": "object",
                "properties": {
                    "count": {"type": "integer", "minimum": 1, "description": "How many."},
                    "mode": {"type": "string", "enum": ["fast", "slow"], "default": "fast"},
                    "verbose": {"type": "boolean", "default": false}
                },
                "required": ["count"]
            }),
        );
        b = b.host_tool(def, |_, args| Ok(args));
    }
    b.build().expect("engine")
}

fn bench(c: &mut Criterion) {
    let e = engine(500);
    let mut g = c.benchmark_group("web");
    g.bench_function("catalog_500_tools", |b| {
        b.iter(|| black_box(serde_json::to_vec(&catalog(&e)).expect("json")))
    });
    g.bench_function("plugins_500_tools", |b| {
        b.iter(|| black_box(plugins_json(&e, 0)))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
