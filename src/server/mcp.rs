//! The MCP server (rmcp): `tools/list` and `tools/call` written by hand over the engine's
//! registry, for stdio ([`serve_stdio`]) and for Streamable HTTP ([`http_service`]).
//!
//! Protocol rules kept here (see `../shared/notes/mcp-and-tool-names.md`):
//! - Revisions `2025-11-25` (preferred), `2025-06-18` and `2025-03-26`; `server/discover`
//!   (the stateless `2026-07-28` opener) and every unknown method get `-32601` at once, so
//!   new clients fall back to `initialize` without waiting.
//! - An unknown tool is a JSON-RPC error `-32602`; invalid arguments and failing tools are
//!   results with `isError: true` whose text is the engine's Observation line.
//! - `tools/list` pages with an opaque cursor over a stable (registration) order.
//! - With `_meta.progressToken`, `notifications/progress` is sent while the call runs
//!   (strictly increasing): one per unit of work that ends (each workflow node, nested
//!   calls included, through a [`CallObserver`]) with `progress` = units done and `total` =
//!   units known, plus a heartbeat every 250 ms (the first after 250 ms) that moves
//!   `progress` halfway to the next unit (never past it). A tool that reports its own
//!   progress (`api.tools.progress`) is the authority from then on: its values are sent
//!   and the heartbeat stops. `notifications/cancelled` cancels the call's token and
//!   drops the work.
//! - Messages a tool logs while a call runs (`api.log.*`) reach the calling session as
//!   `notifications/message` (logger = the plugin) at or above the session's
//!   `logging/setLevel` (`info` until set).
//! - MCP tasks (SEP-2663, the `io.modelcontextprotocol/tasks` extension, declared): when the
//!   client declares the extension, a `tools/call` still running after [`TASK_AFTER`]
//!   becomes a task (`resultType: "task"`), which is a job of the server's jobs store (the
//!   task id is the job id, also visible at `/api/jobs/{id}`); `tasks/get` answers its
//!   state and, once done, the `CallToolResult`; `tasks/cancel` cancels it like `DELETE`.

use std::borrow::Cow;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

// Logging (`logging/setLevel`) is deprecated in the 2026 revision but part of 2025-11-25.
#[allow(deprecated)]
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams,
    CompleteRequestParams, CompleteResult, ContentBlock, CreateTaskResult, CustomRequest,
    CustomResult, DetailedTask, DiscoverRequestMethod, DiscoverResult, GetPromptRequestParams,
    GetPromptResponse, GetPromptResult, GetTaskParams, GetTaskResult, Implementation,
    InitializeResult, ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult,
    ListToolsResult, LoggingLevel, LoggingMessageNotificationParam, PaginatedRequestParams,
    ProgressNotificationParam, ProtocolVersion, ReadResourceRequestParams, ReadResourceResponse,
    ReadResourceResult, ServerCapabilities, ServerConfig, SetLevelRequestParams,
    SubscribeRequestParams, Task, TaskPayload, TaskStatus, Tool as McpTool,
    UnsubscribeRequestParams, UpdateTaskParams,
};
use rmcp::model::{
    ClientJsonRpcMessage, ClientRequest, GetExtensions, GetMeta, RequestId, ServerJsonRpcMessage,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::transport::streamable_http_server::session::{SessionId, SessionRestoreMarker};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler, Service as _, ServiceExt};
use serde_json::{json, Value};
use std::collections::HashMap;

use axum::response::IntoResponse;

use super::export::{tool_json, ExportFormat};
use super::sessions::{BoundedSessions, Direct};
use super::Served;
use crate::tools::{CallObserver, Caller, LogLevel, NodeEvent, NodeState, ToolError};

/// Aborts a spawned call when the answer no longer waits for it (cancelled, dropped).
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// What a running MCP call reports to the loop that answers it.
enum Report {
    /// Workflow units: done, known, and which node ended.
    Units(u64, u64, String),
    /// The tool's own progress (`api.tools.progress`): done, total, message.
    Tool(f64, Option<f64>, Option<String>),
    /// A message the tool logged (`api.log.*`): level, plugin, text.
    Log(LogLevel, String, String),
    /// The heartbeat timer fired (never sent through the channel).
    Beat,
}

/// How many reports may wait for the answering loop; past it, reports are dropped (a
/// script logging in a tight loop must not grow the server's memory).
const REPORTS_QUEUED: usize = 1024;

/// Watches one MCP call: workflow units and the tool's own progress (when the client sent
/// a progress token), and logged messages at or above the session's level.
struct McpWatch {
    counts: std::sync::Mutex<(u64, u64)>,
    tx: tokio::sync::mpsc::Sender<Report>,
    progress: bool,
    min_level: Option<LogLevel>,
    /// The calling client, for `api.llm.chat` (sampling) and `api.ask` (elicitation).
    peer: rmcp::Peer<RoleServer>,
}

impl CallObserver for McpWatch {
    fn node(&self, ev: NodeEvent<'_>) {
        if !self.progress {
            return;
        }
        let mut c = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        match ev.state {
            NodeState::Pending => c.1 += 1,
            s if s.is_final() => {
                c.0 += 1;
                let msg = format!("{}: node {} {}", ev.workflow, ev.node, s.as_str());
                // Full or closed (the call has ended): the report is dropped.
                let _ = self.tx.try_send(Report::Units(c.0, c.1, msg));
            }
            _ => {}
        }
    }

    fn progress(&self, done: f64, total: Option<f64>, message: Option<&str>) {
        if self.progress && done.is_finite() {
            let _ = self.tx.try_send(Report::Tool(
                done,
                total.filter(|t| t.is_finite()),
                message.map(str::to_string),
            ));
        }
    }

    fn log(&self, level: LogLevel, source: &str, message: &str) {
        if self.min_level.is_some_and(|min| level >= min) {
            let _ = self
                .tx
                .try_send(Report::Log(level, source.to_string(), message.to_string()));
        }
    }

    fn client_request(&self, method: &str, params: Value) -> Option<crate::tools::ClientFuture> {
        Some(Box::pin(client_request(
            self.peer.clone(),
            method.to_string(),
            params,
        )))
    }
}

/// Sends a request (`sampling/createMessage`, `elicitation/create`) to the client behind
/// `peer` when it declared the capability, and answers its result as JSON.
pub(super) async fn client_request(
    peer: rmcp::Peer<RoleServer>,
    method: String,
    params: Value,
) -> Result<Value, String> {
    let unsupported = crate::script::UNSUPPORTED;
    let caps = peer.peer_info().map(|i| i.capabilities.clone());
    let (declared, capability) = match method.as_str() {
        "sampling/createMessage" => (
            caps.as_ref().is_some_and(|c| c.sampling.is_some()),
            "sampling",
        ),
        "elicitation/create" => {
            let url = params["mode"] == json!("url");
            let ok = caps
                .as_ref()
                .and_then(|c| c.elicitation.as_ref())
                .is_some_and(|e| {
                    // A client that declares `elicitation: {}` supports forms (2025-11-25).
                    let v = serde_json::to_value(e).unwrap_or_default();
                    if url {
                        v.get("url").is_some()
                    } else {
                        v.get("form").is_some() || v.get("url").is_none()
                    }
                });
            (
                ok,
                if url {
                    "elicitation (url mode)"
                } else {
                    "elicitation"
                },
            )
        }
        _ => (true, ""),
    };
    if !declared {
        return Err(format!(
            "{unsupported}: the MCP client did not declare the {capability} capability, so it cannot answer {method}"
        ));
    }
    let request =
        rmcp::model::ServerRequest::CustomRequest(CustomRequest::new(method.clone(), Some(params)));
    match peer.send_request(request).await {
        Ok(r) => serde_json::to_value(r)
            .map_err(|e| format!("{method}: the client's answer cannot be read: {e}")),
        Err(rmcp::ServiceError::McpError(e)) => Err(format!(
            "{method}: the client refused: {} ({})",
            e.message, e.code.0
        )),
        Err(e) => Err(format!("{method}: no answer from the client: {e}")),
    }
}

