//! `core:Script`: inline Lua or Rhai through `script::run_snippet`, a fresh sandbox per run.
//! Script work is CPU work: it runs on tokio's blocking pool, never on the async workers, so
//! independent script branches run in parallel.

use std::sync::Arc;

use serde_json::{json, Map, Value};

use super::text;
use crate::script::{run_snippet, Lang, Limits};
use crate::workflow::error::{NodeError, WorkflowError};
use crate::workflow::registry::{
    NodeContext, NodeDefinition, NodeExecutor, NodeFuture, NodeRegistry,
};
use crate::workflow::types::{DataFlowType as T, SlotDefinition as S};

/// The node type.
pub const SCRIPT: &str = "core:Script";

pub(super) fn register(r: &NodeRegistry) -> Vec<Result<(), WorkflowError>> {
    vec![r.register(
        definition(),
        Arc::new(ScriptNode::new(Limits::engine_default())),
    )]
}

/// The definition of `core:Script`.
pub fn definition() -> NodeDefinition {
    NodeDefinition::new(
        SCRIPT,
        "Runs a Lua or Rhai snippet in a fresh sandbox. The `inputs` input is the global \
         `inputs`; the result is the chunk's `return` value (Lua) or last expression (Rhai); \
         `output` is what it printed.",
    )
    .category("Script")
    .input(
        "language",
        S::new(T::String)
            .default_value(json!("lua"))
            .options([json!("lua"), json!("rhai")])
            .describe("lua or rhai."),
    )
    .input(
        "code",
        S::new(T::String).required().describe("The snippet."),
    )
    .input(
        "inputs",
        S::new(T::Wildcard)
            .default_value(json!({}))
            .describe("The `inputs` global."),
    )
    .output(
        "result",
        S::new(T::Wildcard).describe("The snippet's value."),
    )
    .output("output", S::new(T::String).describe("What it printed."))
}

/// The `core:Script` executor, with the sandbox limits every run gets.
pub struct ScriptNode {
    limits: Limits,
}

impl ScriptNode {
    /// An executor whose runs get `limits`.
    pub fn new(limits: Limits) -> Self {
        ScriptNode { limits }
    }
}

impl NodeExecutor for ScriptNode {
    fn execute(
        &self,
        _ctx: NodeContext,
        inputs: Map<String, Value>,
        _config: Map<String, Value>,
    ) -> NodeFuture {
        let limits = self.limits;
        Box::pin(async move {
            let lang_name = super::text_or(&inputs, "language", "lua")?;
            let lang = Lang::from_name(lang_name).ok_or_else(|| {
                NodeError::input(
                    "language",
                    format!("unknown language '{lang_name}': use lua or rhai"),
                )
            })?;
            let code = text(&inputs, "code")?.to_string();
            let globals = inputs.get("inputs").cloned().unwrap_or_else(|| json!({}));
            let done =
                tokio::task::spawn_blocking(move || run_snippet(lang, &code, globals, &limits))
                    .await
                    .map_err(|e| NodeError::Panicked(e.to_string()))?;
            let out = done.map_err(|e| NodeError::Tool(Box::new(e.into_tool_error(SCRIPT))))?;
            let mut m = Map::with_capacity(2);
            m.insert("result".into(), out.value);
            m.insert("output".into(), Value::String(out.output));
            Ok(m)
        })
    }
}
