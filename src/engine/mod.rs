//! `Engine`: the embedding entry point, and the one run path every way in goes through.
//! Built by [`Engine::builder`]; no global state, so several engines can live in one
//! process.
//!
//! - `builder.rs`: [`EngineBuilder`], what a host configures before plugins load;
//! - `run.rs`: `call` / `call_blocking` / `run` / `run_blocking` put the one run path
//!   ([`run`], with its [`Request`], [`CallOptions`] and [`CallReport`], which live in
//!   `crate::request`, below `agent`) on the engine's runtime;
//! - `pump.rs`: `submit` / `pump` / `take` for a game loop;
//! - `agent.rs`: [`Engine::agent`], the engine handing its parts to an agent runtime.

mod agent;
mod builder;
mod host_tools;
mod pump;
mod run;

pub use crate::request::{outcome_json, run, CallOptions, CallReport, CancelToken, Input, Request};
pub use builder::{EngineBuilder, EngineError};
pub use host_tools::blocking_handler;
pub(crate) use pump::Pump;
pub use pump::Ticket;
pub use run::EmbedError;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::config::Settings;
use crate::problem::Problem;
use crate::tools::{CallContext, CallerPolicy, ToolDefinition, ToolError, ToolManager};
use crate::workflow::Workflows;

/// A configured tavern engine.
pub struct Engine {
    home: PathBuf,
    settings: Settings,
    tools: Arc<ToolManager>,
    workflows: Arc<Workflows>,
    problems: Vec<Problem>,
    /// Loaded plugins; holding them keeps their script states alive.
    plugins: crate::plugins::PluginSet,
    /// Submitted calls and their results (`submit`/`pump`/`take`).
    pub(crate) pump: Pump,
    hooks: Arc<crate::hooks::Hooks>,
    /// Power-user scripts; holding them keeps their script states alive.
    user_scripts: Vec<crate::plugins::user_scripts::UserScript>,
    /// `<home>/world.json`, the world the home's agents start from.
    world: Option<serde_json::Value>,
}

// A host shares one engine between its threads.
const _: () = {
    const fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Engine>();
};

impl Engine {
    /// `<home>/world.json` as it was read when the engine was built (a file that is not a
    /// JSON object is in [`Engine::problems`]): what the live world
    /// ([`Engine::world_state`]) started from.
    pub fn world(&self) -> Option<&serde_json::Value> {
        self.world.as_ref()
    }

    /// The engine's live world: the one its agents read, scripts change with `api.world.set`
    /// and a host reads and changes here. It is `<home>/world.json` in memory unless the
    /// builder was given another ([`EngineBuilder::world_state`],
    /// [`EngineBuilder::world_in_store`]). Every successful `set` through it is announced
    /// to MCP clients subscribed to `tavern://world` when the engine is served.
    ///
    /// ```
    /// # let home = tempfile::tempdir().unwrap();
    /// std::fs::write(home.path().join("world.json"), r#"{"weather": {"now": "rain"}}"#).unwrap();
    /// let engine = tavern::Engine::builder().home(home.path()).build().unwrap();
    /// let world = engine.world_state();
    /// assert_eq!(world.get("weather.now"), Some("rain".into()));
    /// world.set("weather.now", "sun".into()).unwrap();
    /// assert_eq!(world.get("weather.now"), Some("sun".into()));
    /// ```
    pub fn world_state(&self) -> Arc<dyn crate::store::WorldState> {
        self.tools.world_state().clone()
    }

    /// Starts configuring an engine (see [`EngineBuilder`] for the options).
    ///
    /// ```
    /// # let home = tempfile::tempdir().unwrap();
    /// let engine = tavern::Engine::builder()
    ///     .home(home.path())
    ///     .plugins(false)
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(engine.home(), home.path());
    /// ```
    pub fn builder() -> EngineBuilder {
        EngineBuilder::default()
    }

    /// The home directory.
    pub fn home(&self) -> &Path {
        &self.home
    }

    /// The effective settings.
    /// Internal (`tavern::internal`), for the binary and tests; not part of the host API.
    #[doc(hidden)]
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The tool registry.
    /// Internal (`tavern::internal`), for the binary and tests; not part of the host API.
    #[doc(hidden)]
    pub fn tools(&self) -> &Arc<ToolManager> {
        &self.tools
    }

    /// The plugins loaded from `<home>/plugins`.
    /// Internal (`tavern::internal`), for the binary and tests; not part of the host API.
    #[doc(hidden)]
    pub fn plugins(&self) -> &crate::plugins::PluginSet {
        &self.plugins
    }

    /// The loaded workflows and the node registry behind them.
    /// Internal (`tavern::internal`), for the binary and tests; not part of the host API.
    #[doc(hidden)]
    pub fn workflows(&self) -> &Arc<Workflows> {
        &self.workflows
    }

