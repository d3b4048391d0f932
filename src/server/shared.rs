//! What a served home shares between replicas in a Redis store (`--store redis://…`): the
//! jobs ([`super::jobs::redis`]), MCP sessions (any replica restores a 2025 client's
//! session, so no balancer stickiness is needed) and the audit stream (every replica's
//! calls on every replica's `/api/audit/events`). Scripts' `api.store` uses the same store
//! through the engine ([`crate::store::redis::RedisStore`]).
//!
//! The audit stream is `tavern:audit`, capped at about [`AUDIT_KEEP`] records. A replica
//! with SSE clients keeps the key `tavern:audit:wanted` alive; every replica reads it each
//! second, and taps calls for the audit only while some replica has a client. A client's
//! stream answers only after every replica has said (on `tavern:audit:hello`) that it
//! records, and follows the stream from the position it had then, so no call made after
//! the stream opened is missed, whichever replica made it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use redis::streams::StreamRangeReply;
use rmcp::transport::streamable_http_server::session::store::{
    EventStore, EventStoreError, EventStream, SessionState, SessionStore, SessionStoreError,
};
use rmcp::transport::streamable_http_server::session::ServerSseMessage;

use super::audit_stream::StreamId;
use super::jobs::redis::RedisJobs;
use super::Served;
use crate::store::redis::RedisStore;
use crate::store::StoreError;

type OpenFuture = std::pin::Pin<Box<dyn std::future::Future<Output = Option<StreamId>> + Send>>;

const AUDIT: &str = "tavern:audit";
const AUDIT_WANTED: &str = "tavern:audit:wanted";
/// Channel on which a replica whose client opens a stream tells every replica to record.
const AUDIT_HELLO: &str = "tavern:audit:hello";
/// How long a stream that opens waits for every replica to say it records.
const HELLO_WAIT: Duration = Duration::from_secs(1);
/// About how many audit records the shared stream keeps.
pub const AUDIT_KEEP: usize = 10_000;
/// How long an MCP session unused is kept in the store.
const SESSION_TTL: Duration = Duration::from_secs(24 * 3600);

/// The shared store's parts of one server.
#[derive(Debug)]
pub struct Shared {
    /// The store.
    pub store: RedisStore,
    /// The jobs in it.
    pub jobs: Arc<RedisJobs>,
}

/// Puts `served`'s jobs, MCP sessions and audit stream in `store`, and starts this
/// replica's job workers and audit relay. Fails when the store cannot be reached now.
pub async fn attach(served: &Arc<Served>, store: RedisStore) -> Result<(), StoreError> {
    let o = &served.options;
    let jobs = RedisJobs::new(
        store.clone(),
        o.job_lease,
        o.job_attempts,
        o.job_ttl,
        o.max_job_bytes,
    )
    .await?;
    jobs.start_workers(served.clone());
    let shared = Shared {
        store: store.clone(),
        jobs,
    };
    if served.shared.set(shared).is_err() {
        return Err(StoreError::Invalid(
            "this server already has a shared store".into(),
        ));
    }
    relay_audit(served, store.clone());
    watch_world(served, store);
    Ok(())
}

/// How often a replica looks whether the served world in the store changed.
pub const WORLD_POLL: Duration = Duration::from_secs(1);

/// The store key of the world served agents share (`tavern:world:home`).
fn world_key() -> String {
    format!("tavern:world:{}", crate::agent::SERVED_WORLD)
}

/// Tells MCP subscribers of `tavern://world` when the served world changes in the store,
/// whoever wrote it (a host sharing the store, another replica): every [`WORLD_POLL`], the
/// document is compared with the last one read. A change this process announced itself
/// (a script's `api.world.set`, a host's set through the engine) is read at once, so the
/// poll does not announce it a second time.
fn watch_world(served: &Arc<Served>, store: RedisStore) {
    let end = served.streams_end();
    let mut told = crate::tools::resource_updates().subscribe();
    tokio::spawn(async move {
        use crate::store::KvStore;
        let world = crate::tools::WORLD_URI;
        let mut last: Option<Option<serde_json::Value>> = None;
        let poll = async {
            let mut tick = tokio::time::interval(WORLD_POLL);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                let announced = tokio::select! {
                    _ = tick.tick() => false,
                    r = told.recv() => match r {
                        Ok(uri) if uri == world => true,
                        Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                        Err(_) => false,
                    },
                };
                if let Ok(doc) = store.get(&world_key()).await {
                    if !announced && last.as_ref().is_some_and(|l| *l != doc) {
                        let _ = crate::tools::resource_updates().send(world.to_string());
                    }
                    last = Some(doc);
                }
            }
        };
        tokio::select! {
            () = poll => {}
            () = end => {}
        }
    });
}

