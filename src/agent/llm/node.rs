//! The `llm:Chat` workflow node.
//!
//! Inputs: `messages` (ARRAY of `{"role", "content"}`), or `system` and `prompt` (STRING);
//! `tools` (ARRAY, OpenAI tool definitions, optional). Config: any [`LlmSettings`] field.
//! Output: `text`, the model's whole reply.

use std::sync::Arc;

use serde_json::{json, Map, Value};

use super::{backend_for, http_backend, ChatBackend, ChatRequest, ChunkSink, LlmSettings};
use crate::config::Settings;
use crate::workflow::{
    DataFlowType, NodeContext, NodeDefinition, NodeError, NodeExecutor, NodeFuture, NodeRegistry,
    SlotDefinition,
};

/// The node type, `llm:Chat`.
pub const CHAT_NODE: &str = "llm:Chat";

/// What a run hands its `llm:Chat` nodes through
/// [`RunOptions::host_data`](crate::workflow::RunOptions::host_data).
#[derive(Clone, Default)]
pub struct LlmRunContext {
    /// The agent profile's settings (below the node's config).
    pub profile: LlmSettings,
    /// The run's overrides (above everything: `--llm`, `--model` …).
    pub overrides: LlmSettings,
    /// A backend that replaces the HTTP one (`scripted:FILE`, a host's own).
    pub backend: Option<Arc<dyn ChatBackend>>,
    /// Where streamed text goes as it arrives.
    pub sink: Option<ChunkSink>,
    /// What the model may write this turn (the agent's `constrain`).
    pub constraint: Option<super::Constraint>,
    /// Stop sequences for this turn.
    pub stop: Vec<String>,
}

struct ChatNode {
    settings: Result<LlmSettings, super::LlmSettingsError>,
    /// The built-in HTTP backend, made once (or why this build has none).
    http: Result<Arc<dyn ChatBackend>, super::LlmError>,
}

fn str_slot(desc: &str) -> SlotDefinition {
    SlotDefinition::new(DataFlowType::String).describe(desc)
}

/// Registers `llm:Chat` with the `[llm]` settings of `tavern.toml` as its base layer.
pub fn register_nodes(registry: &NodeRegistry, settings: &Settings) {
    let def = NodeDefinition::new(
        CHAT_NODE,
        "Asks an OpenAI-compatible chat model (or a scripted one) and outputs its reply.",
    )
    .category("LLM")
    .input(
        "messages",
        SlotDefinition::new(DataFlowType::Array)
            .describe("The conversation: objects with `role` and `content`."),
    )
    .input(
        "system",
        str_slot("A system message (used when `messages` is not given)."),
    )
    .input(
        "prompt",
        str_slot("A user message (used when `messages` is not given)."),
    )
    .input(
        "tools",
        SlotDefinition::new(DataFlowType::Array)
            .describe("OpenAI tool definitions for native function calling."),
    )
    .output("text", str_slot("The model's reply."));
    let exec = ChatNode {
        settings: LlmSettings::from_settings(settings),
        http: http_backend(),
    };
    if let Err(e) = registry.register(def, Arc::new(exec)) {
        tracing::error!("cannot register {CHAT_NODE}: {e}");
    }
}

fn messages_of(inputs: &Map<String, Value>) -> Result<Vec<Value>, NodeError> {
    if let Some(m) = inputs.get("messages").filter(|v| !v.is_null()) {
        let Value::Array(items) = m else {
            return Err(NodeError::input(
                "messages",
                "expected an array of {role, content}",
            ));
        };
        for (i, it) in items.iter().enumerate() {
            if it.get("role").and_then(Value::as_str).is_none() {
                return Err(NodeError::input(
                    "messages",
                    format!("message {} has no string `role`", i + 1),
                ));
            }
        }
        return Ok(items.clone());
    }
    let mut out = Vec::new();
    for (slot, role) in [("system", "system"), ("prompt", "user")] {
        match inputs.get(slot) {
            Some(Value::String(s)) if !s.is_empty() => {
                out.push(json!({"role": role, "content": s}))
            }
            None | Some(Value::Null) | Some(Value::String(_)) => {}
            Some(other) => {
                return Err(NodeError::input(
                    slot,
                    format!("expected text, got {other}"),
                ))
            }
        }
    }
    if out.is_empty() {
        return Err(NodeError::MissingInput("messages".into()));
    }
    Ok(out)
}

