//! Plugin benchmarks: loading 100 small Lua plugins; a TAM call text parsed, validated and run
//! by a Lua tool and by a Rhai tool, end to end through `Engine::run`.
//!
//! Run: `CARGO_TARGET_DIR=/work/bench-target cargo bench --bench plugins`

use std::path::Path;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use tavern::internal::protocol::Format;
use tavern::internal::tools::Caller;
use tavern::Engine;

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A plugin `name` with one tool `name:add` in `lang`.
fn small_plugin(plugins: &Path, name: &str, lang: &str) {
    let dir = plugins.join(name);
    write(
        &dir.join("plugin.yaml"),
        &format!("name: {name}\nversion: 1.0.0\ndescription: adds\n"),
    );
    write(
        &dir.join("tools/add.tool.json"),
        &format!(
            r#"{{"id": "{name}:add", "description": "adds", "parameters": {{"type": "object", "properties": {{"a": {{"type": "integer"}}, "b": {{"type": "integer"}}}}, "required": ["a", "b"]}}, "implementation": {{"type": "service", "script": "main.{lang}", "function": "add"}}}}"#
        ),
    );
    let script = match lang {
        "lua" => "function add(args, ctx) return args.a + args.b end\n",
        _ => "fn add(args, ctx) { args.a + args.b }\n",
    };
    write(&dir.join(format!("main.{lang}")), script);
}

fn load_100_lua_plugins(c: &mut Criterion) {
    let tmp = tempfile::tempdir().unwrap();
    for i in 0..100 {
        small_plugin(&tmp.path().join("plugins"), &format!("P{i:03}"), "lua");
    }
    let mut g = c.benchmark_group("plugins");
    g.sample_size(10).measurement_time(Duration::from_secs(3));
    g.bench_function("load_100_lua_plugins", |b| {
        b.iter(|| {
            let e = Engine::builder()
                .home(tmp.path())
                .builtins(false)
                .build()
                .unwrap();
            assert_eq!(e.plugins().len(), 100);
            assert!(e.problems().is_empty());
            e
        })
    });
    g.finish();
}

fn tam_to_tool(c: &mut Criterion) {
    let tmp = tempfile::tempdir().unwrap();
    small_plugin(&tmp.path().join("plugins"), "Lua", "lua");
    small_plugin(&tmp.path().join("plugins"), "Rhai", "rhai");
    let e = Engine::builder()
        .home(tmp.path())
        .builtins(false)
        .build()
        .unwrap();
    assert!(e.problems().is_empty(), "{:?}", e.problems());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut g = c.benchmark_group("plugins");
    g.sample_size(30).measurement_time(Duration::from_secs(3));
    for lang in ["Lua", "Rhai"] {
        let text = format!("<|[REQUEST_TOOL]|>\ncommand:「始」{lang}.add「末」\na:「始」2「末」\nb:「始」40「末」\n<|[END_TOOL]|>\n");
        // Sanity: the call really runs and gives 42.
        let out = rt
            .block_on(
                e.run(
                    tavern::Request::text(&text)
                        .format(Format::Auto)
                        .caller(Caller::Cli),
                ),
            )
            .unwrap()
            .outcomes;
        assert_eq!(out[0].result.as_ref().unwrap(), &serde_json::json!(42));
        // The loop runs inside the runtime, as an embedding host's calls do.
        g.bench_function(format!("tam_to_{}_tool", lang.to_lowercase()), |b| {
            b.iter_custom(|n| {
                rt.block_on(async {
                    let start = std::time::Instant::now();
                    for _ in 0..n {
                        let _ = std::hint::black_box(
                            e.run(
                                tavern::Request::text(&text)
                                    .format(Format::Auto)
                                    .caller(Caller::Cli),
                            )
                            .await,
                        );
                    }
                    start.elapsed()
                })
            })
        });
    }
    g.finish();
}

/// Where the time of `tam_to_*_tool` goes: parsing, the script call alone, and invoke.
fn breakdown(c: &mut Criterion) {
    let tmp = tempfile::tempdir().unwrap();
    small_plugin(&tmp.path().join("plugins"), "Lua", "lua");
    let e = Engine::builder()
        .home(tmp.path())
        .builtins(false)
        .build()
        .unwrap();
    let text = "<|[REQUEST_TOOL]|>\ncommand:「始」Lua.add「末」\na:「始」2「末」\nb:「始」40「末」\n<|[END_TOOL]|>\n";
    let mut g = c.benchmark_group("plugins_breakdown");
    g.sample_size(30).measurement_time(Duration::from_secs(2));
    g.bench_function("parse", |b| {
        b.iter(|| tavern::internal::protocol::parse(text, Format::Auto))
    });
    let scripts = e.plugins().get("Lua").unwrap().scripts().unwrap().clone();
    let info = tavern::internal::script::CallInfo::host("Lua:add");
    let args = serde_json::json!({"a": 2, "b": 40});
    g.bench_function("lua_call_direct", |b| {
        b.iter(|| scripts.call("add", args.clone(), &info).unwrap())
    });
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    g.bench_function("invoke_lua_in_runtime", |b| {
        b.iter_custom(|n| {
            rt.block_on(async {
                let start = std::time::Instant::now();
                for _ in 0..n {
                    e.tools()
                        .invoke("Lua:add", args.clone(), Caller::Cli)
                        .await
                        .unwrap();
                }
                start.elapsed()
            })
        })
    });
    g.finish();
}

criterion_group!(benches, load_100_lua_plugins, tam_to_tool, breakdown);
criterion_main!(benches);
