//! `Engine`: the embedding entry point. Built by [`Engine::builder`]; no global state, so
//! several engines can live in one process.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::config::Settings;
use crate::problem::Problem;
use crate::protocol::{self, Format, Parsed};
use crate::tools::{CallOutcome, Caller, ToolDefinition, ToolError, ToolHandler, ToolManager};
use crate::workflow::{NodeRegistry, RunDefaults, Workflows};

/// Why an engine could not be built.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The configuration could not be read.
    #[error("configuration: {0}")]
    Config(Problem),
    /// A `--set` override was malformed.
    #[error("{0}")]
    Override(String),
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
pub struct EngineBuilder {
    home: PathBuf,
    overrides: Vec<String>,
    builtins: bool,
    plugins: bool,
    workflows: bool,
    host_tools: Vec<(ToolDefinition, Arc<dyn ToolHandler>)>,
    script_limits: crate::script::Limits,
    process_limits: crate::plugins::confine::ProcessLimits,
    /// Hooks and overrides (host closures registered before `build` live here too).
    hooks: Arc<crate::hooks::Hooks>,
    hook_errors: Vec<crate::hooks::HookError>,
    audit: Option<PathBuf>,
    user_scripts: bool,
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
            process_limits: crate::plugins::confine::ProcessLimits::DEFAULT,
            hooks: crate::hooks::Hooks::new(),
            hook_errors: Vec::new(),
            audit: None,
            user_scripts: true,
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

    /// The host's cap on every plugin's script limits (default: the engine defaults). A
    /// plugin may lower its own limits in plugin.yaml but never raise them past this cap.
    pub fn script_limits(mut self, limits: crate::script::Limits) -> Self {
        self.script_limits = limits;
        self
    }

    /// The host's cap on every process tool's limits (memory, CPU, processes, open files,
    /// output; default [`crate::plugins::confine::ProcessLimits::DEFAULT`]). Plugins and tools
    /// may lower them; `process.*` settings replace single caps.
    pub fn process_limits(mut self, limits: crate::plugins::confine::ProcessLimits) -> Self {
        self.process_limits = limits;
        self
    }

    /// Registers a host (Rust) tool.
    pub fn tool(mut self, definition: ToolDefinition, handler: Arc<dyn ToolHandler>) -> Self {
        self.host_tools.push((definition, handler));
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
        Fut:
            std::future::Future<Output = Result<crate::hooks::HookReturn, String>> + Send + 'static,
    {
        if let Err(e) = self.hooks.on_async(point, Default::default(), f) {
            self.hook_errors.push(e);
        }
        self
    }

    /// Builds the engine: reads settings, registers tools, loads plugins and workflows.
    /// Broken plugins or workflows do not fail the build; they are listed in
    /// [`Engine::problems`].
    pub fn build(self) -> Result<Engine, EngineError> {
        let mut settings = Settings::load(&self.home).map_err(EngineError::Config)?;
        settings.apply_env().map_err(EngineError::Override)?;
        for o in &self.overrides {
            settings.set_override(o).map_err(EngineError::Override)?;
        }
        if let Some(e) = self.hook_errors.into_iter().next() {
            return Err(EngineError::Hook(e));
        }
        let tools = ToolManager::new();
        tools.set_interceptor(self.hooks.clone());
        let audit = self.audit.clone().or_else(|| {
            settings
                .get("audit.file")
                .and_then(|v| v.as_str())
                .map(|f| self.home.join(f))
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
        }
        for (def, handler) in self.host_tools {
            tools.register(def, handler)?;
        }
        let mut problems = Vec::new();
        // The node registry exists before plugins load, so plugins can add node types.
        let registry = NodeRegistry::with_builtins();
        crate::agent::register_nodes(&registry, &settings);
        let workflows = Arc::new(
            Workflows::new(Arc::new(registry)).with_defaults(RunDefaults::from_settings(&settings)),
        );
        let plugins = if self.plugins {
            let report = crate::plugins::Loader::new(
                &self.home,
                &settings,
                tools.clone(),
                &crate::plugins::HostServices::with_defaults(),
            )
            .with_workflows(workflows.clone())
            .host_limits(self.script_limits)
            .process_caps(self.process_limits)
            .load_dir(&self.home.join("plugins"));
            crate::plugins::unavailable::mark(
                &tools,
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
        if self.workflows {
            problems.extend(crate::workflow::config_tools::load(
                &self.home, &workflows, &tools,
            ));
            problems.extend(crate::workflow::node_tools::register_all(
                &workflows, &tools,
            ));
        }
        let user_scripts = crate::plugins::user_scripts::after_load(
            &self.hooks,
            &tools,
            &plugins,
            &workflows,
            &self.home,
            &settings,
            self.user_scripts.then_some(self.script_limits),
            &mut problems,
        );
        Ok(Engine {
            home: self.home,
            settings,
            tools,
            workflows,
            problems,
            plugins,
            hooks: self.hooks,
            user_scripts,
        })
    }
}

/// A configured tavern engine.
pub struct Engine {
    home: PathBuf,
    settings: Settings,
    tools: Arc<ToolManager>,
    workflows: Arc<Workflows>,
    problems: Vec<Problem>,
    /// Loaded plugins; holding them keeps their script states alive.
    plugins: crate::plugins::PluginSet,
    hooks: Arc<crate::hooks::Hooks>,
    /// Power-user scripts; holding them keeps their script states alive.
    user_scripts: Vec<crate::plugins::user_scripts::UserScript>,
}

impl Engine {
    /// Starts configuring an engine.
    pub fn builder() -> EngineBuilder {
        EngineBuilder::default()
    }

    /// The home directory.
    pub fn home(&self) -> &Path {
        &self.home
    }

    /// The effective settings.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The tool registry.
    pub fn tools(&self) -> &Arc<ToolManager> {
        &self.tools
    }

    /// The plugins loaded from `<home>/plugins`.
    pub fn plugins(&self) -> &crate::plugins::PluginSet {
        &self.plugins
    }

    /// The loaded workflows and the node registry behind them.
    pub fn workflows(&self) -> &Arc<Workflows> {
        &self.workflows
    }

    /// Hooks and overrides (register host hooks here, or on the builder).
    pub fn hooks(&self) -> &Arc<crate::hooks::Hooks> {
        &self.hooks
    }

    /// The power-user scripts loaded from `<home>/scripts`.
    pub fn user_scripts(&self) -> &[crate::plugins::user_scripts::UserScript] {
        &self.user_scripts
    }

    /// Problems found while loading plugins and workflows.
    pub fn problems(&self) -> &[Problem] {
        &self.problems
    }

    /// Parses `text` and runs every call in it, in order.
    /// Calls from a block with an error diagnostic are never in `parsed.calls`.
    pub async fn call_text(
        &self,
        text: &str,
        format: Format,
        caller: Caller,
    ) -> (Parsed, Vec<CallOutcome>) {
        let mut parsed = protocol::parse(text, format);
        // VCP dispatch first, so `parsed.calls` pairs one-to-one with the outcomes.
        parsed.calls = self.tools.resolve_vcp(std::mem::take(&mut parsed.calls));
        let outcomes = self.tools.execute(&parsed.calls, caller).await;
        (parsed, outcomes)
    }
}
