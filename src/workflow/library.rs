//! A set of loaded workflows (`<home>/workflows/*.json`, plugin workflows), the tools they
//! become (`workflow:<id>`), and tools that run one node (`implementation.type: "node"`).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use serde_json::{Map, Value};

use super::compile::{compile, Plan};
use super::error::{Invalid, WorkflowError};
use super::format::{Workflow, WorkflowEdge, WorkflowNode, GROUP_OUTPUT};
use super::registry::NodeRegistry;
use super::run::{RunOptions, RunReport, DEFAULT_CONCURRENCY};
use super::schema::{node_tool_definition, workflow_tool_definition};
use crate::config::Settings;
use crate::hooks::Hooks;
use crate::problem::Problem;
use crate::tools::{CallContext, ToolError, ToolFuture, ToolHandler, ToolManager};

/// A workflow with its compiled plan.
#[derive(Debug)]
pub struct CompiledWorkflow {
    /// The workflow as loaded.
    pub workflow: Workflow,
    /// Ready to run.
    pub plan: Plan,
}

impl CompiledWorkflow {
    /// Validates and compiles `workflow`.
    pub fn new(workflow: Workflow, registry: &NodeRegistry) -> Result<Self, WorkflowError> {
        let plan = compile(&workflow, registry)?;
        Ok(CompiledWorkflow { workflow, plan })
    }
}

/// Limits applied to every run started through [`Workflows`] (tools and the CLI).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunDefaults {
    /// Most spawned nodes at once (`workflow.max_concurrency`, default 16).
    pub concurrency: usize,
    /// Per-node limit (`workflow.node_timeout_ms`, default none).
    pub node_timeout: Option<Duration>,
    /// Per-run limit (`workflow.timeout_ms`, default none).
    pub timeout: Option<Duration>,
}

impl Default for RunDefaults {
    fn default() -> Self {
        RunDefaults {
            concurrency: DEFAULT_CONCURRENCY,
            node_timeout: None,
            timeout: None,
        }
    }
}

impl RunDefaults {
    /// Reads `workflow.max_concurrency`, `workflow.node_timeout_ms`, `workflow.timeout_ms`.
    pub fn from_settings(s: &Settings) -> Self {
        let num = |k: &str| s.get(k).and_then(Value::as_u64).filter(|n| *n > 0);
        RunDefaults {
            concurrency: num("workflow.max_concurrency")
                .map(|n| n as usize)
                .unwrap_or(DEFAULT_CONCURRENCY),
            node_timeout: num("workflow.node_timeout_ms").map(Duration::from_millis),
            timeout: num("workflow.timeout_ms").map(Duration::from_millis),
        }
    }

    /// [`RunOptions`] carrying these limits.
    pub fn options(&self) -> RunOptions {
        RunOptions {
            concurrency: self.concurrency,
            node_timeout: self.node_timeout,
            timeout: self.timeout,
            ..RunOptions::default()
        }
    }
}

/// The workflows an engine knows, by id.
pub struct Workflows {
    registry: Arc<NodeRegistry>,
    by_id: RwLock<BTreeMap<String, Arc<CompiledWorkflow>>>,
    defaults: RunDefaults,
    /// Workflows whose file exists but failed to load: id (file stem) → first problem.
    failed: RwLock<BTreeMap<String, String>>,
    /// The manager the workflows were registered in ([`Workflows::register_tools`]): a run
    /// started with [`Workflows::run`] without a manager of its own uses it, so tools,
    /// hooks and audit see host runs too.
    engine_tools: std::sync::OnceLock<std::sync::Weak<ToolManager>>,
    /// The engine's hook registry ([`Workflows::with_hooks`]), handed to every run these
    /// workflows start (their tools, node tools, [`Workflows::run`]).
    hooks: Option<Arc<Hooks>>,
    /// The engine's home ([`Workflows::with_home`]): failure reasons name files relative
    /// to it.
    home: Option<std::path::PathBuf>,
    /// Namespaces whose plugin (or its scripts) failed to load → that problem: a workflow
    /// using their node types is unavailable by it, and is not a problem of its own.
    failed_namespaces: RwLock<BTreeMap<String, String>>,
}

impl std::fmt::Debug for Workflows {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Workflows")
            .field("ids", &self.ids())
            .finish_non_exhaustive()
    }
}

