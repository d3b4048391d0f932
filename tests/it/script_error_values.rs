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
    // Issue 36 item 5: a raised table's or thrown map's own code is the caller's code.
    for (id, want, code) in [
        ("L:raise_table", "bad_roll: too high", "bad_roll"),
        ("R:raise_map", "bad_roll: too high", "bad_roll"),
        ("L:raise_plain_table", "{\"sides\":7}", "execution_failed"),
        ("R:raise_plain_map", "{\"sides\":7}", "execution_failed"),
    ] {
        let e = m.invoke(id, json!({}), Caller::Cli).await.unwrap_err();
        assert_eq!(e.code(), code, "{id}: {e}");
        let text = e.to_string();
        assert!(text.contains(want), "{id}: {text}");
        assert!(!text.contains("table: 0x"), "{id}: {text}");
    }
    // A script calling one that raised reads that code too, in both languages.
    for (caller, callee) in [("L:caught", "L:raise_table"), ("R:caught", "R:raise_map")] {
        let out = m
            .invoke(caller, json!({"id": callee}), Caller::Cli)
            .await
            .unwrap();
        assert_eq!(out["code"], json!("bad_roll"), "{caller}: {out}");
    }
}

const LUA_HOST_ERRORS: &str = r#"
local function catch(f, ...)
  local ok, e = pcall(f, ...)
  return {ok = ok, kind = type(e), code = e.code, message = e.message, text = tostring(e)}
end
function refused_call(a) return catch(api.tools.call, "Other:tool", {}) end
function refused_fs(a) return catch(api.fs.read, "/x.txt") end
function bad_argument(a) return catch(api.hooks.on, "no:such-point", function() end) end
function in_handler(a)
  local seen
  xpcall(api.fs.read, function(e) seen = {kind = type(e), code = e.code} end, "/x.txt")
  return seen
end
function through(a) return api.tools.call("Other:tool", {}) end
function again(a)
  local ok, e = pcall(api.tools.call, "Other:tool", {})
  error(e)
end
"#;

const RHAI_HOST_ERRORS: &str = r#"
fn catch_call() {
  try { api::tools::invoke("Other:tool", #{}); return #{ ok: true }; }
  catch (e) { return #{ ok: false, kind: type_of(e), code: e.code, message: e.message }; }
}
fn refused_call(a) { catch_call() }
fn refused_fs(a) {
  try { api::fs::read("/x.txt"); return #{ ok: true }; }
  catch (e) { return #{ ok: false, kind: type_of(e), code: e.code, message: e.message }; }
}
fn bad_argument(a) {
  try { api::hooks::on("no:such-point", |ev| ()); return #{ ok: true }; }
  catch (e) { return #{ ok: false, kind: type_of(e), code: e.code, message: e.message }; }
}
fn through(a) { api::tools::invoke("Other:tool", #{}) }
fn again(a) {
  try { api::tools::invoke("Other:tool", #{}); } catch (e) { throw e; }
}
"#;

/// Issue 23 item 10: every failure the host raises into a script is a `{code, message}`
/// value, not only a nested call's: a call refused for a missing permission, a refused
/// `api.fs`, a bad argument; let through or raised again, it keeps its code.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_host_error_is_a_value_with_code_and_message() {
    let m = manager();
    m.register_fn(def("Other:tool"), |_ctx, _args| Ok(json!("ran")))
        .unwrap();
    let lua = [
        "refused_call",
        "refused_fs",
        "bad_argument",
        "in_handler",
        "through",
        "again",
    ];
    load(&m, "L", "main.lua", LUA_HOST_ERRORS, &lua);
    let rhai = [
        "refused_call",
        "refused_fs",
        "bad_argument",
        "through",
        "again",
    ];
    load(&m, "R", "main.rhai", RHAI_HOST_ERRORS, &rhai);
    for (plugin, kind) in [("L", "table"), ("R", "map")] {
        let run = |f: &str| {
            let m = m.clone();
            let id = format!("{plugin}:{f}");
            async move { m.invoke(&id, json!({}), Caller::Cli).await }
        };
        for (f, code, text) in [
            ("refused_call", "permission_denied", "tools: Other:tool"),
            ("refused_fs", "permission_denied", "fs.read"),
            ("bad_argument", "execution_failed", "no:such-point"),
        ] {
            let out = run(f).await.unwrap();
            assert_eq!(out["ok"], json!(false), "{plugin}:{f}: {out}");
            assert_eq!(out["kind"], json!(kind), "{plugin}:{f}: {out}");
            assert_eq!(out["code"], json!(code), "{plugin}:{f}: {out}");
            let msg = out["message"].as_str().unwrap_or_default();
            assert!(msg.contains(text), "{plugin}:{f}: {out}");
            assert!(!msg.contains("traceback"), "{plugin}:{f}: {out}");
            if plugin == "L" {
                // It prints as `code: message`.
                assert_eq!(out["text"], json!(format!("{code}: {msg}")), "{out}");
            }
        }
        if plugin == "L" {
            let out = run("in_handler").await.unwrap();
            assert_eq!(out, json!({"kind": "table", "code": "permission_denied"}));
        }
        for f in ["through", "again"] {
            let e = run(f).await.unwrap_err();
            assert_eq!(e.code(), "permission_denied", "{plugin}:{f}: {e}");
            assert!(
                e.to_string().contains("tools: Other:tool"),
                "{plugin}:{f}: {e}"
            );
        }
    }
}
