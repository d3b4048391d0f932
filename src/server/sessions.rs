//! MCP sessions with a cap (issue 24 item 4): rmcp's [`LocalSessionManager`] keeps every
//! session until it is deleted or idle for rmcp's keep-alive (5 minutes), so 20,000
//! `initialize`s kept 20,000 sessions. [`BoundedSessions`] wraps it: at most `max` sessions;
//! a new one past the cap closes the oldest *idle* session first (idle: no request of it is
//! being answered; the last use is any request naming it). When every session is busy the
//! new one is refused ([`SessionsFull`]).
//!
//! A session also keeps what `mcp.rs`'s direct `tools/call` path needs ([`Direct`]: its
//! handler and peer), attached when the client sends `notifications/initialized`. A call
//! answered there never reaches rmcp's session worker, whose idle timer (`keep_alive`)
//! would then close a session in use: so at least once a [`REFRESH`] a session's call
//! takes rmcp's path, and the worker's keep-alive is [`KEEP_ALIVE`], one `REFRESH` more
//! than rmcp's 5 minutes, so a session idle for 5 minutes is still kept, as before.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures_util::Stream;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::service::Peer;
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError,
};
use rmcp::transport::streamable_http_server::session::{
    EventStore, RestoreOutcome, ServerSseMessage, SessionId, SessionManager,
};
use rmcp::RoleServer;
use tokio_util::sync::CancellationToken;

use super::mcp::TavernMcp;

/// How often a session's call goes through rmcp's session worker at least (which keeps
/// the worker's idle timer from closing a session the direct path is using).
pub const REFRESH: Duration = Duration::from_secs(60);

/// rmcp's session keep-alive (5 minutes) plus [`REFRESH`].
pub const KEEP_ALIVE: Duration = Duration::from_secs(300 + 60);

/// What the direct `tools/call` path needs of a session.
#[derive(Clone)]
pub struct Direct {
    /// The session's handler (its log level, its calls in flight).
    pub mcp: TavernMcp,
    /// The session's peer (the client's capabilities; notifications to the client).
    pub peer: Peer<RoleServer>,
    /// Cancelled when the session closes: the parent of its direct calls' tokens.
    pub ct: CancellationToken,
}

struct Meta {
    last: Instant,
    busy: usize,
    direct: Option<Direct>,
    /// When a call of this session last went through rmcp's worker.
    refreshed: Instant,
}

impl Meta {
    fn new() -> Self {
        let now = Instant::now();
        Meta {
            last: now,
            busy: 0,
            direct: None,
            refreshed: now,
        }
    }
}

impl std::fmt::Debug for Meta {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Meta")
            .field("last", &self.last)
            .field("busy", &self.busy)
            .field("direct", &self.direct.is_some())
            .finish()
    }
}

/// rmcp's in-memory sessions, at most `max` of them.
#[derive(Debug)]
pub struct BoundedSessions {
    inner: LocalSessionManager,
    max: usize,
    meta: Arc<Mutex<HashMap<SessionId, Meta>>>,
}

