//! tavern: one protocol for language models, scripts and people to call tools.
//!
//! The crate is layered one way (see `ARCHITECTURE.md`):
//! [`protocol`] (reading and writing calls) → [`tools`] (registry, validation, dispatch) →
//! [`hooks`] (callbacks and overrides around calls) → [`script`] (sandboxed Lua and Rhai) → [`plugins`] and [`workflow`] → [`Engine`], the
//! facade the CLI and hosts use.
#![warn(missing_docs)]

pub mod agent;
pub mod config;
pub mod embed;
pub mod engine;
pub mod hooks;
pub mod plugins;
pub mod problem;
pub mod protocol;
pub mod report;
pub mod script;
pub mod server;
pub mod strict;
pub mod suggest;
pub mod tools;
pub mod workflow;

pub use embed::{CallOptions, CallReport, CancelToken, EmbedError, Ticket};
pub use engine::{Engine, EngineBuilder, EngineError};
pub use protocol::{parse, Call, Diagnostic, Format, Parsed, Severity};
pub use script::{Limits, ScriptError};
pub use tools::{
    CallContext, CallOutcome, Caller, CallerPolicy, ToolDefinition, ToolError, ToolFuture,
    ToolHandler,
};
