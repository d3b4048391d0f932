//! The ToolManager: registry, id resolution, coercion, validation and dispatch.
//!
//! Every call, whatever format it came in, passes through [`ToolManager::invoke`]: the id is
//! resolved (`plugin:tool`, `plugin.tool`, wire names), string values are converted to the
//! types the schema asks for, the arguments are validated against the compiled schema, and
//! only then does the [`ToolHandler`] see them.

pub mod builtin;
mod definition;
mod error;

pub use definition::{empty_object_schema, Implementation, ToolDefinition};
pub use error::ToolError;

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, RwLock};

use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use crate::protocol::{Call, OnError};

/// The future a handler returns.
pub type ToolFuture = Pin<Box<dyn Future<Output = Result<Value, ToolError>> + Send + 'static>>;

/// Who is calling a tool (for logs, hooks and permission checks).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Caller {
    /// A person at the command line.
    #[default]
    Cli,
    /// The embedding host program.
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

/// What a handler knows about the call it serves.
#[derive(Clone)]
pub struct CallContext {
    /// Canonical id of the tool being run.
    pub tool_id: String,
    /// Who asked.
    pub caller: Caller,
    /// The manager, so a tool can call other tools (workflows, `api.tools.call`).
    pub manager: Arc<ToolManager>,
    /// How many tool calls enclose this one (0 for a top-level call).
    pub depth: u32,
    /// Cancelled when the caller gives up; long-running handlers should watch it.
    pub cancel: CancellationToken,
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
            .invoke_nested(
                id,
                args,
                self.caller.clone(),
                self.depth + 1,
                self.cancel.clone(),
            )
            .await
    }
}

/// Carries out a tool once its arguments are validated.
pub trait ToolHandler: Send + Sync + 'static {
    /// Runs the tool. `args` is a JSON object that passed the tool's schema.
    fn invoke(&self, ctx: CallContext, args: Value) -> ToolFuture;
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

/// A registered tool: its definition and what runs it.
pub struct Tool {
    /// The definition as registered.
    pub definition: ToolDefinition,
    handler: Arc<dyn ToolHandler>,
}

impl Tool {
    /// Canonical id.
    pub fn id(&self) -> &str {
        &self.definition.id
    }
}

/// The result of one call from a parsed text, in execution order.
#[derive(Debug, Clone, PartialEq)]
pub struct CallOutcome {
    /// The tool id as the caller wrote it.
    pub tool: String,
    /// The value, or why there is none (including [`ToolError::Skipped`]).
    pub result: Result<Value, ToolError>,
}

/// Default limit on tools calling tools.
pub const DEFAULT_MAX_DEPTH: u32 = 16;

#[derive(Default)]
struct Registry {
    by_id: HashMap<String, Arc<Tool>>,
    order: Vec<String>,
}

/// The registry of tools and the one door every call goes through.
pub struct ToolManager {
    registry: RwLock<Registry>,
    max_depth: u32,
}

impl Default for ToolManager {
    fn default() -> Self {
        ToolManager {
            registry: RwLock::new(Registry::default()),
            max_depth: DEFAULT_MAX_DEPTH,
        }
    }
}

impl std::fmt::Debug for ToolManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolManager")
            .field("tools", &self.len())
            .finish()
    }
}

impl ToolManager {
    /// An empty manager.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Registry> {
        // A panic while holding the lock cannot leave the maps half-updated (every write is
        // one insert/remove), so a poisoned lock is still consistent.
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

    /// Registers a tool. Fails on a duplicate id.
    pub fn register(
        &self,
        definition: ToolDefinition,
        handler: Arc<dyn ToolHandler>,
    ) -> Result<(), ToolError> {
        let mut reg = self.write();
        if reg.by_id.contains_key(&definition.id) {
            return Err(ToolError::Registration {
                id: definition.id.clone(),
                message: "a tool with this id is already registered".into(),
            });
        }
        let id = definition.id.clone();
        reg.by_id.insert(
            id.clone(),
            Arc::new(Tool {
                definition,
                handler,
            }),
        );
        reg.order.push(id);
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

    /// Removes a tool; returns whether it existed.
    pub fn unregister(&self, id: &str) -> bool {
        let mut reg = self.write();
        let existed = reg.by_id.remove(id).is_some();
        if existed {
            reg.order.retain(|i| i != id);
        }
        existed
    }

    /// Registered tools in registration order.
    pub fn list(&self) -> Vec<Arc<Tool>> {
        let reg = self.read();
        reg.order
            .iter()
            .filter_map(|id| reg.by_id.get(id).cloned())
            .collect()
    }

    /// Finds a tool by any accepted spelling of its id.
    pub fn get(&self, id: &str) -> Result<Arc<Tool>, ToolError> {
        let reg = self.read();
        if let Some(t) = reg.by_id.get(id) {
            return Ok(t.clone());
        }
        // `plugin.tool` is the form the seeds' examples use for `plugin:tool`.
        if let Some((ns, name)) = id.split_once('.') {
            if let Some(t) = reg.by_id.get(&format!("{ns}:{name}")) {
                return Ok(t.clone());
            }
        }
        Err(ToolError::UnknownTool {
            id: id.to_string(),
            suggestion: None,
        })
    }

    /// Validates `args` for tool `id` and runs it as a top-level call.
    pub async fn invoke(
        self: &Arc<Self>,
        id: &str,
        args: Value,
        caller: Caller,
    ) -> Result<Value, ToolError> {
        self.invoke_nested(id, args, caller, 0, CancellationToken::new())
            .await
    }

    /// Validates and runs a call at a given nesting depth.
    pub async fn invoke_nested(
        self: &Arc<Self>,
        id: &str,
        args: Value,
        caller: Caller,
        depth: u32,
        cancel: CancellationToken,
    ) -> Result<Value, ToolError> {
        let tool = self.get(id)?;
        if depth > self.max_depth {
            return Err(ToolError::RecursionLimit {
                tool: tool.id().to_string(),
                limit: self.max_depth,
            });
        }
        let ctx = CallContext {
            tool_id: tool.id().to_string(),
            caller,
            manager: self.clone(),
            depth,
            cancel,
        };
        tool.handler.invoke(ctx, args).await
    }

    /// Runs parsed calls in order. Within one block (a chain), a failing step with
    /// `on_error: stop` skips the later steps; blocks are independent of each other.
    pub async fn execute(self: &Arc<Self>, calls: &[Call], caller: Caller) -> Vec<CallOutcome> {
        let mut out = Vec::with_capacity(calls.len());
        let mut stopped: Option<(usize, String)> = None;
        for call in calls {
            if let Some((block, why)) = &stopped {
                if *block == call.block {
                    out.push(CallOutcome {
                        tool: call.tool.clone(),
                        result: Err(ToolError::Skipped {
                            tool: call.tool.clone(),
                            reason: why.clone(),
                        }),
                    });
                    continue;
                }
                stopped = None;
            }
            let args = Value::Object(call.args.clone());
            let result = self.invoke(&call.tool, args, caller.clone()).await;
            if result.is_err() && call.on_error == OnError::Stop {
                let step = call.step.map(|s| format!("step {s} ")).unwrap_or_default();
                stopped = Some((
                    call.block,
                    format!("{step}({}) failed and on_error is stop", call.tool),
                ));
            }
            out.push(CallOutcome {
                tool: call.tool.clone(),
                result,
            });
        }
        out
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
