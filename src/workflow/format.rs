//! The workflow file: ComfyTavern's storage format plus `id`, `name`, `description`.
//!
//! Loading reads JSON into a `Value` first (syntax errors carry line and column), then reads
//! each node, edge and interface slot by hand so every error names the node id and field.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::types::{OrderedMap, SlotDefinition};
use crate::problem::Problem;

/// Node type of the node whose outputs are the interface inputs.
pub const GROUP_INPUT: &str = "core:GroupInput";
/// Node type of the node whose inputs are the interface outputs.
pub const GROUP_OUTPUT: &str = "core:GroupOutput";

/// One node of a workflow as stored.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct WorkflowNode {
    /// Unique within the workflow.
    pub id: String,
    /// `namespace:Type`.
    pub node_type: String,
    /// Values for inputs that no edge feeds.
    pub input_values: Map<String, Value>,
    /// Node configuration (merged over the definition's config defaults).
    pub config_values: Map<String, Value>,
    /// Editor position, kept as written.
    pub position: Option<Value>,
    /// For `multi` inputs: the order of the edges (by edge id) feeding each slot.
    pub input_connection_orders: OrderedMap<Vec<String>>,
    /// 1-based line of the node in its file, when loaded from one.
    pub line: Option<u32>,
}

impl WorkflowNode {
    /// A node with an id and a type.
    pub fn new(id: impl Into<String>, node_type: impl Into<String>) -> Self {
        WorkflowNode {
            id: id.into(),
            node_type: node_type.into(),
            ..Default::default()
        }
    }

    /// Builder: sets an input value.
    pub fn input(mut self, slot: impl Into<String>, value: Value) -> Self {
        self.input_values.insert(slot.into(), value);
        self
    }

    /// Builder: sets a config value.
    pub fn config(mut self, key: impl Into<String>, value: Value) -> Self {
        self.config_values.insert(key.into(), value);
        self
    }
}

/// One edge: `source.sourceHandle` → `target.targetHandle`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct WorkflowEdge {
    /// Edge id (optional; used by `inputConnectionOrders`).
    pub id: Option<String>,
    /// Source node id.
    pub source: String,
    /// Output slot of the source.
    pub source_handle: String,
    /// Target node id.
    pub target: String,
    /// Input slot of the target.
    pub target_handle: String,
}

impl WorkflowEdge {
    /// An edge without id.
    pub fn new(
        source: impl Into<String>,
        source_handle: impl Into<String>,
        target: impl Into<String>,
        target_handle: impl Into<String>,
    ) -> Self {
        WorkflowEdge {
            id: None,
            source: source.into(),
            source_handle: source_handle.into(),
            target: target.into(),
            target_handle: target_handle.into(),
        }
    }

    /// A readable name for messages: the id, or `source.handle->target.handle`.
    pub fn label(&self) -> String {
        match &self.id {
            Some(id) => id.clone(),
            None => format!(
                "{}.{}->{}.{}",
                self.source, self.source_handle, self.target, self.target_handle
            ),
        }
    }
}

/// A workflow: a DAG of nodes with an optional interface.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Workflow {
    /// Identifier (`workflow:<id>` as a tool); defaults to the file stem.
    pub id: String,
    /// Human name.
    pub name: Option<String>,
    /// What it does (the tool description).
    pub description: String,
    /// Nodes in file order.
    pub nodes: Vec<WorkflowNode>,
    /// Edges in file order.
    pub edges: Vec<WorkflowEdge>,
    /// Arguments (outputs of `core:GroupInput`).
    pub interface_inputs: OrderedMap<SlotDefinition>,
    /// Results (inputs of `core:GroupOutput`).
    pub interface_outputs: OrderedMap<SlotDefinition>,
    /// The file it came from.
    pub source: Option<PathBuf>,
}

impl Workflow {
    /// An empty workflow with an id.
    pub fn new(id: impl Into<String>) -> Self {
        Workflow {
            id: id.into(),
            ..Default::default()
        }
    }

