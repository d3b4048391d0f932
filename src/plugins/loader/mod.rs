//! Discovery and loading: every directory under `plugins/` with a `plugin.yaml` (or a VCP
//! `plugin-manifest.json`) becomes a [`Plugin`] whose tools are registered in the
//! [`ToolManager`]. Every problem is collected; one broken plugin (or one broken tool) never
//! stops the others.
//!
//! One file per step: `manifest.rs` reads the manifest and claims the name, `checks.rs` resolves
//! and checks permissions, `declarations.rs` collects the tools, nodes, workflows and scripts a
//! plugin declares, `binding.rs` builds each tool's handler, `registration.rs` puts tools, nodes
//! and workflows into the engine. This file holds the types and runs the steps in order.

mod binding;
mod checks;
mod declarations;
mod manifest;
mod registration;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Map, Value};

use self::declarations::Decl;
use self::manifest::ManifestSource;
use super::config;
use super::host_services::{BindContext, HostServices};
use super::manifest::PluginManifest;
use super::permissions::{self, Permissions};
use super::scripts::{self, ScriptContext, ScriptSet};
use crate::config::Settings;
use crate::problem::Problem;
use crate::script::Limits;
use crate::tools::{Implementation, ToolManager};
use crate::workflow::{NodeRegistry, Workflows};

/// A loaded plugin. Holding it keeps its script states alive.
pub struct Plugin {
    /// The manifest (converted from VCP when that is what the plugin has).
    pub manifest: PluginManifest,
    /// Its directory (absolute).
    pub dir: PathBuf,
    /// The manifest file.
    pub manifest_file: PathBuf,
    /// Resolved config values, option → value.
    pub config: Map<String, Value>,
    /// Resolved permissions.
    pub permissions: Permissions,
    /// Ids of the tools it registered.
    pub tools: Vec<String>,
    /// Its node directory (`nodes: {entry}`, or `./nodes` when present).
    pub nodes_dir: Option<PathBuf>,
    /// Node types it registered (`Plugin:Type`).
    pub nodes: Vec<String>,
    /// Its workflow directory (`workflows: {entry}`, or `./workflows` when present).
    pub workflows_dir: Option<PathBuf>,
    /// Ids of the workflows it added (each `workflow:<id>` once the engine registers them).
    pub workflows: Vec<String>,
    scripts: ScriptSet,
}

impl std::fmt::Debug for Plugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plugin")
            .field("name", &self.manifest.name)
            .field("dir", &self.dir)
            .field("tools", &self.tools)
            .finish_non_exhaustive()
    }
}

impl Plugin {
    /// The plugin's name.
    pub fn name(&self) -> &str {
        &self.manifest.name
    }

    /// Its loaded scripts (one Lua state and one Rhai engine), if it has any.
    pub fn scripts(&self) -> Option<&crate::script::PluginScripts> {
        self.scripts.scripts()
    }
}

/// The plugins an engine loaded.
#[derive(Debug, Default)]
pub struct PluginSet {
    plugins: Vec<Arc<Plugin>>,
}

impl PluginSet {
    /// All plugins, in load order (directory name order).
    pub fn list(&self) -> &[Arc<Plugin>] {
        &self.plugins
    }

    /// A plugin by name.
    pub fn get(&self, name: &str) -> Option<&Arc<Plugin>> {
        self.plugins.iter().find(|p| p.name() == name)
    }

    /// Number of plugins.
    pub fn len(&self) -> usize {
        self.plugins.len()
    }

    /// True when none loaded.
    pub fn is_empty(&self) -> bool {
        self.plugins.is_empty()
    }
}

/// What loading produced.
#[derive(Debug, Default)]
pub struct LoadReport {
    /// Plugins that loaded (possibly with some tools refused).
    pub plugins: PluginSet,
    /// Every problem, in load order.
    pub problems: Vec<Problem>,
}

/// Loads plugins into one [`ToolManager`], remembering which file declared each id and each
/// plugin name so that a clash names both files.
pub struct Loader<'a> {
    home: PathBuf,
    settings: &'a Settings,
    tools: Arc<ToolManager>,
    host: &'a HostServices,
    ids: HashMap<String, PathBuf>,
    names: HashMap<String, PathBuf>,
    node_files: HashMap<String, PathBuf>,
    host_limits: Limits,
    process_caps: crate::sandbox::confine::ProcessLimits,
    workflows: Arc<Workflows>,
    /// The hook registry plugin scripts register hooks and overrides in.
    hooks: Option<Arc<crate::hooks::Hooks>>,
    /// Where declared fs roots go instead (`plugin test`; see `isolation.rs`), and whether
    /// missing write roots are created (not by `plugin check`).
    roots: super::isolation::RootPolicy,
}

