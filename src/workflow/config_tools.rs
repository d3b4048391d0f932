//! Seed 004's config-driven tools: `<home>/config/tools.json` turns workflows into tools by
//! writing each argument into a named node's input (no `core:GroupInput` needed).
//!
//! ```json
//! {"tools": [{"name": "txt2img_portrait", "description": "…", "workflow": "portrait.json",
//!   "fields": [
//!     {"name": "positive", "type": "string", "description": "…",
//!      "mapping": {"nodeId": 9, "field": "text"}},
//!     {"name": "seed", "type": "integer",
//!      "generation": {"strategy": "randomInt", "min": 1, "max": 999999999}}]}]}
//! ```
//!
//! Rules (where the seed is silent, decided here):
//! - The tool id is `name` as written (bare, like seed 002's host tools), so its wire name is
//!   the same `name` on every surface.
//! - `workflow` is a file relative to `<home>/config/`, then `<home>/workflows/`, or the id
//!   of a loaded workflow.
//! - A field with `mapping` writes its value into input `field` of node `nodeId` (a number or
//!   a string, compared as text). A field without `mapping` writes into every node whose
//!   type has an input of the field's name (seed 004's `seed`); none is a load problem.
//! - `generation` (`randomInt` with `min`/`max`, `uuid`, `now`) fills the field afresh on
//!   each call when the caller leaves it out.
//! - A field is required when it says `"required": true`; without the key, when it has no
//!   generation, no `default`, and the mapped input has no value in the workflow already.
//! - The schema is closed (`additionalProperties: false`).
//! - The result: the workflow's interface outputs when it has any (one output → the bare
//!   value); otherwise every output of the nodes whose outputs feed nothing, keyed
//!   `<nodeId>.<output>`.
//! - Every bad entry is a load problem naming the file, the line and the field; the other
//!   entries still load.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{json, Map, Value};

use super::compile::compile;
use super::format::{Workflow, WorkflowEdge, WorkflowNode, GROUP_INPUT, GROUP_OUTPUT};
use super::library::Workflows;
use super::types::OrderedMap;
use crate::problem::Problem;
use crate::tools::{
    CallContext, Implementation, ToolDefinition, ToolFuture, ToolHandler, ToolManager,
};

/// Where the config lives, relative to the home.
pub const CONFIG_FILE: &str = "config/tools.json";

/// How a missing field is generated.
#[derive(Debug, Clone, PartialEq)]
pub enum Generation {
    /// A random integer in `min..=max`.
    RandomInt {
        /// Smallest value.
        min: i64,
        /// Largest value.
        max: i64,
    },
    /// A random UUID v4 (text).
    Uuid,
    /// The current time, RFC 3339 (text).
    Now,
}

impl Generation {
    /// A fresh value.
    pub fn generate(&self) -> Value {
        match self {
            Generation::RandomInt { min, max } => json!(fastrand::i64(*min..=*max)),
            Generation::Uuid => json!(uuid::Uuid::new_v4().to_string()),
            Generation::Now => json!(chrono::Utc::now().to_rfc3339()),
        }
    }
}

/// Where one argument goes.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    /// Node id in the workflow.
    pub node: String,
    /// Input name on that node.
    pub input: String,
}

/// One argument of a config tool.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    /// Argument name.
    pub name: String,
    /// Its JSON Schema.
    pub schema: Value,
    /// Where it is written.
    pub targets: Vec<Target>,
    /// How it is filled when left out.
    pub generation: Option<Generation>,
    /// Whether callers must give it.
    pub required: bool,
    /// Value used when left out (and not generated).
    pub default: Option<Value>,
}

/// A loaded config tool.
#[derive(Debug, Clone)]
pub struct ConfigTool {
    /// The definition registered.
    pub definition: ToolDefinition,
    /// The template workflow (with a result sink added when it had none).
    pub workflow: Arc<Workflow>,
    /// The arguments.
    pub fields: Vec<Field>,
}

const TYPES: [&str; 6] = ["string", "integer", "number", "boolean", "object", "array"];

/// 1-based line of the first `"needle"` at or after byte `from`, and its offset.
fn line_of(text: &str, needle: &str, from: usize) -> (u32, usize) {
    let quoted = format!("\"{needle}\"");
    let at = text
        .get(from..)
        .and_then(|t| t.find(&quoted))
        .map(|i| i + from)
        .unwrap_or(from.min(text.len()));
    let line = text.as_bytes()[..at]
        .iter()
        .filter(|b| **b == b'\n')
        .count() as u32
        + 1;
    (line, at)
}

