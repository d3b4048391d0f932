//! The agent tools of seed 002 (`ReadPrivateStateTool`, `UpdatePrivateStateTool`,
//! `ReadWorldStateTool`, `PublishEventTool`) and the per-agent inventory: a small
//! [`ToolManager`] holding exactly the profile's tools, so the manual, id resolution and
//! "did you mean" all see the inventory and nothing else.

use std::sync::Arc;

use serde_json::{json, Value};

use super::events::{Event, EventBus};
use super::state::PrivateState;
use crate::store::WorldState;
use crate::tools::{CallContext, ToolDefinition, ToolError, ToolFuture, ToolHandler, ToolManager};

/// `ReadPrivateStateTool`.
pub const READ_PRIVATE: &str = "ReadPrivateStateTool";
/// `UpdatePrivateStateTool`.
pub const UPDATE_PRIVATE: &str = "UpdatePrivateStateTool";
/// `ReadWorldStateTool`.
pub const READ_WORLD: &str = "ReadWorldStateTool";
/// `PublishEventTool`.
pub const PUBLISH_EVENT: &str = "PublishEventTool";

/// The ids of the agent tools every profile may list.
pub const AGENT_TOOLS: [&str; 4] = [READ_PRIVATE, UPDATE_PRIVATE, READ_WORLD, PUBLISH_EVENT];

/// The definition of agent tool `id` (parameters as seed 002 §4.2 describes them).
pub fn agent_tool_definition(id: &str) -> Option<ToolDefinition> {
    let (desc, params) = match id {
        READ_PRIVATE => (
            "Reads a value from your private state.",
            json!({"type": "object", "properties": {
                "key": {"type": "string", "description": "The dot-separated key in your private state (e.g. \"mood\"); leave out to read the whole state."},
                "default_value": {"description": "Value to return if the key is not found."}
            }}),
        ),
        UPDATE_PRIVATE => (
            "Updates a value in your private state.",
            json!({"type": "object", "properties": {
                "key": {"type": "string", "description": "The dot-separated key in your private state to update."},
                "value": {"description": "The new value for the key."}
            }, "required": ["key", "value"]}),
        ),
        READ_WORLD => (
            "Reads a value from the shared world state.",
            json!({"type": "object", "properties": {
                "path": {"type": "string", "description": "The dot-separated path to the value in the world state (e.g. \"environment.time.current_hour\")."},
                "default_value": {"description": "Value to return if path is not found."}
            }, "required": ["path"]}),
        ),
        PUBLISH_EVENT => (
            "Publishes an event to the event bus.",
            json!({"type": "object", "properties": {
                "event_type": {"type": "string", "description": "The type of the event (e.g. \"agent.action.completed\")."},
                "payload": {"type": "object", "description": "A JSON object with the event data (in <ACTION>, a JSON object string in CDATA or child tags)."}
            }, "required": ["event_type"]}),
        ),
        _ => return None,
    };
    Some(ToolDefinition::host(id, desc, params))
}

/// What the agent tools of one agent work on.
#[derive(Clone)]
pub struct AgentTools {
    /// The agent's id (events carry it).
    pub agent: String,
    /// Its private state.
    pub private: Arc<PrivateState>,
    /// The world.
    pub world: Arc<dyn WorldState>,
    /// Where `PublishEventTool` publishes.
    pub bus: EventBus,
}

struct AgentTool {
    id: &'static str,
    env: AgentTools,
}

fn str_arg<'a>(args: &'a Value, key: &str) -> Option<&'a str> {
    args.get(key).and_then(Value::as_str)
}

impl AgentTool {
    fn call(&self, args: Value) -> Result<Value, ToolError> {
        let env = &self.env;
        match self.id {
            READ_PRIVATE => {
                let key = str_arg(&args, "key").unwrap_or("");
                match env.private.get(key) {
                    Some(v) => Ok(v),
                    None => match args.get("default_value") {
                        Some(d) => Ok(d.clone()),
                        None => Err(ToolError::failed(
                            READ_PRIVATE,
                            format!("your private state has no key '{key}'; pass <default_value> to get a value anyway"),
                        )),
                    },
                }
            }
            UPDATE_PRIVATE => {
                let key = str_arg(&args, "key").unwrap_or("");
                let value = args.get("value").cloned().unwrap_or(Value::Null);
                env.private
                    .set(key, value.clone())
                    .map_err(|m| ToolError::failed(UPDATE_PRIVATE, m.to_string()))?;
                Ok(json!({"key": key, "value": value}))
            }
            READ_WORLD => {
                let path = str_arg(&args, "path").unwrap_or("");
                match env.world.get(path) {
                    Some(v) => Ok(v),
                    None => match args.get("default_value") {
                        Some(d) => Ok(d.clone()),
                        None => Err(ToolError::failed(
                            READ_WORLD,
                            format!("the world state has nothing at '{path}'; pass <default_value> to get a value anyway"),
                        )),
                    },
                }
            }
            PUBLISH_EVENT => {
                let name = str_arg(&args, "event_type")
                    .unwrap_or("")
                    .trim()
                    .to_string();
                if name.is_empty() {
                    return Err(ToolError::InvalidParameters {
                        tool: PUBLISH_EVENT.into(),
                        problems: vec!["parameter 'event_type' is empty".into()],
                    });
                }
                let payload = args.get("payload").cloned().unwrap_or(json!({}));
                env.bus.publish(&Event {
                    name: name.clone(),
                    agent: env.agent.clone(),
                    payload,
                });
                Ok(json!(format!("event {name} published")))
            }
            other => Err(ToolError::failed(other, "not an agent tool")),
        }
    }
}

impl ToolHandler for AgentTool {
    fn invoke(&self, _ctx: CallContext, args: Value) -> ToolFuture {
        Box::pin(std::future::ready(self.call(args)))
    }
}

/// The handler of agent tool `id` over `env` (`None` for other ids).
pub fn agent_tool_handler(id: &str, env: &AgentTools) -> Option<Arc<dyn ToolHandler>> {
    let id = AGENT_TOOLS.into_iter().find(|t| *t == id)?;
    Some(Arc::new(AgentTool {
        id,
        env: env.clone(),
    }))
}

/// Runs an engine tool from the inventory manager: the call was validated against the same
/// definition already, so it goes on at the same depth with the same cancellation.
pub(crate) struct Forward {
    pub(crate) engine: Arc<ToolManager>,
    pub(crate) id: String,
}

impl ToolHandler for Forward {
    fn invoke(&self, ctx: CallContext, args: Value) -> ToolFuture {
        let engine = self.engine.clone();
        let id = self.id.clone();
        Box::pin(async move {
            engine
                .invoke(
                    &id,
                    args,
                    crate::tools::Invocation::new(ctx.caller)
                        .depth(ctx.depth)
                        .cancel(ctx.cancel),
                )
                .await
        })
    }
}
