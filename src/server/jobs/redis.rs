//! Jobs on the shared store (`--store redis://…`): every replica of a served home answers
//! for every job, and every replica runs them.
//!
//! Layout (all keys under `tavern:`):
//! - `jobs:queue`, a stream with the consumer group `workers`: one entry per job to run
//!   (`id`, the parsed body as JSON, the caller). Each replica reads it as consumer
//!   `<replica>` and acknowledges (and deletes) an entry when its job has ended.
//! - `job:<id>`, a hash: `status`, `created_ms`, `started_ms`, `ended_ms`, `progress`,
//!   `result`, `error` (JSON), `attempts`, `replica` (who runs it), `cancel`.
//! - `job:<id>:events`, a stream of the job's events (`name`, `data`); SSE ids are the
//!   entry ids, so a client resumes with `Last-Event-ID` on any replica.
//! - `jobs:index`, a sorted set of ids by creation time, for `GET /api/jobs`.
//!
//! A replica runs a job as a local [`Job`] through the same `routes::run` as
//! without a store, and mirrors its event log into the store. While it runs, the replica
//! renews its lease every [`TICK`] (an `XCLAIM … JUSTID` that resets the entry's idle
//! time) and reads the `cancel` flag; a `DELETE` on any replica also publishes the id on
//! `jobs:cancel`, which every replica follows, so the cancel reaches the running replica at
//! once (within a `TICK` if the message is lost). A replica that dies stops renewing: after `--job-lease-ms` a live replica claims
//! the entry (`XAUTOCLAIM`) and runs the job again from the start (at least once); each
//! start counts an attempt (in the record and a `status` event), and past `--job-attempts`
//! the job fails with `workers_lost`. Every state change is one Lua script, so two replicas
//! never both finish a job, and a finished job is never started again. Finished jobs expire
//! after `--job-ttl`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::aio::ConnectionManager;
use redis::streams::{StreamAutoClaimReply, StreamRangeReply, StreamReadReply};
use serde_json::{json, Value};
use tokio::sync::Semaphore;

use super::store::Meter;
use super::{now_ms, Job, CANCEL_GRACE};
use crate::server::rest::{ApiError, Prepared};
use crate::server::Served;
use crate::store::redis::{store_error, RedisStore};
use crate::store::StoreError;
use crate::tools::Caller;

const QUEUE: &str = "tavern:jobs:queue";
const GROUP: &str = "workers";
const INDEX: &str = "tavern:jobs:index";
/// Pub/sub channel of cancelled job ids (the flag in the record is the fallback).
const CANCELS: &str = "tavern:jobs:cancel";

/// How often a running job's lease is renewed and its cancel flag read.
pub const TICK: Duration = Duration::from_millis(400);
/// How often an idle replica looks for queued work.
const POLL: Duration = Duration::from_millis(50);
/// How often a live job's event stream is read for new events.
const FOLLOW: Duration = Duration::from_millis(100);
/// Most jobs one replica runs at once; the rest wait in the queue for any replica.
pub const WORKERS: usize = 64;
/// How much longer than `--job-ttl` an id stays in the listing index (a job's record
/// expires `ttl` after it *ended*; this covers jobs that ran or waited that long).
const INDEX_SLACK_MS: u64 = 24 * 3600 * 1000;
/// Most events kept per job (approximately; older ones are trimmed).
const MAX_EVENTS: usize = super::MAX_EVENTS;

fn hkey(id: &str) -> String {
    format!("tavern:job:{id}")
}

fn ekey(id: &str) -> String {
    format!("tavern:job:{id}:events")
}

