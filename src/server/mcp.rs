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
//!   units known, plus a heartbeat every 250 ms that moves `progress` halfway to the next
//!   unit (never past it); `notifications/cancelled` cancels the call's token and drops
//!   the work.

use std::borrow::Cow;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

// Logging (`logging/setLevel`) is deprecated in the 2026 revision but part of 2025-11-25.
#[allow(deprecated)]
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, DiscoverRequestMethod,
    DiscoverResult, Implementation, InitializeResult, ListToolsResult, PaginatedRequestParams,
    ProgressNotificationParam, ProtocolVersion, ServerCapabilities, ServerConfig,
    SetLevelRequestParams, Tool as McpTool,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler, ServiceExt};
use serde_json::{json, Value};

use super::export::{tool_json, ExportFormat};
use super::Served;
use crate::tools::{CallObserver, Caller, NodeEvent, NodeState, ToolError};

/// Progress of one MCP call: units done and known, reported to the call's loop.
struct McpProgress {
    counts: std::sync::Mutex<(u64, u64)>,
    tx: tokio::sync::mpsc::UnboundedSender<(u64, u64, String)>,
}

impl CallObserver for McpProgress {
    fn node(&self, ev: NodeEvent<'_>) {
        let mut c = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        match ev.state {
            NodeState::Pending => c.1 += 1,
            s if s.is_final() => {
                c.0 += 1;
                let msg = format!("{}: node {} {}", ev.workflow, ev.node, s.as_str());
                // The receiver is gone only when the call has ended.
                let _ = self.tx.send((c.0, c.1, msg));
            }
            _ => {}
        }
    }
}

/// The next heartbeat value: halfway from `last` to the next whole unit.
fn heartbeat(last: f64) -> f64 {
    let next = last.floor() + 1.0;
    last + (next - last) / 2.0
}

/// How often progress is reported for a call that carries a progress token.
const PROGRESS_EVERY: Duration = Duration::from_millis(250);

/// The MCP face of a [`Served`] engine. Cheap to clone: one per session.
#[derive(Clone)]
pub struct TavernMcp {
    served: Arc<Served>,
}

impl TavernMcp {
    /// An MCP handler over `served`.
    pub fn new(served: Arc<Served>) -> Self {
        TavernMcp { served }
    }