// Logging is deprecated in the 2026 revision (SEP-2577) but part of 2025-11-25, served here.
#[allow(deprecated)]
fn mcp_level(level: LogLevel) -> LoggingLevel {
    match level {
        LogLevel::Debug => LoggingLevel::Debug,
        LogLevel::Info => LoggingLevel::Info,
        LogLevel::Warning => LoggingLevel::Warning,
        LogLevel::Error => LoggingLevel::Error,
    }
}

/// The session's `logging/setLevel` as the lowest tool log level sent (`None`: none; MCP's
/// levels above `error` let nothing a tool logs through).
#[allow(deprecated)]
fn min_tool_level(level: &LoggingLevel) -> Option<LogLevel> {
    match level {
        LoggingLevel::Debug => Some(LogLevel::Debug),
        LoggingLevel::Info | LoggingLevel::Notice => Some(LogLevel::Info),
        LoggingLevel::Warning => Some(LogLevel::Warning),
        LoggingLevel::Error => Some(LogLevel::Error),
        _ => None,
    }
}

/// The next heartbeat value: halfway from `last` to the next whole unit.
fn heartbeat(last: f64) -> f64 {
    let next = last.floor() + 1.0;
    last + (next - last) / 2.0
}

/// How often progress is reported for a call that carries a progress token.
const PROGRESS_EVERY: Duration = Duration::from_millis(250);

/// How long a `tools/call` from a client that declared tasks runs before it turns into a
/// task (quicker calls answer directly).
pub const TASK_AFTER: Duration = Duration::from_millis(1000);

/// The poll interval suggested to task clients.
const TASK_POLL_MS: u64 = 500;

/// The MCP face of a [`Served`] engine. Cheap to clone: one per session.
#[derive(Clone)]
pub struct TavernMcp {
    served: Arc<Served>,
    /// The lowest level of tool logs sent as `notifications/message` (`logging/setLevel`;
    /// `info` until the client sets one).
    log_level: Arc<std::sync::Mutex<Option<LogLevel>>>,
    /// Over HTTP: the sessions to attach this session's direct handles to, and the
    /// server's cancel token (their parent).
    sessions: Option<(Arc<BoundedSessions>, tokio_util::sync::CancellationToken)>,
    /// Calls of this session answered by the direct path, by request id, so
    /// `notifications/cancelled` reaches them as it reaches rmcp's own.
    direct_calls: Arc<std::sync::Mutex<HashMap<RequestId, tokio_util::sync::CancellationToken>>>,
    /// The resources this session subscribed to (`resources/subscribe`).
    subscriptions: Arc<std::sync::Mutex<std::collections::HashSet<String>>>,
}

impl TavernMcp {
    /// An MCP handler over `served`.
    pub fn new(served: Arc<Served>) -> Self {
        TavernMcp {
            served,
            log_level: Arc::new(std::sync::Mutex::new(Some(LogLevel::Info))),
            sessions: None,
            direct_calls: Arc::default(),
            subscriptions: Arc::default(),
        }
    }

    fn direct_calls(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<RequestId, tokio_util::sync::CancellationToken>> {
        // Entries are inserted and removed whole: a poisoned map is still valid.
        self.direct_calls.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn caller() -> Caller {
        Caller::Remote("mcp".into())
    }

    fn subscriptions(&self) -> std::sync::MutexGuard<'_, std::collections::HashSet<String>> {
        // Strings inserted and removed whole: a poisoned set is still valid.
        self.subscriptions.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Forwards `api.resources.notify` (and reloads) to this session for the uris it
    /// subscribed to, until its transport closes.
    fn watch_resources(&self, peer: rmcp::Peer<RoleServer>) {
        let subs = self.subscriptions.clone();
        let mut rx = crate::tools::resource_updates().subscribe();
        tokio::spawn(async move {
            let mut check = tokio::time::interval(Duration::from_secs(5));
            loop {
                tokio::select! {
                    r = rx.recv() => match r {
                        Ok(uri) => {
                            let wanted = subs.lock().unwrap_or_else(|p| p.into_inner()).contains(&uri);
                            if wanted && peer.notify_resource_updated(rmcp::model::ResourceUpdatedNotificationParam::new(uri)).await.is_err() {
                                break;
                            }
                        }
                        Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                        Err(_) => break,
                    },
                    _ = check.tick() => {
                        if peer.is_transport_closed() {
                            break;
                        }
                    }
                }
            }
        });
    }
}

/// A catalog error as the JSON-RPC error MCP gives it.
fn catalog_error(e: super::catalog::CatalogError, resource: bool) -> McpError {
    use super::catalog::CatalogError as E;
    match e {
        E::NotFound(m) if resource => McpError::resource_not_found(m, None),
        E::NotFound(m) | E::Invalid(m) => McpError::invalid_params(m, None),
        E::Failed(m) => McpError::internal_error(m, None),
    }
}

/// A JSON value as an rmcp result type (the catalog builds JSON; rmcp's types check it).
fn typed<T: serde::de::DeserializeOwned>(v: Value) -> Result<T, McpError> {
    serde_json::from_value(v).map_err(|e| {
        McpError::internal_error(
            format!("the answer does not have the shape MCP gives it: {e}"),
            None,
        )
    })
}

/// The revisions `initialize` agrees to, oldest first (`2025-11-25` preferred).
pub fn supported_versions() -> Vec<ProtocolVersion> {
    vec![
        ProtocolVersion::V_2025_03_26,
        ProtocolVersion::V_2025_06_18,
        ProtocolVersion::V_2025_11_25,
    ]
}

/// What rmcp is told the server accepts: the `initialize` revisions plus `2026-07-28`, whose
/// requests carry their version in `_meta`. Without it rmcp answers such a request (the
/// `server/discover` opener) with "unsupported protocol version" (-32022) before our handler
/// runs; with it, `discover` reaches [`TavernMcp`], which refuses it with -32601 as clients
/// expect of a server that does not speak that revision. `initialize` never negotiates
/// 2026-07-28 (it has no handshake).
fn accepted_versions() -> Vec<ProtocolVersion> {
    let mut v = supported_versions();
    v.push(ProtocolVersion::V_2026_07_28);
    v
}

/// The `initialize` answer: tavern's own identity (not rmcp's), tools with `listChanged`,
/// logging.
pub fn server_config() -> ServerConfig {
    // A fixed literal of the capabilities schema: it always deserializes.
    let caps: ServerCapabilities = serde_json::from_value(json!({
        "tools": {"listChanged": true},
        "resources": {"subscribe": true, "listChanged": true},
        "prompts": {"listChanged": true},
        "completions": {},
        "logging": {},
        "extensions": {"io.modelcontextprotocol/tasks": {}},
    }))
    .unwrap_or_default();
    let mut info = InitializeResult::new(caps);
    info.protocol_version = ProtocolVersion::V_2025_11_25;
    info.server_info =
        Implementation::new("tavern", env!("CARGO_PKG_VERSION")).with_title("tavern tool engine");
    info.instructions = Some(
        "Tools served by a tavern engine. Each tool's title is its display name and \
         _meta[\"tavern/id\"] its canonical tavern id; either the name or the id may be \
         used to call it."
            .into(),
    );
    info
}

/// The id of a `tools/call`: the one its `_meta["tavern/call_id"]` gives (say the id of
/// the model's call the client is answering), else `call_0`, the id the reader gives a
/// lone call.
fn mcp_call_id(context: &RequestContext<RoleServer>) -> String {
    match context.meta.get("tavern/call_id") {
        Some(Value::String(s)) => s.clone(),
        Some(v @ Value::Number(_)) => v.to_string(),
        _ => "call_0".to_string(),
    }
}

/// A `tools/call` result carrying the call's id: as `call_id` in its `structuredContent`
/// (an object the tool returned, unless it has a `call_id` of its own) and as
/// `_meta["tavern/call_id"]` (every result, failures included).
pub fn with_call_id(mut r: CallToolResult, id: &str) -> CallToolResult {
    if let Some(Value::Object(m)) = &mut r.structured_content {
        m.entry("call_id").or_insert_with(|| json!(id));
    }
    let mut meta = r.meta.take().unwrap_or_default();
    meta.0.insert("tavern/call_id".into(), json!(id));
    r.meta = Some(meta);
    r
}

/// A result value as MCP content: a value shaped `{"content": [blocks]}` (every block with
/// an MCP `type`) is sent as those blocks; any other value as one text block (a string bare,
/// anything else as JSON), objects also as `structuredContent`.
pub fn result_content(v: Value) -> CallToolResult {
    if let Some(blocks) = as_content_blocks(&v) {
        return CallToolResult::success(blocks);
    }
    match v {
        Value::String(s) => CallToolResult::success(vec![ContentBlock::text(s)]),
        Value::Object(_) => {
            let mut r = CallToolResult::success(vec![ContentBlock::text(v.to_string())]);
            r.structured_content = Some(v);
            r
        }
        other => CallToolResult::success(vec![ContentBlock::text(other.to_string())]),
    }
}

fn as_content_blocks(v: &Value) -> Option<Vec<ContentBlock>> {
    let obj = v.as_object()?;
    if obj.len() != 1 {
        return None;
    }
    let blocks = obj.get("content")?.as_array()?;
    const KINDS: [&str; 5] = ["text", "image", "audio", "resource", "resource_link"];
    let typed = blocks.iter().all(|b| {
        b.get("type")
            .and_then(Value::as_str)
            .is_some_and(|t| KINDS.contains(&t))
    });
    if !typed || blocks.is_empty() {
        return None;
    }
    serde_json::from_value(Value::Array(blocks.clone())).ok()
}

/// The call's warnings (each argument read loosely) as text blocks after the result, one
/// per warning: `warning: argument 'guestName' read as 'guest_name'`. In `content`, not
/// `_meta`, so that a model reading the result through any client learns the name; the
/// result's own blocks (and `structuredContent`) come first and are unchanged.
fn with_warnings(r: &mut CallToolResult, warnings: &[String]) {
    for w in warnings {
        r.content.push(ContentBlock::text(format!("warning: {w}")));
    }
}

/// A failed call as the model should read it: `isError: true` and the Observation line.
pub fn error_result(e: &ToolError) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(e.observation())])
}

