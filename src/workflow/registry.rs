//! The node registry: node definitions and the executors behind them.
//!
//! Plugins add nodes through [`NodeRegistry::register`] with a [`NodeDefinition`] and an
//! `Arc<dyn NodeExecutor>`; native Rust nodes use [`NodeRegistry::register_fn`].

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, RwLock};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use super::error::{NodeError, WorkflowError};
use super::types::{OrderedMap, SlotDefinition};
use crate::tools::{Caller, ToolError, ToolManager};

/// What a node returns: its outputs by slot name.
pub type NodeOutputs = Map<String, Value>;

/// The future an executor returns.
pub type NodeFuture =
    Pin<Box<dyn Future<Output = Result<NodeOutputs, NodeError>> + Send + 'static>>;

/// A node type's interface (ComfyTavern's node definition shape).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeDefinition {
    /// `namespace:Type` (a bare `Type` is joined with `namespace`).
    #[serde(rename = "type")]
    pub node_type: String,
    /// The namespace when `type` is bare (ComfyTavern stores them apart).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Human title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    /// What the node does (the tool description when the node is a tool).
    #[serde(default)]
    pub description: String,
    /// Palette category (`Text`, `Math` …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<String>,
    /// Input slots, in order.
    #[serde(default)]
    pub inputs: OrderedMap<SlotDefinition>,
    /// Output slots, in order.
    #[serde(default)]
    pub outputs: OrderedMap<SlotDefinition>,
    /// Configuration entries (`configValues`), with their defaults.
    #[serde(default, skip_serializing_if = "OrderedMap::is_empty")]
    pub config_schema: OrderedMap<SlotDefinition>,
}

/// Why a node definition has no full `namespace:Type`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NodeTypeError {
    /// `type` has no `namespace:` and no `namespace` is set.
    #[error("node type '{node_type}' has no namespace: write `namespace:Type` or set `namespace`")]
    NoNamespace {
        /// The type as written.
        node_type: String,
    },
}

impl NodeDefinition {
    /// A definition with a type and description and no slots.
    pub fn new(node_type: impl Into<String>, description: impl Into<String>) -> Self {
        NodeDefinition {
            node_type: node_type.into(),
            description: description.into(),
            ..Default::default()
        }
    }

    /// Builder: sets the category.
    pub fn category(mut self, c: impl Into<String>) -> Self {
        self.category = Some(c.into());
        self
    }

    /// Builder: adds an input.
    pub fn input(mut self, key: impl Into<String>, slot: SlotDefinition) -> Self {
        self.inputs.insert(key, slot);
        self
    }

    /// Builder: adds an output.
    pub fn output(mut self, key: impl Into<String>, slot: SlotDefinition) -> Self {
        self.outputs.insert(key, slot);
        self
    }

    /// The full `namespace:Type`, or an error when it has no namespace.
    pub fn full_type(&self) -> Result<String, NodeTypeError> {
        if self.node_type.contains(':') {
            return Ok(self.node_type.clone());
        }
        match &self.namespace {
            Some(ns) if !ns.is_empty() => Ok(format!("{ns}:{}", self.node_type)),
            _ => Err(NodeTypeError::NoNamespace {
                node_type: self.node_type.clone(),
            }),
        }
    }

    /// Configuration defaults overlaid with `values`.
    pub fn config_with(&self, values: &Map<String, Value>) -> Map<String, Value> {
        let mut out = Map::new();
        for (k, slot) in self.config_schema.iter() {
            if let Some(d) = slot.default() {
                out.insert(k.to_string(), d.clone());
            }
        }
        for (k, v) in values {
            out.insert(k.clone(), v.clone());
        }
        out
    }
}

/// How the engine drives an executor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ExecMode {
    /// The future is ready on its first poll (pure, quick Rust): run in the scheduler itself,
    /// with no task spawned. A future that turns out pending is spawned after all.
    Inline,
    /// Spawned as a tokio task. Executors doing CPU or blocking work must move it off the
    /// async workers themselves (`tokio::task::spawn_blocking`), as `core:Script` does.
    #[default]
    Async,
}