/// Starts an attempt: KEYS job, events; ARGV replica, max attempts, now, ttl ms.
/// Answers `{"run", n}`, `{"final"}`, `{"gone"}`, `{"cancelled"}` or `{"lost", n}`.
const BEGIN: &str = r#"
local st = redis.call('HGET', KEYS[1], 'status')
if not st then return {'gone'} end
if st == 'succeeded' or st == 'failed' or st == 'cancelled' then return {'final'} end
local function finish(status, err)
  redis.call('HSET', KEYS[1], 'status', status, 'ended_ms', ARGV[3], 'error', err, 'result', 'null')
  if not redis.call('HGET', KEYS[1], 'started_ms') then redis.call('HSET', KEYS[1], 'started_ms', ARGV[3]) end
  redis.call('XADD', KEYS[2], '*', 'name', 'status', 'data', '{"status":"' .. status .. '"}')
  redis.call('XADD', KEYS[2], '*', 'name', 'end', 'data', '{"status":"' .. status .. '","result":null,"error":' .. err .. '}')
  redis.call('PEXPIRE', KEYS[1], ARGV[4])
  redis.call('PEXPIRE', KEYS[2], ARGV[4])
end
if redis.call('HGET', KEYS[1], 'cancel') == '1' then
  finish('cancelled', '{"code":"cancelled","message":"the job was cancelled (DELETE /api/jobs/{id})"}')
  return {'cancelled'}
end
local n = redis.call('HINCRBY', KEYS[1], 'attempts', 1)
if n > tonumber(ARGV[2]) then
  finish('failed', '{"code":"workers_lost","message":"the replicas running this job stopped ' .. (n - 1) .. ' times before it ended (--job-attempts ' .. ARGV[2] .. '); it was not started again"}')
  return {'lost', n - 1}
end
redis.call('HSET', KEYS[1], 'status', 'running', 'replica', ARGV[1], 'attempt_ms', ARGV[3])
if not redis.call('HGET', KEYS[1], 'started_ms') then redis.call('HSET', KEYS[1], 'started_ms', ARGV[3]) end
redis.call('XADD', KEYS[2], '*', 'name', 'status', 'data', '{"status":"running","attempt":' .. n .. ',"replica":"' .. ARGV[1] .. '"}')
return {'run', n}
"#;

/// Ends an attempt: KEYS job, events; ARGV attempt, status, result, error, now, ttl ms.
/// Only the current attempt of a job not yet ended may end it.
const FINISH: &str = r#"
local st = redis.call('HGET', KEYS[1], 'status')
if not st or st == 'succeeded' or st == 'failed' or st == 'cancelled' then return 0 end
if redis.call('HGET', KEYS[1], 'attempts') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'status', ARGV[2], 'result', ARGV[3], 'error', ARGV[4], 'ended_ms', ARGV[5])
redis.call('XADD', KEYS[2], '*', 'name', 'status', 'data', '{"status":"' .. ARGV[2] .. '"}')
redis.call('XADD', KEYS[2], '*', 'name', 'end', 'data', '{"status":"' .. ARGV[2] .. '","result":' .. ARGV[3] .. ',"error":' .. ARGV[4] .. '}')
redis.call('PEXPIRE', KEYS[1], ARGV[6])
redis.call('PEXPIRE', KEYS[2], ARGV[6])
return 1
"#;

/// Cancels a job that no replica has started: KEYS job, events; ARGV now, ttl ms.
/// Answers the status before (`queued` ones are cancelled here; others get the flag).
const CANCEL: &str = r#"
local st = redis.call('HGET', KEYS[1], 'status')
if not st then return false end
if st == 'succeeded' or st == 'failed' or st == 'cancelled' then return st end
redis.call('HSET', KEYS[1], 'cancel', '1')
if st == 'queued' then
  local err = '{"code":"cancelled","message":"the job was cancelled (DELETE /api/jobs/{id})"}'
  redis.call('HSET', KEYS[1], 'status', 'cancelled', 'ended_ms', ARGV[1], 'started_ms', ARGV[1], 'error', err, 'result', 'null')
  redis.call('XADD', KEYS[2], '*', 'name', 'status', 'data', '{"status":"cancelled"}')
  redis.call('XADD', KEYS[2], '*', 'name', 'end', 'data', '{"status":"cancelled","result":null,"error":' .. err .. '}')
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  redis.call('PEXPIRE', KEYS[2], ARGV[2])
end
return st
"#;

