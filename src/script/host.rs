//! What the Lua and Rhai hosts share: the plugin's environment, the implementations of the
//! language-neutral `api` functions, the per-thread stack of running calls (for re-entrant
//! `api.tools.call`) and the `print` sink.

use std::cell::RefCell;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, Weak};
use std::time::Instant;

use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use super::api::ApiOp;
use super::fs::FsRoot;
use super::permissions::FsAccess;
use super::{Limits, Permissions, ScriptError};
use crate::tools::{CallContext, Caller, LogLevel, ToolManager};

/// What a plugin's scripts are built from.
#[derive(Clone)]
pub struct ScriptEnv {
    /// Plugin name (the tool namespace).
    pub plugin: String,
    /// How many Lua states serve calls at once (`instances:` in plugin.yaml; 1 by default).
    pub instances: usize,
    /// Plugin directory: script files and Rhai imports are resolved inside it.
    pub dir: PathBuf,
    /// Declared permissions (file roots already absolute).
    pub permissions: Permissions,
    /// The plugin's settings (`extensions.<plugin>.<option>` without the prefix).
    pub config: Map<String, Value>,
    /// Limits for every call (already lowered by the plugin and capped by the host).
    pub limits: Limits,
    /// The manager `api.tools.call` goes through when the call itself does not carry one.
    pub tools: Option<Weak<ToolManager>>,
    /// The hook registry `api.hooks` and `api.services.override` register in (weak: the
    /// registry holds the scripts' handlers).
    pub hooks: Option<Weak<crate::hooks::Hooks>>,
    /// Who owns hooks and overrides these scripts register, as listings and errors name it
    /// (`plugin:<name>`, or `script:<name>` for a power-user script).
    pub owner: String,
    /// The plugin directory as messages name it, relative to the home (`plugins/Dice`):
    /// runtime errors then say `plugins/Dice/main.lua:2`. `None` (a directory outside the
    /// home, an embedder's scripts): the file name relative to `dir` alone (`main.lua:2`).
    pub shown_dir: Option<String>,
}

impl std::fmt::Debug for ScriptEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptEnv")
            .field("plugin", &self.plugin)
            .field("dir", &self.dir)
            .field("permissions", &self.permissions)
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl ScriptEnv {
    /// An environment with no permissions, no settings and default limits.
    pub fn new(plugin: impl Into<String>, dir: impl Into<PathBuf>) -> Self {
        let plugin = plugin.into();
        ScriptEnv {
            owner: format!("plugin:{plugin}"),
            plugin,
            instances: 1,
            dir: dir.into(),
            permissions: Permissions::none(),
            config: Map::new(),
            limits: Limits::engine_default(),
            tools: None,
            hooks: None,
            shown_dir: None,
        }
    }

    /// The name messages give the script file `name` (relative to `dir`):
    /// `plugins/Dice/main.lua` when [`ScriptEnv::shown_dir`] is set.
    pub fn shown_name(&self, name: &str) -> String {
        match &self.shown_dir {
            Some(d) if !d.is_empty() => format!("{}/{name}", d.trim_end_matches('/')),
            _ => name.to_string(),
        }
    }
}

/// Who is calling a script function, and how deep (mirrors [`CallContext`]).
#[derive(Clone, Debug)]
pub struct CallInfo {
    /// Tool id being served (or the function name for direct calls).
    pub tool_id: Arc<str>,
    /// Who asked.
    pub caller: Caller,
    /// Tool-call nesting depth of this call.
    pub depth: u32,
    /// Cancellation of the enclosing call.
    pub cancel: CancellationToken,
    /// The manager nested `api.tools.call`s go through (falls back to [`ScriptEnv::tools`]).
    pub manager: Option<Arc<ToolManager>>,
    /// The caller's deadline (wall clock, host time included); the script's own `wall_ms`
    /// still applies when it is sooner.
    pub deadline: Option<Instant>,
    /// Who watches the enclosing call; `api.tools.call` hands it on.
    pub observer: crate::tools::Observer,
}

impl CallInfo {
    /// A top-level call from the host with no manager.
    pub fn host(tool_id: impl Into<Arc<str>>) -> Self {
        CallInfo {
            tool_id: tool_id.into(),
            caller: Caller::Host,
            depth: 0,
            cancel: CancellationToken::new(),
            manager: None,
            deadline: None,
            observer: None,
        }
    }

    /// The information of a tool call.
    pub fn from_context(ctx: &CallContext) -> Self {
        CallInfo {
            tool_id: ctx.tool_id.clone(),
            caller: ctx.caller.clone(),
            depth: ctx.depth,
            cancel: ctx.cancel.clone(),
            manager: Some(ctx.manager.clone()),
            deadline: ctx.deadline,
            observer: ctx.observer.clone(),
        }
    }
}

/// Where `print` goes.
#[derive(Clone)]
pub(crate) enum Output {
    /// The engine log, tagged with the plugin's name.
    Log,
    /// A bounded buffer (snippets).
    Buffer(Arc<Mutex<OutputBuffer>>),
}