fn unknown_tool(e: &ToolError) -> McpError {
    McpError::invalid_params(e.to_string(), Some(json!({"code": e.code()})))
}

impl ServerHandler for TavernMcp {
    fn get_info(&self) -> ServerConfig {
        server_config()
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Owned(accepted_versions())
    }

    async fn discover(
        &self,
        _context: RequestContext<RoleServer>,
    ) -> Result<DiscoverResult, McpError> {
        // Not a 2026-07-28 server: refuse at once so the client falls back to initialize.
        Err(McpError::method_not_found::<DiscoverRequestMethod>())
    }

    #[allow(deprecated)]
    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        *self.log_level.lock().unwrap_or_else(|p| p.into_inner()) = min_tool_level(&request.level);
        Ok(())
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let engine = self.served.engine();
        // The model-facing list (`node:*` tools only with `tools.list_nodes = true`), then
        // the home's agents (`agent_<id>`, served only here).
        let all = engine.tools().model_list();
        let agents = super::mcp_agents::listed(&engine);
        let len = all.len() + agents.len();
        let start = match request.and_then(|r| r.cursor) {
            None => 0,
            Some(c) => c
                .parse::<usize>()
                .ok()
                .filter(|n| *n <= len)
                .ok_or_else(|| {
                    McpError::invalid_params(
                        format!("invalid cursor '{c}': use the nextCursor of the previous page"),
                        None,
                    )
                })?,
        };
        let page = self.served.options.page_size.max(1);
        let end = (start + page).min(len);
        let mut tools = Vec::with_capacity(end - start);
        for i in start..end {
            let (json, id) = match all.get(i) {
                Some(t) => (tool_json(t, ExportFormat::Mcp), t.id()),
                None => {
                    let (name, id) = &agents[i - all.len()];
                    (
                        super::mcp_agents::tool_json(&engine, name, id),
                        name.as_str(),
                    )
                }
            };
            match serde_json::from_value::<McpTool>(json) {
                Ok(m) => tools.push(m),
                Err(e) => tracing::warn!(tool = id, "tool left out of tools/list: {e}"),
            }
        }
        let mut result = ListToolsResult::with_all_items(tools);
        if end < len {
            result.next_cursor = Some(end.to_string());
        }
        Ok(result)
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        typed(json!({"resources": super::catalog::list_resources(&self.served)}))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        typed(json!({"resourceTemplates": super::catalog::list_templates(&self.served)}))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let contents = super::catalog::read_resource(&self.served, &request.uri)
            .await
            .map_err(|e| catalog_error(e, true))?;
        let r: ReadResourceResult = typed(json!({"contents": contents}))?;
        Ok(r.into())
    }

    #[allow(deprecated)] // resources/subscribe is part of 2025-11-25, served here.
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.subscriptions().insert(request.uri);
        Ok(())
    }

    #[allow(deprecated)]
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.subscriptions().remove(&request.uri);
        Ok(())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        typed(json!({"prompts": super::catalog::list_prompts(&self.served)}))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        let v = super::catalog::get_prompt(
            &self.served,
            &request.name,
            request.arguments.unwrap_or_default(),
        )
        .await
        .map_err(|e| catalog_error(e, false))?;
        let r: GetPromptResult = typed(v)?;
        Ok(r.into())
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        let reference = serde_json::to_value(&request.r#ref).unwrap_or_default();
        let context = request
            .context
            .as_ref()
            .and_then(|c| serde_json::to_value(c).ok())
            .and_then(|c| c.get("arguments").and_then(Value::as_object).cloned())
            .unwrap_or_default();
        let mut values = super::catalog::complete(
            &self.served,
            &reference,
            &request.argument.name,
            &request.argument.value,
            &context,
        )
        .await
        .map_err(|e| catalog_error(e, false))?;
        // MCP allows at most 100 values per answer.
        let total = values.len();
        values.truncate(100);
        typed(json!({"completion": {"values": values, "total": total, "hasMore": total > 100}}))
    }

    #[allow(deprecated)] // notifications/message: see `mcp_level`.
    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let engine = self.served.engine();
        // A Rust host tool (`system:*`, tools an embedder registers) runs in place: it does not
        // block the task between reports, and it keeps the plain call's path short.
        let mut agent = None;
        let in_place = match engine.tools().get(&request.name) {
            Err(e) => match super::mcp_agents::find(&engine, &request.name) {
                // One of the home's agents (`agent_<id>`): its loop on a task of its own.
                Some(id) => {
                    agent = Some(id);
                    false
                }
                None => return Err(unknown_tool(&e)),
            },
            Ok(t) => matches!(
                t.definition.implementation,
                crate::tools::Implementation::Service {
                    script: None,
                    function: None
                }
            ),
        };
        drop(engine);
        let args = Value::Object(request.arguments.unwrap_or_default());
        let call_id = mcp_call_id(&context);
        if agent.is_none()
            && context
                .client_capabilities()
                .is_some_and(|c| c.supports_tasks())
        {
            return self
                .call_as_task(&request.name, args, &context, call_id)
                .await;
        }
        let ct = context.ct.clone();
        let progress = context.meta.get_progress_token();
        let min_level = *self.log_level.lock().unwrap_or_else(|p| p.into_inner());
        let (tx, mut reports) = tokio::sync::mpsc::channel(REPORTS_QUEUED);
        let observer: crate::tools::Observer = Some(Arc::new(McpWatch {
            counts: std::sync::Mutex::new((0, 0)),
            tx,
            progress: progress.is_some(),
            min_level,
            peer: context.peer.clone(),
        }) as Arc<dyn CallObserver>);
        // Any other call runs on a task of its own: a script tool blocks the thread it runs
        // on until it returns, and this loop must send its progress and logs meanwhile.
        let mut _abort = None;
        let call = if in_place {
            futures_util::future::Either::Left(self.served.invoke_with_id(
                &request.name,
                args,
                Self::caller(),
                ct.clone(),
                observer,
                Some(call_id.clone()),
            ))
        } else {
            let (served, name, ct) = (self.served.clone(), request.name.to_string(), ct.clone());
            let peer = context.peer.clone();
            let id = call_id.clone();
            let task = tokio::spawn(async move {
                match agent {
                    Some(agent) => (
                        super::mcp_agents::run(served, name, agent, args, peer, ct).await,
                        Vec::new(),
                    ),
                    None => {
                        served
                            .invoke_with_id(&name, args, Self::caller(), ct, observer, Some(id))
                            .await
                    }
                }
            });
            _abort = Some(AbortOnDrop(task.abort_handle()));
            futures_util::future::Either::Right(async move {
                match task.await {
                    Ok(r) => r,
                    Err(e) => (
                        Err(ToolError::failed(
                            "mcp",
                            format!("the call's task ended: {e}"),
                        )),
                        Vec::new(),
                    ),
                }
            })
        };
        let mut call = pin!(call);
        // Heartbeats start after the first interval, and stop for good once the tool
        // reports its own progress (it knows better than a timer).
        let mut tick =
            tokio::time::interval_at(tokio::time::Instant::now() + PROGRESS_EVERY, PROGRESS_EVERY);
        let mut own_progress = false;
        // Every value sent is strictly larger than the one before.
        let mut last: Option<f64> = None;
        let mut total: Option<f64> = None;
        let mut ended = None;
        let result = loop {
            let report = if let Some(r) = ended.take() {
                // The call is over: send what it reported last, then answer.
                match reports.try_recv() {
                    Ok(rep) => {
                        ended = Some(r);
                        rep
                    }
                    Err(_) => break r,
                }
            } else {
                tokio::select! {
                    r = &mut call => { ended = Some(r); continue; }
                    _ = ct.cancelled() => break (Err(ToolError::Cancelled { tool: request.name.to_string() }), Vec::new()),
                    Some(rep) = reports.recv() => rep,
                    _ = tick.tick(), if progress.is_some() && !own_progress => Report::Beat,
                }
            };
            let (value, message) = match report {
                Report::Log(level, source, text) => {
                    let mut m = LoggingMessageNotificationParam::new(mcp_level(level), json!(text));
                    m.logger = Some(source);
                    let _ = context.peer.notify_logging_message(m).await;
                    continue;
                }
                Report::Tool(done, t, msg) => {
                    own_progress = true;
                    total = t;
                    (
                        done,
                        msg.unwrap_or_else(|| format!("{} running", request.name)),
                    )
                }
                // Halfway to the next unit.
                Report::Beat => (
                    last.map_or(0.0, heartbeat),
                    format!("{} running", request.name),
                ),
                Report::Units(done, known, msg) if !own_progress => {
                    total = Some(known as f64);
                    (done as f64, msg)
                }
                Report::Units(..) => continue,
            };
            let Some(token) = &progress else { continue };
            if last.is_some_and(|l| value <= l) {
                continue;
            }
            last = Some(value);
            let mut p = ProgressNotificationParam::new(token.clone(), value);
            p.total = total;
            p.message = Some(message);
            let _ = context.peer.notify_progress(p).await;
        };
        let (result, warnings) = result;
        let mut answer = match result {
            Ok(v) => result_content(v),
            Err(e @ ToolError::UnknownTool { .. }) => return Err(unknown_tool(&e)),
            Err(e) => error_result(&e),
        };
        with_warnings(&mut answer, &warnings);
        Ok(with_call_id(answer, &call_id).into())
    }

    /// Requests rmcp could not read as what their method names: a `tools/call` (or another
    /// known method) whose params have the wrong shape gets -32602 saying what is wrong;
    /// anything else is an unknown method, -32601.
    async fn on_custom_request(
        &self,
        request: CustomRequest,
        _context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, McpError> {
        let CustomRequest { method, params, .. } = request;
        match method.as_str() {
            "tools/call" => Err(McpError::invalid_params(
                bad_call_params(params.as_ref()),
                Some(json!({"code": "invalid_request"})),
            )),
            "tools/list" | "initialize" | "logging/setLevel" | "tasks/get" | "tasks/cancel"
            | "tasks/update" | "ping" => Err(McpError::invalid_params(
                format!("the params of {method} do not have the shape its schema gives"),
                None,
            )),
            _ => Err(McpError::new(
                rmcp::model::ErrorCode::METHOD_NOT_FOUND,
                method,
                None,
            )),
        }
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        // Over HTTP the session is now ready for the direct `tools/call` path; its id is
        // the header of the POST that carried this notification (or the restore marker).
        if let Some((sessions, cancel)) = &self.sessions {
            let id = context
                .extensions
                .get::<SessionRestoreMarker>()
                .map(|m| m.id.clone())
                .or_else(|| {
                    context
                        .extensions
                        .get::<axum::http::request::Parts>()
                        .and_then(|p| p.headers.get(SESSION_HEADER))
                        .and_then(|v| v.to_str().ok())
                        .map(SessionId::from)
                });
            if let Some(id) = id {
                sessions.attach(
                    &id,
                    Direct {
                        mcp: self.clone(),
                        peer: context.peer.clone(),
                        ct: cancel.child_token(),
                    },
                );
            }
        }
        self.watch_resources(context.peer.clone());
        self.served.add_peer(context.peer);
    }

    async fn on_cancelled(
        &self,
        notification: rmcp::model::CancelledNotificationParam,
        _context: NotificationContext<RoleServer>,
    ) {
        // rmcp cancels the calls it runs itself; these are the direct path's.
        if let Some(id) = &notification.request_id {
            if let Some(ct) = self.direct_calls().remove(id) {
                ct.cancel();
            }
        }
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, McpError> {
        #[cfg(feature = "store-redis")]
        if let Some(jobs) = self.served.shared_jobs() {
            let r = shared_task(jobs, &request.task_id).await?;
            return Ok(GetTaskResult::new(self.detailed_task_json(&r)));
        }
        let job = self.task_job(&request.task_id)?;
        Ok(GetTaskResult::new(self.detailed_task(&job)))
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        // tavern tools never ask the client for input mid-task: nothing to accept.
        #[cfg(feature = "store-redis")]
        if let Some(jobs) = self.served.shared_jobs() {
            shared_task(jobs, &request.task_id).await?;
        } else {
            self.task_job(&request.task_id)?;
        }
        #[cfg(not(feature = "store-redis"))]
        self.task_job(&request.task_id)?;
        Err(McpError::invalid_params(
            format!(
                "task '{}' has no outstanding input requests",
                request.task_id
            ),
            None,
        ))
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        #[cfg(feature = "store-redis")]
        if let Some(jobs) = self.served.shared_jobs() {
            shared_task(jobs, &request.task_id).await?;
            let (jobs, id) = (jobs.clone(), request.task_id.clone());
            // The record ends when the running replica has stopped the work.
            tokio::spawn(async move { jobs.cancel(&id).await });
            return Ok(());
        }
        let job = self.task_job(&request.task_id)?;
        job.cancel.cancel();
        Ok(())
    }
}

/// What is wrong with the params of a `tools/call` rmcp could not read.
fn bad_call_params(params: Option<&Value>) -> String {
    let kind = |v: &Value| match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    };
    let Some(Value::Object(p)) = params else {
        return format!(
            "tools/call needs params {{\"name\": <tool>, \"arguments\": {{…}}}}, not {}",
            params.map_or("nothing", kind)
        );
    };
    match p.get("name") {
        None => return "tools/call needs `name`: the tool to call".to_string(),
        Some(Value::String(_)) => {}
        Some(other) => {
            return format!(
                "`name` of tools/call must be a string (the tool's name), not {}",
                kind(other)
            )
        }
    }
    match p.get("arguments") {
        Some(a) if !a.is_object() && !a.is_null() => format!(
            "`arguments` of tools/call must be an object (the tool's parameters by name), not {}",
            kind(a)
        ),
        _ => "the params of tools/call do not have the shape its schema gives ({\"name\", \"arguments\"})".to_string(),
    }
}

