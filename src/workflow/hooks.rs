//! The workflow and node hook points: `workflow:before-execute` / `workflow:after-execute`
//! around every run that has a tool manager (CLI, tool call, agent, host), and
//! `node:before-execute` / `node:after-execute` around every executor node.

use std::sync::Arc;

use serde_json::{Map, Value};

use super::compile::Plan;
use super::error::{NodeError, WorkflowError};
use super::registry::{NodeContext, NodeExecutor, NodeFuture};
use super::run::{RunOptions, RunReport};
use crate::hooks::points::{NODE_AFTER, NODE_BEFORE, WORKFLOW_AFTER, WORKFLOW_BEFORE};
use crate::hooks::Hooks;
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

/// The node's run with `node:before-execute` / `node:after-execute` around it.
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
        let cctx = context(
            &manager,
            &run.workflow_id,
            &run.caller,
            run.depth,
            &run.cancel,
        );
        let base = |inputs: &Map<String, Value>| {
            let mut ev = Map::new();
            ev.insert(
                "workflow".into(),
                Value::String(run.workflow_id.to_string()),
            );
            ev.insert("node".into(), Value::String(ctx.node_id.to_string()));
            ev.insert("type".into(), Value::String(node_type.to_string()));
            ev.insert("inputs".into(), Value::Object(inputs.clone()));
            ev
        };
        let mut inputs = inputs;
        if hooks.active(NODE_BEFORE) {
            let mut ev = hooks
                .fire(NODE_BEFORE, base(&inputs), &cctx)
                .await
                .map_err(|e| NodeError::Tool(Box::new(e)))?;
            if let Some(Value::Object(m)) = ev.remove("inputs") {
                inputs = m;
            }
        }
        let ev_base = hooks.active(NODE_AFTER).then(|| base(&inputs));
        let mut out = exec.execute(ctx, inputs, config).await?;
        if let Some(mut ev) = ev_base {
            ev.insert("outputs".into(), Value::Object(out.clone()));
            if let Ok(mut ev) = hooks.fire(NODE_AFTER, ev, &cctx).await {
                if let Some(Value::Object(m)) = ev.remove("outputs") {
                    out = m;
                }
            }
        }
        Ok(out)
    })
}