/// Turns a validation problem into a load problem pointing at the node's line.
pub fn invalid_problem(wf: &Workflow, inv: &Invalid) -> Problem {
    let mut p = Problem::new(wf.origin(), format!("workflow '{}': {inv}", wf.id));
    // A problem with an edge points at the edge's offending key, not at a node.
    if let Some((line, column)) = edge_place(wf, inv) {
        return p.at(line, Some(column));
    }
    if let Some(line) = inv
        .node()
        .and_then(|id| wf.nodes.iter().find(|n| n.id == id))
        .and_then(|n| n.line)
    {
        p = p.at(line, None);
    }
    p
}

/// Line and column of the key of the edge `inv` is about (`sourceHandle` of a missing
/// handle, `target` of a missing node, the edge itself otherwise), read from the file.
fn edge_place(wf: &Workflow, inv: &Invalid) -> Option<(u32, u32)> {
    use crate::strict::PathStep;
    let (label, key) = match inv {
        Invalid::MissingNode { edge, end, .. } => (edge, Some(*end)),
        Invalid::MissingHandle { edge, end, .. } => (edge, Some(*end)),
        Invalid::TypeMismatch { edge, .. } => (edge, None),
        _ => return None,
    };
    let index = wf.edges.iter().position(|e| e.label() == *label)?;
    let text = std::fs::read_to_string(wf.source.as_ref()?).ok()?;
    let doc = crate::strict::locate_json(&text)?;
    let item = [PathStep::Key("edges"), PathStep::Index(index)];
    key.and_then(|k| doc.place(&[item[0], item[1], PathStep::Key(k)]))
        .or_else(|| doc.place(&item))
}

fn problems_of(wf: &Workflow, e: &WorkflowError) -> Vec<Problem> {
    match e {
        WorkflowError::Invalid { problems, .. } => {
            problems.iter().map(|i| invalid_problem(wf, i)).collect()
        }
        WorkflowError::Load(p) => p.clone(),
        other => vec![Problem::new(wf.origin(), other.to_string())],
    }
}

impl Workflows {
    /// An empty set using `registry` for node types.
    pub fn new(registry: Arc<NodeRegistry>) -> Self {
        Workflows {
            registry,
            by_id: RwLock::new(BTreeMap::new()),
            defaults: RunDefaults::default(),
            failed: RwLock::new(BTreeMap::new()),
            engine_tools: std::sync::OnceLock::new(),
            hooks: None,
            home: None,
            failed_namespaces: RwLock::new(BTreeMap::new()),
        }
    }

    /// Builder: the hook registry whose workflow and node points fire around the runs
    /// these workflows start.
    pub fn with_hooks(mut self, hooks: Arc<Hooks>) -> Self {
        self.hooks = Some(hooks);
        self
    }

    /// Builder: the engine's home, so the reasons of workflows that failed to load name
    /// their files relative to it.
    pub fn with_home(mut self, home: &Path) -> Self {
        self.home = Some(home.to_path_buf());
        self
    }

    /// The hook registry runs get ([`Workflows::with_hooks`]).
    pub fn hooks(&self) -> Option<&Arc<Hooks>> {
        self.hooks.as_ref()
    }

    /// Builder: run limits.
    pub fn with_defaults(mut self, defaults: RunDefaults) -> Self {
        self.defaults = defaults;
        self
    }

    /// The run limits.
    pub fn defaults(&self) -> RunDefaults {
        self.defaults
    }

