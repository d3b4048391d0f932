//! One axum router for `tavern serve`: MCP Streamable HTTP at `/mcp` and the REST API,
//! behind one guard (Host, `Origin`, bearer token, shutdown), with graceful shutdown.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use std::convert::Infallible;

use axum::extract::Request;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Router;
use tokio_util::sync::CancellationToken;
use tower::{Layer, Service, ServiceExt};

use super::mcp::http_service;
use super::rest::{routes, ApiError};
use super::Served;

/// What the guard checks, fixed when the router is built.
#[derive(Clone)]
struct Guard {
    served: Arc<Served>,
    hosts: Arc<Vec<String>>,
    stopping: Arc<AtomicBool>,
}

/// The host names a loopback server answers to, plus the bound address.
pub fn allowed_hosts(addr: &SocketAddr) -> Vec<String> {
    let mut hosts: Vec<String> = ["localhost", "127.0.0.1", "::1", "[::1]"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let ip = addr.ip();
    if !ip.is_unspecified() {
        let h = if ip.is_ipv6() {
            format!("[{ip}]")
        } else {
            ip.to_string()
        };
        if !hosts.contains(&h) {
            hosts.push(h);
        }
    }
    hosts
}

/// `Origin` is allowed when absent (not a browser), `null` never, a loopback host on any
/// port, or listed in `--allow-origin`.
fn origin_ok(origin: &str, extra: &[String]) -> bool {
    if extra.iter().any(|o| o == origin || o == "*") {
        return true;
    }
    let rest = match origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))
    {
        Some(r) => r,
        None => return false,
    };
    let host = if let Some(v6) = rest.strip_prefix('[') {
        v6.split(']').next().unwrap_or("")
    } else {
        rest.split(':').next().unwrap_or("")
    };
    matches!(host, "localhost" | "127.0.0.1" | "::1")
}

/// The one value of header `name`: `Err` when it is given more than once.
fn one(headers: &HeaderMap, name: header::HeaderName) -> Result<Option<&header::HeaderValue>, ()> {
    let mut all = headers.get_all(name).iter();
    let first = all.next();
    match all.next() {
        Some(_) => Err(()),
        None => Ok(first),
    }
}

/// 400 for a request whose `Host` or `Origin` is missing or given twice: which one is
/// checked must not depend on which copy a check reads.
fn bad_header(message: &str) -> Response {
    ApiError::new(StatusCode::BAD_REQUEST, "bad_request", message)
        .suggest(["send exactly one Host header (and at most one Origin header)".to_string()])
        .into_response()
}

fn host_ok(h: &header::HeaderValue, hosts: &[String]) -> bool {
    let Ok(h) = h.to_str() else {
        return false;
    };
    let name = if h.starts_with('[') {
        h.split_inclusive(']').next().unwrap_or(h)
    } else {
        h.rsplit_once(':').map_or(h, |(n, _)| n)
    };
    hosts
        .iter()
        .any(|a| a.eq_ignore_ascii_case(name) || a.eq_ignore_ascii_case(h))
}

