//! Hooks from Lua: every tool point can modify, veto with a reason; handlers run by priority
//! then registration order over a snapshot; `once`, `off`, failing and runaway handlers,
//! nesting cut-off.

use crate::hooks_support;

use hooks_support::*;
use serde_json::json;

fn hooker(lua: &str) -> tempfile::TempDir {
    home(&[
        (
            "plugins/Hooker/plugin.yaml",
            &manifest(
                "Hooker",
                &["tool:before-invoke", "tool:after-invoke"],
                "  tools: [\"Echo:*\"]\n",
            ),
        ),
        ("plugins/Hooker/main.lua", lua),
    ])
}

#[tokio::test(flavor = "multi_thread")]
async fn before_invoke_vetoes_with_reason_and_replaces_args() {
    let h = hooker(
        r#"
api.hooks.on("tool:before-invoke", function(ev)
  if ev.tool ~= "Echo:echo" then return end
  if ev.args.text == "bad" then return false, "no bad words" end
  if ev.args.text == "shout" then return {args = {text = "SHOUT"}} end
  if ev.args.text == "broken" then return {args = {nope = "x"}} end
end)
"#,
    );
    let e = clean_engine(h.path());
    assert_eq!(
        call(&e, "Echo:echo", json!({"text": "hi"})).await.unwrap(),
        json!("hi")
    );
    let err = call(&e, "Echo:echo", json!({"text": "bad"}))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "vetoed");
    assert!(err.to_string().contains("no bad words"), "{err}");
    assert!(
        err.observation().starts_with("Observation: Error - "),
        "{}",
        err.observation()
    );
    // The vetoed call never ran.
    assert_eq!(call(&e, "Echo:count", json!({})).await.unwrap(), json!(1));
    assert_eq!(
        call(&e, "Echo:echo", json!({"text": "shout"}))
            .await
            .unwrap(),
        json!("SHOUT")
    );
    // Replaced arguments pass the schema again.
    let err = call(&e, "Echo:echo", json!({"text": "broken"}))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "invalid_parameters", "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn after_invoke_sees_result_and_replaces_it() {
    let h = hooker(
        r#"
api.hooks.on("tool:after-invoke", function(ev)
  if ev.tool == "Echo:echo" and ev.ok then
    assert(type(ev.elapsed_ms) == "number")
    assert(ev.caller == "cli")
    return {result = ev.result .. "!"}
  end
  if ev.tool == "Echo:echo" and not ev.ok then
    return {result = "fallback: " .. ev.error.code}
  end
end)
"#,
    );
    let e = clean_engine(h.path());
    assert_eq!(
        call(&e, "Echo:echo", json!({"text": "hi"})).await.unwrap(),
        json!("hi!")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn priority_then_registration_order_once_and_off() {
    let h = hooker(
        r#"
local order = {}
local function rec(tag) return function(ev) if ev.tool == "Echo:echo" then order[#order + 1] = tag end end end
api.hooks.on("tool:before-invoke", rec("a0"))
api.hooks.on("tool:before-invoke", rec("b5"), {priority = 5})
api.hooks.on("tool:before-invoke", rec("c0"))
api.hooks.on("tool:before-invoke", rec("once"), {priority = 9, once = true})
local h = api.hooks.on("tool:before-invoke", rec("off"))
assert(api.hooks.off(h) == true)
assert(api.hooks.off(h) == false)
api.tools.register{ id = "order", description = "order so far", handler = function()
  local out = table.concat(order, ","); order = {}; return out end }
"#,
    );
    let e = clean_engine(h.path());
    call(&e, "Echo:echo", json!({"text": "1"})).await.unwrap();
    assert_eq!(
        call(&e, "Hooker:order", json!({})).await.unwrap(),
        json!("once,b5,a0,c0")
    );
    call(&e, "Echo:echo", json!({"text": "2"})).await.unwrap();
    assert_eq!(
        call(&e, "Hooker:order", json!({})).await.unwrap(),
        json!("b5,a0,c0")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn handlers_run_over_a_snapshot() {
    // A handler that adds another handler while the point fires: the new one runs next time.
    let h = hooker(
        r#"
local seen = 0
local added = false
api.hooks.on("tool:before-invoke", function(ev)
  if ev.tool ~= "Echo:echo" then return end
  if not added then
    added = true
    api.hooks.on("tool:before-invoke", function(ev2) if ev2.tool == "Echo:echo" then seen = seen + 1 end end)
  end
end)
api.tools.register{ id = "seen", description = "d", handler = function() return seen end }
"#,
    );
    let e = clean_engine(h.path());
    call(&e, "Echo:echo", json!({"text": "1"})).await.unwrap();
    assert_eq!(call(&e, "Hooker:seen", json!({})).await.unwrap(), json!(0));
    call(&e, "Echo:echo", json!({"text": "2"})).await.unwrap();
    assert_eq!(call(&e, "Hooker:seen", json!({})).await.unwrap(), json!(1));
}

#[tokio::test(flavor = "multi_thread")]
async fn failing_and_runaway_handlers_veto_before_and_are_skipped_after() {
    let h = hooker(
        r#"
api.hooks.on("tool:before-invoke", function(ev)
  if ev.args.text == "boom" then error("handler exploded") end
  if ev.args.text == "loop" then while true do end end
end)
api.hooks.on("tool:after-invoke", function(ev)
  if ev.tool == "Echo:echo" then error("after exploded") end
end)
"#,
    );
    let e = clean_engine(h.path());
    let err = call(&e, "Echo:echo", json!({"text": "boom"}))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "vetoed");
    let msg = err.to_string();
    assert!(
        msg.contains("plugin:Hooker") && msg.contains("handler exploded"),
        "{msg}"
    );
    assert!(
        msg.contains("main.lua"),
        "the error names the script: {msg}"
    );
    let err = call(&e, "Echo:echo", json!({"text": "loop"}))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "vetoed");
    assert!(
        err.to_string().contains("plugin:Hooker") && err.to_string().contains("limit"),
        "{err}"
    );
    // The after handler fails: skipped, the call still succeeds.
    assert_eq!(
        call(&e, "Echo:echo", json!({"text": "ok"})).await.unwrap(),
        json!("ok")
    );
    // The plugin still serves.
    assert_eq!(call(&e, "Echo:count", json!({})).await.unwrap(), json!(1));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hook_that_triggers_itself_is_cut_off() {
    let h = hooker(
        r#"
api.hooks.on("tool:before-invoke", function(ev)
  if ev.tool == "Echo:echo" then api.tools.call("Echo:echo", {text = "again"}) end
end)
"#,
    );
    let e = clean_engine(h.path());
    let err = call(&e, "Echo:echo", json!({"text": "x"}))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "vetoed");
    assert!(err.to_string().contains("cut off"), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn override_wraps_next_and_stacks() {
    let h = home(&[
        (
            "plugins/Wrap/plugin.yaml",
            "name: Wrap\npermissions:\n  services:\n    override: [\"Echo:echo\"]\n",
        ),
        (
            "plugins/Wrap/main.lua",
            r#"
api.services.override("Echo:echo", function(args, ctx, next)
  return "<" .. next({text = args.text .. "1"}) .. ">"
end)
api.services.override("Echo:echo", function(args, ctx, next)
  if args.text == "replace" then return "replaced" end
  return "[" .. next() .. "]"
end)
"#,
        ),
    ]);
    let e = clean_engine(h.path());
    assert_eq!(
        call(&e, "Echo:echo", json!({"text": "a"})).await.unwrap(),
        json!("[<a1>]")
    );
    assert_eq!(
        call(&e, "Echo:echo", json!({"text": "replace"}))
            .await
            .unwrap(),
        json!("replaced")
    );
    assert_eq!(
        e.hooks().overridden_by("Echo:echo"),
        vec!["plugin:Wrap", "plugin:Wrap"]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_plugin_may_override_a_tool_of_a_plugin_that_loads_later() {
    let h = home(&[
        (
            "plugins/Aa/plugin.yaml",
            "name: Aa\npermissions:\n  services:\n    override: [\"Echo:*\"]\n",
        ),
        (
            "plugins/Aa/main.lua",
            "api.services.override('Echo:echo', function(args, ctx, next) return 'aa:' .. next() end)\n",
        ),
    ]);
    let e = clean_engine(h.path());
    assert_eq!(
        call(&e, "Echo:echo", json!({"text": "z"})).await.unwrap(),
        json!("aa:z")
    );
}

const SHOUT: &str = r#"{"id": "shout",
 "interfaceInputs": {"text": {"dataFlowType": "STRING", "required": true}},
 "interfaceOutputs": {"result": {"dataFlowType": "STRING"}},
 "nodes": [{"id": "in", "type": "core:GroupInput"},
           {"id": "up", "type": "core:RegexReplace", "inputValues": {"pattern": "a", "replacement": "A"}},
           {"id": "out", "type": "core:GroupOutput"}],
 "edges": [{"source": "in", "sourceHandle": "text", "target": "up", "targetHandle": "text"},
           {"source": "up", "sourceHandle": "text", "target": "out", "targetHandle": "result"}]}"#;

#[tokio::test(flavor = "multi_thread")]
async fn workflow_node_plugin_and_engine_points_in_lua() {
    let points = [
        "workflow:before-execute",
        "workflow:after-execute",
        "node:before-execute",
        "node:after-execute",
        "plugin:loaded",
        "engine:ready",
    ];
    let h = home(&[
        ("workflows/shout.json", SHOUT),
        ("plugins/Wf/plugin.yaml", &manifest("Wf", &points, "")),
        (
            "plugins/Wf/main.lua",
            r#"
local seen = {}
local function log(s) seen[#seen + 1] = s end
api.hooks.on("plugin:loaded", function(ev) log("loaded:" .. ev.plugin) end)
api.hooks.on("engine:ready", function(ev) log("ready") end)
api.hooks.on("workflow:before-execute", function(ev)
  log("wb:" .. ev.workflow .. ":" .. ev.caller)
  if ev.inputs.text == "veto" then return false, "workflow refused" end
  if ev.inputs.text == "swap" then return {inputs = {text = "banana"}} end
end)
api.hooks.on("node:before-execute", function(ev)
  log("nb:" .. ev.node .. ":" .. ev.type)
  if ev.inputs.text == "nodeveto" then return {veto = "node refused"} end
end)
api.hooks.on("node:after-execute", function(ev)
  log("na:" .. ev.node)
  return {outputs = {text = ev.outputs.text .. "~"}}
end)
api.hooks.on("workflow:after-execute", function(ev)
  log("wa:" .. ev.status)
  return {outputs = {result = "[" .. ev.outputs.result .. "]"}}
end)
api.tools.register{ id = "seen", description = "d", handler = function()
  local out = table.concat(seen, ","); seen = {}; return out end }
"#,
        ),
    ]);
    let e = clean_engine(h.path());
    let boot = call(&e, "Wf:seen", json!({})).await.unwrap();
    assert_eq!(boot, json!("loaded:Echo,loaded:Wf,ready"));
    assert_eq!(
        call(&e, "workflow:shout", json!({"text": "swap"}))
            .await
            .unwrap(),
        json!("[bAnAnA~]")
    );
    assert_eq!(
        call(&e, "Wf:seen", json!({})).await.unwrap(),
        json!("wb:shout:cli,nb:up:core:RegexReplace,na:up,wa:succeeded")
    );
    let err = call(&e, "workflow:shout", json!({"text": "veto"}))
        .await
        .unwrap_err();
    assert_eq!(err.code(), "vetoed");
    assert!(err.to_string().contains("workflow refused"), "{err}");
    let err = call(&e, "workflow:shout", json!({"text": "nodeveto"}))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("node refused"), "{err}");
}

/// A handler without a `ctx` is called straight from Rust, one with a `ctx` through the
/// runner: both hand a raised table, a runaway loop and a plain `false` back the same way.
#[tokio::test(flavor = "multi_thread")]
async fn handlers_with_and_without_ctx_fail_and_veto_alike() {
    let h = hooker(
        r#"
api.hooks.on("tool:before-invoke", function(ev)
  if ev.args.text == "table" then error({message = "refused by a table"}) end
  if ev.args.text == "false" then return false, "plain refusal" end
  if ev.args.text == "loop" then while true do end end
end)
api.hooks.on("tool:before-invoke", function(ev, ctx)
  if ev.args.text == "ctx-table" then error({message = "refused with " .. ctx.caller}) end
  if ev.args.text == "ctx-false" then return false, "ctx refusal" end
  if ev.args.text == "ctx-loop" then while true do end end
end)
"#,
    );
    let e = clean_engine(h.path());
    for (text, want) in [
        ("table", "refused by a table"),
        ("false", "plain refusal"),
        ("loop", "limit"),
        ("ctx-table", "refused with cli"),
        ("ctx-false", "ctx refusal"),
        ("ctx-loop", "limit"),
    ] {
        let err = call(&e, "Echo:echo", json!({ "text": text }))
            .await
            .unwrap_err();
        assert_eq!(err.code(), "vetoed", "{text}: {err}");
        let msg = err.to_string();
        assert!(
            msg.contains(want) && msg.contains("plugin:Hooker"),
            "{text}: {msg}"
        );
    }
    // Both handlers let a plain call through, and the plugin still serves.
    assert_eq!(
        call(&e, "Echo:echo", json!({"text": "ok"})).await.unwrap(),
        json!("ok")
    );
}
