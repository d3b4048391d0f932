//! `Engine`: the embedding entry point, and the one run path every way in goes through.
//! Built by [`Engine::builder`]; no global state, so several engines can live in one
//! process.
//!
//! - `builder.rs`: [`EngineBuilder`], what a host configures before plugins load;
//! - `run.rs`: the [`Request`] (text or parsed calls, with [`CallOptions`]) and [`run`], the
//!   one function that turns a request into a [`CallReport`]: VCP dispatch, the
//!   warnings check, chains with their steps, the inventory, observers; `call` /
//!   `call_blocking` put it on the engine's runtime;
//! - `pump.rs`: `submit` / `pump` / `take` for a game loop;
//! - `report.rs`: the [`CallReport`] and the JSON `tavern call` prints.

mod builder;
mod pump;
mod report;
mod run;

pub use builder::{EngineBuilder, EngineError};
pub(crate) use pump::Pump;
pub use pump::Ticket;
pub use report::{outcome_json, CallReport};
pub use run::{run, CallOptions, CancelToken, EmbedError, Input, Request};

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::config::Settings;
use crate::problem::Problem;
use crate::tools::ToolManager;
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
    /// The world state the home's agents start from: `<home>/world.json`, read when the
    /// engine was built (a file that is not a JSON object is in [`Engine::problems`]).
    pub fn world(&self) -> Option<&serde_json::Value> {
        self.world.as_ref()
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
}
