//! The per-call event sink: what a caller that watches a call (a served job, an MCP call
//! with a progress token) is told while the call runs.
//!
//! An [`Observer`] travels with a call: [`Invocation::observer`](super::Invocation) →
//! [`CallContext::observer`](super::CallContext) → nested calls ([`CallContext::call`](super::CallContext::call),
//! `api.tools.call`, a workflow's tool-calling nodes) and the workflow runner, which reports
//! each node's state to it. Absent (the usual case) it costs one `Option` check per report
//! site. Implementations must be quick and must not block: they run on the caller's task,
//! between nodes of a run.

use std::sync::Arc;

use serde_json::Value;
use std::time::Duration;

/// The state of a workflow node, as reported to an [`CallObserver`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeState {
    /// Not started yet (every node is announced so when its run starts).
    Pending,
    /// Started.
    Running,
    /// Produced its outputs.
    Succeeded,
    /// Failed (error, time-out, panic, cancellation).
    Failed,
    /// Will not run (a parent failed, or the run stopped).
    Skipped,
}

impl NodeState {
    /// The lower-case name (`pending`, `running`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            NodeState::Pending => "pending",
            NodeState::Running => "running",
            NodeState::Succeeded => "succeeded",
            NodeState::Failed => "failed",
            NodeState::Skipped => "skipped",
        }
    }

    /// Whether the node is done (succeeded, failed or skipped).
    pub fn is_final(self) -> bool {
        matches!(
            self,
            NodeState::Succeeded | NodeState::Failed | NodeState::Skipped
        )
    }
}

/// One node's change of state in a workflow run.
#[derive(Debug, Clone, Copy)]
pub struct NodeEvent<'a> {
    /// Workflow id.
    pub workflow: &'a str,
    /// Node id.
    pub node: &'a str,
    /// Node type.
    pub node_type: &'a str,
    /// The new state.
    pub state: NodeState,
    /// How long the node ran (final states of nodes that ran), else zero.
    pub elapsed: Duration,
}

/// The level of a message a tool logged while a call ran (`api.log.*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogLevel {
    /// `api.log.debug`.
    Debug,
    /// `api.log.info`.
    Info,
    /// `api.log.warn`.
    Warning,
    /// `api.log.error`.
    Error,
}

impl LogLevel {
    /// The lower-case name MCP and the jobs stream use (`debug`, `info`, `warning`, `error`).
    pub fn as_str(self) -> &'static str {
        match self {
            LogLevel::Debug => "debug",
            LogLevel::Info => "info",
            LogLevel::Warning => "warning",
            LogLevel::Error => "error",
        }
    }
}

/// Receives the events of a call as they happen. Every method has an empty default, so an
/// implementation picks what it needs.
pub trait CallObserver: Send + Sync {
    /// A top-level call of a block ended (`ok` = it returned a value).
    fn call_ended(&self, _tool: &str, _ok: bool, _elapsed: Duration) {}

    /// A workflow node changed state. A run first announces every node `Pending` (in file
    /// order), then reports `Running` and one final state per node that starts, and a final
    /// state (`Skipped`, `Failed`) for every node that never finished.
    fn node(&self, _event: NodeEvent<'_>) {}

    /// A tool reported its own progress (`api.tools.progress(done, total, message)` in a
    /// script): `done` units of `total` (unknown when `None`).
    fn progress(&self, _done: f64, _total: Option<f64>, _message: Option<&str>) {}

    /// A tool logged a message while the call ran (`api.log.*`); `source` is the plugin.
    fn log(&self, _level: LogLevel, _source: &str, _message: &str) {}

    /// A request to the client that made the call (`sampling/createMessage` for
    /// `api.llm.chat`, `elicitation/create` for `api.ask`): its answer, or why there is
    /// none. `None`: this observer has no client to ask (the lean library's callers, REST,
    /// jobs); the script API then fails with a clear error. The server's MCP observer
    /// answers it.
    fn client_request(&self, _method: &str, _params: Value) -> Option<ClientFuture> {
        None
    }
}

/// The answer of [`CallObserver::client_request`]: the client's result as JSON, or a text
/// saying why there is none (the client lacks the capability, refused, went away).
pub type ClientFuture =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<Value, String>> + Send>>;

/// Resources a script said changed (`api.resources.notify(uri)`): the MCP server
/// subscribes and tells the sessions subscribed to each uri. Nothing listens in the lean
/// library (the uri is dropped).
pub fn resource_updates() -> &'static tokio::sync::broadcast::Sender<String> {
    static TX: std::sync::OnceLock<tokio::sync::broadcast::Sender<String>> =
        std::sync::OnceLock::new();
    TX.get_or_init(|| tokio::sync::broadcast::channel(256).0)
}

impl std::fmt::Debug for dyn CallObserver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CallObserver")
    }
}

/// The observer a call carries, if any.
pub type Observer = Option<Arc<dyn CallObserver>>;

/// The prefix of the error a request to the client fails with when no client can answer
/// (`api.ask` / `api.llm.chat`, a hook's `confirm` verdict, `llm:Chat` sampling).
pub const UNSUPPORTED: &str = "client_unsupported";