/// What a plugin still needs once every plugin's nodes are registered: its workflow files,
/// then its node/workflow tools (which may name those nodes and workflows).
#[derive(Default)]
struct Pending {
    workflow_files: Vec<PathBuf>,
    deferred: Vec<Decl>,
    manifest_file: PathBuf,
}

fn absolute(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| match std::env::current_dir() {
        Ok(cwd) => permissions::normalize(&cwd.join(p)),
        Err(_) => p.to_path_buf(),
    })
}

impl<'a> Loader<'a> {
    /// A loader for an engine with home `home` (relative fs roots are taken from it).
    pub fn new(
        home: &Path,
        settings: &'a Settings,
        tools: Arc<ToolManager>,
        host: &'a HostServices,
    ) -> Self {
        Loader {
            home: absolute(home),
            settings,
            tools,
            host,
            ids: HashMap::new(),
            names: HashMap::new(),
            node_files: HashMap::new(),
            host_limits: Limits::engine_default(),
            process_caps: crate::sandbox::confine::ProcessLimits::DEFAULT,
            workflows: Arc::new(Workflows::new(Arc::new(NodeRegistry::with_builtins()))),
            hooks: None,
            roots: super::isolation::RootPolicy::default(),
        }
    }

    /// The hook registry plugin scripts register hooks and overrides in (`api.hooks`,
    /// `api.services.override`); without one they fail to.
    pub fn with_hooks(mut self, hooks: Arc<crate::hooks::Hooks>) -> Self {
        self.hooks = Some(hooks);
        self
    }

    /// How declared fs roots are treated (created, left alone, or mapped to a temp dir).
    pub fn roots(mut self, policy: super::isolation::RootPolicy) -> Self {
        self.roots = policy;
        self
    }

    /// Loads plugin nodes and workflows into `workflows` (and its node registry) instead of
    /// a private set with the built-in nodes only.
    pub fn with_workflows(mut self, workflows: Arc<Workflows>) -> Self {
        self.workflows = workflows;
        self
    }

    /// The workflows (and node registry) plugins load into.
    pub fn workflows(&self) -> &Arc<Workflows> {
        &self.workflows
    }

    /// Caps every plugin's script limits (default: the engine defaults).
    pub fn host_limits(mut self, limits: Limits) -> Self {
        self.host_limits = limits;
        self
    }

    /// Caps every process tool's limits (default: [`crate::sandbox::confine::ProcessLimits::DEFAULT`];
    /// `process.<limit>` settings replace single caps).
    pub fn process_caps(mut self, caps: crate::sandbox::confine::ProcessLimits) -> Self {
        self.process_caps = caps;
        self
    }