/// Reads `<home>/config/tools.json` and registers its tools. A missing file is no tools.
pub fn load(home: &Path, workflows: &Workflows, tools: &ToolManager) -> Vec<Problem> {
    let path = home.join(CONFIG_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
        Err(e) => return vec![Problem::new(&path, format!("cannot read: {e}"))],
    };
    let (loaded, mut problems) = parse(&text, &path, home, workflows);
    for t in loaded {
        let line = line_of(&text, &t.definition.id, 0).0;
        let id = t.definition.id.clone();
        if let Err(e) = tools.register(
            t.definition.clone(),
            Arc::new(ConfigHandler::new(t, workflows)),
        ) {
            problems.push(Problem::new(&path, format!("tool '{id}': {e}")).at(line, None));
        }
    }
    problems
}

/// Parses a config text into tools; bad entries become problems (file, line, field).
pub fn parse(
    text: &str,
    path: &Path,
    home: &Path,
    workflows: &Workflows,
) -> (Vec<ConfigTool>, Vec<Problem>) {
    let mut problems = Vec::new();
    let doc: Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => {
            return (
                Vec::new(),
                vec![Problem::new(path, format!("not valid JSON: {e}"))
                    .at(e.line() as u32, Some(e.column() as u32))],
            )
        }
    };
    let Some(entries) = doc.get("tools").and_then(Value::as_array) else {
        return (
            Vec::new(),
            vec![
                Problem::new(path, "field `tools`: expected an array of tool entries")
                    .at(1, None)
                    .hint(r#"write {"tools": [{"name": …, "workflow": …, "fields": […]}]}"#),
            ],
        );
    };
    let mut out = Vec::new();
    let mut cursor = 0;
    for (i, entry) in entries.iter().enumerate() {
        let name = entry.get("name").and_then(Value::as_str).unwrap_or("");
        let (line, at) = if name.is_empty() {
            line_of(text, "name", cursor)
        } else {
            line_of(text, name, cursor)
        };
        cursor = at + 1;
        let mut bad = |field: &str, msg: String, line: u32| {
            problems.push(
                Problem::new(path, format!("tools[{i}] field `{field}`: {msg}")).at(line, None),
            );
        };
        if name.is_empty() || crate::tools::id::validate_id(name).is_err() {
            bad(
                "name",
                format!(
                    "expected a tool name of letters, digits, `_`, `-` (got {:?})",
                    entry.get("name")
                ),
                line,
            );
            continue;
        }
        let Some(wf_ref) = entry.get("workflow").and_then(Value::as_str) else {
            bad("workflow", "expected the workflow file or id".into(), line);
            continue;
        };
        let workflow = match resolve_workflow(wf_ref, path, home, workflows) {
            Ok(w) => w,
            Err(m) => {
                bad("workflow", m, line_of(text, wf_ref, at).0);
                continue;
            }
        };
        let mut fields = Vec::new();
        let mut ok = true;
        let raw_fields = entry
            .get("fields")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let mut fcursor = at;
        for (j, f) in raw_fields.iter().enumerate() {
            let fname = f.get("name").and_then(Value::as_str).unwrap_or("");
            let (fline, fat) =
                line_of(text, if fname.is_empty() { "name" } else { fname }, fcursor);
            fcursor = fat + 1;
            match parse_field(f, &workflow, workflows) {
                Ok(field) => fields.push(field),
                Err((key, msg)) => {
                    ok = false;
                    bad(&format!("fields[{j}].{key}"), msg, fline);
                }
            }
        }
        if !ok {
            continue;
        }
        let mut props = Map::new();
        let mut required = Vec::new();
        for f in &fields {
            props.insert(f.name.clone(), f.schema.clone());
            if f.required {
                required.push(json!(f.name));
            }
        }
        let mut schema =
            json!({"type": "object", "properties": props, "additionalProperties": false});
        if !required.is_empty() {
            schema["required"] = Value::Array(required);
        }
        let description = entry
            .get("description")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| {
                if workflow.description.is_empty() {
                    format!("Runs workflow {}.", workflow.id)
                } else {
                    workflow.description.clone()
                }
            });
        let definition = ToolDefinition {
            id: name.to_string(),
            display_name: entry
                .get("title")
                .and_then(Value::as_str)
                .map(str::to_string),
            description,
            parameters: schema,
            implementation: Implementation::Workflow {
                workflow_id: workflow.id.clone(),
            },
            annotations: entry.get("annotations").cloned(),
            examples: Vec::new(),
        };
        out.push(ConfigTool {
            definition,
            workflow: Arc::new(with_result_sink(workflow, workflows)),
            fields,
        });
    }
    (out, problems)
}

