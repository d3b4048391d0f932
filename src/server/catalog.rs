//! What the server offers besides tools: MCP resources, resource templates, prompts and
//! completions, built from the current engine on each request (so a reload shows at once).
//! The MCP handler (`mcp.rs`) and the REST routes (`rest.rs`) answer from here.
//!
//! Built-in resources (the `tavern://` scheme):
//! - `tavern://world`: the engine's live world (`Engine::world_state`: `world.json` as
//!   scripts, the host and reloads changed it; with `--store`, the store's);
//! - `tavern://workflows/{id}`: each workflow's definition;
//! - `tavern://agents/{id}/manual`: each agent's generated manual;
//! - `tavern://plugins/{name}/readme`: each plugin's `README.md` (where it has one);
//! - `tavern://jobs/{id}`: a job's record and result (a template: jobs come and go).
//!
//! Plugins declare more in `plugin.yaml` (`resources:`, `resourceTemplates:`, `prompts:`;
//! docs/plugins.md); a declaration read by a `tool:` calls that tool of the plugin through
//! the server's one run path. Agent profiles are prompts named `agent_<id>`.

use serde_json::{json, Map, Value};

use super::Served;
use crate::tools::{Caller, WORLD_URI};

/// Why a catalog request failed.
#[derive(Debug)]
pub enum CatalogError {
    /// No such resource / prompt (MCP `-32002` for resources, `-32602` for prompts).
    NotFound(String),
    /// The request is wrong (missing argument …): `-32602`.
    Invalid(String),
    /// The reader failed: `-32603`.
    Failed(String),
}

impl std::fmt::Display for CatalogError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CatalogError::NotFound(m) | CatalogError::Invalid(m) | CatalogError::Failed(m) => {
                f.write_str(m)
            }
        }
    }
}

/// The prefix of the built-in resources.
pub const SCHEME: &str = "tavern://";

fn plugin_list(v: Option<&Value>) -> impl Iterator<Item = &Map<String, Value>> {
    v.and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object)
}

/// The MCP `Resource` fields of a declaration (`uri`, `name`, `title`, …).
fn described(d: &Map<String, Value>, keys: &[&str]) -> Value {
    let mut out = Map::new();
    for k in keys {
        if let Some(v) = d.get(*k) {
            out.insert((*k).to_string(), v.clone());
        }
    }
    if !out.contains_key("description") {
        let what = out
            .get("title")
            .or(out.get("name"))
            .cloned()
            .unwrap_or(Value::Null);
        out.insert("description".into(), what);
    }
    Value::Object(out)
}

const RESOURCE_KEYS: &[&str] = &["uri", "name", "title", "description", "mimeType"];
const TEMPLATE_KEYS: &[&str] = &["uriTemplate", "name", "title", "description", "mimeType"];

/// `resources/list`: the built-ins, then each plugin's declarations (load order).
pub fn list_resources(served: &Served) -> Vec<Value> {
    let engine = served.engine();
    let mut out = Vec::new();
    #[cfg(feature = "store-redis")]
    let shared = served.shared().is_some();
    #[cfg(not(feature = "store-redis"))]
    let shared = false;
    let description = if shared {
        "The live world state the served agents and scripts of every replica share in the store (the home's world.json until something writes it)"
    } else {
        "The engine's live world state: the home's world.json as scripts (api.world), the host and reloads have changed it"
    };
    out.push(
        json!({"uri": WORLD_URI, "name": "world", "title": "World state",
        "description": description, "mimeType": "application/json"}),
    );
    for id in engine.workflows().ids() {
        out.push(json!({"uri": format!("tavern://workflows/{id}"), "name": format!("workflow {id}"),
            "description": format!("The definition of workflow '{id}'"), "mimeType": "application/json"}));
    }
    for id in crate::agent::list_ids(engine.home()) {
        out.push(json!({"uri": format!("tavern://agents/{id}/manual"), "name": format!("agent {id} manual"),
            "description": format!("The manual agent '{id}' is given (its tools and how to call them)"),
            "mimeType": "text/markdown"}));
    }
    for p in engine.plugins().list() {
        if p.dir.join("README.md").is_file() {
            let name = p.name();
            out.push(json!({"uri": format!("tavern://plugins/{name}/readme"), "name": format!("plugin {name} README"),
                "description": format!("README.md of plugin '{name}'"), "mimeType": "text/markdown"}));
        }
        for d in plugin_list(p.manifest.resources.as_ref()) {
            out.push(described(d, RESOURCE_KEYS));
        }
    }
    out
}

