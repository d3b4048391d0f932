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
use crate::hooks::points::{
    NodeAfter, NodeBefore, WorkflowAfter, WorkflowBefore, NODE_AFTER_IX, NODE_BEFORE_IX,
    WORKFLOW_AFTER_IX, WORKFLOW_BEFORE_IX,
};
use crate::hooks::{take_map, Handlers, Hooks};
use crate::tools::{CallContext, ToolError, ToolManager};

/// The registry a run fires with, when it has one, a manager for its handlers' context and
/// handlers for one of `points` (indexes of [`crate::hooks::POINTS`]).
pub(crate) fn hooked<'o>(opts: &'o RunOptions, points: &[usize]) -> Option<&'o Arc<Hooks>> {
    opts.tools.as_ref()?;
    let h = opts.hooks.as_ref()?;
    points.iter().any(|&p| h.active_at(p)).then_some(h)
}

/// The context workflow and node points fire with: the run's, with `workflow:<id>` as the
/// subject.
fn context(
    manager: &Arc<ToolManager>,
    workflow: &str,
    caller: &crate::tools::Caller,
    depth: u32,
    cancel: &tokio_util::sync::CancellationToken,
) -> CallContext {
    CallContext::within(
        format!("workflow:{workflow}"),
        caller.clone(),
        manager.clone(),
        depth,
        cancel.clone(),
    )
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
    let Some(manager) = opts.tools.clone() else {
        return plan.run_unhooked(args, opts).await;
    };
    let id: &str = &plan.workflow_id;
    let ctx = context(&manager, id, &opts.caller, opts.depth, &opts.cancel);
    let caller = opts.caller.clone();
    if hooks.active_at(WORKFLOW_BEFORE_IX) {
        // The inputs move into the event and back out (a replacement is an object: the
        // registry refuses others).
        let mut ev = WorkflowBefore {
            workflow: id,
            inputs: Value::Object(args),
            caller: &caller,
        };
        let fired = ev.fire(hooks, &ctx).await;
        args = take_map(&mut ev.inputs);
        fired.map_err(|e| vetoed(id, e))?;
    }
    // The after event needs the inputs the run got: keep a copy only then.
    let inputs = hooks.active_at(WORKFLOW_AFTER_IX).then(|| args.clone());
    let mut report = plan.run_unhooked(args, opts).await?;
    if let Some(inputs) = inputs {
        let status = serde_json::to_value(report.status).unwrap_or(Value::Null);
        let mut ev = WorkflowAfter {
            workflow: id,
            inputs: Value::Object(inputs),
            caller: &caller,
            outputs: Value::Object(std::mem::take(&mut report.outputs)),
            status,
        };
        // An after point never fails the run: a failing handler was skipped.
        let _ = ev.fire(hooks, &ctx).await;
        report.outputs = take_map(&mut ev.outputs);
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
        let (Some(manager), Some(hooks)) = (run.tools.as_ref(), run.hooks.as_deref()) else {
            return exec.execute(ctx, inputs, config).await;
        };
        let (before, after) = (
            hooks.active_at(NODE_BEFORE_IX),
            hooks.active_at(NODE_AFTER_IX),
        );
        if !before && !after {
            return exec.execute(ctx, inputs, config).await;
        }
        let cctx = hook_context(&run, manager);
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
        // What the after event needs once the node has its context: kept only then.
        let kept = after.then(|| (inputs.clone(), ctx.node_id.clone()));
        let out = exec.execute(ctx, inputs, config).await?;
        let Some((inputs, node_id)) = kept else {
            return Ok(out);
        };
        let mut ev = NodeAfter {
            workflow: &run.workflow_id,
            node: &node_id,
            node_type: &node_type,
            inputs: Value::Object(inputs),
            outputs: Value::Object(out),
        };
        // An after point never fails the node: a failing handler was skipped.
        let _ = ev.fire(hooks, cctx).await;
        Ok(take_map(&mut ev.outputs))
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
    let mut ev = NodeBefore {
        workflow: &run.workflow_id,
        node: node_id,
        node_type,
        inputs: Value::Object(inputs),
    };
    let fired = ev.fire_over(hooks, handlers, cctx).await;
    // A replacement is an object (the registry refuses others).
    let inputs = take_map(&mut ev.inputs);
    fired
        .map(|_replaced| inputs)
        .map_err(|e| NodeError::Tool(Box::new(e)))
}

/// Fires `node:before-execute` on this thread when it is the node's only active point and
/// all its handlers run in place: over that one snapshot, firing finishes in one poll.
fn before_in_place(ctx: &NodeContext, inputs: Map<String, Value>, node_type: &str) -> InPlace {
    let run = &ctx.run;
    let (Some(manager), Some(hooks)) = (run.tools.as_ref(), run.hooks.as_deref()) else {
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
