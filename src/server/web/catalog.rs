//! The explorer's read-only JSON: tools with what the prompt manuals say of them, workflows
//! as laid-out graphs, plugins with their problems, and an SSE stream of engine reloads.
//!
//! Every description, parameter list and example comes from the generators the prompts
//! use ([`Tool::manual_entry`], [`tam_example`], [`action_example`]): one source of truth.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path as UrlPath, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::Json;
use serde_json::{json, Map, Value};

use super::super::export::input_schema;
use super::super::rest::ApiError;
use super::super::Served;
use crate::agent::{action_example, tam_example};
use crate::plugins::Plugin;
use crate::problem::Problem;
use crate::tools::{Implementation, Tool};
use crate::workflow::{workflow_tool_id, CompiledWorkflow, Workflow};
use crate::Engine;

/// Which plugin registered each tool id.
fn owners(engine: &Engine) -> HashMap<String, String> {
    let mut m = HashMap::new();
    for p in engine.plugins().list() {
        for t in &p.tools {
            m.insert(t.clone(), p.name().to_string());
        }
    }
    m
}

/// The annotation hints a tool sets to `true` (`readOnlyHint` …), for the search filter.
fn hints(tool: &Tool) -> Vec<String> {
    match &tool.definition.annotations {
        Some(Value::Object(m)) => m
            .iter()
            .filter(|(_, v)| v.as_bool() == Some(true))
            .map(|(k, _)| k.clone())
            .collect(),
        _ => Vec::new(),
    }
}

/// One tool as the explorer shows it. `plugin` is the plugin that registered it, else the
/// id's namespace (`system`, `workflow`).
pub fn tool_entry(tool: &Tool, owners: &HashMap<String, String>) -> Value {
    let d = &tool.definition;
    let plugin = owners
        .get(&d.id)
        .cloned()
        .or_else(|| d.namespace().map(str::to_string));
    let mut m = Map::new();
    m.insert("id".into(), json!(d.id));
    m.insert("name".into(), json!(tool.wire_name()));
    m.insert(
        "displayName".into(),
        json!(d.display_name.as_deref().unwrap_or(&d.id)),
    );
    m.insert("description".into(), json!(d.description));
    m.insert("kind".into(), json!(d.implementation.kind()));
    m.insert("plugin".into(), json!(plugin));
    m.insert(
        "annotations".into(),
        d.annotations.clone().unwrap_or(Value::Object(Map::new())),
    );
    m.insert("hints".into(), json!(hints(tool)));
    m.insert("inputSchema".into(), input_schema(tool));
    m.insert("manual".into(), json!(tool.manual_entry()));
    m.insert("tamExample".into(), json!(tam_example(tool)));
    m.insert("actionExample".into(), json!(action_example(tool)));
    if !d.examples.is_empty() {
        m.insert("examples".into(), Value::Array(d.examples.clone()));
    }
    match &d.implementation {
        Implementation::Workflow { workflow_id } => {
            m.insert("workflow".into(), json!(workflow_id));
        }
        Implementation::Node { node_type } => {
            m.insert("nodeType".into(), json!(node_type));
        }
        _ => {}
    }
    Value::Object(m)
}

/// Every tool of `engine` as [`tool_entry`], in the registry's order.
pub fn catalog(engine: &Engine) -> Vec<Value> {
    let owners = owners(engine);
    engine
        .tools()
        .list()
        .iter()
        .map(|t| tool_entry(t, &owners))
        .collect()
}

/// `GET /api/catalog`: every tool, `{"tools": [...], "generation"}`.
pub async fn list_tools(State(served): State<Arc<Served>>) -> Json<Value> {
    Json(json!({"tools": catalog(&served.engine()), "generation": served.generation()}))
}

/// `GET /api/catalog/{id}`: one tool (either spelling of its id); 404 `unknown_tool` with
/// close ids otherwise.
pub async fn get_tool(
    State(served): State<Arc<Served>>,
    UrlPath(id): UrlPath<String>,
) -> Result<Json<Value>, ApiError> {
    let engine = served.engine();
    let tool = engine.tools().get(&id).map_err(|e| {
        let suggestions = match &e {
            crate::tools::ToolError::UnknownTool { suggestion, .. } => suggestion.clone(),
            _ => None,
        };
        ApiError::new(StatusCode::NOT_FOUND, e.variant_code(), e.to_string()).suggest(suggestions)
    })?;
    Ok(Json(tool_entry(&tool, &owners(&engine))))
}