/// `resources/templates/list`.
pub fn list_templates(served: &Served) -> Vec<Value> {
    let engine = served.engine();
    let mut out = vec![json!({"uriTemplate": "tavern://jobs/{id}", "name": "job",
        "description": "A job's record and result (POST /api/jobs, MCP tasks)", "mimeType": "application/json"})];
    for p in engine.plugins().list() {
        for d in plugin_list(p.manifest.resource_templates.as_ref()) {
            out.push(described(d, TEMPLATE_KEYS));
        }
    }
    out
}

fn text(uri: &str, mime: &str, text: String) -> Vec<Value> {
    vec![json!({"uri": uri, "mimeType": mime, "text": text})]
}

/// Matches `uri` against a template of simple `{name}` variables (RFC 6570 level 1): the
/// variables, or `None`.
pub fn match_template(template: &str, uri: &str) -> Option<Map<String, Value>> {
    let mut vars = Map::new();
    let mut rest = uri;
    let mut t = template;
    while let Some(open) = t.find('{') {
        let lit = &t[..open];
        rest = rest.strip_prefix(lit)?;
        let close = t[open..].find('}')? + open;
        let name = &t[open + 1..close];
        t = &t[close + 1..];
        // The value runs to the next literal (or the end); never empty, never across '/'.
        let next_lit = t.split('{').next().unwrap_or("");
        let end = if next_lit.is_empty() {
            rest.len()
        } else {
            rest.find(next_lit)?
        };
        let value = &rest[..end];
        if value.is_empty() || value.contains('/') {
            return None;
        }
        vars.insert(name.to_string(), Value::String(value.to_string()));
        rest = &rest[end..];
    }
    (rest == t).then_some(vars)
}

/// `resources/read`: the contents of `uri` (MCP `ResourceContents`, JSON).
pub async fn read_resource(served: &Served, uri: &str) -> Result<Vec<Value>, CatalogError> {
    let engine = served.engine();
    let not_found = || {
        CatalogError::NotFound(format!("no resource '{uri}' on this server: resources/list and resources/templates/list name what there is"))
    };
    if let Some(path) = uri.strip_prefix(SCHEME) {
        let parts: Vec<&str> = path.split('/').collect();
        return match parts.as_slice() {
            ["world"] => {
                // The live world; a host's or the store's may block on I/O.
                let world = engine.world_state();
                let w = tokio::task::spawn_blocking(move || world.snapshot())
                    .await
                    .map_err(|e| CatalogError::Failed(format!("reading the world failed: {e}")))?
                    .ok_or_else(|| {
                        CatalogError::Failed(
                            "the world state cannot be read whole (its store does not list it)"
                                .into(),
                        )
                    })?;
                Ok(text(uri, "application/json", w.to_string()))
            }
            ["workflows", id] => {
                let wf = engine.workflows().get(id).ok_or_else(not_found)?;
                let w = &wf.workflow;
                // The file as written; a workflow made in memory as its parts.
                let t = match w
                    .source
                    .as_ref()
                    .and_then(|p| std::fs::read_to_string(p).ok())
                {
                    Some(t) => t,
                    None => {
                        let nodes: Vec<Value> = w
                            .nodes
                            .iter()
                            .map(|n| {
                                json!({"id": n.id, "type": n.node_type,
                                "inputValues": n.input_values, "configValues": n.config_values})
                            })
                            .collect();
                        let edges: Vec<Value> = w
                            .edges
                            .iter()
                            .map(|e| {
                                json!({"source": e.source, "sourceHandle": e.source_handle,
                                "target": e.target, "targetHandle": e.target_handle})
                            })
                            .collect();
                        json!({"id": w.id, "description": w.description, "nodes": nodes,
                            "edges": edges})
                        .to_string()
                    }
                };
                Ok(text(uri, "application/json", t))
            }
            ["agents", id, "manual"] => {
                if !crate::agent::list_ids(engine.home())
                    .iter()
                    .any(|a| a == id)
                {
                    return Err(not_found());
                }
                let rt = engine
                    .agent(id)
                    .and_then(|b| b.build())
                    .map_err(|e| CatalogError::Failed(e.to_string()))?;
                Ok(text(uri, "text/markdown", rt.manual().to_string()))
            }
            ["plugins", name, "readme"] => {
                let p = engine.plugins().get(name).ok_or_else(not_found)?;
                let t =
                    std::fs::read_to_string(p.dir.join("README.md")).map_err(|_| not_found())?;
                Ok(text(uri, "text/markdown", t))
            }
            ["jobs", id] => {
                use super::jobs::Lookup;
                #[cfg(feature = "store-redis")]
                if let Some(jobs) = served.shared_jobs() {
                    return match jobs.get(id).await {
                        Ok(Some(r)) => Ok(text(uri, "application/json", r.to_string())),
                        Ok(None) => Err(not_found()),
                        Err(e) => Err(CatalogError::Failed(e.to_string())),
                    };
                }
                match served.jobs().get(id) {
                    Lookup::Found(j) => Ok(text(uri, "application/json", j.to_json().to_string())),
                    _ => Err(not_found()),
                }
            }
            _ => Err(not_found()),
        };
    }
    for p in engine.plugins().list() {
        for d in plugin_list(p.manifest.resources.as_ref()) {
            if d.get("uri").and_then(Value::as_str) == Some(uri) {
                return read_declared(served, p.name(), d, uri, Map::new()).await;
            }
        }
        for d in plugin_list(p.manifest.resource_templates.as_ref()) {
            let Some(t) = d.get("uriTemplate").and_then(Value::as_str) else {
                continue;
            };
            if let Some(vars) = match_template(t, uri) {
                return read_declared(served, p.name(), d, uri, vars).await;
            }
        }
    }
    Err(not_found())
}

