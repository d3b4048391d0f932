//! Helpers shared by the script and sandbox tests.
#![allow(dead_code)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tavern::internal::script::{
    CallInfo, Limits, PluginScripts, ScriptEnv, ScriptError, ScriptSource,
};
use tavern::internal::tools::ToolManager;

/// Small, fast limits so hostile scripts end quickly.
pub fn test_limits() -> Limits {
    Limits {
        instructions: 2_000_000,
        memory_bytes: 8 * 1024 * 1024,
        wall_ms: 1_000,
        ..Limits::engine_default()
    }
}

/// A plugin from inline sources (names decide the language).
pub fn plugin(name: &str, sources: &[(&str, &str)]) -> PluginScripts {
    try_plugin(name, sources, test_limits()).expect("plugin loads")
}

pub fn try_plugin(
    name: &str,
    sources: &[(&str, &str)],
    limits: Limits,
) -> Result<PluginScripts, ScriptError> {
    let mut env = ScriptEnv::new(name, std::env::temp_dir());
    env.limits = limits;
    let srcs = sources
        .iter()
        .map(|(n, t)| ScriptSource::new(*n, *t).expect("known extension"))
        .collect();
    PluginScripts::from_sources(env, srcs)
}

pub fn call(p: &PluginScripts, f: &str, args: Value) -> Result<Value, ScriptError> {
    p.call(f, args, &CallInfo::host(format!("{}:{f}", p.plugin())))
}

/// Runs `f`, asserting it returns within `limit` (hang protection, generous bound).
pub fn within<T>(limit: Duration, f: impl FnOnce() -> T) -> T {
    let t = Instant::now();
    let out = f();
    let took = t.elapsed();
    assert!(took <= limit, "took {took:?}, more than {limit:?}");
    out
}

/// Runs `fut` on a thread of its own and waits for its answer at most `secs` seconds: a
/// watchdog that turns a hang into a failure (the stuck thread is left behind).
pub fn answered_within<T: Send + 'static>(
    secs: u64,
    fut: impl std::future::Future<Output = T> + Send + 'static,
) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        let _ = tx.send(rt.block_on(fut));
    });
    rx.recv_timeout(Duration::from_secs(secs))
        .expect("the call answered (it hung)")
}

/// Budget + 1 s, the bound every hostile test must end within.
pub fn bound(l: &Limits) -> Duration {
    Duration::from_millis(l.wall_ms) + Duration::from_secs(1)
}

/// Lua source of a trivial well-behaved function, appended to hostile plugins.
pub const PING_LUA: &str = "function ping(args) return {pong = args.n or 0} end";
pub const PING_RHAI: &str = "fn ping(args) { #{ pong: args.n } }";

/// Asserts the plugin still serves a trivial call.
pub fn assert_usable(p: &PluginScripts) {
    let out = call(p, "ping", json!({"n": 7})).expect("plugin still usable");
    assert_eq!(out, json!({"pong": 7}));
}

/// A bystander plugin that must be unaffected by another plugin's misbehaviour.
pub fn bystander_lua() -> PluginScripts {
    plugin("bystander", &[("main.lua", PING_LUA)])
}

pub fn manager() -> Arc<ToolManager> {
    ToolManager::new()
}

/// The contract every threat class must meet: `function` of a plugin holding `source`
/// (plus a trivial `ping`) fails with an error of `kind` within budget + 1 s; afterwards the
/// same plugin serves `ping` and a bystander plugin is unaffected. Returns the error.
pub fn assert_contained(lang_file: &str, source: &str, function: &str, kind: &str) -> ScriptError {
    assert_contained_with(lang_file, source, function, kind, test_limits())
}

pub fn assert_contained_with(
    lang_file: &str,
    source: &str,
    function: &str,
    kind: &str,
    limits: Limits,
) -> ScriptError {
    let ping = if lang_file.ends_with(".rhai") {
        PING_RHAI
    } else {
        PING_LUA
    };
    let text = format!("{source}\n{ping}\n");
    let bystander = bystander_lua();
    let p = try_plugin("hostile", &[(lang_file, text.as_str())], limits).expect("plugin loads");
    let err = within(bound(&limits), || call(&p, function, json!({})))
        .expect_err("hostile call must fail");
    assert_eq!(err.kind(), kind, "{function}: unexpected error {err:?}");
    assert_usable(&p);
    assert_usable(&bystander);
    err
}
