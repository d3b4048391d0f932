//! The scheduler: runs a [`Plan`] with every ready node started at once (up to a limit),
//! failures skipping only their descendants, per-node and per-run time limits,
//! cancellation, and an event stream.
//!
//! One coordinator loop owns all run state (no locks). [`ExecMode::Inline`] nodes run right
//! in that loop; other nodes are spawned into a `JoinSet` and counted against the
//! concurrency limit.

use std::collections::{HashMap, VecDeque};
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{Map, Value};
use tokio::sync::mpsc::UnboundedSender;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::compile::{value_fits, NodeKind, Plan};
use super::error::{NodeError, WorkflowError};
use super::registry::{ExecMode, NodeContext, NodeFuture, NodeOutputs, RunShared};
use super::types::DataFlowType;
use crate::tools::{Caller, NodeEvent, NodeState, Observer, ToolManager};

/// Default number of nodes running at once (spawned ones; inline nodes do not count).
pub const DEFAULT_CONCURRENCY: usize = 16;

/// How to run a workflow.
#[derive(Clone)]
pub struct RunOptions {
    /// Most spawned nodes running at once (at least 1).
    pub concurrency: usize,
    /// Limit for each spawned node (inline nodes are quick by contract and not timed).
    pub node_timeout: Option<Duration>,
    /// Limit for the whole run.
    pub timeout: Option<Duration>,
    /// Cancel to stop the run; running nodes are aborted, pending ones skipped.
    pub cancel: CancellationToken,
    /// Receives [`WorkflowEvent`]s as they happen.
    pub events: Option<UnboundedSender<WorkflowEvent>>,
    /// Tool registry for `core:ToolCall` and other tool-using nodes.
    pub tools: Option<Arc<ToolManager>>,
    /// The hook registry whose workflow and node points fire around the run (with `tools`
    /// set too: handlers get a context on that manager). The engine's runs carry the
    /// engine's ([`Workflows::run`](super::Workflows::run) fills it in).
    pub hooks: Option<Arc<crate::hooks::Hooks>>,
    /// Who runs the workflow.
    pub caller: Caller,
    /// Nesting depth of the tool call that started the run (0 at top level).
    pub depth: u32,
    /// Whether [`RunReport::nodes`] is filled in.
    pub node_report: bool,
    /// Data the host hands to every node of this run (the agent runtime passes its LLM
    /// overrides and stream sink this way); nodes read it with
    /// [`NodeContext::host_data`](super::NodeContext::host_data).
    pub host_data: Option<Arc<dyn std::any::Any + Send + Sync>>,
    /// Who watches the run (a served job, an MCP progress token): told every node's state
    /// ([`crate::tools::CallObserver::node`]) and handed on to the tools nodes call. A tool
    /// call's observer arrives here through `workflow:<id>` tools.
    pub observer: Observer,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            concurrency: DEFAULT_CONCURRENCY,
            node_timeout: None,
            timeout: None,
            cancel: CancellationToken::new(),
            events: None,
            tools: None,
            hooks: None,
            caller: Caller::Host,
            depth: 0,
            node_report: false,
            host_data: None,
            observer: None,
        }
    }
}

impl std::fmt::Debug for RunOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunOptions")
            .field("concurrency", &self.concurrency)
            .field("node_timeout", &self.node_timeout)
            .field("timeout", &self.timeout)
            .field("node_report", &self.node_report)
            .finish_non_exhaustive()
    }
}

/// Something that happened during a run, in the order it happened.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum WorkflowEvent {
    /// The run started (after validation and argument checks).
    WorkflowStarted {
        /// Workflow id.
        workflow: Arc<str>,
        /// Number of nodes.
        nodes: usize,
    },
    /// A node started.
    NodeStarted {
        /// Node id.
        node: Arc<str>,
        /// Node type.
        node_type: Arc<str>,
    },
    /// A node produced its outputs.
    NodeFinished {
        /// Node id.
        node: Arc<str>,
        /// How long it ran.
        #[serde(serialize_with = "ser_ms")]
        elapsed: Duration,
    },
    /// A node failed (error, timeout, panic, cancellation).
    NodeFailed {
        /// Node id.
        node: Arc<str>,
        /// Why.
        error: NodeError,
        /// How long it ran.
        #[serde(serialize_with = "ser_ms")]
        elapsed: Duration,
    },
    /// A node will not run.
    NodeSkipped {
        /// Node id.
        node: Arc<str>,
        /// The failed node it depends on, or why the run stopped.
        reason: String,
    },
    /// The run ended.
    WorkflowFinished {
        /// How it ended.
        status: RunStatus,
        /// Total time.
        #[serde(serialize_with = "ser_ms")]
        elapsed: Duration,
    },
}

