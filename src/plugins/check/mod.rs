//! `tavern plugin check` and `tavern plugin test`: load one plugin (or a whole plugins
//! directory) into a fresh registry, collect every problem, and run the plugins' own tests.

pub mod output;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::host_services::HostServices;
use super::isolation::RootPolicy;
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
    /// The workflows and node types the plugins loaded into.
    pub workflows: Arc<crate::workflow::Workflows>,
    /// Per plugin: declared permissions beside what its scripts use.
    pub permissions: Vec<super::uses::PermissionReport>,
    /// The power-user scripts loaded (by [`check_home`]), kept so their hooks stay
    /// registered while tests run.
    pub scripts: Vec<super::user_scripts::UserScript>,
    /// The home the report was made for: paths inside it are printed relative to it.
    pub home: std::path::PathBuf,
}

/// True when `dir` is itself a plugin (has a manifest).
pub fn is_plugin_dir(dir: &Path) -> bool {
    dir.join(MANIFEST_FILE).is_file() || dir.join(VCP_FILE).is_file()
}

/// Loads `path` — one plugin directory, or a directory of plugins — as the engine would, with
/// the settings of `home`, changing nothing on disk (write roots are not created).
pub fn check(path: &Path, home: &Path, settings: &Settings) -> CheckReport {
    check_with(path, home, settings, RootPolicy::LeaveAlone)
}

/// Everything a home holds, as the engine would load it, changing nothing on disk:
/// `plugins/`, `workflows/`, `scripts/*.tam`, power-user `scripts/*.lua|rhai`,
/// `agents/*.json` and the settings (the caller
/// loads `tavern.toml`; its problem, if any, is the caller's to report).
pub fn check_home(home: &Path, settings: &Settings) -> CheckReport {
    check_home_with(home, settings, RootPolicy::LeaveAlone)
}

/// [`check_home`] with a choice of what happens to declared fs roots (`plugin test
/// --with-home` maps them to temporary directories).
pub fn check_home_with(home: &Path, settings: &Settings, roots: RootPolicy) -> CheckReport {
    let plugins = default_dir(home);
    // A home without plugins/ is fine: only the rest is checked.
    let path = if plugins.exists() {
        plugins
    } else {
        PathBuf::new()
    };
    let mut report = load(&path, home, settings, roots, true);
    // Built-in settings by type and name, as the engine's build reports them.
    report.problems.extend(settings.check_known());
    report.problems.extend(check_scripts(&home.join("scripts")));
    // Power-user scripts (`scripts/*.lua`, `*.rhai`) load as the engine loads them.
    let (scripts, ps) = super::user_scripts::load_with(
        home,
        settings,
        &report.tools,
        report.workflows.hooks(),
        crate::script::Limits::engine_default(),
        false,
    );
    report.problems.extend(ps);
    report.scripts = scripts;
    report.problems.extend(check_agents(&home.join("agents")));
    report.problems = relative(report.problems, home);
    report
}

/// Problems name their files relative to the home, as the engine's do.
fn relative(problems: Vec<Problem>, home: &Path) -> Vec<Problem> {
    problems.into_iter().map(|p| p.relative_to(home)).collect()
}

/// TAM scripts (`*.tam`): every parse diagnostic, errors and recoveries alike (a script a
/// modder keeps should read cleanly), at its line.
fn check_scripts(dir: &Path) -> Vec<Problem> {
    let mut problems = Vec::new();
    for f in super::files_ending_with(dir, ".tam").unwrap_or_default() {
        let text = match std::fs::read_to_string(&f) {
            Ok(t) => t,
            Err(e) => {
                problems.push(Problem::new(&f, format!("cannot read: {e}")));
                continue;
            }
        };
        let parsed = crate::protocol::parse(&text, crate::protocol::Format::Auto);
        for d in &parsed.diagnostics {
            let message = match d.severity {
                crate::protocol::Severity::Error => d.message.clone(),
                _ => format!("warning: {}", d.message),
            };
            let mut p = Problem::new(&f, message).at(d.line, Some(d.column));
            if let Some(h) = &d.hint {
                p = p.hint(h.clone());
            }
            problems.push(p);
        }
    }
    problems
}

