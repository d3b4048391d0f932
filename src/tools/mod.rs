//! The ToolManager: registry, id resolution, coercion, validation and dispatch.
//!
//! Every call, whatever format it came in, passes through [`ToolManager::invoke`]: the id is
//! resolved (`plugin:tool`, `plugin.tool`, wire names), string values are converted to the
//! types the schema asks for, the arguments are validated against the compiled schema, and
//! only then does the [`ToolHandler`] see them.
//!
//! Rules this module settles (see also [`id`] and the `schema` notes):
//! - **Ids** are `namespace:name` or a bare `name` (host tools like seed 002's
//!   `GetPlayerInfo`); parts are ASCII letters, digits, `_`, `-`, `.`. Duplicates, and an id
//!   equal to another tool's wire name, are refused.
//! - **Resolution** tries, in order: the exact id, a wire name, `namespace.name` (each `.`
//!   tried left to right as the `:`). An unknown id gets a `did you mean` suggestion.
//! - **Wire names** (`FileOperator_WriteFile`) are built once at registration and stay
//!   unique (`_2`, `_3`, … on a clash); [`Tool::wire_name`] exposes them.
//! - **Arguments** pass key matching, string conversion, defaults and the compiled JSON
//!   Schema before any handler runs ([`Tool::prepare`]). Keys match loosely
//!   ([`KeyMatching::Loose`], TAM rule 3) in every format, `<ACTION>` too
//!   ([`key_matching_for`]); each loose match is a warning on the result
//!   ([`CallOutcome::warnings`]).
//! - **Chains**: [`ToolManager::execute`] runs calls in order; in one block a failure with
//!   `on_error: stop` turns the block's later steps into [`ToolError::Skipped`].
//! - **Nesting**: a handler calling tools ([`CallContext::call`]) goes one level deeper;
//!   past [`ToolManager::max_depth`] the call is a [`ToolError::RecursionLimit`].

pub mod builtin;
mod contain;
pub(crate) use contain::{contain, install_hook as install_panic_hook, quiet, Quietly};
mod context;
mod definition;
mod error;
pub mod id;
mod intercept;
mod listing;
mod log;
pub mod observe;
mod policy;
pub(crate) mod runtime;
mod schema;
mod unavailable;
pub mod vcp;
mod world;

pub use definition::{empty_object_schema, tool_shape, Implementation, ToolDefinition};
pub use error::ToolError;
pub use intercept::Interceptor;
pub use listing::{frame_observation, success_observation, OBSERVATION_INDENT};
pub use log::{LogCallback, LogRecord, LogSink};
pub use observe::{
    resource_updates, CallObserver, ClientFuture, LogLevel, NodeEvent, NodeState, Observer,
    UNSUPPORTED,
};
pub use policy::CallerPolicy;
pub use schema::{normalize_key, KeyMatching};
pub use world::{LiveWorld, WORLD_URI};

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock, RwLock};
use std::time::{Duration, Instant};

use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use crate::protocol::{Call, Format, OnError};
use schema::ArgSchema;

/// The future a handler returns.
pub type ToolFuture = Pin<Box<dyn Future<Output = Result<Value, ToolError>> + Send + 'static>>;

/// Who is calling a tool (for logs, hooks and permission checks). The default is
/// [`Caller::Host`], as in [`CallOptions`](crate::CallOptions).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Caller {
    /// A person at the command line.
    Cli,
    /// The embedding host program.
    #[default]
    Host,
    /// A model, through the agent runtime (agent id if known).
    Model(Option<String>),
    /// A plugin script (plugin name).
    Plugin(String),
    /// A workflow node (workflow id).
    Workflow(String),
    /// A remote client (MCP, REST).
    Remote(String),
}

impl std::fmt::Display for Caller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Caller::Cli => f.write_str("cli"),
            Caller::Host => f.write_str("host"),
            Caller::Model(None) => f.write_str("model"),
            Caller::Model(Some(a)) => write!(f, "model:{a}"),
            Caller::Plugin(p) => write!(f, "plugin:{p}"),
            Caller::Workflow(w) => write!(f, "workflow:{w}"),
            Caller::Remote(r) => write!(f, "remote:{r}"),
        }
    }
}

/// Reads a caller as [`Caller`]'s `Display` writes it: `cli`, `host`, `model`,
/// `model:<agent>`, `plugin:<name>`, `workflow:<id>`, `remote:<client>`.
///
/// ```
/// use tavern::Caller;
/// assert_eq!("model:npc-1".parse(), Ok(Caller::Model(Some("npc-1".into()))));
/// assert_eq!("host".parse(), Ok(Caller::Host));
/// assert!("robot".parse::<Caller>().is_err());
/// ```
impl std::str::FromStr for Caller {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (kind, name) = match s.split_once(':') {
            Some((k, n)) => (k, Some(n.to_string())),
            None => (s, None),
        };
        match (kind, name) {
            ("cli", None) => Ok(Caller::Cli),
            ("host", None) => Ok(Caller::Host),
            ("model", n) => Ok(Caller::Model(n)),
            ("plugin", Some(n)) => Ok(Caller::Plugin(n)),
            ("workflow", Some(n)) => Ok(Caller::Workflow(n)),
            ("remote", Some(n)) => Ok(Caller::Remote(n)),
            _ => Err(format!(
                "unknown caller '{s}': write cli, host, model, model:<agent>, plugin:<name>, \
                 workflow:<id> or remote:<client>"
            )),
        }
    }
}