fn relay_audit(served: &Arc<Served>, store: RedisStore) {
    let hub = served.audit_hub().clone();
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Arc<str>>(4096);
    let any = Arc::new(AtomicBool::new(false));
    hub.forward(tx, any.clone());
    // Publisher: this replica's records into the stream, in batches.
    let s = store.clone();
    tokio::spawn(async move {
        let mut failing = false;
        while let Some(first) = rx.recv().await {
            let mut p = redis::pipe();
            let mut next = Some(first);
            let mut n = 0;
            while let Some(r) = next.take() {
                p.cmd("XADD")
                    .arg(AUDIT)
                    .arg("MAXLEN")
                    .arg("~")
                    .arg(AUDIT_KEEP)
                    .arg("*")
                    .arg("r")
                    .arg(&*r)
                    .ignore();
                n += 1;
                if n < 256 {
                    next = rx.try_recv().ok();
                }
            }
            let mut c = s.conn();
            match p.query_async::<()>(&mut c).await {
                Ok(()) => failing = false,
                Err(e) => {
                    if !failing {
                        tracing::warn!("audit records not shared (the store is away): {e}");
                    }
                    failing = true;
                }
            }
        }
    });
    // A client's stream opens only once every replica records: the "wanted" key is set,
    // every replica is told on AUDIT_HELLO and answers on a list of its own, and the
    // stream follows from the position it had then.
    let (s, flag) = (store.clone(), any.clone());
    hub.set_opener(Box::new(move || -> OpenFuture {
        let (store, flag) = (s.clone(), flag.clone());
        Box::pin(async move {
            flag.store(true, Ordering::SeqCst);
            let mut c = store.conn();
            let nonce = uuid::Uuid::new_v4().simple().to_string();
            let acks = format!("{AUDIT_HELLO}:{nonce}");
            let told: redis::RedisResult<(i64,)> = redis::pipe()
                .cmd("SET")
                .arg(AUDIT_WANTED)
                .arg(1)
                .arg("PX")
                .arg(3000)
                .ignore()
                .cmd("PUBLISH")
                .arg(AUDIT_HELLO)
                .arg(&nonce)
                .query_async(&mut c)
                .await;
            if let Ok((n,)) = told {
                let until = tokio::time::Instant::now() + HELLO_WAIT;
                while tokio::time::Instant::now() < until {
                    let got: i64 = redis::cmd("LLEN")
                        .arg(&acks)
                        .query_async(&mut c)
                        .await
                        .unwrap_or(i64::MAX);
                    if got >= n {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }
            let r: redis::RedisResult<StreamRangeReply> = redis::cmd("XREVRANGE")
                .arg(AUDIT)
                .arg("+")
                .arg("-")
                .arg("COUNT")
                .arg(1)
                .query_async(&mut c)
                .await;
            let r = r.ok()?;
            Some(
                r.ids
                    .first()
                    .and_then(|e| StreamId::parse(&e.id))
                    .unwrap_or(StreamId(0, 0)),
            )
        })
    }));
    // Every replica: told that a stream opens somewhere, it records from now on, and says so.
    // When this replica was last told (ms since the epoch): the beat below does not turn
    // recording off within the time a stream's "wanted" key lives after that, whatever an
    // earlier read of the key said.
    let told = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let (s, flag, told_at) = (store.clone(), any.clone(), told.clone());
    tokio::spawn(async move {
        use futures_util::StreamExt;
        loop {
            if let Ok(mut ps) = s.client().get_async_pubsub().await {
                if ps.subscribe(AUDIT_HELLO).await.is_ok() {
                    let mut msgs = ps.on_message();
                    while let Some(m) = msgs.next().await {
                        let Ok(nonce) = m.get_payload::<String>() else {
                            continue;
                        };
                        told_at.store(super::jobs::now_ms(), Ordering::SeqCst);
                        flag.store(true, Ordering::SeqCst);
                        let mut c = s.conn();
                        let acks = format!("{AUDIT_HELLO}:{nonce}");
                        let _: redis::RedisResult<()> = redis::pipe()
                            .cmd("RPUSH")
                            .arg(&acks)
                            .arg(1)
                            .ignore()
                            .cmd("PEXPIRE")
                            .arg(&acks)
                            .arg(10_000)
                            .ignore()
                            .query_async(&mut c)
                            .await;
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    });
    // Reader: the stream to this replica's clients; the "wanted" flag both ways.
    tokio::spawn(async move {
        let mut last: Option<String> = None;
        let mut beat = tokio::time::Instant::now() - Duration::from_secs(1);
        loop {
            let clients = hub.clients();
            let mut c = store.conn();
            if beat.elapsed() >= Duration::from_secs(1) {
                beat = tokio::time::Instant::now();
                if clients > 0 {
                    let _: redis::RedisResult<()> = redis::cmd("SET")
                        .arg(AUDIT_WANTED)
                        .arg(1)
                        .arg("PX")
                        .arg(3000)
                        .query_async(&mut c)
                        .await;
                }
                let wanted: bool = redis::cmd("EXISTS")
                    .arg(AUDIT_WANTED)
                    .query_async(&mut c)
                    .await
                    .unwrap_or(false);
                let lately =
                    super::jobs::now_ms().saturating_sub(told.load(Ordering::SeqCst)) < 3000;
                any.store(wanted || clients > 0 || lately, Ordering::SeqCst);
            }
            if clients == 0 {
                last = None;
            } else {
                if clients > 0 {
                    any.store(true, Ordering::Relaxed);
                }
                if last.is_none() {
                    // From where the earliest client's stream opened.
                    last = hub.earliest_from().map(|p| p.to_string());
                }
                if last.is_none() {
                    let r: redis::RedisResult<StreamRangeReply> = redis::cmd("XREVRANGE")
                        .arg(AUDIT)
                        .arg("+")
                        .arg("-")
                        .arg("COUNT")
                        .arg(1)
                        .query_async(&mut c)
                        .await;
                    if let Ok(r) = r {
                        last = Some(r.ids.first().map_or("0-0".into(), |e| e.id.clone()));
                    }
                }
                if let Some(from) = &last {
                    let r: redis::RedisResult<StreamRangeReply> = redis::cmd("XRANGE")
                        .arg(AUDIT)
                        .arg(format!("({from}"))
                        .arg("+")
                        .arg("COUNT")
                        .arg(1000)
                        .query_async(&mut c)
                        .await;
                    if let Ok(r) = r {
                        if let Some(l) = r.ids.last() {
                            last = Some(l.id.clone());
                        }
                        for e in r.ids {
                            if let Some(rec) = e.get::<String>("r") {
                                hub.deliver_at(StreamId::parse(&e.id), Arc::from(rec));
                            }
                        }
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
}

/// MCP sessions (a 2025 client's `initialize`) in the store, so any replica can restore a
/// session another one began.
#[derive(Debug, Clone)]
pub struct SessionsInStore(pub RedisStore);

fn session_key(id: &str) -> String {
    format!("tavern:mcp:session:{id}")
}

#[async_trait::async_trait]
impl SessionStore for SessionsInStore {
    async fn load(&self, session_id: &str) -> Result<Option<SessionState>, SessionStoreError> {
        let mut c = self.0.conn();
        let raw: Option<String> = redis::cmd("GET")
            .arg(session_key(session_id))
            .query_async(&mut c)
            .await?;
        match raw {
            Some(s) => Ok(Some(serde_json::from_str(&s)?)),
            None => Ok(None),
        }
    }

    async fn store(&self, session_id: &str, state: &SessionState) -> Result<(), SessionStoreError> {
        let mut c = self.0.conn();
        let () = redis::cmd("SET")
            .arg(session_key(session_id))
            .arg(serde_json::to_string(state)?)
            .arg("PX")
            .arg(SESSION_TTL.as_millis() as u64)
            .query_async(&mut c)
            .await?;
        Ok(())
    }

    async fn delete(&self, session_id: &str) -> Result<(), SessionStoreError> {
        let mut c = self.0.conn();
        let () = redis::cmd("DEL")
            .arg(session_key(session_id))
            .query_async(&mut c)
            .await?;
        Ok(())
    }
}

/// How long the events of an MCP event stream are kept for `Last-Event-ID` replay after
/// its last event.
pub const EVENTS_TTL: Duration = Duration::from_secs(3600);
/// About how many events of one MCP event stream are kept for replay.
pub const EVENTS_KEEP: usize = 1000;

/// The SSE events of MCP sessions in the store (rmcp's [`EventStore`]): every event of an
/// event stream is written to the Redis stream `tavern:mcp:events:<stream>` before it is
/// sent, with the id `<stream>|<entry>`, so a `GET` with `Last-Event-ID` to any replica
/// replays the events that followed from the store. Each stream keeps about
/// [`EVENTS_KEEP`] events, for [`EVENTS_TTL`] after its last one.
#[derive(Debug, Clone)]
pub struct EventsInStore(pub RedisStore);

fn events_key(stream: &str) -> String {
    format!("tavern:mcp:events:{stream}")
}

/// An event as kept: the message (none for a priming event) and the retry hint.
#[derive(serde::Serialize, serde::Deserialize)]
struct KeptEvent {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    m: Option<rmcp::model::ServerJsonRpcMessage>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    retry_ms: Option<u64>,
}

#[async_trait::async_trait]
impl EventStore for EventsInStore {
    async fn store_event(
        &self,
        stream_id: &str,
        event: &ServerSseMessage,
    ) -> Result<String, EventStoreError> {
        let kept = KeptEvent {
            m: event.message.as_deref().cloned(),
            retry_ms: event.retry.map(|d| d.as_millis() as u64),
        };
        let key = events_key(stream_id);
        let mut c = self.0.conn();
        let (entry,): (String,) = redis::pipe()
            .atomic()
            .cmd("XADD")
            .arg(&key)
            .arg("MAXLEN")
            .arg("~")
            .arg(EVENTS_KEEP)
            .arg("*")
            .arg("e")
            .arg(serde_json::to_string(&kept)?)
            .cmd("PEXPIRE")
            .arg(&key)
            .arg(EVENTS_TTL.as_millis() as u64)
            .ignore()
            .query_async(&mut c)
            .await?;
        Ok(format!("{stream_id}|{entry}"))
    }

    async fn replay_events_after(
        &self,
        last_event_id: &str,
    ) -> Result<EventStream, EventStoreError> {
        let Some((stream_id, entry)) = last_event_id.rsplit_once('|') else {
            return Err(format!(
                "Last-Event-ID '{last_event_id}' is not an event id this server gave"
            )
            .into());
        };
        let mut c = self.0.conn();
        let r: StreamRangeReply = redis::cmd("XRANGE")
            .arg(events_key(stream_id))
            .arg(format!("({entry}"))
            .arg("+")
            .query_async(&mut c)
            .await?;
        let events: Vec<ServerSseMessage> = r
            .ids
            .into_iter()
            .filter_map(|e| {
                let raw = e.get::<String>("e")?;
                let kept: KeptEvent = serde_json::from_str(&raw).ok()?;
                let id = format!("{stream_id}|{}", e.id);
                let mut ev = match kept.m {
                    Some(m) => ServerSseMessage::new(id, m),
                    None => ServerSseMessage::priming(id, Duration::ZERO),
                };
                ev.retry = kept.retry_ms.map(Duration::from_millis);
                Some(ev)
            })
            .collect();
        Ok(Box::pin(futures_util::stream::iter(events)))
    }
}
