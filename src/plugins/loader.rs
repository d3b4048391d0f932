//! Discovery and loading: every directory under `plugins/` with a `plugin.yaml` (or a VCP
//! `plugin-manifest.json`) becomes a [`Plugin`] whose tools are registered in the
//! [`ToolManager`]. Every problem is collected; one broken plugin (or one broken tool) never
//! stops the others.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Map, Value};

use super::host_services::{BindContext, HostServices};
use super::manifest::{self, Entry, PluginManifest, ToolsSection, MANIFEST_FILE};
use super::nodes::{self, NodeFile, ScriptNodeExecutor};
use super::permissions::{self, ResolvedPermissions};
use super::process::{ProcessSpec, ProcessToolHandler};
use super::scripts::{self, ScriptContext, ScriptSet};
use super::tool_file::{self, problem_at_key};
use super::vcp::{self, VCP_FILE};
use super::{config, locate};
use crate::config::Settings;
use crate::problem::Problem;
use crate::script::Limits;
use crate::tools::{Implementation, ToolDefinition, ToolError, ToolHandler, ToolManager};
use crate::workflow::{
    invalid_problem, node_tool_definition, workflow_tool_definition, NodeRegistry, Workflow,
    WorkflowError, Workflows,
};

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
    pub permissions: ResolvedPermissions,
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
    workflows: Arc<Workflows>,
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
            workflows: Arc::new(Workflows::new(Arc::new(NodeRegistry::with_builtins()))),
            roots: super::isolation::RootPolicy::default(),
        }
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
        let yaml_file = dir.join(MANIFEST_FILE);
        let vcp_file = dir.join(VCP_FILE);

        // 1. The manifest.
        let (manifest, manifest_file, manifest_text, vcp_manifest) = if yaml_file.is_file() {
            let text = match std::fs::read_to_string(&yaml_file) {
                Ok(t) => t,
                Err(e) => {
                    return (
                        None,
                        vec![Problem::new(&yaml_file, format!("cannot read: {e}"))],
                    )
                }
            };
            let m = match manifest::parse(&text, &yaml_file) {
                Ok(m) => m,
                Err(p) => return (None, vec![p]),
            };
            let v = if vcp_file.is_file() {
                match std::fs::read_to_string(&vcp_file)
                    .map_err(|e| Problem::new(&vcp_file, format!("cannot read: {e}")))
                    .and_then(|t| vcp::parse(&t, &vcp_file))
                {
                    Ok(v) if v.name != m.name => {
                        problems.push(Problem::new(
                            &vcp_file,
                            format!(
                                "VCP manifest names plugin '{}' but {} names it '{}'",
                                v.name,
                                yaml_file.display(),
                                m.name
                            ),
                        ));
                        None
                    }
                    Ok(v) => Some(v),
                    Err(p) => {
                        problems.push(p);
                        None
                    }
                }
            } else {
                None
            };
            (m, yaml_file.clone(), text, v)
        } else if vcp_file.is_file() {
            let text = match std::fs::read_to_string(&vcp_file) {
                Ok(t) => t,
                Err(e) => {
                    return (
                        None,
                        vec![Problem::new(&vcp_file, format!("cannot read: {e}"))],
                    )
                }
            };
            match vcp::parse(&text, &vcp_file) {
                Ok(v) => (v.to_manifest(), vcp_file.clone(), text, Some(v)),
                Err(p) => return (None, vec![p]),
            }
        } else {
            return (
                None,
                vec![Problem::new(
                    &dir,
                    format!("not a plugin: no {MANIFEST_FILE} (or {VCP_FILE})"),
                )
                .hint("add a plugin.yaml, or move the directory out of plugins/")],
            );
        };
        let is_yaml = manifest_file == yaml_file;
        let key_at = |key: &str, msg: String| -> Problem {
            let p = Problem::new(&manifest_file, msg);
            let loc = if is_yaml {
                locate::yaml_key(&manifest_text, key)
            } else {
                locate::json_key(&manifest_text, key)
            };
            match loc {
                Some((l, c)) => p.at(l, Some(c)),
                None => p,
            }
        };

        // 2. The name.
        let name = manifest.name.clone();
        if !manifest::valid_name(&name) {
            problems.push(
                key_at("name", format!("plugin name '{name}' is not valid"))
                    .hint("a plugin name starts with a letter and holds only letters, digits, '_' or '-' (at most 64); it is the namespace of its tools"),
            );
            return (None, problems);
        }
        if let Some(first) = self.names.get(&name) {
            problems.push(key_at(
                "name",
                format!(
                    "plugin name '{name}' is already used by {}; this plugin is not loaded",
                    first.display()
                ),
            ));
            return (None, problems);
        }
        self.names.insert(name.clone(), manifest_file.clone());

        // 3. Config values.
        let settings_file = self.home.join("tavern.toml");
        let cfg = match config::resolve(
            &name,
            &manifest.config_options,
            self.settings,
            &manifest_file,
            &manifest_text,
            &settings_file,
        ) {
            Ok(c) => c,
            Err(ps) => {
                problems.extend(ps);
                return (None, problems);
            }
        };

        // 4. Permissions.
        let mut perms = match permissions::resolve(&manifest.permissions, &cfg, &self.home) {
            Ok(p) => p,
            Err(errs) => {
                problems.extend(errs.into_iter().map(|e| key_at("fs", e.to_string())));
                return (None, problems);
            }
        };
        // Write roots are created on load, so a fresh workspace works on the first call; then
        // every root is made canonical (symlinks resolved) for the sandbox's containment checks.
        self.roots.apply(&mut perms, &dir);
        for root in perms.fs_write.iter().filter(|_| self.roots.creates()) {
            if let Err(e) = std::fs::create_dir_all(root) {
                problems.push(key_at(
                    "write",
                    format!("cannot create write root {}: {e}", root.display()),
                ));
            }
        }
        perms.fs_write = perms.fs_write.iter().map(|r| absolute(r)).collect();
        perms.fs_read = perms.fs_read.iter().map(|r| absolute(r)).collect();

        // 5. Tool definitions: tool files, inline tools, VCP commands.
        let mut defs: Vec<Decl> = Vec::new();
        match &manifest.tools {
            Some(ToolsSection::Inline(list)) => {
                for v in list {
                    match serde_json::from_value::<ToolDefinition>(v.clone()) {
                        Ok(d) => {
                            let mut decl = Decl::new(d, &manifest_file, &manifest_text);
                            decl.has_parameters = v.get("parameters").is_some();
                            defs.push(decl)
                        }
                        Err(e) => {
                            problems.push(key_at("tools", format!("invalid inline tool: {e}")))
                        }
                    }
                }
            }
            other => {
                let (entry, explicit) = match other {
                    Some(ToolsSection::Entry(e)) => (e.entry.clone(), true),
                    _ => ("./tools".to_string(), false),
                };
                match inside(&dir, &entry) {
                    None => problems.push(key_at(
                        "entry",
                        format!("tools entry '{entry}' leaves the plugin directory"),
                    )),
                    Some(tools_dir) if tools_dir.is_dir() => match tool_file::list(&tools_dir) {
                        Ok(files) => {
                            for f in files {
                                match tool_file::read(&f) {
                                    Ok(tf) => {
                                        let mut decl = Decl::new(tf.definition, &tf.path, &tf.text);
                                        decl.has_parameters =
                                            serde_json::from_str::<Value>(&tf.text)
                                                .is_ok_and(|v| v.get("parameters").is_some());
                                        defs.push(decl)
                                    }
                                    Err(p) => problems.push(p),
                                }
                            }
                        }
                        Err(e) => {
                            problems.push(Problem::new(&tools_dir, format!("cannot read: {e}")))
                        }
                    },
                    Some(tools_dir) if explicit => problems.push(key_at(
                        "entry",
                        format!("tools entry {} is not a directory", tools_dir.display()),
                    )),
                    Some(_) => {}
                }
            }
        }
        if let Some(v) = &vcp_manifest {
            let text = std::fs::read_to_string(&vcp_file).unwrap_or_default();
            for d in v.tools() {
                // VCP plugins with several commands read which one from `command`.
                let mut decl = Decl::new(d, &vcp_file, &text);
                decl.extra
                    .insert("command".into(), Value::String(decl.def.id.clone()));
                defs.push(decl);
            }
        }

        // 6. Limits and scripts: every script a tool names, plus main.lua / main.rhai, load
        //    into one sandbox; a script registering tools at load adds them.
        let limits = match scripts::effective_limits(manifest.limits.as_ref(), &self.host_limits) {
            Ok(l) => l,
            Err(msg) => {
                problems.push(key_at("limits", msg));
                return (None, problems);
            }
        };
        // 5b. Node files (their scripts load with the rest).
        let nodes_dir = entry_dir(
            &dir,
            manifest.nodes.as_ref(),
            "./nodes",
            "nodes",
            &key_at,
            &mut problems,
        );
        let mut node_files: Vec<NodeFile> = Vec::new();
        if let Some(nd) = &nodes_dir {
            match nodes::list(nd) {
                Ok(list) => {
                    for f in list {
                        match nodes::read(&name, &f) {
                            Ok(n) => node_files.push(n),
                            Err(p) => problems.push(p),
                        }
                    }
                }
                Err(e) => problems.push(Problem::new(nd, format!("cannot read: {e}"))),
            }
        }
        let workflows_dir = entry_dir(
            &dir,
            manifest.workflows.as_ref(),
            "./workflows",
            "workflows",
            &key_at,
            &mut problems,
        );

        let mut files = main_scripts(&dir);
        for n in &node_files {
            if let Some(s) = &n.script {
                if inside(&dir, s).is_some_and(|p| p.is_file()) {
                    let p = PathBuf::from(s.trim_start_matches("./"));
                    if !files.contains(&p) {
                        files.push(p);
                    }
                }
            }
        }
        for d in &defs {
            if let Implementation::Service {
                script: Some(s),
                function: Some(_),
            } = &d.def.implementation
            {
                if inside(&dir, s).is_some() && dir.join(s).is_file() {
                    let p = PathBuf::from(s.trim_start_matches("./"));
                    if !files.contains(&p) {
                        files.push(p);
                    }
                }
            }
        }
        let script_ctx = ScriptContext {
            plugin: name.clone(),
            dir: dir.clone(),
            config: cfg.clone(),
            permissions: perms.clone(),
            limits,
            manager: self.tools.clone(),
        };
        let scripts = match ScriptSet::load(&script_ctx, &files) {
            Ok(s) => s,
            Err(p) => {
                problems.push(p);
                ScriptSet::empty()
            }
        };
        let bind = BindContext {
            plugin: name.clone(),
            dir: dir.clone(),
            config: cfg.clone(),
            limits: manifest.limits.clone(),
        };
        let mut registered = Vec::new();
        let main_file = files
            .first()
            .map(|f| dir.join(f))
            .unwrap_or_else(|| manifest_file.clone());
        for (def, handler) in scripts.registered_tools() {
            let text = std::fs::read_to_string(&main_file).unwrap_or_default();
            if let Some(id) = self.register(
                &name,
                def,
                handler,
                &main_file,
                &text,
                &manifest_file,
                &mut problems,
            ) {
                registered.push(id);
            }
        }

        // 7. Nodes, into the workflow engine's registry.
        let mut node_types = Vec::new();
        for n in node_files {
            match self.register_node(&name, &dir, n, &scripts) {
                Ok(t) => node_types.push(t),
                Err(p) => problems.push(p),
            }
        }

        // 8. Bind and register each declared tool; node and workflow tools wait until every
        //    plugin's nodes and workflows are in.
        let mut pending = Pending {
            manifest_file: manifest_file.clone(),
            ..Pending::default()
        };
        if let Some(wd) = &workflows_dir {
            match workflow_files(wd) {
                Ok(list) => pending.workflow_files = list,
                Err(e) => problems.push(Problem::new(wd, format!("cannot read: {e}"))),
            }
        }
        for decl in defs {
            if matches!(
                decl.def.implementation,
                Implementation::Node { .. } | Implementation::Workflow { .. }
            ) {
                pending.deferred.push(decl);
                continue;
            }
            let Decl {
                def,
                file,
                text,
                extra,
                ..
            } = decl;
            let handler = match self.bind(
                &def, &file, &text, &dir, &cfg, &perms, &bind, &extra, &scripts,
            ) {
                Ok(h) => h,
                Err(p) => {
                    problems.push(p);
                    continue;
                }
            };
            if let Some(id) = self.register(
                &name,
                def,
                handler,
                &file,
                &text,
                &manifest_file,
                &mut problems,
            ) {
                registered.push(id);
            }
        }

        let plugin = Plugin {
            manifest,
            dir,
            manifest_file,
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

    /// Registers one node file's node, run by its script function.
    fn register_node(
        &mut self,
        plugin: &str,
        dir: &Path,
        n: NodeFile,
        scripts: &ScriptSet,
    ) -> Result<String, Problem> {
        let at = |key: &str, msg: String| problem_at_key(&n.path, &n.text, key, msg);
        let node_type = n.definition.node_type.clone();
        if let Some(s) = &n.script {
            match inside(dir, s) {
                None => {
                    return Err(at(
                        "script",
                        format!("script '{s}' leaves the plugin directory"),
                    ))
                }
                Some(p) if !p.is_file() => {
                    return Err(at(
                        "script",
                        format!(
                            "node '{node_type}': script '{s}' does not exist in {}",
                            dir.display()
                        ),
                    ))
                }
                Some(_) => {}
            }
        }
        let Some(loaded) = scripts.scripts() else {
            return Err(at(
                "function",
                format!(
                    "node '{node_type}' is not registered: the plugin has no loaded script (add \"script\": \"main.lua\", or see the problem reported for the script)"
                ),
            ));
        };
        if !loaded.has_function(&n.function) {
            return Err(at(
                "function",
                format!(
                    "node '{node_type}' is not registered: no function '{}' in plugin '{plugin}''s scripts",
                    n.function
                ),
            ));
        }
        if let Some(first) = self.node_files.get(&node_type) {
            return Err(at(
                "type",
                format!(
                    "duplicate node type '{node_type}': already declared in {}",
                    first.display()
                ),
            ));
        }
        let executor = ScriptNodeExecutor::new(
            loaded.clone(),
            n.function.clone(),
            n.definition.clone(),
            Arc::downgrade(&self.tools),
        );
        self.workflows
            .registry()
            .register(n.definition, Arc::new(executor))
            .map_err(|e| at("type", e.to_string()))?;
        self.node_files.insert(node_type.clone(), n.path.clone());
        Ok(node_type)
    }

    /// Phase two: the plugin's workflow files, validated against every registered node.
    fn add_workflows(&mut self, plugin: &mut Plugin, pending: &mut Pending) -> Vec<Problem> {
        let mut problems = Vec::new();
        for path in std::mem::take(&mut pending.workflow_files) {
            match self.add_workflow_file(&path) {
                Ok(id) => plugin.workflows.push(id),
                Err(ps) => problems.extend(ps),
            }
        }
        problems
    }

    fn add_workflow_file(&self, path: &Path) -> Result<String, Vec<Problem>> {
        let wf = Workflow::load(path)?;
        if let Some(prev) = self.workflows.get(&wf.id) {
            return Err(vec![Problem::new(
                path,
                format!(
                    "workflow id '{}' is already used by {}",
                    wf.id,
                    prev.workflow.origin().display()
                ),
            )
            .hint("set a different `id` in one of the files")]);
        }
        let snapshot = wf.clone();
        match self.workflows.add(wf) {
            Ok(c) => Ok(c.workflow.id.clone()),
            Err(WorkflowError::Invalid { problems, .. }) => Err(problems
                .iter()
                .map(|i| invalid_problem(&snapshot, i))
                .collect()),
            Err(WorkflowError::Load(ps)) => Err(ps),
            Err(e) => Err(vec![Problem::new(path, e.to_string())]),
        }
    }

    /// Phase three: tools whose implementation is a node or a workflow.
    fn bind_deferred(&mut self, plugin: &mut Plugin, pending: Pending) -> Vec<Problem> {
        let mut problems = Vec::new();
        let name = plugin.name().to_string();
        for Decl {
            mut def,
            file,
            text,
            has_parameters,
            ..
        } in pending.deferred
        {
            let at = |msg: String| problem_at_key(&file, &text, "implementation", msg);
            let handler = match def.implementation.clone() {
                Implementation::Node { node_type } => {
                    let full = if node_type.contains(':') {
                        node_type.clone()
                    } else {
                        format!("{name}:{node_type}")
                    };
                    let Some(reg) = self.workflows.registry().get(&full) else {
                        let mut p = at(format!(
                            "tool '{}': no node type '{full}' is registered",
                            def.id
                        ));
                        if let Some(s) = self.workflows.registry().suggest(&full) {
                            p = p.hint(format!("did you mean '{s}'?"));
                        }
                        problems.push(p);
                        continue;
                    };
                    fill_generated(
                        &mut def,
                        has_parameters,
                        node_tool_definition(&reg.definition, None),
                    );
                    def.implementation = Implementation::Node {
                        node_type: full.clone(),
                    };
                    self.workflows.node_tool_handler(&full)
                }
                Implementation::Workflow { workflow_id } => {
                    let id = match self.workflow_target(plugin, &workflow_id) {
                        Ok(id) => id,
                        Err(p) => {
                            problems.push(at(format!("tool '{}': {p}", def.id)));
                            continue;
                        }
                    };
                    let Some(c) = self.workflows.get(&id) else {
                        problems.push(at(format!(
                            "tool '{}': workflow '{id}' is not loaded",
                            def.id
                        )));
                        continue;
                    };
                    fill_generated(
                        &mut def,
                        has_parameters,
                        workflow_tool_definition(&c.workflow),
                    );
                    def.implementation = Implementation::Workflow {
                        workflow_id: id.clone(),
                    };
                    self.workflows.tool_handler(&id)
                }
                _ => continue,
            };
            if let Some(id) = self.register(
                &name,
                def,
                handler,
                &file,
                &text,
                &pending.manifest_file,
                &mut problems,
            ) {
                plugin.tools.push(id);
            }
        }
        problems
    }

    /// The workflow id a tool's `workflowId` names: a `.json` file inside the plugin (one of
    /// its workflows, or loaded now) or an id already loaded.
    fn workflow_target(&self, plugin: &mut Plugin, target: &str) -> Result<String, String> {
        let target = target.strip_prefix("workflow:").unwrap_or(target);
        if !(target.ends_with(".json") || target.contains('/')) {
            return if self.workflows.get(target).is_some() {
                Ok(target.to_string())
            } else {
                Err(format!(
                    "no workflow '{target}' is loaded (loaded: {})",
                    self.workflows.ids().join(", ")
                ))
            };
        }
        let Some(path) = inside(&plugin.dir, target) else {
            return Err(format!(
                "workflow file '{target}' leaves the plugin directory"
            ));
        };
        if let Some(c) = self.workflows.list().into_iter().find(|c| {
            c.workflow.source.as_deref().map(permissions::normalize) == Some(path.clone())
        }) {
            return Ok(c.workflow.id.clone());
        }
        if !path.is_file() {
            return Err(format!(
                "workflow file '{target}' does not exist in {}",
                plugin.dir.display()
            ));
        }
        match self.add_workflow_file(&path) {
            Ok(id) => {
                plugin.workflows.push(id.clone());
                Ok(id)
            }
            Err(ps) => Err(format!(
                "workflow file '{target}' does not load: {}",
                ps.iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("; ")
            )),
        }
    }

    /// Builds the handler for one definition.
    #[allow(clippy::too_many_arguments)]
    fn bind(
        &self,
        def: &ToolDefinition,
        file: &Path,
        text: &str,
        dir: &Path,
        cfg: &Map<String, Value>,
        perms: &ResolvedPermissions,
        bind: &BindContext,
        extra: &Map<String, Value>,
        scripts: &ScriptSet,
    ) -> Result<Arc<dyn ToolHandler>, Problem> {
        let at = |msg: String| problem_at_key(file, text, "implementation", msg);
        match &def.implementation {
            Implementation::Service { script: Some(script), function: Some(function) } => {
                let Some(path) = inside(dir, script) else {
                    return Err(at(format!("script '{script}' leaves the plugin directory")));
                };
                if !path.is_file() {
                    return Err(at(format!("tool '{}': script '{script}' does not exist in {}", def.id, dir.display())));
                }
                scripts
                    .handler(function)
                    .map_err(|why| at(format!("tool '{}' is not registered: {why}", def.id)))
            }
            Implementation::Service { script: Some(script), function: None } => {
                Err(at(format!("service tool '{}' names script '{script}' but no `function`", def.id)))
            }
            Implementation::Service { script: None, function: Some(function) } => match self.host.get(function) {
                Some(factory) => Ok(factory(bind)),
                None => Err(at(format!("unknown host service '{function}'")).hint(format!(
                    "host services: {}; for a script function add \"script\": \"main.lua\"",
                    self.host.names().join(", ")
                ))),
            },
            Implementation::Service { script: None, function: None } => Err(at(format!(
                "service tool '{}' needs `script` and `function` (a Lua/Rhai function) or `function` naming a host service",
                def.id
            ))),
            Implementation::Script { command, timeout_ms } => {
                if !perms.processes {
                    return Err(at(format!("tool '{}' starts a process, but the plugin lacks permission `processes`", def.id))
                        .hint("add `permissions: { processes: true }` to plugin.yaml"));
                }
                let mut spec = ProcessSpec::new(command, dir, cfg, *timeout_ms).map_err(|e| at(format!("command '{command}': {e}")))?;
                spec.extra_args = extra.clone();
                Ok(Arc::new(ProcessToolHandler::new(spec)))
            }
            // Bound in `bind_deferred`, once every node and workflow is registered.
            Implementation::Node { .. } | Implementation::Workflow { .. } => Err(at(format!(
                "tool '{}': a '{}' implementation is bound after the plugin's nodes and workflows load",
                def.id,
                def.implementation.kind()
            ))),
        }
    }

    /// Normalises, checks and registers one tool; records problems. Returns its id.
    #[allow(clippy::too_many_arguments)]
    fn register(
        &mut self,
        plugin: &str,
        mut def: ToolDefinition,
        handler: Arc<dyn ToolHandler>,
        file: &Path,
        text: &str,
        manifest_file: &Path,
        problems: &mut Vec<Problem>,
    ) -> Option<String> {
        let id = match tool_file::normalise_id(plugin, &def.id) {
            Ok(id) => id,
            Err(e) => {
                problems.push(problem_at_key(
                    file,
                    text,
                    "id",
                    format!(
                        "{e} (plugin '{plugin}' is declared in {})",
                        manifest_file.display()
                    ),
                ));
                return None;
            }
        };
        if let Err(msg) = tool_file::check_schema(&def.parameters) {
            problems.push(problem_at_key(
                file,
                text,
                "parameters",
                format!("tool '{id}': {msg}"),
            ));
            return None;
        }
        if let Some(first) = self.ids.get(&id) {
            problems.push(problem_at_key(
                file,
                text,
                "id",
                format!(
                    "duplicate tool id '{id}': already declared in {}",
                    first.display()
                ),
            ));
            return None;
        }
        if self.tools.get(&id).is_ok_and(|t| t.id() == id) {
            problems.push(problem_at_key(
                file,
                text,
                "id",
                format!("duplicate tool id '{id}': already registered by the engine or host"),
            ));
            return None;
        }
        if def.display_name.is_none() {
            def.display_name = Some(
                id.split_once(':')
                    .map(|(_, n)| n.to_string())
                    .unwrap_or_else(|| id.clone()),
            );
        }
        def.id = id.clone();
        match self.tools.register(def, handler) {
            Ok(()) => {
                self.ids.insert(id.clone(), file.to_path_buf());
                Some(id)
            }
            Err(ToolError::Registration { message, .. }) => {
                problems.push(problem_at_key(
                    file,
                    text,
                    "parameters",
                    format!("cannot register tool '{id}': {message}"),
                ));
                None
            }
            Err(e) => {
                problems.push(problem_at_key(file, text, "id", e.to_string()));
                None
            }
        }
    }
}

