//! The deliberation loop of seed 002 §3.3: context → deliberation workflow → text →
//! protocol reader → inventory check → dispatch → Observations → next turn.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;
use serde_json::{json, Map, Value};

use super::call_format::CallFormat;
use super::constrain::{self, Admit, ToolShape};
use super::events::{self, EventBus};
use super::llm::{
    ChatBackend, Constrain, ConstrainAnswer, ConstrainShape, Constraint, LlmRunContext,
    LlmSettings, ScriptedBackend, CHAT_NODE,
};
use super::manual::{example, how_to_call, render_teaching, tool_json, ManualStyle, RESULTS_NOTE};
use super::profile::{build_inventory, AgentProfile, Inventory};
use super::state::PrivateState;
use super::tools::AgentTools;
use super::AgentError;
use crate::protocol::{self, Call, Diagnostic, Format, OnError, Parsed, Severity, StreamReader};
use crate::store::{MemoryWorldState, WorldState};
use crate::tools::{CallOutcome, Caller, ToolError, ToolManager};
use crate::workflow::{CompiledWorkflow, RunOptions, Workflow, Workflows};

/// The bundled deliberation workflow (messages → `llm:Chat` → text).
const DEFAULT_DELIBERATION: &str = include_str!("default_deliberation.json");

/// The agent's hook points (`agent:before-deliberate`, `agent:after-parse`), fired through
/// the engine's hooks (see `docs/hooks.md`). Both are `before` points: a handler may veto.
pub mod hook_seam {
    use std::sync::Arc;

    use serde_json::{json, Map, Value};

    use crate::hooks::points::{
        AgentAfterParse, AgentBeforeDeliberate, AGENT_AFTER_PARSE_IX, AGENT_BEFORE_DELIBERATE_IX,
    };
    use crate::hooks::{take_map, Hooks};
    use crate::protocol::Parsed;
    use crate::tools::{CallContext, Caller, ToolError, ToolManager};

    fn ctx(agent: &str, tools: &Arc<ToolManager>) -> CallContext {
        let caller = Caller::Model(Some(agent.to_string()));
        CallContext::top(format!("agent:{agent}"), caller, tools.clone())
    }

    /// `agent:before-deliberate` with the workflow inputs (messages, states, manual …);
    /// handlers may replace `inputs`. A veto is returned as the error.
    pub async fn before_deliberate(
        hooks: &Hooks,
        tools: &Arc<ToolManager>,
        agent: &str,
        turn: u32,
        inputs: &mut Map<String, Value>,
    ) -> Result<(), ToolError> {
        if !hooks.active_at(AGENT_BEFORE_DELIBERATE_IX) {
            return Ok(());
        }
        let mut ev = AgentBeforeDeliberate {
            agent,
            turn: json!(turn),
            inputs: Value::Object(std::mem::take(inputs)),
        };
        let fired = ev.fire(hooks, &ctx(agent, tools)).await;
        // The inputs come back, replaced or not, vetoed or not.
        *inputs = take_map(&mut ev.inputs);
        fired.map(|_| ())
    }

    /// `agent:after-parse` with the output and what was read from it. A veto is returned as
    /// the error (the runtime then refuses every call that has not started).
    pub async fn after_parse(
        hooks: &Hooks,
        tools: &Arc<ToolManager>,
        agent: &str,
        turn: u32,
        output: &str,
        parsed: &Parsed,
    ) -> Result<(), ToolError> {
        if !hooks.active_at(AGENT_AFTER_PARSE_IX) {
            return Ok(());
        }
        let calls: Vec<Value> = parsed
            .calls
            .iter()
            .map(|c| json!({"tool": c.tool, "args": c.args}))
            .collect();
        let mut ev = AgentAfterParse {
            agent,
            turn: json!(turn),
            output,
            response_text: &parsed.response_text,
            calls: Value::Array(calls),
        };
        ev.fire(hooks, &ctx(agent, tools)).await.map(|_| ())
    }
}

/// Run limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Most turns per run (default 8).
    pub max_turns: u32,
    /// Most tool calls per run (default 32).
    pub max_tool_calls: u32,
    /// Most runs of one tool with the same arguments per run (default 3).
    pub repeat_limit: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_turns: 8,
            max_tool_calls: 32,
            repeat_limit: 3,
        }
    }
}

/// Why a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The model answered without calling anything (and without malformed calls).
    NoCalls,
    /// The turn limit was reached.
    MaxTurns,
    /// The tool-call budget was spent.
    ToolBudget,
    /// The same tool with the same arguments ran `repeat_limit` times.
    RepeatGuard,
    /// A turn could not finish (the model was unreachable …); see [`AgentRun::error`].
    Error,
}

impl StopReason {
    /// `no_calls`, `max_turns`, `tool_budget`, `repeat_guard` or `error`.
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::NoCalls => "no_calls",
            StopReason::MaxTurns => "max_turns",
            StopReason::ToolBudget => "tool_budget",
            StopReason::RepeatGuard => "repeat_guard",
            StopReason::Error => "error",
        }
    }
}

/// One call of a turn and what came of it.
#[derive(Debug, Clone, PartialEq)]
pub struct CallRecord {
    /// The call as parsed.
    pub call: Call,
    /// Its value or error (the Observation is `outcome.observation()`).
    pub outcome: CallOutcome,
    /// When it started, in ms from the start of the turn (`None`: refused or skipped).
    pub started_ms: Option<f64>,
    /// When it ended, in ms from the start of the turn.
    pub finished_ms: f64,
}