/// The jobs of every replica sharing one store.
pub struct RedisJobs {
    store: RedisStore,
    replica: String,
    seq: AtomicU64,
    lease: Duration,
    attempts: u32,
    ttl: Duration,
    begin: redis::Script,
    finish: redis::Script,
    cancel: redis::Script,
    /// Jobs running on this replica, by id.
    running: Mutex<HashMap<String, Arc<Job>>>,
    workers: Arc<Semaphore>,
    /// The bytes the jobs running here keep (`--max-job-bytes`): past it their `progress`,
    /// `node`, `call` and `log` events are dropped, as without a store.
    meter: Arc<Meter>,
    /// Wakes this replica's idle worker loop when a job is queued here (other replicas
    /// find it at their next poll).
    queued: tokio::sync::Notify,
}

impl std::fmt::Debug for RedisJobs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisJobs")
            .field("replica", &self.replica)
            .finish()
    }
}

/// A store error as the API answers it: 503 `store_unavailable` (or 500 for a refusal).
pub fn api_error(e: StoreError) -> ApiError {
    use axum::http::StatusCode;
    match e {
        StoreError::Unavailable(_) => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "store_unavailable",
            format!("jobs live in the shared store, which cannot be reached now: {e}"),
        )
        .suggest(["try again in a moment; plain calls (POST /api/invoke) still work".to_string()]),
        e => ApiError::new(
            axum::http::StatusCode::INTERNAL_SERVER_ERROR,
            e.code(),
            e.to_string(),
        ),
    }
}

fn rerr(e: redis::RedisError) -> StoreError {
    store_error(&e)
}

/// The caller a queue entry names (`remote:mcp` → `Remote("mcp")`).
fn caller_from(s: &str) -> Caller {
    Caller::Remote(s.strip_prefix("remote:").unwrap_or("rest").to_string())
}

fn parse_json(v: Option<&String>) -> Value {
    v.and_then(|s| serde_json::from_str(s).ok())
        .unwrap_or(Value::Null)
}

/// A stored record as the API shows a job (the shape of [`Job::to_json`], plus
/// `attempts` and `replica`).
pub fn record_json(id: &str, h: &HashMap<String, String>) -> Value {
    let num = |k: &str| h.get(k).and_then(|v| v.parse::<u64>().ok());
    let (started, ended) = (num("started_ms"), num("ended_ms"));
    let elapsed = match (started, ended) {
        (Some(s), Some(e)) => e.saturating_sub(s),
        (Some(s), None) => now_ms().saturating_sub(s),
        _ => 0,
    };
    json!({
        "id": id,
        "status": h.get("status").map_or("queued", String::as_str),
        "created_ms": num("created_ms").unwrap_or(0),
        "started_ms": started,
        "ended_ms": ended,
        "elapsed_ms": elapsed,
        "progress": parse_json(h.get("progress")),
        "result": parse_json(h.get("result")),
        "error": parse_json(h.get("error")),
        "attempts": num("attempts").unwrap_or(0),
        "replica": h.get("replica"),
    })
}

fn is_final(status: &str) -> bool {
    matches!(status, "succeeded" | "failed" | "cancelled")
}

impl RedisJobs {
    /// Jobs in `store`, run by this replica with leases of `lease`, at most `attempts`
    /// starts per job, finished ones kept `ttl`, the running ones' events within
    /// `max_bytes`.
    pub async fn new(
        store: RedisStore,
        lease: Duration,
        attempts: u32,
        ttl: Duration,
        max_bytes: usize,
    ) -> Result<Arc<Self>, StoreError> {
        let replica = uuid::Uuid::new_v4().simple().to_string()[..12].to_string();
        ensure_group(&store.conn()).await?;
        Ok(Arc::new(RedisJobs {
            store,
            replica,
            seq: AtomicU64::new(1),
            lease: lease.max(Duration::from_millis(200)),
            attempts: attempts.max(1),
            ttl,
            begin: redis::Script::new(BEGIN),
            finish: redis::Script::new(FINISH),
            cancel: redis::Script::new(CANCEL),
            running: Mutex::new(HashMap::new()),
            workers: Arc::new(Semaphore::new(WORKERS)),
            meter: Meter::new(max_bytes),
            queued: tokio::sync::Notify::new(),
        }))
    }