fn ser_ms<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(ms(*d))
}

/// Milliseconds, rounded to the microsecond.
fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 1_000_000.0).round() / 1000.0
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Every node succeeded.
    Succeeded,
    /// At least one node failed (independent branches still ran).
    Failed,
    /// The run passed its time limit.
    TimedOut,
    /// The run was cancelled.
    Cancelled,
}

/// What happened to one node.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum NodeStatus {
    /// Never reached (only in a report of a run that stopped early).
    Pending,
    /// Started and not finished (only while running).
    Running,
    /// Produced its outputs.
    Succeeded,
    /// Failed.
    Failed {
        /// Why.
        error: NodeError,
    },
    /// Not run.
    Skipped {
        /// The failed node it depends on, or why the run stopped.
        reason: String,
    },
}

/// One node's line in a [`RunReport`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeReport {
    /// Node id.
    pub id: String,
    /// Node type.
    #[serde(rename = "type")]
    pub node_type: String,
    /// What happened.
    #[serde(flatten)]
    pub status: NodeStatus,
    /// How long it ran, in milliseconds, when it ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub elapsed_ms: Option<f64>,
}

/// The result of a run that started.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunReport {
    /// Workflow id.
    pub workflow: String,
    /// How it ended.
    pub status: RunStatus,
    /// Interface outputs that were produced (those fed by failed branches are absent).
    pub outputs: Map<String, Value>,
    /// Per-node status, in file order (empty unless [`RunOptions::node_report`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<NodeReport>,
    /// The first failure: node id, node type, error.
    #[serde(skip)]
    pub first_failure: Option<(String, String, NodeError)>,
    /// Time limit that was passed, for [`RunStatus::TimedOut`].
    #[serde(skip)]
    pub timeout: Option<Duration>,
    /// Total time in milliseconds.
    pub elapsed_ms: f64,
}

impl RunReport {
    /// The interface outputs when every node succeeded, else the typed failure.
    pub fn into_outputs(self) -> Result<Map<String, Value>, WorkflowError> {
        match self.status {
            RunStatus::Succeeded => Ok(self.outputs),
            RunStatus::Failed => {
                let (node, node_type, error) = self.first_failure.unwrap_or_else(|| {
                    (
                        "?".into(),
                        "?".into(),
                        NodeError::Failed("unknown failure".into()),
                    )
                });
                Err(WorkflowError::NodeFailed {
                    workflow: self.workflow,
                    node,
                    node_type,
                    error: Box::new(error),
                })
            }
            RunStatus::TimedOut => Err(WorkflowError::Timeout {
                workflow: self.workflow,
                after_ms: self.timeout.map(|d| d.as_millis() as u64).unwrap_or(0),
            }),
            RunStatus::Cancelled => Err(WorkflowError::Cancelled {
                workflow: self.workflow,
            }),
        }
    }
}

/// Checks and completes the arguments of a run: defaults filled in, strings converted to
/// the declared type where they parse (`"3"` for an INTEGER), unknown keys refused.
/// Returns the values in interface order.
pub(crate) fn bind_arguments(
    plan: &Plan,
    mut args: Map<String, Value>,
) -> Result<Vec<Option<Value>>, WorkflowError> {
    let mut problems = Vec::new();
    let mut out = Vec::with_capacity(plan.interface_inputs.len());
    for (key, slot) in plan.interface_inputs.iter() {
        let v = args.remove(key).filter(|v| !v.is_null());
        let v = match v {
            Some(v) => match coerce(slot.data_flow_type, v) {
                Ok(v) => Some(v),
                Err(v) => {
                    problems.push(format!(
                        "argument '{key}' should be {} but is {v}",
                        slot.data_flow_type
                    ));
                    None
                }
            },
            None => {
                let d = slot.default().cloned();
                if d.is_none() && slot.required {
                    problems.push(format!("missing required argument '{key}'"));
                }
                d
            }
        };
        out.push(v);
    }
    for k in args.keys() {
        let hint = crate::suggest::did_you_mean(k, plan.interface_inputs.keys());
        problems.push(format!("unknown argument '{k}'{hint}"));
    }
    if problems.is_empty() {
        Ok(out)
    } else {
        Err(WorkflowError::Arguments {
            workflow: plan.workflow_id.to_string(),
            problems,
        })
    }
}