/// Why a session operation failed.
#[derive(Debug, thiserror::Error)]
pub enum SessionsError {
    /// rmcp's own error.
    #[error(transparent)]
    Inner(#[from] LocalSessionManagerError),
    /// Every kept session is busy.
    #[error(transparent)]
    Full(#[from] SessionsFull),
}

/// Every one of the `max` sessions is answering a request: none can be closed for a new one.
#[derive(Debug, thiserror::Error)]
#[error("this server keeps at most {0} MCP sessions (--max-sessions) and every one is busy; try again shortly, or start the server with a larger --max-sessions")]
pub struct SessionsFull(pub usize);

impl BoundedSessions {
    /// At most `max` sessions (at least 1).
    pub fn new(max: usize) -> Self {
        let mut inner = LocalSessionManager::default();
        inner.session_config.keep_alive = Some(KEEP_ALIVE);
        BoundedSessions {
            inner,
            max: max.max(1),
            meta: Arc::default(),
        }
    }

    /// Keeps the sessions' SSE events in `store` (for `Last-Event-ID` replay on any
    /// replica) instead of each session's memory.
    pub fn with_event_store(mut self, store: Arc<dyn EventStore>) -> Self {
        self.inner = self.inner.with_event_store(store);
        self
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<SessionId, Meta>> {
        // Entries are inserted, touched and removed whole: a poisoned map is still valid.
        self.meta.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn touch(&self, id: &SessionId) {
        if let Some(m) = self.lock().get_mut(id) {
            m.last = Instant::now();
        }
    }

    /// Whether session `id` is kept here.
    pub fn contains(&self, id: &SessionId) -> bool {
        self.lock().contains_key(id)
    }

    /// Sessions kept now.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no session is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The session to close for a new one: `Ok(None)` when there is room.
    fn victim(&self) -> Result<Option<SessionId>, SessionsFull> {
        let meta = self.lock();
        if meta.len() < self.max {
            return Ok(None);
        }
        meta.iter()
            .filter(|(_, m)| m.busy == 0)
            .min_by_key(|(_, m)| m.last)
            .map(|(id, _)| Some(id.clone()))
            .ok_or(SessionsFull(self.max))
    }

    fn guard(&self, id: &SessionId) -> BusyGuard {
        if let Some(m) = self.lock().get_mut(id) {
            m.busy += 1;
            m.last = Instant::now();
            m.refreshed = m.last;
        }
        BusyGuard {
            meta: self.meta.clone(),
            id: id.clone(),
        }
    }

    fn busy<S>(&self, id: &SessionId, inner: S) -> Busy<S> {
        Busy {
            inner: Box::pin(inner),
            _guard: self.guard(id),
        }
    }

    /// Gives session `id` what the direct `tools/call` path needs (once its client has
    /// sent `notifications/initialized`). A session not kept (closed meanwhile) is left
    /// alone.
    pub fn attach(&self, id: &SessionId, direct: Direct) {
        match self.lock().get_mut(id) {
            Some(m) => m.direct = Some(direct),
            None => direct.ct.cancel(),
        }
    }

    /// Session `id`'s direct handles, the session counted busy until the guard drops; or
    /// `None` (rmcp's path answers): a session not kept here, not yet attached, or due
    /// for its [`REFRESH`] through rmcp's worker.
    pub fn direct(&self, id: &SessionId) -> Option<(Direct, BusyGuard)> {
        let mut meta = self.lock();
        let m = meta.get_mut(id)?;
        let direct = m.direct.clone()?;
        let now = Instant::now();
        if now.duration_since(m.refreshed) >= REFRESH {
            return None;
        }
        m.busy += 1;
        m.last = now;
        drop(meta);
        Some((
            direct,
            BusyGuard {
                meta: self.meta.clone(),
                id: id.clone(),
            },
        ))
    }
}

/// Counts a session busy while it lives.
pub struct BusyGuard {
    meta: Arc<Mutex<HashMap<SessionId, Meta>>>,
    id: SessionId,
}

/// A response stream of a session; the session counts as busy until it is dropped.
pub struct Busy<S> {
    inner: Pin<Box<S>>,
    _guard: BusyGuard,
}

impl<S: Stream> Stream for Busy<S> {
    type Item = S::Item;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<S::Item>> {
        self.inner.as_mut().poll_next(cx)
    }
}

impl Drop for BusyGuard {
    fn drop(&mut self) {
        let mut meta = self.meta.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(m) = meta.get_mut(&self.id) {
            m.busy = m.busy.saturating_sub(1);
            m.last = Instant::now();
        }
    }
}

impl SessionManager for BoundedSessions {
    type Error = SessionsError;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        // Concurrent creations may each close one: the cap holds within a few sessions.
        while let Some(old) = self.victim()? {
            tracing::info!(session = %old, "closing the oldest idle MCP session (--max-sessions)");
            self.close_session(&old).await?;
        }
        let (id, transport) = self.inner.create_session().await?;
        self.lock().insert(id.clone(), Meta::new());
        Ok((id, transport))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        self.touch(id);
        Ok(self.inner.initialize_session(id, message).await?)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        self.touch(id);
        Ok(self.inner.has_session(id).await?)
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        let gone = self.lock().remove(id);
        if let Some(d) = gone.and_then(|m| m.direct) {
            d.ct.cancel();
        }
        Ok(self.inner.close_session(id).await?)
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let s = self.inner.create_stream(id, message).await?;
        Ok(self.busy(id, s))
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        // The message reaches the session's worker: its idle timer starts again.
        if let Some(m) = self.lock().get_mut(id) {
            m.last = Instant::now();
            m.refreshed = m.last;
        }
        Ok(self.inner.accept_message(id, message).await?)
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        // A listening stream does not make a session busy (it may stay open for hours).
        self.touch(id);
        Ok(self.inner.create_standalone_stream(id).await?)
    }

    async fn restore_session(
        &self,
        id: SessionId,
    ) -> Result<RestoreOutcome<Self::Transport>, Self::Error> {
        // A session another replica began (a shared store): counted like a new one.
        while let Some(old) = self.victim()? {
            self.close_session(&old).await?;
        }
        let out = self.inner.restore_session(id.clone()).await?;
        if matches!(out, RestoreOutcome::Restored(_)) {
            self.lock().insert(id, Meta::new());
        }
        Ok(out)
    }

    fn event_store(&self) -> Option<Arc<dyn EventStore>> {
        self.inner.event_store()
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let s = self.inner.resume(id, last_event_id).await?;
        Ok(self.busy(id, s))
    }
}