    /// Loads every plugin directory under `dir` (sorted by name; hidden directories skipped).
    /// A missing `dir` is no plugins and no problem.
    pub fn load_dir(&mut self, dir: &Path) -> LoadReport {
        let mut report = LoadReport::default();
        let entries = match std::fs::read_dir(dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return report,
            Err(e) => {
                report.problems.push(Problem::new(
                    dir,
                    format!("cannot read the plugins directory: {e}"),
                ));
                return report;
            }
        };
        let mut dirs: Vec<PathBuf> = entries
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| p.is_dir())
            .filter(|p| {
                !p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with('.'))
            })
            .collect();
        dirs.sort();
        let mut loaded = Vec::new();
        for d in dirs {
            let (plugin, problems) = self.load_nodes_and_services(&d);
            // A plugin (or its scripts) that failed leaves its node types missing: the
            // workflows using them are unavailable by its problem, not problems of their own.
            let failed_ns = match &plugin {
                None => Some(super::unavailable::manifest_name(&d)),
                Some((p, _)) if p.scripts.load_failed() => Some(p.name().to_string()),
                Some(_) => None,
            };
            if let (Some(ns), Some(first)) = (failed_ns, problems.first()) {
                self.workflows.namespace_failed(&ns, first);
            }
            report.problems.extend(problems);
            loaded.extend(plugin);
        }
        // Every plugin's nodes are registered now, so a workflow may use another plugin's.
        for (plugin, pending) in &mut loaded {
            report.problems.extend(self.add_workflows(plugin, pending));
        }
        for (mut plugin, pending) in loaded {
            report
                .problems
                .extend(self.bind_deferred(&mut plugin, pending));
            report.plugins.plugins.push(Arc::new(plugin));
        }
        report
    }

    /// Loads one plugin directory. Returns the plugin (unless it is broken as a whole) and
    /// every problem found.
    pub fn load_plugin(&mut self, dir: &Path) -> (Option<Plugin>, Vec<Problem>) {
        let (loaded, mut problems) = self.load_nodes_and_services(dir);
        let Some((mut plugin, mut pending)) = loaded else {
            return (None, problems);
        };
        problems.extend(self.add_workflows(&mut plugin, &mut pending));
        problems.extend(self.bind_deferred(&mut plugin, pending));
        (Some(plugin), problems)
    }

    /// Phase one: manifest, config, permissions, scripts, service/process tools and nodes.
    fn load_nodes_and_services(&mut self, dir: &Path) -> (Option<(Plugin, Pending)>, Vec<Problem>) {
        let mut problems = Vec::new();
        let dir = absolute(dir);

        // 1. The manifest (manifest.rs), 2. its name.
        let Some(src) = ManifestSource::read(&dir, &mut problems) else {
            return (None, problems);
        };
        let name = match self.claim_name(&src) {
            Ok(n) => n,
            Err(p) => {
                problems.push(p);
                return (None, problems);
            }
        };

        // 3. Config values.
        let settings_file = self.home.join("tavern.toml");
        let cfg = match config::resolve(
            &name,
            &src.manifest.config_options,
            self.settings,
            &src.file,
            &src.text,
            &settings_file,
        ) {
            Ok(c) => c,
            Err(ps) => {
                // A bad setting (often a `--set`, outside the plugins directory) drops the
                // plugin: its tools answer `tool_unavailable` naming the setting, not
                // "unknown tool".
                if let Some(p) = ps.first() {
                    self.tools.mark_namespace_unavailable(&name, p.to_string());
                }
                problems.extend(ps);
                return (None, problems);
            }
        };

        // 4. Permissions (checks.rs).
        let Some(perms) = self.resolve_permissions(&src, &cfg, &mut problems) else {
            return (None, problems);
        };

        // 5. Declarations (declarations.rs): tools, node files, workflow files.
        let defs = declarations::tool_decls(&dir, &src, &mut problems);
        let limits =
            match scripts::effective_limits(src.manifest.limits.as_ref(), &self.host_limits) {
                Ok(l) => l,
                Err(msg) => {
                    problems.push(src.key_at("limits", msg));
                    return (None, problems);
                }
            };
        let instances = match crate::plugins::manifest::instances(src.manifest.instances.as_ref()) {
            Ok(n) => n,
            Err(msg) => {
                problems.push(src.key_at("instances", msg));
                return (None, problems);
            }
        };
        let nodes_dir = declarations::entry_dir(
            &dir,
            src.manifest.nodes.as_ref(),
            "./nodes",
            "nodes",
            &src,
            &mut problems,
        );
        let node_files = declarations::node_files(&name, nodes_dir.as_deref(), &mut problems);
        let workflows_dir = declarations::entry_dir(
            &dir,
            src.manifest.workflows.as_ref(),
            "./workflows",
            "workflows",
            &src,
            &mut problems,
        );

        // 6. Scripts: every script a tool or node names, plus main.lua / main.rhai, load into
        //    one sandbox; a script registering tools at load adds them (registration.rs).
        let files = declarations::script_files(&dir, &node_files, &defs);
        let script_ctx = ScriptContext {
            plugin: name.clone(),
            dir: dir.clone(),
            config: cfg.clone(),
            permissions: perms.clone(),
            limits,
            instances,
            manager: self.tools.clone(),
            hooks: self.hooks.clone(),
            shown_dir: crate::problem::inside_home(&dir, &self.home),
        };
        let scripts = match ScriptSet::load(&script_ctx, &files) {
            Ok(s) => s,
            // A plugin that hooks or overrides is a guard: without its scripts, calls are
            // refused (`scripts.fail_open` chooses otherwise).
            Err(p) if !perms.hooks.is_empty() || !perms.services_override.is_empty() => {
                let owner = format!("plugin:{name}");
                problems.push(scripts::guard_failed(
                    self.hooks.as_ref(),
                    self.settings,
                    &self.home,
                    &owner,
                    p,
                ));
                ScriptSet::failed()
            }
            Err(p) => {
                problems.push(p);
                ScriptSet::failed()
            }
        };
        let main_file = files
            .first()
            .map(|f| dir.join(f))
            .unwrap_or_else(|| src.file.clone());
        let mut registered =
            self.register_script_tools(&name, &scripts, &main_file, &src.file, &mut problems);

        // 7. Nodes, into the workflow engine's registry.
        let mut node_types = Vec::new();
        for n in node_files {
            match self.register_node(&name, &dir, n, &scripts) {
                Ok(Some(t)) => node_types.push(t),
                Ok(None) => {}
                Err(p) => problems.push(p),
            }
        }

        // 8. Bind (binding.rs) and register each declared tool; node and workflow tools wait
        //    until every plugin's nodes and workflows are in.
        let mut pending = Pending {
            manifest_file: src.file.clone(),
            ..Pending::default()
        };
        if let Some(wd) = &workflows_dir {
            match declarations::workflow_files(wd) {
                Ok(list) => pending.workflow_files = list,
                Err(e) => problems.push(Problem::new(wd, format!("cannot read: {e}"))),
            }
        }
        let bind = BindContext {
            plugin: name.clone(),
            dir: dir.clone(),
            config: cfg.clone(),
            limits: src.manifest.limits.clone(),
            process_limits: src.manifest.process_limits.clone(),
        };
        for decl in defs {
            if matches!(
                decl.def.implementation,
                Implementation::Node { .. } | Implementation::Workflow { .. }
            ) {
                pending.deferred.push(decl);
                continue;
            }
            let Decl {
                mut def,
                file,
                text,
                extra,
                ..
            } = decl;
            if let Implementation::Service {
                script: None,
                function: Some(f),
            } = &def.implementation
            {
                let f = f.clone();
                self.host.adjust(&f, &mut def);
            }
            let handler = match self.bind(
                &def, &file, &text, &dir, &cfg, &perms, &bind, &extra, &scripts,
            ) {
                Ok(h) => h,
                // The script's own problem says it all (the tool is unavailable by it).
                Err(_) if scripts.load_failed() && names_existing_script(&def, &dir) => continue,
                Err(p) => {
                    problems.push(p);
                    continue;
                }
            };
            if let Some(id) =
                self.register(&name, def, handler, &file, &text, &src.file, &mut problems)
            {
                registered.push(id);
            }
        }

        let plugin = Plugin {
            manifest: src.manifest,
            dir,
            manifest_file: src.file,
            config: cfg,
            permissions: perms,
            tools: registered,
            nodes_dir,
            nodes: node_types,
            workflows_dir,
            workflows: Vec::new(),
            scripts,
        };
        (Some((plugin, pending)), problems)
    }
}