/// Bounded print output.
#[derive(Default)]
pub(crate) struct OutputBuffer {
    pub text: String,
    pub max: usize,
    pub truncated: bool,
}

impl OutputBuffer {
    pub fn push(&mut self, s: &str) {
        if self.truncated {
            return;
        }
        let room = self.max.saturating_sub(self.text.len());
        if s.len() <= room {
            self.text.push_str(s);
        } else {
            let mut end = room;
            while !s.is_char_boundary(end) {
                end -= 1;
            }
            self.text.push_str(&s[..end]);
            self.text.push_str("\n[output truncated]");
            self.truncated = true;
        }
    }
}

impl HostCore {
    /// `print`: to the engine's log sink (the host's callback, else tracing), or a buffer.
    pub fn print(&self, line: &str) {
        match &self.output {
            Output::Log => self.emit(LogLevel::Info, line),
            Output::Buffer(b) => {
                let mut b = b.lock().unwrap_or_else(|p| p.into_inner());
                b.push(line);
                b.push("\n");
            }
        }
    }
}

/// The language-neutral part of a plugin's script host.
pub(crate) struct HostCore {
    pub env: ScriptEnv,
    pub output: Output,
    /// Panics caught in Rust code called from this plugin's scripts (each one logged).
    pub panics: std::sync::atomic::AtomicU64,
    /// Errors handed to scripts as values (see `nested_error.rs`),
    /// so one a script lets through is reported with its own code again.
    pub nested: std::sync::Mutex<Vec<super::ScriptError>>,
    /// Hooks and overrides the scripts registered.
    pub hooks: super::hooks_api::ScriptHooks,
}

/// What a running call was given: a script call's [`CallInfo`], or the [`CallContext`] of
/// the tool call or hook it serves. Borrowed for the call's length: a hook fires with its
/// run's context, and copying the fields out (a cancellation token, the manager, the caller)
/// on every call was most of what a hook cost beyond the script itself.
#[derive(Clone, Copy)]
enum Given<'a> {
    Info(&'a CallInfo),
    Context(&'a CallContext),
}

impl Given<'_> {
    fn tool_id(&self) -> &Arc<str> {
        match self {
            Given::Info(i) => &i.tool_id,
            Given::Context(c) => &c.tool_id,
        }
    }

    fn cancel(&self) -> &CancellationToken {
        match self {
            Given::Info(i) => &i.cancel,
            Given::Context(c) => &c.cancel,
        }
    }

    fn deadline(&self) -> Option<Instant> {
        match self {
            Given::Info(i) => i.deadline,
            Given::Context(c) => c.deadline,
        }
    }

    fn manager(&self) -> Option<&Arc<ToolManager>> {
        match self {
            Given::Info(i) => i.manager.as_ref(),
            Given::Context(c) => Some(&c.manager),
        }
    }

    fn observer(&self) -> &crate::tools::Observer {
        match self {
            Given::Info(i) => &i.observer,
            Given::Context(c) => &c.observer,
        }
    }

    fn to_info(self) -> CallInfo {
        match self {
            Given::Info(i) => i.clone(),
            Given::Context(c) => CallInfo::from_context(c),
        }
    }
}

/// One script call about to run on this thread ([`ActiveCall::run`]): what it was given
/// and its deadline.
#[derive(Clone, Copy)]
pub(crate) struct ActiveCall<'a> {
    given: Given<'a>,
    /// When the call must end (wall clock).
    pub deadline: Instant,
    /// The wall-clock allowance `deadline` stands for, in ms (for error messages).
    pub allowed_ms: u64,
    /// The plugin's `wall_ms` the deadline was capped with (a budget with the same or a
    /// longer `wall_ms` can take `deadline` as it is, without reading the clock again).
    pub wall_ms: u64,
}

impl<'a> ActiveCall<'a> {
    /// A call of `info` whose deadline is the soonest of the plugin's `wall_ms`, the caller's
    /// deadline and the enclosing script call's.
    pub fn new(info: &'a CallInfo, wall_ms: u64) -> Self {
        Self::given(Given::Info(info), wall_ms)
    }

    /// [`ActiveCall::new`] for a call serving the tool call or hook of `ctx`.
    pub fn for_context(ctx: &'a CallContext, wall_ms: u64) -> Self {
        Self::given(Given::Context(ctx), wall_ms)
    }

    fn given(given: Given<'a>, wall_ms: u64) -> Self {
        let now = Instant::now();
        let mut deadline = now + std::time::Duration::from_millis(wall_ms);
        if let Some(d) = given.deadline() {
            deadline = deadline.min(d);
        }
        if let Some(d) = current_deadline() {
            deadline = deadline.min(d);
        }
        let allowed_ms = deadline.saturating_duration_since(now).as_millis() as u64;
        ActiveCall {
            given,
            deadline,
            allowed_ms,
            wall_ms,
        }
    }

