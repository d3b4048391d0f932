//! Agents over MCP: each agent profile of the home (`agents/<id>.json`) is also an MCP tool
//! `agent_<id>` (argument `message`, optional `max_turns`) that runs the agent's
//! deliberation loop — model turn, calls, Observations, next turn — until a turn makes no
//! call, and answers its last reply with a summary of the run.
//!
//! When the model settings resolve to `base_url = "mcp-client"` (`--llm mcp-client`,
//! `--set llm.base_url=mcp-client`, `tavern.toml` or the profile's `llm`), every model turn
//! is a `sampling/createMessage` request to the client that called the tool
//! ([`SamplingBackend`]); a client that did not declare `sampling` gets a
//! `client_unsupported` error before any turn runs.
//!
//! These tools live in the server only: the engine's registry (and so `tavern tools`, REST
//! `/api/tools` and the lean library) does not hold them. An engine tool whose wire name is
//! `agent_<id>` wins over the agent (the agent is then not listed).

use std::sync::Arc;

use rmcp::{Peer, RoleServer};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::Served;
use crate::agent::llm::{
    sampled_text, sampling_request, ChatBackend, ChatFuture, ChatRequest, ChunkSink, LlmError,
    LlmSettings, ResolvedLlm, MCP_CLIENT,
};
use crate::tools::ToolError;
use crate::Engine;

/// The prefix of an agent's tool name.
pub const PREFIX: &str = "agent_";

/// The agents served as tools, as `(wire name, agent id)`, in the order of their ids: every
/// profile whose `agent_<id>` is a valid wire name no engine tool has.
pub fn listed(engine: &Engine) -> Vec<(String, String)> {
    crate::agent::list_ids(engine.home())
        .into_iter()
        .filter_map(|id| {
            let name = format!("{PREFIX}{id}");
            let free = crate::tools::id::is_wire_name(&name) && engine.tools().get(&name).is_err();
            free.then_some((name, id))
        })
        .collect()
}

/// The agent a tool name calls, when it is one of [`listed`].
pub fn find(engine: &Engine, name: &str) -> Option<String> {
    let id = name.strip_prefix(PREFIX)?;
    if engine.tools().get(name).is_ok() || !crate::tools::id::is_wire_name(name) {
        return None;
    }
    crate::agent::list_ids(engine.home())
        .into_iter()
        .find(|i| i == id)
}

/// The MCP `tools/list` entry of agent `id` (tool `name`).
pub fn tool_json(engine: &Engine, name: &str, id: &str) -> Value {
    let profile = crate::agent::AgentProfile::load(engine.home(), id).ok();
    let title = profile
        .as_ref()
        .and_then(|p| p.name.clone())
        .unwrap_or_else(|| id.to_string());
    let about = profile
        .as_ref()
        .map(|p| p.description.trim().to_string())
        .filter(|d| !d.is_empty())
        .unwrap_or_else(|| format!("Agent '{id}'."));
    json!({
        "name": name,
        "title": format!("Agent {title}"),
        "description": format!(
            "{about}\n\nRuns agent '{id}' on your message: it calls its tools turn by turn until it answers; the result is its last reply."
        ),
        "inputSchema": {
            "type": "object",
            "properties": {
                "message": {"type": "string", "description": "What you say to the agent"},
                "max_turns": {"type": "integer", "minimum": 1,
                    "description": "Most model turns of this run (default: the profile's max_turns)"}
            },
            "required": ["message"]
        },
        "annotations": {"title": format!("Agent {title}"), "openWorldHint": true},
        "_meta": {"tavern/agent": id},
    })
}

/// A model backend that asks the MCP client behind `peer` (`sampling/createMessage`).
pub struct SamplingBackend {
    peer: Peer<RoleServer>,
}

impl ChatBackend for SamplingBackend {
    fn chat<'a>(
        &'a self,
        req: &'a ChatRequest,
        settings: &'a ResolvedLlm,
        _sink: Option<&'a ChunkSink>,
    ) -> ChatFuture<'a> {
        Box::pin(async move {
            let params = sampling_request(&req.messages, settings);
            let r = super::mcp::client_request(
                self.peer.clone(),
                "sampling/createMessage".into(),
                params,
            )
            .await
            .map_err(LlmError::Config)?;
            Ok(sampled_text(&r))
        })
    }
}

