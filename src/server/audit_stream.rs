//! `GET /api/audit/events`: the audit trail (every call, veto and override decision) as
//! server-sent events, for the web's `/audit` page.
//!
//! The [`AuditHub`] is an audit tap ([`crate::hooks::AuditTap`]) on every engine the server
//! puts in service. Each client has its own bounded queue of [`BUFFER`] records: sending
//! never waits, so a slow client cannot hold a call up. A client whose queue is full when a
//! record comes is dropped at once, by the hub, whether or not its stream is being read: it
//! is sent one `dropped` event if it still reads, and its connection is closed shortly after
//! (a client that stopped reading altogether never takes its stream's data, so only closing
//! the connection frees it). With no client connected the tap says it wants nothing, and
//! calls skip the audit work (unless an `--audit` file or a log subscriber wants it).
//!
//! Besides, the hub keeps the last records it was handed ([`RECENT`] by default,
//! `--audit-recent N`; one short `VecDeque` of typed records), so the page opened after a
//! call still shows it: `?recent=N` replays up to N of them, oldest first, before the live
//! records (taken under the same lock as the subscription, so none is missed or shown
//! twice). To have them, a hub that keeps records always wants them: every call served is
//! timed and its record kept, but a record becomes JSON only when a client is sent it, so
//! with nobody following a call costs a clock read and a copy of its names; with
//! `--audit-recent 0` it keeps none and wants records only while a client follows, as the
//! paragraph above says.

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::routing::get;
use axum::{Extension, Router};
use futures_util::{Stream, StreamExt};
use serde_json::json;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::conn::ConnHandle;
use super::rest::ApiError;
use super::Served;
use crate::hooks::AuditRecord;

/// Records a client may fall behind before it is dropped.
pub const BUFFER: usize = 1024;

/// Records the hub keeps for `?recent=N` unless told otherwise (`--audit-recent`).
pub const RECENT: usize = 200;

struct Client {
    tx: mpsc::Sender<Arc<str>>,
    lagged: CancellationToken,
    conn: Option<ConnHandle>,
    /// With a shared store: the stream position when this client's stream opened; it is
    /// handed the records after it.
    from: Option<StreamId>,
}

/// A Redis stream entry id (`<ms>-<seq>`), ordered as Redis orders them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct StreamId(pub u64, pub u64);

impl StreamId {
    /// Reads `<ms>-<seq>`.
    pub fn parse(s: &str) -> Option<StreamId> {
        let (ms, seq) = s.split_once('-')?;
        Some(StreamId(ms.parse().ok()?, seq.parse().ok()?))
    }
}

impl std::fmt::Display for StreamId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.0, self.1)
    }
}

/// What a shared store does before a client's stream opens: makes sure every replica
/// records calls for it, and answers the stream position to follow from.
pub type Opener = Box<
    dyn Fn() -> std::pin::Pin<Box<dyn std::future::Future<Output = Option<StreamId>> + Send>>
        + Send
        + Sync,
>;

/// The audit records of a server, fanned out to its SSE clients.
#[derive(Default)]
pub struct AuditHub {
    /// How many recent records [`AuditHub::recent`] keeps (0: none).
    keep: usize,
    clients: Mutex<Vec<Client>>,
    /// `clients.len()`, read without the lock by [`crate::hooks::AuditTap::wanted`].
    count: AtomicUsize,
    /// With a shared store: records go there (and come back to every replica's clients
    /// through [`AuditHub::deliver`]); the flag says whether any replica has a client.
    forward: std::sync::OnceLock<(mpsc::Sender<Arc<str>>, Arc<std::sync::atomic::AtomicBool>)>,
    /// With a shared store: run before a client is subscribed ([`Opener`]).
    opener: std::sync::OnceLock<Opener>,
    /// The last [`RECENT`] records this server made, oldest first.
    recent: Mutex<VecDeque<AuditRecord>>,
}

impl std::fmt::Debug for AuditHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuditHub")
            .field("clients", &self.count.load(Ordering::Relaxed))
            .finish()
    }
}

impl crate::hooks::AuditTap for AuditHub {
    /// Always when the hub keeps recent records (for a page opened later); else while a
    /// client follows (with a shared store: a client of any replica).
    fn wanted(&self) -> bool {
        self.keep > 0
            || match self.forward.get() {
                Some((_, any)) => any.load(Ordering::Relaxed),
                None => self.count.load(Ordering::Acquire) > 0,
            }
    }

    fn record(&self, record: &AuditRecord) {
        match self.forward.get() {
            // Full (the store is away or slow): the record is dropped, never waited for.
            Some((f, any)) => {
                self.remember(record);
                if any.load(Ordering::Relaxed) {
                    let _ = f.try_send(text(record));
                }
            }
            None => {
                // Kept under the clients' lock, so a subscriber's replay and its live
                // records neither overlap nor leave a gap.
                let mut clients = self.lock();
                self.remember(record);
                if !clients.is_empty() {
                    self.send_to(&mut clients, None, text(record));
                }
            }
        }
    }
}

