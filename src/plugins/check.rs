//! `tavern plugin check` and `tavern plugin test`: load one plugin (or a whole plugins
//! directory) into a fresh registry, collect every problem, and run the plugins' own tests.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::host_services::HostServices;
use super::loader::{Loader, Plugin};
use super::manifest::MANIFEST_FILE;
use super::testing::{self, CaseOutcome};
use super::vcp::VCP_FILE;
use crate::config::Settings;
use crate::problem::Problem;
use crate::tools::ToolManager;

/// What checking found.
pub struct CheckReport {
    /// Plugins that loaded.
    pub plugins: Vec<Arc<Plugin>>,
    /// Every problem (manifests, schemas, scripts, test files).
    pub problems: Vec<Problem>,
    /// The registry the plugins were loaded into (with the `system:*` tools).
    pub tools: Arc<ToolManager>,
    /// Per plugin: declared permissions beside what its scripts use.
    pub permissions: Vec<String>,
}

/// True when `dir` is itself a plugin (has a manifest).
pub fn is_plugin_dir(dir: &Path) -> bool {
    dir.join(MANIFEST_FILE).is_file() || dir.join(VCP_FILE).is_file()
}

/// Loads `path` — one plugin directory, or a directory of plugins — as the engine would, with
/// the settings of `home`.
pub fn check(path: &Path, home: &Path, settings: &Settings) -> CheckReport {
    let tools = ToolManager::new();
    // As in the engine: scripts may register hooks and overrides while they load.
    tools.set_interceptor(crate::hooks::Hooks::new());
    let mut problems = Vec::new();
    if let Err(e) = crate::tools::builtin::register(&tools) {
        problems.push(Problem::new(
            path,
            format!("cannot register built-in tools: {e}"),
        ));
    }
    let host = HostServices::with_defaults();
    let mut loader = Loader::new(home, settings, tools.clone(), &host);
    let mut plugins = Vec::new();
    if is_plugin_dir(path) {
        let (p, ps) = loader.load_plugin(path);
        problems.extend(ps);
        plugins.extend(p.map(Arc::new));
    } else if path.is_dir() {
        let report = loader.load_dir(path);
        problems.extend(report.problems);
        plugins.extend(report.plugins.list().iter().cloned());
    } else {
        problems.push(
            Problem::new(path, "not a directory")
                .hint("give a plugin directory or a plugins directory"),
        );
    }
    // Plugin workflows with an interface are tools too (`workflow:<id>`), as in the engine.
    problems.extend(loader.workflows().register_tools(&tools));
    for p in &plugins {
        for f in testing::test_files(&p.dir) {
            if let Err(prob) = testing::read(&f) {
                problems.push(prob);
            }
        }
    }
    let mut permissions = Vec::new();
    for p in &plugins {
        let (text, ps) = super::uses::report(p, &tools);
        permissions.push(text);
        problems.extend(ps);
    }
    CheckReport {
        plugins,
        problems,
        tools,
        permissions,
    }
}

/// Runs the tests of every plugin in `report`.
pub async fn run_tests(report: &CheckReport) -> Vec<CaseOutcome> {
    let mut out = Vec::new();
    for p in &report.plugins {
        for f in testing::test_files(&p.dir) {
            if let Ok(file) = testing::read(&f) {
                out.extend(testing::run_file(&report.tools, &f, &file).await);
            }
        }
    }
    out
}

/// The directory `plugin check`/`test` looks at by default.
pub fn default_dir(home: &Path) -> PathBuf {
    home.join("plugins")
}
