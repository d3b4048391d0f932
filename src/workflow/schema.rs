//! Tool schemas generated from interfaces (seed 003 §2.3) and node definitions
//! (seed 001 §4.1.2).
//!
//! The mapping: each slot becomes a property with `type` from `dataFlowType` (`STRING` →
//! `string`, `INTEGER` → `integer`, `FLOAT` → `number`, `BOOLEAN` → `boolean`, `OBJECT` →
//! `object`, `ARRAY` → `array`, `BINARY` → `string`; `WILDCARD`/`CONVERTIBLE_ANY` get no
//! `type`), `description` (`customDescription` when set, else `description`), and `enum` from
//! the suggestion values when `matchCategories` holds `ComboOption`; `required` lists the
//! slots marked `required: true` (left out when empty).
//!
//! Seed 003 §2.3 does not list defaults among the mapping rules (its §2.3.1 example omits
//! `default` for `summary_length`, whose slot has `config.default`); [`workflow_tool_schema`]
//! is that exact mapping. The `workflow:<id>` tool itself ([`workflow_tool_definition`],
//! and so `tavern tools`, MCP, the exports and `tavern workflow schema`) uses
//! [`TOOL_SCHEMA`]: it also writes `default` (an omitted argument takes it) and
//! `minimum`/`maximum` from `config.min`/`config.max`, so a client sees what applies.

use serde_json::{json, Map, Value};

use super::format::Workflow;
use super::registry::NodeDefinition;
use super::types::{OrderedMap, SlotDefinition};
use crate::tools::{Implementation, ToolDefinition};

/// Extras beyond seed 003's mapping.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SchemaOptions {
    /// Also write `default`, `minimum` and `maximum`.
    pub defaults: bool,
}

/// The options of every `workflow:<id>` tool's schema: with defaults and bounds.
pub const TOOL_SCHEMA: SchemaOptions = SchemaOptions { defaults: true };

/// The tool id of a workflow: `workflow:<id>`.
pub fn workflow_tool_id(workflow_id: &str) -> String {
    format!("workflow:{workflow_id}")
}

/// The JSON Schema of one slot.
pub fn slot_schema(slot: &SlotDefinition, opts: SchemaOptions) -> Value {
    let mut p = Map::new();
    if let Some(t) = slot.data_flow_type.json_type() {
        p.insert("type".into(), json!(t));
    }
    if let Some(d) = slot.effective_description() {
        p.insert("description".into(), json!(d));
    }
    if let Some(values) = slot.enum_values() {
        p.insert("enum".into(), Value::Array(values));
    }
    if opts.defaults {
        if let Some(d) = slot.default() {
            p.insert("default".into(), d.clone());
        }
        if let Some(c) = &slot.config {
            if let Some(min) = c.min {
                p.insert("minimum".into(), json!(min));
            }
            if let Some(max) = c.max {
                p.insert("maximum".into(), json!(max));
            }
        }
    }
    Value::Object(p)
}

/// The `parameters` object schema for a list of slots.
pub fn parameters_schema(slots: &OrderedMap<SlotDefinition>, opts: SchemaOptions) -> Value {
    let mut props = Map::new();
    let mut required = Vec::new();
    for (k, slot) in slots.iter() {
        props.insert(k.to_string(), slot_schema(slot, opts));
        if slot.required {
            required.push(json!(k));
        }
    }
    let mut s = Map::new();
    s.insert("type".into(), json!("object"));
    s.insert("properties".into(), Value::Object(props));
    if !required.is_empty() {
        s.insert("required".into(), Value::Array(required));
    }
    Value::Object(s)
}

/// The description a workflow tool shows: the workflow's `description`, else its name.
fn workflow_description(wf: &Workflow) -> String {
    if !wf.description.is_empty() {
        wf.description.clone()
    } else {
        wf.name
            .clone()
            .unwrap_or_else(|| format!("Runs workflow {}.", wf.id))
    }
}

/// `{"name", "description", "parameters"}` for `workflow:<id>`, exactly as seed 003 §2.3
/// (no defaults; the registered tool has them: [`TOOL_SCHEMA`]).
pub fn workflow_tool_schema(wf: &Workflow) -> Value {
    workflow_tool_schema_with(wf, SchemaOptions::default())
}

/// [`workflow_tool_schema`] with extras.
pub fn workflow_tool_schema_with(wf: &Workflow, opts: SchemaOptions) -> Value {
    json!({
        "name": workflow_tool_id(&wf.id),
        "description": workflow_description(wf),
        "parameters": parameters_schema(&wf.interface_inputs, opts),
    })
}

/// The [`ToolDefinition`] of `workflow:<id>` (`Implementation::Workflow`).
pub fn workflow_tool_definition(wf: &Workflow) -> ToolDefinition {
    ToolDefinition {
        id: workflow_tool_id(&wf.id),
        display_name: wf.name.clone(),
        description: workflow_description(wf),
        parameters: parameters_schema(&wf.interface_inputs, TOOL_SCHEMA),
        implementation: Implementation::Workflow {
            workflow_id: wf.id.clone(),
        },
        annotations: None,
        examples: Vec::new(),
    }
}

/// A tool definition for running node type `def` alone (seed 001 §4.1.2): parameters
/// inferred from the node's inputs, `Implementation::Node`. `tool_id` defaults to the node
/// type (`core:Math`).
pub fn node_tool_definition(def: &NodeDefinition, tool_id: Option<&str>) -> ToolDefinition {
    ToolDefinition {
        id: tool_id
            .map(str::to_string)
            .unwrap_or_else(|| def.node_type.clone()),
        display_name: def.display_name.clone(),
        description: def.description.clone(),
        parameters: parameters_schema(&def.inputs, SchemaOptions::default()),
        implementation: Implementation::Node {
            node_type: def.node_type.clone(),
        },
        annotations: None,
        examples: Vec::new(),
    }
}
