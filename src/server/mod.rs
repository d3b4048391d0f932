//! Serving the engine to other programs: MCP over stdio and Streamable HTTP ([`mcp`]), a
//! REST API ([`rest`]) on the same axum router ([`http`]), the tool-list shapes every
//! surface shares ([`export`]), hot reload ([`watch`]) and the web tool explorer ([`web`]).
//!
//! This module sits on top of the [`Engine`] facade and uses only its public API: the core
//! knows nothing of MCP or HTTP. Invariants:
//! - Every call goes through [`Served::invoke`]: argument size limit, per-call timeout,
//!   cancellation, in-flight accounting (graceful shutdown waits for it).
//! - The engine lives behind an [`ArcSwap`]: a reload swaps a whole new engine in; calls
//!   in flight keep the `Arc<Engine>` they started with, so none is dropped.
//! - One wire name per tool (built by the registry); the canonical id is the `title` and
//!   `_meta["tavern/id"]`; either spelling is accepted on input.

pub mod audit_stream;
pub mod catalog;
pub mod conn;
pub mod export;
pub mod http;
pub mod jobs;
pub mod mcp;
pub mod mcp_agents;
pub mod rest;
pub mod sessions;
#[cfg(feature = "store-redis")]
pub mod shared;
pub mod watch;
pub mod web;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arc_swap::ArcSwap;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::tools::{Caller, ToolError};
use crate::Engine;

/// Limits and access rules of a served engine.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// Bearer token every HTTP request must carry (`Authorization: Bearer …`), except the
    /// web explorer's static page shell and assets; none = open.
    pub token: Option<String>,
    /// Largest request body accepted over HTTP, in bytes (413 past it).
    pub max_body_bytes: usize,
    /// A request body's deadline and rate, and the bytes of bodies held at once.
    pub bodies: conn::BodyLimits,
    /// Largest arguments object of one call, in bytes of compact JSON.
    pub max_args_bytes: usize,
    /// Wall-clock limit of one call; the call is cancelled when it passes.
    pub call_timeout: Option<Duration>,
    /// Tools per `tools/list` page.
    pub page_size: usize,
    /// Extra `Origin` values allowed besides loopback ones (`http://localhost:*` …).
    pub allowed_origins: Vec<String>,
    /// How long a graceful shutdown waits for calls in flight.
    pub drain_timeout: Duration,
    /// How long a finished job is kept (then its id answers 410 `job_expired`).
    pub job_ttl: Duration,
    /// Most jobs kept at once (the oldest finished one is evicted first).
    pub max_jobs: usize,
    /// With a shared store: how long a replica's hold on a running job lasts unless
    /// renewed (then another replica runs it again).
    pub job_lease: Duration,
    /// With a shared store: most starts of one job before it fails with `workers_lost`.
    pub job_attempts: u32,
    /// Most bytes kept jobs retain (results and events): past it the oldest finished jobs
    /// are evicted, and while running jobs alone pass it new jobs are refused.
    pub max_job_bytes: usize,
    /// A request head must arrive within this, from when a connection waits for one.
    pub header_timeout: Duration,
    /// A connection with no request in flight is closed after this.
    pub idle_timeout: Duration,
    /// Most HTTP connections open at once (past it: 503 `too_many_connections`).
    pub max_connections: usize,
    /// Most MCP sessions kept (past it the oldest idle one is closed).
    pub max_sessions: usize,
    /// Audit records kept for `GET /api/audit/events?recent=N` (the `/audit` page's first
    /// rows); 0 keeps none, and calls then skip the audit work while no client follows.
    pub audit_recent: usize,
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            token: None,
            max_body_bytes: 4 * 1024 * 1024,
            bodies: conn::BodyLimits::default(),
            max_args_bytes: 1024 * 1024,
            call_timeout: Some(Duration::from_secs(300)),
            page_size: 100,
            allowed_origins: Vec::new(),
            drain_timeout: Duration::from_secs(30),
            job_ttl: Duration::from_secs(3600),
            max_jobs: 1000,
            job_lease: Duration::from_secs(10),
            job_attempts: 3,
            max_job_bytes: 256 * 1024 * 1024,
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(5),
            max_connections: 512,
            max_sessions: 1000,
            audit_recent: audit_stream::RECENT,
        }
    }
}

/// The state every connection shares: the current engine, the options, the MCP peers to
/// notify on reload, and the count of calls in flight.
pub struct Served {
    engine: ArcSwap<Engine>,
    /// The options.
    pub options: ServeOptions,
    peers: Mutex<Vec<rmcp::Peer<rmcp::RoleServer>>>,
    in_flight: AtomicUsize,
    generation: AtomicUsize,
    jobs: jobs::Jobs,
    audit: Arc<audit_stream::AuditHub>,
    /// Reload attempts (swapped or refused), and the last refused one until a swap.
    reloads: AtomicUsize,
    refused: Mutex<Option<RefusedReload>>,
    /// Jobs, MCP sessions and the audit stream in a store shared by replicas, when set.
    #[cfg(feature = "store-redis")]
    shared: std::sync::OnceLock<shared::Shared>,
    /// Cancelled when the server shuts down: every event stream ends on it.
    streams_end: CancellationToken,
}