/// Layer of every node: 0 for nodes nothing feeds, else one more than its deepest source
/// (longest path), so edges always point to a later layer.
pub fn layers(wf: &Workflow) -> HashMap<String, usize> {
    let mut layer: HashMap<String, usize> = wf.nodes.iter().map(|n| (n.id.clone(), 0)).collect();
    // A compiled workflow is acyclic; the bound keeps a malformed one from looping.
    for _ in 0..wf.nodes.len() {
        let mut changed = false;
        for e in &wf.edges {
            let from = layer.get(&e.source).copied().unwrap_or(0);
            if let Some(to) = layer.get_mut(&e.target) {
                if *to < from + 1 {
                    *to = from + 1;
                    changed = true;
                }
            }
        }
        if !changed {
            break;
        }
    }
    layer
}

fn workflow_summary(c: &CompiledWorkflow, engine: &Engine) -> Value {
    let wf = &c.workflow;
    let tool = workflow_tool_id(&wf.id);
    json!({
        "id": wf.id,
        "name": wf.name.as_deref().unwrap_or(&wf.id),
        "description": wf.description,
        "nodes": wf.nodes.len(),
        "edges": wf.edges.len(),
        "tool": engine.tools().find(&tool).map(|_| tool),
        "source": wf.source.as_ref().map(|p| p.display().to_string()),
    })
}

/// `GET /api/workflows`: `{"workflows": [{id, name, description, nodes, edges, tool,
/// source}]}`.
pub async fn list_workflows(State(served): State<Arc<Served>>) -> Json<Value> {
    let engine = served.engine();
    let mut list: Vec<Value> = engine
        .workflows()
        .list()
        .iter()
        .map(|c| workflow_summary(c, &engine))
        .collect();
    list.sort_by(|a, b| a["id"].as_str().cmp(&b["id"].as_str()));
    Json(json!({"workflows": list}))
}

/// `GET /api/workflows/{id}`: the graph (nodes with their layer, edges with their slots),
/// the interface, and the tool that runs it with its parameter schema.
pub async fn get_workflow(
    State(served): State<Arc<Served>>,
    UrlPath(id): UrlPath<String>,
) -> Result<Json<Value>, ApiError> {
    let engine = served.engine();
    let bare = id.strip_prefix("workflow:").unwrap_or(&id);
    let Some(c) = engine.workflows().get(bare) else {
        let ids = engine.workflows().ids();
        let mut close: Vec<(f64, String)> = ids
            .iter()
            .map(|i| (strsim::jaro_winkler(i, bare), i.clone()))
            .filter(|(s, _)| *s > 0.7)
            .collect();
        close.sort_by(|a, b| b.0.total_cmp(&a.0));
        let why = engine
            .workflows()
            .failure(bare)
            .map(|f| format!(" (it failed to load: {f})"))
            .unwrap_or_default();
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "unknown_workflow",
            format!("no workflow '{bare}' is loaded{why}"),
        )
        .suggest(close.into_iter().map(|(_, i)| i)));
    };
    let wf = &c.workflow;
    let layer = layers(wf);
    let nodes: Vec<Value> = wf
        .nodes
        .iter()
        .map(|n| {
            json!({
                "id": n.id,
                "type": n.node_type,
                "layer": layer.get(&n.id).copied().unwrap_or(0),
                "line": n.line,
                "inputValues": n.input_values,
                "configValues": n.config_values,
            })
        })
        .collect();
    let edges: Vec<Value> = wf
        .edges
        .iter()
        .map(|e| {
            json!({
                "id": e.id,
                "source": e.source,
                "sourceHandle": e.source_handle,
                "target": e.target,
                "targetHandle": e.target_handle,
            })
        })
        .collect();
    let mut v = workflow_summary(&c, &engine);
    let tool = engine.tools().find(&workflow_tool_id(&wf.id));
    if let Some(m) = v.as_object_mut() {
        m.insert("nodes".into(), Value::Array(nodes));
        m.insert("edges".into(), Value::Array(edges));
        m.insert("interfaceInputs".into(), json!(wf.interface_inputs));
        m.insert("interfaceOutputs".into(), json!(wf.interface_outputs));
        m.insert("order".into(), json!(c.plan.topological_order()));
        m.insert(
            "inputSchema".into(),
            tool.as_ref()
                .map(|t| input_schema(t))
                .unwrap_or(Value::Null),
        );
    }
    Ok(Json(v))
}

fn problem_json(p: &Problem) -> Value {
    json!({
        "file": p.file.display().to_string(),
        "line": p.line,
        "column": p.column,
        "message": p.message,
        "hint": p.hint,
        "text": p.to_string(),
    })
}

/// `p` made absolute and normalized without touching the file system when it cannot be
/// canonicalized (a file that was deleted since).
fn absolute(p: &Path, home: &Path) -> PathBuf {
    let joined = if p.is_absolute() {
        p.to_path_buf()
    } else {
        home.join(p)
    };
    std::fs::canonicalize(&joined)
        .unwrap_or_else(|_| crate::plugins::permissions::normalize(&joined))
}

