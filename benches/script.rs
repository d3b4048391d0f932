//! Script host costs: a trivial Lua/Rhai tool called directly, through ScriptToolHandler
//! (spawn_blocking vs a dedicated thread) and through ToolManager::invoke; plugin state
//! creation; memory of an idle Lua plugin state.
//!
//! Run: `CARGO_TARGET_DIR=/work/bench-target cargo bench --bench script`

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use serde_json::json;
use tavern::internal::script::{
    CallInfo, ExecMode, Limits, PluginScripts, ScriptEnv, ScriptSource,
};
use tavern::internal::tools::{Caller, ToolDefinition, ToolManager};

const SMALL_LUA: &str = r#"
local M = {}
function M.greet(name) return "hello " .. name end
api.tools.register{
  id = "echo", description = "Echoes its input",
  parameters = {type = "object", properties = {text = {type = "string"}}},
  handler = function(args, ctx) return args.text end,
}
function echo(args, ctx) return args.text end
"#;

const SMALL_RHAI: &str = r#"
fn echo(args, ctx) { args.text }
"#;

fn plugin(name: &str, file: &str, text: &str) -> PluginScripts {
    let env = ScriptEnv::new(name, std::env::temp_dir());
    PluginScripts::from_sources(env, vec![ScriptSource::new(file, text).unwrap()]).unwrap()
}

fn def(id: &str) -> ToolDefinition {
    ToolDefinition::host(id, "echo", json!({"type": "object"}))
}

fn bench(c: &mut Criterion) {
    let lua = plugin("bl", "main.lua", SMALL_LUA);
    let rhai = plugin("br", "main.rhai", SMALL_RHAI);
    let args = json!({"text": "hi"});
    let info = CallInfo::host("b:echo");

    let mut g = c.benchmark_group("script");
    g.measurement_time(Duration::from_secs(2))
        .warm_up_time(Duration::from_millis(500))
        .sample_size(30);
    g.bench_function("lua_call_direct", |b| {
        b.iter(|| lua.call("echo", args.clone(), &info).unwrap())
    });
    // From the main thread (8 MiB): the call runs on this thread's kept 64 MiB segment.
    g.bench_function("rhai_call_direct", |b| {
        b.iter(|| rhai.call("echo", args.clone(), &info).unwrap())
    });
    // What the guarantee cost before (issue 13): a fresh 64 MiB segment mapped per call
    // (`stacker::maybe_grow`); the call inside then finds enough stack and runs in place.
    g.bench_function("rhai_call_fresh_segment", |b| {
        b.iter(|| {
            stacker::maybe_grow(48 << 20, 64 << 20, || {
                rhai.call("echo", args.clone(), &info).unwrap()
            })
        })
    });
    // The floor: a thread whose own stack is big enough (no switch at all).
    g.bench_function("rhai_call_on_big_thread", |b| {
        b.iter_custom(|n| {
            std::thread::scope(|s| {
                std::thread::Builder::new()
                    .stack_size(64 << 20)
                    .spawn_scoped(s, || {
                        let t = Instant::now();
                        for _ in 0..n {
                            std::hint::black_box(rhai.call("echo", args.clone(), &info).unwrap());
                        }
                        t.elapsed()
                    })
                    .unwrap()
                    .join()
                    .unwrap()
            })
        })
    });

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let m = ToolManager::new();
    m.register(
        def("bl:echo"),
        Arc::new(lua.handler("echo").with_mode(ExecMode::Blocking)),
    )
    .unwrap();
    m.register(
        def("bl:echo_dedicated"),
        Arc::new(lua.handler("echo").with_mode(ExecMode::Dedicated)),
    )
    .unwrap();
    m.register(
        def("bl:echo_in_place"),
        Arc::new(lua.handler("echo").with_mode(ExecMode::InPlace)),
    )
    .unwrap();
    m.register(
        def("br:echo_in_place"),
        Arc::new(rhai.handler("echo").with_mode(ExecMode::InPlace)),
    )
    .unwrap();
    m.register(
        def("br:echo"),
        Arc::new(rhai.handler("echo").with_mode(ExecMode::Blocking)),
    )
    .unwrap();
    m.register(
        def("br:echo_dedicated"),
        Arc::new(rhai.handler("echo").with_mode(ExecMode::Dedicated)),
    )
    .unwrap();
    for (name, id) in [
        ("lua_invoke_spawn_blocking", "bl:echo"),
        ("lua_invoke_dedicated_thread", "bl:echo_dedicated"),
        ("lua_invoke_block_in_place", "bl:echo_in_place"),
        ("rhai_invoke_spawn_blocking", "br:echo"),
        ("rhai_invoke_dedicated_thread", "br:echo_dedicated"),
        ("rhai_invoke_block_in_place", "br:echo_in_place"),
    ] {
        g.bench_function(name, |b| {
            b.iter(|| {
                rt.block_on(m.invoke(id, args.clone(), Caller::Cli))
                    .unwrap()
            })
        });
    }
    // The same calls made from a task on the runtime (as a server would), not from outside.
    for (name, id) in [
        ("lua_task_spawn_blocking", "bl:echo"),
        ("lua_task_dedicated_thread", "bl:echo_dedicated"),
        ("lua_task_block_in_place", "bl:echo_in_place"),
    ] {
        let m = m.clone();
        g.bench_function(name, |b| {
            b.iter(|| {
                let m = m.clone();
                let args = args.clone();
                rt.block_on(async move {
                    tokio::spawn(async move { m.invoke(id, args, Caller::Cli).await })
                        .await
                        .unwrap()
                })
                .unwrap()
            })
        });
    }
    g.bench_function("lua_plugin_state_create", |b| {
        b.iter(|| plugin("bl", "main.lua", SMALL_LUA))
    });
    g.bench_function("rhai_plugin_create", |b| {
        b.iter(|| plugin("br", "main.rhai", SMALL_RHAI))
    });
    g.bench_function("lua_snippet", |b| {
        b.iter(|| {
            tavern::internal::script::run_snippet(
                tavern::internal::script::Lang::Lua,
                "return inputs.a + 1",
                json!({"a": 1}),
                &Limits::strict(),
            )
            .unwrap()
        })
    });
    g.finish();

    // One-off figures (printed, for BENCHMARKS.md).
    println!("idle Lua plugin state: {} bytes", lua.lua_memory());
    let t = Instant::now();
    let many: Vec<_> = (0..100)
        .map(|i| plugin(&format!("p{i}"), "main.lua", SMALL_LUA))
        .collect();
    let took = t.elapsed();
    let mem: usize = many.iter().map(|p| p.lua_memory()).sum();
    println!(
        "100 small Lua plugin states: {:.1} ms, {} KB total Lua memory",
        took.as_secs_f64() * 1000.0,
        mem / 1024
    );
}

criterion_group!(benches, bench);
criterion_main!(benches);