/// One deliberation turn.
#[derive(Debug, Clone, PartialEq)]
pub struct Turn {
    /// 1-based within its run.
    pub index: u32,
    /// What the model was given as this turn's user message.
    pub input: String,
    /// The model's whole output.
    pub output: String,
    /// What was read from it (prose, calls, diagnostics).
    pub parsed: Parsed,
    /// Each call with its outcome, in order.
    pub results: Vec<CallRecord>,
    /// The Observation lines fed to the next turn (malformed output first, then calls).
    pub observations: Vec<String>,
    /// Whether the output arrived as a stream (calls then ran as their blocks closed).
    pub streamed: bool,
    /// When the model's output ended, in ms from the start of the turn.
    pub output_ended_ms: f64,
}

/// A whole run.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentRun {
    /// Every turn taken.
    pub turns: Vec<Turn>,
    /// Why it ended.
    pub stop_reason: StopReason,
    /// The error that ended it, for [`StopReason::Error`].
    pub error: Option<AgentError>,
}

/// What an agent runtime takes from the engine that builds it ([`AgentRuntime::builder`] and
/// `Engine::agent`, both in `engine/agent.rs`): the agent module knows no `Engine`.
#[derive(Clone, Copy)]
pub(crate) struct EngineParts<'e> {
    pub(crate) home: &'e Path,
    pub(crate) settings: &'e crate::config::Settings,
    pub(crate) tools: &'e Arc<ToolManager>,
    pub(crate) workflows: &'e Arc<Workflows>,
    pub(crate) hooks: &'e Arc<crate::hooks::Hooks>,
}

/// Configures an [`AgentRuntime`].
pub struct AgentRuntimeBuilder<'e> {
    engine: EngineParts<'e>,
    profile: AgentProfile,
    world: Option<Arc<dyn WorldState>>,
    bus: Option<EventBus>,
    llm: LlmSettings,
    backend: Option<Arc<dyn ChatBackend>>,
    max_turns: Option<u32>,
    max_tool_calls: Option<u32>,
    repeat_limit: Option<u32>,
    call_format: Option<CallFormat>,
}

impl<'e> AgentRuntimeBuilder<'e> {
    /// The format the model writes calls in; wins over the profile's `call_format` and
    /// `[llm] call_format`. The manual teaches it and each turn is read in it first.
    pub fn call_format(mut self, format: CallFormat) -> Self {
        self.call_format = Some(format);
        self
    }

    /// The world-state store (default: an empty [`MemoryWorldState`]).
    pub fn world_state(mut self, world: Arc<dyn WorldState>) -> Self {
        self.world = Some(world);
        self
    }

    /// The event bus (default: a new one; share one between agents to let them hear each
    /// other's `PublishEventTool` events).
    pub fn event_bus(mut self, bus: EventBus) -> Self {
        self.bus = Some(bus);
        self
    }

    /// Model settings that win over the node, the profile and `tavern.toml`. A `base_url`
    /// of `scripted:FILE` selects the scripted backend, `local:PATH.gguf` a model run in
    /// this process (the `llm-local` feature; PATH relative to the home).
    pub fn llm(mut self, overrides: LlmSettings) -> Self {
        self.llm = overrides;
        self
    }

    /// A backend used instead of the HTTP one.
    pub fn backend(mut self, backend: Arc<dyn ChatBackend>) -> Self {
        self.backend = Some(backend);
        self
    }

    /// Overrides the profile's `max_turns`.
    pub fn max_turns(mut self, n: u32) -> Self {
        self.max_turns = Some(n);
        self
    }

    /// Overrides the profile's `max_tool_calls`.
    pub fn max_tool_calls(mut self, n: u32) -> Self {
        self.max_tool_calls = Some(n);
        self
    }

    /// Overrides the profile's `repeat_limit`.
    pub fn repeat_limit(mut self, n: u32) -> Self {
        self.repeat_limit = Some(n);
        self
    }

