//! Script hosts: sandboxed Lua (mlua, Lua 5.4) and Rhai, their limits, value conversion and
//! the `api` surface scripts see.
//!
//! - [`PluginScripts`]: one plugin's scripts (one Lua state, one Rhai engine), built from a
//!   [`ScriptEnv`]; [`PluginScripts::call`] runs a function, [`PluginScripts::handler`] makes
//!   a [`ScriptToolHandler`] for the `ToolManager`, [`PluginScripts::registered_tools`] lists
//!   tools registered with `api.tools.register`.
//! - [`run_snippet`]: model-written code in a fresh sandbox.
//! - [`Limits`] / [`PartialLimits`], [`Permissions`], [`ScriptError`].
//! - [`api::API`]: the one registry of the `api` surface; [`luals_definitions`] renders it.
//!
//! Threats handled are listed in the Lua host's docs (`lua` module) and in `rhai_host`.

pub mod api;
mod big_stack;
mod budget;
mod error;
pub mod fs;
mod hooks_api;
mod host;
mod limits;
mod lock;
mod lua;
mod nested_error;
mod permissions;
mod plugin;
mod rhai_docs;
mod rhai_host;
mod snippet;
mod store_api;

use std::path::Path;

pub use api::luals_definitions;
pub use error::ScriptError;
pub(crate) use host::{in_script_thread, sampled_text};
pub use host::{CallInfo, ScriptEnv, UNSUPPORTED};
pub use limits::{Limits, PartialLimits};
pub use permissions::{FsAccess, Permissions, WorldAccess};
pub use plugin::{ExecMode, PluginScripts, ScriptSource, ScriptToolHandler};
pub use rhai_docs::rhai_api_markdown;
pub use snippet::{run_snippet, SnippetOutput};

/// A script language.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Lang {
    /// Lua 5.4 (`.lua`).
    Lua,
    /// Rhai (`.rhai`).
    Rhai,
}

impl Lang {
    /// The language of a script file, from its extension.
    pub fn from_path(path: &Path) -> Option<Lang> {
        match path.extension()?.to_str()? {
            "lua" => Some(Lang::Lua),
            "rhai" => Some(Lang::Rhai),
            _ => None,
        }
    }

    /// From a name as a model writes it (`lua`, `Lua`, `rhai`).
    pub fn from_name(name: &str) -> Option<Lang> {
        match name.to_ascii_lowercase().as_str() {
            "lua" => Some(Lang::Lua),
            "rhai" => Some(Lang::Rhai),
            _ => None,
        }
    }

    /// File extension without the dot.
    pub fn extension(self) -> &'static str {
        match self {
            Lang::Lua => "lua",
            Lang::Rhai => "rhai",
        }
    }
}