/// A reload the server refused (the rebuilt engine failed, or had new load problems): the
/// previous engine kept serving.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct RefusedReload {
    /// When, in Unix milliseconds.
    pub at_ms: u64,
    /// Why: one line per new problem (`file:line:column: message`).
    pub reasons: Vec<String>,
}

/// Decrements the in-flight count when a call ends, however it ends.
struct InFlight<'a>(&'a AtomicUsize);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Served {
    /// Serves `engine` with `options`.
    /// The job id journal is read from the engine home's `.tavern/state/jobs.jsonl`.
    pub fn new(engine: Engine, options: ServeOptions) -> Arc<Self> {
        let journal = jobs::journal::Journal::open(jobs::journal::path_in(engine.home()));
        let retention = jobs::store::Retention {
            ttl: options.job_ttl,
            max_jobs: options.max_jobs,
            max_bytes: options.max_job_bytes,
        };
        let jobs = jobs::Jobs::new(retention, journal);
        Self::with_jobs(engine, options, jobs)
    }

    /// Serves `engine` with `options`, keeping jobs in `jobs` (made with another
    /// [`jobs::store::JobStore`] than the in-memory one; see [`jobs::Jobs::with_store`]).
    pub fn with_jobs(engine: Engine, options: ServeOptions, jobs: jobs::Jobs) -> Arc<Self> {
        let audit = Arc::new(audit_stream::AuditHub::keeping(options.audit_recent));
        engine.hooks().add_audit_tap(audit.clone());
        Arc::new(Served {
            engine: ArcSwap::from_pointee(engine),
            options,
            peers: Mutex::new(Vec::new()),
            in_flight: AtomicUsize::new(0),
            generation: AtomicUsize::new(0),
            reloads: AtomicUsize::new(0),
            refused: Mutex::new(None),
            streams_end: CancellationToken::new(),
            jobs,
            audit,
            #[cfg(feature = "store-redis")]
            shared: std::sync::OnceLock::new(),
        })
    }

    /// The jobs of the shared store, when the server has one (`--store`).
    #[cfg(feature = "store-redis")]
    pub fn shared_jobs(&self) -> Option<&Arc<jobs::redis::RedisJobs>> {
        self.shared.get().map(|s| &s.jobs)
    }

    /// The shared store's parts, when the server has one (`--store`).
    #[cfg(feature = "store-redis")]
    pub fn shared(&self) -> Option<&shared::Shared> {
        self.shared.get()
    }

    /// The jobs of this server.
    pub fn jobs(&self) -> &jobs::Jobs {
        &self.jobs
    }

    /// The audit records of every engine this server puts in service.
    pub fn audit_hub(&self) -> &Arc<audit_stream::AuditHub> {
        &self.audit
    }

    /// The engine now in service (calls keep the one they started with).
    pub fn engine(&self) -> Arc<Engine> {
        self.engine.load_full()
    }

    /// How many times the engine was replaced.
    pub fn generation(&self) -> usize {
        self.generation.load(Ordering::Acquire)
    }

    /// Puts a new engine in service and tells every MCP client its tool list changed.
    pub async fn swap(&self, engine: Engine) {
        engine.hooks().add_audit_tap(self.audit.clone());
        self.engine.store(Arc::new(engine));
        self.generation.fetch_add(1, Ordering::AcqRel);
        let peers: Vec<_> = self.lock_peers().clone();
        let mut dead = Vec::new();
        for (i, p) in peers.iter().enumerate() {
            if p.is_transport_closed() || p.notify_tool_list_changed().await.is_err() {
                dead.push(i);
                continue;
            }
            // Plugins' resources and prompts may have changed with the engine.
            let _ = p.notify_resource_list_changed().await;
            let _ = p.notify_prompt_list_changed().await;
        }
        if !dead.is_empty() {
            self.lock_peers().retain(|p| !p.is_transport_closed());
        }
        // A reload may bring a new world (world.json changed): subscribers re-read it.
        let _ = crate::tools::resource_updates().send(crate::tools::WORLD_URI.to_string());
    }

    /// Records the outcome of a reload attempt: a refusal is kept (for the web explorer)
    /// until a later reload swaps a new engine in.
    pub fn note_reload(&self, refused: Option<Vec<String>>) {
        let at_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let mut r = self.refused.lock().unwrap_or_else(|p| p.into_inner());
        *r = refused.map(|reasons| RefusedReload { at_ms, reasons });
        self.reloads.fetch_add(1, Ordering::AcqRel);
    }

    /// How many reloads were attempted (swapped or refused).
    pub fn reload_attempts(&self) -> usize {
        self.reloads.load(Ordering::Acquire)
    }