/// A tool declaration and where it came from.
struct Decl {
    def: ToolDefinition,
    file: PathBuf,
    text: String,
    /// Members added to the arguments of a process tool (VCP's `command`).
    extra: Map<String, Value>,
    /// Whether the declaration writes `parameters` (node/workflow tools infer them when not).
    has_parameters: bool,
}

impl Decl {
    fn new(def: ToolDefinition, file: &Path, text: &str) -> Self {
        Decl {
            def,
            file: file.to_path_buf(),
            text: text.to_string(),
            extra: Map::new(),
            has_parameters: true,
        }
    }
}

/// `rel` joined to `dir`, or `None` when it is absolute or climbs out with `..`.
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

/// The directory of an `{entry}` section: the entry when written (a problem when it leaves
/// the plugin or is not a directory), else `default` when that directory exists.
fn entry_dir(
    dir: &Path,
    section: Option<&Entry>,
    default: &str,
    what: &str,
    key_at: &dyn Fn(&str, String) -> Problem,
    problems: &mut Vec<Problem>,
) -> Option<PathBuf> {
    match section {
        Some(e) => match inside(dir, &e.entry) {
            None => {
                problems.push(key_at(
                    what,
                    format!("{what} entry '{}' leaves the plugin directory", e.entry),
                ));
                None
            }
            Some(d) if d.is_dir() => Some(d),
            Some(d) => {
                problems.push(key_at(
                    what,
                    format!("{what} entry {} is not a directory", d.display()),
                ));
                None
            }
        },
        None => inside(dir, default).filter(|d| d.is_dir()),
    }
}

/// The `*.json` workflow files in `dir`, sorted by name.
fn workflow_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    Ok(files)
}

/// Zero-config node and workflow tools (seed 001 §4.1.2): what the tool file leaves out —
/// its parameters, its description — comes from the definition generated for the node or
/// workflow it wraps.
fn fill_generated(def: &mut ToolDefinition, has_parameters: bool, generated: ToolDefinition) {
    if !has_parameters {
        def.parameters = generated.parameters;
    }
    if def.description.is_empty() {
        def.description = generated.description;
    }
}

/// Scripts run when the plugin loads: `main.lua` and `main.rhai`, when present.
fn main_scripts(dir: &Path) -> Vec<PathBuf> {
    ["main.lua", "main.rhai"]
        .iter()
        .map(PathBuf::from)
        .filter(|f| dir.join(f).is_file())
        .collect()
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
    Loader::new(home, settings, tools.clone(), host)
        .with_workflows(workflows.clone())
        .load_dir(plugins_dir)
}