    /// Runs `f` as this call: the innermost call on this thread until `f` returns (or
    /// unwinds), which nested `api.tools.call`s, budgets and `ctx.log` read.
    pub fn run<R>(self, f: impl FnOnce() -> R) -> R {
        // SAFETY: only the lifetime changes. The entry borrows for `'a`, which outlives this
        // function; `Pop` removes it before this function returns or unwinds (entries are
        // pushed and popped in nesting order, so the last one is this one); and the readers
        // below never hand out a reference into an entry beyond their `ACTIVE.with`.
        let entry: ActiveCall<'static> = unsafe { std::mem::transmute(self) };
        ACTIVE.with(|a| a.borrow_mut().push(entry));
        let _pop = Pop;
        f()
    }
}

thread_local! {
    /// The script calls running on this thread, innermost last.
    static ACTIVE: RefCell<Vec<ActiveCall<'static>>> = const { RefCell::new(Vec::new()) };
    static HANDLE: RefCell<Option<tokio::runtime::Handle>> = const { RefCell::new(None) };
}

/// Pops the call pushed by [`ActiveCall::run`] when dropped (also on unwinding).
struct Pop;

impl Drop for Pop {
    fn drop(&mut self) {
        ACTIVE.with(|a| {
            a.borrow_mut().pop();
        });
    }
}

/// The innermost script call running on this thread: what it was given (copied out), its
/// deadline and the allowance that deadline stood for.
pub(crate) fn current_call() -> Option<(CallInfo, Instant, u64)> {
    ACTIVE.with(|a| {
        a.borrow()
            .last()
            .map(|c| (c.given.to_info(), c.deadline, c.allowed_ms))
    })
}

/// The tool id of the innermost script call running on this thread.
pub(crate) fn current_tool_id() -> Option<Arc<str>> {
    ACTIVE.with(|a| a.borrow().last().map(|c| c.given.tool_id().clone()))
}

/// The deadline of the innermost script call running on this thread (no copy of the call).
pub(crate) fn current_deadline() -> Option<Instant> {
    ACTIVE.with(|a| a.borrow().last().map(|c| c.deadline))
}

/// What a script budget takes from the innermost script call running on this thread.
#[derive(Clone, Copy)]
pub(crate) struct CallBudget {
    /// The call's deadline.
    pub deadline: Instant,
    /// The allowance it stood for when the call started, in ms.
    pub allowed_ms: u64,
    /// The `wall_ms` the deadline was capped with.
    pub wall_ms: u64,
}

/// The deadline of the innermost script call running on this thread, with the allowance
/// and `wall_ms` it came from.
pub(crate) fn current_budget() -> Option<CallBudget> {
    ACTIVE.with(|a| {
        a.borrow().last().map(|c| CallBudget {
            deadline: c.deadline,
            allowed_ms: c.allowed_ms,
            wall_ms: c.wall_ms,
        })
    })
}

/// The observer of the innermost script call on this thread, if anybody watches it.
fn current_observer() -> Option<Arc<dyn crate::tools::CallObserver>> {
    ACTIVE.with(|a| a.borrow().last().and_then(|c| c.given.observer().clone()))
}

/// Whether the innermost script call on this thread was cancelled by its caller.
pub(crate) fn current_cancelled() -> bool {
    ACTIVE.with(|a| {
        a.borrow()
            .last()
            .is_some_and(|c| c.given.cancel().is_cancelled())
    })
}

/// Whether this thread is inside a script call (of any plugin).
pub(crate) fn in_script_thread() -> bool {
    ACTIVE.with(|a| !a.borrow().is_empty())
}

/// The runtime handle this (blocking script) thread uses for nested work, if set.
pub(crate) fn thread_handle() -> Option<tokio::runtime::Handle> {
    HANDLE.with(|h| h.borrow().clone())
}

/// Sets the runtime handle that blocking script threads use for nested tool calls.
pub(crate) fn set_thread_handle(h: Option<tokio::runtime::Handle>) {
    HANDLE.with(|x| *x.borrow_mut() = h);
}

fn value_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn arg(args: &[Value], i: usize) -> &Value {
    args.get(i).unwrap_or(&Value::Null)
}

fn str_arg<'a>(
    args: &'a [Value],
    i: usize,
    fname: &str,
    pname: &str,
) -> Result<&'a str, ScriptError> {
    arg(args, i).as_str().ok_or_else(|| {
        ScriptError::runtime(format!(
            "{fname}: parameter {} ('{pname}') must be a string, got {}",
            i + 1,
            type_name(arg(args, i))
        ))
    })
}

/// The tool id and the arguments object of an `api.tools.call(id, args)`.
pub(crate) fn tools_call_args(args: &[Value]) -> Result<(String, Value), ScriptError> {
    let id = str_arg(args, 0, "api.tools.call", "id")?.to_string();
    let a = match arg(args, 1) {
        Value::Null => Value::Object(Map::new()),
        v => v.clone(),
    };
    Ok((id, a))
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "nil",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "table",
    }
}