    /// Builder: adds a node.
    pub fn node(mut self, node: WorkflowNode) -> Self {
        self.nodes.push(node);
        self
    }

    /// Builder: adds an edge.
    pub fn edge(
        mut self,
        source: &str,
        source_handle: &str,
        target: &str,
        target_handle: &str,
    ) -> Self {
        self.edges.push(WorkflowEdge::new(
            source,
            source_handle,
            target,
            target_handle,
        ));
        self
    }

    /// Whether the workflow has an interface (and so becomes a `workflow:` tool).
    pub fn has_interface(&self) -> bool {
        !self.interface_inputs.is_empty() || !self.interface_outputs.is_empty()
    }

    /// Where to point at in messages.
    pub fn origin(&self) -> PathBuf {
        self.source
            .clone()
            .unwrap_or_else(|| PathBuf::from(format!("<workflow {}>", self.id)))
    }

    /// Reads a workflow file. The id defaults to the file stem.
    pub fn load(path: &Path) -> Result<Workflow, Vec<Problem>> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| vec![Problem::new(path, format!("cannot read workflow: {e}"))])?;
        Self::from_json(&text, path)
    }

    /// Reads a workflow from JSON text; `origin` names the file in problems and gives the
    /// default id (its stem). Every problem found is returned, not only the first.
    pub fn from_json(text: &str, origin: &Path) -> Result<Workflow, Vec<Problem>> {
        let doc: Value = serde_json::from_str(text).map_err(|e| {
            vec![Problem::new(origin, format!("not valid JSON: {e}"))
                .at(e.line() as u32, Some(e.column() as u32))
                .hint("a workflow file is one JSON object with `nodes` and `edges`")]
        })?;
        let Value::Object(root) = doc else {
            return Err(vec![Problem::new(
                origin,
                "a workflow must be a JSON object",
            )]);
        };
        let located = crate::strict::locate_json(text);
        let mut problems: Vec<Problem> = match &located {
            Some(doc) => crate::strict::unknown_keys(doc, &shape())
                .iter()
                .map(|u| u.problem(origin, "workflow"))
                .collect(),
            None => Vec::new(),
        };
        use crate::strict::PathStep;
        // Line of item `i` of list `list` (its first key), for problems about a node or edge.
        let item_line = |list: &str, i: usize| {
            located
                .as_ref()
                .and_then(|d| d.place(&[PathStep::Key(list), PathStep::Index(i)]))
                .map(|(l, _)| l)
        };
        let mut p = |msg: String, line: Option<u32>| {
            let pr = Problem::new(origin, msg);
            problems.push(match line {
                Some(l) => pr.at(l, None),
                None => pr,
            });
        };
        let stem = origin
            .file_stem()
            .map(|s| {
                s.to_string_lossy()
                    .trim_end_matches(".workflow")
                    .to_string()
            })
            .unwrap_or_default();
        let mut wf = Workflow {
            id: stem,
            source: Some(origin.to_path_buf()),
            ..Default::default()
        };
        match root.get("id") {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) if is_valid_id(s) => wf.id = s.clone(),
            Some(v) => p(
                format!("field `id`: expected an id of letters, digits, `_`, `-` or `.`, got {v}"),
                find_line(text, "\"id\""),
            ),
        }
        if wf.id.is_empty() {
            p(
                "the workflow has no `id` and no file name to take it from".into(),
                None,
            );
        }
        match root.get("name") {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) => wf.name = Some(s.clone()),
            Some(v) => p(format!("field `name`: expected a string, got {v}"), None),
        }
        match root.get("description") {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) => wf.description = s.clone(),
            Some(v) => p(
                format!("field `description`: expected a string, got {v}"),
                None,
            ),
        }
        match root.get("nodes") {
            // An interface-only file (seed 003 §2.3.1) still gives a tool schema.
            None | Some(Value::Null) => {}
            Some(Value::Array(items)) => {
                for (i, item) in items.iter().enumerate() {
                    match read_node(item, i, text) {
                        Ok(mut n) => {
                            n.line = item_line("nodes", i).or(n.line);
                            wf.nodes.push(n)
                        }
                        Err((msg, line)) => p(msg, item_line("nodes", i).or(line)),
                    }
                }
            }
            Some(v) => p(
                format!("field `nodes`: expected an array, got {}", kind(v)),
                None,
            ),
        }
        match root.get("edges") {
            None | Some(Value::Null) => {}
            Some(Value::Array(items)) => {
                for (i, item) in items.iter().enumerate() {
                    match read_edge(item, i) {
                        Ok(e) => wf.edges.push(e),
                        Err(msg) => p(msg, item_line("edges", i)),
                    }
                }
            }
            Some(v) => p(
                format!("field `edges`: expected an array, got {}", kind(v)),
                None,
            ),
        }
        for (field, target) in [
            ("interfaceInputs", &mut wf.interface_inputs),
            ("interfaceOutputs", &mut wf.interface_outputs),
        ] {
            match root.get(field) {
                None | Some(Value::Null) => {}
                Some(Value::Object(m)) => {
                    for (k, v) in m {
                        match serde_json::from_value::<SlotDefinition>(v.clone()) {
                            Ok(slot) => target.insert(k.clone(), slot),
                            Err(e) => p(
                                format!("field `{field}.{k}`: {e}"),
                                find_line(text, &format!("\"{k}\"")),
                            ),
                        }
                    }
                }
                Some(v) => p(
                    format!(
                        "field `{field}`: expected an object of slots, got {}",
                        kind(v)
                    ),
                    None,
                ),
            }
        }
        if problems.is_empty() {
            Ok(wf)
        } else {
            Err(problems)
        }
    }
}

