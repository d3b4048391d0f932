//! Plugin nodes: `nodes/*.node.json` files (a ComfyTavern node definition plus the script
//! function that carries it out) and the [`NodeExecutor`] running that function in the
//! plugin's own sandbox.
//!
//! A node file is a node definition (`type`, `displayName`, `description`, `category`,
//! `inputs`, `outputs`, `configSchema`) with two more keys: `script` (optional: the `.lua` or
//! `.rhai` file, relative to the plugin directory) and `function`. The function is called like
//! a tool handler, `f(node, ctx)`, with `node = {inputs = {...}, config = {...}}`; it returns
//! a table/map of outputs by slot name (or a bare value when the node has exactly one output).

use std::path::{Path, PathBuf};
use std::sync::Weak;

use serde_json::{json, Map, Value};

use super::tool_file::{self, problem_at_key};
use crate::problem::Problem;
use crate::script::{CallInfo, ExecMode, PluginScripts, ScriptToolHandler};
use crate::tools::{CallContext, ToolError, ToolHandler, ToolManager};
use crate::workflow::{NodeContext, NodeDefinition, NodeError, NodeExecutor, NodeFuture};

/// Suffix of node definition files.
pub const NODE_SUFFIX: &str = ".node.json";

/// The keys a node file may hold: a [`NodeDefinition`] (slots by their struct) plus
/// `script` and `function` (see `src/strict.rs`).
pub fn shape() -> crate::strict::Shape {
    use crate::strict::Shape;
    let slots = Shape::Values(Box::new(crate::workflow::slot_shape()));
    Shape::of::<NodeDefinition>()
        .also(&["script", "function"])
        .child("inputs", slots.clone())
        .child("outputs", slots.clone())
        .child("configSchema", slots)
}

/// A node file as read from disk: the definition (type already `Plugin:Type`) and the
/// function behind it.
#[derive(Debug, Clone)]
pub struct NodeFile {
    /// Where it is.
    pub path: PathBuf,
    /// Its text (to place later problems).
    pub text: String,
    /// The definition, `node_type` namespaced with the plugin.
    pub definition: NodeDefinition,
    /// The script file named by `script`, if any (relative to the plugin directory).
    pub script: Option<String>,
    /// The function carrying the node out.
    pub function: String,
}

/// The `*.node.json` files in `dir`, sorted by name.
pub fn list(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    super::files_ending_with(dir, NODE_SUFFIX)
}

/// Reads one node file of plugin `plugin`. JSON errors carry line and column; a type outside
/// the plugin's namespace or a missing `function` is a problem at its key.
pub fn read(plugin: &str, path: &Path) -> Result<NodeFile, Problem> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Problem::new(path, format!("cannot read: {e}")))?;
    parse(plugin, &text, path)
}

/// Parses node file text (see [`read`]).
pub fn parse(plugin: &str, text: &str, path: &Path) -> Result<NodeFile, Problem> {
    let at = |key: &str, msg: String| problem_at_key(path, text, key, msg);
    if let Some(doc) = crate::strict::locate_json(text) {
        let ps: Vec<Problem> = crate::strict::unknown_keys(&doc, &shape())
            .iter()
            .map(|u| u.problem(path, "node definition"))
            .collect();
        if let Some(p) = crate::strict::merge(ps) {
            return Err(p);
        }
    }
    let doc: Value = serde_json::from_str(text).map_err(|e| {
        let mut msg = e.to_string();
        if let Some(i) = msg.find(" at line ") {
            msg.truncate(i);
        }
        let p = Problem::new(path, format!("invalid node definition: {msg}"));
        if e.line() > 0 {
            p.at(e.line() as u32, Some(e.column() as u32))
        } else {
            p
        }
    })?;
    let Value::Object(mut map) = doc else {
        return Err(Problem::new(path, "a node file holds one JSON object"));
    };
    let script = match map.remove("script") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s),
        Some(other) => {
            return Err(at(
                "script",
                format!("`script` must be a file name, got {other}"),
            ))
        }
    };
    let function = match map.remove("function") {
        Some(Value::String(s)) if !s.trim().is_empty() => s,
        Some(other) => {
            return Err(at("function", format!("`function` must be a function name, got {other}")))
        }
        None => {
            return Err(Problem::new(path, "node definition has no `function`").hint(
                "add \"function\": \"name\" (and \"script\": \"main.lua\") naming the Lua/Rhai function that runs the node",
            ))
        }
    };
    let mut definition: NodeDefinition = serde_json::from_value(Value::Object(map))
        .map_err(|e| Problem::new(path, format!("invalid node definition: {e}")))?;
    if let Some(ns) = definition.namespace.take() {
        if ns != plugin {
            return Err(at(
                "namespace",
                format!("node namespace '{ns}' is not plugin '{plugin}': a plugin's nodes live in its own namespace"),
            ));
        }
    }
    definition.node_type = tool_file::normalise_id(plugin, &definition.node_type).map_err(|e| {
        at(
            "type",
            format!("node {}", e.to_string().replacen("tool id", "type", 1)),
        )
    })?;
    Ok(NodeFile {
        path: path.to_path_buf(),
        text: text.to_string(),
        definition,
        script,
        function,
    })
}

