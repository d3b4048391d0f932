//! `tavern serve [--addr 127.0.0.1:8765]`: MCP Streamable HTTP at `/mcp` and the REST API.

use std::net::SocketAddr;

use tavern::internal::server::http::{app, serve, shutdown_signal};
use tavern::internal::server::Served;

use super::serve_opts::{start_watch, BodyFlags, Common};
use super::{Globals, FAILED, OK, USAGE};

/// Serve MCP (Streamable HTTP at /mcp) and the REST API (/api/tools, /api/invoke, /api/jobs).
#[derive(clap::Args)]
pub struct Args {
    /// Address to listen on (loopback by default; another address exposes the tools).
    #[arg(long, default_value = "127.0.0.1:8765")]
    pub addr: SocketAddr,
    /// Require `Authorization: Bearer <TOKEN>` on every request.
    #[arg(long, env = "TAVERN_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Largest request body in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = 4 * 1024 * 1024)]
    pub max_body_bytes: usize,
    /// Request bodies' deadline, rate and budget.
    #[command(flatten)]
    pub bodies: BodyFlags,
    /// Allow this browser Origin besides loopback ones (repeatable).
    #[arg(long = "allow-origin", value_name = "ORIGIN")]
    pub allow_origins: Vec<String>,
    /// Seconds a finished job (POST /api/jobs) is kept.
    #[arg(long, value_name = "SECS", default_value_t = 3600)]
    pub job_ttl: u64,
    /// Most jobs kept at once (the oldest finished one is evicted first).
    #[arg(long, value_name = "N", default_value_t = 1000)]
    pub max_jobs: usize,
    /// With --store: how long a replica holds a running job without renewing its lease
    /// before another replica runs it again.
    #[arg(long, value_name = "MS", default_value_t = 10_000)]
    pub job_lease_ms: u64,
    /// With --store: most starts of one job (a replica that dies mid-job costs one) before
    /// it fails with workers_lost.
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub job_attempts: u32,
    /// Most bytes finished and running jobs keep (results and events; default 256 MiB).
    #[arg(long, value_name = "BYTES", default_value_t = 256 * 1024 * 1024)]
    pub max_job_bytes: usize,
    /// Seconds a request's headers may take to arrive (slow clients are closed).
    #[arg(long, value_name = "SECS", default_value_t = 10)]
    pub header_timeout_secs: u64,
    /// Seconds a connection may sit with no request in flight before it is closed.
    #[arg(long, value_name = "SECS", default_value_t = 5)]
    pub idle_timeout_secs: u64,
    /// Most HTTP connections open at once (past it: 503 too_many_connections).
    #[arg(long, value_name = "N", default_value_t = 512)]
    pub max_connections: usize,
    /// Most MCP sessions kept (past it the oldest idle one is closed).
    #[arg(long, value_name = "N", default_value_t = 1000)]
    pub max_sessions: usize,
    /// Audit records kept for the /audit page's first rows (GET /api/audit/events?recent=N);
    /// 0 keeps none, and calls skip the audit work while no client follows the stream.
    #[arg(long, value_name = "N", default_value_t = 200)]
    pub audit_recent: usize,
    /// Limits and reload.
    #[command(flatten)]
    pub common: Common,
}

/// Runs `tavern serve`.
pub async fn run(globals: &Globals, args: Args) -> u8 {
    // `--llm` is one more `--set` (reloads keep it).
    let globals = &match args.common.globals(globals) {
        Ok(g) => g,
        Err(code) => return code,
    };
    let store = match args.common.open_store(globals).await {
        Ok(s) => s,
        Err(code) => return code,
    };
    let shared_world = store.redis.is_some();
    let engine = match globals.engine_with(|b| store.configure(b)) {
        Ok(e) => e,
        Err(code) => return code,
    };
    let mut options = args.common.options();
    options.token = args.token.filter(|t| !t.is_empty());
    options.max_body_bytes = args.max_body_bytes;
    options.bodies = args.bodies.limits();
    options.allowed_origins = args.allow_origins;
    options.job_ttl = std::time::Duration::from_secs(args.job_ttl);
    options.max_jobs = args.max_jobs.max(1);
    options.job_lease = std::time::Duration::from_millis(args.job_lease_ms.max(200));
    options.job_attempts = args.job_attempts.max(1);
    options.max_job_bytes = args.max_job_bytes;
    options.header_timeout = std::time::Duration::from_secs(args.header_timeout_secs.max(1));
    options.idle_timeout = std::time::Duration::from_secs(args.idle_timeout_secs.max(1));
    options.max_connections = args.max_connections.max(1);
    options.max_sessions = args.max_sessions.max(1);
    options.audit_recent = args.audit_recent;
    let listener = match tokio::net::TcpListener::bind(args.addr).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("tavern: cannot listen on {}: {e}", args.addr);
            return USAGE;
        }
    };
    let addr = listener.local_addr().unwrap_or(args.addr);
    if !addr.ip().is_loopback() {
        eprintln!(
            "tavern: warning: listening on {addr}, reachable from other machines{}",
            if options.token.is_none() {
                " without a token (set --token or TAVERN_TOKEN)"
            } else {
                ""
            }
        );
    }
    let served = Served::new(engine, options);
    if let Some(redis) = store.redis {
        if let Err(e) = tavern::internal::server::shared::attach(&served, redis).await {
            eprintln!("tavern: --store: {e}");
            return FAILED;
        }
    }
    let _watch = start_watch(globals, &args.common, &served, store.kv, shared_world);
    let app = app(served.clone(), &addr);
    eprintln!(
        "tavern: serving MCP at http://{addr}/mcp and REST at http://{addr}/api/tools; web explorer at http://{addr}/"
    );
    match serve(served, listener, app, shutdown_signal()).await {
        Ok(()) => OK,
        Err(e) => {
            eprintln!("tavern: server stopped: {e}");
            FAILED
        }
    }
}