/// What a handler knows about the call it serves.
#[derive(Clone)]
pub struct CallContext {
    /// Canonical id of the tool being run (shared with the registry: cloning it is cheap).
    pub tool_id: Arc<str>,
    /// Who asked.
    pub caller: Caller,
    /// The manager, so a tool can call other tools (workflows, `api.tools.call`).
    pub manager: Arc<ToolManager>,
    /// How many tool calls enclose this one (0 for a top-level call).
    pub depth: u32,
    /// Cancelled when the caller gives up; long-running handlers should watch it.
    pub cancel: CancellationToken,
    /// When the caller stops waiting (wall clock, host time included), if it set one.
    /// Nested calls inherit it; script tools stop at it.
    pub deadline: Option<Instant>,
    /// Who watches the call (a served job, an MCP progress token); nested calls and
    /// workflow runs report to it. `None` almost always.
    pub observer: Observer,
    /// The id of the parsed call this runs (`call_abc123`, `call_0`: see
    /// [`Call::id`](crate::protocol::Call::id)), for the audit record; `None` for nested
    /// calls and calls made by code.
    pub call_id: Option<Arc<str>>,
}

impl std::fmt::Debug for CallContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallContext")
            .field("tool_id", &self.tool_id)
            .field("caller", &self.caller)
            .field("depth", &self.depth)
            .finish_non_exhaustive()
    }
}

impl CallContext {
    /// Calls another tool from inside a handler, one level deeper.
    pub async fn call(&self, id: &str, args: Value) -> Result<Value, ToolError> {
        self.manager
            .invoke(
                id,
                args,
                Invocation {
                    caller: self.caller.clone(),
                    depth: self.depth + 1,
                    cancel: self.cancel.clone(),
                    deadline: self.deadline,
                    matching: KeyMatching::Loose,
                    observer: self.observer.clone(),
                    call_id: None,
                },
            )
            .await
    }
}

/// Carries out a tool once its arguments are validated.
pub trait ToolHandler: Send + Sync + 'static {
    /// Runs the tool. `args` is a JSON object that passed the tool's schema.
    fn invoke(&self, ctx: CallContext, args: Value) -> ToolFuture;

    /// What the handler's sandbox allows (roots, network, limits), for `tavern plugin
    /// check`; `None` for handlers that run no external process.
    fn describe_sandbox(&self) -> Option<Value> {
        None
    }

    /// Whether the handler runs synchronously on the calling thread and may block it (a
    /// sync host tool). A Lua mod calling such a tool through `api.tools.call` gives its
    /// script state up while the tool runs, so other calls to the mod can use it.
    fn is_blocking(&self) -> bool {
        false
    }
}

struct SyncFn<F>(F);

impl<F> ToolHandler for SyncFn<F>
where
    F: Fn(&CallContext, Value) -> Result<Value, ToolError> + Send + Sync + 'static,
{
    fn invoke(&self, ctx: CallContext, args: Value) -> ToolFuture {
        let out = (self.0)(&ctx, args);
        Box::pin(std::future::ready(out))
    }
}

struct AsyncFn<F>(F);

impl<F, Fut> ToolHandler for AsyncFn<F>
where
    F: Fn(CallContext, Value) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Value, ToolError>> + Send + 'static,
{
    fn invoke(&self, ctx: CallContext, args: Value) -> ToolFuture {
        Box::pin((self.0)(ctx, args))
    }
}

/// A handler from a synchronous closure (what [`ToolManager::register_fn`] registers).
pub fn fn_handler<F>(f: F) -> Arc<dyn ToolHandler>
where
    F: Fn(&CallContext, Value) -> Result<Value, ToolError> + Send + Sync + 'static,
{
    Arc::new(SyncFn(f))
}

/// A handler from an async closure (what [`ToolManager::register_async_fn`] registers).
pub fn async_fn_handler<F, Fut>(f: F) -> Arc<dyn ToolHandler>
where
    F: Fn(CallContext, Value) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Value, ToolError>> + Send + 'static,
{
    Arc::new(AsyncFn(f))
}

/// A registered tool: its definition, its compiled schema, its wire name and what runs it.
pub struct Tool {
    /// The definition as registered.
    pub definition: ToolDefinition,
    /// The id again, shared: every call's [`CallContext::tool_id`] is a clone of it (no
    /// string copied per call).
    shared_id: Arc<str>,
    wire_name: String,
    schema: ArgSchema,
    handler: Arc<dyn ToolHandler>,
}

impl std::fmt::Debug for Tool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tool")
            .field("id", &self.definition.id)
            .field("wire_name", &self.wire_name)
            .finish_non_exhaustive()
    }
}

impl Tool {
    /// Canonical id.
    pub fn id(&self) -> &str {
        &self.definition.id
    }

    /// The name every wire surface accepts (`^[A-Za-z_][A-Za-z0-9_-]{0,63}$`), unique in
    /// its manager, e.g. `FileOperator_WriteFile` for `FileOperator:WriteFile`.
    pub fn wire_name(&self) -> &str {
        &self.wire_name
    }

    /// What runs the tool.
    pub fn handler(&self) -> &Arc<dyn ToolHandler> {
        &self.handler
    }

    /// One warning per top-level argument of `args` that names a parameter only loosely:
    /// `argument 'guestName' read as 'guest_name'` (empty when every key is exact).
    pub fn loose_warnings(&self, args: &Value) -> Vec<String> {
        self.schema
            .loose_keys(args)
            .into_iter()
            .map(|(given, name)| format!("argument '{given}' read as '{name}'"))
            .collect()
    }

    /// Matches keys, converts strings, fills defaults and validates `args` against the
    /// tool's schema: the arguments object the handler would see, or why the call is refused.
    pub fn prepare(&self, args: Value, matching: KeyMatching) -> Result<Value, ToolError> {
        self.schema
            .prepare(args, matching)
            .map_err(|problems| ToolError::InvalidParameters {
                tool: self.definition.id.clone(),
                problems,
            })
    }
}