fn iso(ms: u64) -> String {
    chrono::DateTime::from_timestamp_millis(ms as i64)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
        .unwrap_or_default()
}

impl TavernMcp {
    /// Runs a call as a job; answers directly when it ends within [`TASK_AFTER`], else
    /// with the task handle.
    async fn call_as_task(
        &self,
        tool: &str,
        args: Value,
        context: &RequestContext<RoleServer>,
        call_id: String,
    ) -> Result<CallToolResponse, McpError> {
        let prepared = super::rest::Prepared::call(&self.served, tool, args)
            .map_err(|e| McpError::invalid_params(e.message, Some(json!({"code": e.code}))))?
            .with_caller(Self::caller())
            .with_call_id(call_id);
        #[cfg(feature = "store-redis")]
        if let Some(jobs) = self.served.shared_jobs() {
            return self.shared_call_as_task(jobs, prepared, context).await;
        }
        let job = self.served.jobs().create().map_err(|e| {
            let code = super::jobs::routes::refused(&e).code;
            McpError::internal_error(e.to_string(), Some(json!({ "code": code })))
        })?;
        super::jobs::routes::spawn(self.served.clone(), job.clone(), prepared);
        tokio::select! {
            _ = job.ended(TASK_AFTER) => {}
            // The client gave up before the task existed: stop the work.
            _ = context.ct.cancelled() => {
                job.cancel.cancel();
                return Err(McpError::internal_error("the call was cancelled", None));
            }
        }
        let detailed = self.detailed_task(&job);
        match detailed.payload {
            TaskPayload::Completed { result } => {
                let r: CallToolResult = serde_json::from_value(Value::Object(result))
                    .map_err(|e| McpError::internal_error(e.to_string(), None))?;
                Ok(r.into())
            }
            _ => Ok(CallToolResponse::Task(CreateTaskResult::new(detailed.task))),
        }
    }

