//! The workflow and node hook points: `workflow:before-execute` / `workflow:after-execute`
//! around every run that has a tool manager (CLI, tool call, agent, host), and
//! `node:before-execute` / `node:after-execute` around every executor node.

use std::sync::Arc;

use serde_json::{Map, Value};

use super::compile::Plan;
use super::error::{NodeError, WorkflowError};
use super::registry::{NodeContext, NodeExecutor, NodeFuture};
use super::run::{RunOptions, RunReport};
use crate::hooks::points::{NODE_AFTER_IX, NODE_BEFORE_IX, WORKFLOW_AFTER, WORKFLOW_BEFORE};
use crate::hooks::{event, Hooks};
use crate::tools::{CallContext, ToolError, ToolManager};

/// The registry behind `manager`, when it has handlers for one of `points`.
pub(crate) fn hooked<'m>(
    manager: Option<&'m Arc<ToolManager>>,
    points: &[&str],
) -> Option<&'m Hooks> {
    let h = Hooks::of(manager?)?;
    points.iter().any(|p| h.active(p)).then_some(h)
}

fn context(
    manager: &Arc<ToolManager>,
    workflow: &str,
    caller: &crate::tools::Caller,
    depth: u32,
    cancel: &tokio_util::sync::CancellationToken,
) -> CallContext {
    CallContext {
        tool_id: format!("workflow:{workflow}"),
        caller: caller.clone(),
        manager: manager.clone(),
        depth,
        cancel: cancel.clone(),
        deadline: None,
        observer: None,
    }
}

fn vetoed(workflow: &str, e: ToolError) -> WorkflowError {
    match e {
        ToolError::Vetoed { reason, .. } => WorkflowError::Vetoed {
            workflow: workflow.to_string(),
            reason,
        },
        other => WorkflowError::Vetoed {
            workflow: workflow.to_string(),
            reason: other.to_string(),
        },
    }
}

/// Runs `plan` with the workflow points fired around it.
pub(crate) async fn run_hooked(
    plan: &Plan,
    hooks: &Hooks,
    mut args: Map<String, Value>,
    opts: RunOptions,
) -> Result<RunReport, WorkflowError> {
    let id = plan.workflow_id.to_string();
    let Some(manager) = opts.tools.clone() else {
        return plan.run_unhooked(args, opts).await;
    };
    let ctx = context(&manager, &id, &opts.caller, opts.depth, &opts.cancel);
    let caller = opts.caller.to_string();
    if hooks.active(WORKFLOW_BEFORE) {
        let mut ev = Map::new();
        ev.insert("workflow".into(), Value::String(id.clone()));
        ev.insert("inputs".into(), Value::Object(args.clone()));
        ev.insert("caller".into(), Value::String(caller.clone()));
        let mut ev = hooks
            .fire(WORKFLOW_BEFORE, ev, &ctx)
            .await
            .map_err(|e| vetoed(&id, e))?;
        match ev.remove("inputs") {
            Some(Value::Object(m)) => args = m,
            Some(Value::Null) | None => {}
            Some(other) => {
                return Err(WorkflowError::Arguments {
                    workflow: id,
                    problems: vec![format!(
                        "a workflow:before-execute hook replaced the inputs with {other}, not an object"
                    )],
                })
            }
        }
    }
    let inputs = args.clone();
    let mut report = plan.run_unhooked(args, opts).await?;
    if hooks.active(WORKFLOW_AFTER) {
        let mut ev = Map::new();
        ev.insert("workflow".into(), Value::String(id.clone()));
        ev.insert("inputs".into(), Value::Object(inputs));
        ev.insert("caller".into(), Value::String(caller));
        ev.insert("outputs".into(), Value::Object(report.outputs.clone()));
        ev.insert(
            "status".into(),
            serde_json::to_value(report.status).unwrap_or(Value::Null),
        );
        if let Ok(mut ev) = hooks.fire(WORKFLOW_AFTER, ev, &ctx).await {
            if let Some(Value::Object(m)) = ev.remove("outputs") {
                report.outputs = m;
            }
        }
    }
    Ok(report)
}