    /// Resolves the inventory, compiles the deliberation workflow and writes the manual.
    pub fn build(self) -> Result<AgentRuntime, AgentError> {
        let engine = self.engine;
        let profile = self.profile;
        let world = self
            .world
            .unwrap_or_else(|| MemoryWorldState::new(Value::Object(Map::new())));
        let bus = self.bus.unwrap_or_default();
        let private = PrivateState::new(profile.initial_private_state_values.clone());
        let env = AgentTools {
            agent: profile.id.clone(),
            private: private.clone(),
            world: world.clone(),
            bus: bus.clone(),
        };
        let inventory = build_inventory(&profile, engine.tools, &env)?;
        inventory.manager.set_list_nodes(engine.tools.lists_nodes());
        let deliberation = deliberation_workflow(engine.workflows, &profile)?;
        let chat_nodes = deliberation
            .workflow
            .nodes
            .iter()
            .filter(|n| n.node_type == CHAT_NODE)
            .count();
        let base = LlmSettings::from_settings(engine.settings)
            .map_err(|e| AgentError::Config(e.to_string()))?;
        let merged = base.overlay(&profile.llm).overlay(&self.llm);
        let backend = match (self.backend, merged.base_url.as_deref()) {
            (Some(b), _) => Some(b),
            // One scripted backend per runtime, so its replies go one per turn.
            (None, Some(u)) if u.starts_with("scripted:") => {
                let file = &u["scripted:".len()..];
                Some(Arc::new(
                    // Relative to the home, like every relative path in settings.
                    {
                        let path = engine.home.join(file);
                        let shown = crate::problem::shown_path(&path, engine.home);
                        ScriptedBackend::from_file_named(&path, shown)
                    }
                    .map_err(|e| AgentError::Config(e.to_string()))?,
                ) as Arc<dyn ChatBackend>)
            }
            // A model run in this process (`llm-local`), loaded once and shared.
            (None, Some(u)) if u.starts_with(crate::agent::llm::LOCAL) => Some(
                crate::agent::llm::local_backend(
                    &engine.home.join(u[crate::agent::llm::LOCAL.len()..].trim()),
                )
                .map_err(|e| AgentError::Config(e.to_string()))?,
            ),
            _ => None,
        };
        let call_format = match self.call_format.or(profile.call_format) {
            Some(c) => Some(c),
            None => llm_call_format(engine.settings)?,
        };
        let style = profile.manual_style.unwrap_or(match call_format {
            Some(c) if c == CallFormat::ACTION => ManualStyle::Action,
            Some(_) => ManualStyle::Tam,
            None => match profile.tool_call_format {
                Some(Format::Tam) | Some(Format::Vcp) => ManualStyle::Tam,
                Some(Format::Json) => ManualStyle::Openai,
                _ => ManualStyle::Action,
            },
        });
        let reading = Reading::of(&profile, call_format)?;
        let manual = render_teaching(&inventory, style, call_format);
        let constrained = Constrained::of(&profile, &merged, &inventory, style, call_format)?;
        let native_tools = if style == ManualStyle::Openai {
            inventory
                .manager
                .model_list()
                .iter()
                .map(|t| tool_json(t, style))
                .collect()
        } else {
            Vec::new()
        };
        let limits = Limits {
            max_turns: self.max_turns.or(profile.max_turns).unwrap_or(8).max(1),
            max_tool_calls: self.max_tool_calls.or(profile.max_tool_calls).unwrap_or(32),
            repeat_limit: self
                .repeat_limit
                .or(profile.repeat_limit)
                .unwrap_or(3)
                .max(1),
        };
        let inputs: Vec<String> = deliberation
            .plan
            .interface_inputs()
            .keys()
            .map(str::to_string)
            .collect();
        Ok(AgentRuntime {
            llm: LlmRunContext {
                profile: profile.llm.clone(),
                overrides: self.llm,
                backend,
                sink: None,
                constraint: None,
                stop: Vec::new(),
            },
            dispatch: Dispatcher {
                agent: profile.id.clone(),
                tools: inventory.manager.clone(),
                engine: engine.tools.clone(),
                bus: bus.clone(),
                limits,
                used: 0,
                seen: HashMap::new(),
                budget_hit: false,
                repeat_hit: false,
            },
            hooks: engine.hooks.clone(),
            profile,
            inventory,
            deliberation,
            stream_ok: chat_nodes == 1,
            inputs,
            run_defaults: engine.workflows.defaults().options(),
            manual,
            style,
            native_tools,
            reading,
            call_format,
            constrained,
            private,
            world,
            bus,
            history: Vec::new(),
            pending: Vec::new(),
        })
    }
}

/// How a turn's output is read: in `first` (streamed, calls running as they close), then,
/// when that finds no call, in `then` (an agent taught a `call_format` still reads every
/// other format: `auto`, unless `tool_call_format` names one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Reading {
    first: Format,
    then: Option<Format>,
}

impl Reading {
    fn of(profile: &AgentProfile, call_format: Option<CallFormat>) -> Result<Self, AgentError> {
        let read = profile.tool_call_format.unwrap_or(Format::Auto);
        let Some(calls) = call_format else {
            return Ok(Reading {
                first: read,
                then: None,
            });
        };
        let first = calls.format();
        if read == first {
            return Ok(Reading { first, then: None });
        }
        if read != Format::Auto {
            let mut p = crate::problem::Problem::new(
                &profile.origin,
                format!(
                    "agent '{}': tool_call_format '{read}' reads only {read} calls, but call_format '{calls}' teaches the model to write {calls}",
                    profile.id
                ),
            )
            .hint(format!("leave tool_call_format out (or set it to `auto` or `{calls}`): a call_format is read first and every other format after it"));
            if let Some(line) = profile.line_of("tool_call_format") {
                p = p.at(line, None);
            }
            return Err(AgentError::Load(vec![p]));
        }
        Ok(Reading {
            first,
            then: Some(read),
        })
    }

    /// `first` when it found calls, else the text read again in `then`; when neither finds
    /// a call and both find something malformed, `first`'s diagnostics, which explain the
    /// mistake in the format the manual teaches (a cut-off JSON call is told to write
    /// `"arguments"`, not another format's `"parameters"`).
    fn then_if_needed(&self, first: Parsed, output: &str) -> Parsed {
        match self.then {
            Some(then) if first.calls.is_empty() => {
                let again = protocol::parse(output, then);
                if again.calls.is_empty() && again.has_errors() && first.has_errors() {
                    first
                } else {
                    again
                }
            }
            _ => first,
        }
    }
}

/// An agent's constraint (`constrain`, issue 38): built once from its inventory and call
/// format, sent on every turn that should call, with the format's stop sequences on every
/// turn.
#[derive(Debug, Clone, Default)]
struct Constrained {
    constraint: Option<Constraint>,
    /// The turn after Observations, when answers follow calls (`constrain_answer`).
    answer: Option<Constraint>,
    stop: Vec<String>,
    /// The turn after Observations is left free for the answer.
    answer_follows_calls: bool,
}

