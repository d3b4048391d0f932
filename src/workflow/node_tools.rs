//! Every node is a tool (seed 001 §4.1.2, seed 002 §7): each registered node type is callable
//! as `node:<type>` without configuration — its parameters are the node's inputs, its result
//! the node's outputs (one output: the bare value).
//!
//! The canonical id is `node:<namespace>.<Name>` (an id holds one `:`), so `core:Math` is
//! `node:core.Math` with the wire name `node_core_Math`; callers may write `node:core:Math`
//! (the registry resolves it). When a plugin's `*.tool.json` runs the same node type, its
//! description (and display name, annotations) is used for `node:<type>` too.
//! `core:GroupInput`/`core:GroupOutput` only make sense inside a workflow and are left out.

use std::collections::HashMap;

use super::format::{GROUP_INPUT, GROUP_OUTPUT};
use super::library::Workflows;
use super::schema::node_tool_definition;
use crate::problem::Problem;
use crate::tools::{Implementation, ToolDefinition, ToolManager};

/// The `node:` tool id of a node type: `core:Math` → `node:core.Math`.
pub fn node_tool_id(node_type: &str) -> String {
    format!("node:{}", node_type.replacen(':', ".", 1))
}

/// Registers `node:<type>` for every node type not already registered under that id.
pub fn register_all(workflows: &Workflows, tools: &ToolManager) -> Vec<Problem> {
    let overrides: HashMap<String, ToolDefinition> = tools
        .list()
        .into_iter()
        .filter_map(|t| match &t.definition.implementation {
            Implementation::Node { node_type } => Some((node_type.clone(), t.definition.clone())),
            _ => None,
        })
        .collect();
    let mut problems = Vec::new();
    for def in workflows.registry().definitions() {
        if def.node_type == GROUP_INPUT || def.node_type == GROUP_OUTPUT {
            continue;
        }
        let id = node_tool_id(&def.node_type);
        if tools.find(&id).is_some_and(|t| t.id() == id) {
            continue;
        }
        let mut tool = node_tool_definition(&def, Some(&id));
        if let Some(o) = overrides.get(&def.node_type) {
            tool.description = o.description.clone();
            tool.display_name = o.display_name.clone().or(tool.display_name);
            tool.annotations = o.annotations.clone();
        }
        if let Err(e) = tools.register(tool, workflows.node_tool_handler(&def.node_type)) {
            problems.push(Problem::new("<node registry>", e.to_string()));
        }
    }
    problems
}