/// The node's run with `node:before-execute` / `node:after-execute` around it. The inputs
/// and outputs move into the events and back out (a copy of the inputs is kept only for
/// `node:after-execute`).
pub(crate) fn hooked_node(
    exec: Arc<dyn NodeExecutor>,
    ctx: NodeContext,
    inputs: Map<String, Value>,
    config: Map<String, Value>,
    node_type: Arc<str>,
) -> NodeFuture {
    Box::pin(async move {
        let run = ctx.run.clone();
        let Some(manager) = run.tools.clone() else {
            return exec.execute(ctx, inputs, config).await;
        };
        let Some(hooks) = Hooks::of(&manager) else {
            return exec.execute(ctx, inputs, config).await;
        };
        let (before, after) = (
            hooks.active_at(NODE_BEFORE_IX),
            hooks.active_at(NODE_AFTER_IX),
        );
        if !before && !after {
            return exec.execute(ctx, inputs, config).await;
        }
        let cctx = context(
            &manager,
            &run.workflow_id,
            &run.caller,
            run.depth,
            &run.cancel,
        );
        // The maps and their strings are the last node event's on this thread (no key
        // hashed anew, no string allocated when it fits): filled here, handed back below.
        let event = |ix: usize, keys: &[&str], inputs: Map<String, Value>| {
            let mut m = event::event_map(ix, keys);
            let mut inputs = Some(inputs);
            for (i, slot) in m.values_mut().enumerate() {
                match i {
                    0 => event::set_str(slot, &run.workflow_id),
                    1 => event::set_str(slot, &ctx.node_id),
                    2 => event::set_str(slot, &node_type),
                    3 => *slot = inputs.take().map(Value::Object).unwrap_or_default(),
                    _ => *slot = Value::Null,
                }
            }
            Value::Object(m)
        };
        let mut inputs = inputs;
        if before {
            let mut ev = event(NODE_BEFORE_IX, &BEFORE_KEYS, inputs);
            let fired = hooks.fire_at(NODE_BEFORE_IX, &mut ev, &cctx).await;
            // A replacement is an object (the registry refuses others) in the same place;
            // the original otherwise.
            inputs = match take_back(NODE_BEFORE_IX, ev, 3) {
                Value::Object(m) => m,
                _ => Map::new(),
            };
            fired.map_err(|e| NodeError::Tool(Box::new(e)))?;
        }
        let ev_after = after.then(|| event(NODE_AFTER_IX, &AFTER_KEYS, inputs.clone()));
        let out = exec.execute(ctx, inputs, config).await?;
        let Some(mut ev) = ev_after else {
            return Ok(out);
        };
        if let Some(slot) = ev.as_object_mut().and_then(|m| m.values_mut().nth(4)) {
            *slot = Value::Object(out);
        }
        // An after point never fails the node: a failing handler was skipped.
        let _ = hooks.fire_at(NODE_AFTER_IX, &mut ev, &cctx).await;
        Ok(match take_back(NODE_AFTER_IX, ev, 4) {
            Value::Object(m) => m,
            _ => Map::new(),
        })
    })
}

/// The keys of the node events, in order.
const BEFORE_KEYS: [&str; 4] = ["workflow", "node", "type", "inputs"];
const AFTER_KEYS: [&str; 5] = ["workflow", "node", "type", "inputs", "outputs"];

/// Takes value `i` out of event `ev` (null when there is none) and hands the map back for
/// the next event of point `ix`, with its inputs and outputs dropped.
fn take_back(ix: usize, ev: Value, i: usize) -> Value {
    let Value::Object(mut m) = ev else {
        return Value::Null;
    };
    let v = m
        .values_mut()
        .nth(i)
        .map(std::mem::take)
        .unwrap_or_default();
    for slot in m.values_mut().skip(3) {
        *slot = Value::Null;
    }
    event::recycle(ix, m);
    v
}
