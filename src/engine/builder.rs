//! [`EngineBuilder`]: what a host configures before [`EngineBuilder::build`] loads plugins
//! and workflows, and [`EngineError`] when that fails.

use std::path::PathBuf;
use std::sync::Arc;

use super::Engine;
use crate::config::Settings;
use crate::hooks::fire_blocking;
use crate::hooks::points::{
    EngineReady, PluginLoaded, ENGINE_READY, ENGINE_READY_IX, PLUGIN_LOADED, PLUGIN_LOADED_IX,
};
use crate::problem::Problem;
use crate::tools::{
    CallContext, Caller, CallerPolicy, ToolDefinition, ToolError, ToolHandler, ToolManager,
};
use crate::workflow::{NodeRegistry, RunDefaults, Workflows};

/// Why an engine could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EngineError {
    /// The configuration could not be read.
    #[error("configuration: {0}")]
    Config(Problem),
    /// A `--set` override (or one from `TAVERN_SET`) was malformed.
    #[error("{0}")]
    Override(#[from] crate::config::SettingError),
    /// A host tool could not be registered.
    #[error(transparent)]
    Tool(#[from] ToolError),
    /// A host hook could not be registered (unknown point).
    #[error("host hook: {0}")]
    Hook(#[from] crate::hooks::HookError),
    /// The audit file (`--audit`, setting `audit.file`) cannot be opened.
    #[error("cannot open the audit file {path}: {message}")]
    Audit {
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },
}

/// Configures and builds an [`Engine`].
///
/// Host tools and host services are given here, before [`EngineBuilder::build`] loads any
/// plugin, and their namespaces are reserved: a mod named like a host namespace cannot take
/// (or shadow) a host tool's id.
///
/// ```
/// use serde_json::json;
/// use tavern::{CallOptions, CallerPolicy, Engine, ToolDefinition};
///
/// let home = tempfile::tempdir().unwrap();
/// let engine = Engine::builder()
///     .home(home.path())
///     .host_tool(
///         ToolDefinition::host("world:time", "The game clock.", json!({"type": "object"})),
///         |_ctx, _args| Ok(json!({"tick": 42})),
///     )
///     .policy("world:time", CallerPolicy::ANY)
///     .build()
///     .unwrap();
/// let report = engine
///     .call_blocking(
///         "<|[REQUEST_TOOL]|>\ncommand:「始」world:time「末」\n<|[END_TOOL]|>",
///         CallOptions::new(),
///     )
///     .unwrap();
/// assert_eq!(report.outcomes[0].result, Ok(json!({"tick": 42})));
/// ```
pub struct EngineBuilder {
    home: PathBuf,
    overrides: Vec<String>,
    builtins: bool,
    plugins: bool,
    workflows: bool,
    host_tools: Vec<(ToolDefinition, Arc<dyn ToolHandler>)>,
    script_limits: crate::script::Limits,
    process_limits: crate::sandbox::confine::ProcessLimits,
    /// Caller policies for host tools, by id.
    policies: Vec<(String, CallerPolicy)>,
    /// Namespaces reserved for the host beyond those of its tools.
    reserved: Vec<String>,
    /// Host services plugins can bind by name (added to the defaults).
    services: Vec<(String, crate::plugins::ServiceFactory)>,
    /// The runtime to run async work on (default: a small one the engine owns).
    runtime: Option<tokio::runtime::Handle>,
    /// Hooks and overrides (host closures registered before `build` live here too).
    hooks: Arc<crate::hooks::Hooks>,
    hook_errors: Vec<crate::hooks::HookError>,
    audit: Option<PathBuf>,
    user_scripts: bool,
    /// Main-thread host tools, each bound to the thread that registered it.
    main_tools: Vec<(ToolDefinition, super::host_tools::BoundMainFn)>,
    /// The thread that runs `main_thread_tool_send` tools (default: the first to pump).
    pump_thread: Option<std::thread::ThreadId>,
    log: Option<crate::tools::LogCallback>,
    /// Whether mods' log lines go to stderr when no callback is set (default yes).
    log_to_stderr: bool,
    /// What scripts' `api.store` keeps (default: a memory store of the engine's own).
    kv_store: Option<Arc<dyn crate::store::KvStore>>,
    /// Where the live world comes from (default: `world.json` in memory).
    world: WorldSource,
    /// A previous engine's world, kept when `world.json` did not change (reloads).
    keep_world: Option<(Option<serde_json::Value>, Arc<dyn crate::store::WorldState>)>,
}

/// Where an engine's live world comes from.
#[derive(Default)]
enum WorldSource {
    /// `<home>/world.json`, in memory.
    #[default]
    Home,
    /// The host's own.
    Host(Arc<dyn crate::store::WorldState>),
    /// A document in the engine's `KvStore`, named so (read as `world.json` until written).
    Store(String),
}

/// The namespace a host tool's id reserves (`world` for `world:set`, the id itself for a
/// bare id).
pub(crate) fn namespace_of(id: &str) -> &str {
    id.split_once(':').map_or(id, |(n, _)| n)
}

impl Default for EngineBuilder {
    fn default() -> Self {
        EngineBuilder {
            home: PathBuf::from("."),
            overrides: Vec::new(),
            builtins: true,
            plugins: true,
            workflows: true,
            host_tools: Vec::new(),
            script_limits: crate::script::Limits::engine_default(),
            process_limits: crate::sandbox::confine::ProcessLimits::DEFAULT,
            policies: Vec::new(),
            reserved: Vec::new(),
            services: Vec::new(),
            runtime: None,
            hooks: crate::hooks::Hooks::new(),
            hook_errors: Vec::new(),
            audit: None,
            user_scripts: true,
            main_tools: Vec::new(),
            pump_thread: None,
            log: None,
            log_to_stderr: true,
            kv_store: None,
            world: WorldSource::Home,
            keep_world: None,
        }
    }
}

impl EngineBuilder {
    /// The home directory holding `plugins/`, `workflows/` and `tavern.toml` (default `.`).
    pub fn home(mut self, dir: impl Into<PathBuf>) -> Self {
        self.home = dir.into();
        self
    }

    /// A `KEY=VALUE` setting applied over `tavern.toml`.
    pub fn set(mut self, assignment: impl Into<String>) -> Self {
        self.overrides.push(assignment.into());
        self
    }

    /// Whether to register the `system:*` tools (default yes).
    pub fn builtins(mut self, yes: bool) -> Self {
        self.builtins = yes;
        self
    }

    /// Whether to load `<home>/plugins` (default yes).
    pub fn plugins(mut self, yes: bool) -> Self {
        self.plugins = yes;
        self
    }

    /// Whether to load `<home>/workflows` (default yes).
    pub fn workflows(mut self, yes: bool) -> Self {
        self.workflows = yes;
        self
    }

    /// The script limits every plugin runs with, and their cap (default: the engine
    /// defaults, [`Limits::engine_default`](crate::Limits::engine_default)). Raising them
    /// raises them for every plugin; a plugin may lower its own limits in plugin.yaml but
    /// never raise them past these.
    pub fn script_limits(mut self, limits: crate::script::Limits) -> Self {
        self.script_limits = limits;
        self
    }

    /// The host's cap on every process tool's limits (memory, CPU, processes, open files,
    /// output; default [`crate::sandbox::confine::ProcessLimits::DEFAULT`]). Plugins and tools
    /// may lower them; `process.*` settings replace single caps.
    pub fn process_limits(mut self, limits: crate::sandbox::confine::ProcessLimits) -> Self {
        self.process_limits = limits;
        self
    }

    /// Registers a host (Rust) tool. It is registered before plugins load, and its
    /// namespace (`world` for `world:set`, the id itself for a bare id) is reserved.
    pub fn tool(mut self, definition: ToolDefinition, handler: Arc<dyn ToolHandler>) -> Self {
        self.host_tools.push((definition, handler));
        self
    }

    /// Registers a host tool from a closure (see [`EngineBuilder::tool`]). A panic in the
    /// closure is contained: the call fails with [`ToolError::Panicked`].
    ///
    /// The closure may block: it runs where blocking is allowed, with at most one thread
    /// hop — on the blocking-pool thread already driving a submitted or blocking call, on
    /// the script's own thread when a mod calls it, else on the runtime's blocking pool — so
    /// a slow one never delays another call. Called from a Lua mod (`api.tools.call`), it
    /// runs with the mod's script state given up (the mod's call is suspended as a
    /// coroutine and goes on once the tool returns), so other calls to the mod are served
    /// meanwhile. Where the script cannot yield (from the mod's own coroutines, below a
    /// Rust function such as a `string.gsub` callback, in a hook handler) the tool runs
    /// holding the state; a mod doing that with a slow tool can be given `instances: N` in
    /// plugin.yaml (N script states, each serving one call). A Rhai mod's calls run side
    /// by side already. Async
    /// and main-thread tools called from a Lua mod hold its state while the mod waits for
    /// them (docs/embedding.md, "Where host tools run"). It must be `Send + Sync`; for a
    /// handler that must run on the game's thread, see [`EngineBuilder::main_thread_tool`];
    /// async ones are [`EngineBuilder::host_tool_async`].
    ///
    /// ```
    /// use serde_json::json;
    /// use tavern::{CallOptions, Engine, ToolDefinition, ToolError};
    /// # let home = tempfile::tempdir().unwrap();
    /// let engine = Engine::builder()
    ///     .home(home.path())
    ///     .host_tool(
    ///         ToolDefinition::host(
    ///             "world:damage",
    ///             "Hurts an actor.",
    ///             json!({"type": "object", "properties": {"amount": {"type": "integer"}},
    ///                    "required": ["amount"]}),
    ///         ),
    ///         |_ctx, args| {
    ///             let n = args["amount"].as_i64().unwrap_or(0);
    ///             if n < 0 {
    ///                 panic!("negative damage"); // contained: the call fails, the host goes on
    ///             }
    ///             Ok(json!({"dealt": n}))
    ///         },
    ///     )
    ///     .build()
    ///     .unwrap();
    /// let call = |n: i32| {
    ///     let text = format!("<|[REQUEST_TOOL]|>\ncommand:「始」world:damage「末」\namount:「始」{n}「末」\n<|[END_TOOL]|>");
    ///     engine.call_blocking(&text, CallOptions::new()).unwrap().outcomes.remove(0).result
    /// };
    /// assert_eq!(call(3), Ok(json!({"dealt": 3})));
    /// assert!(matches!(call(-1), Err(ToolError::Panicked { .. })));
    /// ```
    pub fn host_tool<F>(self, definition: ToolDefinition, f: F) -> Self
    where
        F: Fn(&CallContext, serde_json::Value) -> Result<serde_json::Value, ToolError>
            + Send
            + Sync
            + 'static,
    {
        self.tool(definition, super::blocking_handler(f))
    }

    /// Registers a main-thread host tool: its handler runs only inside [`Engine::pump`]
    /// (or while [`Engine::call_blocking`] waits) on **the thread that calls this method**,
    /// so it need not be `Send` and may touch the game's world objects directly.
    ///
    /// A call to it — from a model's text or from a mod's `api.tools.call` — is parked
    /// until the next pump on that thread runs it, within that pump's budget; its result
    /// then goes back to the caller (a mod resumes where it called). A parked call still
    /// ends at its caller's deadline or cancel token. A panic in the handler fails the call
    /// with [`ToolError::Panicked`]. Its namespace is reserved like any host tool's. The
    /// handler is dropped with the engine on its thread; an engine dropped on another
    /// thread leaks it instead (its destructor may only run on its own thread). An async
    /// [`Engine::call`] awaited on that thread does not run it: keep pumping meanwhile, or
    /// use [`Engine::call_blocking`], which does.
    ///
    /// ```
    /// use std::cell::RefCell;
    /// use std::rc::Rc;
    /// use std::time::Duration;
    /// use serde_json::json;
    /// use tavern::{Engine, ToolDefinition};
    /// # let home = tempfile::tempdir().unwrap();
    /// // Not `Send`: the world lives on the game thread.
    /// let spawned = Rc::new(RefCell::new(Vec::<String>::new()));
    /// let world = spawned.clone();
    /// let engine = Engine::builder()
    ///     .home(home.path())
    ///     .main_thread_tool(
    ///         ToolDefinition::host("world:spawn", "Spawns an actor.", json!({
    ///             "type": "object", "properties": {"kind": {"type": "string"}}, "required": ["kind"]})),
    ///         move |_ctx, args| {
    ///             world.borrow_mut().push(args["kind"].as_str().unwrap_or("?").to_string());
    ///             Ok(json!({"id": world.borrow().len()}))
    ///         },
    ///     )
    ///     .build()
    ///     .unwrap();
    /// let ticket = engine.submit("<|[REQUEST_TOOL]|>\ncommand:「始」world:spawn「末」\nkind:「始」goblin「末」\n<|[END_TOOL]|>").unwrap();
    /// let report = loop {
    ///     engine.pump(Duration::from_millis(2)); // one frame's budget: runs world:spawn here
    ///     if let Some(r) = engine.take(ticket) {
    ///         break r.unwrap();
    ///     }
    /// };
    /// assert_eq!(report.outcomes[0].result, Ok(json!({"id": 1})));
    /// assert_eq!(spawned.borrow().as_slice(), ["goblin"]);
    /// ```
    pub fn main_thread_tool<F>(mut self, definition: ToolDefinition, f: F) -> Self
    where
        F: FnMut(&CallContext, serde_json::Value) -> Result<serde_json::Value, ToolError> + 'static,
    {
        let bound = super::host_tools::bind(std::thread::current().id(), Box::new(f));
        self.main_tools.push((definition, bound));
        self
    }

    /// [`EngineBuilder::main_thread_tool`] for a handler that may move between threads,
    /// run by pumps on the thread `owner` (for an engine built on a loader thread and
    /// pumped on the game thread: pass the game thread's id). The C ABI uses it with the
    /// thread that registers the tool.
    pub fn main_thread_tool_on<F>(
        mut self,
        owner: std::thread::ThreadId,
        definition: ToolDefinition,
        f: F,
    ) -> Self
    where
        F: FnMut(&CallContext, serde_json::Value) -> Result<serde_json::Value, ToolError>
            + Send
            + 'static,
    {
        let bound = super::host_tools::bind(owner, Box::new(f));
        self.main_tools.push((definition, bound));
        self
    }

    /// A main-thread tool whose handler may move between threads: it runs inside
    /// [`Engine::pump`] on the engine's **pump thread** — the one named with
    /// [`EngineBuilder::pump_thread`], else the first thread that calls `pump` — whichever
    /// thread built the engine. The choice for an engine built on a loader thread:
    ///
    /// - a `Send` handler: this method (or [`EngineBuilder::main_thread_tool_on`] with the
    ///   game thread's id);
    /// - a handler that is not `Send` ([`EngineBuilder::main_thread_tool`]) is bound to the
    ///   thread that registered it, so register it on the thread that pumps.
    ///
    /// A call that waits a second for a pump that does not come is logged once (the tool,
    /// the thread it waits for, the thread that pumped last) and ends at its deadline.
    ///
    /// ```
    /// use std::time::Duration;
    /// use serde_json::json;
    /// use tavern::{Engine, ToolDefinition};
    /// # let home = tempfile::tempdir().unwrap();
    /// # let home = home.path().to_path_buf();
    /// // Built on a loader thread...
    /// let engine = std::thread::spawn(move || {
    ///     Engine::builder()
    ///         .home(home)
    ///         .main_thread_tool_send(
    ///             ToolDefinition::host("world:tick", "The game tick.", json!({"type": "object"})),
    ///             |_ctx, _args| Ok(json!(std::thread::current().name().map(String::from))),
    ///         )
    ///         .build()
    ///         .unwrap()
    /// })
    /// .join()
    /// .unwrap();
    /// // ... pumped here: the tool runs here.
    /// let ticket = engine.submit("<|[REQUEST_TOOL]|>\ncommand:「始」world:tick「末」\n<|[END_TOOL]|>").unwrap();
    /// let report = loop {
    ///     engine.pump(Duration::from_millis(1));
    ///     if let Some(r) = engine.take(ticket) {
    ///         break r.unwrap();
    ///     }
    ///     std::thread::sleep(Duration::from_millis(1));
    /// };
    /// assert_eq!(report.outcomes[0].result, Ok(json!(std::thread::current().name())));
    /// ```
    pub fn main_thread_tool_send<F>(mut self, definition: ToolDefinition, f: F) -> Self
    where
        F: FnMut(&CallContext, serde_json::Value) -> Result<serde_json::Value, ToolError>
            + Send
            + 'static,
    {
        self.main_tools
            .push((definition, super::host_tools::on_pumper(Box::new(f))));
        self
    }

    /// The thread whose pumps run the tools of [`EngineBuilder::main_thread_tool_send`]
    /// (default: the first thread that calls [`Engine::pump`]).
    pub fn pump_thread(mut self, thread: std::thread::ThreadId) -> Self {
        self.pump_thread = Some(thread);
        self
    }

    /// Sends mods' `print` and `api.log.*` lines (and `ctx.log`), and the engine's own
    /// warnings (a panicking tool or script, and every load problem once the build ends),
    /// to `callback` instead of `tracing`. The record's `source` is the plugin or script
    /// (`plugin:<name>`, `script:<name>`), `tool:<id>`, or a file for a load problem. Per
    /// engine; called from engine threads, possibly several at once: keep it quick.
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// # let home = tempfile::tempdir().unwrap();
    /// # let dir = home.path().join("plugins/chatty");
    /// # std::fs::create_dir_all(&dir).unwrap();
    /// # std::fs::write(dir.join("plugin.yaml"), "name: chatty\nversion: 1.0.0\n").unwrap();
    /// # std::fs::write(dir.join("main.lua"), "api.tools.register({id = 'hi', description = 'says hi', handler = function() print('hello from the mod'); return true end})").unwrap();
    /// let lines = Arc::new(Mutex::new(Vec::new()));
    /// let sink = lines.clone();
    /// let engine = tavern::Engine::builder()
    ///     .home(home.path())
    ///     .log_callback(move |r| sink.lock().unwrap().push(format!("{}: {}", r.source, r.message)))
    ///     .build()
    ///     .unwrap();
    /// engine.call_blocking("<|[REQUEST_TOOL]|>\ncommand:「始」chatty:hi「末」\n<|[END_TOOL]|>", Default::default()).unwrap();
    /// assert!(lines.lock().unwrap().contains(&"plugin:chatty: hello from the mod".to_string()));
    /// ```
    pub fn log_callback<F>(mut self, callback: F) -> Self
    where
        F: Fn(&crate::tools::LogRecord<'_>) + Send + Sync + 'static,
    {
        self.log = Some(Arc::new(callback));
        self
    }

    /// Whether mods' log lines (and the engine's warnings) go to stderr, from `Info` up, when
    /// no log callback is set (default yes: `[info] plugin:weather: ...`). With `false` they
    /// are `tracing` events (target `tavern::script`) for a host that subscribes.
    pub fn log_to_stderr(mut self, yes: bool) -> Self {
        self.log_to_stderr = yes;
        self
    }

    /// Registers an async host tool from a closure (see [`EngineBuilder::tool`]). Its future
    /// runs on the engine's runtime and must not block (use [`EngineBuilder::host_tool`]
    /// for blocking work).
    pub fn host_tool_async<F, Fut>(self, definition: ToolDefinition, f: F) -> Self
    where
        F: Fn(CallContext, serde_json::Value) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<serde_json::Value, ToolError>> + Send + 'static,
    {
        self.tool(definition, crate::tools::async_fn_handler(f))
    }

    /// Who may call tool `id` (default [`CallerPolicy::ANY`]); applied after plugins load,
    /// so it may name a plugin's tool too. An unknown id is listed in [`Engine::problems`].
    pub fn policy(mut self, id: impl Into<String>, policy: CallerPolicy) -> Self {
        self.policies.push((id.into(), policy));
        self
    }

    /// Reserves a namespace for the host even before it has tools there.
    pub fn reserve_namespace(mut self, ns: impl Into<String>) -> Self {
        self.reserved.push(ns.into());
        self
    }

    /// Offers a host service that plugins bind by name in their tool files (beside the
    /// defaults `code.execute` and `text.regex_replace`; the same name replaces a default).
    pub fn service<F>(mut self, name: impl Into<String>, f: F) -> Self
    where
        F: Fn(&CallContext, serde_json::Value) -> Result<serde_json::Value, ToolError>
            + Send
            + Sync
            + 'static,
    {
        let handler = super::blocking_handler(f);
        let factory: crate::plugins::ServiceFactory = Arc::new(move |_| handler.clone());
        self.services.push((name.into(), factory));
        self
    }

    /// Runs the engine's async work (process, node and workflow tools, nested calls) on the
    /// host's runtime instead of a small runtime of the engine's own. The runtime must have
    /// IO and time enabled (`enable_all`).
    pub fn runtime(mut self, handle: tokio::runtime::Handle) -> Self {
        self.runtime = Some(handle);
        self
    }

    /// Keeps what scripts put in `api.store` in `store` (a [`crate::MemoryStore`] shared
    /// by several engines, one of the host's own, or the Redis store of a served home)
    /// instead of a memory store of this engine's own.
    pub fn kv_store(mut self, store: Arc<dyn crate::store::KvStore>) -> Self {
        self.kv_store = Some(store);
        self
    }

    /// Makes `world` the engine's live world instead of one in memory made from
    /// `<home>/world.json`: the world the engine's agents read, scripts change with
    /// `api.world.set` (plugins that declare `permissions.world`) and the host reaches
    /// through [`Engine::world_state`]. The engine does not write `world.json` into it.
    ///
    /// ```
    /// use tavern::{MemoryWorldState, WorldState};
    /// # let home = tempfile::tempdir().unwrap();
    /// let world = MemoryWorldState::new(serde_json::json!({"weather": "rain"}));
    /// let engine = tavern::Engine::builder()
    ///     .home(home.path())
    ///     .world_state(world.clone())
    ///     .build()
    ///     .unwrap();
    /// engine.world_state().set("weather", "sun".into()).unwrap();
    /// assert_eq!(world.get("weather"), Some("sun".into()));
    /// ```
    pub fn world_state(mut self, world: Arc<dyn crate::store::WorldState>) -> Self {
        self.world = WorldSource::Host(world);
        self
    }

    /// Keeps the engine's live world in its [`kv_store`](EngineBuilder::kv_store) as one
    /// document (key `tavern:world:<name>`, a [`crate::StoreWorldState`]), which reads as
    /// `<home>/world.json` until something first writes it: every engine (or replica of a
    /// served home) on the same store shares the world. `tavern serve --store` uses the name
    /// `home`.
    pub fn world_in_store(mut self, name: impl Into<String>) -> Self {
        self.world = WorldSource::Store(name.into());
        self
    }

    /// Keeps `previous`'s live world when this home's `world.json` is what `previous` read
    /// (a reload that changed plugins, not the world); otherwise the world starts anew from
    /// the file. A world the host gives ([`EngineBuilder::world_state`]) wins.
    #[doc(hidden)]
    pub fn keep_world_of(mut self, previous: &Engine) -> Self {
        self.keep_world = Some((
            previous.world().cloned(),
            previous.tools().world_state().inner().clone(),
        ));
        self
    }

    /// Whether to load the power-user hook scripts `<home>/scripts/*.lua|*.rhai` (default yes).
    pub fn user_scripts(mut self, yes: bool) -> Self {
        self.user_scripts = yes;
        self
    }

    /// Writes the audit trail (every call, veto and override decision) to `file` as JSON
    /// lines (overrides the `audit.file` setting).
    pub fn audit(mut self, file: impl Into<PathBuf>) -> Self {
        self.audit = Some(file.into());
        self
    }

    /// The engine's hook registry, to register host hooks and overrides before plugins load.
    pub fn hooks(&self) -> &Arc<crate::hooks::Hooks> {
        &self.hooks
    }

    /// Registers a synchronous host hook on `point` (see `docs/hooks.md`).
    pub fn hook<F>(mut self, point: &str, f: F) -> Self
    where
        F: Fn(&str, &serde_json::Value) -> crate::hooks::HookReturn + Send + Sync + 'static,
    {
        if let Err(e) = self.hooks.on_fn(point, Default::default(), f) {
            self.hook_errors.push(e);
        }
        self
    }

    /// Registers an async host hook on `point`.
    pub fn hook_async<F, Fut>(mut self, point: &str, f: F) -> Self
    where
        F: Fn(&'static str, serde_json::Value, crate::tools::CallContext) -> Fut
            + Send
            + Sync
            + 'static,
        Fut: std::future::Future<Output = Result<crate::hooks::HookReturn, crate::hooks::HookError>>
            + Send
            + 'static,
    {
        if let Err(e) = self.hooks.on_async(point, Default::default(), f) {
            self.hook_errors.push(e);
        }
        self
    }

    /// Builds the engine: reads settings, registers tools, loads plugins and workflows.
    /// Broken plugins or workflows do not fail the build; they are listed in
    /// [`Engine::problems`].
    ///
    /// ```
    /// # let home = tempfile::tempdir().unwrap();
    /// std::fs::create_dir_all(home.path().join("plugins/broken")).unwrap();
    /// std::fs::write(home.path().join("plugins/broken/plugin.yaml"), "name: [").unwrap();
    /// let engine = tavern::Engine::builder().home(home.path()).build().unwrap();
    /// assert!(!engine.problems().is_empty(), "the broken plugin is reported, not fatal");
    ///
    /// // A malformed setting is an error of the build itself.
    /// let err = tavern::Engine::builder().home(home.path()).set("no equals sign").build();
    /// assert!(matches!(err, Err(tavern::EngineError::Override(_))));
    /// ```
    pub fn build(self) -> Result<Engine, EngineError> {
        let mut settings = Settings::load(&self.home)
            .map_err(|p| EngineError::Config(p.relative_to(&self.home)))?;
        settings.apply_env().map_err(EngineError::Override)?;
        for o in &self.overrides {
            settings.set_override(o).map_err(EngineError::Override)?;
        }
        settings.resolve_paths(&self.home);
        if let Some(e) = self.hook_errors.into_iter().next() {
            return Err(EngineError::Hook(e));
        }
        let tools = ToolManager::new();
        crate::tools::install_panic_hook();
        tools.log().set(self.log);
        tools.log().set_stderr(self.log_to_stderr);
        let pump = Arc::new(super::pump::PumpShared::default());
        if let Some(t) = self.pump_thread {
            pump.set_pump_thread(t);
        }
        if let Some(h) = self.runtime.clone() {
            tools.set_runtime(h);
        }
        tools.set_interceptor(self.hooks.clone());
        tools.set_list_nodes(
            settings.get("tools.list_nodes") == Some(&serde_json::Value::Bool(true)),
        );
        if let Some(kv) = self.kv_store.clone() {
            tools.set_kv_store(kv);
        }
        let audit = self.audit.clone().or_else(|| {
            settings
                .get("audit.file")
                .and_then(|v| v.as_str())
                .map(std::path::PathBuf::from)
        });
        if let Some(path) = audit {
            let sink = crate::hooks::AuditSink::file(&path).map_err(|e| EngineError::Audit {
                path: path.clone(),
                message: e.to_string(),
            })?;
            self.hooks.set_audit(sink);
        }
        if self.builtins {
            crate::tools::builtin::register(&tools)?;
            tools.reserve_namespace("system");
        }
        for ns in &self.reserved {
            tools.reserve_namespace(ns);
        }
        for def in self
            .host_tools
            .iter()
            .map(|(d, _)| d)
            .chain(self.main_tools.iter().map(|(d, _)| d))
        {
            tools.reserve_namespace(namespace_of(&def.id));
        }
        for (def, handler) in self.host_tools {
            tools.register_reserved(def, handler, CallerPolicy::ANY)?;
        }
        for (def, f) in self.main_tools {
            let tool = super::host_tools::MainThreadTool::new(f, &pump);
            tools.register_reserved(
                def,
                Arc::new(super::host_tools::Parked(tool)),
                CallerPolicy::ANY,
            )?;
        }
        let mut services = crate::plugins::HostServices::with_defaults();
        for (name, factory) in self.services {
            services.register(name, factory);
        }
        // A built-in setting of the wrong type or an unknown one (`[llm] modle`) is a
        // problem where it was written, as `plugin check` reports it.
        let mut problems = settings.check_known();
        // The live world, before anything loads (scripts may read it at load).
        let world = read_world(&self.home, &mut problems);
        let live: Arc<dyn crate::store::WorldState> = match (self.world, self.keep_world) {
            (WorldSource::Host(w), _) => w,
            (_, Some((seed, w))) if seed == world => w,
            (WorldSource::Store(name), _) => {
                // The store's I/O runs where the store was made: the host's runtime, the
                // one building (a server's reload), else the engine's own.
                let runtime = self
                    .runtime
                    .clone()
                    .or_else(|| tokio::runtime::Handle::try_current().ok())
                    .or_else(|| tools.runtime_handle().ok());
                crate::store::StoreWorldState::seeded(
                    tools.kv_store().clone(),
                    &name,
                    world.clone(),
                    runtime,
                )
            }
            (WorldSource::Home, _) => crate::store::MemoryWorldState::new(
                world.clone().unwrap_or_else(|| serde_json::json!({})),
            ),
        };
        tools.set_world_state(live);
        // The node registry exists before plugins load, so plugins can add node types.
        let registry = NodeRegistry::with_builtins();
        crate::agent::register_nodes(&registry, &settings);
        let workflows = Arc::new(
            Workflows::new(Arc::new(registry))
                .with_defaults(RunDefaults::from_settings(&settings))
                .with_hooks(self.hooks.clone())
                .with_home(&self.home),
        );
        let plugins = if self.plugins {
            let report =
                crate::plugins::Loader::new(&self.home, &settings, tools.clone(), &services)
                    .with_workflows(workflows.clone())
                    .with_hooks(self.hooks.clone())
                    .host_limits(self.script_limits)
                    .process_caps(self.process_limits)
                    .load_dir(&self.home.join("plugins"));
            crate::plugins::unavailable::mark(
                &tools,
                &self.home,
                &self.home.join("plugins"),
                report.plugins.list(),
                &report.problems,
            );
            problems.extend(report.problems);
            problems.extend(crate::plugins::config::undeclared_all(
                report.plugins.list(),
                &settings,
                &self.home.join("tavern.toml"),
            ));
            report.plugins
        } else {
            crate::plugins::PluginSet::default()
        };
        // `<home>/workflows/*.json` (plugins' workflows are in already), each with an
        // interface as `workflow:<id>`.
        if self.workflows {
            problems.extend(workflows.load_dir(&self.home.join("workflows")));
        }
        problems.extend(workflows.register_tools(&tools));
        for (id, policy) in self.policies {
            if !tools.set_policy(&id, policy) {
                problems.push(Problem::new(
                    self.home.clone(),
                    format!("caller policy for unknown tool '{id}'"),
                ));
            }
        }
        if self.workflows {
            problems.extend(crate::workflow::config_tools::load(
                &self.home, &workflows, &tools,
            ));
            problems.extend(crate::workflow::node_tools::register_all(
                &workflows, &tools,
            ));
        }
        // The engine's lifecycle points: `plugin:loaded` per plugin, then (after the
        // power-user scripts) `engine:ready`.
        if self.hooks.active_at(PLUGIN_LOADED_IX) {
            let ctx = CallContext::top(PLUGIN_LOADED, Caller::Host, tools.clone());
            for p in plugins.list() {
                let mut ev = PluginLoaded {
                    plugin: p.name(),
                    tools: serde_json::json!(p.tools),
                    nodes: serde_json::json!(p.nodes),
                    workflows: serde_json::json!(p.workflows),
                };
                let _ = fire_blocking(PLUGIN_LOADED, ev.fire(&self.hooks, &ctx));
            }
        }
        let user_scripts = if self.user_scripts {
            let (s, ps) = crate::plugins::user_scripts::load(
                &self.home,
                &settings,
                &tools,
                Some(&self.hooks),
                self.script_limits,
            );
            problems.extend(ps);
            s
        } else {
            Vec::new()
        };
        if self.hooks.active_at(ENGINE_READY_IX) {
            let ctx = CallContext::top(ENGINE_READY, Caller::Host, tools.clone());
            let names: Vec<&str> = plugins.list().iter().map(|p| p.name()).collect();
            let mut ev = EngineReady {
                tools: serde_json::json!(tools.len()),
                plugins: serde_json::json!(names),
                workflows: serde_json::json!(workflows.ids()),
            };
            let _ = fire_blocking(ENGINE_READY, ev.fire(&self.hooks, &ctx));
        }
        // Every problem names its file relative to the home (no absolute path reaches a
        // model or a client).
        let problems: Vec<_> = problems
            .into_iter()
            .map(|p| p.relative_to(&self.home))
            .collect();
        // The host hears of every load problem through its log callback, if it set one
        // (without one they are only in `Engine::problems`, as the CLI prints them).
        if tools.log().has_callback() {
            for p in &problems {
                let source = match p.line {
                    Some(l) => format!("{}:{l}", p.file.display()),
                    None => p.file.display().to_string(),
                };
                tools.log().warn(&source, &p.message);
            }
        }
        Ok(Engine {
            world,
            home: self.home,
            settings,
            tools,
            workflows,
            problems,
            plugins,
            pump: super::Pump::new(pump),
            hooks: self.hooks,
            user_scripts,
        })
    }
}

/// `<home>/world.json`, the world state the home's agents start from: read here, once, so
/// every way in (`tavern agent run`, the server's agent sessions, a host) sees the same
/// world. Missing: none. Not JSON or not an object: a problem (file:line) and none.
fn read_world(home: &std::path::Path, problems: &mut Vec<Problem>) -> Option<serde_json::Value> {
    let path = home.join("world.json");
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => {
            problems.push(Problem::new(
                &path,
                format!("cannot read the world state: {e}"),
            ));
            return None;
        }
    };
    match serde_json::from_str::<serde_json::Value>(&text) {
        Ok(v @ serde_json::Value::Object(_)) => Some(v),
        Ok(_) => {
            problems
                .push(Problem::new(&path, "the world state must be a JSON object").at(1, Some(1)));
            None
        }
        Err(e) => {
            problems.push(
                Problem::new(&path, format!("the world state is not JSON: {e}"))
                    .at(e.line() as u32, Some(e.column() as u32)),
            );
            None
        }
    }
}