    fn caller() -> Caller {
        Caller::Remote("mcp".into())
    }
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
    let caps: ServerCapabilities =
        serde_json::from_value(json!({"tools": {"listChanged": true}, "logging": {}}))
            .unwrap_or_default();
    let mut info = InitializeResult::new(caps);
    info.protocol_version = ProtocolVersion::V_2025_11_25;
    info.server_info =
        Implementation::new("tavern", env!("CARGO_PKG_VERSION")).with_title("tavern tool engine");
    info.instructions = Some(
        "Tools served by a tavern engine. Each tool's title is its canonical tavern id; \
         either the name or the id may be used to call it."
            .into(),
    );
    info
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
        _request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        Ok(())
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let engine = self.served.engine();
        let all = engine.tools().list();
        let start = match request.and_then(|r| r.cursor) {
            None => 0,
            Some(c) => c
                .parse::<usize>()
                .ok()
                .filter(|n| *n <= all.len())
                .ok_or_else(|| {
                    McpError::invalid_params(
                        format!("invalid cursor '{c}': use the nextCursor of the previous page"),
                        None,
                    )
                })?,
        };
        let page = self.served.options.page_size.max(1);
        let end = (start + page).min(all.len());
        let mut tools = Vec::with_capacity(end - start);
        for t in &all[start..end] {
            match serde_json::from_value::<McpTool>(tool_json(t, ExportFormat::Mcp)) {
                Ok(m) => tools.push(m),
                Err(e) => tracing::warn!(tool = t.id(), "tool left out of tools/list: {e}"),
            }
        }
        let mut result = ListToolsResult::with_all_items(tools);
        if end < all.len() {
            result.next_cursor = Some(end.to_string());
        }
        Ok(result)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let engine = self.served.engine();
        if let Err(e) = engine.tools().get(&request.name) {
            return Err(unknown_tool(&e));
        }
        drop(engine);
        let args = Value::Object(request.arguments.unwrap_or_default());
        let ct = context.ct.clone();
        let progress = context.meta.get_progress_token();
        let (tx, mut units) = tokio::sync::mpsc::unbounded_channel();
        let observer: crate::tools::Observer = progress.as_ref().map(|_| {
            Arc::new(McpProgress {
                counts: std::sync::Mutex::new((0, 0)),
                tx,
            }) as Arc<dyn CallObserver>
        });
        let call =
            self.served
                .invoke_observed(&request.name, args, Self::caller(), ct.clone(), observer);
        let mut call = pin!(call);
        let result = match progress {
            None => tokio::select! {
                r = &mut call => r,
                _ = ct.cancelled() => Err(ToolError::Cancelled { tool: request.name.to_string() }),
            },
            Some(token) => {
                let mut tick = tokio::time::interval(PROGRESS_EVERY);
                // The first heartbeat is 0; every later value is strictly larger.
                let mut last: Option<f64> = None;
                let mut total: Option<u64> = None;
                let mut ended = None;
                loop {
                    let (value, message) = if let Some(r) = ended.take() {
                        // The call is over: send the units it reported last, then answer.
                        match units.try_recv() {
                            Ok((done, known, msg)) => {
                                ended = Some(r);
                                total = Some(known);
                                (done as f64, msg)
                            }
                            Err(_) => break r,
                        }
                    } else {
                        tokio::select! {
                            r = &mut call => { ended = Some(r); continue; }
                            _ = ct.cancelled() => break Err(ToolError::Cancelled { tool: request.name.to_string() }),
                            Some((done, known, msg)) = units.recv() => {
                                total = Some(known);
                                (done as f64, msg)
                            }
                            _ = tick.tick() => {
                                (last.map_or(0.0, heartbeat), format!("{} running", request.name))
                            }
                        }
                    };
                    if last.is_some_and(|l| value <= l) {
                        continue;
                    }
                    last = Some(value);
                    let mut p = ProgressNotificationParam::new(token.clone(), value);
                    p.total = total.map(|t| t as f64);
                    p.message = Some(message);
                    let _ = context.peer.notify_progress(p).await;
                }
            }
        };
        Ok(match result {
            Ok(v) => result_content(v),
            Err(e @ ToolError::UnknownTool { .. }) => return Err(unknown_tool(&e)),
            Err(e) => error_result(&e),
        }
        .into())
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        self.served.add_peer(context.peer);
    }
}

/// Serves MCP on stdin/stdout until the client closes the stream. Nothing else may write
/// to stdout meanwhile (logs go to stderr).
pub async fn serve_stdio(served: Arc<Served>) -> Result<(), std::io::Error> {
    let service = TavernMcp::new(served)
        .serve(rmcp::transport::stdio())
        .await
        .map_err(std::io::Error::other)?;
    service.waiting().await.map_err(std::io::Error::other)?;
    Ok(())
}

/// The Streamable HTTP service for `/mcp`: a session per client; `cancel` ends them all.
pub fn http_service(
    served: Arc<Served>,
    allowed_hosts: Vec<String>,
    cancel: tokio_util::sync::CancellationToken,
) -> rmcp::transport::StreamableHttpService<
    TavernMcp,
    rmcp::transport::streamable_http_server::session::local::LocalSessionManager,
> {
    let config = rmcp::transport::StreamableHttpServerConfig::default()
        .with_allowed_hosts(allowed_hosts)
        .with_cancellation_token(cancel)
        .with_max_request_body_bytes(served.options.max_body_bytes);
    rmcp::transport::StreamableHttpService::new(
        move || Ok(TavernMcp::new(served.clone())),
        Default::default(),
        config,
    )
}
