//! `GET /api/audit/events`: the audit trail (every call, veto and override decision) as
//! server-sent events, for the web's `/audit` page.
//!
//! The [`AuditHub`] is an audit tap ([`crate::hooks::AuditTap`]) on every engine the server
//! puts in service. Records go into a bounded broadcast channel: sending never waits, so a
//! slow client cannot hold a call up; a client that falls more than [`BUFFER`] records
//! behind is told how many it missed (event `dropped`) and disconnected. With no client
//! connected the tap says it wants nothing, and calls skip the audit work (unless an
//! `--audit` file or a log subscriber wants it).

use std::convert::Infallible;
use std::sync::Arc;

use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::routing::get;
use axum::Router;
use futures_util::Stream;
use serde_json::{json, Value};
use tokio::sync::broadcast;

use super::Served;

/// Records a client may fall behind before it is dropped.
pub const BUFFER: usize = 1024;

/// The audit records of a server, fanned out to its SSE clients.
pub struct AuditHub {
    tx: broadcast::Sender<Arc<str>>,
    /// With a shared store: records go there (and come back to every replica's clients
    /// through [`AuditHub::deliver`]); the flag says whether any replica has a client.
    forward: std::sync::OnceLock<(
        tokio::sync::mpsc::Sender<Arc<str>>,
        Arc<std::sync::atomic::AtomicBool>,
    )>,
}

impl Default for AuditHub {
    fn default() -> Self {
        AuditHub {
            tx: broadcast::channel(BUFFER).0,
            forward: std::sync::OnceLock::new(),
        }
    }
}

impl std::fmt::Debug for AuditHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuditHub")
            .field("clients", &self.tx.receiver_count())
            .finish()
    }
}

impl crate::hooks::AuditTap for AuditHub {
    fn wanted(&self) -> bool {
        match self.forward.get() {
            Some((_, any)) => any.load(std::sync::atomic::Ordering::Relaxed),
            None => self.tx.receiver_count() > 0,
        }
    }

    fn record(&self, record: &Value) {
        if let Some((f, _)) = self.forward.get() {
            // Full (the store is away or slow): the record is dropped, never waited for.
            let _ = f.try_send(Arc::from(record.to_string()));
            return;
        }
        // No receiver is not an error: the record is simply not wanted.
        let _ = self.tx.send(Arc::from(record.to_string()));
    }
}

impl AuditHub {
    /// A receiver of records from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<str>> {
        self.tx.subscribe()
    }

    /// Sends records to `to` instead of this server's clients (a shared store), wanted
    /// while `any_client` is set; false when already forwarding.
    pub fn forward(
        &self,
        to: tokio::sync::mpsc::Sender<Arc<str>>,
        any_client: Arc<std::sync::atomic::AtomicBool>,
    ) -> bool {
        self.forward.set((to, any_client)).is_ok()
    }

    /// Hands a record (from the shared store) to this server's clients.
    pub fn deliver(&self, record: Arc<str>) {
        let _ = self.tx.send(record);
    }

    /// Clients of this server now.
    pub fn clients(&self) -> usize {
        self.tx.receiver_count()
    }
}

/// The SSE stream of one client: `audit` events, then `dropped` if it fell behind.
fn stream(rx: broadcast::Receiver<Arc<str>>) -> impl Stream<Item = Result<Event, Infallible>> {
    futures_util::stream::unfold(Some(rx), |rx| async move {
        let mut rx = rx?;
        match rx.recv().await {
            Ok(r) => Some((Ok(Event::default().event("audit").data(&*r)), Some(rx))),
            Err(broadcast::error::RecvError::Lagged(n)) => {
                let data = json!({"missed": n, "message": format!(
                    "this client fell {n} audit records behind and was disconnected; reconnect to follow again"
                )});
                Some((
                    Ok(Event::default().event("dropped").data(data.to_string())),
                    None,
                ))
            }
            Err(broadcast::error::RecvError::Closed) => None,
        }
    })
}

async fn audit_events(
    State(served): State<Arc<Served>>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    Sse::new(stream(served.audit_hub().subscribe())).keep_alive(KeepAlive::default())
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