    fn conn(&self) -> ConnectionManager {
        self.store.conn()
    }

    fn ttl_ms(&self) -> u64 {
        (self.ttl.as_millis() as u64).max(1)
    }

    /// This replica's name (its consumer in the group, `replica` in records).
    pub fn replica(&self) -> &str {
        &self.replica
    }

    fn running(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Job>>> {
        // Only inserts and removes: a poisoned lock still holds a valid map.
        self.running.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues `prepared` as a new job; answers its id.
    pub async fn create(&self, prepared: Prepared) -> Result<String, StoreError> {
        let seq = self.seq.fetch_add(1, Ordering::Relaxed);
        let id = format!("job-{}-{seq}", self.replica);
        let (parsed, caller) = prepared.into_parts();
        let body = serde_json::to_string(&parsed)
            .map_err(|e| StoreError::Invalid(format!("the body cannot be queued: {e}")))?;
        let now = now_ms();
        let mut c = self.conn();
        let mut p = redis::pipe();
        p.atomic()
            .cmd("HSET")
            .arg(hkey(&id))
            .arg("status")
            .arg("queued")
            .arg("created_ms")
            .arg(now)
            .arg("attempts")
            .arg(0)
            .ignore()
            .cmd("XADD")
            .arg(ekey(&id))
            .arg("*")
            .arg("name")
            .arg("status")
            .arg("data")
            .arg(r#"{"status":"queued"}"#)
            .ignore()
            .cmd("ZADD")
            .arg(INDEX)
            .arg(now)
            .arg(&id)
            .ignore()
            // Ids made longer ago than any record can live leave the index.
            .cmd("ZREMRANGEBYSCORE")
            .arg(INDEX)
            .arg("-inf")
            .arg(now.saturating_sub(self.ttl_ms() + INDEX_SLACK_MS))
            .ignore()
            .cmd("XADD")
            .arg(QUEUE)
            .arg("*")
            .arg("id")
            .arg(&id)
            .arg("body")
            .arg(body)
            .arg("caller")
            .arg(caller.to_string())
            .ignore();
        let () = p.query_async(&mut c).await.map_err(rerr)?;
        self.queued.notify_one();
        Ok(id)
    }

    /// The record of job `id`, or `None` when the store has none.
    pub async fn get(&self, id: &str) -> Result<Option<Value>, StoreError> {
        let mut c = self.conn();
        let h: HashMap<String, String> = redis::cmd("HGETALL")
            .arg(hkey(id))
            .query_async(&mut c)
            .await
            .map_err(rerr)?;
        Ok((!h.is_empty()).then(|| record_json(id, &h)))
    }

    /// The newest `max` jobs, newest first (expired ones leave the index here).
    pub async fn list(&self, max: usize) -> Result<Vec<Value>, StoreError> {
        let mut c = self.conn();
        let ids: Vec<String> = redis::cmd("ZREVRANGE")
            .arg(INDEX)
            .arg(0)
            .arg(max.max(1) as i64 - 1)
            .query_async(&mut c)
            .await
            .map_err(rerr)?;
        let mut p = redis::pipe();
        for id in &ids {
            p.cmd("HGETALL").arg(hkey(id));
        }
        let hs: Vec<HashMap<String, String>> = if ids.is_empty() {
            Vec::new()
        } else {
            p.query_async(&mut c).await.map_err(rerr)?
        };
        let mut out = Vec::new();
        let mut gone = Vec::new();
        for (id, h) in ids.iter().zip(hs) {
            if h.is_empty() {
                gone.push(id.clone());
            } else {
                out.push(record_json(id, &h));
            }
        }
        if !gone.is_empty() {
            let _: redis::RedisResult<()> = redis::cmd("ZREM")
                .arg(INDEX)
                .arg(&gone)
                .query_async(&mut c)
                .await;
        }
        Ok(out)
    }

    /// Cancels job `id`: a queued one at once; a running one through its flag, which its
    /// replica reads within [`TICK`]; then waits (a little past the cancel grace) for it
    /// to end. Answers the record, or `None` for an unknown id.
    pub async fn cancel(&self, id: &str) -> Result<Option<Value>, StoreError> {
        let mut c = self.conn();
        let before: Option<String> = self
            .cancel
            .key(hkey(id))
            .key(ekey(id))
            .arg(now_ms())
            .arg(self.ttl_ms())
            .invoke_async(&mut c)
            .await
            .map_err(rerr)?;
        let Some(before) = before else {
            return Ok(None);
        };
        if let Some(job) = self.running().get(id) {
            job.cancel.cancel();
        }
        if before == "running" {
            // The running replica hears it at once; it also reads the flag every TICK.
            let _: redis::RedisResult<i64> = redis::cmd("PUBLISH")
                .arg(CANCELS)
                .arg(id)
                .query_async(&mut c)
                .await;
            let deadline = tokio::time::Instant::now() + CANCEL_GRACE + Duration::from_secs(2);
            while tokio::time::Instant::now() < deadline {
                match self.get(id).await? {
                    Some(r) if is_final(r["status"].as_str().unwrap_or("")) => return Ok(Some(r)),
                    None => return Ok(None),
                    _ => tokio::time::sleep(FOLLOW).await,
                }
            }
        }
        self.get(id).await
    }

    /// Events of job `id` after stream id `after` (`None`: from the first), at most 256.
    pub async fn events_after(
        &self,
        id: &str,
        after: Option<&str>,
    ) -> Result<Vec<(String, String, String)>, StoreError> {
        let mut c = self.conn();
        let start = after.map_or("-".to_string(), |a| format!("({a}"));
        let r: StreamRangeReply = redis::cmd("XRANGE")
            .arg(ekey(id))
            .arg(start)
            .arg("+")
            .arg("COUNT")
            .arg(256)
            .query_async(&mut c)
            .await
            .map_err(rerr)?;
        Ok(r.ids
            .into_iter()
            .map(|e| {
                let name: String = e.get("name").unwrap_or_default();
                let data: String = e.get("data").unwrap_or_default();
                (e.id, name, data)
            })
            .collect())
    }

    /// Whether job `id` still has a record.
    pub async fn exists(&self, id: &str) -> Result<bool, StoreError> {
        let mut c = self.conn();
        redis::cmd("EXISTS")
            .arg(hkey(id))
            .query_async(&mut c)
            .await
            .map_err(rerr)
    }

    /// Runs this replica's workers until the server stops: queued entries first come,
    /// first served (at most [`WORKERS`] at once), and entries of dead replicas after
    /// their lease.
    pub fn start_workers(self: &Arc<Self>, served: Arc<Served>) {
        self.hear_cancels();
        let jobs = self.clone();
        // A replica shutting down takes no new job (those running finish, drained like
        // calls); what it leaves in the queue is for the other replicas.
        let stopping = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (flag, end) = (stopping.clone(), served.streams_end());
        tokio::spawn(async move {
            end.await;
            flag.store(true, Ordering::Release);
        });
        tokio::spawn(async move {
            let mut last_claim = tokio::time::Instant::now();
            let mut failing = false;
            loop {
                if stopping.load(Ordering::Acquire) {
                    return;
                }
                let free = jobs.workers.available_permits();
                if free == 0 {
                    tokio::time::sleep(POLL).await;
                    continue;
                }
                let mut got = match jobs.read_new(free).await {
                    Ok(v) => v,
                    Err(e) if no_group(&e) => {
                        // Redis came back without the queue (restarted empty).
                        if let Err(e) = ensure_group(&jobs.conn()).await {
                            tracing::warn!("jobs: cannot make the queue again: {e}");
                        }
                        tokio::time::sleep(POLL).await;
                        continue;
                    }
                    Err(e) => {
                        if !failing {
                            tracing::warn!("jobs: cannot read the queue: {e}");
                        }
                        failing = true;
                        tokio::time::sleep(Duration::from_millis(500)).await;
                        continue;
                    }
                };
                if failing {
                    tracing::info!("jobs: the store is back");
                    failing = false;
                }
                if last_claim.elapsed() >= jobs.lease / 2 {
                    last_claim = tokio::time::Instant::now();
                    match jobs.claim_dead(free.saturating_sub(got.len())).await {
                        Ok(v) => got.extend(v),
                        Err(e) => tracing::warn!("jobs: cannot claim lost jobs: {e}"),
                    }
                }
                if got.is_empty() {
                    tokio::select! {
                        _ = tokio::time::sleep(POLL) => {}
                        _ = jobs.queued.notified() => {}
                    }
                    continue;
                }
                for entry in got {
                    let Ok(permit) = jobs.workers.clone().try_acquire_owned() else {
                        // Left pending: claimed again after the lease.
                        break;
                    };
                    let (jobs, served) = (jobs.clone(), served.clone());
                    tokio::spawn(async move {
                        let s = served.clone();
                        s.track(jobs.run_entry(&served, entry)).await;
                        drop(permit);
                    });
                }
            }
        });
    }

    /// Follows the cancel channel (reconnecting while the store is away) and cancels the
    /// jobs this replica runs.
    fn hear_cancels(self: &Arc<Self>) {
        use futures_util::StreamExt;
        let jobs = self.clone();
        tokio::spawn(async move {
            loop {
                if let Ok(mut ps) = jobs.store.client().get_async_pubsub().await {
                    if ps.subscribe(CANCELS).await.is_ok() {
                        let mut msgs = ps.on_message();
                        while let Some(m) = msgs.next().await {
                            let Ok(id) = m.get_payload::<String>() else {
                                continue;
                            };
                            let job = jobs.running().get(&id).cloned();
                            if let Some(job) = job {
                                job.cancel.cancel();
                            }
                        }
                    }
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        });
    }

    async fn read_new(&self, count: usize) -> Result<Vec<Entry>, StoreError> {
        let mut c = self.conn();
        let r: Option<StreamReadReply> = redis::cmd("XREADGROUP")
            .arg("GROUP")
            .arg(GROUP)
            .arg(&self.replica)
            .arg("COUNT")
            .arg(count.max(1))
            .arg("STREAMS")
            .arg(QUEUE)
            .arg(">")
            .query_async(&mut c)
            .await
            .map_err(rerr)?;
        Ok(r.into_iter()
            .flat_map(|r| r.keys)
            .flat_map(|k| k.ids)
            .map(Entry::from)
            .collect())
    }

    async fn claim_dead(&self, count: usize) -> Result<Vec<Entry>, StoreError> {
        if count == 0 {
            return Ok(Vec::new());
        }
        let mut c = self.conn();
        let r: StreamAutoClaimReply = redis::cmd("XAUTOCLAIM")
            .arg(QUEUE)
            .arg(GROUP)
            .arg(&self.replica)
            .arg(self.lease.as_millis() as u64)
            .arg("0-0")
            .arg("COUNT")
            .arg(count)
            .query_async(&mut c)
            .await
            .map_err(rerr)?;
        if !r.deleted_ids.is_empty() {
            let _: redis::RedisResult<()> = redis::cmd("XACK")
                .arg(QUEUE)
                .arg(GROUP)
                .arg(&r.deleted_ids)
                .query_async(&mut c)
                .await;
        }
        Ok(r.claimed.into_iter().map(Entry::from).collect())
    }

    /// Acknowledges and removes a queue entry whose job has ended.
    async fn done(&self, entry: &str) {
        let mut c = self.conn();
        let mut p = redis::pipe();
        p.cmd("XACK")
            .arg(QUEUE)
            .arg(GROUP)
            .arg(entry)
            .ignore()
            .cmd("XDEL")
            .arg(QUEUE)
            .arg(entry)
            .ignore();
        if let Err(e) = p.query_async::<()>(&mut c).await {
            // Left pending: a replica claims it after the lease and finds the job ended.
            tracing::warn!("jobs: cannot acknowledge {entry}: {e}");
        }
    }

    async fn run_entry(&self, served: &Arc<Served>, entry: Entry) {
        let Entry {
            entry,
            id,
            body,
            caller,
        } = entry;
        let Some(id) = id else {
            self.done(&entry).await;
            return;
        };
        let mut c = self.conn();
        let begun: Result<Vec<redis::Value>, _> = self
            .begin
            .key(hkey(&id))
            .key(ekey(&id))
            .arg(&self.replica)
            .arg(self.attempts)
            .arg(now_ms())
            .arg(self.ttl_ms())
            .invoke_async(&mut c)
            .await;
        let begun = match begun {
            Ok(v) => v,
            Err(e) => {
                // Left pending: this or another replica tries again after the lease.
                tracing::warn!(job = %id, "jobs: cannot start: {e}");
                return;
            }
        };
        let verdict: String = begun
            .first()
            .and_then(|v| redis::from_redis_value_ref(v).ok())
            .unwrap_or_default();
        let attempt: u64 = begun
            .get(1)
            .and_then(|v| redis::from_redis_value_ref(v).ok())
            .unwrap_or(0);
        if verdict != "run" {
            if verdict == "lost" {
                tracing::warn!(job = %id, attempts = attempt, "jobs: failed with workers_lost");
            }
            self.done(&entry).await;
            return;
        }
        let parsed = body
            .as_deref()
            .and_then(|b| serde_json::from_str::<crate::protocol::Parsed>(b).ok())
            .unwrap_or_default();
        let prepared = Prepared::from_parts(parsed, caller_from(caller.as_deref().unwrap_or("")));
        let job = Job::new(id.clone(), 0, self.meter.clone());
        job.admitted();
        self.running().insert(id.clone(), job.clone());
        let run = super::routes::run(served, &job, prepared);
        let mirror = self.mirror(&job, &entry, attempt);
        let ((), ended) = tokio::join!(run, mirror);
        self.running().remove(&id);
        job.evicted();
        if ended {
            self.done(&entry).await;
        }
    }

    /// Copies the local job's events into the store while it runs, renewing the lease and
    /// reading the cancel flag every [`TICK`]; ends the record when the job ends. Answers
    /// whether the record was ended (or was already ended by someone else).
    async fn mirror(&self, job: &Arc<Job>, entry: &str, attempt: u64) -> bool {
        let id = job.id.clone();
        let mut idx = 0usize;
        let mut renewed = tokio::time::Instant::now();
        loop {
            if renewed.elapsed() >= TICK {
                renewed = tokio::time::Instant::now();
                self.renew(job, entry).await;
            }
            // Everything logged so far, in one round trip.
            let mut batch = Vec::new();
            let mut end = None;
            loop {
                match job.next_event(idx) {
                    Ok(ev) => {
                        idx += 1;
                        match ev.name {
                            "end" => {
                                end = Some(
                                    serde_json::from_str::<Value>(&ev.data).unwrap_or_default(),
                                );
                                break;
                            }
                            // Status changes are written by the attempt and end scripts.
                            "status" => {}
                            _ => batch.push(ev),
                        }
                    }
                    Err(rx) => {
                        if batch.is_empty() && end.is_none() {
                            // Wait for the log to grow, or the next tick.
                            let mut rx = rx;
                            tokio::select! {
                                _ = rx.changed() => continue,
                                _ = tokio::time::sleep_until(renewed + TICK) => {
                                    renewed = tokio::time::Instant::now();
                                    self.renew(job, entry).await;
                                    continue;
                                }
                            }
                        }
                        break;
                    }
                }
            }
            if !batch.is_empty() {
                let mut p = redis::pipe();
                let mut progress = None;
                for ev in &batch {
                    if ev.name == "progress" {
                        progress = Some(ev.data.to_string());
                    }
                    p.cmd("XADD")
                        .arg(ekey(&id))
                        .arg("MAXLEN")
                        .arg("~")
                        .arg(MAX_EVENTS)
                        .arg("*")
                        .arg("name")
                        .arg(ev.name)
                        .arg("data")
                        .arg(ev.data.to_string())
                        .ignore();
                }
                if let Some(pr) = progress {
                    p.cmd("HSET")
                        .arg(hkey(&id))
                        .arg("progress")
                        .arg(pr)
                        .ignore();
                }
                let mut c = self.conn();
                if let Err(e) = p.query_async::<()>(&mut c).await {
                    tracing::warn!(job = %id, "jobs: events not stored: {e}");
                }
            }
            if let Some(end) = end {
                return self.end(&id, attempt, &end).await;
            }
        }
    }

    /// Renews the lease on `entry` and reads the job's cancel flag.
    async fn renew(&self, job: &Job, entry: &str) {
        let mut c = self.conn();
        let mut p = redis::pipe();
        p.cmd("XCLAIM")
            .arg(QUEUE)
            .arg(GROUP)
            .arg(&self.replica)
            .arg(0)
            .arg(entry)
            .arg("JUSTID")
            .ignore()
            .cmd("HGET")
            .arg(hkey(&job.id))
            .arg("cancel");
        match p.query_async::<(Option<String>,)>(&mut c).await {
            Ok((flag,)) => {
                if flag.as_deref() == Some("1") {
                    job.cancel.cancel();
                }
            }
            Err(e) => tracing::warn!(job = %job.id, "jobs: lease not renewed: {e}"),
        }
    }

    /// Writes the end of attempt `attempt` (tries a few times while the store is away).
    async fn end(&self, id: &str, attempt: u64, end: &Value) -> bool {
        let status = end["status"].as_str().unwrap_or("failed").to_string();
        let result = end["result"].to_string();
        let error = end["error"].to_string();
        for i in 0..20u32 {
            let mut c = self.conn();
            let r: redis::RedisResult<i64> = self
                .finish
                .key(hkey(id))
                .key(ekey(id))
                .arg(attempt)
                .arg(&status)
                .arg(&result)
                .arg(&error)
                .arg(now_ms())
                .arg(self.ttl_ms())
                .invoke_async(&mut c)
                .await;
            match r {
                Ok(_) => return true,
                Err(e) => {
                    tracing::warn!(job = %id, "jobs: end not stored (try {}): {e}", i + 1);
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
            }
        }
        false
    }
}

/// Makes the queue and its consumer group unless they exist (at start, and again when
/// Redis comes back empty). The group reads the queue from its start, so no job queued
/// before it is missed.
async fn ensure_group(c: &ConnectionManager) -> Result<(), StoreError> {
    let mut c = c.clone();
    let r: redis::RedisResult<()> = redis::cmd("XGROUP")
        .arg("CREATE")
        .arg(QUEUE)
        .arg(GROUP)
        .arg("0")
        .arg("MKSTREAM")
        .query_async(&mut c)
        .await;
    match r {
        Err(e) if e.code() != Some("BUSYGROUP") => Err(rerr(e)),
        _ => Ok(()),
    }
}

fn no_group(e: &StoreError) -> bool {
    matches!(e, StoreError::Invalid(m) if m.contains("NOGROUP"))
}

/// One queue entry.
struct Entry {
    entry: String,
    id: Option<String>,
    body: Option<String>,
    caller: Option<String>,
}

impl From<redis::streams::StreamId> for Entry {
    fn from(e: redis::streams::StreamId) -> Self {
        Entry {
            id: e.get("id"),
            body: e.get("body"),
            caller: e.get("caller"),
            entry: e.id,
        }
    }
}

/// The status of a record, as text.
pub fn status_of(record: &Value) -> &str {
    record["status"].as_str().unwrap_or("queued")
}

/// Whether a record's job has ended.
pub fn ended(record: &Value) -> bool {
    is_final(status_of(record))
}