fn coerce(ty: DataFlowType, v: Value) -> Result<Value, Value> {
    if value_fits(ty, &v) {
        return Ok(v);
    }
    let converted = match (&ty, &v) {
        (DataFlowType::String, Value::Number(_) | Value::Bool(_)) => {
            Some(Value::String(v.to_string()))
        }
        (DataFlowType::Integer, Value::String(s)) => s.trim().parse::<i64>().ok().map(Value::from),
        (DataFlowType::Integer, Value::Number(n)) => n
            .as_f64()
            .filter(|f| f.fract() == 0.0 && f.abs() < 9.0e15)
            .map(|f| Value::from(f as i64)),
        (DataFlowType::Float, Value::String(s)) => s
            .trim()
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map(Value::Number),
        (DataFlowType::Boolean, Value::String(s)) => match s.trim().to_ascii_lowercase().as_str() {
            "true" | "yes" | "1" => Some(Value::Bool(true)),
            "false" | "no" | "0" => Some(Value::Bool(false)),
            _ => None,
        },
        (DataFlowType::Object | DataFlowType::Array, Value::String(s)) => serde_json::from_str(s)
            .ok()
            .filter(|p: &Value| value_fits(ty, p)),
        _ => None,
    };
    converted.ok_or(v)
}

/// Per-run mutable state, owned by the coordinator.
struct State<'p> {
    plan: &'p Plan,
    shared: Arc<RunShared>,
    outputs: Vec<Option<Value>>,
    args: Vec<Option<Value>>,
    waiting: Vec<u32>,
    status: Vec<NodeStatus>,
    elapsed: Vec<Option<Duration>>,
    ready: VecDeque<u32>,
    result: Map<String, Value>,
    first_failure: Option<(String, String, NodeError)>,
    events: Option<UnboundedSender<WorkflowEvent>>,
    observer: Observer,
    node_timeout: Option<Duration>,
    track_time: bool,
    /// Whether node hook points have handlers (checked once per run).
    node_hooks: bool,
}

impl State<'_> {
    /// Tells the observer, if any, that node `i` is now `state`.
    #[inline]
    fn notify(&self, i: usize, state: NodeState, took: Option<Duration>) {
        if let Some(o) = &self.observer {
            let node = &self.plan.nodes[i];
            o.node(NodeEvent {
                workflow: &self.plan.workflow_id,
                node: &node.id,
                node_type: &node.node_type,
                state,
                elapsed: took.unwrap_or_default(),
            });
        }
    }

    fn emit(&self, ev: impl FnOnce() -> WorkflowEvent) {
        if let Some(tx) = &self.events {
            // A receiver that went away just stops listening; the run goes on.
            let _ = tx.send(ev());
        }
    }

    /// Gathers the inputs of node `i` by index. A required input whose sources produced
    /// nothing and that has no fallback is an error.
    fn gather(&self, i: usize) -> Result<Map<String, Value>, NodeError> {
        let node = &self.plan.nodes[i];
        let mut m = Map::new();
        for input in &node.inputs {
            let value = if input.multi && !input.sources.is_empty() {
                let items: Vec<Value> = input
                    .sources
                    .iter()
                    .filter_map(|&s| self.outputs[s as usize].clone())
                    .collect();
                if items.is_empty() {
                    input.fallback.clone()
                } else {
                    Some(Value::Array(items))
                }
            } else {
                input
                    .sources
                    .first()
                    .and_then(|&s| self.outputs[s as usize].clone())
                    .or_else(|| input.fallback.clone())
            };
            match value {
                Some(v) => {
                    m.insert(input.name.clone(), v);
                }
                None if input.required => return Err(NodeError::MissingInput(input.name.clone())),
                None => {}
            }
        }
        Ok(m)
    }

    /// Stores a finished node's outputs and readies its children.
    fn succeed(&mut self, i: usize, mut out: NodeOutputs, took: Option<Duration>) {
        let node = &self.plan.nodes[i];
        let base = node.out_base as usize;
        for (k, name) in node.outputs.iter().enumerate() {
            self.outputs[base + k] = out.remove(name);
        }
        self.finish_ok(i, took);
    }

    fn finish_ok(&mut self, i: usize, took: Option<Duration>) {
        let node = &self.plan.nodes[i];
        self.status[i] = NodeStatus::Succeeded;
        self.elapsed[i] = took;
        self.notify(i, NodeState::Succeeded, took);
        if self.events.is_some() {
            let id = node.id.clone();
            self.emit(|| WorkflowEvent::NodeFinished {
                node: id,
                elapsed: took.unwrap_or_default(),
            });
        }
        for &c in &node.children {
            let w = &mut self.waiting[c as usize];
            *w -= 1;
            if *w == 0 && matches!(self.status[c as usize], NodeStatus::Pending) {
                self.ready.push_back(c);
            }
        }
    }

    /// Records a failure and skips every descendant.
    fn fail(&mut self, i: usize, error: NodeError, took: Option<Duration>) {
        let node = &self.plan.nodes[i];
        if self.first_failure.is_none() {
            self.first_failure = Some((
                node.id.to_string(),
                node.node_type.to_string(),
                error.clone(),
            ));
        }
        let id = node.id.clone();
        self.emit(|| WorkflowEvent::NodeFailed {
            node: id.clone(),
            error: error.clone(),
            elapsed: took.unwrap_or_default(),
        });
        self.status[i] = NodeStatus::Failed { error };
        self.elapsed[i] = took;
        self.notify(i, NodeState::Failed, took);
        let reason = format!("depends on failed node '{}'", node.id);
        let mut stack: Vec<u32> = node.children.clone();
        while let Some(c) = stack.pop() {
            let c = c as usize;
            if matches!(self.status[c], NodeStatus::Pending) {
                self.status[c] = NodeStatus::Skipped {
                    reason: reason.clone(),
                };
                self.notify(c, NodeState::Skipped, None);
                let cid = self.plan.nodes[c].id.clone();
                self.emit(|| WorkflowEvent::NodeSkipped {
                    node: cid,
                    reason: reason.clone(),
                });
                stack.extend_from_slice(&self.plan.nodes[c].children);
            }
        }
    }
}