/// `rel` joined to `dir`, or `None` when it is absolute or climbs out with `..`.
/// `script 'x' does not exist in the plugin directory`, with the closest script file there.
pub(super) fn missing_script(dir: &Path, script: &str) -> String {
    fn walk(dir: &Path, base: &Path, depth: usize, out: &mut Vec<String>) {
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() && depth < 3 {
                walk(&p, base, depth + 1, out);
            } else if p.extension().is_some_and(|x| x == "lua" || x == "rhai") {
                if let Ok(rel) = p.strip_prefix(base) {
                    out.push(rel.to_string_lossy().replace('\\', "/"));
                }
            }
        }
    }
    let mut files = Vec::new();
    walk(dir, dir, 0, &mut files);
    files.sort();
    let wanted = script.trim_start_matches("./");
    format!(
        "script '{script}' does not exist in the plugin directory{}",
        crate::suggest::did_you_mean(wanted, &files)
    )
}

/// Whether `def` is a script function of a script file that exists in `dir`.
fn names_existing_script(def: &crate::tools::ToolDefinition, dir: &Path) -> bool {
    matches!(&def.implementation, Implementation::Service { script: Some(s), function: Some(_) }
        if inside(dir, s.as_str()).is_some_and(|p| p.is_file()))
}

fn inside(dir: &Path, rel: &str) -> Option<PathBuf> {
    let p = Path::new(rel);
    if p.is_absolute()
        || p.components()
            .any(|c| matches!(c, std::path::Component::ParentDir))
    {
        return None;
    }
    Some(permissions::normalize(&dir.join(p)))
}

/// Loads every plugin under `plugins_dir` into `tools`, their nodes and workflows into
/// `workflows` (the engine's entry point). The engine registers `workflow:<id>` tools for
/// the plugins' workflows together with the home's.
pub fn load_all(
    plugins_dir: &Path,
    home: &Path,
    settings: &Settings,
    tools: &Arc<ToolManager>,
    workflows: &Arc<Workflows>,
    host: &HostServices,
) -> LoadReport {
    let loader = Loader::new(home, settings, tools.clone(), host).with_workflows(workflows.clone());
    match workflows.hooks() {
        Some(h) => loader.with_hooks(h.clone()),
        None => loader,
    }
    .load_dir(plugins_dir)
}
