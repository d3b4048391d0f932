//! The agent chat of `/agents/{id}`: sessions that keep an [`AgentRuntime`] between
//! requests, so a person drives the agent turn by turn and sees each turn's calls and
//! Observations.
//!
//! Sessions live in memory, at most [`MAX_SESSIONS`] (the least recently used goes first)
//! and for [`SESSION_TTL`] after their last turn. Only agents listed in `<home>/agents` can
//! be opened (an id is never taken as a file path).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use serde_json::{json, Value};

use super::super::rest::ApiError;
use super::super::Served;
use crate::agent::{list_ids, AgentError, AgentRuntime, Turn};
use crate::engine::outcome_json;

/// Most chat sessions kept at once.
pub const MAX_SESSIONS: usize = 64;
/// How long a session is kept after its last turn.
pub const SESSION_TTL: Duration = Duration::from_secs(3600);

struct Session {
    agent: String,
    runtime: Arc<tokio::sync::Mutex<AgentRuntime>>,
    last_used: Instant,
    turns: u32,
}

/// The open chat sessions, by session id.
#[derive(Clone, Default)]
pub struct Sessions(Arc<Mutex<HashMap<String, Session>>>);

impl Sessions {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Session>> {
        // Entries are inserted and removed whole: a poisoned map is still consistent.
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// State of the agent routes.
#[derive(Clone)]
pub struct AgentState {
    /// The served engine.
    pub served: Arc<Served>,
    /// The open sessions.
    pub sessions: Sessions,
}

fn known(served: &Served, id: &str) -> Result<(), ApiError> {
    let ids = list_ids(served.engine().home());
    if ids.iter().any(|i| i == id) {
        return Ok(());
    }
    let mut close: Vec<(f64, String)> = ids
        .iter()
        .map(|i| (strsim::jaro_winkler(i, id), i.clone()))
        .filter(|(s, _)| *s > 0.7)
        .collect();
    close.sort_by(|a, b| b.0.total_cmp(&a.0));
    Err(ApiError::new(
        StatusCode::NOT_FOUND,
        "unknown_agent",
        format!("no agent '{id}' in the home's agents/ directory"),
    )
    .suggest(close.into_iter().map(|(_, i)| i)))
}

fn agent_error(e: &AgentError) -> ApiError {
    let (status, code) = match e {
        AgentError::NotFound { .. } => (StatusCode::NOT_FOUND, "unknown_agent"),
        AgentError::Load(_) => (StatusCode::UNPROCESSABLE_ENTITY, "agent_invalid"),
        AgentError::Deliberation { .. } => (StatusCode::BAD_GATEWAY, "deliberation_failed"),
        AgentError::Config(_) => (StatusCode::UNPROCESSABLE_ENTITY, "agent_config"),
    };
    ApiError::new(status, code, e.to_string())
}

/// `GET /api/agents`: `{"agents": [{id, name, description}]}`.
pub async fn list(State(st): State<AgentState>) -> Json<Value> {
    let engine = st.served.engine();
    let agents: Vec<Value> = list_ids(engine.home())
        .into_iter()
        .map(
            |id| match crate::agent::AgentProfile::load(engine.home(), &id) {
                Ok(p) => json!({
                    "id": id,
                    "name": p.name.as_deref().unwrap_or(&id),
                    "description": p.description,
                }),
                Err(e) => json!({"id": id, "name": id, "error": e.to_string()}),
            },
        )
        .collect();
    Json(json!({ "agents": agents }))
}

/// `GET /api/agents/{id}`: the profile's name, description, inventory and the manual the
/// model is given.
pub async fn get(
    State(st): State<AgentState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    known(&st.served, &id)?;
    let engine = st.served.engine();
    let rt = engine
        .agent(&id)
        .and_then(|b| b.build())
        .map_err(|e| agent_error(&e))?;
    let p = rt.profile();
    let tools: Vec<String> = rt
        .inventory()
        .list()
        .iter()
        .map(|t| t.id().to_string())
        .collect();
    let limits = rt.limits();
    Ok(Json(json!({
        "id": p.id,
        "name": p.name.as_deref().unwrap_or(&p.id),
        "description": p.description,
        "tools": tools,
        "manual": rt.manual(),
        "scriptedModels": scripted_models(engine.home()),
        "limits": {
            "maxTurns": limits.max_turns,
            "maxToolCalls": limits.max_tool_calls,
            "repeatLimit": limits.repeat_limit,
        },
    })))
}

/// One turn as JSON: what the model was given and wrote, its calls with their results and
/// Observations (exactly as the model reads them next turn).
pub fn turn_json(t: &Turn) -> Value {
    let calls: Vec<Value> = t
        .results
        .iter()
        .map(|r| {
            let mut v = outcome_json(&r.outcome, Some(&r.call));
            if let Some(m) = v.as_object_mut() {
                m.insert("args".into(), Value::from(r.call.args.clone()));
                m.insert(
                    "elapsedMs".into(),
                    json!(r.outcome.elapsed.as_secs_f64() * 1000.0),
                );
            }
            v
        })
        .collect();
    json!({
        "index": t.index,
        "input": t.input,
        "output": t.output,
        "prose": t.parsed.response_text,
        "calls": calls,
        "diagnostics": t.parsed.diagnostics,
        "observations": t.observations,
    })
}

/// The scripted models a chat may pick (`scripted:FILE`, FILE relative to the home): the
/// `scripts/*.replies.json` and `replies/*.json` files of the home. Only these are accepted,
/// so a request cannot name any other file.
fn scripted_models(home: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    for (dir, suffix) in [("scripts", ".replies.json"), ("replies", ".json")] {
        let Ok(rd) = std::fs::read_dir(home.join(dir)) else {
            continue;
        };
        let mut names: Vec<String> = rd
            .filter_map(Result::ok)
            .filter(|e| e.path().is_file())
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| n.ends_with(suffix))
            .collect();
        names.sort();
        out.extend(names.into_iter().map(|n| format!("scripted:{dir}/{n}")));
    }
    out
}

fn new_session_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// `POST /api/agents/{id}/turn` with `{"session"?, "message"?}`: runs one turn. Without a
/// session a new one starts (its id is in the answer); without a message the turn continues
/// with the last turn's Observations. Answers `{"session", "agent", "turn", "continue"}`,
/// `continue` true when the turn made calls (the model should see their Observations).
pub async fn turn(
    State(st): State<AgentState>,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    known(&st.served, &id)?;
    let req: Value = if body.iter().all(u8::is_ascii_whitespace) {
        json!({})
    } else {
        serde_json::from_slice(&body).map_err(|e| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                "bad_request",
                format!(
                    "the body is not JSON (line {} column {}): {e}",
                    e.line(),
                    e.column()
                ),
            )
            .suggest([
                r#"send {"message": "hello"} or {"session": "<id>", "message": null}"#.to_string(),
            ])
        })?
    };
    let message = match req.get("message") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(other) => {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "bad_request",
                format!("`message` must be a string or null, not {other}"),
            ))
        }
    };
    let wanted = req
        .get("session")
        .and_then(Value::as_str)
        .map(str::to_string);
    let (session, runtime) = {
        let mut map = st.sessions.lock();
        map.retain(|_, s| s.last_used.elapsed() < SESSION_TTL);
        match &wanted {
            Some(sid) => match map.get_mut(sid) {
                Some(s) if s.agent == id => {
                    s.last_used = Instant::now();
                    s.turns += 1;
                    (sid.clone(), s.runtime.clone())
                }
                Some(s) => {
                    return Err(ApiError::new(
                        StatusCode::CONFLICT,
                        "session_agent_mismatch",
                        format!("session '{sid}' belongs to agent '{}', not '{id}'", s.agent),
                    ))
                }
                None => {
                    return Err(ApiError::new(
                        StatusCode::NOT_FOUND,
                        "unknown_session",
                        format!(
                            "no chat session '{sid}' (it ended, expired after {} s idle, or the server restarted)",
                            SESSION_TTL.as_secs()
                        ),
                    )
                    .suggest(["start a new session: send the message without `session`".to_string()]))
                }
            },
            None => {
                drop(map);
                let engine = st.served.engine();
                // `llm`: one of the page's scripted models, for the new session.
                let llm = match req.get("llm") {
                    None | Some(Value::Null) => None,
                    Some(Value::String(m)) if scripted_models(engine.home()).contains(m) => {
                        Some(crate::agent::llm::LlmSettings {
                            base_url: Some(m.clone()),
                            ..Default::default()
                        })
                    }
                    Some(other) => {
                        return Err(ApiError::new(
                            StatusCode::BAD_REQUEST,
                            "bad_request",
                            format!("`llm` {other} is not one of this home's scripted models"),
                        )
                        .suggest(scripted_models(engine.home())))
                    }
                };
                // The calling client's model (`llm.base_url = "mcp-client"`): over REST
                // nobody can answer its sampling requests.
                if llm.is_none()
                    && crate::server::mcp_agents::uses_client_model(&engine, &id)
                        .unwrap_or(false)
                {
                    return Err(ApiError::new(
                        StatusCode::UNPROCESSABLE_ENTITY,
                        crate::script::UNSUPPORTED,
                        format!(
                            "agent '{id}' thinks with the model of the MCP client that calls it (llm base_url \"mcp-client\"), and a REST request has no MCP client to ask"
                        ),
                    )
                    .suggest([
                        format!("call it over MCP as the tool `agent_{id}` from a client that supports sampling"),
                        "or serve with a model of its own: --llm openai:URL (or pick a scripted model here)".to_string(),
                    ]));
                }
                let rt = engine
                    .agent(&id)
                    .map(|b| match llm {
                        Some(l) => b.llm(l),
                        None => b,
                    })
                    .and_then(|b| b.build())
                    .map_err(|e| agent_error(&e))?;
                let runtime = Arc::new(tokio::sync::Mutex::new(rt));
                let sid = new_session_id();
                let mut map = st.sessions.lock();
                if map.len() >= MAX_SESSIONS {
                    if let Some(oldest) = map
                        .iter()
                        .min_by_key(|(_, s)| s.last_used)
                        .map(|(k, _)| k.clone())
                    {
                        map.remove(&oldest);
                    }
                }
                map.insert(
                    sid.clone(),
                    Session {
                        agent: id.clone(),
                        runtime: runtime.clone(),
                        last_used: Instant::now(),
                        turns: 1,
                    },
                );
                (sid, runtime)
            }
        }
    };
    let mut rt = runtime.lock().await;
    let turn = st
        .served
        .track(rt.turn(message.as_deref()))
        .await
        .map_err(|e| agent_error(&e))?;
    Ok(Json(json!({
        "session": session,
        "agent": id,
        "turn": turn_json(&turn),
        "continue": !turn.results.is_empty(),
    })))
}

/// `DELETE /api/agents/{id}/sessions/{session}`: forgets a session (200 `{"ended": true}`;
/// 404 `unknown_session`).
pub async fn end_session(
    State(st): State<AgentState>,
    Path((id, session)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    let mut map = st.sessions.lock();
    match map.get(&session) {
        Some(s) if s.agent == id => {
            map.remove(&session);
            Ok(Json(json!({"ended": true, "session": session})))
        }
        _ => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "unknown_session",
            format!("no chat session '{session}' for agent '{id}'"),
        )),
    }
}
