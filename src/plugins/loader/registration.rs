//! Registration: tools into the [`ToolManager`](crate::tools::ToolManager), script nodes into
//! the node registry and workflow files into the workflow set, each checked for clashes with
//! what is already there (naming the first file).

use std::path::Path;
use std::sync::Arc;

use super::{Loader, Pending, Plugin};
use crate::plugins::nodes::{NodeFile, ScriptNodeExecutor};
use crate::plugins::scripts::ScriptSet;
use crate::plugins::tool_file::{self, problem_at_key};
use crate::problem::Problem;
use crate::tools::{ToolDefinition, ToolError, ToolHandler};
use crate::workflow::{invalid_problem, Workflow, WorkflowError};

use super::inside;

impl Loader<'_> {
    /// Registers the tools the plugin's scripts registered while loading; problems point at
    /// `main_file` (the first script).
    pub(super) fn register_script_tools(
        &mut self,
        plugin: &str,
        scripts: &ScriptSet,
        main_file: &Path,
        manifest_file: &Path,
        problems: &mut Vec<Problem>,
    ) -> Vec<String> {
        let mut registered = Vec::new();
        for (def, handler) in scripts.registered_tools() {
            let text = std::fs::read_to_string(main_file).unwrap_or_default();
            if let Some(id) = self.register(
                plugin,
                def,
                handler,
                main_file,
                &text,
                manifest_file,
                problems,
            ) {
                registered.push(id);
            }
        }
        registered
    }

    /// Registers one node file's node, run by its script function.
    pub(super) fn register_node(
        &mut self,
        plugin: &str,
        dir: &Path,
        n: NodeFile,
        scripts: &ScriptSet,
    ) -> Result<Option<String>, Problem> {
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
                        format!("node '{node_type}': {}", super::missing_script(dir, s)),
                    ))
                }
                Some(_) => {}
            }
        }
        let Some(loaded) = scripts.scripts() else {
            if scripts.load_failed() {
                // Covered by the script's own problem.
                return Ok(None);
            }
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
                    "node '{node_type}' is not registered: no function '{}' in plugin '{plugin}''s scripts{}",
                    n.function,
                    crate::suggest::did_you_mean(&n.function, &loaded.function_names())
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
        Ok(Some(node_type))
    }

    /// Phase two: the plugin's workflow files, validated against every registered node.
    pub(super) fn add_workflows(
        &mut self,
        plugin: &mut Plugin,
        pending: &mut Pending,
    ) -> Vec<Problem> {
        let mut problems = Vec::new();
        for path in std::mem::take(&mut pending.workflow_files) {
            match self.add_workflow_file(&path) {
                Ok(id) => plugin.workflows.push(id),
                Err(ps) => problems.extend(ps),
            }
        }
        problems
    }

    pub(super) fn add_workflow_file(&self, path: &Path) -> Result<String, Vec<Problem>> {
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
            // Its node types' plugin failed: that plugin's problem says it.
            Err(e) if self.workflows.covered_by_failed_plugin(path, &snapshot, &e) => {
                Err(Vec::new())
            }
            Err(WorkflowError::Invalid { problems, .. }) => Err(problems
                .iter()
                .map(|i| invalid_problem(&snapshot, i))
                .collect()),
            Err(WorkflowError::Load(ps)) => Err(ps),
            Err(e) => Err(vec![Problem::new(path, e.to_string())]),
        }
    }

    /// Normalises, checks and registers one tool; records problems. Returns its id.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn register(
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
        if self.tools.find(&id).is_some_and(|t| t.id() == id) {
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