/// The token of an `Authorization: Bearer <token>` value; the scheme is case-insensitive
/// (RFC 9110 section 11.1).
fn bearer(v: &str) -> Option<&str> {
    let (scheme, token) = v.trim_start().split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// Compares without an early exit, so timing does not reveal a token prefix.
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The guard: Host, `Origin`, bearer token, shutdown and a declared body size, checked
/// before a request reaches a route; `Some` answer when it is refused.
fn check(g: &Guard, req: &Request) -> Option<Response> {
    let headers = req.headers();
    let host = match one(headers, header::HOST) {
        Ok(Some(h)) => h,
        Ok(None) => {
            return Some(bad_header(
                "this request has no Host header; HTTP/1.1 needs one (RFC 9112 section 3.2)",
            ))
        }
        Err(()) => return Some(bad_header("this request has more than one Host header")),
    };
    if !host_ok(host, &g.hosts) {
        return Some(
            ApiError::new(
                StatusCode::FORBIDDEN,
                "forbidden_host",
                "this server answers only to its own host names (DNS rebinding protection)",
            )
            .into_response(),
        );
    }
    let Ok(origin) = one(headers, header::ORIGIN) else {
        return Some(bad_header("this request has more than one Origin header"));
    };
    if let Some(origin) = origin {
        let o = origin.to_str().unwrap_or("");
        if !origin_ok(o, &g.served.options.allowed_origins) {
            return Some(
                ApiError::new(
                    StatusCode::FORBIDDEN,
                    "forbidden_origin",
                    format!("requests from origin '{o}' are not allowed"),
                )
                .suggest(["start the server with --allow-origin <origin> to allow it".to_string()])
                .into_response(),
            );
        }
    }
    // The explorer's static shell and assets hold no data: a browser may load them without
    // the token, and the page then sends the token the user gives it with every API call.
    let static_page = super::web::is_static_request(req.method(), req.uri().path(), headers);
    if let Some(token) = g.served.options.token.as_ref().filter(|_| !static_page) {
        let given = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(bearer);
        let ok = given.is_some_and(|t| same_secret(t.as_bytes(), token.as_bytes()));
        if !ok {
            let mut r = ApiError::new(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                if given.is_some() {
                    "the bearer token is wrong"
                } else {
                    "this server needs `Authorization: Bearer <token>`"
                },
            )
            .into_response();
            r.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Bearer"),
            );
            return Some(r);
        }
    }
    if g.stopping.load(Ordering::Acquire) {
        return Some(
            ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "shutting_down",
                "the server is shutting down",
            )
            .into_response(),
        );
    }
    // A declared body past the limit is refused before it is read.
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > g.served.options.max_body_bytes) {
        return Some(ApiError::too_large(g.served.options.max_body_bytes).into_response());
    }
    None
}

/// Largest error body read when rewriting it as JSON (axum's rejections are one line).
const ERROR_BODY_MAX: usize = 16 * 1024;

/// Every request of `tavern serve`: the guard, then the router; then every error answer is
/// made JSON: axum's own rejections (a query or path that does not parse, a method a route
/// does not take, a body past the limit) and rmcp's plain-text answers are rewritten —
/// `{"error": {code, message, suggestions}}` on the REST routes, a JSON-RPC error object on
/// `/mcp`. JSON answers and event streams pass as they are. (A plain function called by the
/// accept loop rather than two `from_fn` layers: a layer on the router is cloned, boxed and
/// polled per route and per request.)
async fn front<S>(g: &Guard, router: S, req: Request) -> Response
where
    S: Service<Request, Response = Response, Error = Infallible>,
{
    if let Some(refused) = check(g, &req) {
        return refused;
    }
    let mcp = req.uri().path() == "/mcp";
    let res = match router.oneshot(req).await {
        Ok(r) => r,
        Err(e) => match e {},
    };
    let status = res.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return res;
    }
    json_error(g, mcp, res).await
}

/// `res`, an error answer, as JSON (see [`front`]).
async fn json_error(g: &Guard, mcp: bool, res: Response) -> Response {
    let status = res.status();
    let json = res
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.contains("json") || ct.starts_with("text/event-stream"));
    if json {
        return res;
    }
    let (parts, body) = res.into_parts();
    let text = axum::body::to_bytes(body, ERROR_BODY_MAX)
        .await
        .map(|b| String::from_utf8_lossy(&b).trim().to_string())
        .unwrap_or_default();
    let reason = status.canonical_reason().unwrap_or("error");
    let message = if text.is_empty() {
        reason.to_string()
    } else {
        text
    };
    let mut out = if mcp {
        // JSON-RPC: -32001 for a session that is gone (the client starts a new one),
        // -32600 for a request the transport refused, -32603 for the server's own failure.
        // rmcp answers 415 "fail to deserialize request body" for a body that is not JSON
        // (-32700) and for JSON that is not a JSON-RPC message (-32600).
        let (status, code) = match status {
            StatusCode::NOT_FOUND => (status, -32001),
            StatusCode::UNSUPPORTED_MEDIA_TYPE if message.starts_with("fail to deserialize") => {
                let shape = [
                    "did not match",
                    "missing field",
                    "unknown variant",
                    "invalid type",
                ]
                .iter()
                .any(|m| message.contains(m));
                (StatusCode::BAD_REQUEST, if shape { -32600 } else { -32700 })
            }
            // Every session busy (sessions.rs): the client may try again shortly.
            s if s.is_server_error() && message.contains("--max-sessions") => {
                (StatusCode::SERVICE_UNAVAILABLE, -32000)
            }
            s if s.is_server_error() => (status, -32603),
            _ => (status, -32600),
        };
        let body = serde_json::json!({"jsonrpc": "2.0", "id": null,
            "error": {"code": code, "message": message}});
        (status, axum::Json(body)).into_response()
    } else {
        match status {
            StatusCode::PAYLOAD_TOO_LARGE => {
                ApiError::too_large(g.served.options.max_body_bytes).into_response()
            }
            _ => {
                let code = match status {
                    StatusCode::BAD_REQUEST => "bad_request",
                    StatusCode::NOT_FOUND => "not_found",
                    StatusCode::METHOD_NOT_ALLOWED => "method_not_allowed",
                    StatusCode::NOT_ACCEPTABLE => "not_acceptable",
                    StatusCode::UNSUPPORTED_MEDIA_TYPE => "unsupported_media_type",
                    StatusCode::UNPROCESSABLE_ENTITY => "unprocessable",
                    s if s.is_server_error() => "internal_error",
                    _ => "bad_request",
                };
                ApiError::new(status, code, message).into_response()
            }
        }
    };
    // Keep what the answer said besides its body (Allow, WWW-Authenticate, session ids).
    for (k, v) in parts.headers.iter() {
        if k != header::CONTENT_TYPE && k != header::CONTENT_LENGTH {
            out.headers_mut().insert(k.clone(), v.clone());
        }
    }
    out
}