impl HostCore {
    pub fn new(env: ScriptEnv, output: Output) -> Self {
        HostCore {
            env,
            output,
            panics: std::sync::atomic::AtomicU64::new(0),
            nested: std::sync::Mutex::new(Vec::new()),
            hooks: Default::default(),
        }
    }

    fn fs(&self, access: FsAccess) -> Result<FsRoot, ScriptError> {
        let root = self.env.permissions.fs_root(access)?;
        Ok(FsRoot::new(root, self.env.limits.max_string_bytes))
    }

    /// One line to the engine's log sink (its host callback, else tracing), with this
    /// plugin or script (`plugin:<name>`, `script:<name>`) as its source.
    pub fn emit(&self, level: LogLevel, text: &str) {
        match self.env.tools.as_ref().and_then(Weak::upgrade) {
            Some(m) => m.log().emit(level, &self.env.owner, text),
            None => crate::tools::LogSink::default().emit(level, &self.env.owner, text),
        }
    }

    pub fn log(&self, level: ApiOp, text: &str) {
        let level = match level {
            ApiOp::LogDebug => LogLevel::Debug,
            ApiOp::LogWarn => LogLevel::Warning,
            ApiOp::LogError => LogLevel::Error,
            _ => LogLevel::Info,
        };
        self.emit(level, text);
        // Whoever watches the running call (an MCP client, a served job) sees it too.
        if let Some(obs) = current_observer() {
            obs.log(level, &self.env.plugin, text);
        }
    }

    /// `api.world.get` / `api.world.set` on the engine's live world, as
    /// `permissions.world` allows.
    fn world(&self, op: ApiOp, args: &[Value]) -> Result<Value, ScriptError> {
        use super::permissions::WorldAccess;
        use crate::store::WorldState as _;
        let (fname, need) = match op {
            ApiOp::WorldSet => ("api.world.set", WorldAccess::Write),
            _ => ("api.world.get", WorldAccess::Read),
        };
        self.env.permissions.world(need)?;
        let path = str_arg(args, 0, fname, "path")?;
        let manager = self.manager().ok_or_else(|| {
            ScriptError::runtime(format!("{fname}: no engine is attached to this script"))
        })?;
        let world = manager.world_state();
        if op == ApiOp::WorldSet {
            world
                .set(path, arg(args, 1).clone())
                .map_err(|e| ScriptError::runtime(format!("{fname}: {e}")))?;
            return Ok(Value::Null);
        }
        Ok(world.get(path).unwrap_or(Value::Null))
    }

    /// Runs a language-neutral api function. `ToolsRegister` is handled by each host.
    pub fn invoke(&self, op: ApiOp, args: &[Value]) -> Result<Value, ScriptError> {
        use ApiOp::*;
        match op {
            LogDebug | LogInfo | LogWarn | LogError => {
                self.log(op, &value_text(arg(args, 0)));
                Ok(Value::Null)
            }
            ToolsProgress => {
                let done = arg(args, 0).as_f64().ok_or_else(|| {
                    ScriptError::runtime(
                        "api.tools.progress: parameter 1 ('done') must be a number",
                    )
                })?;
                let total = match arg(args, 1) {
                    Value::Null => None,
                    v => Some(v.as_f64().ok_or_else(|| {
                        ScriptError::runtime(
                            "api.tools.progress: parameter 2 ('total') must be a number or nil",
                        )
                    })?),
                };
                let message = match arg(args, 2) {
                    Value::Null => None,
                    v => Some(value_text(v)),
                };
                if let Some(obs) = current_observer() {
                    obs.progress(done, total, message.as_deref());
                }
                Ok(Value::Null)
            }
            ClientAsk => self.ask(arg(args, 0)),
            LlmChat => self.llm_chat(arg(args, 0)),
            ResourcesNotify => {
                let uri = str_arg(args, 0, "api.resources.notify", "uri")?;
                // No receiver (no server running) is not an error.
                let _ = crate::tools::resource_updates().send(uri.to_string());
                Ok(Value::Null)
            }
            ConfigGet => {
                let key = str_arg(args, 0, "api.config.get", "key")?;
                let prefix = format!("extensions.{}.", self.env.plugin);
                let key = key.strip_prefix(&prefix).unwrap_or(key);
                Ok(self.env.config.get(key).cloned().unwrap_or(Value::Null))
            }
            JsonEncode => Ok(Value::String(arg(args, 0).to_string())),
            JsonDecode => {
                let text = str_arg(args, 0, "api.json.decode", "text")?;
                serde_json::from_str(text)
                    .map_err(|e| ScriptError::runtime(format!("api.json.decode: {e}")))
            }
            FsRead => {
                let p = str_arg(args, 0, "api.fs.read", "path")?;
                Ok(Value::String(self.fs(FsAccess::Read)?.read(p)?))
            }
            FsWrite | FsAppend => {
                let name = if op == FsWrite {
                    "api.fs.write"
                } else {
                    "api.fs.append"
                };
                let p = str_arg(args, 0, name, "path")?;
                let content = match arg(args, 1) {
                    Value::String(s) => s.clone(),
                    Value::Null => {
                        return Err(ScriptError::runtime(format!(
                            "{name}: parameter 2 ('content') is missing"
                        )))
                    }
                    other => other.to_string(),
                };
                let fs = self.fs(FsAccess::Write)?;
                if op == FsWrite {
                    fs.write(p, content.as_bytes())?;
                } else {
                    fs.append(p, content.as_bytes())?;
                }
                Ok(Value::Null)
            }
            FsList => {
                let p = match arg(args, 0) {
                    Value::Null => "/",
                    _ => str_arg(args, 0, "api.fs.list", "path")?,
                };
                self.fs(FsAccess::Read)?.list(p)
            }
            FsRemove => {
                let p = str_arg(args, 0, "api.fs.remove", "path")?;
                self.fs(FsAccess::Write)?.remove(p)?;
                Ok(Value::Null)
            }
            FsExists => {
                let p = str_arg(args, 0, "api.fs.exists", "path")?;
                Ok(Value::Bool(self.fs(FsAccess::Read)?.exists(p)?))
            }
            FsMkdir => {
                let p = str_arg(args, 0, "api.fs.mkdir", "path")?;
                self.fs(FsAccess::Write)?.mkdir(p)?;
                Ok(Value::Null)
            }
            ToolsCall => {
                let (id, a) = tools_call_args(args)?;
                self.call_tool(&id, a)
            }
            HooksOff => {
                let n = arg(args, 0).as_u64().ok_or_else(|| {
                    ScriptError::runtime(
                        "api.hooks.off: parameter 1 ('handle') must be what api.hooks.on returned",
                    )
                })?;
                Ok(Value::Bool(self.hooks.off(&self.env, n)))
            }
            StoreGet | StoreSet | StoreIncr | StoreDelete => {
                super::store_api::invoke(self, op, args)
            }
            WorldGet | WorldSet => self.world(op, args),
            ToolsRegister | HooksOn | ServicesOverride => Err(ScriptError::Internal(format!(
                "{op:?} is handled by the language host"
            ))),
        }
    }