/// Runs `tool` of `plugin` (a bare name gets the plugin's namespace) with `args`.
async fn run_tool(
    served: &Served,
    plugin: &str,
    tool: &str,
    args: Value,
) -> Result<Value, CatalogError> {
    let id = if tool.contains(':') {
        tool.to_string()
    } else {
        format!("{plugin}:{tool}")
    };
    served
        .invoke(
            &id,
            args,
            Caller::Remote("mcp".into()),
            tokio_util::sync::CancellationToken::new(),
            None,
        )
        .await
        .map_err(|e| CatalogError::Failed(format!("{id}: {}", e.observation())))
}

async fn read_declared(
    served: &Served,
    plugin: &str,
    d: &Map<String, Value>,
    uri: &str,
    vars: Map<String, Value>,
) -> Result<Vec<Value>, CatalogError> {
    let mime = d
        .get("mimeType")
        .and_then(Value::as_str)
        .unwrap_or("text/plain");
    if let Some(t) = d.get("text") {
        let t = t.as_str().map_or_else(|| t.to_string(), str::to_string);
        return Ok(text(uri, mime, t));
    }
    if let Some(b) = d.get("blob").and_then(Value::as_str) {
        return Ok(vec![json!({"uri": uri, "mimeType": mime, "blob": b})]);
    }
    let Some(tool) = d.get("tool").and_then(Value::as_str) else {
        return Err(CatalogError::Failed(format!(
            "resource '{uri}' of plugin '{plugin}' has no `text`, `blob` or `tool` in plugin.yaml"
        )));
    };
    let mut args = vars;
    args.insert("uri".into(), Value::String(uri.to_string()));
    let v = run_tool(served, plugin, tool, Value::Object(args)).await?;
    Ok(match v {
        Value::String(s) => text(uri, mime, s),
        Value::Object(mut o) => {
            if let Some(Value::Array(c)) = o.remove("contents") {
                c
            } else {
                o.entry("uri")
                    .or_insert_with(|| Value::String(uri.to_string()));
                o.entry("mimeType")
                    .or_insert_with(|| Value::String(mime.to_string()));
                if !o.contains_key("text") && !o.contains_key("blob") {
                    return Err(CatalogError::Failed(format!(
                        "tool '{tool}' read resource '{uri}' but returned neither `text` nor `blob` (nor `contents`)"
                    )));
                }
                vec![Value::Object(o)]
            }
        }
        other => text(uri, mime, other.to_string()),
    })
}