impl Constrained {
    fn of(
        profile: &AgentProfile,
        llm: &LlmSettings,
        inventory: &Inventory,
        style: ManualStyle,
        call_format: Option<CallFormat>,
    ) -> Result<Self, AgentError> {
        let mode = llm.constrain.unwrap_or_default();
        if mode == Constrain::Off {
            return Ok(Constrained::default());
        }
        // The format the manual teaches; the JSON styles without a call_format teach the
        // server's function calling, which has its own tool_choice.
        let teach = call_format.or(match style {
            ManualStyle::Action | ManualStyle::Short => Some(CallFormat::ACTION),
            ManualStyle::Tam => Some(CallFormat::TAM),
            ManualStyle::Openai | ManualStyle::Anthropic => None,
        });
        let Some(teach) = teach else {
            return Err(AgentError::Config(format!(
                "agent '{}': constrain = \"{}\" needs a call format to constrain, and manual_style {:?} teaches function calling; set call_format (e.g. \"json\") or constrain = \"off\"",
                profile.id,
                serde_json::to_value(mode).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default(),
                style
            )));
        };
        let tools = inventory.manager.model_list();
        let shapes: Vec<ToolShape<'_>> = tools
            .iter()
            .map(|t| ToolShape {
                id: t.id(),
                wire: t.wire_name(),
                params: &t.definition.parameters,
            })
            .collect();
        let admit = match mode {
            Constrain::CallOrText => Admit::CallOrText,
            _ => Admit::Call,
        };
        let constraint = constrain::build(teach, &shapes, admit);
        let answer = match llm.constrain_answer.unwrap_or_default() {
            ConstrainAnswer::Off => None,
            ConstrainAnswer::Text => constrain::build(teach, &shapes, Admit::Text),
        };
        let shape = llm.constrain_shape.unwrap_or_default();
        if mode == Constrain::Call
            && shape != ConstrainShape::Grammar
            && constraint.as_ref().is_some_and(|c| c.json_schema.is_none())
        {
            return Err(AgentError::Config(format!(
                "agent '{}': constrain_shape {shape:?} sends a JSON schema of the whole answer, and call format '{teach}' is not one JSON document; use constrain_shape = \"grammar\" (llama.cpp) or call_format \"json\"",
                profile.id
            )));
        }
        if constraint.is_none() && !shapes.is_empty() {
            tracing::warn!(agent = %profile.id, "call format '{teach}' has no grammar yet; its turns run unconstrained");
        }
        Ok(Constrained {
            constraint,
            answer,
            stop: constrain::stop_sequences(teach),
            answer_follows_calls: llm.answer_follows_calls.unwrap_or(true),
        })
    }

    /// The constraint of a turn (`after_observations`: the turn's input is the last turn's
    /// Observations).
    fn of_turn(&self, after_observations: bool) -> Option<&Constraint> {
        if after_observations && self.answer_follows_calls {
            self.answer.as_ref()
        } else {
            self.constraint.as_ref()
        }
    }
}

/// `[llm] call_format` of `tavern.toml` (or `--set llm.call_format=…`): the call format of
/// every agent whose profile names none. A bad name is a problem where it was set.
fn llm_call_format(settings: &crate::config::Settings) -> Result<Option<CallFormat>, AgentError> {
    const KEY: &str = "llm.call_format";
    let Some(v) = settings.get(KEY) else {
        return Ok(None);
    };
    let parsed = match v {
        Value::String(s) => s.parse::<CallFormat>(),
        other => Err(format!("call_format must be a format name, not {other}")),
    };
    parsed.map(Some).map_err(|why| {
        let msg = format!("[llm] call_format: {why}");
        let p = match settings.origin(KEY) {
            Some(o) => o.problem(KEY, msg),
            None => crate::problem::Problem::new("tavern.toml", msg),
        };
        AgentError::Load(vec![p.hint(
            "name the format the model writes calls in, or remove the setting",
        )])
    })
}

fn deliberation_workflow(
    workflows: &Arc<Workflows>,
    profile: &AgentProfile,
) -> Result<Arc<CompiledWorkflow>, AgentError> {
    match profile.core_deliberation_workflow_id.as_deref() {
        Some(id) if !id.trim().is_empty() => {
            let id = id.trim();
            // A path is taken relative to the profile's directory first.
            let near = profile.origin.parent().map(|d| d.join(id));
            let target = match &near {
                Some(p) if p.is_file() => p.to_string_lossy().into_owned(),
                _ => id.to_string(),
            };
            workflows.resolve(&target).map_err(|e| {
                let msg = format!(
                    "agent '{}': core_deliberation_workflow_id '{id}': {e}",
                    profile.id
                );
                AgentError::Load(vec![crate::problem::Problem::new(&profile.origin, msg)
                    .hint("name a workflow in workflows/ (its id) or a workflow file; leave the field out to use the bundled default")])
            })
        }
        _ => {
            let wf = Workflow::from_json(
                DEFAULT_DELIBERATION,
                Path::new("<bundled default deliberation>"),
            )
            .map_err(AgentError::Load)?;
            CompiledWorkflow::new(wf, workflows.registry())
                .map(Arc::new)
                .map_err(|e| AgentError::Config(format!("the bundled deliberation workflow: {e}")))
        }
    }
}