    /// The tool manager a script's call reaches: the running call's, else the one the
    /// script was loaded with.
    fn manager(&self) -> Option<Arc<ToolManager>> {
        ACTIVE
            .with(|a| a.borrow().last().and_then(|c| c.given.manager().cloned()))
            .or_else(|| self.env.tools.as_ref().and_then(Weak::upgrade))
    }

    /// Whether `api.tools.call(id)` from a Lua call may run with the script state given up
    /// (see `LuaHost::call`): `id` is a sync host tool ([`crate::tools::ToolHandler::is_blocking`])
    /// the script may call. Every other tool runs holding the state, as before.
    pub fn hands_over(&self, id: &str) -> bool {
        self.manager()
            .and_then(|m| m.get(id).ok())
            .is_some_and(|tool| {
                tool.handler().is_blocking()
                    && self.env.permissions.may_call(&self.env.plugin, tool.id())
            })
    }

    /// `api.tools.call`: runs a tool through the manager, one level deeper, blocking this
    /// (script) thread. A script tool reached this way runs inline on this thread (see
    /// `ScriptToolHandler`), so a plugin calling itself does not deadlock. The nested call
    /// inherits this call's deadline, and time spent in it counts against that deadline:
    /// a script looping on host calls ends at its deadline however few instructions it runs.
    pub fn call_tool(&self, id: &str, args: Value) -> Result<Value, ScriptError> {
        let (info, deadline, allowed_ms) = match current_call() {
            Some((info, deadline, allowed_ms)) => (info, Some(deadline), Some(allowed_ms)),
            None => (CallInfo::host(id), None, None),
        };
        let past = |d: Option<Instant>| d.is_some_and(|d| Instant::now() >= d);
        if past(deadline) {
            return Err(self.deadline_error(allowed_ms));
        }
        let manager = match info
            .manager
            .clone()
            .or_else(|| self.env.tools.as_ref().and_then(Weak::upgrade))
        {
            Some(m) => m,
            None => {
                return Err(ScriptError::runtime(
                    "api.tools.call: no tool manager is attached to this script",
                ))
            }
        };
        // `permissions.tools`: a plugin borrows another plugin's powers only when it says so.
        if let Ok(tool) = manager.get(id) {
            if !self.env.permissions.may_call(&self.env.plugin, tool.id()) {
                tracing::info!(target: "tavern::audit", caller = %self.env.owner, tool = %tool.id(),
                    outcome = "refused", "api.tools.call refused: not in permissions.tools");
                return Err(ScriptError::PermissionDenied {
                    permission: format!("tools: {}", tool.id()),
                });
            }
        }
        let fut = manager.invoke(
            id,
            args,
            crate::tools::Invocation {
                caller: Caller::Plugin(self.env.plugin.clone()),
                depth: info.depth + 1,
                cancel: info.cancel.clone(),
                deadline,
                matching: crate::tools::KeyMatching::Loose,
                observer: info.observer.clone(),
                call_id: None,
            },
        );
        let out = self.block_on_tool(id, Some(&manager), fut, deadline.zip(allowed_ms));
        // Host time counts: a call that came back after the deadline ends the script now,
        // not at the next instruction-count check.
        if past(deadline) {
            return Err(self.deadline_error(allowed_ms));
        }
        out
    }

