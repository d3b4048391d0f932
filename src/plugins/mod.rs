//! Plugins: `plugin.yaml` and VCP manifests, discovery, permissions, config options and the
//! tools they bring.
//!
//! A plugin is a directory under `<home>/plugins` with a `plugin.yaml` (seed 001 §6.2) or a
//! VCPToolBox `plugin-manifest.json`. Its `tools/*.tool.json` files declare tools, namespaced
//! `plugin:tool`, carried out by Lua/Rhai functions (`service`), host services (`service`
//! without `script`) or external processes (`script`). Loading never stops at a problem: each
//! is a [`crate::problem::Problem`] with file, line and column, and every other plugin still
//! loads and serves.

pub mod check;
pub mod code_service;
pub mod config;
pub mod host_services;
pub mod isolation;
pub mod loader;
pub mod locate;
pub mod manifest;
pub mod nodes;
pub mod permissions;
pub mod process_tools;
pub mod scaffold;
pub mod scripts;
pub mod testing;
pub mod text_service;
pub mod tool_file;
pub mod unavailable;
pub mod user_scripts;
pub mod uses;
pub mod vcp;

pub use host_services::{BindContext, HostServices, ServiceFactory};
pub use loader::{load_all, LoadReport, Loader, Plugin, PluginSet};
pub use manifest::PluginManifest;
pub use permissions::Permissions;

/// The files in `dir` whose names end with `suffix`, sorted by name so that loading is
/// deterministic.
fn files_ending_with(
    dir: &std::path::Path,
    suffix: &str,
) -> std::io::Result<Vec<std::path::PathBuf>> {
    let mut files: Vec<std::path::PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            p.is_file()
                && p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.ends_with(suffix))
        })
        .collect();
    files.sort();
    Ok(files)
}
