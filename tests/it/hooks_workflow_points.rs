//! `workflow:*` and `node:*` fire for every run, whoever starts it: the CLI
//! (`tavern workflow run`), a `workflow:<id>` tool call, a script's `api.tools.call`, the
//! host API (`Workflows::run` without a manager of its own, `Plan::run` with one) and an
//! agent's deliberation — with Lua handlers on a multi-thread runtime (they run in place),
//! on a current-thread runtime (they run on a blocking thread) and on no runtime at all.

use crate::agent_support;
use crate::cli_support;
use crate::hooks_support;

use std::path::Path;
use std::time::Duration;

use hooks_support::write;
use serde_json::{json, Map, Value};
use tavern::internal::workflow::RunOptions;
use tavern::Caller;
use tavern::Engine;

const SHOUT: &str = r#"{"id": "shout",
 "interfaceInputs": {"text": {"dataFlowType": "STRING", "required": true}},
 "interfaceOutputs": {"result": {"dataFlowType": "STRING"}},
 "nodes": [{"id": "in", "type": "core:GroupInput"},
           {"id": "up", "type": "core:RegexReplace", "inputValues": {"pattern": "a", "replacement": "A"}},
           {"id": "out", "type": "core:GroupOutput"}],
 "edges": [{"source": "in", "sourceHandle": "text", "target": "up", "targetHandle": "text"},
           {"source": "up", "sourceHandle": "text", "target": "out", "targetHandle": "result"}]}"#;

/// A plugin whose Lua handlers record every workflow and node point they see
/// (`wb:<workflow>:<caller>`, `nb:<node>@<ctx.tool_id>`, `na:<node>`,
/// `wa:<workflow>:<caller>`), copy the
/// record into the run's outputs as `trace`, and hand it over through `Trace:take`.
/// `Trace:run` starts `workflow:shout` through `api.tools.call`.
const TRACE_YAML: &str = r#"name: Trace
permissions:
  hooks: ["workflow:before-execute", "hook:client:workflow:after-execute",
          "node:before-execute", "node:after-execute"]
  tools: ["workflow:*"]
"#;
const TRACE_LUA: &str = r#"
local log = {}
local function add(s) log[#log + 1] = s end
api.hooks.on("workflow:before-execute", function(ev) add("wb:" .. ev.workflow .. ":" .. ev.caller) end)
api.hooks.on("node:before-execute", function(ev, ctx) add("nb:" .. ev.node .. "@" .. ctx.tool_id) end)
api.hooks.on("node:after-execute", function(ev) add("na:" .. ev.node) end)
api.hooks.on("workflow:after-execute", function(ev)
  add("wa:" .. ev.workflow .. ":" .. ev.caller)
  local out = {}
  for k, v in pairs(ev.outputs) do out[k] = v end
  out.trace = table.concat(log, ",")
  return {outputs = out}
end)
api.tools.register{ id = "take", description = "the record so far, emptied",
  handler = function() local s = table.concat(log, ","); log = {}; return s end }
api.tools.register{ id = "run", description = "runs workflow:shout from a script",
  handler = function(args) return api.tools.call("workflow:shout", {text = args.text}) end }
"#;

fn home() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    write(&d.path().join("plugins/Trace/plugin.yaml"), TRACE_YAML);
    write(&d.path().join("plugins/Trace/main.lua"), TRACE_LUA);
    write(&d.path().join("workflows/shout.json"), SHOUT);
    d
}

fn engine(home: &Path) -> Engine {
    let e = Engine::builder().home(home).build().unwrap();
    assert!(e.problems().is_empty(), "problems: {:?}", e.problems());
    e
}

/// What one run of `shout` records, for a run started by `caller`.
fn shout_trace(caller: &str) -> String {
    format!("wb:shout:{caller},nb:up@workflow:shout,na:up,wa:shout:{caller}")
}

fn text(s: &str) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("text".into(), json!(s));
    m
}

/// The ways a host or a tool starts a run in process, each with the caller the events
/// name. Every one returns the run's outputs (or the tool's result).
const ENTRIES: &[&str] = &[
    "tool call workflow:shout",
    "script api.tools.call",
    "host Workflows::run (no manager given)",
    "host Plan::run (engine manager)",
];

async fn start(e: &Engine, entry: &str) -> (Value, &'static str) {
    match entry {
        "tool call workflow:shout" => (
            e.tools()
                .invoke("workflow:shout", json!({"text": "banana"}), Caller::Cli)
                .await
                .unwrap(),
            "cli",
        ),
        "script api.tools.call" => (
            e.tools()
                .invoke("Trace:run", json!({"text": "banana"}), Caller::Host)
                .await
                .unwrap(),
            "plugin:Trace",
        ),
        "host Workflows::run (no manager given)" => {
            let r = e
                .workflows()
                .run("shout", text("banana"), RunOptions::default())
                .await
                .unwrap();
            (Value::Object(r.outputs), "host")
        }
        "host Plan::run (engine manager)" => {
            let wf = e.workflows().get("shout").unwrap();
            let opts = RunOptions {
                tools: Some(e.tools().clone()),
                hooks: Some(e.hooks().clone()),
                ..Default::default()
            };
            let r = wf.plan.run(text("banana"), opts).await.unwrap();
            (Value::Object(r.outputs), "host")
        }
        other => unreachable!("entry {other}"),
    }
}