fn resolve_workflow(
    r: &str,
    config_path: &Path,
    home: &Path,
    workflows: &Workflows,
) -> Result<Workflow, String> {
    let dir = config_path.parent().unwrap_or(home);
    let candidates: [PathBuf; 2] = [dir.join(r), home.join("workflows").join(r)];
    for c in &candidates {
        if c.is_file() {
            return Workflow::load(c).map_err(|ps| {
                ps.iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("; ")
            });
        }
    }
    if let Some(c) = workflows.get(r.trim_end_matches(".json")) {
        return Ok(c.workflow.clone());
    }
    Err(format!(
        "no workflow '{r}': looked for {} and {}, and for a loaded workflow with that id",
        candidates[0].display(),
        candidates[1].display()
    ))
}

fn parse_field(f: &Value, wf: &Workflow, workflows: &Workflows) -> Result<Field, (String, String)> {
    let err = |k: &str, m: String| (k.to_string(), m);
    let name = f
        .get("name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .ok_or_else(|| err("name", "expected the argument name".into()))?;
    let ty = f.get("type").and_then(Value::as_str).unwrap_or("string");
    if !TYPES.contains(&ty) {
        return Err(err(
            "type",
            format!("unknown type '{ty}' (expected one of {})", TYPES.join(", ")),
        ));
    }
    let mut schema = json!({"type": ty});
    if let Some(d) = f.get("description").and_then(Value::as_str) {
        schema["description"] = json!(d);
    }
    if let Some(e) = f.get("enum") {
        schema["enum"] = e.clone();
    }
    let generation = match f.get("generation") {
        None | Some(Value::Null) => None,
        Some(g) => Some(parse_generation(g, ty).map_err(|m| err("generation", m))?),
    };
    let default = f.get("default").cloned();
    if let Some(d) = &default {
        schema["default"] = d.clone();
    }
    let targets = match f.get("mapping") {
        Some(m) => {
            let node = match m.get("nodeId").or_else(|| m.get("node_id")) {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Number(n)) => n.to_string(),
                _ => {
                    return Err(err(
                        "mapping.nodeId",
                        "expected a node id (number or text)".into(),
                    ))
                }
            };
            let input = m
                .get("field")
                .and_then(Value::as_str)
                .ok_or_else(|| err("mapping.field", "expected the node input's name".into()))?
                .to_string();
            let Some(n) = wf.nodes.iter().find(|n| n.id == node) else {
                let ids: Vec<&str> = wf.nodes.iter().map(|n| n.id.as_str()).collect();
                return Err(err(
                    "mapping.nodeId",
                    format!(
                        "workflow '{}' has no node '{node}' (nodes: {})",
                        wf.id,
                        ids.join(", ")
                    ),
                ));
            };
            if let Some(reg) = workflows.registry().get(&n.node_type) {
                if reg.definition.inputs.get(&input).is_none() {
                    let known: Vec<&str> = reg.definition.inputs.keys().collect();
                    return Err(err(
                        "mapping.field",
                        format!(
                            "node '{node}' ({}) has no input '{input}' (inputs: {})",
                            n.node_type,
                            known.join(", ")
                        ),
                    ));
                }
            }
            vec![Target { node, input }]
        }
        None => {
            let t: Vec<Target> = wf
                .nodes
                .iter()
                .filter(|n| {
                    workflows
                        .registry()
                        .get(&n.node_type)
                        .is_some_and(|r| r.definition.inputs.get(name).is_some())
                })
                .map(|n| Target {
                    node: n.id.clone(),
                    input: name.to_string(),
                })
                .collect();
            if t.is_empty() {
                return Err(err(
                    "mapping",
                    format!("no mapping, and no node of workflow '{}' has an input '{name}'; add \"mapping\": {{\"nodeId\": …, \"field\": …}}", wf.id),
                ));
            }
            t
        }
    };
    let preset = targets.iter().all(|t| {
        wf.nodes.iter().find(|n| n.id == t.node).is_some_and(|n| {
            n.input_values
                .get(&t.input)
                .is_some_and(|v| !v.is_null() && v != "")
        })
    });
    let required = match f.get("required") {
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(err("required", "expected true or false".into())),
        None => generation.is_none() && default.is_none() && !preset,
    };
    if let Some(g) = &generation {
        let extra = match g {
            Generation::RandomInt { .. } => "random when omitted",
            Generation::Uuid => "a fresh UUID when omitted",
            Generation::Now => "the current time when omitted",
        };
        let d = schema
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        schema["description"] = json!(if d.is_empty() {
            extra.to_string()
        } else {
            format!("{d} ({extra})")
        });
    }
    Ok(Field {
        name: name.to_string(),
        schema,
        targets,
        generation,
        required,
        default,
    })
}