/// Polls a future once; `Err` gives it back when it is not ready.
fn poll_once(mut fut: NodeFuture) -> Result<Result<NodeOutputs, NodeError>, NodeFuture> {
    let mut cx = Context::from_waker(std::task::Waker::noop());
    match fut.as_mut().poll(&mut cx) {
        Poll::Ready(r) => Ok(r),
        Poll::Pending => Err(fut),
    }
}

fn panic_message(p: Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}

type Spawned = (u32, Result<NodeOutputs, NodeError>, Duration);

impl Plan {
    /// Runs the workflow with `args` (interface inputs by key).
    ///
    /// Fails before anything runs when the arguments do not fit the interface; otherwise
    /// returns a [`RunReport`] whatever happened to the nodes ([`RunReport::into_outputs`]
    /// turns it into the outputs or a typed error).
    pub async fn run(
        &self,
        args: Map<String, Value>,
        opts: RunOptions,
    ) -> Result<RunReport, WorkflowError> {
        use crate::hooks::points::{WORKFLOW_AFTER_IX, WORKFLOW_BEFORE_IX};
        if let Some(hooks) = super::hooks::hooked(&opts, &[WORKFLOW_BEFORE_IX, WORKFLOW_AFTER_IX]) {
            // A clone of the registry, so `opts` can move on.
            let hooks = hooks.clone();
            return super::hooks::run_hooked(self, &hooks, args, opts).await;
        }
        self.run_unhooked(args, opts).await
    }

    /// [`Plan::run`] without the workflow hook points.
    pub(crate) async fn run_unhooked(
        &self,
        args: Map<String, Value>,
        opts: RunOptions,
    ) -> Result<RunReport, WorkflowError> {
        let args = bind_arguments(self, args)?;
        Ok(self.run_bound(args, opts).await)
    }