/// A record as the SSE `data:` line and the shared store carry it.
fn text(record: &AuditRecord) -> Arc<str> {
    Arc::from(record.to_json().to_string())
}

impl AuditHub {
    /// Hands a record to this server's clients (from its own engines, or from the shared
    /// store's stream).
    pub fn deliver(&self, text: Arc<str>) {
        self.deliver_at(None, text);
    }

    /// [`AuditHub::deliver`] of the shared stream's entry `id`: only to the clients whose
    /// stream opened before it.
    pub fn deliver_at(&self, id: Option<StreamId>, text: Arc<str>) {
        let mut clients = self.lock();
        self.send_to(&mut clients, id, text);
    }

    fn send_to(&self, clients: &mut Vec<Client>, id: Option<StreamId>, text: Arc<str>) {
        clients.retain(|c| {
            if let (Some(id), Some(from)) = (id, c.from) {
                if id <= from {
                    return true;
                }
            }
            match c.tx.try_send(text.clone()) {
                Ok(()) => true,
                Err(mpsc::error::TrySendError::Full(_)) => {
                    c.lagged.cancel();
                    if let Some(conn) = &c.conn {
                        conn.close_soon();
                    }
                    false
                }
                Err(mpsc::error::TrySendError::Closed(_)) => false,
            }
        });
        self.count.store(clients.len(), Ordering::Release);
    }

    /// The earliest stream position a client now connected opened at (where a shared
    /// store's reader starts when it had no client before).
    pub fn earliest_from(&self) -> Option<StreamId> {
        self.lock().iter().filter_map(|c| c.from).min()
    }

    /// A hub keeping the last `keep` records for `?recent=N` (0: none).
    pub fn keeping(keep: usize) -> AuditHub {
        AuditHub {
            keep,
            ..AuditHub::default()
        }
    }

    fn remember(&self, record: &AuditRecord) {
        if self.keep == 0 {
            return;
        }
        let mut recent = self.recent.lock().unwrap_or_else(|p| p.into_inner());
        if recent.len() >= self.keep {
            recent.pop_front();
        }
        recent.push_back(record.clone());
    }

    /// The last `n` (at most as many as it keeps) records this server made, oldest first,
    /// as JSON text.
    pub fn recent(&self, n: usize) -> Vec<Arc<str>> {
        let recent = self.recent.lock().unwrap_or_else(|p| p.into_inner());
        recent
            .iter()
            .skip(recent.len().saturating_sub(n))
            .map(text)
            .collect()
    }

    /// Sets what runs before a client's stream opens (a shared store; once).
    pub fn set_opener(&self, opener: Opener) -> bool {
        self.opener.set(opener).is_ok()
    }
}

/// One client's records, and the switch the hub flips when it falls behind.
pub struct Subscription {
    rx: mpsc::Receiver<Arc<str>>,
    lagged: CancellationToken,
}

impl AuditHub {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Client>> {
        // Clients are pushed and removed whole: a poisoned list is still valid.
        self.clients.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A receiver of records from now on (`conn`: its connection, closed if it lags).
    pub fn subscribe_on(&self, conn: Option<ConnHandle>) -> Subscription {
        self.subscribe_from(conn, None)
    }

    /// [`AuditHub::subscribe_on`] for a client whose stream opened at shared-stream
    /// position `from`.
    pub fn subscribe_from(&self, conn: Option<ConnHandle>, from: Option<StreamId>) -> Subscription {
        self.subscribe_with_recent(conn, from, 0).0
    }

    /// [`AuditHub::subscribe_from`], with the last `recent` records made before it (oldest
    /// first; none missed or repeated between them and the subscription's first record).
    pub fn subscribe_with_recent(
        &self,
        conn: Option<ConnHandle>,
        from: Option<StreamId>,
        recent: usize,
    ) -> (Subscription, Vec<Arc<str>>) {
        let (tx, rx) = mpsc::channel(BUFFER);
        let lagged = CancellationToken::new();
        let mut clients = self.lock();
        let replay = if recent > 0 {
            self.recent(recent)
        } else {
            Vec::new()
        };
        clients.retain(|c| !c.tx.is_closed());
        clients.push(Client {
            tx,
            lagged: lagged.clone(),
            conn,
            from,
        });
        self.count.store(clients.len(), Ordering::Release);
        (Subscription { rx, lagged }, replay)
    }

    /// A receiver of records from now on.
    pub fn subscribe(&self) -> Subscription {
        self.subscribe_on(None)
    }

    /// Sends records to `to` instead of this server's clients (a shared store), wanted
    /// while `any_client` is set; false when already forwarding.
    pub fn forward(
        &self,
        to: mpsc::Sender<Arc<str>>,
        any_client: Arc<std::sync::atomic::AtomicBool>,
    ) -> bool {
        self.forward.set((to, any_client)).is_ok()
    }