/// Runs one agent: its inventory, states, history and limits.
pub struct AgentRuntime {
    profile: AgentProfile,
    inventory: Inventory,
    deliberation: Arc<CompiledWorkflow>,
    /// Whether streamed text can be read while the workflow runs (exactly one `llm:Chat`).
    stream_ok: bool,
    /// The deliberation workflow's interface inputs.
    inputs: Vec<String>,
    run_defaults: RunOptions,
    manual: String,
    style: ManualStyle,
    native_tools: Vec<Value>,
    reading: Reading,
    /// The format the manual teaches, when one was chosen (`call_format`).
    call_format: Option<CallFormat>,
    /// What the model may write on a call turn (`constrain`).
    constrained: Constrained,
    private: Arc<PrivateState>,
    world: Arc<dyn WorldState>,
    bus: EventBus,
    llm: LlmRunContext,
    dispatch: Dispatcher,
    hooks: Arc<crate::hooks::Hooks>,
    /// The conversation so far (user inputs and model outputs).
    history: Vec<Value>,
    /// Observations waiting for the next turn.
    pending: Vec<String>,
}

impl std::fmt::Debug for AgentRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentRuntime")
            .field("agent", &self.profile.id)
            .field("style", &self.style)
            .field("reading", &self.reading)
            .finish_non_exhaustive()
    }
}

fn ms(d: std::time::Duration) -> f64 {
    (d.as_secs_f64() * 1_000_000.0).round() / 1000.0
}

