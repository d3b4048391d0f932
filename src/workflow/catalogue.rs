//! The catalogue of node types, generated from a [`NodeRegistry`]: the Markdown section of
//! `docs/workflows.md` (a test fails when the checked-in copy is stale) and the output of
//! `tavern nodes [--json]`.

use std::fmt::Write as _;

use serde_json::{json, Value};

use super::registry::{NodeDefinition, NodeRegistry};
use super::types::{OrderedMap, SlotDefinition};

/// Marker opening the generated section of `docs/workflows.md`.
pub const BEGIN: &str = "<!-- BEGIN GENERATED: node catalogue (tavern nodes --markdown) -->";
/// Marker closing it.
pub const END: &str = "<!-- END GENERATED: node catalogue -->";

/// Every node type, sorted by type, as JSON (`[{type, category, description, inputs,
/// outputs, config}]`, each slot `{key, type, required, multi, default, description}`).
pub fn json(registry: &NodeRegistry) -> Value {
    Value::Array(sorted(registry).iter().map(node_json).collect())
}

/// Every node type a workflow may use, sorted by type: the registry's, and the two the
/// compiler itself provides (`core:GroupInput`, `core:GroupOutput`, whose slots are the
/// workflow's interface).
fn sorted(registry: &NodeRegistry) -> Vec<NodeDefinition> {
    let mut defs = registry.definitions();
    for (ty, description) in [
        (
            super::format::GROUP_INPUT,
            "The workflow's inputs: its outputs are the workflow's `interfaceInputs` (the parameters of its `workflow:<id>` tool).",
        ),
        (
            super::format::GROUP_OUTPUT,
            "The workflow's results: its inputs are the workflow's `interfaceOutputs` (what its `workflow:<id>` tool returns).",
        ),
    ] {
        let mut d = NodeDefinition::new(ty, description);
        d.category = Some("Group".into());
        defs.push(d);
    }
    defs.sort_by(|a, b| a.node_type.cmp(&b.node_type));
    defs
}

/// One line per node type, sorted: type, category and the first sentence of its
/// description (`tavern nodes`; `--long` prints [`markdown`]).
pub fn lines(registry: &NodeRegistry) -> String {
    let defs = sorted(registry);
    let width = defs.iter().map(|d| d.node_type.len()).max().unwrap_or(0);
    let mut out = String::new();
    for d in &defs {
        let text = d.description.trim();
        let first = match text.find(". ") {
            Some(i) => &text[..=i],
            None => text,
        };
        let _ = writeln!(
            out,
            "{:<width$}  {:<10}  {}",
            d.node_type,
            d.category.as_deref().unwrap_or("-"),
            first.replace('\n', " ")
        );
    }
    out
}

fn node_json(d: &NodeDefinition) -> Value {
    json!({
        "type": d.node_type,
        "category": d.category,
        "description": d.description,
        "inputs": slots_json(&d.inputs),
        "outputs": slots_json(&d.outputs),
        "config": slots_json(&d.config_schema),
    })
}

fn slots_json(slots: &OrderedMap<SlotDefinition>) -> Value {
    Value::Array(
        slots
            .iter()
            .map(|(k, s)| {
                json!({
                    "key": k,
                    "type": s.data_flow_type.as_str(),
                    "required": s.required,
                    "multi": s.multi,
                    "default": s.config.as_ref().and_then(|c| c.default.clone()),
                    "description": s.description.clone().unwrap_or_default(),
                })
            })
            .collect(),
    )
}

/// The catalogue as Markdown (the part between [`BEGIN`] and [`END`]).
pub fn markdown(registry: &NodeRegistry) -> String {
    let mut out = String::new();
    for d in sorted(registry) {
        let _ = writeln!(out, "### `{}`\n", d.node_type);
        if let Some(c) = &d.category {
            let _ = writeln!(out, "Category: {c}.\n");
        }
        if !d.description.is_empty() {
            let _ = writeln!(out, "{}\n", d.description.trim());
        }
        for (title, slots) in [
            ("Inputs", &d.inputs),
            ("Outputs", &d.outputs),
            ("Config (`configValues`)", &d.config_schema),
        ] {
            if slots.is_empty() {
                continue;
            }
            let _ = writeln!(out, "{title}:\n");
            let _ = writeln!(out, "| key | type | required | default | description |");
            let _ = writeln!(out, "|---|---|---|---|---|");
            for (k, s) in slots.iter() {
                let default = s
                    .config
                    .as_ref()
                    .and_then(|c| c.default.as_ref())
                    .map(|v| format!("`{v}`"))
                    .unwrap_or_default();
                let mut ty = s.data_flow_type.as_str().to_string();
                if s.multi {
                    ty.push_str(" (multi)");
                }
                let desc = s
                    .description
                    .clone()
                    .unwrap_or_default()
                    .replace('|', "\\|")
                    .replace('\n', " ");
                let _ = writeln!(
                    out,
                    "| `{k}` | {ty} | {} | {default} | {desc} |",
                    if s.required { "yes" } else { "no" }
                );
            }
            out.push('\n');
        }
    }
    out
}

/// `text` with its generated section replaced by a fresh [`markdown`] catalogue (`None`
/// when the markers are missing).
pub fn refresh(text: &str, registry: &NodeRegistry) -> Option<String> {
    let start = text.find(BEGIN)? + BEGIN.len();
    let end = text[start..].find(END)? + start;
    Some(format!(
        "{}\n\n{}{}",
        &text[..start],
        markdown(registry),
        &text[end..]
    ))
}
