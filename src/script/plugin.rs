//! `PluginScripts`: one plugin's script state (a Lua state and/or a Rhai engine) and the
//! tool handlers that run it.

use std::path::Path;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use serde_json::Value;

use super::host::{
    in_script_thread, set_thread_handle, ActiveCall, CallInfo, HostCore, Output, ScriptEnv,
};
use super::lock::{PluginLock, Reservation, Want};
use super::lua::LuaHost;
use super::rhai_host::RhaiHost;
use super::{Lang, ScriptError};
use crate::hooks::HookReturn;
use crate::tools::{
    empty_object_schema, CallContext, Implementation, ToolDefinition, ToolError, ToolFuture,
    ToolHandler,
};

/// How a [`ScriptToolHandler`] gets script work off the async executor's worker threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ExecMode {
    /// `tokio::task::spawn_blocking` for each call.
    Blocking,
    /// One dedicated thread per plugin, fed through a channel.
    Dedicated,
    /// `tokio::task::block_in_place` on a multi-thread runtime (the worker hands its other
    /// tasks to another thread first, so the executor keeps running); falls back to
    /// `spawn_blocking` on a current-thread runtime. The cheapest (see benches/script.rs).
    InPlace,
    /// The default: `InPlace`. (Rhai frees deeply nested values recursively; every Rhai
    /// evaluation gets a 48 MiB stack on whatever thread runs it, from a segment the thread
    /// maps once and reuses, so Rhai needs no thread of its own; see BENCHMARKS.md.)
    #[default]
    Auto,
}

type Job = Box<dyn FnOnce() + Send>;

/// How many entries of a write root the load-time sweep for stale temp files looks at, at
/// most (a huge workspace must not slow loading down much).
const STALE_SCAN_ENTRIES: usize = 100_000;

/// A hook handler's script function, kept as a handle (no lookup by name per event).
#[derive(Clone)]
pub(crate) enum HookFn {
    /// A Lua function, and whether it takes a `ctx` (else none is built).
    Lua {
        /// The function.
        f: mlua::Function,
        /// Whether it declares a second parameter (or `...`).
        ctx: bool,
    },
    /// A Rhai closure or `Fn("name")`, and how many arguments it takes (1: `ev`, 2: `ev, ctx`).
    Rhai {
        /// The function pointer.
        ptr: rhai::FnPtr,
        /// Its parameters beyond the curried ones.
        params: usize,
    },
}

struct Inner {
    env: ScriptEnv,
    core: Arc<HostCore>,
    /// The first Lua state: the one hooks, overrides and registrations come from.
    lua: Option<LuaHost>,
    /// The other instances' Lua states (`instances: N`), each with a host core of its own.
    replicas: Vec<(Arc<HostCore>, LuaHost)>,
    rhai: Option<RhaiHost>,
    /// One slot per Lua state.
    lock: Arc<PluginLock>,
    worker: Mutex<Option<mpsc::Sender<Job>>>,
}

impl Inner {
    /// The Lua state of lock slot `slot`.
    fn lua_at(&self, slot: usize) -> Option<&LuaHost> {
        match slot {
            0 => self.lua.as_ref(),
            n => self.replicas.get(n - 1).map(|(_, l)| l),
        }
    }
}

/// One plugin's scripts: a sandboxed Lua state (for its `.lua` files; one per instance,
/// `instances: N`, one by default) and ONE Rhai engine with the merged AST of its `.rhai`
/// files. Cheap to clone (shared).
#[derive(Clone)]
pub struct PluginScripts {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for PluginScripts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginScripts")
            .field("plugin", &self.inner.env.plugin)
            .field("lua", &self.inner.lua.is_some())
            .field("rhai", &self.inner.rhai.is_some())
            .finish()
    }
}

/// A script file to load: its name (relative to the plugin directory) and text.
#[derive(Debug, Clone)]
pub struct ScriptSource {
    /// Name used in error messages (`main.lua`).
    pub name: String,
    /// Language.
    pub lang: Lang,
    /// Source text.
    pub text: String,
}

impl ScriptSource {
    /// A source with the language taken from the name's extension.
    pub fn new(name: impl Into<String>, text: impl Into<String>) -> Result<Self, ScriptError> {
        let name = name.into();
        let lang = Lang::from_path(Path::new(&name)).ok_or_else(|| ScriptError::Syntax {
            file: name.clone(),
            line: 0,
            column: 0,
            message: "unknown script language: use a .lua or .rhai file".into(),
        })?;
        Ok(ScriptSource {
            name,
            lang,
            text: text.into(),
        })
    }
}