impl AgentRuntime {
    /// Starts configuring a runtime for `profile` on the engine's parts (what
    /// `AgentRuntime::builder`, in `engine/agent.rs`, hands over).
    pub(crate) fn builder_on(
        engine: EngineParts<'_>,
        profile: AgentProfile,
    ) -> AgentRuntimeBuilder<'_> {
        AgentRuntimeBuilder {
            engine,
            profile,
            world: None,
            bus: None,
            llm: LlmSettings::default(),
            backend: None,
            max_turns: None,
            max_tool_calls: None,
            repeat_limit: None,
            call_format: None,
        }
    }

    /// The profile.
    pub fn profile(&self) -> &AgentProfile {
        &self.profile
    }

    /// The inventory's tool manager (exactly the tools the agent may call).
    pub fn inventory(&self) -> &Arc<ToolManager> {
        &self.inventory.manager
    }

    /// The manual the model is given.
    pub fn manual(&self) -> &str {
        &self.manual
    }

    /// The manual in another style (teaching the same call format).
    pub fn manual_in(&self, style: ManualStyle) -> String {
        if style == self.style {
            self.manual.clone()
        } else {
            render_teaching(&self.inventory, style, self.call_format)
        }
    }

    /// The format the model is taught to write calls in (`call_format`), when one was
    /// chosen; otherwise the manual teaches its style's own (`<ACTION>` or TAM).
    pub fn call_format(&self) -> Option<CallFormat> {
        self.call_format
    }

    /// What the model may write on a turn (`constrain`): `after_observations` is a turn
    /// whose input is the last turn's Observations, left free when answers follow calls.
    /// `None`: the turn is not constrained.
    pub fn constraint(&self, after_observations: bool) -> Option<&Constraint> {
        self.constrained.of_turn(after_observations)
    }

    /// The stop sequences sent with every turn of a constrained agent.
    pub fn stop_sequences(&self) -> &[String] {
        &self.constrained.stop
    }

    /// How each turn's output is read: the first format, and the one read when the first
    /// finds no call (`None`: only the first).
    pub fn reading(&self) -> (Format, Option<Format>) {
        (self.reading.first, self.reading.then)
    }

    /// The event bus (subscribe here for `agent:*` events).
    pub fn events(&self) -> &EventBus {
        &self.bus
    }

    /// The agent's private state.
    pub fn private_state(&self) -> &Arc<PrivateState> {
        &self.private
    }

    /// The world state.
    pub fn world_state(&self) -> &Arc<dyn WorldState> {
        &self.world
    }

    /// The run limits.
    pub fn limits(&self) -> Limits {
        self.dispatch.limits
    }

    /// Forgets the conversation and pending Observations (states are kept).
    pub fn reset(&mut self) {
        self.history.clear();
        self.pending.clear();
    }

    fn system_prompt(&self) -> String {
        let p = &self.profile;
        let mut s = String::new();
        if !p.description.trim().is_empty() {
            s.push_str(p.description.trim());
        } else {
            s.push_str(&format!("You are {}.", p.name.as_deref().unwrap_or(&p.id)));
        }
        if let Some(i) = p.instructions.as_deref().filter(|i| !i.trim().is_empty()) {
            s.push_str("\n\n");
            s.push_str(i.trim());
        }
        s.push_str("\n\n");
        match self.style {
            ManualStyle::Openai => {
                s.push_str("Call tools through the function-calling interface. ");
                s.push_str(RESULTS_NOTE.trim_end());
            }
            ManualStyle::Anthropic => {
                s.push_str("You have access to these tools (JSON definitions):\n");
                s.push_str(&self.manual);
                match self.call_format {
                    Some(calls) => {
                        s.push('\n');
                        if let Some(t) = self.inventory.manager.list().first() {
                            s.push_str("For example:\n");
                            s.push_str(&example(t, calls));
                            s.push_str("\n\n");
                        }
                        s.push_str(how_to_call(calls).trim_end());
                    }
                    None => {
                        s.push_str("\nTo call one, answer with only a JSON object {\"type\": \"tool_use\", \"name\": \"<name>\", \"input\": {…}}. If no action is needed, answer in plain text.\n");
                        s.push_str(RESULTS_NOTE.trim_end());
                    }
                }
            }
            _ => s.push_str(&self.manual),
        }
        s.push_str("\n\nYour private state: ");
        s.push_str(&self.private.snapshot().to_string());
        if let Some(w) = self.world.snapshot() {
            s.push_str("\nWorld state: ");
            s.push_str(&w.to_string());
        }
        s
    }

    /// The inputs the deliberation workflow may take (only those it declares are passed).
    fn context(&self, turn: u32, input: &str) -> Map<String, Value> {
        let mut all = Map::new();
        let want = |k: &str| self.inputs.iter().any(|i| i == k);
        let system = self.system_prompt();
        if want("messages") {
            let mut msgs = Vec::with_capacity(self.history.len() + 2);
            msgs.push(json!({"role": "system", "content": system}));
            msgs.extend(self.history.iter().cloned());
            msgs.push(json!({"role": "user", "content": input}));
            all.insert("messages".into(), Value::Array(msgs));
        }
        if want("tools") && !self.native_tools.is_empty() {
            all.insert("tools".into(), Value::Array(self.native_tools.clone()));
        }
        let mut put = |k: &str, v: &dyn Fn() -> Value| {
            if want(k) {
                all.insert(k.into(), v());
            }
        };
        put("system", &|| json!(system));
        put("message", &|| json!(input));
        put("manual", &|| json!(self.manual));
        put("private_state", &|| self.private.snapshot());
        put("world_state", &|| {
            self.world.snapshot().unwrap_or(Value::Null)
        });
        put("history", &|| Value::Array(self.history.clone()));
        put("observations", &|| json!(self.pending.join("\n")));
        put("turn", &|| json!(turn));
        put("agent_id", &|| json!(self.profile.id));
        all
    }

    /// Runs one turn. `message` is the user's message; `None` continues with the pending
    /// Observations of the last turn.
    pub async fn turn(&mut self, message: Option<&str>) -> Result<Turn, AgentError> {
        let index = (self.history.len() / 2) as u32 + 1;
        self.turn_numbered(message, index).await
    }

    async fn turn_numbered(
        &mut self,
        message: Option<&str>,
        index: u32,
    ) -> Result<Turn, AgentError> {
        let agent = self.profile.id.clone();
        let after_observations = !self.pending.is_empty();
        let input = match message {
            Some(m) => {
                if self.pending.is_empty() {
                    m.to_string()
                } else {
                    format!("{}\n{m}", self.pending.join("\n"))
                }
            }
            None if !self.pending.is_empty() => self.pending.join("\n"),
            None => "Begin.".to_string(),
        };
        let mut args = self.context(index, &input);
        let engine_tools = self.dispatch.engine.clone();
        if let Err(e) =
            hook_seam::before_deliberate(&self.hooks, &engine_tools, &agent, index, &mut args).await
        {
            return Err(AgentError::Deliberation {
                agent,
                turn: index,
                workflow: self.deliberation.workflow.id.clone(),
                message: e.to_string(),
            });
        }
        let (chunk_tx, mut chunk_rx) = tokio::sync::mpsc::unbounded_channel::<String>();
        let mut llm = self.llm.clone();
        llm.constraint = self.constrained.of_turn(after_observations).cloned();
        llm.stop = self.constrained.stop.clone();
        if self.stream_ok {
            llm.sink = Some(chunk_tx);
        } else {
            drop(chunk_tx);
        }
        let opts = RunOptions {
            tools: Some(self.dispatch.engine.clone()),
            hooks: Some(self.hooks.clone()),
            caller: Caller::Model(Some(agent.clone())),
            host_data: Some(Arc::new(llm)),
            ..self.run_defaults.clone()
        };
        let t0 = Instant::now();
        let (batch_tx, mut batch_rx) = tokio::sync::mpsc::unbounded_channel::<Vec<Call>>();
        let format = self.reading.first;
        let plan = &self.deliberation.plan;
        let dispatch = &mut self.dispatch;
        let workflow = async move { plan.run(args, opts).await.and_then(|r| r.into_outputs()) };
        // Reads streamed text as it arrives and hands over each call as its block closes.
        let reader = async move {
            let mut sr = StreamReader::new(format);
            let mut emitted = 0usize;
            let mut ended = None;
            let mut any = false;
            while let Some(chunk) = chunk_rx.recv().await {
                any = true;
                ended = Some(t0.elapsed());
                let calls = sr.push(&chunk);
                if !calls.is_empty() {
                    emitted += calls.len();
                    let _ = batch_tx.send(calls);
                }
            }
            (any.then_some(sr), emitted, ended)
        };
        let runner = async {
            let mut out = Vec::new();
            while let Some(batch) = batch_rx.recv().await {
                out.extend(dispatch.run_batch(batch, index, t0).await);
            }
            out
        };
        let (outputs, (reader, emitted, stream_end), mut results) =
            tokio::join!(workflow, reader, runner);
        let deliberation_failed = |message: String| AgentError::Deliberation {
            agent: agent.clone(),
            turn: index,
            workflow: self.deliberation.workflow.id.clone(),
            message,
        };
        let outputs = outputs.map_err(|e| deliberation_failed(e.to_string()))?;
        let output = output_text(outputs).map_err(deliberation_failed)?;
        let streamed = reader.is_some();
        let output_ended_ms = ms(stream_end.unwrap_or_else(|| t0.elapsed()));
        let first = match reader {
            Some(sr) => {
                let p = sr.finish();
                if p.response_text.is_empty() && p.calls.is_empty() && !output.trim().is_empty() {
                    protocol::parse(&output, format)
                } else {
                    p
                }
            }
            None => protocol::parse(&output, format),
        };
        let parsed = self.reading.then_if_needed(first, &output);
        let veto =
            hook_seam::after_parse(&self.hooks, &engine_tools, &agent, index, &output, &parsed)
                .await
                .err();
        let done = emitted.min(parsed.calls.len());
        if parsed.calls.len() > done {
            let rest = parsed.calls[done..].to_vec();
            match &veto {
                None => results.extend(self.dispatch.run_batch(rest, index, t0).await),
                Some(e) => results.extend(rest.into_iter().map(|call| CallRecord {
                    outcome: CallOutcome {
                        tool: call.tool.clone(),
                        id: engine_tools.canonical_id(&call.tool),
                        elapsed: std::time::Duration::ZERO,
                        warnings: Vec::new(),
                        result: Err(ToolError::Vetoed {
                            tool: call.tool.clone(),
                            reason: match e {
                                ToolError::Vetoed { reason, .. } => reason.clone(),
                                other => other.to_string(),
                            },
                        }),
                    },
                    call,
                    started_ms: None,
                    finished_ms: ms(t0.elapsed()),
                })),
            }
        }
        let mut observations: Vec<String> = parsed
            .diagnostics
            .iter()
            .filter(|d| d.severity == Severity::Error)
            .map(Diagnostic::observation)
            .collect();
        observations.extend(results.iter().map(|r| r.outcome.observation()));
        tracing::info!(agent = %agent, turn = index, output = %output, "agent turn: model output");
        for r in &results {
            let call_args = Value::from(r.call.args.clone());
            tracing::info!(
                agent = %agent,
                turn = index,
                tool = %r.call.tool,
                args = %call_args,
                ok = r.outcome.result.is_ok(),
                "agent turn: {}",
                r.outcome.observation()
            );
        }
        if !parsed.response_text.is_empty() {
            self.bus.emit(
                events::RESPONSE,
                &agent,
                || json!({"turn": index, "text": parsed.response_text}),
            );
        }
        self.history.push(json!({"role": "user", "content": input}));
        self.history
            .push(json!({"role": "assistant", "content": output}));
        self.pending = observations.clone();
        let turn = Turn {
            index,
            input,
            output,
            parsed,
            results,
            observations,
            streamed,
            output_ended_ms,
        };
        self.bus.emit(events::TURN_FINISHED, &agent, || {
            json!({
                "turn": turn.index,
                "input": turn.input,
                "output": turn.output,
                "response_text": turn.parsed.response_text,
                "calls": turn.results.iter().map(|r| json!({
                    "tool": r.call.tool,
                    "ok": r.outcome.result.is_ok(),
                    "started_ms": r.started_ms,
                    "finished_ms": r.finished_ms,
                })).collect::<Vec<_>>(),
                "observations": turn.observations,
                "streamed": turn.streamed,
                "output_ended_ms": turn.output_ended_ms,
            })
        });
        Ok(turn)
    }

    /// Runs turns from `message` until a turn has no calls, or a limit stops the run.
    pub async fn run(&mut self, message: Option<&str>) -> AgentRun {
        self.dispatch.start_run();
        let mut turns = Vec::new();
        let mut message = message;
        let limits = self.dispatch.limits;
        loop {
            let index = turns.len() as u32 + 1;
            let turn = match self.turn_numbered(message.take(), index).await {
                Ok(t) => t,
                Err(e) => {
                    tracing::info!(agent = %self.profile.id, "agent run stopped: {e}");
                    return AgentRun {
                        turns,
                        stop_reason: StopReason::Error,
                        error: Some(e),
                    };
                }
            };
            let malformed = turn.parsed.has_errors();
            let no_calls = turn.parsed.calls.is_empty() && !malformed;
            turns.push(turn);
            let stop = if self.dispatch.budget_hit {
                Some(StopReason::ToolBudget)
            } else if self.dispatch.repeat_hit {
                Some(StopReason::RepeatGuard)
            } else if no_calls {
                Some(StopReason::NoCalls)
            } else if turns.len() as u32 >= limits.max_turns {
                Some(StopReason::MaxTurns)
            } else {
                None
            };
            if let Some(stop_reason) = stop {
                tracing::info!(agent = %self.profile.id, turns = turns.len(), stop = stop_reason.as_str(), "agent run finished");
                return AgentRun {
                    turns,
                    stop_reason,
                    error: None,
                };
            }
        }
    }
}

