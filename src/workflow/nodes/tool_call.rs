//! Nodes that wait on the outside world: `core:ToolCall` (any registered tool, so workflows
//! compose tools) and `core:Delay`.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Map, Value};

use super::{number, out};
use crate::workflow::error::{NodeError, WorkflowError};
use crate::workflow::registry::{
    NodeContext, NodeDefinition, NodeExecutor, NodeFuture, NodeRegistry,
};
use crate::workflow::types::{DataFlowType as T, SlotDefinition as S};

pub(super) fn register(r: &NodeRegistry) -> Vec<Result<(), WorkflowError>> {
    vec![
        r.register(
            NodeDefinition::new(
                "core:ToolCall",
                "Calls a registered tool (`system:echo`, `workflow:<id>`, `Plugin:tool` …) with \
                 the `args` object; the arguments are validated like any other call.",
            )
            .category("Tools")
            .input("tool", S::new(T::String).required().describe("Tool id."))
            .input("args", S::new(T::Object).default_value(json!({})).describe("Arguments object."))
            .output("result", S::new(T::Wildcard).describe("What the tool returned.")),
            Arc::new(ToolCall),
        ),
        r.register(
            NodeDefinition::new(
                "core:Delay",
                "Waits `ms` milliseconds, then passes `value` on (stops early when the run is cancelled).",
            )
            .category("Flow")
            .input("ms", S::new(T::Integer).default_value(json!(0)).describe("Milliseconds to wait."))
            .input("value", S::new(T::Wildcard).describe("Passed through."))
            .output("value", S::new(T::Wildcard).describe("The value, later.")),
            Arc::new(Delay),
        ),
    ]
}

struct ToolCall;

impl NodeExecutor for ToolCall {
    fn execute(
        &self,
        ctx: NodeContext,
        inputs: Map<String, Value>,
        _config: Map<String, Value>,
    ) -> NodeFuture {
        Box::pin(async move {
            let id = match inputs.get("tool") {
                Some(Value::String(s)) if !s.is_empty() => s.clone(),
                Some(v) => {
                    return Err(NodeError::input(
                        "tool",
                        format!("expected a tool id, got {v}"),
                    ))
                }
                None => return Err(NodeError::MissingInput("tool".into())),
            };
            let args = match inputs.get("args") {
                None | Some(Value::Null) => Value::Object(Map::new()),
                Some(v @ Value::Object(_)) => v.clone(),
                Some(v) => {
                    return Err(NodeError::input(
                        "args",
                        format!("expected an object, got {v}"),
                    ))
                }
            };
            let r = ctx
                .call_tool(&id, args)
                .await
                .map_err(|e| NodeError::Tool(Box::new(e)))?;
            Ok(out("result", r))
        })
    }
}

struct Delay;

impl NodeExecutor for Delay {
    fn execute(
        &self,
        ctx: NodeContext,
        inputs: Map<String, Value>,
        _config: Map<String, Value>,
    ) -> NodeFuture {
        Box::pin(async move {
            let ms = number(&inputs, "ms")?.max(0.0) as u64;
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(ms)) => {}
                _ = ctx.cancel().cancelled() => return Err(NodeError::Cancelled),
            }
            let mut m = Map::new();
            if let Some(v) = inputs.get("value") {
                m = out("value", v.clone());
            }
            Ok(m)
        })
    }
}
