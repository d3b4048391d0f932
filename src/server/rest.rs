//! The REST API (seed 000 §6.1, seed 004): `GET /api/tools` (`?format=openai|anthropic|mcp`),
//! `GET /api/tools/{id}`, `POST /api/invoke` (TAM / `<ACTION>` / VCP text, or a JSON call or
//! list of calls), with seed 004's `GET /tools` and `POST /invoke` as aliases.
//!
//! Errors are JSON: `{"error": {"code", "message", "suggestions": [...]}}`.

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{Path, Query, Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{json, Value};

use super::export::{tool_json, tools_json, ExportFormat};
use super::Served;
use crate::engine::{CallOptions, CallReport, CancelToken, Request as RunRequest};
use crate::protocol::{self, input, Format};
use crate::tools::{Caller, ToolError};

/// A JSON error answer.
#[derive(Debug, Clone)]
pub struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// Stable machine code (`unknown_tool`, `payload_too_large`, …).
    pub code: &'static str,
    /// What went wrong and how to fix it.
    pub message: String,
    /// Things to try instead (close tool ids, accepted values).
    pub suggestions: Vec<String>,
}

impl ApiError {
    /// An error with no suggestions.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
            suggestions: Vec::new(),
        }
    }

    /// Adds suggestions.
    pub fn suggest(mut self, s: impl IntoIterator<Item = String>) -> Self {
        self.suggestions.extend(s);
        self
    }

    /// 413 for a body past the limit.
    pub fn too_large(limit: usize) -> Self {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            format!("the request body is larger than this server accepts ({limit} bytes)"),
        )
        .suggest([
            "send fewer or smaller calls, or start the server with a larger --max-body-bytes"
                .to_string(),
        ])
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = json!({"error": {
            "code": self.code,
            "message": self.message,
            "suggestions": self.suggestions,
        }});
        (self.status, Json(body)).into_response()
    }
}

fn tool_error(e: &ToolError) -> ApiError {
    match e {
        ToolError::UnknownTool { suggestion, .. } => {
            ApiError::new(StatusCode::NOT_FOUND, e.variant_code(), e.to_string())
                .suggest(suggestion.clone())
        }
        _ => ApiError::new(StatusCode::BAD_REQUEST, e.variant_code(), e.to_string()),
    }
}

/// `?format=` of the tool list routes.
#[derive(Debug, Deserialize, Default)]
pub struct FormatQuery {
    format: Option<String>,
}

fn export_format(q: &FormatQuery) -> Result<ExportFormat, ApiError> {
    match &q.format {
        None => Ok(ExportFormat::Tavern),
        Some(f) => f.parse().map_err(|m: String| {
            ApiError::new(StatusCode::BAD_REQUEST, "bad_format", m)
                .suggest(["openai", "anthropic", "mcp"].map(String::from))
        }),
    }
}

async fn list_tools(
    State(served): State<Arc<Served>>,
    Query(q): Query<FormatQuery>,
) -> Result<Json<Value>, ApiError> {
    let format = export_format(&q)?;
    Ok(Json(tools_json(
        &super::export::tools_for(served.engine().tools(), format),
        format,
    )))
}

async fn get_tool(
    State(served): State<Arc<Served>>,
    Path(id): Path<String>,
    Query(q): Query<FormatQuery>,
) -> Result<Json<Value>, ApiError> {
    let format = export_format(&q)?;
    tool_answer(&served, &id, format)
}

/// Seed 004's `GET /tools/{id}`: JSON for API clients, the explorer's tool page when the
/// request's `Accept` prefers `text/html` (a browser).
async fn get_tool_or_page(
    served: State<Arc<Served>>,
    id: Path<String>,
    q: Query<FormatQuery>,
    headers: HeaderMap,
) -> Response {
    if super::web::wants_html(&headers) {
        return super::web::page();
    }
    get_tool(served, id, q).await.into_response()
}

fn tool_answer(served: &Served, id: &str, format: ExportFormat) -> Result<Json<Value>, ApiError> {
    let tool = served
        .engine()
        .tools()
        .get(id)
        .map_err(|e| tool_error(&e))?;
    Ok(Json(tool_json(&tool, format)))
}

/// `?format=` of invoke: how to read a text body (default auto).
#[derive(Debug, Deserialize, Default)]
pub struct InvokeQuery {
    format: Option<String>,
}

/// A request body read (by the one input reader, `protocol::input`), ready to run.
pub struct Prepared {
    parsed: protocol::Parsed,
    caller: Caller,
}

impl Prepared {
    /// One call given as a tool id and its arguments (an MCP task's `tools/call`), read and
    /// checked like a JSON body.
    pub fn call(served: &Served, tool: &str, args: Value) -> Result<Prepared, ApiError> {
        checked(served, input::read_call(tool, args))
    }

    /// The same calls made on behalf of `caller` (default `remote:rest`).
    pub fn with_caller(mut self, caller: Caller) -> Self {
        self.caller = caller;
        self
    }

    /// The first call carrying `id` (an MCP `tools/call`'s id) instead of the one the
    /// reader gave it.
    pub fn with_call_id(mut self, id: String) -> Self {
        if let Some(c) = self.parsed.calls.first_mut() {
            c.id = Some(id);
        }
        self
    }

    /// How many calls the body holds.
    pub fn call_count(&self) -> usize {
        self.parsed.calls.len()
    }