    /// The job behind task `id`, or the error its id answers.
    fn task_job(&self, id: &str) -> Result<Arc<super::jobs::Job>, McpError> {
        use super::jobs::Lookup;
        match self.served.jobs().get(id) {
            Lookup::Found(j) => Ok(j),
            Lookup::Expired => Err(McpError::invalid_params(
                format!("task '{id}' ended and was removed (its time to live passed)"),
                Some(json!({"code": "job_expired"})),
            )),
            Lookup::Lost { .. } => Err(McpError::invalid_params(
                format!("task '{id}' was lost when the server restarted"),
                Some(json!({"code": "job_lost"})),
            )),
            Lookup::Unknown => Err(McpError::invalid_params(
                format!("no task '{id}' on this server"),
                Some(json!({"code": "unknown_job"})),
            )),
        }
    }

    /// A job as an MCP task: running → working; ended with a report → completed with the
    /// call's `CallToolResult` (a failing tool is a completed task whose result has
    /// `isError`); cancelled → cancelled; ended without a report → failed.
    fn detailed_task(&self, job: &super::jobs::Job) -> DetailedTask {
        self.detailed_task_json(&job.to_json())
    }

    /// A job's record (as `GET /api/jobs/{id}` shows it) as an MCP task.
    fn detailed_task_json(&self, j: &Value) -> DetailedTask {
        let id = j["id"].as_str().unwrap_or_default();
        let created = j["created_ms"].as_u64().unwrap_or(0);
        let updated = j["ended_ms"]
            .as_u64()
            .or(j["started_ms"].as_u64())
            .unwrap_or(created);
        let mut task = Task::new(id, TaskStatus::Working, iso(created), iso(updated))
            .with_ttl_ms(self.served.options.job_ttl.as_millis() as u64)
            .with_poll_interval_ms(TASK_POLL_MS);
        if let Some(m) = j["progress"]["message"].as_str() {
            task = task.with_status_message(m);
        }
        let first = &j["result"]["results"][0];
        let payload = match j["status"].as_str().unwrap_or("queued") {
            "queued" | "running" => TaskPayload::Working,
            "cancelled" => TaskPayload::Cancelled,
            _ if first.is_object() => {
                let mut r = if first["ok"] == Value::Bool(true) {
                    result_content(first["value"].clone())
                } else {
                    let text = first["observation"].as_str().unwrap_or_default();
                    CallToolResult::error(vec![ContentBlock::text(text)])
                };
                // The job's record keeps the call's warnings as `tavern call` prints them.
                let warnings: Vec<String> = first["warnings"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(|w| w.as_str().map(str::to_string))
                            .collect()
                    })
                    .unwrap_or_default();
                with_warnings(&mut r, &warnings);
                let r = match first["call_id"].as_str() {
                    Some(id) => with_call_id(r, id),
                    None => r,
                };
                match serde_json::to_value(r) {
                    Ok(Value::Object(result)) => TaskPayload::Completed { result },
                    _ => TaskPayload::Failed {
                        error: failed_object("the result could not be encoded"),
                    },
                }
            }
            _ => {
                let msg = j["error"]["message"].as_str().unwrap_or("the task failed");
                TaskPayload::Failed {
                    error: failed_object(msg),
                }
            }
        };
        DetailedTask::new(task, payload)
    }
}

