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

use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::routing::get;
use axum::{Extension, Router};
use futures_util::{Stream, StreamExt};
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::conn::ConnHandle;
use super::Served;

/// Records a client may fall behind before it is dropped.
pub const BUFFER: usize = 1024;

struct Client {
    tx: mpsc::Sender<Arc<str>>,
    lagged: CancellationToken,
    conn: Option<ConnHandle>,
}

/// The audit records of a server, fanned out to its SSE clients.
#[derive(Default)]
pub struct AuditHub {
    clients: Mutex<Vec<Client>>,
    /// `clients.len()`, read without the lock by [`crate::hooks::AuditTap::wanted`].
    count: AtomicUsize,
    /// With a shared store: records go there (and come back to every replica's clients
    /// through [`AuditHub::deliver`]); the flag says whether any replica has a client.
    forward: std::sync::OnceLock<(mpsc::Sender<Arc<str>>, Arc<std::sync::atomic::AtomicBool>)>,
}

impl std::fmt::Debug for AuditHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuditHub")
            .field("clients", &self.count.load(Ordering::Relaxed))
            .finish()
    }
}

impl crate::hooks::AuditTap for AuditHub {
    fn wanted(&self) -> bool {
        match self.forward.get() {
            Some((_, any)) => any.load(Ordering::Relaxed),
            None => self.count.load(Ordering::Acquire) > 0,
        }
    }

    fn record(&self, record: &Value) {
        let text: Arc<str> = Arc::from(record.to_string());
        match self.forward.get() {
            // Full (the store is away or slow): the record is dropped, never waited for.
            Some((f, _)) => {
                let _ = f.try_send(text);
            }
            None => self.deliver(text),
        }
    }
}

impl AuditHub {
    /// Hands a record to this server's clients (from its own engines, or from the shared
    /// store's stream).
    pub fn deliver(&self, text: Arc<str>) {
        let mut clients = self.lock();
        clients.retain(|c| match c.tx.try_send(text.clone()) {
            Ok(()) => true,
            Err(mpsc::error::TrySendError::Full(_)) => {
                c.lagged.cancel();
                if let Some(conn) = &c.conn {
                    conn.close_soon();
                }
                false
            }
            Err(mpsc::error::TrySendError::Closed(_)) => false,
        });
        self.count.store(clients.len(), Ordering::Release);
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
        let (tx, rx) = mpsc::channel(BUFFER);
        let lagged = CancellationToken::new();
        let mut clients = self.lock();
        clients.retain(|c| !c.tx.is_closed());
        clients.push(Client {
            tx,
            lagged: lagged.clone(),
            conn,
        });
        self.count.store(clients.len(), Ordering::Release);
        Subscription { rx, lagged }
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

/// The SSE stream of one client: `audit` events, then `dropped` if it fell behind.
fn stream(sub: Subscription) -> impl Stream<Item = Result<Event, Infallible>> {
    futures_util::stream::unfold(Some(sub), |sub| async move {
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
    })
}

async fn audit_events(
    State(served): State<Arc<Served>>,
    conn: Option<Extension<ConnHandle>>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let sub = served.audit_hub().subscribe_on(conn.map(|Extension(c)| c));
    let s = stream(sub).take_until(served.streams_end());
    Sse::new(s).keep_alive(KeepAlive::default())
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

    #[tokio::test]
    async fn a_client_that_falls_behind_is_told_and_dropped_and_no_sender_waits() {
        let hub = AuditHub::default();
        assert!(!hub.wanted(), "no client: nothing wanted");
        let rx = hub.subscribe();
        assert!(hub.wanted());
        // Far more records than the buffer, with nobody reading: sending never waits.
        for i in 0..(BUFFER + 10) {
            hub.record(&json!({"event": "call", "n": i}));
        }
        let events: Vec<_> = stream(rx).collect().await;
        assert_eq!(events.len(), 1, "one `dropped` event, then the stream ends");
    }

    #[tokio::test]
    async fn records_arrive_in_order_as_audit_events() {
        let hub = AuditHub::default();
        let rx = hub.subscribe();
        hub.record(&json!({"event": "call", "n": 1}));
        hub.record(&json!({"event": "decision", "n": 2}));
        drop(hub);
        let events: Vec<_> = stream(rx).collect().await;
        assert_eq!(events.len(), 2);
    }
}