/// The arguments of an agent's prompt.
fn agent_prompt(id: &str, description: Option<&str>) -> Value {
    json!({"name": format!("agent_{id}"), "title": format!("Agent {id}"),
        "description": description.map_or_else(|| format!("Talk to agent '{id}': its manual, then your message"), str::to_string),
        "arguments": [{"name": "message", "description": "What you ask the agent", "required": false}]})
}

/// `prompts/list`: each agent profile (`agent_<id>`), then each plugin's prompts.
pub fn list_prompts(served: &Served) -> Vec<Value> {
    let engine = served.engine();
    let mut out = Vec::new();
    for id in crate::agent::list_ids(engine.home()) {
        let desc = crate::agent::AgentProfile::load(engine.home(), &id)
            .ok()
            .map(|p| p.description)
            .filter(|d| !d.is_empty());
        out.push(agent_prompt(&id, desc.as_deref()));
    }
    for p in engine.plugins().list() {
        for d in plugin_list(p.manifest.prompts.as_ref()) {
            let mut e = described(d, &["name", "title", "description"]);
            if let Some(Value::Array(args)) = d.get("arguments") {
                let args: Vec<Value> = args
                    .iter()
                    .filter_map(Value::as_object)
                    .map(|a| described(a, &["name", "title", "description", "required"]))
                    .collect();
                e["arguments"] = Value::Array(args);
            }
            out.push(e);
        }
    }
    out
}

fn message_list(v: Value) -> Result<Vec<Value>, String> {
    let list = match v {
        Value::String(s) => {
            return Ok(vec![
                json!({"role": "user", "content": {"type": "text", "text": s}}),
            ])
        }
        Value::Array(a) => a,
        Value::Object(mut o) => match o.remove("messages") {
            Some(Value::Array(a)) => a,
            _ => {
                return Err(
                    "a prompt is a text, a list of {role, content} or {messages = …}".into(),
                )
            }
        },
        _ => return Err("a prompt is a text, a list of {role, content} or {messages = …}".into()),
    };
    Ok(list
        .into_iter()
        .map(|m| match m {
            Value::Object(mut o) => {
                if let Some(Value::String(t)) = o.get("content").cloned() {
                    o.insert("content".into(), json!({"type": "text", "text": t}));
                }
                o.entry("role").or_insert_with(|| json!("user"));
                Value::Object(o)
            }
            Value::String(t) => json!({"role": "user", "content": {"type": "text", "text": t}}),
            other => other,
        })
        .collect())
}

/// `prompts/get`: `{description, messages}`.
pub async fn get_prompt(
    served: &Served,
    name: &str,
    arguments: Map<String, Value>,
) -> Result<Value, CatalogError> {
    let engine = served.engine();
    if let Some(id) = name.strip_prefix("agent_") {
        if crate::agent::list_ids(engine.home())
            .iter()
            .any(|a| a == id)
        {
            let rt = engine
                .agent(id)
                .and_then(|b| b.build())
                .map_err(|e| CatalogError::Failed(e.to_string()))?;
            let mut messages =
                vec![json!({"role": "user", "content": {"type": "text", "text": rt.manual()}})];
            if let Some(m) = arguments.get("message").and_then(Value::as_str) {
                messages.push(json!({"role": "user", "content": {"type": "text", "text": m}}));
            }
            return Ok(json!({"description": format!("Agent '{id}'"), "messages": messages}));
        }
    }
    for p in engine.plugins().list() {
        for d in plugin_list(p.manifest.prompts.as_ref()) {
            if d.get("name").and_then(Value::as_str) != Some(name) {
                continue;
            }
            for a in d
                .get("arguments")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let (Some(an), true) = (
                    a.get("name").and_then(Value::as_str),
                    a.get("required").and_then(Value::as_bool).unwrap_or(false),
                ) else {
                    continue;
                };
                if !arguments.contains_key(an) {
                    return Err(CatalogError::Invalid(format!(
                        "prompt '{name}' needs argument '{an}'"
                    )));
                }
            }
            let raw = if let Some(m) = d.get("messages") {
                m.clone()
            } else if let Some(tool) = d.get("tool").and_then(Value::as_str) {
                run_tool(served, p.name(), tool, Value::Object(arguments)).await?
            } else {
                return Err(CatalogError::Failed(format!(
                    "prompt '{name}' of plugin '{}' has neither `messages` nor `tool` in plugin.yaml",
                    p.name()
                )));
            };
            let messages = message_list(raw)
                .map_err(|e| CatalogError::Failed(format!("prompt '{name}': {e}")))?;
            let mut out = json!({"messages": messages});
            if let Some(desc) = d.get("description") {
                out["description"] = desc.clone();
            }
            return Ok(out);
        }
    }
    Err(CatalogError::NotFound(format!(
        "no prompt '{name}' on this server: prompts/list names what there is"
    )))
}