    async fn run_bound(&self, args: Vec<Option<Value>>, mut opts: RunOptions) -> RunReport {
        let started = Instant::now();
        let cancel = opts.cancel.child_token();
        use crate::hooks::points::{NODE_AFTER_IX, NODE_BEFORE_IX};
        let node_hooks = super::hooks::hooked(&opts, &[NODE_BEFORE_IX, NODE_AFTER_IX]).is_some();
        let shared = Arc::new(RunShared {
            workflow_id: self.workflow_id.clone(),
            tools: opts.tools.clone(),
            // Moved: nothing below reads the options' registry.
            hooks: opts.hooks.take(),
            caller: opts.caller.clone(),
            depth: opts.depth,
            cancel: cancel.clone(),
            host_data: opts.host_data.clone(),
            observer: opts.observer.clone(),
            hook_ctx: std::sync::OnceLock::new(),
        });
        let n = self.nodes.len();
        let mut st = State {
            plan: self,
            shared,
            outputs: vec![None; self.slots],
            args,
            waiting: self.nodes.iter().map(|p| p.parents).collect(),
            status: vec![NodeStatus::Pending; n],
            elapsed: vec![None; n],
            ready: self.roots.iter().copied().collect(),
            result: Map::new(),
            first_failure: None,
            events: opts.events.clone(),
            observer: opts.observer.clone(),
            node_timeout: opts.node_timeout,
            track_time: opts.events.is_some() || opts.node_report || opts.observer.is_some(),
            node_hooks,
        };
        st.emit(|| WorkflowEvent::WorkflowStarted {
            workflow: self.workflow_id.clone(),
            nodes: n,
        });
        for i in 0..n {
            st.notify(i, NodeState::Pending, None);
        }
        let limit = opts.concurrency.max(1);
        let mut tasks: JoinSet<Spawned> = JoinSet::new();
        let mut task_node: HashMap<tokio::task::Id, u32> = HashMap::new();
        let mut deadline = opts.timeout.map(|d| Box::pin(tokio::time::sleep(d)));
        let mut stop: Option<RunStatus> = None;
        let mut inline_streak = 0u32;

        'run: loop {
            while tasks.len() < limit {
                let Some(i) = st.ready.pop_front() else { break };
                let i = i as usize;
                if let Some(fut) = self.start(&mut st, i) {
                    let timeout = st.node_timeout;
                    let track = st.track_time;
                    let idx = i as u32;
                    // A panicking node is contained by the join below: quietly.
                    let handle = tasks.spawn(crate::tools::Quietly(async move {
                        let t0 = track.then(Instant::now);
                        let r = match timeout {
                            Some(d) => match tokio::time::timeout(d, fut).await {
                                Ok(r) => r,
                                Err(_) => Err(NodeError::Timeout(d.as_millis() as u64)),
                            },
                            None => fut.await,
                        };
                        (idx, r, t0.map(|t| t.elapsed()).unwrap_or_default())
                    }));
                    task_node.insert(handle.id(), idx);
                } else {
                    inline_streak += 1;
                    // Long inline stretches still let other tasks, cancellation and the
                    // deadline in.
                    if inline_streak >= 1024 {
                        inline_streak = 0;
                        tokio::task::yield_now().await;
                        if cancel.is_cancelled() {
                            stop = Some(RunStatus::Cancelled);
                            break 'run;
                        }
                        if deadline.as_ref().is_some_and(|d| d.is_elapsed()) {
                            stop = Some(RunStatus::TimedOut);
                            break 'run;
                        }
                    }
                }
            }
            if tasks.is_empty() && st.ready.is_empty() {
                break;
            }
            if tasks.is_empty() {
                continue;
            }
            let joined = tokio::select! {
                biased;
                _ = cancel.cancelled() => { stop = Some(RunStatus::Cancelled); break 'run; }
                _ = async { match deadline.as_mut() { Some(d) => d.await, None => std::future::pending().await } } => {
                    stop = Some(RunStatus::TimedOut);
                    break 'run;
                }
                j = tasks.join_next_with_id() => j,
            };
            match joined {
                Some(Ok((_, (i, Ok(out), took)))) => {
                    st.succeed(i as usize, out, st.track_time.then_some(took));
                }
                Some(Ok((_, (i, Err(e), took)))) => {
                    st.fail(i as usize, e, st.track_time.then_some(took))
                }
                Some(Err(je)) => {
                    if let Some(i) = task_node.get(&je.id()).copied() {
                        let msg = if je.is_panic() {
                            NodeError::Panicked(panic_message(je.into_panic()))
                        } else {
                            NodeError::Cancelled
                        };
                        st.fail(i as usize, msg, None);
                    }
                }
                None => {}
            }
        }

        if let Some(why) = stop {
            // Tell running nodes (and the tools they call) to stop, then drop their tasks.
            cancel.cancel();
            tasks.abort_all();
            let reason = match why {
                RunStatus::TimedOut => "the workflow timed out",
                _ => "the workflow was cancelled",
            };
            for i in 0..n {
                match st.status[i] {
                    NodeStatus::Running => {
                        let id = self.nodes[i].id.clone();
                        let err = NodeError::Cancelled;
                        st.emit(|| WorkflowEvent::NodeFailed {
                            node: id,
                            error: err.clone(),
                            elapsed: Duration::ZERO,
                        });
                        st.status[i] = NodeStatus::Failed { error: err };
                        st.notify(i, NodeState::Failed, None);
                    }
                    NodeStatus::Pending => {
                        let id = self.nodes[i].id.clone();
                        st.emit(|| WorkflowEvent::NodeSkipped {
                            node: id,
                            reason: reason.into(),
                        });
                        st.status[i] = NodeStatus::Skipped {
                            reason: reason.into(),
                        };
                        st.notify(i, NodeState::Skipped, None);
                    }
                    _ => {}
                }
            }
        }
        // A GroupOutput behind a failed branch did not run; the outputs its healthy inputs
        // carry are still results.
        for (i, node) in self.nodes.iter().enumerate() {
            if matches!(node.kind, NodeKind::GroupOutput) && st.status[i] != NodeStatus::Succeeded {
                for input in &node.inputs {
                    let v = input
                        .sources
                        .iter()
                        .find_map(|&s| st.outputs[s as usize].clone());
                    if let Some(v) = v {
                        st.result.entry(input.name.clone()).or_insert(v);
                    }
                }
            }
        }
        let status = stop.unwrap_or(if st.first_failure.is_some() {
            RunStatus::Failed
        } else {
            RunStatus::Succeeded
        });
        let elapsed = started.elapsed();
        st.emit(|| WorkflowEvent::WorkflowFinished { status, elapsed });
        let nodes = if opts.node_report {
            self.nodes
                .iter()
                .zip(st.status)
                .zip(st.elapsed)
                .map(|((pn, status), el)| NodeReport {
                    id: pn.id.to_string(),
                    node_type: pn.node_type.to_string(),
                    status,
                    elapsed_ms: el.map(ms),
                })
                .collect()
        } else {
            Vec::new()
        };
        RunReport {
            workflow: self.workflow_id.to_string(),
            status,
            outputs: st.result,
            nodes,
            first_failure: st.first_failure,
            timeout: opts.timeout,
            elapsed_ms: ms(elapsed),
        }
    }