/// Carries out a node. Implemented by native nodes and by the plugin loader for Lua/Rhai
/// nodes.
pub trait NodeExecutor: Send + Sync + 'static {
    /// Runs the node once. `inputs` holds every input that has a value (from an edge,
    /// `inputValues`, or the slot's default; a `multi` input is an array); `config` is the
    /// definition's config defaults overlaid with the node's `configValues`. Returns the
    /// outputs by slot name; outputs left out are absent downstream.
    fn execute(
        &self,
        ctx: NodeContext,
        inputs: Map<String, Value>,
        config: Map<String, Value>,
    ) -> NodeFuture;

    /// How the engine should drive this executor (default [`ExecMode::Async`]).
    fn mode(&self) -> ExecMode {
        ExecMode::Async
    }
}

/// What one run shares with every node.
pub(crate) struct RunShared {
    pub(crate) workflow_id: Arc<str>,
    pub(crate) tools: Option<Arc<ToolManager>>,
    /// The engine's hook registry, for the node points (they fire when `tools` is set too).
    pub(crate) hooks: Option<Arc<crate::hooks::Hooks>>,
    pub(crate) caller: Caller,
    pub(crate) depth: u32,
    pub(crate) cancel: CancellationToken,
    pub(crate) host_data: Option<Arc<dyn std::any::Any + Send + Sync>>,
    pub(crate) observer: crate::tools::Observer,
    /// The context node hooks fire with, built by the first hooked node of the run (one
    /// per run, not one per node: it holds an allocated id and clones of the token).
    pub(crate) hook_ctx: std::sync::OnceLock<crate::tools::CallContext>,
}

/// What a node knows about its run.
#[derive(Clone)]
pub struct NodeContext {
    pub(crate) run: Arc<RunShared>,
    pub(crate) node_id: Arc<str>,
}

impl std::fmt::Debug for NodeContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeContext")
            .field("workflow", &self.run.workflow_id)
            .field("node", &self.node_id)
            .finish_non_exhaustive()
    }
}

impl NodeContext {
    /// A context outside any workflow run (for calling an executor directly, e.g. in tests).
    pub fn detached(node_id: &str, tools: Option<Arc<ToolManager>>) -> Self {
        NodeContext {
            run: Arc::new(RunShared {
                workflow_id: Arc::from("<detached>"),
                tools,
                hooks: None,
                caller: Caller::Host,
                depth: 0,
                cancel: CancellationToken::new(),
                host_data: None,
                observer: None,
                hook_ctx: std::sync::OnceLock::new(),
            }),
            node_id: Arc::from(node_id),
        }
    }

    /// Id of the running workflow.
    pub fn workflow_id(&self) -> &str {
        &self.run.workflow_id
    }

    /// Id of this node within the workflow.
    pub fn node_id(&self) -> &str {
        &self.node_id
    }

    /// Cancelled when the run is cancelled or times out; long-running nodes should watch it.
    pub fn cancel(&self) -> &CancellationToken {
        &self.run.cancel
    }

    /// Who started the run.
    pub fn caller(&self) -> &Caller {
        &self.run.caller
    }

    /// Tool-call nesting depth of the run (0 for a run started by the host).
    pub fn depth(&self) -> u32 {
        self.run.depth
    }

    /// The host's data for this run ([`RunOptions::host_data`](super::RunOptions::host_data)),
    /// when it is a `T`.
    pub fn host_data<T: Send + Sync + 'static>(&self) -> Option<&T> {
        self.run.host_data.as_deref()?.downcast_ref::<T>()
    }

    /// Who watches the run ([`RunOptions::observer`](super::RunOptions::observer)); tool
    /// calls a node makes should carry it on.
    pub fn observer(&self) -> &crate::tools::Observer {
        &self.run.observer
    }

    /// The tool registry, when the run has one.
    pub fn tools(&self) -> Option<&Arc<ToolManager>> {
        self.run.tools.as_ref()
    }

    /// Calls a tool one level deeper than the run (so tool → workflow → tool recursion
    /// meets the ToolManager's depth limit).
    pub async fn call_tool(&self, id: &str, args: Value) -> Result<Value, ToolError> {
        let Some(tools) = &self.run.tools else {
            return Err(ToolError::failed(
                id,
                "this workflow run has no tool registry; run it through an Engine",
            ));
        };
        let inv = crate::tools::Invocation {
            depth: self.run.depth + 1,
            cancel: self.run.cancel.child_token(),
            observer: self.run.observer.clone(),
            ..crate::tools::Invocation::new(Caller::Workflow(self.run.workflow_id.to_string()))
        };
        tools.invoke(id, args, inv).await
    }
}

/// A synchronous Rust function as an [`ExecMode::Inline`] executor.
pub struct FnExecutor<F>(pub F);