/// The built-in completer `kind` (`tools`, `workflows`, `agents`, `jobs`).
fn builtin_values(served: &Served, kind: &str) -> Option<Vec<String>> {
    let engine = served.engine();
    Some(match kind {
        "tools" => engine
            .tools()
            .model_list()
            .iter()
            .map(|t| t.id().to_string())
            .collect(),
        "workflows" => engine.workflows().ids(),
        "agents" => crate::agent::list_ids(engine.home()),
        "jobs" => served.jobs().list().iter().map(|j| j.id.clone()).collect(),
        _ => return None,
    })
}

/// A `complete:` declaration: `{values: [...]}`, `{builtin: kind}` or `{tool: name}`.
async fn run_completer(
    served: &Served,
    plugin: &str,
    spec: &Value,
    argument: &str,
    value: &str,
    context: &Map<String, Value>,
) -> Result<Vec<String>, CatalogError> {
    let all: Vec<String> = if let Some(vals) = spec.get("values").and_then(Value::as_array) {
        vals.iter()
            .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string))
            .collect()
    } else if let Some(kind) = spec.get("builtin").and_then(Value::as_str) {
        builtin_values(served, kind).ok_or_else(|| {
            CatalogError::Failed(format!(
                "complete: builtin '{kind}' is not one of tools, workflows, agents, jobs"
            ))
        })?
    } else if let Some(tool) = spec.get("tool").and_then(Value::as_str) {
        let args = json!({"argument": argument, "value": value, "context": context});
        let v = run_tool(served, plugin, tool, args).await?;
        return Ok(v
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string))
                    .collect()
            })
            .unwrap_or_default());
    } else {
        return Ok(Vec::new());
    };
    Ok(all.into_iter().filter(|v| v.starts_with(value)).collect())
}

/// `completion/complete`: values for argument `argument` of a prompt (`ref/prompt` with
/// `name`) or a variable of a resource template (`ref/resource` with `uri`, the template).
pub async fn complete(
    served: &Served,
    reference: &Value,
    argument: &str,
    value: &str,
    context: &Map<String, Value>,
) -> Result<Vec<String>, CatalogError> {
    let engine = served.engine();
    let kind = reference["type"].as_str().unwrap_or_default();
    if kind == "ref/resource" {
        let uri = reference["uri"].as_str().unwrap_or_default();
        if uri == "tavern://jobs/{id}" && argument == "id" {
            return run_completer(
                served,
                "",
                &json!({"builtin": "jobs"}),
                argument,
                value,
                context,
            )
            .await;
        }
        for p in engine.plugins().list() {
            for d in plugin_list(p.manifest.resource_templates.as_ref()) {
                if d.get("uriTemplate").and_then(Value::as_str) == Some(uri) {
                    let Some(spec) = d.get("complete").and_then(|c| c.get(argument)) else {
                        return Ok(Vec::new());
                    };
                    return run_completer(served, p.name(), spec, argument, value, context).await;
                }
            }
        }
        return Err(CatalogError::NotFound(format!(
            "no resource template '{uri}'"
        )));
    }
    let name = reference["name"].as_str().unwrap_or_default();
    if name.starts_with("agent_") {
        return Ok(Vec::new());
    }
    for p in engine.plugins().list() {
        for d in plugin_list(p.manifest.prompts.as_ref()) {
            if d.get("name").and_then(Value::as_str) != Some(name) {
                continue;
            }
            let spec = d
                .get("arguments")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .find(|a| a.get("name").and_then(Value::as_str) == Some(argument))
                .and_then(|a| a.get("complete"));
            return match spec {
                Some(s) => run_completer(served, p.name(), s, argument, value, context).await,
                None => Ok(Vec::new()),
            };
        }
    }
    Err(CatalogError::NotFound(format!("no prompt '{name}'")))
}