    /// The node registry (plugins add their nodes here).
    pub fn registry(&self) -> &Arc<NodeRegistry> {
        &self.registry
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, Arc<CompiledWorkflow>>> {
        // Single inserts/removes only: a poisoned map is still consistent.
        self.by_id.read().unwrap_or_else(|p| p.into_inner())
    }

    /// Validates, compiles and adds (or replaces) a workflow.
    pub fn add(&self, wf: Workflow) -> Result<Arc<CompiledWorkflow>, WorkflowError> {
        let c = Arc::new(CompiledWorkflow::new(wf, &self.registry)?);
        self.by_id
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(c.workflow.id.clone(), c.clone());
        Ok(c)
    }

    /// Loads every `*.json` in `dir` (sorted by name). A missing directory is empty.
    /// Returns every problem; broken files are left out, the others load.
    pub fn load_dir(&self, dir: &Path) -> Vec<Problem> {
        let mut problems = Vec::new();
        let entries = match std::fs::read_dir(dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return problems,
            Err(e) => return vec![Problem::new(dir, format!("cannot list workflows: {e}"))],
        };
        let mut files: Vec<_> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "json"))
            .collect();
        files.sort();
        for path in files {
            let wf = match Workflow::load(&path) {
                Ok(wf) => wf,
                Err(p) => {
                    self.record_failure(&path, None, &p);
                    problems.extend(p);
                    continue;
                }
            };
            if let Some(prev) = self.get(&wf.id) {
                problems.push(
                    Problem::new(
                        &path,
                        format!(
                            "workflow id '{}' is already used by {}",
                            wf.id,
                            prev.workflow.origin().display()
                        ),
                    )
                    .hint("set a different `id` in one of the files"),
                );
                continue;
            }
            let snapshot = wf.clone();
            if let Err(e) = self.add(wf) {
                if self.covered_by_failed_plugin(&path, &snapshot, &e) {
                    continue;
                }
                let ps = problems_of(&snapshot, &e);
                self.record_failure(&path, Some(&snapshot.id), &ps);
                problems.extend(ps);
            }
        }
        problems
    }

    /// A workflow by id (a `workflow:` prefix is accepted).
    pub fn get(&self, id: &str) -> Option<Arc<CompiledWorkflow>> {
        let id = id.strip_prefix("workflow:").unwrap_or(id);
        self.read().get(id).cloned()
    }

    /// Every id, sorted.
    pub fn ids(&self) -> Vec<String> {
        self.read().keys().cloned().collect()
    }

    /// Every workflow, sorted by id.
    pub fn list(&self) -> Vec<Arc<CompiledWorkflow>> {
        self.read().values().cloned().collect()
    }

    /// A workflow by file path (loaded and compiled now, not added) or by id.
    pub fn resolve(&self, target: &str) -> Result<Arc<CompiledWorkflow>, WorkflowError> {
        let path = Path::new(target);
        if path.is_file() {
            let wf = Workflow::load(path).map_err(WorkflowError::Load)?;
            let snapshot = wf.clone();
            return CompiledWorkflow::new(wf, &self.registry)
                .map(Arc::new)
                .map_err(|e| match e {
                    WorkflowError::Invalid { .. } => {
                        WorkflowError::Load(problems_of(&snapshot, &e))
                    }
                    other => other,
                });
        }
        self.get(target).ok_or_else(|| match self.failure(target) {
            Some(reason) => WorkflowError::Unavailable {
                workflow: target.to_string(),
                reason,
            },
            None => WorkflowError::NotFound(target.to_string()),
        })
    }

    /// Node types of namespace `ns` are missing because its plugin failed to load, as
    /// `problem` says.
    pub fn namespace_failed(&self, ns: &str, problem: &Problem) {
        let problem = match &self.home {
            Some(h) => problem.clone().relative_to(h),
            None => problem.clone(),
        };
        self.failed_namespaces
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(ns.to_string(), problem.to_string());
    }

    /// When `e` says that node types of failed plugins are missing (and names no other
    /// missing node type), records workflow `wf` (from `path`) as unavailable by that root
    /// cause and returns true: the plugin's problem is reported once, not again for every
    /// workflow using it, nor are the consequences of the missing nodes (an interface output
    /// no edge can enter any more).
    pub fn covered_by_failed_plugin(&self, path: &Path, wf: &Workflow, e: &WorkflowError) -> bool {
        let WorkflowError::Invalid { problems, .. } = e else {
            return false;
        };
        let failed = self
            .failed_namespaces
            .read()
            .unwrap_or_else(|e| e.into_inner());
        let mut reason = None;
        for p in problems {
            let Invalid::UnknownNodeType { node_type, .. } = p else {
                continue;
            };
            let ns = node_type.split_once(':').map_or("", |(n, _)| n);
            let Some(why) = failed.get(ns) else {
                return false;
            };
            reason.get_or_insert_with(|| {
                format!(
                    "it uses node type '{node_type}' of plugin '{ns}', which failed to load: {why}"
                )
            });
        }
        let Some(reason) = reason else {
            return false;
        };
        drop(failed);
        let stem = path.file_stem().map(|s| {
            s.to_string_lossy()
                .trim_end_matches(".workflow")
                .to_string()
        });
        let mut f = self.failed.write().unwrap_or_else(|e| e.into_inner());
        for key in [stem.as_deref(), Some(wf.id.as_str())]
            .into_iter()
            .flatten()
        {
            f.insert(key.to_string(), reason.clone());
        }
        true
    }

    /// Remembers that the workflow in `path` (id `id`, else the file stem) failed to load.
    fn record_failure(&self, path: &Path, id: Option<&str>, problems: &[Problem]) {
        let stem = path.file_stem().map(|s| {
            s.to_string_lossy()
                .trim_end_matches(".workflow")
                .to_string()
        });
        let Some(first) = problems.first() else {
            return;
        };
        let first = match &self.home {
            Some(h) => first.clone().relative_to(h),
            None => first.clone(),
        };
        let mut failed = self.failed.write().unwrap_or_else(|e| e.into_inner());
        for key in [stem.as_deref(), id].into_iter().flatten() {
            failed.insert(key.to_string(), first.to_string());
        }
    }

    /// Why workflow `id` failed to load, if its file exists and did.
    pub fn failure(&self, id: &str) -> Option<String> {
        let id = id.strip_prefix("workflow:").unwrap_or(id);
        let failed = self.failed.read().unwrap_or_else(|e| e.into_inner());
        failed.get(id).cloned()
    }

    /// Registers `workflow:<id>` for every workflow with an interface. Returns a problem
    /// per tool that could not be registered (e.g. the id is taken).
    pub fn register_tools(self: &Arc<Self>, tools: &Arc<ToolManager>) -> Vec<Problem> {
        let _ = self.engine_tools.set(Arc::downgrade(tools));
        let mut problems = Vec::new();
        // A workflow whose file failed to load is `tool_unavailable`, not unknown.
        for (id, reason) in self.failed.read().unwrap_or_else(|e| e.into_inner()).iter() {
            tools.mark_unavailable(format!("workflow:{id}"), reason.clone());
        }
        for c in self.list() {
            if !c.workflow.has_interface() {
                continue;
            }
            let def = workflow_tool_definition(&c.workflow);
            if let Err(e) = tools.register(def, self.tool_handler(&c.workflow.id)) {
                problems.push(Problem::new(c.workflow.origin(), e.to_string()));
            }
        }
        problems
    }

    /// A handler that runs workflow `id` (looked up at each call, so a reloaded workflow is
    /// picked up). For plugin tools with `implementation: {type: workflow, workflowId}`.
    pub fn tool_handler(self: &Arc<Self>, id: &str) -> Arc<dyn ToolHandler> {
        Arc::new(WorkflowTool {
            set: self.clone(),
            id: id.strip_prefix("workflow:").unwrap_or(id).to_string(),
        })
    }

    /// A handler that runs node type `node_type` alone (seed 002 §7.3.2).
    pub fn node_tool_handler(&self, node_type: &str) -> Arc<dyn ToolHandler> {
        Arc::new(NodeTool {
            registry: self.registry.clone(),
            node_type: node_type.to_string(),
            defaults: self.defaults,
            hooks: self.hooks.clone(),
        })
    }

    /// Registers node type `node_type` as a tool (id `tool_id`, default the node type), its
    /// parameters inferred from the node's inputs.
    pub fn register_node_tool(
        &self,
        tools: &ToolManager,
        node_type: &str,
        tool_id: Option<&str>,
    ) -> Result<(), ToolError> {
        let reg = self
            .registry
            .get(node_type)
            .ok_or_else(|| ToolError::Registration {
                id: tool_id.unwrap_or(node_type).to_string(),
                message: format!("no node type '{node_type}' is registered"),
            })?;
        tools.register(
            node_tool_definition(&reg.definition, tool_id),
            self.node_tool_handler(node_type),
        )
    }

    /// Runs a workflow (by id or path) with these arguments and options. Without
    /// `opts.tools` the run gets the manager the workflows were registered in (the engine's),
    /// and without `opts.hooks` these workflows' registry, so its tool nodes, hook points
    /// and audit work as for any other run.
    pub async fn run(
        &self,
        target: &str,
        args: Map<String, Value>,
        mut opts: RunOptions,
    ) -> Result<RunReport, WorkflowError> {
        let c = self.resolve(target)?;
        if opts.tools.is_none() {
            opts.tools = self.engine_tools.get().and_then(std::sync::Weak::upgrade);
        }
        if opts.hooks.is_none() {
            opts.hooks = self.hooks.clone();
        }
        c.plan.run(args, opts).await
    }
}