/// The result of one call from a parsed text, in execution order.
#[derive(Debug, Clone, PartialEq)]
pub struct CallOutcome {
    /// The tool id as the caller wrote it.
    pub tool: String,
    /// The canonical id it resolved to (`None` when no tool matched).
    pub id: Option<String>,
    /// The value, or why there is none (including [`ToolError::Skipped`]).
    pub result: Result<Value, ToolError>,
    /// Wall-clock time from the start of validation to the result (zero for skipped calls).
    pub elapsed: Duration,
    /// What the caller should know though the call ran: each argument read loosely
    /// (`argument 'guestName' read as 'guest_name'`).
    pub warnings: Vec<String>,
}

impl CallOutcome {
    /// The Observation line for a model: [`success_observation`] or
    /// [`ToolError::observation`], then one indented `Warning: …` line per
    /// [`CallOutcome::warnings`] entry (so the model learns the parameter's real name).
    pub fn observation(&self) -> String {
        let mut text = match &self.result {
            Ok(v) => success_observation(&self.tool, v),
            Err(e) => e.observation(),
        };
        for w in &self.warnings {
            text.push('\n');
            text.push_str(OBSERVATION_INDENT);
            text.push_str(&frame_observation(format!("Warning: {w}")));
        }
        text
    }
}

/// A registry lookup: the tool and its caller policy, or the id as written and why it
/// names no tool.
type LookedUp = Result<(Arc<Tool>, Option<CallerPolicy>), (String, ToolError)>;

/// Default limit on tools calling tools.
pub const DEFAULT_MAX_DEPTH: u32 = 16;

#[derive(Default)]
struct Registry {
    by_id: HashMap<String, Arc<Tool>>,
    /// Wire name → canonical id.
    by_wire: HashMap<String, String>,
    order: Vec<String>,
    /// Caller policies that are not [`CallerPolicy::ANY`], by canonical id.
    policies: HashMap<String, CallerPolicy>,
    /// Namespaces only [`ToolManager::register_reserved`] may put tools in (host tools).
    reserved: Vec<String>,
    /// Tools and namespaces that failed to load, with why (see `unavailable.rs`).
    unavailable: Vec<(unavailable::Pattern, String)>,
}

impl Registry {
    fn resolve(&self, id: &str) -> Option<&Arc<Tool>> {
        if let Some(t) = self.by_id.get(id) {
            return Some(t);
        }
        if let Some(t) = self.by_wire.get(id).and_then(|c| self.by_id.get(c)) {
            return Some(t);
        }
        // `node:core:Math` is the spoken form of the node tool `node:core.Math`.
        if let Some(t) = id.strip_prefix("node:").filter(|r| r.contains(':')) {
            return self.by_id.get(&format!("node:{}", t.replacen(':', ".", 1)));
        }
        // `plugin.tool` is the form the seeds' examples use for `plugin:tool`.
        if !id.contains(':') && id.contains('.') {
            for cand in id::dotted_candidates(id) {
                if let Some(t) = self.by_id.get(&cand) {
                    return Some(t);
                }
            }
        }
        None
    }

    /// A name as a model writes it (`Forge:smelt`, `FORGE.SMELT`, `Forge_Smelt`): the one
    /// tool whose id or wire name it is, ignoring ASCII case, `.` and `:` written as `_`;
    /// `None` when no tool or more than one matches. Used for calls read from the native
    /// formats of open models ([`Format::names_as_written`]), only when [`Registry::resolve`]
    /// misses, so the scan costs nothing on the usual path.
    fn resolve_as_written(&self, id: &str) -> Option<&Arc<Tool>> {
        let want = id::base_wire_name(id.trim());
        let mut found: Option<&Arc<Tool>> = None;
        for canonical in &self.order {
            let Some(t) = self.by_id.get(canonical) else {
                continue;
            };
            if canonical.eq_ignore_ascii_case(id)
                || id::base_wire_name(canonical).eq_ignore_ascii_case(&want)
                || t.wire_name.eq_ignore_ascii_case(&want)
            {
                if found.is_some_and(|f| !Arc::ptr_eq(f, t)) {
                    return None;
                }
                found = Some(t);
            }
        }
        found
    }

    /// The error for an unknown id, with a "did you mean" among the tools a model is shown
    /// (no hidden `node:*` tool unless `list_nodes`).
    fn unknown(&self, id: &str, list_nodes: bool) -> ToolError {
        if let Some(e) = self.unavailable_error(id) {
            return e;
        }
        // A tool is matched by its full id or its bare name, `.` standing for `:`.
        let want = id.trim().replace('.', ":");
        let mut best: Option<(f64, &str)> = None;
        for t in self.order.iter().filter(|t| list_nodes || !is_node_tool(t)) {
            let name = t.rsplit_once(':').map_or(t.as_str(), |(_, n)| n);
            let score =
                crate::suggest::similarity(&want, t).max(crate::suggest::similarity(&want, name));
            if score >= crate::suggest::THRESHOLD && best.is_none_or(|(b, _)| score > b) {
                best = Some((score, t));
            }
        }
        ToolError::UnknownTool {
            id: id.to_string(),
            suggestion: best.map(|(_, s)| s.to_string()),
        }
    }

