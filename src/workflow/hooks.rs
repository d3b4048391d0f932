//! The workflow and node hook points: `workflow:before-execute` / `workflow:after-execute`
//! around every run that has a tool manager (CLI, tool call, agent, host), and
//! `node:before-execute` / `node:after-execute` around every executor node.

use std::future::Future;
use std::sync::Arc;

use serde_json::{Map, Value};

use super::compile::Plan;
use super::error::{NodeError, WorkflowError};
use super::registry::{NodeContext, NodeExecutor, NodeFuture, RunShared};
use super::run::{RunOptions, RunReport};
use crate::hooks::points::{NODE_AFTER_IX, NODE_BEFORE_IX, WORKFLOW_AFTER, WORKFLOW_BEFORE};
use crate::hooks::{event, Handlers, Hooks};
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
        tool_id: format!("workflow:{workflow}").into(),
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

/// The context node hooks fire with: one per run, built by its first hooked node.
fn hook_context<'r>(run: &'r RunShared, manager: &Arc<ToolManager>) -> &'r CallContext {
    run.hook_ctx.get_or_init(|| {
        context(
            manager,
            &run.workflow_id,
            &run.caller,
            run.depth,
            &run.cancel,
        )
    })
}

/// A node event for point `ix` with `keys` (the last one of this point on this thread,
/// refilled: no key hashed anew, no string allocated when it fits), `inputs` moved in.
fn node_event(
    ix: usize,
    keys: &[&str],
    run: &RunShared,
    node_id: &str,
    node_type: &str,
    inputs: Map<String, Value>,
) -> Value {
    let mut m = event::event_map(ix, keys);
    let mut inputs = Some(inputs);
    for (i, slot) in m.values_mut().enumerate() {
        match i {
            0 => event::set_str(slot, &run.workflow_id),
            1 => event::set_str(slot, node_id),
            2 => event::set_str(slot, node_type),
            3 => *slot = inputs.take().map(Value::Object).unwrap_or_default(),
            _ => *slot = Value::Null,
        }
    }
    Value::Object(m)
}

/// The node's run with `node:before-execute` / `node:after-execute` around it. The inputs
/// and outputs move into the events and back out (a copy of the inputs is kept only for
/// `node:after-execute`). An `inline` node (one the runner polls where it schedules it)
/// whose only hook point is `node:before-execute`, with handlers that all run in place,
/// has it fired here and now and then runs exactly as it would without hooks: no future
/// wraps it.
pub(crate) fn hooked_node(
    exec: Arc<dyn NodeExecutor>,
    ctx: NodeContext,
    inputs: Map<String, Value>,
    config: Map<String, Value>,
    node_type: Arc<str>,
    inline: bool,
) -> NodeFuture {
    let inputs = if inline {
        match before_in_place(&ctx, inputs, &node_type) {
            InPlace::Ran(Ok(inputs)) => return exec.execute(ctx, inputs, config),
            InPlace::Ran(Err(e)) => return Box::pin(std::future::ready(Err(e))),
            InPlace::Declined(inputs) => inputs,
        }
    } else {
        inputs
    };
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
        let cctx = hook_context(&run, &manager);
        let mut inputs = inputs;
        if let Some(handlers) = before.then(|| hooks.handlers(NODE_BEFORE_IX)).flatten() {
            inputs = fire_before(
                hooks,
                handlers,
                &run,
                &ctx.node_id,
                &node_type,
                inputs,
                cctx,
            )
            .await?;
        }
        let ev_after = after.then(|| {
            node_event(
                NODE_AFTER_IX,
                &AFTER_KEYS,
                &run,
                &ctx.node_id,
                &node_type,
                inputs.clone(),
            )
        });
        let out = exec.execute(ctx, inputs, config).await?;
        let Some(mut ev) = ev_after else {
            return Ok(out);
        };
        if let Some(slot) = ev.as_object_mut().and_then(|m| m.values_mut().nth(4)) {
            *slot = Value::Object(out);
        }
        // An after point never fails the node: a failing handler was skipped.
        let _ = hooks.fire_at(NODE_AFTER_IX, &mut ev, cctx).await;
        Ok(match take_back(NODE_AFTER_IX, ev, 4) {
            Value::Object(m) => m,
            _ => Map::new(),
        })
    })
}

/// What [`before_in_place`] did.
enum InPlace {
    /// It fired `node:before-execute`: the inputs to run with, or why the node fails.
    Ran(Result<Map<String, Value>, NodeError>),
    /// The node's hooks need the general path: the inputs, untouched.
    Declined(Map<String, Value>),
}

/// Fires `node:before-execute` over `handlers` with the node's event; the inputs to run with
/// (a handler's replacement, else the node's own), or the veto that stops the node.
async fn fire_before(
    hooks: &Hooks,
    handlers: Handlers,
    run: &RunShared,
    node_id: &str,
    node_type: &str,
    inputs: Map<String, Value>,
    cctx: &CallContext,
) -> Result<Map<String, Value>, NodeError> {
    let mut ev = node_event(
        NODE_BEFORE_IX,
        &BEFORE_KEYS,
        run,
        node_id,
        node_type,
        inputs,
    );
    let fired = hooks
        .fire_over(NODE_BEFORE_IX, handlers, &mut ev, cctx)
        .await;
    // A replacement is an object (the registry refuses others) in the same place.
    let inputs = match take_back(NODE_BEFORE_IX, ev, 3) {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    fired
        .map(|_replaced| inputs)
        .map_err(|e| NodeError::Tool(Box::new(e)))
}

/// Fires `node:before-execute` on this thread when it is the node's only active point and
/// all its handlers run in place: over that one snapshot, firing finishes in one poll.
fn before_in_place(ctx: &NodeContext, inputs: Map<String, Value>, node_type: &str) -> InPlace {
    let run = &ctx.run;
    let Some(manager) = run.tools.as_ref() else {
        return InPlace::Declined(inputs);
    };
    let Some(hooks) = Hooks::of(manager) else {
        return InPlace::Declined(inputs);
    };
    if hooks.active_at(NODE_AFTER_IX) || !hooks.active_at(NODE_BEFORE_IX) {
        return InPlace::Declined(inputs);
    }
    let Some(handlers) = hooks.handlers_in_place(NODE_BEFORE_IX) else {
        return InPlace::Declined(inputs);
    };
    let cctx = hook_context(run, manager);
    let fire = fire_before(hooks, handlers, run, &ctx.node_id, node_type, inputs, cctx);
    let fut = std::pin::pin!(fire);
    match fut.poll(&mut std::task::Context::from_waker(std::task::Waker::noop())) {
        std::task::Poll::Ready(r) => InPlace::Ran(r),
        // Only a handler whose `in_place` says yes while its `call_in_place` declines gets
        // here.
        std::task::Poll::Pending => InPlace::Ran(Err(NodeError::Failed(format!(
            "a node:before-execute handler for node '{}' said it runs in place (HookHandler::in_place) but did not finish when called; its in_place must return false whenever its call_in_place returns None",
            ctx.node_id
        )))),
    }
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