/// The tool result: the outputs object, or the bare value when there is one output.
fn tool_result(plan: &Plan, mut outputs: Map<String, Value>) -> Value {
    if plan.interface_outputs.len() == 1 {
        let key = plan.interface_outputs.0[0].0.as_str();
        outputs.remove(key).unwrap_or(Value::Null)
    } else {
        Value::Object(outputs)
    }
}

fn args_object(tool: &str, args: Value) -> Result<Map<String, Value>, ToolError> {
    match args {
        Value::Object(m) => Ok(m),
        Value::Null => Ok(Map::new()),
        other => Err(ToolError::InvalidParameters {
            tool: tool.to_string(),
            problems: vec![format!("arguments must be an object, got {other}")],
        }),
    }
}

/// The options of a run a tool call starts: the call's manager, caller, depth, token and
/// observer, the engine's `hooks`.
pub(crate) fn options_for(
    defaults: RunDefaults,
    hooks: Option<Arc<Hooks>>,
    ctx: &CallContext,
) -> RunOptions {
    RunOptions {
        tools: Some(ctx.manager.clone()),
        hooks,
        caller: ctx.caller.clone(),
        depth: ctx.depth,
        cancel: ctx.cancel.clone(),
        observer: ctx.observer.clone(),
        ..defaults.options()
    }
}