/// The record of task `id` in the shared store, or the error its id answers.
#[cfg(feature = "store-redis")]
async fn shared_task(jobs: &super::jobs::redis::RedisJobs, id: &str) -> Result<Value, McpError> {
    match jobs.get(id).await {
        Ok(Some(r)) => Ok(r),
        Ok(None) => Err(McpError::invalid_params(
            format!("no task '{id}' in the shared store (never made, or expired)"),
            Some(json!({"code": "unknown_job"})),
        )),
        Err(e) => Err(McpError::internal_error(
            e.to_string(),
            Some(json!({"code": e.code()})),
        )),
    }
}

#[cfg(feature = "store-redis")]
impl TavernMcp {
    /// [`TavernMcp::call_as_task`] with the job queued in the shared store (any replica
    /// may run it, and answer `tasks/get` and `tasks/cancel`).
    async fn shared_call_as_task(
        &self,
        jobs: &Arc<super::jobs::redis::RedisJobs>,
        prepared: super::rest::Prepared,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let store_err = |e: crate::store::StoreError| {
            McpError::internal_error(e.to_string(), Some(json!({"code": e.code()})))
        };
        // A budget refusal answers as on the in-memory path (its code, e.g.
        // `job_budget_exceeded`), not as a store failure.
        let id = jobs
            .admit(prepared)
            .await
            .map_err(store_err)?
            .map_err(|e| {
                let code = super::jobs::routes::refused(&e).code;
                McpError::internal_error(e.to_string(), Some(json!({ "code": code })))
            })?;
        let until = tokio::time::Instant::now() + TASK_AFTER;
        let record = loop {
            let r = shared_task(jobs, &id).await?;
            if super::jobs::redis::ended(&r) || tokio::time::Instant::now() >= until {
                break r;
            }
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(20)) => {}
                // The client gave up before the task existed: stop the work.
                _ = context.ct.cancelled() => {
                    let (jobs, id) = (jobs.clone(), id.clone());
                    tokio::spawn(async move { jobs.cancel(&id).await });
                    return Err(McpError::internal_error("the call was cancelled", None));
                }
            }
        };
        let detailed = self.detailed_task_json(&record);
        match detailed.payload {
            TaskPayload::Completed { result } => {
                let r: CallToolResult = serde_json::from_value(Value::Object(result))
                    .map_err(|e| McpError::internal_error(e.to_string(), None))?;
                Ok(r.into())
            }
            _ => Ok(CallToolResponse::Task(CreateTaskResult::new(detailed.task))),
        }
    }
}

/// A JSON-RPC error object (internal error) for a failed task.
fn failed_object(message: &str) -> serde_json::Map<String, Value> {
    match json!({"code": -32603, "message": message}) {
        Value::Object(m) => m,
        _ => serde_json::Map::new(),
    }
}

/// Serves MCP on stdin/stdout until the client closes the stream. Nothing else may write
/// to stdout meanwhile (logs go to stderr).
///
/// Lines pass through a small relay: a line that is not JSON is answered with a JSON-RPC
/// parse error (-32700, `id` null) instead of being skipped without a word (rmcp's stdio
/// reader drops it), and the answer goes out between whole lines of rmcp's own output.
pub async fn serve_stdio(served: Arc<Served>) -> Result<(), std::io::Error> {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    const PIPE: usize = 64 * 1024;
    let (mut to_rmcp, rmcp_in) = tokio::io::duplex(PIPE);
    let (rmcp_out, from_rmcp) = tokio::io::duplex(PIPE);
    let (err_tx, mut err_rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    let input = tokio::spawn(async move {
        let mut stdin = BufReader::new(tokio::io::stdin());
        let mut line = Vec::new();
        loop {
            line.clear();
            match stdin.read_until(b'\n', &mut line).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            if let Err(e) = serde_json::from_slice::<serde::de::IgnoredAny>(&line) {
                let answer = json!({"jsonrpc": "2.0", "id": null, "error": {
                    "code": -32700,
                    "message": format!("Parse error: the line is not JSON ({e})"),
                }});
                let _ = err_tx.send(answer.to_string());
                continue;
            }
            if !line.ends_with(b"\n") {
                line.push(b'\n');
            }
            if to_rmcp.write_all(&line).await.is_err() {
                break;
            }
        }
        // End of input: rmcp sees its input close and ends the session.
    });
    let output = tokio::spawn(async move {
        let mut stdout = tokio::io::stdout();
        let mut lines = BufReader::new(from_rmcp);
        let mut line = Vec::new();
        let mut errors_open = true;
        loop {
            tokio::select! {
                // Cancel-safe: a line cut short by the other branch stays in `line` and
                // the next call goes on with it.
                r = lines.read_until(b'\n', &mut line) => match r {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        if stdout.write_all(&line).await.is_err() {
                            break;
                        }
                        line.clear();
                    }
                },
                e = err_rx.recv(), if errors_open => match e {
                    Some(e) => {
                        if stdout.write_all(format!("{e}\n").as_bytes()).await.is_err() {
                            break;
                        }
                    }
                    None => errors_open = false,
                },
            }
            let _ = stdout.flush().await;
        }
        let _ = stdout.flush().await;
    });
    let service = TavernMcp::new(served)
        .serve((rmcp_in, rmcp_out))
        .await
        .map_err(std::io::Error::other)?;
    let r = service.waiting().await.map_err(std::io::Error::other);
    input.abort();
    let _ = output.await;
    r.map(|_| ())
}

/// The Streamable HTTP service for `/mcp`: a session per client, at most
/// `--max-sessions` of them ([`BoundedSessions`]); `cancel` ends them all.
pub fn http_service(
    served: Arc<Served>,
    allowed_hosts: Vec<String>,
    cancel: tokio_util::sync::CancellationToken,
) -> McpHttp {
    let max_body = served.options.max_body_bytes;
    let config = rmcp::transport::StreamableHttpServerConfig::default()
        .with_allowed_hosts(allowed_hosts)
        .with_cancellation_token(cancel.clone())
        .with_max_request_body_bytes(max_body);
    // With a shared store, a session begun on one replica is restored on any other.
    #[cfg(feature = "store-redis")]
    let config = {
        let mut config = config;
        if let Some(sh) = served.shared() {
            config.session_store = Some(Arc::new(super::shared::SessionsInStore(sh.store.clone())));
        }
        config
    };
    #[cfg(feature = "store-redis")]
    let restorable = config.session_store.is_some();
    #[cfg(not(feature = "store-redis"))]
    let restorable = false;
    let sessions = BoundedSessions::new(served.options.max_sessions);
    // With a shared store, SSE events are kept there: `Last-Event-ID` replays on any replica.
    #[cfg(feature = "store-redis")]
    let sessions = match served.shared() {
        Some(sh) => {
            sessions.with_event_store(Arc::new(super::shared::EventsInStore(sh.store.clone())))
        }
        None => sessions,
    };
    let sessions = Arc::new(sessions);
    let factory = {
        let sessions = sessions.clone();
        move || {
            let mut mcp = TavernMcp::new(served.clone());
            mcp.sessions = Some((sessions.clone(), cancel.clone()));
            Ok(mcp)
        }
    };
    McpHttp(Arc::new(McpHttpInner {
        rmcp: rmcp::transport::StreamableHttpService::new(factory, sessions.clone(), config),
        sessions,
        max_body,
        restorable,
    }))
}