    /// Clients of this server now.
    pub fn clients(&self) -> usize {
        self.count.load(Ordering::Acquire)
    }
}

/// The SSE stream of one client: the `replay`ed records, `audit` events, then `dropped` if
/// it fell behind.
fn stream(
    sub: Subscription,
    replay: Vec<Arc<str>>,
) -> impl Stream<Item = Result<Event, Infallible>> {
    let replay = futures_util::stream::iter(
        replay
            .into_iter()
            .map(|r| Ok(Event::default().event("audit").data(&*r))),
    );
    replay.chain(futures_util::stream::unfold(Some(sub), |sub| async move {
        let mut sub = sub?;
        tokio::select! {
            biased;
            _ = sub.lagged.cancelled() => {
                let data = json!({"missed": 1, "message": format!(
                    "this client fell more than {BUFFER} audit records behind and was disconnected; reconnect to follow again"
                )});
                Some((
                    Ok(Event::default().event("dropped").data(data.to_string())),
                    None,
                ))
            }
            r = sub.rx.recv() => {
                let r = r?;
                Some((Ok(Event::default().event("audit").data(&*r)), Some(sub)))
            }
        }
    }))
}

async fn audit_events(
    State(served): State<Arc<Served>>,
    conn: Option<Extension<ConnHandle>>,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let recent = match q.get("recent") {
        None => 0,
        Some(n) => n.parse::<usize>().map_err(|_| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                "bad_request",
                format!("?recent={n} is not a count; give how many recent records to send first (this server keeps its last {}: --audit-recent)", served.audit_hub().keep),
            )
        })?,
    };
    let hub = served.audit_hub();
    // With a shared store, every replica is told to record before the stream answers, and
    // the stream follows from the position it had then: no call made after it opened is
    // missed, on any replica.
    let from = match hub.opener.get() {
        Some(open) => open().await,
        None => None,
    };
    let (sub, replay) = hub.subscribe_with_recent(conn.map(|Extension(c)| c), from, recent);
    let s = stream(sub, replay).take_until(served.streams_end());
    Ok(Sse::new(s).keep_alive(KeepAlive::default()))
}

/// The audit stream route.
pub fn routes() -> Router<Arc<Served>> {
    Router::new().route("/api/audit/events", get(audit_events))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hooks::AuditTap;
    use futures_util::StreamExt;
    use serde_json::Value;

    /// A call record of tool `t<n>`.
    fn rec(n: usize) -> AuditRecord {
        AuditRecord {
            ts: chrono::Utc::now(),
            event: "call",
            caller: crate::tools::Caller::Cli,
            tool: Arc::from(format!("t{n}")),
            outcome: "ok".into(),
            duration_ms: Some(0.5),
            depth: Some(0),
            reason: None,
            overridden_by: None,
            call_id: None,
        }
    }

    #[tokio::test]
    async fn a_client_that_falls_behind_is_told_and_dropped_and_no_sender_waits() {
        let hub = AuditHub::default();
        assert!(!hub.wanted(), "no client and nothing kept: nothing wanted");
        let rx = hub.subscribe();
        // Far more records than the buffer, with nobody reading: sending never waits.
        for i in 0..(BUFFER + 10) {
            hub.record(&rec(i));
        }
        let events: Vec<_> = stream(rx, Vec::new()).collect().await;
        assert_eq!(events.len(), 1, "one `dropped` event, then the stream ends");
    }

    #[tokio::test]
    async fn records_arrive_in_order_as_audit_events() {
        let hub = AuditHub::default();
        let rx = hub.subscribe();
        hub.record(&rec(1));
        hub.record(&rec(2));
        drop(hub);
        let events: Vec<_> = stream(rx, Vec::new()).collect().await;
        assert_eq!(events.len(), 2);
    }

    #[test]
    fn the_hub_keeps_the_last_records_for_a_late_client() {
        let hub = AuditHub::keeping(RECENT);
        assert!(hub.wanted(), "recent records are kept with no client");
        for i in 0..(RECENT + 5) {
            hub.record(&rec(i));
        }
        let (_sub, replay) = hub.subscribe_with_recent(None, None, 3);
        let n: Vec<Value> = replay
            .iter()
            .map(|r| serde_json::from_str::<Value>(r).unwrap()["tool"].clone())
            .collect();
        let tool = |n: usize| json!(format!("t{n}"));
        assert_eq!(n, [tool(RECENT + 2), tool(RECENT + 3), tool(RECENT + 4)]);
        assert_eq!(hub.recent(10_000).len(), RECENT, "at most RECENT are kept");
        let none = AuditHub::keeping(0);
        assert!(!none.wanted(), "keeping none: wanted only with a client");
        none.record(&rec(0));
        assert!(none.recent(10).is_empty());
    }
}
