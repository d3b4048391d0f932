//! Binding: the handler that carries out each declared tool — a script function, a host
//! service, a process, or (once every plugin's nodes and workflows are in) a node or a
//! workflow.

use std::path::Path;
use std::sync::Arc;

use serde_json::{Map, Value};

use super::declarations::Decl;
use super::{inside, Loader, Pending, Plugin};
use crate::plugins::host_services::BindContext;
use crate::plugins::permissions::{self, Permissions};
use crate::plugins::scripts::ScriptSet;
use crate::plugins::tool_file::problem_at_key;
use crate::problem::Problem;
use crate::sandbox::process::{ProcessSpec, ProcessToolHandler};
use crate::tools::{Implementation, ToolDefinition, ToolHandler};
use crate::workflow::{node_tool_definition, workflow_tool_definition};

impl Loader<'_> {
    /// Phase three: tools whose implementation is a node or a workflow.
    pub(super) fn bind_deferred(&mut self, plugin: &mut Plugin, pending: Pending) -> Vec<Problem> {
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
    pub(super) fn bind(
        &self,
        def: &ToolDefinition,
        file: &Path,
        text: &str,
        dir: &Path,
        cfg: &Map<String, Value>,
        perms: &Permissions,
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
                    return Err(at(format!("tool '{}': {}", def.id, super::missing_script(dir, script))));
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
            Implementation::Script { command, timeout_ms, limits } => {
                if !perms.processes {
                    return Err(at(format!("tool '{}' starts a process, but the plugin lacks permission `processes`", def.id))
                        .hint("add `permissions: { processes: true }` to plugin.yaml"));
                }
                let mut spec = ProcessSpec::new(command, dir, cfg, *timeout_ms).map_err(|e| at(format!("command '{command}': {e}")))?;
                spec.extra_args = extra.clone();
                crate::plugins::process_tools::confine_spec(&mut spec, self.settings, &self.process_caps, bind, perms, limits.as_ref())
                    .map_err(|(msg, hint)| at(format!("tool '{}' {msg}", def.id)).hint(hint))?;
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