/// Runs a plugin node: the plugin's script function, off the async workers (through the
/// script module's [`ScriptToolHandler`]: Lua on `spawn_blocking`, Rhai on the plugin's
/// dedicated thread). Neither blocks the node's task, so a per-node timeout fires on time;
/// dropping the node (timeout) cancels the script, which then stops at its next budget check.
pub struct ScriptNodeExecutor {
    scripts: PluginScripts,
    function: String,
    /// Made once: choosing its execution mode looks into the Lua state, which must not wait
    /// behind a running call of the same plugin.
    handler: ScriptToolHandler,
    definition: NodeDefinition,
    /// The registry nested `api.tools.call`s use when the run has none (weak: the registry
    /// owns the workflow tools that own this executor).
    manager: Weak<ToolManager>,
}

impl ScriptNodeExecutor {
    /// An executor calling `function` of `scripts` for node type `definition`.
    pub fn new(
        scripts: PluginScripts,
        function: impl Into<String>,
        definition: NodeDefinition,
        manager: Weak<ToolManager>,
    ) -> Self {
        let function = function.into();
        ScriptNodeExecutor {
            handler: {
                let h = scripts.handler(function.clone());
                // `block_in_place` would hold the node's task inside one poll, out of reach
                // of the per-node timeout.
                if h.effective_mode() == ExecMode::InPlace {
                    h.with_mode(ExecMode::Blocking)
                } else {
                    h
                }
            },
            scripts,
            function,
            definition,
            manager,
        }
    }
}

/// The script's return value as node outputs.
fn outputs_of(def: &NodeDefinition, value: Value) -> Result<Map<String, Value>, NodeError> {
    let declared: Vec<&str> = def.outputs.keys().collect();
    match value {
        Value::Null => Ok(Map::new()),
        Value::Object(m) if m.keys().all(|k| def.outputs.get(k).is_some()) => Ok(m),
        Value::Object(m) if declared.len() != 1 => {
            let unknown: Vec<&str> = m
                .keys()
                .filter(|k| def.outputs.get(k).is_none())
                .map(String::as_str)
                .collect();
            Err(NodeError::Failed(format!(
                "node function returned output(s) {} that {} does not declare (outputs: {})",
                unknown.join(", "),
                def.node_type,
                declared.join(", ")
            )))
        }
        // One declared output: a bare value (or an object not keyed by it) is that output.
        other if declared.len() == 1 => Ok(Map::from_iter([(declared[0].to_string(), other)])),
        other => Err(NodeError::Failed(format!(
            "node function must return a table/map of outputs ({}), got {other}",
            declared.join(", ")
        ))),
    }
}