    /// `api.ask` / `api.client.ask`: MCP elicitation through the calling client.
    fn ask(&self, request: &Value) -> Result<Value, ScriptError> {
        const WHAT: &str = "api.ask";
        let Value::Object(req) = request else {
            return Err(ScriptError::runtime(
                "api.ask: parameter 1 ('request') must be a table: {message = text, schema = {type = \"object\", properties = {…}}} or {message = text, url = link}",
            ));
        };
        let message = req.get("message").and_then(Value::as_str).ok_or_else(|| {
            ScriptError::runtime(
                "api.ask: `message` (the text the user reads) is missing or not a string",
            )
        })?;
        let params = match (req.get("url"), req.get("schema")) {
            (Some(Value::String(url)), _) => {
                let id = match req.get("id") {
                    Some(Value::String(id)) => id.clone(),
                    _ => format!(
                        "tavern-{}",
                        std::time::SystemTime::now()
                            .duration_since(std::time::UNIX_EPOCH)
                            .map(|d| d.as_nanos())
                            .unwrap_or(0)
                    ),
                };
                serde_json::json!({"mode": "url", "message": message, "url": url, "elicitationId": id})
            }
            (None, Some(Value::Object(schema))) => {
                let mut schema = schema.clone();
                schema.entry("type").or_insert_with(|| Value::from("object"));
                // An empty Lua table reads as `[]`: properties are an object.
                if schema.get("properties").is_some_and(|p| p.as_array().is_some_and(Vec::is_empty)) {
                    schema.insert("properties".into(), Value::Object(Map::new()));
                }
                if schema.get("properties").is_none_or(|p| !p.is_object()) {
                    return Err(ScriptError::runtime(
                        "api.ask: `schema.properties` must be a table of fields (name = {type = \"string\", …})",
                    ));
                }
                serde_json::json!({"mode": "form", "message": message, "requestedSchema": schema})
            }
            _ => {
                return Err(ScriptError::runtime(
                    "api.ask: give `schema` (a form: {type = \"object\", properties = {…}}) or `url` (a link the user opens)",
                ))
            }
        };
        match self.client_request(WHAT, "elicitation/create", params) {
            Err(ScriptError::Tool(e)) if e.to_string().contains(UNSUPPORTED) => {
                match req.get("fallback") {
                    Some(f) => Ok(serde_json::json!({"action": "unsupported", "content": f})),
                    None => Err(ScriptError::Tool(e)),
                }
            }
            other => other,
        }
    }

    /// `api.llm.chat`: MCP sampling through the calling client.
    fn llm_chat(&self, request: &Value) -> Result<Value, ScriptError> {
        const WHAT: &str = "api.llm.chat";
        let Value::Object(req) = request else {
            return Err(ScriptError::runtime(
                "api.llm.chat: parameter 1 ('request') must be a table: {messages = {{role = \"user\", content = text}}} or {prompt = text}",
            ));
        };
        let block = |c: &Value| match c {
            Value::String(t) => serde_json::json!({"type": "text", "text": t}),
            other => other.clone(),
        };
        let messages: Vec<Value> = match (req.get("messages"), req.get("prompt")) {
            (Some(Value::Array(ms)), _) if !ms.is_empty() => {
                let mut out = Vec::with_capacity(ms.len());
                for (i, m) in ms.iter().enumerate() {
                    let role = m.get("role").and_then(Value::as_str).unwrap_or("user");
                    if role != "user" && role != "assistant" {
                        return Err(ScriptError::runtime(format!(
                            "api.llm.chat: messages[{}].role is '{role}': use \"user\" or \"assistant\" (the system prompt goes in `system`)",
                            i + 1
                        )));
                    }
                    let content = m.get("content").ok_or_else(|| {
                        ScriptError::runtime(format!("api.llm.chat: messages[{}] has no `content`", i + 1))
                    })?;
                    out.push(serde_json::json!({"role": role, "content": block(content)}));
                }
                out
            }
            (_, Some(Value::String(p))) => vec![serde_json::json!({"role": "user", "content": block(&Value::String(p.clone()))})],
            _ => {
                return Err(ScriptError::runtime(
                    "api.llm.chat: give `messages` (a non-empty list of {role, content}) or `prompt` (a text)",
                ))
            }
        };
        let mut params = serde_json::json!({
            "messages": messages,
            "maxTokens": req.get("max_tokens").and_then(Value::as_u64).unwrap_or(1024),
        });
        if let Some(s) = req.get("system").and_then(Value::as_str) {
            params["systemPrompt"] = Value::from(s);
        }
        if let Some(t) = req.get("temperature").and_then(Value::as_f64) {
            params["temperature"] = Value::from(t);
        }
        let r = self.client_request(WHAT, "sampling/createMessage", params)?;
        let text = sampled_text(&r);
        Ok(serde_json::json!({
            "text": text,
            "model": r["model"],
            "stop_reason": r["stopReason"],
            "content": r["content"],
        }))
    }