/// Runs every entry on the current runtime and checks the record of each.
async fn every_entry_fires(e: &Engine) {
    let mut ran = 0;
    for entry in ENTRIES {
        let (out, caller) = start(e, entry).await;
        let want = shout_trace(caller);
        // The handlers ran: the result went through node and workflow points alike.
        let result = out.get("result").unwrap_or(&out);
        assert_eq!(result, &json!("bAnAnA"), "{entry}: {out}");
        if let Some(t) = out.get("trace") {
            assert_eq!(t, &json!(want), "{entry}");
        }
        let took = e
            .tools()
            .invoke("Trace:take", json!({}), Caller::Host)
            .await
            .unwrap();
        assert_eq!(took, json!(want), "{entry}");
        ran += 1;
    }
    assert_eq!(ran, ENTRIES.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_entry_fires_on_a_multi_thread_runtime() {
    let h = home();
    every_entry_fires(&engine(h.path())).await;
}

#[tokio::test(flavor = "current_thread")]
async fn every_entry_fires_on_a_current_thread_runtime() {
    let h = home();
    every_entry_fires(&engine(h.path())).await;
}

#[test]
fn a_host_without_a_runtime_fires_them() {
    // A game host's plain thread: `call_blocking` runs the call on the engine's own
    // runtime; the script tool `Trace:take` then runs in place on this runtime-less thread.
    let h = home();
    let e = engine(h.path());
    let text = "<|[REQUEST_TOOL]|>\ncommand:「始」workflow:shout「末」\ntext:「始」banana「末」\n<|[END_TOOL]|>\n";
    let r = e.call_blocking(text, tavern::CallOptions::new()).unwrap();
    assert_eq!(r.outcomes.len(), 1, "{:?}", r.parsed.diagnostics);
    assert_eq!(r.outcomes[0].result.clone().unwrap(), json!("bAnAnA"));
    let took = ready(e.tools().invoke("Trace:take", json!({}), Caller::Host));
    assert_eq!(took.unwrap(), json!(shout_trace("host")));
}

/// Polls a future that completes at once (a script tool with no runtime runs inline).
fn ready<F: std::future::Future>(f: F) -> F::Output {
    let mut f = std::pin::pin!(f);
    let waker = std::task::Waker::noop();
    match f.as_mut().poll(&mut std::task::Context::from_waker(waker)) {
        std::task::Poll::Ready(v) => v,
        std::task::Poll::Pending => panic!("a script tool with no runtime completes at once"),
    }
}

#[test]
fn the_cli_workflow_run_fires_them() {
    let h = home();
    let r = cli_support::tavern(
        h.path(),
        &["workflow", "run", "shout", "--input", "text=banana"],
        b"",
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        r.json(),
        json!({"result": "bAnAnA", "trace": shout_trace("cli")})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_deliberation_fires_them() {
    let server = agent_support::serve(vec![agent_support::Reply::Text("Fine.".into())]).await;
    let h = home();
    std::fs::create_dir_all(h.path().join("agents")).unwrap();
    let profile = json!({
        "id": "npc",
        "description": "You are a test NPC.",
        "tool_ids_inventory": [],
        "tool_call_format": "action",
        "llm": {"base_url": server.base_url(), "model": "test-model", "stream": false,
                "retries": 0, "timeout_ms": 20000}
    });
    write(
        &h.path().join("agents/npc.json"),
        &serde_json::to_string_pretty(&profile).unwrap(),
    );
    let e = engine(h.path());
    let mut rt = e.agent("npc").unwrap().build().unwrap();
    // A hang guard, not a timing assertion.
    let run = tokio::time::timeout(Duration::from_secs(60), rt.run(Some("hello")))
        .await
        .expect("the run ends");
    assert!(run.error.is_none(), "{:?}", run.error);
    let took = e
        .tools()
        .invoke("Trace:take", json!({}), Caller::Host)
        .await
        .unwrap();
    let took = took.as_str().unwrap().to_string();
    let parts: Vec<&str> = took.split(',').collect();
    // One deliberation run: its workflow points name the agent as the caller, and its
    // nodes fired in between, each before then after.
    let first = parts.first().copied().unwrap_or_default();
    let last = parts.last().copied().unwrap_or_default();
    assert!(
        first.starts_with("wb:") && first.ends_with(":model:npc"),
        "{took}"
    );
    assert!(
        last.starts_with("wa:") && last.ends_with(":model:npc"),
        "{took}"
    );
    let before: Vec<&str> = parts
        .iter()
        .filter_map(|p| p.strip_prefix("nb:"))
        .filter_map(|p| p.split('@').next())
        .collect();
    let after: Vec<&str> = parts.iter().filter_map(|p| p.strip_prefix("na:")).collect();
    assert!(!before.is_empty(), "no node points: {took}");
    assert_eq!(before, after, "{took}");
}