impl PluginScripts {
    /// Reads and loads script files (paths relative to `env.dir`), running their top level.
    pub fn load(env: ScriptEnv, files: &[impl AsRef<Path>]) -> Result<Self, ScriptError> {
        let mut sources = Vec::with_capacity(files.len());
        for f in files {
            let rel = f.as_ref();
            let name = rel.to_string_lossy().replace('\\', "/");
            let text = std::fs::read_to_string(env.dir.join(rel)).map_err(|e| ScriptError::Io {
                op: "read script".into(),
                path: name.clone(),
                message: e.to_string(),
            })?;
            sources.push(ScriptSource::new(name, text)?);
        }
        Self::from_sources(env, sources)
    }

    /// Loads script texts (in order), running their top level.
    pub fn from_sources(env: ScriptEnv, sources: Vec<ScriptSource>) -> Result<Self, ScriptError> {
        Self::build(env, sources, Output::Log)
    }

    pub(crate) fn build(
        env: ScriptEnv,
        sources: Vec<ScriptSource>,
        output: Output,
    ) -> Result<Self, ScriptError> {
        // A write killed mid-way (SIGKILL, power loss) leaves its temp file: ours go now.
        for root in &env.permissions.fs_write {
            super::fs::remove_stale_temp_files(root, STALE_SCAN_ENTRIES);
        }
        let core = Arc::new(HostCore::new(env.clone(), output));
        let limits = env.limits;
        let mut lua = None;
        let mut rhai: Option<RhaiHost> = None;
        for s in &sources {
            match s.lang {
                Lang::Lua => {
                    if lua.is_none() {
                        lua = Some(LuaHost::new(core.clone(), limits)?);
                    }
                }
                Lang::Rhai => {
                    if rhai.is_none() {
                        rhai = Some(RhaiHost::new(core.clone(), limits, Some(&env.dir))?);
                    }
                }
            }
        }
        // More instances: more Lua states, each built and loaded alike. Their own host cores
        // keep their registrations of hooks and overrides apart (only the first's count).
        let mut replicas = Vec::new();
        if lua.is_some() {
            for _ in 1..env.instances.max(1) {
                let c = Arc::new(HostCore::new(env.clone(), core.output.clone()));
                let l = LuaHost::new(c.clone(), limits)?;
                replicas.push((c, l));
            }
        }
        let info = CallInfo::host(format!("{}:<load>", env.plugin));
        // Each file by the name messages give it (`plugins/Dice/main.lua`); a load error
        // names the file relative to the plugin again, as callers of `build` expect.
        ActiveCall::new(&info, limits.wall_ms)
            .run(|| {
                for s in sources.iter().filter(|s| s.lang == Lang::Lua) {
                    for (_, l) in &replicas {
                        l.load_file(&lua_chunk_name(&env, &s.name), &s.text)?;
                    }
                }
                for s in &sources {
                    match s.lang {
                        Lang::Lua => {
                            if let Some(l) = &lua {
                                l.load_file(&lua_chunk_name(&env, &s.name), &s.text)?;
                            }
                        }
                        Lang::Rhai => {
                            if let Some(r) = &mut rhai {
                                r.load_file(&env.shown_name(&s.name), &s.text)?;
                            }
                        }
                    }
                }
                Ok::<(), ScriptError>(())
            })
            .map_err(|e| e.file_within(env.shown_dir.as_deref()))?;
        let scripts = PluginScripts {
            inner: Arc::new(Inner {
                env,
                core,
                lock: Arc::new(PluginLock::new(1 + replicas.len())),
                lua,
                replicas,
                rhai,
                worker: Mutex::new(None),
            }),
        };
        // Hooks and overrides registered while loading can run now. The factory holds the
        // scripts weakly (the registry holds the handlers it builds, as it holds tools).
        let weak = Arc::downgrade(&scripts.inner);
        let factory: super::hooks_api::Factory = Box::new(move || {
            let inner = weak.upgrade()?;
            Some(PluginScripts { inner })
        });
        scripts
            .inner
            .core
            .hooks
            .activate(&scripts.inner.env, factory)?;
        Ok(scripts)
    }

    /// The plugin's name.
    pub fn plugin(&self) -> &str {
        &self.inner.env.plugin
    }

    /// The environment the scripts were built from.
    pub fn env(&self) -> &ScriptEnv {
        &self.inner.env
    }