/// A built router and the switches that stop it.
pub struct App {
    /// The router (MCP at `/mcp`, REST elsewhere), without the guard: the accept loop
    /// calls `front` before it.
    pub router: Router,
    /// Cancels every MCP session.
    pub mcp_cancel: CancellationToken,
    guard: Guard,
}

/// Builds the router for a server bound at `addr`.
pub fn app(served: Arc<Served>, addr: &SocketAddr) -> App {
    let hosts = allowed_hosts(addr);
    let mcp_cancel = CancellationToken::new();
    let stopping = Arc::new(AtomicBool::new(false));
    let mcp = http_service(served.clone(), hosts.clone(), mcp_cancel.clone());
    let g = Guard {
        served: served.clone(),
        hosts: Arc::new(hosts),
        stopping,
    };
    let router = routes()
        .merge(super::jobs::routes::routes())
        .merge(super::audit_stream::routes())
        .route_service("/mcp", mcp)
        .with_state(served.clone())
        .merge(super::web::router(served.clone()));
    App {
        router,
        mcp_cancel,
        guard: g,
    }
}

/// Resolves on SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
}

/// Serves `app` on `listener` until `stop` resolves; then refuses new requests, ends every
/// event stream, waits (up to the drain timeout) for calls in flight, closes the MCP
/// sessions and the connections, and returns.
pub async fn serve(
    served: Arc<Served>,
    listener: tokio::net::TcpListener,
    app: App,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let App {
        router,
        mcp_cancel,
        guard,
    } = app;
    let stopping = guard.stopping.clone();
    let o = &served.options;
    let limits = super::conn::ConnLimits {
        header_timeout: o.header_timeout,
        idle_timeout: o.idle_timeout,
        max_connections: o.max_connections,
        bodies: o.bodies,
        max_body_bytes: o.max_body_bytes,
    };
    let served2 = served.clone();
    // Until the drain ends, connections are still accepted and answered 503 `shutting_down`.
    let graceful = async move {
        stop.await;
        stopping.store(true, Ordering::Release);
        // Event streams never end on their own: end them now, so their connections close.
        served2.close_streams();
        let drain = served2.options.drain_timeout;
        let n = served2.in_flight();
        if n > 0 {
            tracing::warn!("shutting down: waiting for {n} call(s) in flight");
        }
        if !served2.drain(drain).await {
            tracing::warn!("shutting down with calls still in flight after {drain:?}");
        }
    };
    // Every extractor that reads a body (`Bytes`, `Json`) takes `--max-body-bytes`, not
    // axum's 2 MB default.
    let router = axum::extract::DefaultBodyLimit::max(o.max_body_bytes).layer(router);
    let front_of = Arc::new((guard, router));
    let handler = move |req: Request| {
        let f = front_of.clone();
        async move { front(&f.0, f.1.clone(), req).await }
    };
    let conns = super::conn::accept_loop(listener, handler, limits, graceful).await;
    mcp_cancel.cancel();
    conns.close_all();
    // Every request has ended by now (or is past the drain): connections close at once.
    if !conns.wait(std::time::Duration::from_secs(2)).await {
        tracing::debug!("shutting down with connections still open");
    }
    Ok(())
}