    /// The parsed body and the caller (a job queued in the shared store keeps them).
    pub fn into_parts(self) -> (protocol::Parsed, Caller) {
        (self.parsed, self.caller)
    }

    /// A body read earlier (on any replica), ready to run again.
    pub fn from_parts(parsed: protocol::Parsed, caller: Caller) -> Self {
        Prepared { parsed, caller }
    }
}

/// Reads and parses an invoke body (`POST /api/invoke`, `POST /api/jobs`): the `?format=`,
/// the body limit (413), the content type, and every call's arguments size (413). Nothing
/// runs yet.
pub async fn prepare(
    served: &Served,
    q: &InvokeQuery,
    headers: &HeaderMap,
    req: Request,
) -> Result<Prepared, ApiError> {
    let limit = served.options.max_body_bytes;
    let body = read_body(req.into_body(), limit).await?;
    let text = String::from_utf8_lossy(&body);
    let is_json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.trim_start().starts_with("application/json"));
    let format = match &q.format {
        Some(f) => f.parse::<Format>().map_err(|m| {
            ApiError::new(StatusCode::BAD_REQUEST, "bad_format", m)
                .suggest(Format::NAMES.iter().map(|n| n.to_string()))
        })?,
        None if is_json => Format::Json,
        None => Format::Auto,
    };
    let parsed = input::read(&text, format);
    // A body sent as JSON that is not JSON is the request's fault: say where. Checked only
    // when the reader found no clean call, so a well-formed call is parsed once.
    if is_json && (parsed.calls.is_empty() || !parsed.diagnostics.is_empty()) {
        if let Err(e) = serde_json::from_str::<serde::de::IgnoredAny>(&text) {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid_json",
                format!("the body is sent as application/json but is not JSON: {e}"),
            )
            .suggest([
                "fix the JSON at that place, or send TAM or other text without a JSON Content-Type"
                    .to_string(),
            ]));
        }
    }
    checked(served, parsed)
}

async fn invoke(
    State(served): State<Arc<Served>>,
    Query(q): Query<InvokeQuery>,
    headers: HeaderMap,
    req: Request,
) -> Result<Json<Value>, ApiError> {
    let prepared = prepare(&served, &q, &headers, req).await?;
    let engine = served.engine();
    let run = served.track(run_prepared(
        &engine,
        prepared,
        tokio_util::sync::CancellationToken::new(),
        None,
    ));
    let report = match served.options.call_timeout {
        None => Ok(run.await),
        // Dropping the batch on time-out drops (and so stops) the call in progress.
        Some(limit) => tokio::time::timeout(limit, run).await.map_err(|_| {
            ApiError::new(
                StatusCode::GATEWAY_TIMEOUT,
                "timeout",
                format!("the calls did not finish within {} ms", limit.as_millis()),
            )
            .suggest([
                "send fewer calls per request, or start the server with a larger --call-timeout-ms"
                    .to_string(),
            ])
        }),
    }?;
    Ok(Json(report.to_json()))
}

/// Refuses a body any of whose calls has arguments past the server's limit (413).
fn checked(served: &Served, parsed: protocol::Parsed) -> Result<Prepared, ApiError> {
    for c in &parsed.calls {
        let size = c
            .args
            .iter()
            .map(|(k, v)| k.len() + v.to_string().len())
            .sum::<usize>();
        if size > served.options.max_args_bytes {
            return Err(ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "arguments_too_large",
                format!(
                    "the arguments of {} are {size} bytes; this server accepts at most {}",
                    c.tool, served.options.max_args_bytes
                ),
            ));
        }
    }
    Ok(Prepared {
        parsed,
        caller: Caller::Remote("rest".into()),
    })
}

/// Runs a prepared body on `engine` under `cancel`, watched by `observer`, through the
/// engine's one run function (in place: a server runs on a multi-thread runtime).
pub async fn run_prepared(
    engine: &crate::Engine,
    prepared: Prepared,
    cancel: tokio_util::sync::CancellationToken,
    observer: crate::tools::Observer,
) -> CallReport {
    let opts = CallOptions::new()
        .caller(prepared.caller)
        .cancel(CancelToken::from_token(cancel))
        .observer(observer);
    crate::engine::run(
        engine.tools().clone(),
        RunRequest::parsed(prepared.parsed).options(opts),
    )
    .await
}

/// Reads a body up to `limit` bytes; past it, 413.
pub async fn read_body(body: Body, limit: usize) -> Result<Bytes, ApiError> {
    axum::body::to_bytes(body, limit)
        .await
        .map_err(|_| ApiError::too_large(limit))
}

async fn not_found(req: Request) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "not_found",
        format!("no route {} {}", req.method(), req.uri().path()),
    )
    .suggest(
        [
            "GET /api/tools",
            "GET /api/tools/{id}",
            "POST /api/invoke",
            "POST /api/jobs",
            "GET /api/jobs/{id}",
            "POST /mcp",
        ]
        .map(String::from),
    )
}

/// The REST routes (state: the served engine).
pub fn routes() -> Router<Arc<Served>> {
    Router::new()
        .route("/api/tools", get(list_tools))
        .route("/tools", get(list_tools))
        .route("/api/tools/{id}", get(get_tool))
        .route("/tools/{id}", get(get_tool_or_page))
        .route("/api/invoke", post(invoke))
        .route("/invoke", post(invoke))
        .merge(super::catalog::rest::routes())
        .fallback(not_found)
}
