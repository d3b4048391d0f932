//! tavern: one protocol for language models, scripts and people to call tools.
//!
//! This page is the API a host (a game, an editor, a server) embeds: build an [`Engine`]
//! with an [`EngineBuilder`] — its home directory, host tools given as closures, caller
//! policies, script limits — then hand it text a model wrote. The engine reads the calls
//! ([`parse`], [`Parsed`], [`Call`]), checks each against its [`ToolDefinition`] and runs
//! it; every call ends in a [`CallOutcome`] whose error, if any, is a [`ToolError`].
//!
//! Three ways in, one behaviour under any async runtime or none:
//! - [`Engine::call`] (async) and [`Engine::call_blocking`] (sync) run one text's calls and
//!   return a [`CallReport`];
//! - [`Engine::submit`], [`Engine::pump`] and [`Engine::take`] fit a frame loop: `pump`
//!   returns within the budget it is given, because script work never runs on its thread.
//!
//! ```
//! use serde_json::json;
//! use tavern::{CallOptions, Engine, ToolDefinition};
//!
//! let home = tempfile::tempdir().unwrap();
//! let engine = Engine::builder()
//!     .home(home.path())
//!     .host_tool(
//!         ToolDefinition::host("world:time", "The game clock.", json!({"type": "object"})),
//!         |_ctx, _args| Ok(json!({"tick": 42})),
//!     )
//!     .build()
//!     .unwrap();
//! let text = "<|[REQUEST_TOOL]|>\ncommand:「始」world:time「末」\n<|[END_TOOL]|>";
//! let report = engine.call_blocking(text, CallOptions::new()).unwrap();
//! assert_eq!(report.outcomes[0].result, Ok(json!({"tick": 42})));
//! ```
//!
//! The crate is layered one way (see `ARCHITECTURE.md`): protocol (reading and writing
//! calls) → tools (registry, validation, dispatch) → hooks → script (sandboxed Lua and
//! Rhai) → plugins and workflow → [`Engine`]. Those modules are private; the `tavern`
//! binary, the C ABI crate, tests and benches reach them through `tavern::internal`, which
//! is hidden from these docs and has no stability promise.
#![warn(missing_docs)]

mod agent;
mod config;
mod engine;
mod hooks;
mod plugins;
mod problem;
mod protocol;
mod request;
mod sandbox;
mod script;
#[cfg(feature = "server")]
mod server;
mod store;
mod strict;
mod suggest;
mod tools;
mod workflow;

pub use agent::llm::LlmSettings;
/// A GGUF model run in this process (the `llm-local` feature).
#[cfg(feature = "llm-local")]
pub use agent::llm::LocalBackend;
pub use agent::{
    AgentError, AgentRun, AgentRuntime, AgentRuntimeBuilder, CallFormat, Event, EventBus,
    ManualStyle, StopReason, Turn,
};
pub use config::SettingError;
pub use engine::{
    CallOptions, CallReport, CancelToken, EmbedError, Engine, EngineBuilder, EngineError, Input,
    Request, Ticket,
};
pub use hooks::{
    HookError, HookFuture, HookHandle, HookHandler, HookOptions, HookReturn, Hooks, Next,
    OverrideHandler,
};
pub use problem::Problem;
pub use protocol::{parse, Args, Call, Diagnostic, Format, OnError, Parsed, Severity, Span};
pub use sandbox::confine::ProcessLimits;
pub use script::{Limits, ScriptError};
pub use store::{
    KvStore, MemoryStore, MemoryWorldState, StateError, StoreError, StoreFuture, StoreWorldState,
    WorldState,
};
pub use tools::{
    CallContext, CallOutcome, Caller, CallerPolicy, Implementation, LogCallback, LogLevel,
    LogRecord, ToolDefinition, ToolError, ToolFuture, ToolHandler,
};

/// The engine's modules, for the `tavern` binary, the C ABI crate, tests and benches.
///
/// **Unstable**: not part of the host API, hidden from the docs, and free to change in any
/// release. A host uses the crate root.
#[doc(hidden)]
pub mod internal {
    /// Agent profiles, manuals, the `llm:Chat` node and the deliberation loop.
    pub mod agent {
        pub use crate::agent::*;
    }
    /// Settings (`tavern.toml`, `--set`, environment).
    pub mod config {
        pub use crate::config::*;
    }
    /// Hook points, handlers, overrides and the audit trail.
    pub mod hooks {
        pub use crate::hooks::*;
    }
    /// Plugin manifests, loading, permissions, process tools and their confinement; how
    /// messages name a path (from the home).
    pub mod plugins {
        pub use crate::plugins::*;
        pub use crate::problem::{inside_home, shown_path};
    }
    /// Reading and writing calls (TAM, VCP, `<ACTION>`, JSON).
    pub mod protocol {
        pub use crate::protocol::*;
    }
    /// The one run path (`run`) and the JSON `tavern call` prints (`outcome_json`).
    pub mod engine {
        pub use crate::engine::*;
    }
    /// Process confinement, process tools and code execution.
    pub mod sandbox {
        pub use crate::sandbox::*;
    }
    /// Sandboxed Lua and Rhai.
    pub mod script {
        pub use crate::script::*;
    }
    /// Shared key-value state (`api.store`, world state), in memory or in Redis.
    pub mod store {
        pub use crate::store::*;
    }
    /// MCP, REST and hot reload (the `server` feature).
    #[cfg(feature = "server")]
    pub mod server {
        pub use crate::server::*;
    }
    /// The tool registry, validation and dispatch.
    pub mod tools {
        pub use crate::tools::runtime::yield_to_host;
        pub use crate::tools::*;
    }
    /// Workflows: format, compilation, the scheduler and the nodes.
    pub mod workflow {
        pub use crate::workflow::*;
    }
}
