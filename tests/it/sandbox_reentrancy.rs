//! Threat: re-entrant tool calls. A plugin calling its own tools (same Lua state, same
//! thread), plugins calling each other, endless mutual recursion (→ RecursionLimit), and two
//! threads each holding one plugin while calling the other (→ a Busy error, not a deadlock).

use crate::common;

use std::sync::{Arc, Barrier};
use std::time::Duration;

use common::*;
use serde_json::json;
use tavern::internal::script::{PluginScripts, ScriptEnv, ScriptSource};
use tavern::internal::tools::{Caller, ToolDefinition, ToolManager};

fn def(id: &str) -> ToolDefinition {
    ToolDefinition::host(id, "test tool", json!({"type": "object"}))
}

fn load(m: &Arc<ToolManager>, name: &str, src: &str, tools: &[&str]) -> PluginScripts {
    let mut env = ScriptEnv::new(name, std::env::temp_dir());
    env.limits = test_limits();
    env.limits.wall_ms = 3_000;
    env.tools = Some(Arc::downgrade(m));
    // These plugins call each other on purpose (`permissions.tools`).
    env.permissions.tools = vec!["*".into()];
    let p = PluginScripts::from_sources(env, vec![ScriptSource::new("main.lua", src).unwrap()])
        .unwrap();
    for t in tools {
        m.register(def(&format!("{name}:{t}")), Arc::new(p.handler(*t)))
            .unwrap();
    }
    p
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn same_plugin_nested_call() {
    let m = manager();
    load(
        &m,
        "P",
        "function outer(a) return {inner = api.tools.call('P:inner', {x = a.x}), me = 'outer'} end\nfunction inner(a) return a.x * 2 end",
        &["outer", "inner"],
    );
    let out = tokio::time::timeout(
        Duration::from_secs(5),
        m.invoke("P:outer", json!({"x": 21}), Caller::Cli),
    )
    .await
    .expect("no deadlock")
    .unwrap();
    assert_eq!(out, json!({"inner": 42, "me": "outer"}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cross_plugin_call_and_dotted_id() {
    let m = manager();
    load(
        &m,
        "A",
        "function a(x) return 'a>' .. api.tools.call('B.b', {}) end",
        &["a"],
    );
    load(&m, "B", "function b() return 'b' end", &["b"]);
    let out = m.invoke("A:a", json!({}), Caller::Cli).await.unwrap();
    assert_eq!(out, json!("a>b"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_recursion_ends_in_recursion_limit() {
    let m = manager();
    load(
        &m,
        "A",
        "function ping(x) return api.tools.call('B:pong', {}) end",
        &["ping"],
    );
    load(
        &m,
        "B",
        "function pong(x) return api.tools.call('A:ping', {}) end",
        &["pong"],
    );
    // Also a plugin recursing into itself.
    load(
        &m,
        "S",
        "function self_rec(x) return api.tools.call('S:self_rec', {}) end",
        &["self_rec"],
    );
    for id in ["A:ping", "S:self_rec"] {
        let e = tokio::time::timeout(Duration::from_secs(5), m.invoke(id, json!({}), Caller::Cli))
            .await
            .expect("no hang")
            .unwrap_err();
        assert_eq!(e.code(), "recursion_limit", "{id}: {e}");
    }
    // Still usable.
    load(&m, "C", "function ok() return 1 end", &["ok"]);
    assert_eq!(
        m.invoke("C:ok", json!({}), Caller::Cli).await.unwrap(),
        json!(1)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cross_thread_cycle_is_refused_not_deadlocked() {
    let m = manager();
    let barrier = Arc::new(Barrier::new(2));
    let b = barrier.clone();
    m.register_fn(def("host:barrier"), move |_c, _a| {
        b.wait();
        Ok(json!(null))
    })
    .unwrap();
    load(
        &m,
        "A",
        "function first() api.tools.call('host:barrier') return api.tools.call('B:second') end\nfunction second() return 'A2' end",
        &["first", "second"],
    );
    load(
        &m,
        "B",
        "function first() api.tools.call('host:barrier') return api.tools.call('A:second') end\nfunction second() return 'B2' end",
        &["first", "second"],
    );
    let (m1, m2) = (m.clone(), m.clone());
    let t1 = tokio::spawn(async move { m1.invoke("A:first", json!({}), Caller::Cli).await });
    let t2 = tokio::spawn(async move { m2.invoke("B:first", json!({}), Caller::Cli).await });
    let both = tokio::time::timeout(Duration::from_secs(5), async {
        (t1.await.unwrap(), t2.await.unwrap())
    })
    .await
    .expect("a cycle across threads must not deadlock");
    let results = [both.0, both.1];
    let busy = results
        .iter()
        .filter(|r| matches!(r, Err(e) if e.to_string().contains("busy")))
        .count();
    assert!(busy >= 1, "one side must be refused as busy: {results:?}");
    let ok = results.iter().filter(|r| r.is_ok()).count();
    assert_eq!(busy + ok, 2, "{results:?}");
}