    /// Checks that `tool` can go in (id shape, no clash with an id or wire name of another
    /// tool, except those in `leaving`) and gives it its wire name.
    fn admit(
        &self,
        definition: ToolDefinition,
        handler: Arc<dyn ToolHandler>,
        leaving: &dyn Fn(&str) -> bool,
        also_taken: &[String],
    ) -> Result<Tool, ToolError> {
        let reg_err = |message: String| ToolError::Registration {
            id: definition.id.clone(),
            message,
        };
        id::validate_id(&definition.id).map_err(reg_err)?;
        if let Some(ns) = self.reserved_namespace_of(&definition.id) {
            return Err(reg_err(format!(
                "namespace '{ns}' is reserved for the host's tools; a plugin must use another name"
            )));
        }
        if self.by_id.contains_key(&definition.id) && !leaving(&definition.id) {
            return Err(reg_err("a tool with this id is already registered".into()));
        }
        if let Some(owner) = self.by_wire.get(&definition.id) {
            if *owner != definition.id && !leaving(owner) {
                return Err(reg_err(format!(
                    "this id is the wire name of tool '{owner}'; choose another id"
                )));
            }
        }
        let schema = ArgSchema::compile(&definition.parameters).map_err(reg_err)?;
        let wire_name = id::unique_wire_name(&definition.id, |w| {
            let by_wire = self.by_wire.get(w).is_some_and(|owner| !leaving(owner));
            let by_id = self.by_id.contains_key(w) && !leaving(w) && w != definition.id;
            by_wire || by_id || also_taken.iter().any(|t| t == w)
        });
        Ok(Tool {
            shared_id: Arc::from(definition.id.as_str()),
            definition,
            wire_name,
            schema,
            handler,
        })
    }

    /// The reserved namespace `id` falls in (`ns:…`, or a bare id equal to `ns`).
    fn reserved_namespace_of(&self, id: &str) -> Option<&str> {
        let ns = id.split_once(':').map_or(id, |(n, _)| n);
        self.reserved
            .iter()
            .find(|r| r.eq_ignore_ascii_case(ns))
            .map(String::as_str)
    }

    fn insert(&mut self, tool: Tool) {
        let id = tool.definition.id.clone();
        self.by_wire.insert(tool.wire_name.clone(), id.clone());
        self.by_id.insert(id.clone(), Arc::new(tool));
        self.order.push(id);
    }

    fn remove_where(&mut self, pred: impl Fn(&str) -> bool) -> usize {
        let before = self.order.len();
        self.policies.retain(|i, _| !pred(i));
        self.order.retain(|i| !pred(i));
        self.by_id.retain(|i, _| !pred(i));
        self.by_wire.retain(|_, owner| !pred(owner));
        before - self.order.len()
    }
}

/// The registry of tools and the one door every call goes through.
pub struct ToolManager {
    registry: RwLock<Registry>,
    max_depth: u32,
    runtime: runtime::RuntimeSlot,
    /// Hooks and overrides around every call (set once, by the engine).
    interceptor: OnceLock<Arc<dyn Interceptor>>,
    /// Where mods' log lines and the engine's warnings go (the host's callback or tracing).
    log: LogSink,
    /// Whether [`ToolManager::model_list`] shows `node:*` tools (setting `tools.list_nodes`).
    list_nodes: std::sync::atomic::AtomicBool,
    /// What scripts' `api.store` keeps (the host's, or a memory store made on first use).
    kv: OnceLock<Arc<dyn crate::store::KvStore>>,
    /// The engine's live world (`api.world`; set by the engine's build, else an empty
    /// memory world made on first use).
    world: OnceLock<Arc<LiveWorld>>,
}

impl Default for ToolManager {
    fn default() -> Self {
        ToolManager {
            registry: RwLock::new(Registry::default()),
            max_depth: DEFAULT_MAX_DEPTH,
            runtime: runtime::RuntimeSlot::default(),
            interceptor: OnceLock::new(),
            log: LogSink::default(),
            list_nodes: std::sync::atomic::AtomicBool::new(false),
            kv: OnceLock::new(),
            world: OnceLock::new(),
        }
    }
}

/// Whether `id` is one of the `node:<type>` tools every node type becomes: callable, but
/// left out of the lists a model reads unless `tools.list_nodes = true`.
pub fn is_node_tool(id: &str) -> bool {
    id.starts_with("node:")
}

/// How one call is made: who asks, how deep, and when the caller stops waiting.
#[derive(Debug, Clone)]
pub struct Invocation {
    /// Who asked.
    pub caller: Caller,
    /// Nesting depth (0 for a top-level call).
    pub depth: u32,
    /// Cancelled when the caller gives up.
    pub cancel: CancellationToken,
    /// When the caller stops waiting; checked before the handler runs and passed to it.
    pub deadline: Option<Instant>,
    /// How argument keys are matched.
    pub matching: KeyMatching,
    /// Who watches the call (see [`observe`]); handed on to the handler's context.
    pub observer: Observer,
    /// The id of the parsed call it runs, if any (handed on to the context, for the audit
    /// record).
    pub call_id: Option<Arc<str>>,
}

impl Invocation {
    /// A top-level call from `caller` with loose key matching, no deadline.
    pub fn new(caller: Caller) -> Self {
        Invocation {
            caller,
            depth: 0,
            cancel: CancellationToken::new(),
            deadline: None,
            matching: KeyMatching::Loose,
            observer: None,
            call_id: None,
        }
    }

    /// At nesting depth `depth`.
    pub fn depth(mut self, depth: u32) -> Self {
        self.depth = depth;
        self
    }

    /// Under the cancel token `cancel`.
    pub fn cancel(mut self, cancel: CancellationToken) -> Self {
        self.cancel = cancel;
        self
    }

    /// With the deadline `deadline` (none: the caller waits as long as it takes).
    pub fn deadline(mut self, deadline: Option<Instant>) -> Self {
        self.deadline = deadline;
        self
    }

    /// Matching argument keys as `matching` says.
    pub fn matching(mut self, matching: KeyMatching) -> Self {
        self.matching = matching;
        self
    }

    /// Watched by `observer`.
    pub fn observer(mut self, observer: Observer) -> Self {
        self.observer = observer;
        self
    }
}

impl From<Caller> for Invocation {
    fn from(caller: Caller) -> Self {
        Invocation::new(caller)
    }
}