struct WorkflowTool {
    set: Arc<Workflows>,
    id: String,
}

impl ToolHandler for WorkflowTool {
    fn invoke(&self, ctx: CallContext, args: Value) -> ToolFuture {
        let set = self.set.clone();
        let id = self.id.clone();
        Box::pin(async move {
            let c = set.get(&id).ok_or_else(|| {
                ToolError::failed(&ctx.tool_id, format!("workflow '{id}' is not loaded"))
            })?;
            let args = args_object(&ctx.tool_id, args)?;
            let opts = options_for(set.defaults, set.hooks.clone(), &ctx);
            let outputs = async { c.plan.run(args, opts).await?.into_outputs() }
                .await
                .map_err(|e| e.into_tool_error(&ctx.tool_id))?;
            Ok(tool_result(&c.plan, outputs))
        })
    }
}

struct NodeTool {
    registry: Arc<NodeRegistry>,
    node_type: String,
    defaults: RunDefaults,
    hooks: Option<Arc<Hooks>>,
}

impl ToolHandler for NodeTool {
    fn invoke(&self, ctx: CallContext, args: Value) -> ToolFuture {
        let registry = self.registry.clone();
        let node_type = self.node_type.clone();
        let defaults = self.defaults;
        let hooks = self.hooks.clone();
        Box::pin(async move {
            let tool = ctx.tool_id.to_string();
            let reg = registry.get(&node_type).ok_or_else(|| {
                ToolError::failed(&tool, format!("node type '{node_type}' is not registered"))
            })?;
            let args = args_object(&tool, args)?;
            let unknown: Vec<String> = args
                .keys()
                .filter(|k| reg.definition.inputs.get(k).is_none())
                .map(|k| {
                    let known: Vec<&str> = reg.definition.inputs.keys().collect();
                    format!("unknown parameter '{k}' (parameters: {})", known.join(", "))
                })
                .collect();
            if !unknown.is_empty() {
                return Err(ToolError::InvalidParameters {
                    tool,
                    problems: unknown,
                });
            }
            // The micro-workflow of seed 002 §7.3.2: the node, with every output wired to
            // the interface outputs.
            let mut node = WorkflowNode::new("node", &node_type);
            node.input_values = args;
            let mut wf = Workflow::new(format!("node:{node_type}"))
                .node(node)
                .node(WorkflowNode::new("output", GROUP_OUTPUT));
            wf.interface_outputs = reg.definition.outputs.clone();
            for k in reg.definition.outputs.keys() {
                wf.edges.push(WorkflowEdge::new("node", k, "output", k));
            }
            let plan = compile(&wf, &registry).map_err(|e| match e {
                WorkflowError::Invalid { problems, .. } => {
                    let missing: Vec<String> = problems
                        .iter()
                        .filter_map(|p| match p {
                            Invalid::MissingInput { slot, .. } => {
                                Some(format!("missing required parameter '{slot}'"))
                            }
                            _ => None,
                        })
                        .collect();
                    if missing.len() == problems.len() {
                        ToolError::InvalidParameters {
                            tool: tool.clone(),
                            problems: missing,
                        }
                    } else {
                        ToolError::failed(
                            &tool,
                            problems
                                .iter()
                                .map(ToString::to_string)
                                .collect::<Vec<_>>()
                                .join("; "),
                        )
                    }
                }
                other => other.into_tool_error(&tool),
            })?;
            let outputs = async {
                plan.run(Map::new(), options_for(defaults, hooks, &ctx))
                    .await?
                    .into_outputs()
            }
            .await
            .map_err(|e| e.into_tool_error(&tool))?;
            Ok(tool_result(&plan, outputs))
        })
    }
}