    /// Whether `function` (a global function name or a registered tool id) exists.
    pub fn has_function(&self, function: &str) -> bool {
        self.inner
            .lua
            .as_ref()
            .is_some_and(|l| l.has_function(function))
            || self
                .inner
                .rhai
                .as_ref()
                .is_some_and(|r| r.has_function(function))
    }

    /// The names of the scripts' global functions (Lua) and script functions (Rhai), for
    /// a did-you-mean when a tool or node names one that does not exist.
    pub fn function_names(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(l) = &self.inner.lua {
            out.extend(l.function_names());
        }
        if let Some(r) = &self.inner.rhai {
            out.extend(r.function_names());
        }
        out
    }

    /// Bytes used by the plugin's Lua state (0 without Lua).
    pub fn lua_memory(&self) -> usize {
        self.inner.lua.as_ref().map_or(0, LuaHost::used_memory)
            + self
                .inner
                .replicas
                .iter()
                .map(|(_, l)| l.used_memory())
                .sum::<usize>()
    }

    /// How many calls wait for their turn at the plugin's Lua states.
    pub fn queued(&self) -> usize {
        self.inner.lock.queued()
    }

    /// How many Lua states (instances) serve calls at once.
    pub fn instances(&self) -> usize {
        self.inner.lock.instances()
    }

    /// Panics caught in Rust callbacks so far (each was logged).
    pub fn panic_count(&self) -> u64 {
        std::iter::once(&self.inner.core)
            .chain(self.inner.replicas.iter().map(|(c, _)| c))
            .map(|c| c.panics.load(std::sync::atomic::Ordering::Relaxed))
            .sum()
    }

    /// Calls `function` (a global function, or the handler of a tool registered with
    /// `api.tools.register`, by tool id) with `(args, ctx)`, blocking this thread.
    ///
    /// Do not call this on an async executor's worker thread; use [`ScriptToolHandler`].
    pub fn call(&self, function: &str, args: Value, ctx: &CallInfo) -> Result<Value, ScriptError> {
        let inner = &self.inner;
        let limits = inner.env.limits;
        // A nested call never waits longer than the call that is waiting for it, nor past
        // the caller's own deadline.
        let active = ActiveCall::new(ctx, limits.wall_ms);
        let caller = ctx.caller.to_string();
        if inner.lua.is_some() {
            // Take the plugin lock before touching a Lua state at all: mlua's own lock
            // would block without deadlock detection. Hook and override functions live in
            // the first state.
            let want = if function.starts_with("hook#") {
                Want::Slot(0)
            } else {
                Want::Any
            };
            let guard =
                inner
                    .lock
                    .acquire(&inner.env.plugin, want, active.deadline, active.allowed_ms)?;
            let Some(lua) = inner.lua_at(guard.slot()) else {
                return Err(ScriptError::Internal(
                    "a lock slot without a Lua state".into(),
                ));
            };
            // A sync host tool the script calls runs with the state given up: every level
            // of the slot this thread holds (the claimed turn and this guard) is let go
            // while it runs, and taken back, ahead of calls not started yet, before the
            // script goes on (see `LuaHost::call`).
            let slot = guard.slot();
            let gate = |run: &mut dyn FnMut()| {
                let levels = inner.lock.suspend(slot);
                run();
                inner.lock.retake(
                    &inner.env.plugin,
                    slot,
                    levels,
                    active.deadline,
                    active.allowed_ms,
                )
            };
            match active.run(|| lua.call(function, &args, &ctx.tool_id, &caller, Some(&gate))) {
                Err(ScriptError::UnknownFunction { .. }) if inner.rhai.is_some() => drop(guard),
                other => return other,
            }
        }
        if let Some(rhai) = inner.rhai.as_ref().filter(|r| r.has_function(function)) {
            return active.run(|| rhai.call(function, &args, &ctx.tool_id, &caller));
        }
        Err(ScriptError::UnknownFunction {
            function: function.to_string(),
        })
    }

    /// The hook function stored under `key` (`hook#<n>`), resolved once.
    pub(crate) fn hook_fn(&self, key: &str) -> Option<HookFn> {
        if let Some((f, ctx)) = self.inner.lua.as_ref().and_then(|l| l.hook_function(key)) {
            return Some(HookFn::Lua { f, ctx });
        }
        let (ptr, params) = self.inner.rhai.as_ref()?.hook_function(key)?;
        Some(HookFn::Rhai { ptr, params })
    }