/// Agent profiles (`agents/*.json`): valid JSON objects with only known keys
/// ([`crate::strict::AGENT_PROFILE_KEYS`], the same list the agent loader enforces).
fn check_agents(dir: &Path) -> Vec<Problem> {
    let mut problems = Vec::new();
    for f in super::files_ending_with(dir, ".json").unwrap_or_default() {
        match std::fs::read_to_string(&f) {
            Ok(text) => {
                if let Err(e) =
                    serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(&text)
                {
                    problems.push(
                        Problem::new(&f, format!("invalid agent profile: {e}"))
                            .at(e.line() as u32, Some(e.column() as u32)),
                    );
                } else {
                    problems.extend(crate::strict::check_json(
                        &text,
                        &f,
                        "agent profile",
                        &crate::strict::Shape::keys(crate::strict::AGENT_PROFILE_KEYS),
                    ));
                }
            }
            Err(e) => problems.push(Problem::new(&f, format!("cannot read: {e}"))),
        }
    }
    problems
}

/// [`check`] with a choice of what happens to declared fs roots (`plugin test` maps them to
/// temporary directories).
pub fn check_with(path: &Path, home: &Path, settings: &Settings, roots: RootPolicy) -> CheckReport {
    load(path, home, settings, roots, false)
}

/// Loads plugins from `path` (none when empty) and, with `home_workflows`, the home's
/// `workflows/` too, before workflow tools are registered (as the engine does).
fn load(
    path: &Path,
    home: &Path,
    settings: &Settings,
    roots: RootPolicy,
    home_workflows: bool,
) -> CheckReport {
    let tools = ToolManager::new();
    // As in the engine: scripts may register hooks and overrides while they load, and the
    // workflows' runs fire them.
    let hooks = crate::hooks::Hooks::new();
    tools.set_interceptor(hooks.clone());
    let workflows =
        crate::workflow::Workflows::new(Arc::new(crate::workflow::NodeRegistry::with_builtins()))
            .with_hooks(hooks.clone());
    let mut problems = Vec::new();
    if let Err(e) = crate::tools::builtin::register(&tools) {
        problems.push(Problem::new(
            path,
            format!("cannot register built-in tools: {e}"),
        ));
    }
    let host = HostServices::with_defaults();
    let mut loader = Loader::new(home, settings, tools.clone(), &host)
        .roots(roots)
        .with_workflows(Arc::new(workflows))
        .with_hooks(hooks);
    let mut plugins = Vec::new();
    if is_plugin_dir(path) {
        let (p, ps) = loader.load_plugin(path);
        problems.extend(ps);
        plugins.extend(p.map(Arc::new));
    } else if path.as_os_str().is_empty() {
        // No plugins to load (see `check_home`).
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
    // As in the engine: failed tools are `tool_unavailable`, stray settings are reported.
    let plugins_dir = if is_plugin_dir(path) {
        path.parent().unwrap_or(path)
    } else {
        path
    };
    super::unavailable::mark(&tools, home, plugins_dir, &plugins, &problems);
    problems.extend(super::config::undeclared_all(
        &plugins,
        settings,
        &home.join("tavern.toml"),
    ));
    if home_workflows {
        problems.extend(loader.workflows().load_dir(&home.join("workflows")));
    }
    // Workflows with an interface are tools too (`workflow:<id>`), as in the engine.
    problems.extend(loader.workflows().register_tools(&tools));
    let workflows = loader.workflows().clone();
    for p in &plugins {
        for f in testing::test_files(&p.dir) {
            if let Err(prob) = testing::read(&f) {
                problems.push(prob);
            }
        }
    }
    let mut permissions = Vec::new();
    for p in &plugins {
        let (r, ps) = super::uses::report(p, &tools);
        permissions.push(r.relative_to(home));
        problems.extend(ps);
    }
    CheckReport {
        plugins,
        problems: relative(problems, home),
        tools,
        workflows,
        permissions,
        scripts: Vec::new(),
        home: home.to_path_buf(),
    }
}

/// Runs the tests of every plugin in `report`.
pub async fn run_tests(report: &CheckReport) -> Vec<CaseOutcome> {
    run_tests_of(report, |_| true).await
}

/// Runs the tests of the plugins in `report` that `only` picks.
pub async fn run_tests_of(
    report: &CheckReport,
    only: impl Fn(&Plugin) -> bool,
) -> Vec<CaseOutcome> {
    let mut out = Vec::new();
    for p in report.plugins.iter().filter(|p| only(p)) {
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