/// The `llm.base_url` that sends `llm:Chat` to the calling MCP client's model (sampling).
pub const MCP_CLIENT: &str = "mcp-client";

/// Chat messages as an MCP `sampling/createMessage` request: system messages become the
/// system prompt, the others text messages; the model name is a hint.
pub(crate) fn sampling_request(messages: &[Value], settings: &super::ResolvedLlm) -> Value {
    let mut system = Vec::new();
    let mut out = Vec::new();
    for m in messages {
        let text = match &m["content"] {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        match m["role"].as_str().unwrap_or("user") {
            "system" => system.push(text),
            role => out.push(json!({
                "role": if role == "assistant" { "assistant" } else { "user" },
                "content": {"type": "text", "text": text},
            })),
        }
    }
    let mut req = json!({
        "messages": out,
        "maxTokens": settings.max_tokens.unwrap_or(1024),
        "modelPreferences": {"hints": [{"name": settings.model}]},
    });
    if !system.is_empty() {
        req["systemPrompt"] = Value::String(system.join("\n\n"));
    }
    if let Some(t) = settings.temperature {
        req["temperature"] = json!(t);
    }
    req
}

/// The text of a `sampling/createMessage` result, read the one way scripts read it.
pub(crate) use crate::script::sampled_text;

impl NodeExecutor for ChatNode {
    fn execute(
        &self,
        ctx: NodeContext,
        inputs: Map<String, Value>,
        config: Map<String, Value>,
    ) -> NodeFuture {
        let base = self.settings.clone();
        let http = self.http.clone();
        Box::pin(async move {
            let base = base.map_err(|e| NodeError::Failed(e.to_string()))?;
            let node =
                LlmSettings::from_map(&config).map_err(|e| NodeError::Failed(e.to_string()))?;
            let run = ctx
                .host_data::<LlmRunContext>()
                .cloned()
                .unwrap_or_default();
            let merged = base
                .overlay(&run.profile)
                .overlay(&node)
                .overlay(&run.overrides);
            let resolved = merged
                .resolve()
                .map_err(|e| NodeError::Failed(e.to_string()))?;
            // `base_url = "mcp-client"`: the model of the MCP client that made the call
            // (sampling), through the run's observer.
            if run.backend.is_none() && merged.base_url.as_deref() == Some(MCP_CLIENT) {
                let req = sampling_request(&messages_of(&inputs)?, &resolved);
                let asked = ctx
                    .observer()
                    .as_ref()
                    .and_then(|o| o.client_request("sampling/createMessage", req));
                let answer = match asked {
                    Some(f) => tokio::select! {
                        r = f => r,
                        _ = ctx.cancel().cancelled() => return Err(NodeError::Cancelled),
                    },
                    None => Err(format!(
                        "{}: llm base_url \"{MCP_CLIENT}\" asks the model of the MCP client that made the call, and this run does not come from one (serve the workflow with `tavern serve` or `tavern mcp`)",
                        crate::script::UNSUPPORTED
                    )),
                };
                let r = answer.map_err(NodeError::Failed)?;
                let mut out = Map::new();
                out.insert("text".into(), Value::String(sampled_text(&r)));
                return Ok(out);
            }
            let backend: Arc<dyn ChatBackend> = match (&run.backend, &merged.base_url) {
                (Some(b), _) => b.clone(),
                (None, Some(u)) if u.starts_with("scripted:") || u.starts_with(super::LOCAL) => {
                    backend_for(u).map_err(|e| NodeError::Failed(e.to_string()))?
                }
                _ => http.map_err(|e| NodeError::Failed(e.to_string()))?,
            };
            let tools = match inputs.get("tools") {
                Some(Value::Array(t)) => t.clone(),
                _ => Vec::new(),
            };
            let req = ChatRequest {
                messages: messages_of(&inputs)?,
                tools,
                constraint: run.constraint.clone(),
                stop: run.stop.clone(),
            };
            let text = tokio::select! {
                r = backend.chat(&req, &resolved, run.sink.as_ref()) => r.map_err(|e| NodeError::Failed(e.to_string()))?,
                _ = ctx.cancel().cancelled() => return Err(NodeError::Cancelled),
            };
            let mut out = Map::new();
            out.insert("text".into(), Value::String(text));
            Ok(out)
        })
    }
}