/// Top-level keys of a workflow file: tavern's (`id`, `name`, `description`, `nodes`,
/// `edges`, the interface) and the ones ComfyTavern's editor stores, which tavern ignores.
pub const WORKFLOW_KEYS: &[&str] = &[
    "id",
    "name",
    "description",
    "nodes",
    "edges",
    "interfaceInputs",
    "interfaceOutputs",
    // Editor state, kept by ComfyTavern and ignored here.
    "viewport",
    "groups",
    "referencedWorkflows",
    "createdAt",
    "updatedAt",
    "version",
    "creatorId",
    "tags",
    "previewTarget",
];

/// Keys of a node: tavern reads `id`, `type`, `inputValues`, `configValues`,
/// `inputConnectionOrders`; the rest is editor state.
pub const NODE_KEYS: &[&str] = &[
    "id",
    "type",
    "inputValues",
    "configValues",
    "inputConnectionOrders",
    "position",
    "displayName",
    "customDescription",
    "customSlotDescriptions",
    "width",
    "height",
    "size",
    "label",
    "data",
];

/// Keys of an edge: tavern reads `id`, `source`, `sourceHandle`, `target`, `targetHandle`;
/// the rest is editor state.
pub const EDGE_KEYS: &[&str] = &[
    "id",
    "source",
    "sourceHandle",
    "target",
    "targetHandle",
    "type",
    "data",
    "label",
    "animated",
    "markerEnd",
];

/// The keys a slot definition may hold: [`SlotDefinition`]'s fields plus the editor-only
/// ones ComfyTavern writes beside them.
pub fn slot_shape() -> crate::strict::Shape {
    crate::strict::Shape::of::<SlotDefinition>().also(&[
        "allowDynamicType",
        "hideHandle",
        "showReceivedValue",
    ])
}

/// The keys a workflow file may hold (see [`crate::strict`]).
pub fn shape() -> crate::strict::Shape {
    use crate::strict::Shape;
    let slots = Shape::Values(Box::new(slot_shape()));
    Shape::keys(WORKFLOW_KEYS)
        .child("nodes", Shape::keys(NODE_KEYS).seq())
        .child("edges", Shape::keys(EDGE_KEYS).seq())
        .child("interfaceInputs", slots.clone())
        .child("interfaceOutputs", slots)
}