    /// Runs hook function `f` with `event` to the end on this thread, under the plugin's
    /// budgets, the caller's deadline and the plugin lock (Lua), as a tool call of
    /// `ctx.tool_id` would: no JSON round trip, no copy of the event, no thread hop.
    pub(crate) fn run_hook(
        &self,
        f: &HookFn,
        event: &Value,
        ctx: &CallContext,
    ) -> Result<HookReturn, ScriptError> {
        let inner = &self.inner;
        let active = ActiveCall::for_context(ctx, inner.env.limits.wall_ms);
        match f {
            HookFn::Lua { f, ctx: wants_ctx } => {
                let Some(lua) = &inner.lua else {
                    return Err(ScriptError::Internal(
                        "a Lua hook without a Lua state".into(),
                    ));
                };
                // A handler that takes no `ctx` gets none built.
                let caller = wants_ctx.then(|| ctx.caller.to_string());
                let hctx = caller.as_deref().map(|c| (&*ctx.tool_id, c));
                let _guard = inner.lock.acquire(
                    &inner.env.plugin,
                    Want::Slot(0),
                    active.deadline,
                    active.allowed_ms,
                )?;
                active.run(|| lua.call_hook(f, event, hctx))
            }
            HookFn::Rhai { ptr, params } => {
                let Some(rhai) = &inner.rhai else {
                    return Err(ScriptError::Internal(
                        "a Rhai hook without a Rhai engine".into(),
                    ));
                };
                let caller = ctx.caller.to_string();
                active.run(|| rhai.call_hook(ptr, *params, event, &ctx.tool_id, &caller))
            }
        }
    }

    /// A tool handler running `function` of this plugin.
    pub fn handler(&self, function: impl Into<String>) -> ScriptToolHandler {
        let function = function.into();
        ScriptToolHandler {
            scripts: self.clone(),
            function,
            mode: ExecMode::Auto,
            // Lua and Rhai alike: a Rhai call finds its big stack on the worker thread's
            // kept segment (big_stack.rs), so it needs no dedicated thread.
            auto: ExecMode::InPlace,
        }
    }

    /// Tools registered by the scripts at load time (`api.tools.register`), each with the
    /// handler that runs it. Definitions have a `service` implementation naming the script.
    pub fn registered_tools(&self) -> Vec<(ToolDefinition, Arc<dyn ToolHandler>)> {
        let mut out: Vec<(ToolDefinition, Arc<dyn ToolHandler>)> = Vec::new();
        let mut push = |id: String, display_name, description, parameters: Option<Value>| {
            let def = ToolDefinition {
                id: id.clone(),
                display_name,
                description,
                parameters: parameters.unwrap_or_else(empty_object_schema),
                implementation: Implementation::Service {
                    script: None,
                    function: Some(id.clone()),
                },
                annotations: None,
                examples: Vec::new(),
            };
            out.push((def, Arc::new(self.handler(id))));
        };
        if let Some(l) = &self.inner.lua {
            for s in l.registered() {
                push(s.id, s.display_name, s.description, s.parameters);
            }
        }
        if let Some(r) = &self.inner.rhai {
            for s in r.registered() {
                push(s.id, s.display_name, s.description, s.parameters);
            }
        }
        out
    }

    fn worker(&self) -> Result<mpsc::Sender<Job>, ToolError> {
        let mut w = self.inner.worker.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(tx) = w.as_ref() {
            return Ok(tx.clone());
        }
        let (tx, rx) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name(format!("tavern-plugin-{}", self.inner.env.plugin))
            .stack_size(64 << 20)
            .spawn(move || {
                crate::tools::runtime::yield_to_host();
                while let Ok(job) = rx.recv() {
                    job();
                }
            })
            .map_err(|e| {
                ToolError::failed(self.plugin(), format!("cannot start a script thread: {e}"))
            })?;
        *w = Some(tx.clone());
        Ok(tx)
    }
}

/// A [`ToolHandler`] running one script function of a plugin. Top-level calls run on a
/// blocking thread ([`ExecMode`]); a call made from a script (`api.tools.call`) runs inline
/// on the calling script's thread, so a plugin may call its own tools.
#[derive(Clone, Debug)]
pub struct ScriptToolHandler {
    scripts: PluginScripts,
    function: String,
    mode: ExecMode,
    /// What `ExecMode::Auto` means for this function.
    auto: ExecMode,
}

impl ScriptToolHandler {
    /// The same handler with another execution mode.
    pub fn with_mode(mut self, mode: ExecMode) -> Self {
        self.mode = mode;
        self
    }