    /// The last refused reload, unless a reload succeeded since.
    pub fn refused_reload(&self) -> Option<RefusedReload> {
        // Only ever replaced whole: a poisoned lock still holds a valid value.
        self.refused
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn lock_peers(&self) -> std::sync::MutexGuard<'_, Vec<rmcp::Peer<rmcp::RoleServer>>> {
        // The list is only pushed to and filtered: a poisoned lock still holds a valid Vec.
        self.peers.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Remembers an MCP client so reloads can notify it.
    pub fn add_peer(&self, peer: rmcp::Peer<rmcp::RoleServer>) {
        let mut peers = self.lock_peers();
        peers.retain(|p| !p.is_transport_closed());
        peers.push(peer);
    }

    /// Ends every event stream (shutdown): the audit stream, job events, the reload stream.
    pub fn close_streams(&self) {
        self.streams_end.cancel();
    }

    /// Resolves when the server shuts down; event streams end on it.
    pub fn streams_end(&self) -> tokio_util::sync::WaitForCancellationFutureOwned {
        self.streams_end.clone().cancelled_owned()
    }

    /// Calls in flight now.
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Acquire)
    }

    /// Waits until no call is in flight, or `max` passes; returns whether it drained.
    pub async fn drain(&self, max: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + max;
        while self.in_flight() > 0 {
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        true
    }

    /// Runs one call (MCP `tools/call`) on the current engine through the one run path,
    /// with the server's limits: the arguments size limit, the per-call timeout (then the
    /// call is cancelled) and `cancel`; watched by `observer` (workflow nodes and nested
    /// calls report to it; see [`crate::tools::observe`]).
    pub async fn invoke(
        &self,
        tool: &str,
        args: Value,
        caller: Caller,
        cancel: CancellationToken,
        observer: crate::tools::Observer,
    ) -> Result<Value, ToolError> {
        self.invoke_with_id(tool, args, caller, cancel, observer, None)
            .await
            .0
    }

    /// [`Served::invoke`], the call carrying `call_id` (the id its caller gave it; the
    /// audit record shows it) instead of the one the reader gives (`call_0`), answered with
    /// the call's warnings (each argument read loosely, `argument 'guestName' read as
    /// 'guest_name'`), for MCP's `tools/call` result.
    pub async fn invoke_with_id(
        &self,
        tool: &str,
        args: Value,
        caller: Caller,
        cancel: CancellationToken,
        observer: crate::tools::Observer,
        call_id: Option<String>,
    ) -> (Result<Value, ToolError>, Vec<String>) {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        let _guard = InFlight(&self.in_flight);
        let engine = self.engine();
        let size = args_size(&args);
        if size > self.options.max_args_bytes {
            return (
                Err(ToolError::LimitExceeded {
                    tool: tool.to_string(),
                    limit: "arguments".into(),
                    message: format!(
                        "the arguments are {size} bytes; this server accepts at most {} (send less data or raise --max-args-bytes)",
                        self.options.max_args_bytes
                    ),
                }),
                Vec::new(),
            );
        }
        // Through the engine's one run function, like every other way in.
        let opts = crate::engine::CallOptions::new()
            .caller(caller)
            .cancel(crate::engine::CancelToken::from_token(cancel.clone()))
            .observer(observer);
        let mut parsed = crate::protocol::input::read_call(tool, args);
        if let (Some(id), Some(c)) = (call_id, parsed.calls.first_mut()) {
            c.id = Some(id);
        }
        let req = crate::engine::Request::parsed(parsed).options(opts);
        let call = async {
            let report = crate::engine::run(engine.tools().clone(), req).await;
            match report.outcomes.into_iter().next() {
                Some(o) => (o.result, o.warnings),
                // The call could not be read (no name): what the reader said.
                None => (
                    Err(ToolError::failed(
                        tool,
                        report
                            .parsed
                            .diagnostics
                            .first()
                            .map_or("the call could not be read", |d| d.message.as_str()),
                    )),
                    Vec::new(),
                ),
            }
        };
        match self.options.call_timeout {
            None => call.await,
            Some(limit) => match tokio::time::timeout(limit, call).await {
                Ok(r) => r,
                Err(_) => {
                    cancel.cancel();
                    let e = ToolError::Timeout {
                        tool: engine
                            .tools()
                            .get(tool)
                            .map(|t| t.id().to_string())
                            .unwrap_or_else(|_| tool.to_string()),
                        after_ms: limit.as_millis() as u64,
                        at: None,
                    };
                    (Err(e), Vec::new())
                }
            },
        }
    }

    /// Marks a batch of calls (REST invoke) in flight while `f` runs.
    pub async fn track<F: std::future::Future>(&self, f: F) -> F::Output {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        let _guard = InFlight(&self.in_flight);
        f.await
    }
}

/// Bytes of `v` as compact JSON, counted without building the string.
fn args_size(v: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0 += b.len();
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut c = Count(0);
    // Writing a Value into a sink that never fails cannot fail.
    let _ = serde_json::to_writer(&mut c, v);
    c.0
}