fn bad_args(name: &str, problem: String) -> ToolError {
    ToolError::InvalidParameters {
        tool: name.to_string(),
        problems: vec![problem],
    }
}

/// Runs agent `id` (tool `name`) on the arguments of a `tools/call` from the client behind
/// `peer`: `{"answer", "agent", "stopReason", "turns", "calls"}`.
pub async fn run(
    served: Arc<Served>,
    name: String,
    id: String,
    args: Value,
    peer: Peer<RoleServer>,
    cancel: CancellationToken,
) -> Result<Value, ToolError> {
    let message = match args.get("message") {
        Some(Value::String(m)) => m.clone(),
        None | Some(Value::Null) => {
            return Err(bad_args(
                &name,
                "`message` is required: the text you say to the agent".into(),
            ))
        }
        Some(other) => {
            return Err(bad_args(
                &name,
                format!("`message` must be a string, not {other}"),
            ))
        }
    };
    let max_turns = match args.get("max_turns") {
        None | Some(Value::Null) => None,
        Some(v) => match v.as_u64().filter(|n| *n >= 1) {
            Some(n) => Some(u32::try_from(n).unwrap_or(u32::MAX)),
            None => {
                return Err(bad_args(
                    &name,
                    format!("`max_turns` must be a whole number of at least 1, not {v}"),
                ))
            }
        },
    };
    if let Some(k) = args
        .as_object()
        .and_then(|o| o.keys().find(|k| *k != "message" && *k != "max_turns"))
    {
        return Err(bad_args(
            &name,
            format!("unknown parameter `{k}` (the parameters are `message` and `max_turns`)"),
        ));
    }
    let engine = served.engine();
    let failed = |e: &dyn std::fmt::Display| ToolError::failed(&name, e.to_string());
    // The engine's live world (with `--store`, the one every replica shares).
    let mut b = engine.agent(&id).map_err(|e| failed(&e))?;
    if let Some(n) = max_turns {
        b = b.max_turns(n);
    }
    if uses_client_model(&engine, &id)? {
        let declared = peer
            .peer_info()
            .is_some_and(|i| i.capabilities.sampling.is_some());
        if !declared {
            return Err(ToolError::Raised {
                tool: name.clone(),
                code: crate::script::UNSUPPORTED.into(),
                message: format!(
                    "{}: agent '{id}' thinks with the model of the MCP client that calls it (llm base_url \"{MCP_CLIENT}\"), and this client did not declare the sampling capability; call it from a client that supports sampling, or serve with another model (--llm openai:URL)",
                    crate::script::UNSUPPORTED
                ),
            });
        }
        b = b.backend(Arc::new(SamplingBackend { peer }));
    }
    let mut rt = b.build().map_err(|e| failed(&e))?;
    let run = tokio::select! {
        r = served.track(rt.run(Some(&message))) => r,
        _ = cancel.cancelled() => return Err(ToolError::Cancelled { tool: name }),
    };
    if let Some(e) = &run.error {
        return Err(failed(e));
    }
    let answer = run
        .turns
        .last()
        .map(|t| {
            if t.parsed.response_text.trim().is_empty() {
                t.output.clone()
            } else {
                t.parsed.response_text.clone()
            }
        })
        .unwrap_or_default();
    let calls: Vec<Value> = run
        .turns
        .iter()
        .flat_map(|t| &t.results)
        .map(|r| {
            json!({
                "tool": r.call.tool,
                "ok": r.outcome.result.is_ok(),
                "observation": r.outcome.observation(),
            })
        })
        .collect();
    Ok(json!({
        "answer": answer,
        "agent": id,
        "stopReason": run.stop_reason.as_str(),
        "turns": run.turns.len(),
        "calls": calls,
    }))
}

/// Whether agent `id`'s model settings (`tavern.toml`/`--set`/`--llm`, then its profile)
/// name the calling client's model.
pub fn uses_client_model(engine: &Engine, id: &str) -> Result<bool, ToolError> {
    let base = LlmSettings::from_settings(engine.settings())
        .map_err(|e| ToolError::failed(format!("{PREFIX}{id}"), e.to_string()))?;
    let profile = crate::agent::AgentProfile::load(engine.home(), id)
        .map_err(|e| ToolError::failed(format!("{PREFIX}{id}"), e.to_string()))?;
    Ok(base.overlay(&profile.llm).base_url.as_deref() == Some(MCP_CLIENT))
}