fn plugin_json(p: &Plugin, problems: Vec<Value>) -> Value {
    let m = &p.manifest;
    json!({
        "name": p.name(),
        "status": "loaded",
        "displayName": m.display_name.as_deref().unwrap_or(&m.name),
        "version": m.version,
        "description": m.description,
        "dir": p.dir.display().to_string(),
        "manifest": p.manifest_file.display().to_string(),
        "permissions": m.permissions,
        "tools": p.tools,
        "nodes": p.nodes,
        "workflows": p.workflows,
        "problems": problems,
    })
}

/// The plugins and the load problems: each problem goes to the plugin whose directory holds
/// its file; a directory under `<home>/plugins` that holds problems but no loaded plugin is
/// a failed plugin; the rest are `other` problems (workflows, config).
pub fn plugins_json(engine: &Engine, generation: usize) -> Value {
    let home = absolute(engine.home(), Path::new("/"));
    let plugins_root = absolute(&home.join("plugins"), &home);
    let loaded: Vec<(PathBuf, &Arc<Plugin>)> = engine
        .plugins()
        .list()
        .iter()
        .map(|p| (absolute(&p.dir, &home), p))
        .collect();
    let mut by_plugin: HashMap<String, Vec<Value>> = HashMap::new();
    let mut failed: BTreeMap<String, (PathBuf, Vec<Value>)> = BTreeMap::new();
    let mut other = Vec::new();
    for pr in engine.problems() {
        let file = absolute(&pr.file, &home);
        if let Some((_, p)) = loaded.iter().find(|(dir, _)| file.starts_with(dir)) {
            by_plugin
                .entry(p.name().to_string())
                .or_default()
                .push(problem_json(pr));
        } else if let Some(dir) = file
            .strip_prefix(&plugins_root)
            .ok()
            .and_then(|rest| rest.components().next())
        {
            let name = dir.as_os_str().to_string_lossy().to_string();
            failed
                .entry(name.clone())
                .or_insert_with(|| (plugins_root.join(&name), Vec::new()))
                .1
                .push(problem_json(pr));
        } else {
            other.push(problem_json(pr));
        }
    }
    let mut list: Vec<Value> = loaded
        .iter()
        .map(|(_, p)| plugin_json(p, by_plugin.remove(p.name()).unwrap_or_default()))
        .collect();
    for (name, (dir, problems)) in failed {
        list.push(json!({
            "name": name,
            "status": "failed",
            "dir": dir.display().to_string(),
            "permissions": Value::Null,
            "tools": [],
            "nodes": [],
            "workflows": [],
            "problems": problems,
        }));
    }
    list.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    json!({"generation": generation, "plugins": list, "otherProblems": other})
}

/// `GET /api/plugins`: [`plugins_json`] plus `refusedReload`, the last reload the server
/// refused (`{"at_ms", "reasons"}`) unless one succeeded since, and `reloads` (attempts).
pub async fn list_plugins(State(served): State<Arc<Served>>) -> Json<Value> {
    let mut v = plugins_json(&served.engine(), served.generation());
    if let Some(m) = v.as_object_mut() {
        m.insert("reloads".into(), json!(served.reload_attempts()));
        m.insert("refusedReload".into(), json!(served.refused_reload()));
    }
    Json(v)
}

/// How often the reload stream looks at the engine generation.
const RELOAD_POLL: Duration = Duration::from_millis(250);

/// `GET /api/plugins/events`: server-sent events. On connect one `engine` event
/// `{"generation", "reloads", "refused"}`; then one more after each reload attempt (a swap
/// raises `generation`; a refusal sets `refused` to `{"at_ms", "reasons"}`).
pub async fn plugin_events(
    State(served): State<Arc<Served>>,
) -> Sse<impl futures_util::Stream<Item = Result<Event, std::convert::Infallible>>> {
    // Shutdown ends the stream at once.
    let served_end = served.streams_end();
    let stream = futures_util::stream::unfold(
        (served, None::<(usize, usize)>),
        |(served, last)| async move {
            loop {
                let now = (served.generation(), served.reload_attempts());
                if last != Some(now) {
                    let ev = Event::default().event("engine").data(
                        json!({
                            "generation": now.0,
                            "reloads": now.1,
                            "refused": served.refused_reload(),
                        })
                        .to_string(),
                    );
                    return Some((Ok(ev), (served, Some(now))));
                }
                tokio::time::sleep(RELOAD_POLL).await;
            }
        },
    );
    let end = served_end;
    Sse::new(futures_util::StreamExt::take_until(stream, end)).keep_alive(KeepAlive::default())
}