    /// Sends `method` to the client that made the running call (through the call's
    /// observer) and waits for its answer on this script thread.
    fn client_request(
        &self,
        what: &str,
        method: &str,
        params: Value,
    ) -> Result<Value, ScriptError> {
        let fut = current_observer()
            .and_then(|o| o.client_request(method, params))
            .ok_or_else(|| {
                ScriptError::Tool(crate::tools::ToolError::failed(
                    what,
                    format!(
                        "{UNSUPPORTED}: {what} needs an MCP client to ask ({method}); this call does not come from one (REST, jobs and the CLI have none): serve the tool with `tavern serve` or `tavern mcp`"
                    ),
                ))
            })?;
        let deadline = current_call().map(|(_, d, ms)| (d, ms));
        let what_owned = what.to_string();
        self.block_on_tool(
            what,
            None,
            async move {
                fut.await
                    .map_err(|e| crate::tools::ToolError::failed(&what_owned, e))
            },
            deadline,
        )
    }

    fn deadline_error(&self, allowed_ms: Option<u64>) -> ScriptError {
        let ms = allowed_ms.unwrap_or(self.env.limits.wall_ms);
        ScriptError::Timeout {
            after_ms: ms,
            at: None,
        }
    }

    /// `next(args)` of a running override (`token` from its payload), blocking.
    pub fn call_next(&self, token: u64, mut args: Value) -> Result<Value, ScriptError> {
        // An empty Lua table reads as `[]`; arguments are an object.
        if args.as_array().is_some_and(|a| a.is_empty()) || args.is_null() {
            args = Value::Object(Map::new());
        }
        let Some((next, ctx)) = self.hooks.take_next(token) else {
            return Err(ScriptError::runtime(
                "next: the override call it belongs to has ended",
            ));
        };
        let id = next.tool_id().to_string();
        let manager = ctx.manager.clone();
        let fut = next.call(args, ctx);
        let deadline = current_budget().map(|b| (b.deadline, b.allowed_ms));
        self.block_on_tool(&id, Some(&manager), fut, deadline)
    }

    /// Runs a tool future to completion on this (script) thread, on the runtime of the
    /// enclosing call, or the engine's own (never a throwaway runtime per call). A panic in
    /// the tool is counted and logged, and the script sees an error. At `deadline` (with the
    /// allowance it stood for) the wait ends with a timeout and the future is dropped: a
    /// nested call blocked on something that never comes does not hold the script, nor the
    /// plugin, past its deadline.
    fn block_on_tool(
        &self,
        id: &str,
        manager: Option<&Arc<ToolManager>>,
        fut: impl std::future::Future<Output = Result<Value, crate::tools::ToolError>>,
        deadline: Option<(Instant, u64)>,
    ) -> Result<Value, ScriptError> {
        let handle = HANDLE
            .with(|h| h.borrow().clone())
            .or_else(|| tokio::runtime::Handle::try_current().ok());
        let handle = match handle {
            Some(h) => h,
            None => match manager {
                Some(m) => m.runtime_handle().map_err(|e| {
                    ScriptError::Tool(crate::tools::ToolError::failed(id, e.to_string()))
                })?,
                None => {
                    return Err(ScriptError::runtime(format!(
                        "cannot call '{id}': no runtime and no tool manager"
                    )))
                }
            },
        };
        // A script running in place on a multi-thread runtime's worker (a hook handler)
        // hands the worker's other tasks to another thread while it waits.
        let on_worker = tokio::runtime::Handle::try_current()
            .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
        let run = std::panic::AssertUnwindSafe(|| {
            // `Handle::block_on` refuses to nest (A → B → A runs nested on one thread), so
            // poll the future here, parked between wake-ups, inside the runtime's context.
            let wait = || {
                let _entered = handle.enter();
                park_block_on(fut, deadline.map(|d| d.0))
            };
            if on_worker {
                tokio::task::block_in_place(wait)
            } else {
                wait()
            }
        });
        match crate::tools::quiet(|| std::panic::catch_unwind(run)) {
            // The tool manager contained and logged it (one record per panic).
            Ok(Some(Err(crate::tools::ToolError::Panicked { .. }))) => {
                self.panics
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                Err(ScriptError::Internal(format!(
                    "api.tools.call('{id}'): the tool panicked (logged by the host)"
                )))
            }
            Err(_) => {
                self.panics
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                self.emit(
                    LogLevel::Error,
                    &format!("api.tools.call('{id}') panicked (a Rust tool panicked)"),
                );
                Err(ScriptError::Internal(format!(
                    "api.tools.call('{id}'): the tool panicked (logged by the host)"
                )))
            }
            Ok(Some(r)) => r.map_err(ScriptError::Tool),
            Ok(None) => Err(self.deadline_error(deadline.map(|d| d.1))),
        }
    }
}