impl NodeExecutor for ScriptNodeExecutor {
    fn execute(
        &self,
        ctx: NodeContext,
        inputs: Map<String, Value>,
        config: Map<String, Value>,
    ) -> NodeFuture {
        let node_type = self.definition.node_type.clone();
        let definition = self.definition.clone();
        let args = json!({ "inputs": inputs, "config": config });
        let manager = ctx.tools().cloned().or_else(|| self.manager.upgrade());
        let scripts = self.scripts.clone();
        let function = self.function.clone();
        let handler = self.handler.clone();
        // Cancelled when the node's future is dropped (per-node timeout) or the run stops.
        let cancel = ctx.cancel().child_token();
        Box::pin(async move {
            let _stop_on_drop = cancel.clone().drop_guard();
            let value = match manager {
                Some(manager) => {
                    let call = CallContext::within(
                        node_type.as_str(),
                        ctx.caller().clone(),
                        manager,
                        ctx.depth(),
                        cancel.clone(),
                    )
                    .with_observer(ctx.observer().clone());
                    handler.invoke(call, args).await
                }
                None => {
                    let info = CallInfo {
                        cancel: cancel.clone(),
                        caller: ctx.caller().clone(),
                        depth: ctx.depth(),
                        observer: ctx.observer().clone(),
                        ..CallInfo::host(node_type.clone())
                    };
                    let t = node_type.clone();
                    tokio::task::spawn_blocking(move || {
                        scripts
                            .call(&function, args, &info)
                            .map_err(|e| e.into_tool_error(&t))
                    })
                    .await
                    .map_err(|e| NodeError::Panicked(e.to_string()))?
                }
            };
            let value = value.map_err(|e: ToolError| NodeError::Tool(Box::new(e)))?;
            outputs_of(&definition, value)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_files_parse_or_point_at_the_problem() {
        let cases: &[(&str, Result<&str, &str>)] = &[
            (
                r#"{"type": "Shout", "function": "shout", "outputs": {"text": {"dataFlowType": "STRING"}}}"#,
                Ok("P:Shout"),
            ),
            (r#"{"type": "P:Shout", "function": "f"}"#, Ok("P:Shout")),
            (
                r#"{"type": "Shout", "namespace": "P", "function": "f"}"#,
                Ok("P:Shout"),
            ),
            (
                r#"{"type": "Q:Shout", "function": "f"}"#,
                Err("outside plugin 'P'"),
            ),
            (
                r#"{"type": "Shout", "namespace": "Q", "function": "f"}"#,
                Err("is not plugin 'P'"),
            ),
            (r#"{"type": "Shout"}"#, Err("no `function`")),
            (
                r#"{"type": "Shout", "function": 3}"#,
                Err("must be a function name"),
            ),
            (
                "{\n  \"type\": \"Shout\",\n  oops\n}",
                Err("invalid node definition"),
            ),
            (r#"[1]"#, Err("one JSON object")),
            (
                r#"{"type": "Shout", "function": "f", "inputs": {"a": {"dataFlowType": "NOPE"}}}"#,
                Err("invalid node definition"),
            ),
        ];
        for (text, want) in cases {
            match (parse("P", text, Path::new("x.node.json")), want) {
                (Ok(n), Ok(t)) => assert_eq!(n.definition.node_type, *t),
                (Err(p), Err(w)) => assert!(p.message.contains(w), "{text}: {p}"),
                (got, want) => panic!("{text}: {got:?} vs {want:?}"),
            }
        }
    }

    #[test]
    fn returned_values_become_outputs() {
        let one: NodeDefinition = serde_json::from_value(
            json!({"type": "P:A", "outputs": {"text": {"dataFlowType": "STRING"}}}),
        )
        .unwrap();
        let two: NodeDefinition = serde_json::from_value(json!({"type": "P:B", "outputs": {
            "a": {"dataFlowType": "STRING"}, "b": {"dataFlowType": "STRING"}}}))
        .unwrap();
        let cases: Vec<(&NodeDefinition, Value, Result<Value, &str>)> = vec![
            (&one, json!({"text": "x"}), Ok(json!({"text": "x"}))),
            (&one, json!("x"), Ok(json!({"text": "x"}))),
            (&one, json!({"other": 1}), Ok(json!({"text": {"other": 1}}))),
            (&one, Value::Null, Ok(json!({}))),
            (&two, json!({"a": "1"}), Ok(json!({"a": "1"}))),
            (&two, json!({"c": "1"}), Err("does not declare")),
            (&two, json!("x"), Err("table/map of outputs")),
        ];
        for (def, v, want) in cases {
            match (outputs_of(def, v.clone()), want) {
                (Ok(m), Ok(w)) => assert_eq!(Value::Object(m), w),
                (Err(e), Err(w)) => assert!(e.to_string().contains(w), "{v}: {e}"),
                (got, want) => panic!("{v}: {got:?} vs {want:?}"),
            }
        }
    }
}
