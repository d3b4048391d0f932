//! Errors as values (issue 14): a failed nested `api.tools.call` reaches Lua as a table and
//! Rhai as a map with `code` and `message` (no traceback); a script that lets it through
//! fails with the same code; `error({...})` tables and thrown Rhai maps keep their content.

use crate::common;

use std::sync::Arc;

use common::*;
use serde_json::json;
use tavern::internal::script::{PluginScripts, ScriptEnv, ScriptSource};
use tavern::internal::tools::{Caller, ToolDefinition, ToolManager};

fn def(id: &str) -> ToolDefinition {
    ToolDefinition::host(id, "test tool", json!({"type": "object"}))
}

fn load(m: &Arc<ToolManager>, name: &str, file: &str, src: &str, tools: &[&str]) -> PluginScripts {
    let mut env = ScriptEnv::new(name, std::env::temp_dir());
    env.limits = test_limits();
    env.tools = Some(Arc::downgrade(m));
    let p = PluginScripts::from_sources(env, vec![ScriptSource::new(file, src).unwrap()]).unwrap();
    for t in tools {
        m.register(def(&format!("{name}:{t}")), Arc::new(p.handler(*t)))
            .unwrap();
    }
    p
}

const LUA: &str = r#"
function caught(a)
  local ok, e = pcall(api.tools.call, a.id, {})
  return {ok = ok, kind = type(e), code = e.code, message = e.message}
end
function through(a) return api.tools.call(a.id, {}) end
function raise_table() error({code = "bad_roll", message = "too high"}) end
function raise_plain_table() error({sides = 7}) end
"#;

const RHAI: &str = r#"
fn caught(a) {
  try { api::tools::invoke(a.id, #{}); return #{ ok: true }; }
  catch (e) { return #{ ok: false, kind: type_of(e), code: e.code, message: e.message }; }
}
fn through(a) { api::tools::invoke(a.id, #{}) }
fn raise_map(a) { throw #{ code: "bad_roll", message: "too high" }; }
fn raise_plain_map(a) { throw #{ sides: 7 }; }
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nested_errors_are_values_with_code_and_message() {
    let m = manager();
    load(
        &m,
        "L",
        "main.lua",
        LUA,
        &["caught", "through", "raise_table", "raise_plain_table"],
    );
    load(
        &m,
        "R",
        "main.rhai",
        RHAI,
        &["caught", "through", "raise_map", "raise_plain_map"],
    );
    for (plugin, kind) in [("L", "table"), ("R", "map")] {
        let out = m
            .invoke(
                &format!("{plugin}:caught"),
                json!({"id": "Nope:tool"}),
                Caller::Cli,
            )
            .await
            .unwrap();
        assert_eq!(out["ok"], json!(false), "{plugin}: {out}");
        assert_eq!(out["kind"], json!(kind), "{plugin}: {out}");
        assert_eq!(out["code"], json!("unknown_tool"), "{plugin}: {out}");
        let msg = out["message"].as_str().unwrap();
        assert!(
            msg.starts_with("Unknown tool 'Nope:tool'"),
            "{plugin}: {msg}"
        );
        assert!(!msg.contains("traceback"), "{plugin}: {msg}");

        // Let through, it is the nested call's own error (same code).
        let e = m
            .invoke(
                &format!("{plugin}:through"),
                json!({"id": "Nope:tool"}),
                Caller::Cli,
            )
            .await
            .unwrap_err();
        assert_eq!(e.code(), "unknown_tool", "{plugin}: {e}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raised_tables_and_thrown_maps_keep_their_content() {
    let m = manager();
    load(
        &m,
        "L",
        "main.lua",
        LUA,
        &["caught", "through", "raise_table", "raise_plain_table"],
    );
    load(
        &m,
        "R",
        "main.rhai",
        RHAI,
        &["caught", "through", "raise_map", "raise_plain_map"],
    );
    for (id, want) in [
        ("L:raise_table", "bad_roll: too high"),
        ("R:raise_map", "bad_roll: too high"),
        ("L:raise_plain_table", "{\"sides\":7}"),
        ("R:raise_plain_map", "{\"sides\":7}"),
    ] {
        let e = m.invoke(id, json!({}), Caller::Cli).await.unwrap_err();
        assert_eq!(e.code(), "execution_failed", "{id}: {e}");
        let text = e.to_string();
        assert!(text.contains(want), "{id}: {text}");
        assert!(!text.contains("table: 0x"), "{id}: {text}");
    }
}