/// The deliberation workflow's text: output `text`, `full_text` or `output`, or its only
/// output.
fn output_text(mut outputs: Map<String, Value>) -> Result<String, String> {
    let v = ["text", "full_text", "output"]
        .iter()
        .find_map(|k| outputs.remove(*k))
        .or_else(|| {
            if outputs.len() == 1 {
                outputs.into_iter().next().map(|(_, v)| v)
            } else {
                None
            }
        });
    match v {
        Some(Value::String(s)) => Ok(s),
        Some(Value::Null) | None => Err(
            "it produced no text: give it an interface output named `text` (or exactly one output)"
                .into(),
        ),
        Some(other) => Ok(other.to_string()),
    }
}

/// Runs calls for one agent: inventory, budget, repeat guard, chains, events, timing.
struct Dispatcher {
    agent: String,
    tools: Arc<ToolManager>,
    engine: Arc<ToolManager>,
    bus: EventBus,
    limits: Limits,
    used: u32,
    seen: HashMap<String, u32>,
    budget_hit: bool,
    repeat_hit: bool,
}

impl Dispatcher {
    fn start_run(&mut self) {
        self.used = 0;
        self.seen.clear();
        self.budget_hit = false;
        self.repeat_hit = false;
    }

    async fn run_batch(&mut self, calls: Vec<Call>, turn: u32, t0: Instant) -> Vec<CallRecord> {
        let mut out = Vec::with_capacity(calls.len());
        // A failing step with on_error: stop skips the later steps of its block.
        let mut stopped: Option<(usize, String)> = None;
        for call in calls {
            if stopped.as_ref().is_some_and(|(b, _)| *b != call.block) {
                stopped = None;
            }
            let refused = |e: ToolError| (None, Err(e));
            // Loose argument names the call was read with (only a call that ran has them).
            let mut warnings = Vec::new();
            let (started, result) = if let Some((_, why)) =
                stopped.as_ref().filter(|(b, _)| *b == call.block)
            {
                refused(ToolError::Skipped {
                    tool: call.tool.clone(),
                    reason: why.clone(),
                })
            } else if self.used >= self.limits.max_tool_calls {
                self.budget_hit = true;
                refused(ToolError::LimitExceeded {
                    tool: call.tool.clone(),
                    limit: "tool_calls".into(),
                    message: format!(
                        "this run's budget of {} tool calls is spent; the call was not run",
                        self.limits.max_tool_calls
                    ),
                })
            } else {
                let sig = format!("{}\u{0}{}", call.tool, Value::from(call.args.clone()));
                let n = self.seen.entry(sig).or_insert(0);
                *n += 1;
                if *n > self.limits.repeat_limit {
                    self.repeat_hit = true;
                    refused(ToolError::LimitExceeded {
                        tool: call.tool.clone(),
                        limit: "repeat".into(),
                        message: format!(
                            "the same call already ran {} times in this run; the call was not run",
                            self.limits.repeat_limit
                        ),
                    })
                } else {
                    if *n == self.limits.repeat_limit {
                        self.repeat_hit = true;
                    }
                    self.used += 1;
                    let started = t0.elapsed();
                    self.bus.emit(events::TOOL_STARTED, &self.agent, || {
                        json!({"turn": turn, "tool": call.tool, "args": call.args, "started_ms": ms(started)})
                    });
                    // The engine's one run path, against this agent's inventory. The loop
                    // keeps its own budget, repeat guard and chain stops around it.
                    let req = crate::request::Request::parsed(crate::protocol::Parsed {
                        calls: vec![call.clone()],
                        ..Default::default()
                    })
                    .options(
                        crate::request::CallOptions::new()
                            .caller(Caller::Model(Some(self.agent.clone())))
                            .inventory(self.tools.clone()),
                    );
                    let mut r = crate::request::run(self.engine.clone(), req).await.outcomes;
                    let (result, w) = r
                        .pop()
                        .map_or((Ok(Value::Null), Vec::new()), |o| (o.result, o.warnings));
                    warnings = w;
                    (Some(started), self.refine(result))
                }
            };
            if result.is_err() && call.on_error == OnError::Stop && stopped.is_none() {
                let step = call.step.map(|s| format!("step {s} ")).unwrap_or_default();
                let code = result.as_ref().err().map(ToolError::code).unwrap_or("");
                stopped = Some((
                    call.block,
                    format!(
                        "{step}({}) failed and its on_error is stop: {code}",
                        call.tool
                    ),
                ));
            }
            let outcome = CallOutcome {
                tool: call.tool.clone(),
                id: self.tools.canonical_id(&call.tool),
                result,
                elapsed: started.map_or(std::time::Duration::ZERO, |s| {
                    t0.elapsed().saturating_sub(s)
                }),
                warnings,
            };
            let finished = ms(t0.elapsed());
            self.bus.emit(events::TOOL_FINISHED, &self.agent, || {
                let mut p = json!({
                    "turn": turn,
                    "tool": outcome.tool,
                    "ok": outcome.result.is_ok(),
                    "observation": outcome.observation(),
                    "finished_ms": finished,
                });
                if let Ok(v) = &outcome.result {
                    p["value"] = v.clone();
                }
                if !outcome.warnings.is_empty() {
                    p["warnings"] = json!(outcome.warnings);
                }
                p
            });
            out.push(CallRecord {
                call,
                outcome,
                started_ms: started.map(ms),
                finished_ms: finished,
            });
        }
        out
    }

    /// An id the inventory does not know but the engine does is refused as outside the
    /// inventory (with the closest inventory id), not as unknown.
    fn refine(&self, result: Result<Value, ToolError>) -> Result<Value, ToolError> {
        match result {
            Err(ToolError::UnknownTool { id, suggestion }) if self.engine.get(&id).is_ok() => {
                Err(ToolError::NotInInventory {
                    tool: id,
                    agent: self.agent.clone(),
                    suggestion,
                })
            }
            other => other,
        }
    }
}