/// Polls a handler's future inside `catch_unwind`: a panicking handler becomes
/// [`ToolError::Panicked`] instead of unwinding into the caller (a game loop, a C host).
struct CatchUnwind(ToolFuture);

impl Future for CatchUnwind {
    type Output = Result<Result<Value, ToolError>, String>;

    fn poll(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        let fut = &mut self.0;
        match contain::contain(|| fut.as_mut().poll(cx)) {
            Ok(std::task::Poll::Ready(v)) => std::task::Poll::Ready(Ok(v)),
            Ok(std::task::Poll::Pending) => std::task::Poll::Pending,
            Err(message) => std::task::Poll::Ready(Err(message)),
        }
    }
}

/// The text of a panic payload (`&str` or `String`), or a placeholder.
pub(crate) fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "no message".into())
}

impl std::fmt::Debug for ToolManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolManager")
            .field("tools", &self.len())
            .field("max_depth", &self.max_depth)
            .finish()
    }
}

fn in_namespace(id: &str, ns: &str) -> bool {
    id.split_once(':').is_some_and(|(n, _)| n == ns)
}

impl ToolManager {
    /// An empty manager.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// An empty manager whose tools may nest calls at most `max_depth` levels deep.
    pub fn with_max_depth(max_depth: u32) -> Arc<Self> {
        Arc::new(ToolManager {
            max_depth,
            ..ToolManager::default()
        })
    }

    /// Runs async work that needs a runtime (process, node and workflow tools, nested
    /// `api.tools.call`s from script threads) on `handle` instead of a runtime of the
    /// manager's own. False when a runtime was already chosen (the handle is not used).
    pub fn set_runtime(&self, handle: tokio::runtime::Handle) -> bool {
        self.runtime.set(handle)
    }

    /// The runtime this manager's work runs on: the handle given to
    /// [`ToolManager::set_runtime`], or a small (2-worker) runtime started on first use and
    /// shut down when the manager is dropped. Fails only when no thread can be started.
    pub fn runtime_handle(&self) -> std::io::Result<tokio::runtime::Handle> {
        self.runtime.handle()
    }

    /// Whether the manager runs its own runtime (started by [`ToolManager::runtime_handle`]).
    pub fn owns_runtime(&self) -> bool {
        self.runtime.owns()
    }

    /// Reserves namespace `ns` for the host: from now on only
    /// [`ToolManager::register_reserved`] can add tools `ns:…` (or a bare tool `ns`), so a
    /// plugin named like a host namespace cannot take the host's ids.
    pub fn reserve_namespace(&self, ns: &str) {
        let mut reg = self.write();
        if !reg.reserved.iter().any(|r| r.eq_ignore_ascii_case(ns)) {
            reg.reserved.push(ns.to_string());
        }
    }

    /// Whether `ns` is reserved for the host.
    pub fn is_reserved(&self, ns: &str) -> bool {
        self.read()
            .reserved
            .iter()
            .any(|r| r.eq_ignore_ascii_case(ns))
    }

    /// Registers a host tool, also in a reserved namespace, with a caller policy.
    pub fn register_reserved(
        &self,
        definition: ToolDefinition,
        handler: Arc<dyn ToolHandler>,
        policy: CallerPolicy,
    ) -> Result<(), ToolError> {
        let mut reg = self.write();
        let reserved = std::mem::take(&mut reg.reserved);
        let id = definition.id.clone();
        let tool = reg.admit(definition, handler, &|_| false, &[]);
        reg.reserved = reserved;
        reg.insert(tool?);
        if policy != CallerPolicy::ANY {
            reg.policies.insert(id, policy);
        }
        Ok(())
    }

    /// Sets the caller policy of a registered tool (by canonical id); false when unknown.
    pub fn set_policy(&self, id: &str, policy: CallerPolicy) -> bool {
        let mut reg = self.write();
        if !reg.by_id.contains_key(id) {
            return false;
        }
        if policy == CallerPolicy::ANY {
            reg.policies.remove(id);
        } else {
            reg.policies.insert(id.to_string(), policy);
        }
        true
    }

    /// The caller policy of a tool (by canonical id); [`CallerPolicy::ANY`] when none is set.
    pub fn policy(&self, id: &str) -> CallerPolicy {
        self.read().policies.get(id).copied().unwrap_or_default()
    }

    /// Installs what runs around every validated call (the engine's hooks and overrides).
    /// Set once; returns false when one is already installed.
    pub fn set_interceptor(&self, interceptor: Arc<dyn Interceptor>) -> bool {
        self.interceptor.set(interceptor).is_ok()
    }

    /// Keeps scripts' `api.store` in `store` (set once, before any script uses it; false
    /// when a store is already in use).
    pub fn set_kv_store(&self, store: Arc<dyn crate::store::KvStore>) -> bool {
        self.kv.set(store).is_ok()
    }

    /// The store scripts' `api.store` uses: the one set, else a memory store of this
    /// manager's own.
    pub fn kv_store(&self) -> &Arc<dyn crate::store::KvStore> {
        self.kv
            .get_or_init(|| Arc::new(crate::store::MemoryStore::new()))
    }

    /// Makes `world` this manager's live world (set once, before any script uses it; false
    /// when one is already in use). Changes made through [`ToolManager::world_state`] are
    /// announced as [`WORLD_URI`].
    pub fn set_world_state(&self, world: Arc<dyn crate::store::WorldState>) -> bool {
        self.world.set(LiveWorld::new(world)).is_ok()
    }

    /// The live world scripts' `api.world` reads and changes: the one set, else an empty
    /// memory world of this manager's own.
    pub fn world_state(&self) -> &Arc<LiveWorld> {
        self.world.get_or_init(|| {
            LiveWorld::new(crate::store::MemoryWorldState::new(Value::Object(
                Map::new(),
            )))
        })
    }