/// The REST face of the catalog: `GET /api/resources`, `GET /api/resources/templates`,
/// `GET /api/resources/read?uri=…`, `GET /api/prompts`, `GET|POST /api/prompts/{name}`
/// (arguments as the query, or a JSON object body).
pub mod rest {
    use std::collections::HashMap;
    use std::sync::Arc;

    use axum::extract::{Path, Query, State};
    use axum::http::StatusCode;
    use axum::routing::get;
    use axum::{Json, Router};
    use serde_json::{json, Map, Value};

    use super::super::rest::ApiError;
    use super::super::Served;
    use super::CatalogError;

    fn api_error(e: CatalogError, what: &'static str) -> ApiError {
        match e {
            CatalogError::NotFound(m) => ApiError::new(StatusCode::NOT_FOUND, what, m),
            CatalogError::Invalid(m) => ApiError::new(StatusCode::BAD_REQUEST, "bad_request", m),
            CatalogError::Failed(m) => ApiError::new(StatusCode::BAD_GATEWAY, "read_failed", m),
        }
    }

    async fn resources(State(s): State<Arc<Served>>) -> Json<Value> {
        Json(json!({"resources": super::list_resources(&s)}))
    }

    async fn templates(State(s): State<Arc<Served>>) -> Json<Value> {
        Json(json!({"resourceTemplates": super::list_templates(&s)}))
    }

    async fn read(
        State(s): State<Arc<Served>>,
        Query(q): Query<HashMap<String, String>>,
    ) -> Result<Json<Value>, ApiError> {
        let uri = q.get("uri").ok_or_else(|| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                "bad_request",
                "GET /api/resources/read needs ?uri=<resource uri> (GET /api/resources lists them)",
            )
        })?;
        let contents = super::read_resource(&s, uri)
            .await
            .map_err(|e| api_error(e, "unknown_resource"))?;
        Ok(Json(json!({ "contents": contents })))
    }

    async fn prompts(State(s): State<Arc<Served>>) -> Json<Value> {
        Json(json!({"prompts": super::list_prompts(&s)}))
    }

    async fn prompt_get(
        State(s): State<Arc<Served>>,
        Path(name): Path<String>,
        Query(q): Query<HashMap<String, String>>,
    ) -> Result<Json<Value>, ApiError> {
        let args: Map<String, Value> = q.into_iter().map(|(k, v)| (k, Value::String(v))).collect();
        let r = super::get_prompt(&s, &name, args)
            .await
            .map_err(|e| api_error(e, "unknown_prompt"))?;
        Ok(Json(r))
    }

    async fn prompt_post(
        State(s): State<Arc<Served>>,
        Path(name): Path<String>,
        Json(args): Json<Map<String, Value>>,
    ) -> Result<Json<Value>, ApiError> {
        let r = super::get_prompt(&s, &name, args)
            .await
            .map_err(|e| api_error(e, "unknown_prompt"))?;
        Ok(Json(r))
    }

    /// The routes.
    pub fn routes() -> Router<Arc<Served>> {
        Router::new()
            .route("/api/resources", get(resources))
            .route("/api/resources/templates", get(templates))
            .route("/api/resources/read", get(read))
            .route("/api/prompts", get(prompts))
            .route("/api/prompts/{name}", get(prompt_get).post(prompt_post))
    }
}

#[cfg(test)]
mod tests {
    use super::match_template;
    use serde_json::json;

    #[test]
    fn templates_match_one_segment_per_variable() {
        let v = match_template("test://template/{id}/data", "test://template/123/data").unwrap();
        assert_eq!(v.get("id"), Some(&json!("123")));
        let v = match_template("a://{x}/{y}", "a://1/2").unwrap();
        assert_eq!(
            (v.get("x"), v.get("y")),
            (Some(&json!("1")), Some(&json!("2")))
        );
        assert!(match_template("test://template/{id}/data", "test://template//data").is_none());
        assert!(match_template("test://template/{id}/data", "test://template/1/2/data").is_none());
        assert!(match_template("test://template/{id}/data", "test://other/1/data").is_none());
        assert!(match_template("test://t/{id}", "test://t/1/extra").is_none());
    }
}
