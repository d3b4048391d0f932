//! Threat: a panic in a Rust function called from a script. It must not cross into the
//! host: the script sees an error (which it may catch), and the host logs and counts it.

use crate::common;

use common::*;
use serde_json::json;
use tavern::internal::script::{CallInfo, PluginScripts, ScriptEnv, ScriptSource};
use tavern::internal::tools::{Caller, ToolDefinition};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn panicking_host_tool_called_from_a_script() {
    let m = manager();
    m.register_fn(
        ToolDefinition::host("host:boom", "panics", serde_json::json!({"type": "object"})),
        |_ctx, _args| panic!("host tool exploded"),
    )
    .unwrap();
    let mut env = ScriptEnv::new("p", std::env::temp_dir());
    env.limits = test_limits();
    // The script may call the host tool (`permissions.tools`).
    env.permissions.tools = vec!["host:*".into()];
    let p = PluginScripts::from_sources(
        env,
        vec![
            ScriptSource::new(
                "main.lua",
                format!(
                    "function caught() local ok, e = pcall(api.tools.call, 'host:boom', {{}}) return {{ok = ok, e = tostring(e)}} end\nfunction uncaught() return api.tools.call('host:boom', {{}}) end\n{PING_LUA}"
                ),
            )
            .unwrap(),
        ],
    )
    .unwrap();
    let def = |id: &str| ToolDefinition::host(id, "t", json!({"type": "object"}));
    m.register(def("p:caught"), std::sync::Arc::new(p.handler("caught")))
        .unwrap();
    m.register(
        def("p:uncaught"),
        std::sync::Arc::new(p.handler("uncaught")),
    )
    .unwrap();
    m.register(def("p:ping"), std::sync::Arc::new(p.handler("ping")))
        .unwrap();

    let out = m.invoke("p:caught", json!({}), Caller::Cli).await.unwrap();
    assert_eq!(out["ok"], json!(false));
    assert!(
        out["e"].as_str().unwrap().contains("internal error"),
        "{out}"
    );
    assert_eq!(
        p.panic_count(),
        1,
        "the host must see the panic even when the script caught it"
    );

    let e = m
        .invoke("p:uncaught", json!({}), Caller::Cli)
        .await
        .unwrap_err();
    assert_eq!(e.code(), "execution_failed", "{e}");
    assert_eq!(p.panic_count(), 2);
    assert_eq!(
        m.invoke("p:ping", json!({"n": 1}), Caller::Cli)
            .await
            .unwrap(),
        json!({"pong": 1})
    );
    // Direct calls still work too.
    assert_eq!(
        p.call("ping", json!({"n": 2}), &CallInfo::host("p:ping"))
            .unwrap(),
        json!({"pong": 2})
    );
}