    /// The installed interceptor, if any.
    pub fn interceptor(&self) -> Option<&Arc<dyn Interceptor>> {
        self.interceptor.get()
    }

    /// The engine's log sink: mods' `print` and `api.log.*` lines and the engine's own
    /// warnings (see [`LogSink`]).
    pub fn log(&self) -> &LogSink {
        &self.log
    }

    /// The nesting limit for tools calling tools.
    pub fn max_depth(&self) -> u32 {
        self.max_depth
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Registry> {
        // Every write builds what it inserts before taking the lock and only inserts and
        // removes under it, so a poisoned lock still holds consistent maps.
        self.registry.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Registry> {
        self.registry.write().unwrap_or_else(|p| p.into_inner())
    }

    /// Number of registered tools.
    pub fn len(&self) -> usize {
        self.read().order.len()
    }

    /// True when no tool is registered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Registers a tool: checks the id (see [`id`]), compiles the schema once and gives the
    /// tool its wire name. Fails on a bad id, a bad schema or a duplicate.
    pub fn register(
        &self,
        definition: ToolDefinition,
        handler: Arc<dyn ToolHandler>,
    ) -> Result<(), ToolError> {
        let mut reg = self.write();
        let tool = reg.admit(definition, handler, &|_| false, &[])?;
        reg.insert(tool);
        Ok(())
    }

    /// Registers a synchronous Rust function as a `service` tool.
    pub fn register_fn<F>(&self, definition: ToolDefinition, f: F) -> Result<(), ToolError>
    where
        F: Fn(&CallContext, Value) -> Result<Value, ToolError> + Send + Sync + 'static,
    {
        self.register(definition, Arc::new(SyncFn(f)))
    }

    /// Registers an async Rust function as a `service` tool.
    pub fn register_async_fn<F, Fut>(
        &self,
        definition: ToolDefinition,
        f: F,
    ) -> Result<(), ToolError>
    where
        F: Fn(CallContext, Value) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Value, ToolError>> + Send + 'static,
    {
        self.register(definition, Arc::new(AsyncFn(f)))
    }

    /// Registers `definition`, or swaps it in for the tool with the same id in one step
    /// (callers never see the id missing). A replaced tool keeps its wire name when it can.
    pub fn replace(
        &self,
        definition: ToolDefinition,
        handler: Arc<dyn ToolHandler>,
    ) -> Result<(), ToolError> {
        let mut reg = self.write();
        let id = definition.id.clone();
        let tool = reg.admit(definition, handler, &|i| i == id, &[])?;
        reg.remove_where(|i| i == id);
        reg.insert(tool);
        Ok(())
    }

    /// Replaces every tool of namespace `ns` with `tools` in one step (plugin reload). All
    /// new definitions are checked first; on any error nothing changes. Each new id must be
    /// in `ns`.
    pub fn replace_namespace(
        &self,
        ns: &str,
        tools: Vec<(ToolDefinition, Arc<dyn ToolHandler>)>,
    ) -> Result<(), ToolError> {
        let mut reg = self.write();
        let mut admitted: Vec<Tool> = Vec::with_capacity(tools.len());
        let mut wires: Vec<String> = Vec::new();
        let mut ids: Vec<String> = Vec::new();
        for (def, handler) in tools {
            if !in_namespace(&def.id, ns) {
                return Err(ToolError::Registration {
                    message: format!("the id is outside namespace '{ns}'; write '{ns}:<name>'"),
                    id: def.id,
                });
            }
            if ids.contains(&def.id) {
                return Err(ToolError::Registration {
                    id: def.id,
                    message: "the id is given twice".into(),
                });
            }
            let tool = reg.admit(def, handler, &|i| in_namespace(i, ns), &wires)?;
            wires.push(tool.wire_name.clone());
            ids.push(tool.definition.id.clone());
            admitted.push(tool);
        }
        reg.remove_where(|i| in_namespace(i, ns));
        for t in admitted {
            reg.insert(t);
        }
        Ok(())
    }

    /// Removes a tool (by canonical id); returns whether it existed.
    pub fn unregister(&self, id: &str) -> bool {
        self.write().remove_where(|i| i == id) > 0
    }

    /// Removes every tool `ns:*`; returns how many there were.
    pub fn unregister_namespace(&self, ns: &str) -> usize {
        self.write().remove_where(|i| in_namespace(i, ns))
    }

    /// Registered tools in registration order.
    pub fn list(&self) -> Vec<Arc<Tool>> {
        let reg = self.read();
        reg.order
            .iter()
            .filter_map(|id| reg.by_id.get(id).cloned())
            .collect()
    }

    /// The tools a model is shown (MCP `tools/list`, the OpenAI/Anthropic exports, agent
    /// manuals): [`ToolManager::list`] without the `node:*` tools, unless
    /// [`ToolManager::set_list_nodes`] asked for them. Every tool stays callable.
    pub fn model_list(&self) -> Vec<Arc<Tool>> {
        let mut all = self.list();
        if !self.lists_nodes() {
            all.retain(|t| !is_node_tool(t.id()));
        }
        all
    }

    /// Shows `node:*` tools in [`ToolManager::model_list`] (setting `tools.list_nodes`).
    pub fn set_list_nodes(&self, on: bool) {
        self.list_nodes
            .store(on, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether [`ToolManager::model_list`] shows `node:*` tools.
    pub fn lists_nodes(&self) -> bool {
        self.list_nodes.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Finds a tool by any accepted spelling, as [`ToolManager::get`], without building an
    /// error for an unknown id. For "is it there?" questions: the did-you-mean search an
    /// error carries compares `id` with every registered tool.
    pub fn find(&self, id: &str) -> Option<Arc<Tool>> {
        self.read().resolve(id).cloned()
    }

    /// Finds a tool by any accepted spelling: canonical id, wire name, or `plugin.tool`.
    /// An unknown id gets a suggestion when a registered one is close.
    pub fn get(&self, id: &str) -> Result<Arc<Tool>, ToolError> {
        let reg = self.read();
        match reg.resolve(id) {
            Some(t) => Ok(t.clone()),
            None => Err(reg.unknown(id, self.lists_nodes())),
        }
    }

    /// Resolves and prepares a call without running it: the tool and the arguments object
    /// its handler would see.
    pub fn prepare(
        &self,
        id: &str,
        args: Value,
        matching: KeyMatching,
    ) -> Result<(Arc<Tool>, Value), ToolError> {
        let tool = self.get(id)?;
        let args = tool.prepare(args, matching)?;
        Ok((tool, args))
    }

    /// Validates and runs a call as `inv` describes (a bare [`Caller`] is a top-level call
    /// with loose key matching and no deadline): id resolution, the caller policy, the
    /// depth limit, arguments, cancellation and the deadline are checked before the handler
    /// runs; a handler that panics (when called or while polled) is
    /// [`ToolError::Panicked`], never an unwinding caller. The one way to run one tool.
    pub async fn invoke(
        self: &Arc<Self>,
        id: &str,
        args: Value,
        inv: impl Into<Invocation>,
    ) -> Result<Value, ToolError> {
        let inv = inv.into();
        let looked = self.look_up(id);
        self.invoke_looked_up(looked, args, inv).await
    }

    /// [`ToolManager::invoke`] after [`ToolManager::look_up`] (one registry lookup per call).
    async fn invoke_looked_up(
        self: &Arc<Self>,
        looked: LookedUp,
        args: Value,
        inv: Invocation,
    ) -> Result<Value, ToolError> {
        match self.admit(looked, args, &inv) {
            Ok((tool, args)) => self.run_admitted(tool, args, inv).await,
            Err((tool_id, e)) => {
                if let Some(i) = self.interceptor.get() {
                    i.refused(&tool_id, &inv.caller, inv.depth, inv.call_id.as_deref(), &e);
                }
                Err(e)
            }
        }
    }

    /// The tool `id` names and its caller policy, under one read of the registry; or the
    /// id as written and why it names no tool.
    fn look_up(&self, id: &str) -> LookedUp {
        let reg = self.read();
        match reg.resolve(id) {
            Some(t) => Ok((t.clone(), reg.policies.get(t.id()).copied())),
            None => Err((id.to_string(), reg.unknown(id, self.lists_nodes()))),
        }
    }

    /// [`ToolManager::look_up`] for a parsed call, under one read of the registry: the id
    /// as the call's format reads names as written (`Some` only when that differs from the
    /// usual resolution, see [`ToolManager::written_id`]) and the lookup.
    fn look_up_call(&self, call: &Call) -> (Option<String>, LookedUp) {
        let reg = self.read();
        let found = match reg.resolve(&call.tool) {
            Some(t) => Some((None, t)),
            None if call.source.names_as_written() => reg
                .resolve_as_written(&call.tool)
                .map(|t| (Some(t.id().to_string()), t)),
            None => None,
        };
        match found {
            Some((written, t)) => (written, Ok((t.clone(), reg.policies.get(t.id()).copied()))),
            None => (
                None,
                Err((
                    call.tool.clone(),
                    reg.unknown(&call.tool, self.lists_nodes()),
                )),
            ),
        }
    }

    /// The checks before a call runs: the tool and its prepared arguments, or the id the
    /// refusal names (canonical when the tool resolved) and why.
    fn admit(
        &self,
        looked: LookedUp,
        args: Value,
        inv: &Invocation,
    ) -> Result<(Arc<Tool>, Value), (String, ToolError)> {
        let (tool, policy) = looked?;
        let refuse = |e: ToolError| (tool.id().to_string(), e);
        if let Some(p) = policy.filter(|p| !p.allows(&inv.caller)) {
            return Err(refuse(ToolError::NotPermitted {
                tool: tool.id().to_string(),
                caller: inv.caller.to_string(),
                allowed: p.describe(),
            }));
        }
        if inv.depth > self.max_depth {
            return Err(refuse(ToolError::RecursionLimit {
                tool: tool.id().to_string(),
                limit: self.max_depth,
            }));
        }
        let args = tool.prepare(args, inv.matching).map_err(refuse)?;
        if inv.cancel.is_cancelled() {
            return Err(refuse(ToolError::Cancelled {
                tool: tool.id().to_string(),
            }));
        }
        if inv.deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(refuse(ToolError::Timeout {
                tool: tool.id().to_string(),
                after_ms: 0,
                at: None,
            }));
        }
        Ok((tool, args))
    }

    /// Runs an admitted call: through the interceptor when it wants the tool, else the
    /// handler; a panic becomes [`ToolError::Panicked`].
    async fn run_admitted(
        self: &Arc<Self>,
        tool: Arc<Tool>,
        args: Value,
        inv: Invocation,
    ) -> Result<Value, ToolError> {
        let ctx = CallContext {
            tool_id: tool.shared_id.clone(),
            caller: inv.caller,
            manager: self.clone(),
            depth: inv.depth,
            cancel: inv.cancel,
            deadline: inv.deadline,
            observer: inv.observer,
            call_id: inv.call_id,
        };
        // Hot path: one atomic load when nothing is hooked, overridden or audited.
        let hooked = self
            .interceptor
            .get()
            .filter(|i| i.wants(tool.id()))
            .cloned();
        let handler = tool.handler.clone();
        let t = tool.clone();
        let fut = contain::contain(|| match hooked {
            Some(i) => i.intercept(t, ctx, args),
            None => handler.invoke(ctx, args),
        });
        let result = match fut {
            Ok(f) => CatchUnwind(f).await,
            Err(message) => Err(message),
        };
        let result = result.unwrap_or_else(|message| {
            self.log.emit(
                LogLevel::Error,
                &format!("tool:{}", tool.id()),
                &format!("tool handler panicked: {message}"),
            );
            Err(ToolError::Panicked {
                tool: tool.id().to_string(),
                message,
            })
        });
        if let Err(e) = &result {
            tracing::debug!(tool = tool.id(), code = e.code(), "tool call failed: {e}");
        }
        result
    }

    /// Runs parsed calls in order as `inv` says (caller, deadline, cancel token, observer;
    /// each call's keys matched as [`key_matching_for`] says). Within one block (a chain),
    /// a failing step with `on_error: stop` skips the later steps; blocks are independent.
    /// The observer hears each call end ([`CallObserver::call_ended`], skipped steps
    /// included) and everything the calls report (workflow nodes). The engine's run
    /// function (`engine::run`) is the one caller outside tests.
    pub async fn execute(
        self: &Arc<Self>,
        calls: &[Call],
        inv: impl Into<Invocation>,
    ) -> Vec<CallOutcome> {
        let Invocation {
            caller,
            cancel,
            deadline,
            observer,
            ..
        } = inv.into();
        // VCP calls not dispatched yet (rule 16, `vcp`); a no-op for everything else.
        let resolved;
        let calls = if calls
            .iter()
            .any(|c| c.source == Format::Vcp && c.dispatch.is_none())
        {
            resolved = self.resolve_vcp(calls.to_vec());
            &resolved[..]
        } else {
            calls
        };
        let mut out = Vec::with_capacity(calls.len());
        let mut stopped: Option<(usize, String)> = None;
        for call in calls {
            if let Some((block, why)) = &stopped {
                if *block == call.block {
                    if let Some(o) = &observer {
                        o.call_ended(&call.tool, false, Duration::ZERO);
                    }
                    out.push(CallOutcome {
                        tool: call.tool.clone(),
                        id: self
                            .written_id(call)
                            .or_else(|| self.canonical_id(&call.tool)),
                        result: Err(ToolError::Skipped {
                            tool: call.tool.clone(),
                            reason: why.clone(),
                        }),
                        elapsed: Duration::ZERO,
                        warnings: Vec::new(),
                    });
                    continue;
                }
                stopped = None;
            }
            // Values written as text are converted by the schema from the text itself.
            let args = call.args_for_schema();
            // One read of the registry serves the name as written, the loose-name warnings,
            // the call and the outcome's id; with every key written exactly, the warnings
            // are an empty Vec (no allocation).
            let (written, looked) = self.look_up_call(call);
            let warnings = match (&looked, key_matching_for(call)) {
                (Ok((t, _)), KeyMatching::Loose) => t.loose_warnings(&args),
                _ => Vec::new(),
            };
            let id = written.or_else(|| looked.as_ref().ok().map(|(t, _)| t.id().to_string()));
            let started = Instant::now();
            let inv = Invocation {
                caller: caller.clone(),
                depth: 0,
                cancel: cancel.clone(),
                deadline,
                matching: key_matching_for(call),
                observer: observer.clone(),
                call_id: call.id.as_deref().map(Arc::from),
            };
            let result = self.invoke_looked_up(looked, args, inv).await;
            let elapsed = started.elapsed();
            if let Some(o) = &observer {
                o.call_ended(&call.tool, result.is_ok(), elapsed);
            }
            if let Err(e) = &result {
                if call.on_error == OnError::Stop {
                    let step = call.step.map(|s| format!("step {s} ")).unwrap_or_default();
                    stopped = Some((
                        call.block,
                        format!(
                            "{step}({}) failed and its on_error is stop: {}",
                            call.tool,
                            e.code()
                        ),
                    ));
                }
            }
            out.push(CallOutcome {
                tool: call.tool.clone(),
                id,
                result,
                elapsed,
                warnings,
            });
        }
        out
    }

    /// The canonical id `written` resolves to, if any.
    pub fn canonical_id(&self, written: &str) -> Option<String> {
        self.read().resolve(written).map(|t| t.id().to_string())
    }

    /// For a call read from a native format whose tool name names no tool exactly, the
    /// canonical id of the one tool it names as models write names (`Forge:smelt`,
    /// `FORGE_SMELT` for `forge:smelt`); `None` otherwise (the name is used as it is).
    fn written_id(&self, call: &Call) -> Option<String> {
        if !call.source.names_as_written() {
            return None;
        }
        let reg = self.read();
        if reg.resolve(&call.tool).is_some() {
            return None;
        }
        reg.resolve_as_written(&call.tool)
            .map(|t| t.id().to_string())
    }

    /// The tool list as JSON (see [`Tool::to_json`]), in registration order.
    pub fn list_json(&self) -> Value {
        Value::Array(self.list().iter().map(|t| t.to_json()).collect())
    }

    /// A short text manual of every tool, for prompts (seed 000 §6.2 style).
    pub fn manual(&self) -> String {
        listing::manual(&self.list())
    }
}

/// How the keys of a parsed call are matched, as the format table says for its source:
/// loosely (TAM rule 3) for every format since issue 36, `<ACTION>` too, each loose match a
/// warning on the result; a format row could still ask for exact keys.
pub fn key_matching_for(call: &Call) -> KeyMatching {
    if call.source.keys_match_exactly() {
        KeyMatching::Exact
    } else {
        KeyMatching::Loose
    }
}

/// Builds a JSON object from key/value pairs (small helper for host tools and tests).
pub fn object<I, K>(pairs: I) -> Value
where
    I: IntoIterator<Item = (K, Value)>,
    K: Into<String>,
{
    Value::Object(
        pairs
            .into_iter()
            .map(|(k, v)| (k.into(), v))
            .collect::<Map<_, _>>(),
    )
}