/// Whether `s` is acceptable as a workflow id.
pub fn is_valid_id(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The 1-based line of the first occurrence of `needle`, as a pointer for people.
fn find_line(text: &str, needle: &str) -> Option<u32> {
    let at = text.find(needle)?;
    Some(memchr::memchr_iter(b'\n', &text.as_bytes()[..at]).count() as u32 + 1)
}

fn read_node(
    item: &Value,
    index: usize,
    text: &str,
) -> Result<WorkflowNode, (String, Option<u32>)> {
    let Value::Object(m) = item else {
        return Err((
            format!("nodes[{index}]: expected an object, got {}", kind(item)),
            None,
        ));
    };
    let id = match m.get("id") {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        Some(v) => {
            return Err((
                format!("nodes[{index}]: field `id`: expected a non-empty string, got {v}"),
                None,
            ))
        }
        None => return Err((format!("nodes[{index}]: field `id` is missing"), None)),
    };
    let line = find_line(text, &format!("\"{id}\""));
    let at = |field: &str, msg: String| (format!("node '{id}': field `{field}`: {msg}"), line);
    let node_type = match m.get("type") {
        Some(Value::String(s)) if s.contains(':') => s.clone(),
        Some(Value::String(s)) => {
            return Err(at(
                "type",
                format!("'{s}' has no namespace; write it as `namespace:Type` (e.g. `core:{s}`)"),
            ))
        }
        Some(v) => return Err(at("type", format!("expected a string, got {}", kind(v)))),
        None => return Err(at("type", "is missing".into())),
    };
    let object = |field: &str| -> Result<Map<String, Value>, (String, Option<u32>)> {
        match m.get(field) {
            None | Some(Value::Null) => Ok(Map::new()),
            Some(Value::Object(o)) => Ok(o.clone()),
            Some(v) => Err(at(field, format!("expected an object, got {}", kind(v)))),
        }
    };
    let input_values = object("inputValues")?;
    let config_values = object("configValues")?;
    let mut orders = OrderedMap::new();
    for (slot, v) in object("inputConnectionOrders")? {
        let ids = v
            .as_array()
            .and_then(|a| {
                a.iter()
                    .map(|x| x.as_str().map(str::to_string))
                    .collect::<Option<Vec<_>>>()
            })
            .ok_or_else(|| {
                at(
                    &format!("inputConnectionOrders.{slot}"),
                    format!("expected an array of edge ids, got {v}"),
                )
            })?;
        orders.insert(slot, ids);
    }
    Ok(WorkflowNode {
        id,
        node_type,
        input_values,
        config_values,
        position: m.get("position").cloned(),
        input_connection_orders: orders,
        line,
    })
}

fn read_edge(item: &Value, index: usize) -> Result<WorkflowEdge, String> {
    let Value::Object(m) = item else {
        return Err(format!(
            "edges[{index}]: expected an object, got {}",
            kind(item)
        ));
    };
    let name = m
        .get("id")
        .and_then(Value::as_str)
        .map(|s| format!("edge '{s}'"))
        .unwrap_or_else(|| format!("edges[{index}]"));
    let field = |f: &str| -> Result<String, String> {
        match m.get(f) {
            Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
            Some(Value::Number(n)) => Ok(n.to_string()),
            Some(v) => Err(format!(
                "{name}: field `{f}`: expected a non-empty string, got {v}"
            )),
            None => Err(format!("{name}: field `{f}` is missing")),
        }
    };
    Ok(WorkflowEdge {
        id: m.get("id").and_then(Value::as_str).map(str::to_string),
        source: field("source")?,
        source_handle: field("sourceHandle")?,
        target: field("target")?,
        target_handle: field("targetHandle")?,
    })
}