    /// The mode calls use: [`ExecMode::Auto`] resolved for this function (`InPlace`), or the
    /// mode set with `with_mode`.
    pub fn effective_mode(&self) -> ExecMode {
        if self.mode == ExecMode::Auto {
            self.auto
        } else {
            self.mode
        }
    }

    /// The plugin's scripts.
    pub fn scripts(&self) -> &PluginScripts {
        &self.scripts
    }
}

impl ToolHandler for ScriptToolHandler {
    fn invoke(&self, ctx: CallContext, args: Value) -> ToolFuture {
        let info = CallInfo::from_context(&ctx);
        let tool = ctx.tool_id.clone();
        let handle = tokio::runtime::Handle::try_current().ok();
        if in_script_thread() || handle.is_none() {
            // Nested call from a script on this (blocking) thread, or no runtime at all.
            let r = self
                .scripts
                .call(&self.function, args, &info)
                .map_err(|e| e.into_tool_error(&tool));
            return Box::pin(std::future::ready(r));
        }
        // A top-level call waits for its turn at the plugin as a task, in the queue, until
        // its own deadline (no thread is held while it waits); the thread that then runs it
        // claims the slot it was given.
        let lock = self
            .scripts
            .inner
            .lua
            .is_some()
            .then(|| self.scripts.inner.lock.clone());
        let want = if self.function.starts_with("hook#") {
            Want::Slot(0)
        } else {
            Want::Any
        };
        let deadline = ctx.deadline;
        let turn = async move {
            let Some(lock) = lock else {
                return Ok(None);
            };
            let allowed_ms = deadline.map_or(0, |d| {
                d.saturating_duration_since(std::time::Instant::now())
                    .as_millis() as u64
            });
            lock.reserve(want, deadline, allowed_ms).await.map(Some)
        };
        let scripts = self.scripts.clone();
        let function = self.function.clone();
        let h = handle.clone();
        let job = move |turn: Option<Reservation>| {
            let _held = turn.map(Reservation::claim);
            set_thread_handle(h);
            let r = scripts.call(&function, args, &info);
            set_thread_handle(None);
            r
        };
        let mode = if self.mode == ExecMode::Auto {
            self.auto
        } else {
            self.mode
        };
        let in_place = mode == ExecMode::InPlace
            && handle
                .as_ref()
                .is_some_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
        match mode {
            ExecMode::InPlace if in_place => Box::pin(async move {
                let turn = turn.await.map_err(|e| e.into_tool_error(&tool))?;
                tokio::task::block_in_place(|| job(turn)).map_err(|e| e.into_tool_error(&tool))
            }),
            ExecMode::Blocking | ExecMode::InPlace | ExecMode::Auto => Box::pin(async move {
                let turn = turn.await.map_err(|e| e.into_tool_error(&tool))?;
                match tokio::task::spawn_blocking(move || job(turn)).await {
                    Ok(r) => r.map_err(|e| e.into_tool_error(&tool)),
                    Err(e) => Err(ToolError::failed(
                        tool,
                        format!("script thread failed: {e}"),
                    )),
                }
            }),
            ExecMode::Dedicated => {
                let worker = self.scripts.worker();
                Box::pin(async move {
                    let w = worker?;
                    let turn = turn.await.map_err(|e| e.into_tool_error(&tool))?;
                    let (tx, rx) = tokio::sync::oneshot::channel();
                    w.send(Box::new(move || {
                        let r = crate::tools::quiet(|| {
                            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job(turn)))
                        })
                        .unwrap_or_else(|_| {
                            Err(ScriptError::Internal("script thread panicked".into()))
                        });
                        let _ = tx.send(r);
                    }))
                    .map_err(|_| {
                        ToolError::failed(tool.clone(), "the plugin's script thread has stopped")
                    })?;
                    match rx.await {
                        Ok(r) => r.map_err(|e| e.into_tool_error(&tool)),
                        Err(_) => Err(ToolError::failed(
                            tool,
                            "the plugin's script thread has stopped",
                        )),
                    }
                })
            }
        }
    }
}

/// The name a Lua chunk gets: [`ScriptEnv::shown_name`], unless Lua would shorten it (its
/// messages keep at most 59 bytes of a chunk name, the rest replaced by `...`); then the
/// name from the plugin directory, whole.
fn lua_chunk_name(env: &ScriptEnv, name: &str) -> String {
    const LUA_IDSIZE: usize = 60;
    let shown = env.shown_name(name);
    if shown.len() < LUA_IDSIZE {
        shown
    } else {
        name.to_string()
    }
}