    /// Hooks and overrides (register host hooks here, or on the builder).
    pub fn hooks(&self) -> &Arc<crate::hooks::Hooks> {
        &self.hooks
    }

    /// The power-user scripts loaded from `<home>/scripts`.
    /// Internal (`tavern::internal`), for the binary and tests; not part of the host API.
    #[doc(hidden)]
    pub fn user_scripts(&self) -> &[crate::plugins::user_scripts::UserScript] {
        &self.user_scripts
    }

    /// Problems found while loading plugins and workflows.
    pub fn problems(&self) -> &[Problem] {
        &self.problems
    }

    /// Sends mods' `print` and `api.log.*` lines and the engine's warnings to `callback`
    /// from now on: the same callback [`EngineBuilder::log_callback`] takes.
    pub fn set_log_callback<F>(&self, callback: F)
    where
        F: Fn(&crate::tools::LogRecord<'_>) + Send + Sync + 'static,
    {
        self.tools.log().set(Some(Arc::new(callback)));
    }

    /// Drops the log callback: lines go back to the default (stderr from `Info` up, unless
    /// [`EngineBuilder::log_to_stderr`] turned it off; `tracing` otherwise).
    pub fn clear_log_callback(&self) {
        self.tools.log().set(None);
    }

    /// Registers a sync host tool after the build (see [`EngineBuilder::host_tool`]): its
    /// namespace is reserved from now on, and it runs on the engine's blocking pool.
    pub fn register_host_tool<F>(&self, definition: ToolDefinition, f: F) -> Result<(), ToolError>
    where
        F: Fn(&CallContext, serde_json::Value) -> Result<serde_json::Value, ToolError>
            + Send
            + Sync
            + 'static,
    {
        self.tools
            .reserve_namespace(builder::namespace_of(&definition.id));
        self.tools
            .register_reserved(definition, blocking_handler(f), CallerPolicy::ANY)
    }

    /// Registers an async host tool after the build (see
    /// [`EngineBuilder::host_tool_async`]): its namespace is reserved from now on, and its
    /// future runs on the engine's runtime.
    pub fn register_host_tool_async<F, Fut>(
        &self,
        definition: ToolDefinition,
        f: F,
    ) -> Result<(), ToolError>
    where
        F: Fn(CallContext, serde_json::Value) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<serde_json::Value, ToolError>> + Send + 'static,
    {
        self.tools
            .reserve_namespace(builder::namespace_of(&definition.id));
        self.tools.register_reserved(
            definition,
            crate::tools::async_fn_handler(f),
            CallerPolicy::ANY,
        )
    }

    /// Registers a main-thread tool after the build (see
    /// [`EngineBuilder::main_thread_tool`]), run by pumps on this thread.
    pub fn register_main_thread_tool<F>(
        &self,
        definition: ToolDefinition,
        f: F,
    ) -> Result<(), ToolError>
    where
        F: FnMut(&CallContext, serde_json::Value) -> Result<serde_json::Value, ToolError> + 'static,
    {
        let bound = host_tools::bind(std::thread::current().id(), Box::new(f));
        self.register_bound(definition, bound)
    }

    /// [`Engine::register_main_thread_tool`] for a handler that may move between threads,
    /// run by pumps on the thread `owner` (see [`EngineBuilder::main_thread_tool_on`]).
    pub fn register_main_thread_tool_on<F>(
        &self,
        owner: std::thread::ThreadId,
        definition: ToolDefinition,
        f: F,
    ) -> Result<(), ToolError>
    where
        F: FnMut(&CallContext, serde_json::Value) -> Result<serde_json::Value, ToolError>
            + Send
            + 'static,
    {
        self.register_bound(definition, host_tools::bind(owner, Box::new(f)))
    }

    /// [`Engine::register_main_thread_tool`] for a handler that may move between threads,
    /// run by pumps on the engine's pump thread (see
    /// [`EngineBuilder::main_thread_tool_send`]).
    pub fn register_main_thread_tool_send<F>(
        &self,
        definition: ToolDefinition,
        f: F,
    ) -> Result<(), ToolError>
    where
        F: FnMut(&CallContext, serde_json::Value) -> Result<serde_json::Value, ToolError>
            + Send
            + 'static,
    {
        self.register_bound(definition, host_tools::on_pumper(Box::new(f)))
    }

    fn register_bound(
        &self,
        definition: ToolDefinition,
        f: host_tools::BoundMainFn,
    ) -> Result<(), ToolError> {
        self.tools
            .reserve_namespace(builder::namespace_of(&definition.id));
        let tool = host_tools::MainThreadTool::new(f, &self.pump.shared);
        self.tools.register_reserved(
            definition,
            Arc::new(host_tools::Parked(tool)),
            CallerPolicy::ANY,
        )
    }
}