struct ThreadWaker(std::thread::Thread);

impl std::task::Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

/// Runs a future to completion on this (blocking) thread, or until `deadline` (then `None`:
/// the future is dropped unfinished).
fn park_block_on<F: std::future::Future>(fut: F, deadline: Option<Instant>) -> Option<F::Output> {
    let mut fut = std::pin::pin!(fut);
    let waker = std::task::Waker::from(Arc::new(ThreadWaker(std::thread::current())));
    let mut cx = std::task::Context::from_waker(&waker);
    loop {
        if let std::task::Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return Some(v);
        }
        match deadline {
            None => std::thread::park(),
            Some(d) => {
                let now = Instant::now();
                if now >= d {
                    return None;
                }
                std::thread::park_timeout(d - now);
            }
        }
    }
}

/// The prefix of the error `api.ask` / `api.llm.chat` fail with when no client can answer.
pub use crate::tools::UNSUPPORTED;

/// Longest tool description a script may register.
pub(crate) const MAX_DESCRIPTION: usize = 4096;

/// Checks and namespaces an id given to `api.tools.register` (`name` or `plugin:name`).
/// Names are untrusted: letters, digits, `_` and `-`, 1–64 characters.
pub(crate) fn register_id(plugin: &str, id: &str) -> Result<String, String> {
    let (ns, name) = match id.split_once(':') {
        Some((ns, name)) => (ns, name),
        None => (plugin, id),
    };
    if ns != plugin {
        return Err(format!(
            "tool '{id}' is outside the plugin's namespace '{plugin}:'"
        ));
    }
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if !ok {
        return Err(format!(
            "tool name '{name}' is invalid: use 1-64 letters, digits, '_' or '-'"
        ));
    }
    Ok(format!("{plugin}:{name}"))
}

/// Refuses over-long descriptions (they end up in every model prompt).
pub(crate) fn check_description(id: &str, d: &str) -> Result<(), String> {
    if d.chars().count() > MAX_DESCRIPTION {
        return Err(format!(
            "tool '{id}': description longer than {MAX_DESCRIPTION} characters"
        ));
    }
    Ok(())
}

/// The text of a `sampling/createMessage` result (its text block, or its text blocks
/// joined): what `api.llm.chat` returns, and what the `llm:Chat` node and served agents read.
pub(crate) fn sampled_text(r: &Value) -> String {
    match &r["content"] {
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        c => c["text"].as_str().unwrap_or_default().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn depth() -> usize {
        ACTIVE.with(|a| a.borrow().len())
    }

    #[test]
    fn a_call_is_the_innermost_while_it_runs_and_gone_after_even_on_a_panic() {
        let outer = CallInfo::host("t:outer");
        let inner = CallInfo::host("t:inner");
        assert!(current_tool_id().is_none());
        let seen = ActiveCall::new(&outer, 60_000).run(|| {
            let nested = ActiveCall::new(&inner, 10).run(|| {
                let (info, deadline, allowed) = current_call().expect("a call runs");
                assert!(allowed <= 10, "the shorter wall_ms wins: {allowed}");
                (info.tool_id, deadline)
            });
            let back = current_tool_id();
            (nested, back, depth())
        });
        assert_eq!(&*seen.0 .0, "t:inner");
        assert_eq!(seen.1.as_deref(), Some("t:outer"));
        assert_eq!(seen.2, 1);
        assert_eq!(depth(), 0);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            ActiveCall::new(&outer, 60_000).run(|| panic!("inside a call"))
        }));
        assert!(r.is_err());
        assert_eq!(depth(), 0, "an unwinding call is popped");
        assert!(!in_script_thread());
    }

    #[test]
    fn a_call_serving_a_context_reads_through_to_it() {
        let manager = ToolManager::new();
        let caller = Caller::Model(Some("agent".into()));
        let ctx = CallContext::within("t:ctx", caller, manager, 3, CancellationToken::new())
            .with_deadline(Some(Instant::now() + std::time::Duration::from_millis(50)));
        ActiveCall::for_context(&ctx, 60_000).run(|| {
            let (info, _, allowed) = current_call().expect("a call runs");
            assert_eq!(&*info.tool_id, "t:ctx");
            assert_eq!(info.caller, ctx.caller);
            assert_eq!(info.depth, 3);
            assert!(allowed <= 50, "the context's deadline counts: {allowed}");
            assert!(!current_cancelled());
            ctx.cancel.cancel();
            assert!(current_cancelled(), "the context's own token is watched");
            let b = current_budget().expect("a budget");
            assert_eq!(b.wall_ms, 60_000);
            assert!(b.allowed_ms <= 50);
        });
    }
}