const SESSION_HEADER: &str = "mcp-session-id";
const VERSION_HEADER: &str = "mcp-protocol-version";

/// `/mcp`: rmcp's Streamable HTTP service, with one direct path beside it.
///
/// rmcp answers a POST of a session through the session's worker: two round trips to the
/// worker task to open a response channel and push the message, a hop to the session's
/// service loop, a task spawned for the handler, the answer back through the loop and the
/// worker, and an SSE response of two chunks (priming event, message) on a keep-alive
/// timer (BENCHMARKS.md, "Where MCP's extra cost went"). A plain `tools/call` of a
/// session whose client has sent `notifications/initialized` is answered here instead,
/// as `application/json` (which the Streamable HTTP transport allows for any POST): the
/// same handler ([`TavernMcp`] through rmcp's own request dispatch), the same session's
/// peer, so the same result, errors, tasks, logs, hooks and audit. Everything else — other
/// methods, notifications, a session this replica does not hold, a protocol version
/// header that is not one of the session revisions, a request carrying a progress token
/// or a per-request protocol version, an `Accept` or `Content-Type` that is not the plain
/// pair, a body without `Content-Length` — goes to rmcp untouched (its checks, its errors).
#[derive(Clone)]
pub struct McpHttp(Arc<McpHttpInner>);

struct McpHttpInner {
    rmcp: rmcp::transport::StreamableHttpService<TavernMcp, BoundedSessions>,
    sessions: Arc<BoundedSessions>,
    max_body: usize,
    /// Whether sessions this replica does not hold may be restored (a shared store).
    restorable: bool,
}

impl tower::Service<axum::extract::Request> for McpHttp {
    type Response = axum::response::Response;
    type Error = std::convert::Infallible;
    type Future = futures_util::future::BoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn poll_ready(
        &mut self,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: axum::extract::Request) -> Self::Future {
        // Each path is its own future: the direct one does not carry rmcp's (large) one.
        let this = self.0.clone();
        match this.direct_session(&req) {
            Some(id) => Box::pin(async move { Ok(this.handle(id, req).await) }),
            None => Box::pin(async move { Ok(this.pass(req).await) }),
        }
    }
}