    /// Starts node `i`: finishes it on the spot when it can, or returns the future to spawn.
    fn start(&self, st: &mut State<'_>, i: usize) -> Option<NodeFuture> {
        let node = &self.nodes[i];
        st.status[i] = NodeStatus::Running;
        st.notify(i, NodeState::Running, None);
        if st.events.is_some() {
            let (id, ty) = (node.id.clone(), node.node_type.clone());
            st.emit(|| WorkflowEvent::NodeStarted {
                node: id,
                node_type: ty,
            });
        }
        let t0 = st.track_time.then(Instant::now);
        let took = || t0.map(|t| t.elapsed());
        match &node.kind {
            NodeKind::GroupInput => {
                let base = node.out_base as usize;
                for (k, v) in st.args.iter().enumerate() {
                    st.outputs[base + k] = v.clone();
                }
                st.finish_ok(i, took());
                None
            }
            NodeKind::GroupOutput => {
                match st.gather(i) {
                    Ok(m) => {
                        st.result.extend(m);
                        st.finish_ok(i, took());
                    }
                    Err(e) => st.fail(i, e, took()),
                }
                None
            }
            NodeKind::Exec(exec, mode) => {
                let inputs = match st.gather(i) {
                    Ok(m) => m,
                    Err(e) => {
                        st.fail(i, e, took());
                        return None;
                    }
                };
                let ctx = NodeContext {
                    run: st.shared.clone(),
                    node_id: node.id.clone(),
                };
                let config = node.config.clone();
                // With node hooks the node runs inside the hooked future; an inline node
                // stays inline when its hooks finish at once (script hooks run in place).
                let hooked = st.node_hooks.then(|| node.node_type.clone());
                let inline = *mode != ExecMode::Async;
                let make = move || match hooked {
                    Some(t) => {
                        super::hooks::hooked_node(exec.clone(), ctx, inputs, config, t, inline)
                    }
                    None => exec.execute(ctx, inputs, config),
                };
                if *mode == ExecMode::Async {
                    return Some(make());
                }
                // A synchronous executor runs when called: the panic guard covers the call.
                let polled = crate::tools::quiet(|| {
                    std::panic::catch_unwind(AssertUnwindSafe(|| poll_once(make())))
                });
                match polled {
                    Ok(Ok(Ok(out))) => st.succeed(i, out, took()),
                    Ok(Ok(Err(e))) => st.fail(i, e, took()),
                    Ok(Err(pending)) => return Some(pending),
                    Err(p) => st.fail(i, NodeError::Panicked(panic_message(p)), took()),
                }
                None
            }
        }
    }
}
