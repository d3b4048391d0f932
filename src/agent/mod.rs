//! The agent runtime (seeds 002 and 003): profiles, generated manuals, the `llm:Chat` node
//! and its backends, the deliberation loop, and the event bus.
//!
//! ```text
//! AgentProfile ──► Inventory (a ToolManager holding exactly the profile's tools)
//!                        │ manual (tam | action | openai | anthropic), teaching its call_format
//!                        ▼
//! turn: context ─► deliberation workflow (llm:Chat) ─► text ─► protocol (StreamReader)
//!         ▲                                                     │ calls, as blocks close
//!         └── Observations ◄── inventory check, budget, repeat guard ◄── dispatch
//! ```
//! A run stops on a turn without calls, the turn limit, the tool-call budget or the repeat
//! guard ([`StopReason`]). Events (`agent:response`, `agent:tool-started`,
//! `agent:tool-finished`, `agent:turn-finished`) go to an [`EventBus`].

mod call_format;
pub mod constrain;
mod events;
pub mod llm;
mod manual;
mod profile;
mod runtime;
mod state;
mod tools;

pub use call_format::CallFormat;
pub use events::{
    Event, EventBus, Subscription, RESPONSE, TOOL_FINISHED, TOOL_STARTED, TURN_FINISHED,
};
pub use manual::{
    action_example, example, how_to_call, provider_tool_json, render as render_manual,
    render_teaching, tam_example, tool_json, ManualStyle, ProviderShape,
};
pub use profile::{build_inventory, list_ids, reference_problems, AgentProfile, Inventory};
pub(crate) use runtime::EngineParts;
pub use runtime::{
    hook_seam, AgentRun, AgentRuntime, AgentRuntimeBuilder, CallRecord, Limits, StopReason, Turn,
};
pub use state::PrivateState;
// The world state lives in `store` (below `script`, which reaches it for `api.world`); these
// keep the agent's paths.
pub use crate::store::{
    get_path, set_path, MemoryWorldState, StateError, StoreWorldState, WorldState, SERVED_WORLD,
};
pub use tools::{agent_tool_definition, AgentTools, AGENT_TOOLS};

use crate::problem::Problem;

/// Why an agent could not be set up or a turn could not finish.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AgentError {
    /// No profile file for this id.
    #[error("no agent '{target}': {hint}")]
    NotFound {
        /// The id or path asked for.
        target: String,
        /// Where to look.
        hint: String,
    },
    /// The profile (or its deliberation workflow) has problems; each names its file and line.
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
    Load(Vec<Problem>),
    /// The deliberation workflow failed (the model could not be reached, a node failed …).
    #[error("agent '{agent}', turn {turn}: deliberation workflow '{workflow}' failed: {message}")]
    Deliberation {
        /// The agent.
        agent: String,
        /// The turn (1-based within the run).
        turn: u32,
        /// The workflow.
        workflow: String,
        /// What failed.
        message: String,
    },
    /// A run setting is unusable (e.g. the scripted replies file).
    #[error("{0}")]
    Config(String),
}

/// Registers the agent module's node types (`llm:Chat`) in an engine's node registry.
pub fn register_nodes(
    registry: &crate::workflow::NodeRegistry,
    settings: &crate::config::Settings,
) {
    llm::register_nodes(registry, settings);
}