/// A JSON-RPC error (`id` null) as an HTTP answer with `status`.
fn rpc_error(status: axum::http::StatusCode, code: i64, message: &str) -> axum::response::Response {
    let body = json!({"jsonrpc": "2.0", "id": null, "error": {"code": code, "message": message}});
    (
        status,
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// Whether an `Accept` header lists `ty` plainly (no parameters, so no `q=0`).
fn accepts(headers: &axum::http::HeaderMap, ty: &str) -> bool {
    headers
        .get_all(axum::http::header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|e| e.trim().eq_ignore_ascii_case(ty))
}

impl McpHttpInner {
    /// The session a request may be answered directly for: a POST of plain JSON naming a
    /// session, with a declared length within the limit and a session revision (or none,
    /// which rmcp reads as 2025-03-26).
    fn direct_session(&self, req: &axum::extract::Request) -> Option<SessionId> {
        if req.method() != axum::http::Method::POST {
            return None;
        }
        let h = req.headers();
        if !(accepts(h, "application/json") && accepts(h, "text/event-stream")) {
            return None;
        }
        let json = h
            .get(axum::http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| {
                let essence = v.split(';').next().unwrap_or("").trim();
                essence.eq_ignore_ascii_case("application/json")
            });
        let length = h
            .get(axum::http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<usize>().ok());
        if !json || length.is_none_or(|n| n > self.max_body) {
            return None;
        }
        let session_revision = match h.get(VERSION_HEADER) {
            None => true,
            Some(v) => supported_versions()
                .iter()
                .any(|s| v.as_bytes() == s.as_str().as_bytes()),
        };
        if !session_revision {
            return None;
        }
        h.get(SESSION_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(SessionId::from)
    }

    async fn pass(&self, req: axum::extract::Request) -> axum::response::Response {
        if req.method() == axum::http::Method::DELETE {
            // rmcp answers a DELETE that ended a session with 202; the official clients
            // expect 200 or 204 (the Python client logs a warning at anything else).
            return Box::pin(self.delete(req)).await;
        }
        self.pass_rest(req).await
    }

    /// `DELETE /mcp`: 204 when it ended the session, 404 (JSON-RPC `-32001`) for a session
    /// nobody holds, as for any request of an unknown session.
    async fn delete(&self, req: axum::extract::Request) -> axum::response::Response {
        if !self.restorable {
            let id = req
                .headers()
                .get(SESSION_HEADER)
                .and_then(|v| v.to_str().ok());
            if let Some(id) = id {
                if !self.sessions.contains(&SessionId::from(id)) {
                    return rpc_error(
                        axum::http::StatusCode::NOT_FOUND,
                        -32001,
                        &format!("no MCP session '{id}' on this server (ended, or never begun)"),
                    );
                }
            }
        }
        let mut r = self.rmcp.handle(req).await.map(axum::body::Body::new);
        if r.status() == axum::http::StatusCode::ACCEPTED {
            *r.status_mut() = axum::http::StatusCode::NO_CONTENT;
        }
        r
    }

    async fn pass_rest(&self, req: axum::extract::Request) -> axum::response::Response {
        // A JSON-RPC batch (an array): rmcp reads none; see `batch`.
        if req.method() == axum::http::Method::POST {
            let (parts, body) = req.into_parts();
            let bytes = match axum::body::to_bytes(body, self.max_body).await {
                Ok(b) => b,
                Err(e) => {
                    return rpc_error(
                        axum::http::StatusCode::PAYLOAD_TOO_LARGE,
                        -32600,
                        &format!(
                        "the request body cannot be read (at most {} bytes: --max-body-bytes): {e}",
                        self.max_body
                    ),
                    )
                }
            };
            if bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[') {
                return self.batch(parts, bytes).await;
            }
            let req = axum::http::Request::from_parts(parts, axum::body::Body::from(bytes));
            return self.rmcp.handle(req).await.map(axum::body::Body::new);
        }
        self.rmcp.handle(req).await.map(axum::body::Body::new)
    }

    /// A JSON-RPC batch (a POST whose body is an array). Only 2025-03-26 has batches (2025-06-18
    /// dropped them): a batch of a session on that revision, which this replica holds, is
    /// answered as one JSON array of the responses to its requests, in their order (its
    /// notifications and responses go to the session; 202 when it held no request). Any
    /// other batch is -32600.
    async fn batch(
        &self,
        parts: axum::http::request::Parts,
        bytes: axum::body::Bytes,
    ) -> axum::response::Response {
        use axum::http::StatusCode;
        let refuse = |why: &str| {
            rpc_error(
                StatusCode::BAD_REQUEST,
                -32600,
                &format!("Invalid Request: {why}: send one message per POST"),
            )
        };
        let id = parts
            .headers
            .get(SESSION_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(SessionId::from);
        let Some(id) = id else {
            return refuse("a JSON-RPC batch cannot begin a session (initialize is never batched)");
        };
        let Some((direct, busy)) = self.sessions.direct(&id) else {
            return refuse("JSON-RPC batches are answered only for a session this server holds and initialized");
        };
        let revision = direct
            .peer
            .peer_info()
            .map(|i| i.protocol_version.as_str().to_string())
            .unwrap_or_default();
        if revision != "2025-03-26" {
            return refuse(&format!(
                "the session's MCP revision, {revision}, has no JSON-RPC batches (only 2025-03-26 has them)"
            ));
        }
        let items = match serde_json::from_slice::<Vec<Value>>(&bytes) {
            Ok(items) if !items.is_empty() => items,
            Ok(_) => return refuse("an empty JSON-RPC batch"),
            Err(e) => {
                return rpc_error(
                    StatusCode::BAD_REQUEST,
                    -32700,
                    &format!("Parse error: the batch is not a JSON array of messages: {e}"),
                )
            }
        };
        let mut calls = Vec::new();
        let mut answers: Vec<Option<Value>> = vec![None; items.len()];
        for (i, item) in items.into_iter().enumerate() {
            let item_id = item.get("id").cloned().unwrap_or(Value::Null);
            let initialize = item.get("method") == Some(&json!("initialize"));
            match serde_json::from_value::<ClientJsonRpcMessage>(item) {
                Ok(ClientJsonRpcMessage::Request(_)) if initialize => {
                    answers[i] = Some(json!({"jsonrpc": "2.0", "id": item_id, "error": {
                        "code": -32600,
                        "message": "Invalid Request: initialize must not be part of a JSON-RPC batch"}}));
                }
                Ok(ClientJsonRpcMessage::Request(r)) => {
                    calls.push((i, direct_call(direct.clone(), r, parts.clone())));
                }
                Ok(other) => {
                    if let Err(e) =
                        rmcp::transport::streamable_http_server::SessionManager::accept_message(
                            &*self.sessions,
                            &id,
                            other,
                        )
                        .await
                    {
                        tracing::debug!(session = %id, "a batched message was not taken: {e}");
                    }
                }
                Err(e) => {
                    answers[i] = Some(json!({"jsonrpc": "2.0", "id": item_id, "error": {
                        "code": -32600,
                        "message": format!("Invalid Request: not a JSON-RPC message MCP knows: {e}")}}));
                }
            }
        }
        let (index, futures): (Vec<usize>, Vec<_>) = calls.into_iter().unzip();
        for (i, answer) in index
            .into_iter()
            .zip(futures_util::future::join_all(futures).await)
        {
            // `None`: the client cancelled it, so it gets no response.
            answers[i] = answer.and_then(|a| serde_json::to_value(a).ok());
        }
        drop(busy);
        let answers: Vec<Value> = answers.into_iter().flatten().collect();
        if answers.is_empty() {
            return StatusCode::ACCEPTED.into_response();
        }
        (
            [(axum::http::header::CONTENT_TYPE, "application/json")],
            Value::Array(answers).to_string(),
        )
            .into_response()
    }

    /// [`Self::pass`] on the heap, so a future that may pass does not hold rmcp's inline.
    async fn pass_boxed(&self, req: axum::extract::Request) -> axum::response::Response {
        Box::pin(self.pass(req)).await
    }

    async fn handle(&self, id: SessionId, req: axum::extract::Request) -> axum::response::Response {
        let Some((direct, busy)) = self.sessions.direct(&id) else {
            return self.pass_boxed(req).await;
        };
        // A request naming another revision than the session's goes through rmcp (an event
        // stream, with its priming event and resumable ids).
        if let Some(v) = req.headers().get(VERSION_HEADER) {
            let negotiated = direct.peer.peer_info().map(|i| i.protocol_version.clone());
            if negotiated.is_some_and(|n| v.as_bytes() != n.as_str().as_bytes()) {
                drop(busy);
                return self.pass_boxed(req).await;
            }
        }
        let (parts, body) = req.into_parts();
        let bytes = match axum::body::to_bytes(body, self.max_body).await {
            Ok(b) => b,
            Err(e) => {
                return (
                    axum::http::StatusCode::BAD_REQUEST,
                    format!("fail to read the request body: {e}"),
                )
                    .into_response()
            }
        };
        let call = match serde_json::from_slice::<ClientJsonRpcMessage>(&bytes) {
            Ok(ClientJsonRpcMessage::Request(r))
                if matches!(r.request, ClientRequest::CallToolRequest(_)) && {
                    let meta = r.request.get_meta();
                    meta.get_progress_token().is_none() && meta.protocol_version().is_none()
                } =>
            {
                r
            }
            // Not ours: rmcp reads the same bytes (and answers any error in them).
            _ => {
                drop(busy);
                let req = axum::http::Request::from_parts(parts, axum::body::Body::from(bytes));
                return self.pass_boxed(req).await;
            }
        };
        let answer = direct_call(direct, call, parts).await;
        drop(busy);
        let Some(answer) = answer else {
            // Cancelled: no JSON-RPC response, an event stream that ends empty (as rmcp's).
            return (
                [(axum::http::header::CONTENT_TYPE, "text/event-stream")],
                axum::body::Body::empty(),
            )
                .into_response();
        };
        match serde_json::to_vec(&answer) {
            Ok(body) => (
                [(axum::http::header::CONTENT_TYPE, "application/json")],
                body,
            )
                .into_response(),
            Err(e) => (
                axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                format!("fail to serialize the response: {e}"),
            )
                .into_response(),
        }
    }
}

/// Runs a `tools/call` of a session as rmcp's service loop would: its `_meta` and the HTTP
/// parts in the context, a token `notifications/cancelled` (and the session's end) cancel,
/// the handler on its own task (a client that goes away does not stop the call, as on
/// rmcp's path), the answer as a JSON-RPC message; `None` for a call the client cancelled.
async fn direct_call(
    direct: Direct,
    call: rmcp::model::JsonRpcRequest<ClientRequest>,
    parts: axum::http::request::Parts,
) -> Option<ServerJsonRpcMessage> {
    let rmcp::model::JsonRpcRequest {
        id, mut request, ..
    } = call;
    let mut context = RequestContext::new(id.clone(), direct.peer);
    context.ct = direct.ct.child_token();
    context.meta = std::mem::take(request.get_meta_mut());
    request.extensions_mut().insert(parts);
    context.extensions = std::mem::take(request.extensions_mut());
    let mcp = direct.mcp;
    mcp.direct_calls().insert(id.clone(), context.ct.clone());
    let run = {
        let id = id.clone();
        tokio::spawn(async move {
            let result = mcp.handle_request(request, context).await;
            // Gone from the map: `notifications/cancelled` took it, and a cancelled request
            // gets no response (rmcp drops it too, and ends the request's stream empty).
            // Removed here, not by the caller, so a client that left leaves nothing behind.
            mcp.direct_calls().remove(&id).map(|_| result)
        })
    };
    Some(match run.await {
        Ok(None) => return None,
        Ok(Some(Ok(result))) => ServerJsonRpcMessage::response(result, id),
        Ok(Some(Err(error))) => ServerJsonRpcMessage::error(error, Some(id)),
        Err(e) => ServerJsonRpcMessage::error(
            McpError::internal_error(format!("the call failed: {e}"), None),
            Some(id),
        ),
    })
}