fn parse_generation(g: &Value, ty: &str) -> Result<Generation, String> {
    let strategy = g.get("strategy").and_then(Value::as_str).unwrap_or("");
    match strategy {
        "randomInt" | "random_int" => {
            if ty != "integer" && ty != "number" {
                return Err(format!(
                    "randomInt fills numbers, but the field's type is {ty}"
                ));
            }
            let min = g
                .get("min")
                .map_or(Some(0), Value::as_i64)
                .ok_or("`min` must be an integer")?;
            let max = g
                .get("max")
                .map_or(Some(i64::from(i32::MAX)), Value::as_i64)
                .ok_or("`max` must be an integer")?;
            if min > max {
                return Err(format!("`min` ({min}) is larger than `max` ({max})"));
            }
            Ok(Generation::RandomInt { min, max })
        }
        "uuid" => Ok(Generation::Uuid),
        "now" => Ok(Generation::Now),
        other => Err(format!(
            "unknown strategy '{other}' (expected randomInt, uuid or now)"
        )),
    }
}

/// Adds a `core:GroupOutput` fed by every output of the sink nodes when the workflow has
/// no interface outputs, so a run has a result.
fn with_result_sink(mut wf: Workflow, workflows: &Workflows) -> Workflow {
    if !wf.interface_outputs.is_empty() || wf.nodes.iter().any(|n| n.node_type == GROUP_OUTPUT) {
        return wf;
    }
    let feeding: std::collections::HashSet<&str> =
        wf.edges.iter().map(|e| e.source.as_str()).collect();
    let mut outputs = OrderedMap::new();
    let mut edges = Vec::new();
    for n in &wf.nodes {
        if feeding.contains(n.id.as_str()) || n.node_type == GROUP_INPUT {
            continue;
        }
        let Some(reg) = workflows.registry().get(&n.node_type) else {
            continue;
        };
        for (k, slot) in reg.definition.outputs.iter() {
            let key = format!("{}.{k}", n.id);
            outputs.insert(key.clone(), slot.clone());
            edges.push(WorkflowEdge::new(&n.id, k, "__result", &key));
        }
    }
    if outputs.is_empty() {
        return wf;
    }
    wf.nodes.push(WorkflowNode::new("__result", GROUP_OUTPUT));
    wf.edges.extend(edges);
    wf.interface_outputs = outputs;
    wf
}

struct ConfigHandler {
    tool: ConfigTool,
    workflows_registry: Arc<super::registry::NodeRegistry>,
    defaults: super::library::RunDefaults,
    hooks: Option<Arc<crate::hooks::Hooks>>,
}

impl ConfigHandler {
    fn new(tool: ConfigTool, workflows: &Workflows) -> Self {
        ConfigHandler {
            tool,
            workflows_registry: workflows.registry().clone(),
            defaults: workflows.defaults(),
            hooks: workflows.hooks().cloned(),
        }
    }
}

impl ToolHandler for ConfigHandler {
    fn invoke(&self, ctx: CallContext, args: Value) -> ToolFuture {
        let tool = self.tool.clone();
        let registry = self.workflows_registry.clone();
        let defaults = self.defaults;
        let hooks = self.hooks.clone();
        Box::pin(async move {
            let mut args = match args {
                Value::Object(m) => m,
                _ => Map::new(),
            };
            let mut wf: Workflow = (*tool.workflow).clone();
            for f in &tool.fields {
                let v = match args.remove(&f.name) {
                    Some(v) => v,
                    None => match (&f.generation, &f.default) {
                        (Some(g), _) => g.generate(),
                        (None, Some(d)) => d.clone(),
                        (None, None) => continue,
                    },
                };
                for t in &f.targets {
                    if let Some(n) = wf.nodes.iter_mut().find(|n| n.id == t.node) {
                        n.input_values.insert(t.input.clone(), v.clone());
                    }
                }
            }
            let plan = compile(&wf, &registry).map_err(|e| e.into_tool_error(&ctx.tool_id))?;
            let opts = super::library::options_for(defaults, hooks, &ctx);
            let mut outputs = async { plan.run(Map::new(), opts).await?.into_outputs() }
                .await
                .map_err(|e| e.into_tool_error(&ctx.tool_id))?;
            if plan.interface_outputs.len() == 1 {
                let key = plan.interface_outputs.0[0].0.clone();
                return Ok(outputs.remove(&key).unwrap_or(Value::Null));
            }
            Ok(Value::Object(outputs))
        })
    }
}