impl<F> NodeExecutor for FnExecutor<F>
where
    F: Fn(&Map<String, Value>, &Map<String, Value>) -> Result<NodeOutputs, NodeError>
        + Send
        + Sync
        + 'static,
{
    fn execute(
        &self,
        _ctx: NodeContext,
        inputs: Map<String, Value>,
        config: Map<String, Value>,
    ) -> NodeFuture {
        Box::pin(std::future::ready((self.0)(&inputs, &config)))
    }

    fn mode(&self) -> ExecMode {
        ExecMode::Inline
    }
}

/// A registered node type.
pub struct RegisteredNode {
    /// Its definition (with the full `namespace:Type` in `node_type`).
    pub definition: NodeDefinition,
    /// What runs it.
    pub executor: Arc<dyn NodeExecutor>,
}

#[derive(Default)]
struct Inner {
    by_type: HashMap<String, Arc<RegisteredNode>>,
    order: Vec<String>,
}

/// Node types by `namespace:Type`. Shared (`Arc`) by the engine, workflow tools and the
/// plugin loader; lookups take a read lock.
#[derive(Default)]
pub struct NodeRegistry {
    inner: RwLock<Inner>,
}

impl std::fmt::Debug for NodeRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeRegistry")
            .field("types", &self.read().order)
            .finish()
    }
}

impl NodeRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// A registry holding the built-in `core:*` nodes.
    pub fn with_builtins() -> Self {
        let r = Self::new();
        super::nodes::register_all(&r);
        r
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Inner> {
        // Every write is a single insert/remove, so a poisoned lock is still consistent.
        self.inner.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Inner> {
        self.inner.write().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers a node type. Fails when the type has no namespace or is already taken
    /// (`core:GroupInput`/`core:GroupOutput` are reserved).
    pub fn register(
        &self,
        mut definition: NodeDefinition,
        executor: Arc<dyn NodeExecutor>,
    ) -> Result<(), WorkflowError> {
        let full = definition
            .full_type()
            .map_err(|e| WorkflowError::Registration {
                node_type: definition.node_type.clone(),
                message: e.to_string(),
            })?;
        if full == super::format::GROUP_INPUT || full == super::format::GROUP_OUTPUT {
            return Err(WorkflowError::Registration {
                node_type: full,
                message: "this type is built into the engine".into(),
            });
        }
        definition.node_type = full.clone();
        let mut inner = self.write();
        if inner.by_type.contains_key(&full) {
            return Err(WorkflowError::Registration {
                node_type: full,
                message: "a node type with this name is already registered".into(),
            });
        }
        inner.order.push(full.clone());
        inner.by_type.insert(
            full,
            Arc::new(RegisteredNode {
                definition,
                executor,
            }),
        );
        Ok(())
    }

    /// Registers a synchronous Rust function `(inputs, config) -> outputs`; it runs inline
    /// in the scheduler (keep it quick and non-blocking).
    pub fn register_fn<F>(&self, definition: NodeDefinition, f: F) -> Result<(), WorkflowError>
    where
        F: Fn(&Map<String, Value>, &Map<String, Value>) -> Result<NodeOutputs, NodeError>
            + Send
            + Sync
            + 'static,
    {
        self.register(definition, Arc::new(FnExecutor(f)))
    }

    /// Removes a node type (plugin unload/reload); returns whether it existed.
    pub fn unregister(&self, node_type: &str) -> bool {
        let mut inner = self.write();
        let existed = inner.by_type.remove(node_type).is_some();
        if existed {
            inner.order.retain(|t| t != node_type);
        }
        existed
    }

    /// Looks a node type up.
    pub fn get(&self, node_type: &str) -> Option<Arc<RegisteredNode>> {
        self.read().by_type.get(node_type).cloned()
    }

    /// Every definition, in registration order.
    pub fn definitions(&self) -> Vec<NodeDefinition> {
        let inner = self.read();
        inner
            .order
            .iter()
            .filter_map(|t| inner.by_type.get(t).map(|n| n.definition.clone()))
            .collect()
    }

    /// Number of registered types.
    pub fn len(&self) -> usize {
        self.read().order.len()
    }

    /// True when no type is registered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The registered type closest to `node_type`, if one is close (for "did you mean").
    pub fn suggest(&self, node_type: &str) -> Option<String> {
        crate::suggest::closest(node_type, &self.read().order)
    }
}
