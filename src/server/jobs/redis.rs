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
//! - The byte budget (`--max-job-bytes`) of all the jobs in the store, counted as without a
//!   store (result text, event texts, a fixed overhead per job and per event):
//!   `jobs:used` the total, `jobs:sizes` a hash of each job's bytes, `jobs:kept` the
//!   finished jobs by creation time (evicted oldest first) and `jobs:ends` by expiry.
//!   Every script that writes a job also counts what it wrote and settles the budget
//!   (`BUDGET`), so the count is never apart from what it counts, whichever replica wrote
//!   or died. An evicted job's record becomes a tombstone (`evicted`) for the rest of its
//!   time to live: its id answers 410 `job_expired` on every replica. A job's result is
//!   kept once, in its record; the `end` event is given it when it is read.
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
//! after `--job-ttl`, or are evicted, oldest first, past `--max-job-bytes`; while the jobs
//! still running alone pass it, new ones are refused and the running ones drop their
//! chatter (the store's total, read back after every write and lease renewal, sets the
//! [`Meter`]'s pressure).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::aio::ConnectionManager;
use redis::streams::{StreamAutoClaimReply, StreamRangeReply, StreamReadReply};
use serde_json::Value;
use tokio::sync::Semaphore;

use super::store::{Meter, Refused};
use super::{now_ms, Job, CANCEL_GRACE};
use crate::server::rest::{ApiError, Prepared};
use crate::server::Served;
use crate::store::redis::{store_error, RedisStore};
use crate::store::StoreError;
use crate::tools::Caller;

const QUEUE: &str = "tavern:jobs:queue";
const GROUP: &str = "workers";
const INDEX: &str = "tavern:jobs:index";
/// The bytes the jobs in the store retain (the scripts' `USED`).
pub const USED: &str = "tavern:jobs:used";
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

/// The record key of job `id`.
pub fn hkey(id: &str) -> String {
    format!("tavern:job:{id}")
}

fn ekey(id: &str) -> String {
    format!("tavern:job:{id}:events")
}

/// What every script shares: the byte budget of the jobs the store keeps. `grow` counts
/// bytes on a job and on the total; `event` appends an event and counts it; `ended` puts a
/// finished job in the eviction order (by creation, oldest first) and the expiry order;
/// `settle` forgets jobs past their time to live, then evicts the oldest finished jobs
/// until the total is within `max` (an evicted record becomes a tombstone `evicted` for
/// the rest of its time to live, so its id answers 410), and answers the total.
/// (Evicted jobs' keys are named inside the script: one Redis, not a Cluster.)
const BUDGET: &str = r#"
local USED, SIZES, KEPT, ENDS, INDEX = 'tavern:jobs:used', 'tavern:jobs:sizes', 'tavern:jobs:kept', 'tavern:jobs:ends', 'tavern:jobs:index'
local function rec(id) return 'tavern:job:' .. id end
local function evs(id) return 'tavern:job:' .. id .. ':events' end
local function grow(id, n)
  redis.call('HINCRBY', SIZES, id, n)
  redis.call('INCRBY', USED, n)
end
local function event(id, name, data)
  redis.call('XADD', evs(id), '*', 'name', name, 'data', data)
  grow(id, EVENT_OVERHEAD + #data)
end
local function forget(id)
  local n = tonumber(redis.call('HGET', SIZES, id) or '0')
  redis.call('HDEL', SIZES, id)
  redis.call('ZREM', KEPT, id)
  redis.call('ZREM', ENDS, id)
  if redis.call('DECRBY', USED, n) < 0 then redis.call('SET', USED, 0) end
end
local function ended(id, now, ttl)
  local created = tonumber(redis.call('HGET', rec(id), 'created_ms') or now)
  redis.call('ZADD', KEPT, created, id)
  redis.call('ZADD', ENDS, now + ttl, id)
  redis.call('PEXPIRE', rec(id), ttl)
  redis.call('PEXPIRE', evs(id), ttl)
end
local function settle(now, max)
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', ENDS, '-inf', now, 'LIMIT', 0, 1000)) do forget(id) end
  local used = tonumber(redis.call('GET', USED) or '0')
  while used > max do
    local oldest = redis.call('ZRANGE', KEPT, 0, 0)
    if #oldest == 0 then break end
    local id = oldest[1]
    local left = redis.call('PTTL', rec(id))
    forget(id)
    redis.call('ZREM', INDEX, id)
    redis.call('DEL', rec(id), evs(id))
    if left > 0 then
      redis.call('HSET', rec(id), 'evicted', now)
      redis.call('PEXPIRE', rec(id), left)
    end
    used = tonumber(redis.call('GET', USED) or '0')
  end
  return used
end
local function kind(key) return redis.call('TYPE', key)['ok'] end
-- Refuses to write anything when a key this script writes holds another type than it
-- must (Redis does not roll a script back: a failure halfway would leave half a job).
local function sound(new)
  local must = {{KEYS[1], 'hash'}, {KEYS[2], 'stream'}, {USED, 'string'}, {SIZES, 'hash'},
    {KEPT, 'zset'}, {ENDS, 'zset'}, {INDEX, 'zset'}}
  for _, m in ipairs(must) do
    local k = kind(m[1])
    if k ~= 'none' and (k ~= m[2] or (new and m[1] == KEYS[1])) then
      return 'the store key ' .. m[1] .. ' holds a ' .. k .. ', not ' .. (new and m[1] == KEYS[1] and 'nothing (a new job)' or ('a ' .. m[2]))
    end
  end
  -- A total that makes no sense (not a whole number, or below zero) is counted again
  -- from the jobs' sizes.
  local raw = redis.call('GET', USED) or '0'
  local used = tonumber(raw)
  if not used or used < 0 or used ~= math.floor(used) then
    local sum = 0
    for _, v in ipairs(redis.call('HVALS', SIZES)) do
      local n = tonumber(v)
      if n and n > 0 then sum = sum + n end
    end
    redis.call('SET', USED, sum)
    redis.log(redis.LOG_WARNING, 'tavern: ' .. USED .. ' held ' .. raw .. '; counted again from the jobs: ' .. sum)
  end
  return nil
end
local id, now, ttl, max = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
"#;

/// Queues a job unless the store's jobs are past the budget once finished ones are
/// evicted: KEYS job, events, queue, index; ARGV id, now, ttl ms, max bytes, body,
/// caller, the oldest creation time the index keeps. Answers `{"ok"}` or `{"budget", used}`.
const CREATE: &str = r#"
local bad = sound(true) or (kind(KEYS[3]) ~= 'stream' and kind(KEYS[3]) ~= 'none' and ('the store key ' .. KEYS[3] .. ' holds a ' .. kind(KEYS[3]) .. ', not a stream'))
if bad then return redis.error_reply('TAVERNCORRUPT ' .. bad) end
local used = settle(now, max)
if used > max then return {'budget', used} end
redis.call('HSET', KEYS[1], 'status', 'queued', 'created_ms', ARGV[2], 'attempts', 0)
grow(id, JOB_OVERHEAD)
event(id, 'status', '{"status":"queued"}')
redis.call('ZADD', KEYS[4], ARGV[2], id)
redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', ARGV[7])
redis.call('XADD', KEYS[3], '*', 'id', id, 'body', ARGV[5], 'caller', ARGV[6])
return {'ok'}
"#;

/// Starts an attempt: KEYS job, events; ARGV id, now, ttl ms, max bytes, replica, max
/// attempts. Answers `{"run", n}`, `{"final"}`, `{"gone"}`, `{"cancelled"}` or `{"lost", n}`.
const BEGIN: &str = r#"
local bad = sound(false)
if bad then return redis.error_reply('TAVERNCORRUPT ' .. bad) end
local st = redis.call('HGET', KEYS[1], 'status')
if not st then return {'gone'} end
if st == 'succeeded' or st == 'failed' or st == 'cancelled' then return {'final'} end
local function finish(status, err)
  redis.call('HSET', KEYS[1], 'status', status, 'ended_ms', ARGV[2], 'error', err, 'result', 'null')
  if not redis.call('HGET', KEYS[1], 'started_ms') then redis.call('HSET', KEYS[1], 'started_ms', ARGV[2]) end
  grow(id, #err + 4)
  event(id, 'status', '{"status":"' .. status .. '"}')
  event(id, 'end', '{"status":"' .. status .. '","result":null,"error":' .. err .. '}')
  ended(id, now, ttl)
  settle(now, max)
end
if redis.call('HGET', KEYS[1], 'cancel') == '1' then
  finish('cancelled', '{"code":"cancelled","message":"the job was cancelled (DELETE /api/jobs/{id})"}')
  return {'cancelled'}
end
local n = redis.call('HINCRBY', KEYS[1], 'attempts', 1)
if n > tonumber(ARGV[6]) then
  finish('failed', '{"code":"workers_lost","message":"the replicas running this job stopped ' .. (n - 1) .. ' times before it ended (--job-attempts ' .. ARGV[6] .. '); it was not started again"}')
  return {'lost', n - 1}
end
redis.call('HSET', KEYS[1], 'status', 'running', 'replica', ARGV[5], 'attempt_ms', ARGV[2])
if not redis.call('HGET', KEYS[1], 'started_ms') then redis.call('HSET', KEYS[1], 'started_ms', ARGV[2]) end
event(id, 'status', '{"status":"running","attempt":' .. n .. ',"replica":"' .. ARGV[5] .. '"}')
return {'run', n}
"#;

/// Stores a running job's events (and its latest progress): KEYS job, events; ARGV id,
/// now, ttl ms, max bytes, most events kept, progress (or ``), then name and data pairs.
/// Events of a job no longer running are not kept. Answers the store's total bytes.
const EVENTS: &str = r#"
local bad = sound(false)
if bad then return redis.error_reply('TAVERNCORRUPT ' .. bad) end
if redis.call('HGET', KEYS[1], 'status') == 'running' then
  for i = 7, #ARGV, 2 do
    redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[5], '*', 'name', ARGV[i], 'data', ARGV[i + 1])
    grow(id, EVENT_OVERHEAD + #ARGV[i + 1])
  end
  if ARGV[6] ~= '' then redis.call('HSET', KEYS[1], 'progress', ARGV[6]) end
end
return settle(now, max)
"#;

/// Ends an attempt: KEYS job, events; ARGV id, now, ttl ms, max bytes, attempt, status,
/// result, error, the bytes the result counts (its text less what its observations
/// repeat, [`super::result_bytes`]). Only the current attempt of a job not yet ended may end it. The `end`
/// event leaves the result in the record (`result` `record`): it is kept, and counted, once.
const FINISH: &str = r#"
local bad = sound(false)
if bad then return redis.error_reply('TAVERNCORRUPT ' .. bad) end
local st = redis.call('HGET', KEYS[1], 'status')
if not st or st == 'succeeded' or st == 'failed' or st == 'cancelled' then return 0 end
if redis.call('HGET', KEYS[1], 'attempts') ~= ARGV[5] then return 0 end
redis.call('HSET', KEYS[1], 'status', ARGV[6], 'result', ARGV[7], 'error', ARGV[8], 'ended_ms', ARGV[2])
grow(id, tonumber(ARGV[9]) + #ARGV[8])
event(id, 'status', '{"status":"' .. ARGV[6] .. '"}')
local data = '{"status":"' .. ARGV[6] .. '","error":' .. ARGV[8] .. '}'
redis.call('XADD', KEYS[2], '*', 'name', 'end', 'data', data, 'result', 'record')
grow(id, EVENT_OVERHEAD + #data)
ended(id, now, ttl)
settle(now, max)
return 1
"#;

/// Cancels a job that no replica has started: KEYS job, events; ARGV id, now, ttl ms, max
/// bytes. Answers the status before (`queued` ones are cancelled here; others get the
/// flag), `evicted` for a tombstone, nil for no record.
const CANCEL: &str = r#"
local bad = sound(false)
if bad then return redis.error_reply('TAVERNCORRUPT ' .. bad) end
local st = redis.call('HGET', KEYS[1], 'status')
if not st then
  if redis.call('HEXISTS', KEYS[1], 'evicted') == 1 then return 'evicted' end
  return false
end
if st == 'succeeded' or st == 'failed' or st == 'cancelled' then return st end
redis.call('HSET', KEYS[1], 'cancel', '1')
if st == 'queued' then
  local err = '{"code":"cancelled","message":"the job was cancelled (DELETE /api/jobs/{id})"}'
  redis.call('HSET', KEYS[1], 'status', 'cancelled', 'ended_ms', ARGV[2], 'started_ms', ARGV[2], 'error', err, 'result', 'null')
  grow(id, #err + 4)
  event(id, 'status', '{"status":"cancelled"}')
  event(id, 'end', '{"status":"cancelled","result":null,"error":' .. err .. '}')
  ended(id, now, ttl)
  settle(now, max)
end
return st
"#;

/// The fields of a record a listing reads (its `result` is read apart, when asked for).
const LISTED_FIELDS: [&str; 8] = [
    "status",
    "created_ms",
    "started_ms",
    "ended_ms",
    "progress",
    "error",
    "attempts",
    "replica",
];

/// One batch of a listing (read only): KEYS index; ARGV the cursor's score (`+inf` for the
/// first page) and id (``), at most how many. Ids newest first (by creation time, then id)
/// after the cursor; for each `{id, score, kind, result length, fields…}` where kind is
/// `hash` (then the [`LISTED_FIELDS`]), `gone` (expired) or the key's type (garbled).
/// Answers `{entries, more}`.
const LIST: &str = r#"
local max, after, n = ARGV[1], ARGV[2], tonumber(ARGV[3])
local maxn = tonumber(max)
local ids, offset = {}, 0
for _ = 1, 100 do
  local got = redis.call('ZREVRANGEBYSCORE', KEYS[1], max, '-inf', 'WITHSCORES', 'LIMIT', offset, n + 1)
  for i = 1, #got, 2 do
    local id, score = got[i], got[i + 1]
    if after == '' or tonumber(score) < maxn or id < after then
      if #ids <= n then table.insert(ids, {id, score}) end
    end
  end
  if #ids > n or #got < 2 * (n + 1) then break end
  offset = offset + n + 1
end
local out = {}
for i = 1, math.min(#ids, n) do
  local id, score = ids[i][1], ids[i][2]
  local key = 'tavern:job:' .. id
  local kind = redis.call('TYPE', key)['ok']
  if kind == 'none' then
    table.insert(out, {id, score, 'gone'})
  elseif kind ~= 'hash' then
    table.insert(out, {id, score, kind})
  elseif redis.call('HEXISTS', key, 'status') == 0 then
    table.insert(out, {id, score, 'gone'})
  else
    local e = {id, score, 'hash', tostring(redis.call('HSTRLEN', key, 'result'))}
    local f = redis.call('HMGET', key, 'status', 'created_ms', 'started_ms', 'ended_ms', 'progress', 'error', 'attempts', 'replica')
    for j = 1, 8 do e[4 + j] = f[j] end
    table.insert(out, e)
  end
end
return {out, #ids > n and 1 or 0}
"#;

/// Where a listing of the store's jobs goes on: the creation time and id of the last job
/// of the previous page (`<created_ms>-<id>` in `next_cursor`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListCursor {
    /// Its creation time (the index's score).
    pub score: u64,
    /// Its id.
    pub id: String,
}

impl ListCursor {
    /// Reads a `next_cursor` this store gave.
    pub fn parse(s: &str) -> Option<ListCursor> {
        let (score, id) = s.split_once('-')?;
        let score = score.parse().ok()?;
        id.starts_with("job-").then(|| ListCursor {
            score,
            id: id.to_string(),
        })
    }
}

impl std::fmt::Display for ListCursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.score, self.id)
    }
}

/// One job of a listing batch.
#[derive(Debug)]
pub enum Listed {
    /// A record that reads.
    Job {
        /// Where the listing goes on after it.
        cursor: ListCursor,
        /// Its fields (those a listing shows, without `result`).
        fields: HashMap<String, String>,
        /// The length of its stored result's text (0: none).
        result_len: usize,
    },
    /// A record that cannot be read, and why.
    Garbled {
        /// Where the listing goes on after it.
        cursor: ListCursor,
        /// Why.
        why: String,
    },
}

/// The job as a listing shows it (`result`: its stored text, when given), as JSON.
pub fn listed_json(
    id: &str,
    fields: &HashMap<String, String>,
    result: Option<&serde_json::value::RawValue>,
) -> Vec<u8> {
    serde_json::to_vec(&view_of(id, fields, result)).unwrap_or_default()
}

/// A script: the shared [`BUDGET`] functions (with this build's overheads), then `body`.
fn script(body: &str) -> redis::Script {
    redis::Script::new(&format!(
        "local EVENT_OVERHEAD, JOB_OVERHEAD = {}, {}\n{BUDGET}{body}",
        super::EVENT_OVERHEAD,
        super::JOB_OVERHEAD
    ))
}

/// What the store says of a job id.
#[derive(Debug)]
pub enum Record {
    /// The job's record, as the API shows it.
    Found(Value),
    /// Evicted to keep the store's jobs within `--max-job-bytes` (410 `job_expired`).
    Evicted,
    /// No record: never made, or expired after `--job-ttl` (404 `unknown_job`).
    Missing,
    /// A record that cannot be read (a key of another type, bytes that are not UTF-8, a
    /// field that does not parse): why (500 `job_unreadable`; skipped by listings).
    Garbled(String),
}

/// The jobs of every replica sharing one store.
pub struct RedisJobs {
    store: RedisStore,
    replica: String,
    seq: AtomicU64,
    lease: Duration,
    attempts: u32,
    ttl: Duration,
    create: redis::Script,
    begin: redis::Script,
    events: redis::Script,
    finish: redis::Script,
    cancel: redis::Script,
    list: redis::Script,
    /// Jobs running on this replica, by id.
    running: Mutex<HashMap<String, Arc<Job>>>,
    workers: Arc<Semaphore>,
    /// The bytes the jobs running here keep, and `--max-job-bytes`: past it (here, or in
    /// the store, which reports its total after each write) the running jobs' `progress`,
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
/// `attempts` and `replica`). Lenient: a field that does not parse shows as `null`
/// ([`checked_record`] says why a record cannot be read).
pub fn record_json(id: &str, h: &HashMap<String, String>) -> Value {
    let result = h
        .get("result")
        .and_then(|r| serde_json::from_str::<&serde_json::value::RawValue>(r).ok());
    serde_json::to_value(view_of(id, h, result)).unwrap_or(Value::Null)
}

/// A record as the API shows it, `result` as stored (JSON text, written as it is).
#[derive(serde::Serialize)]
pub struct StoredView<'a> {
    id: &'a str,
    status: &'a str,
    created_ms: u64,
    started_ms: Option<u64>,
    ended_ms: Option<u64>,
    elapsed_ms: u64,
    progress: Value,
    result: Option<&'a serde_json::value::RawValue>,
    error: Value,
    attempts: u64,
    replica: Option<&'a str>,
}

fn view_of<'a>(
    id: &'a str,
    h: &'a HashMap<String, String>,
    result: Option<&'a serde_json::value::RawValue>,
) -> StoredView<'a> {
    let num = |k: &str| h.get(k).and_then(|v| v.parse::<u64>().ok());
    let (started, ended) = (num("started_ms"), num("ended_ms"));
    let elapsed = match (started, ended) {
        (Some(s), Some(e)) => e.saturating_sub(s),
        (Some(s), None) => now_ms().saturating_sub(s),
        _ => 0,
    };
    StoredView {
        id,
        status: h.get("status").map_or("queued", String::as_str),
        created_ms: num("created_ms").unwrap_or(0),
        started_ms: started,
        ended_ms: ended,
        elapsed_ms: elapsed,
        progress: parse_json(h.get("progress")),
        result: result.filter(|r| r.get() != "null"),
        error: parse_json(h.get("error")),
        attempts: num("attempts").unwrap_or(0),
        replica: h.get("replica").map(String::as_str),
    }
}

/// A record's fields as text, or why they are not (a byte string that is not UTF-8).
fn text_fields(raw: Vec<(Vec<u8>, Vec<u8>)>) -> Result<HashMap<String, String>, String> {
    raw.into_iter()
        .map(|(k, v)| {
            let k = String::from_utf8(k).map_err(|_| "a field name is not UTF-8".to_string())?;
            let v = String::from_utf8(v).map_err(|_| format!("field '{k}' is not UTF-8"))?;
            Ok((k, v))
        })
        .collect()
}

/// Checks a record's fields (`result` aside) as tavern writes them: a known `status`, a
/// `created_ms`, numbers where numbers go, JSON where JSON goes. Answers why not.
pub fn checked_record(h: &HashMap<String, String>) -> Result<(), String> {
    let status = h.get("status").map(String::as_str).unwrap_or_default();
    if !matches!(
        status,
        "queued" | "running" | "succeeded" | "failed" | "cancelled"
    ) {
        return Err(format!("its status '{status}' is not a job status"));
    }
    for k in ["created_ms", "started_ms", "ended_ms", "attempts"] {
        match h.get(k) {
            Some(v) if v.parse::<u64>().is_err() => {
                return Err(format!("its {k} '{v}' is not a number"))
            }
            None if k == "created_ms" => return Err("it has no created_ms".into()),
            _ => {}
        }
    }
    for k in ["progress", "error", "result"] {
        if let Some(v) = h.get(k) {
            if serde_json::from_str::<serde::de::IgnoredAny>(v).is_err() {
                return Err(format!("its {k} is not JSON"));
            }
        }
    }
    Ok(())
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
            create: script(CREATE),
            begin: script(BEGIN),
            events: script(EVENTS),
            finish: script(FINISH),
            cancel: script(CANCEL),
            list: redis::Script::new(LIST),
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

    /// The byte budget of the jobs in the store (`--max-job-bytes`).
    pub fn max_bytes(&self) -> usize {
        self.meter.max()
    }

    /// An invocation of `script` for job `id` with what every script takes: KEYS the
    /// job's record and events; ARGV the id, now, the time to live and the byte budget.
    fn invocation<'s>(&self, script: &'s redis::Script, id: &str) -> redis::ScriptInvocation<'s> {
        let mut inv = script.prepare_invoke();
        inv.key(hkey(id))
            .key(ekey(id))
            .arg(id)
            .arg(now_ms())
            .arg(self.ttl_ms())
            .arg(self.meter.max());
        inv
    }

    /// This replica's name (its consumer in the group, `replica` in records).
    pub fn replica(&self) -> &str {
        &self.replica
    }

    fn running(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Job>>> {
        // Only inserts and removes: a poisoned lock still holds a valid map.
        self.running.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues `prepared` as a new job; answers its id. A refusal by the byte budget is an
    /// error here (its message names `--max-job-bytes`); [`RedisJobs::admit`] tells it apart.
    pub async fn create(&self, prepared: Prepared) -> Result<String, StoreError> {
        self.admit(prepared)
            .await?
            .map_err(|e| StoreError::Invalid(e.to_string()))
    }

    /// Queues `prepared` as a new job and answers its id, unless the jobs the store keeps
    /// are past `--max-job-bytes` once its finished jobs are evicted (oldest first): then
    /// [`Refused::Budget`], as without a store.
    pub async fn admit(&self, prepared: Prepared) -> Result<Result<String, Refused>, StoreError> {
        let seq = self.seq.fetch_add(1, Ordering::Relaxed);
        let id = format!("job-{}-{seq}", self.replica);
        let (parsed, caller) = prepared.into_parts();
        let body = serde_json::to_string(&parsed)
            .map_err(|e| StoreError::Invalid(format!("the body cannot be queued: {e}")))?;
        let now = now_ms();
        let mut c = self.conn();
        let answer: Vec<redis::Value> = self
            .invocation(&self.create, &id)
            .key(QUEUE)
            .key(INDEX)
            .arg(body)
            .arg(caller.to_string())
            // Ids made longer ago than any record can live leave the index.
            .arg(now.saturating_sub(self.ttl_ms() + INDEX_SLACK_MS))
            .invoke_async(&mut c)
            .await
            .map_err(rerr)?;
        let verdict: String = answer
            .first()
            .and_then(|v| redis::from_redis_value_ref(v).ok())
            .unwrap_or_default();
        if verdict == "budget" {
            let used: u64 = answer
                .get(1)
                .and_then(|v| redis::from_redis_value_ref(v).ok())
                .unwrap_or(0);
            return Ok(Err(Refused::Budget {
                used: used as usize,
                max: self.meter.max(),
            }));
        }
        self.queued.notify_one();
        Ok(Ok(id))
    }

    /// What the store says of job `id`.
    pub async fn lookup(&self, id: &str) -> Result<Record, StoreError> {
        let mut c = self.conn();
        let r: redis::RedisResult<Vec<(Vec<u8>, Vec<u8>)>> = redis::cmd("HGETALL")
            .arg(hkey(id))
            .query_async(&mut c)
            .await;
        let raw = match r {
            Ok(raw) => raw,
            Err(e) if e.code() == Some("WRONGTYPE") => {
                let kind: String = redis::cmd("TYPE")
                    .arg(hkey(id))
                    .query_async(&mut c)
                    .await
                    .map_err(rerr)?;
                return Ok(Record::Garbled(format!(
                    "the store key {} holds a {kind}, not a hash",
                    hkey(id)
                )));
            }
            Err(e) => return Err(rerr(e)),
        };
        let h = match text_fields(raw) {
            Ok(h) => h,
            Err(why) => return Ok(Record::Garbled(format!("{}: {why}", hkey(id)))),
        };
        Ok(if h.contains_key("status") {
            match checked_record(&h) {
                Ok(()) => Record::Found(record_json(id, &h)),
                Err(why) => Record::Garbled(format!("{}: {why}", hkey(id))),
            }
        } else if h.contains_key("evicted") {
            Record::Evicted
        } else {
            Record::Missing
        })
    }

    /// The record of job `id`, or `None` when the store has none.
    /// (An evicted job has none: [`RedisJobs::lookup`] tells it apart.)
    pub async fn get(&self, id: &str) -> Result<Option<Value>, StoreError> {
        Ok(match self.lookup(id).await? {
            Record::Found(r) => Some(r),
            Record::Evicted | Record::Missing => None,
            Record::Garbled(why) => return Err(StoreError::Corrupt(why)),
        })
    }

    /// The next jobs of a listing, newest first: at most `n` after `after` (from the
    /// newest when `None`), their records read without their results (each job's
    /// `result_len` says how long its result is; [`RedisJobs::result`] reads
    /// it), and whether older jobs follow. Ids whose records expired leave the index here.
    pub async fn list_batch(
        &self,
        after: Option<&ListCursor>,
        n: usize,
    ) -> Result<(Vec<Listed>, bool), StoreError> {
        let mut c = self.conn();
        let (max, after_id) = match after {
            Some(a) => (a.score.to_string(), a.id.clone()),
            None => ("+inf".to_string(), String::new()),
        };
        let reply: (Vec<Vec<Option<Vec<u8>>>>, i64) = self
            .list
            .key(INDEX)
            .arg(max)
            .arg(after_id)
            .arg(n.max(1))
            .invoke_async(&mut c)
            .await
            .map_err(rerr)?;
        let (entries, more) = reply;
        let mut out = Vec::with_capacity(entries.len());
        let mut gone = Vec::new();
        for e in entries {
            let text = |i: usize| {
                e.get(i)
                    .and_then(|v| v.as_ref())
                    .map(|b| String::from_utf8_lossy(b).into_owned())
                    .unwrap_or_default()
            };
            let (id, score, kind) = (text(0), text(1), text(2));
            let result_len: usize = text(3).parse().unwrap_or(0);
            let cursor = ListCursor {
                score: score.parse::<f64>().unwrap_or(0.0) as u64,
                id: id.clone(),
            };
            match kind.as_str() {
                "gone" => gone.push(id),
                "hash" => {
                    let pairs = LISTED_FIELDS
                        .iter()
                        .zip(e.into_iter().skip(4))
                        .filter_map(|(k, v)| v.map(|v| (k.as_bytes().to_vec(), v)))
                        .collect();
                    let listed = text_fields(pairs)
                        .and_then(|h| checked_record(&h).map(|()| h))
                        .map_err(|why| format!("{}: {why}", hkey(&id)));
                    match listed {
                        Ok(fields) => out.push(Listed::Job {
                            cursor,
                            result_len,
                            fields,
                        }),
                        Err(why) => out.push(Listed::Garbled { cursor, why }),
                    }
                }
                other => out.push(Listed::Garbled {
                    why: format!("the store key {} holds a {other}, not a hash", hkey(&id)),
                    cursor,
                }),
            }
        }
        if !gone.is_empty() {
            let _: redis::RedisResult<()> = redis::cmd("ZREM")
                .arg(INDEX)
                .arg(&gone)
                .query_async(&mut c)
                .await;
        }
        Ok((out, more == 1))
    }

    /// The stored result of job `id` (JSON text), when it has one.
    pub async fn result(&self, id: &str) -> Result<Option<String>, StoreError> {
        let mut c = self.conn();
        let r: redis::RedisResult<Option<Vec<u8>>> = redis::cmd("HGET")
            .arg(hkey(id))
            .arg("result")
            .query_async(&mut c)
            .await;
        match r {
            Ok(v) => Ok(v.map(|b| String::from_utf8_lossy(&b).into_owned())),
            Err(e) => Err(rerr(e)),
        }
    }

    /// Cancels job `id`: a queued one at once; a running one through its flag, which its
    /// replica reads within [`TICK`]; then waits (a little past the cancel grace) for it
    /// to end. Answers the record, or `None` for an unknown id.
    pub async fn cancel(&self, id: &str) -> Result<Option<Value>, StoreError> {
        Ok(match self.cancel_record(id).await? {
            Record::Found(r) => Some(r),
            Record::Evicted | Record::Missing => None,
            Record::Garbled(why) => return Err(StoreError::Corrupt(why)),
        })
    }

    /// [`RedisJobs::cancel`], telling an evicted job apart from an unknown one.
    pub async fn cancel_record(&self, id: &str) -> Result<Record, StoreError> {
        if let Record::Garbled(why) = self.lookup(id).await? {
            return Ok(Record::Garbled(why));
        }
        let mut c = self.conn();
        let before: Option<String> = self
            .invocation(&self.cancel, id)
            .invoke_async(&mut c)
            .await
            .map_err(rerr)?;
        let before = match before.as_deref() {
            None => return Ok(Record::Missing),
            Some("evicted") => return Ok(Record::Evicted),
            Some(b) => b.to_string(),
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
                match self.lookup(id).await? {
                    Record::Found(r) if !is_final(status_of(&r)) => {
                        tokio::time::sleep(FOLLOW).await
                    }
                    other => return Ok(other),
                }
            }
        }
        self.lookup(id).await
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
        let mut out = Vec::with_capacity(r.ids.len());
        for e in r.ids {
            let name: String = e.get("name").unwrap_or_default();
            let mut data: String = e.get("data").unwrap_or_default();
            if e.get::<String>("result").as_deref() == Some("record") {
                // The result is kept once, in the record: put it back into `end`.
                let result: Option<String> = redis::cmd("HGET")
                    .arg(hkey(id))
                    .arg("result")
                    .query_async(&mut c)
                    .await
                    .map_err(rerr)?;
                data = end_with_result(&data, result);
            }
            out.push((e.id, name, data));
        }
        Ok(out)
    }

    /// Whether job `id` still has a record (an evicted job's tombstone is none).
    pub async fn exists(&self, id: &str) -> Result<bool, StoreError> {
        let mut c = self.conn();
        redis::cmd("HEXISTS")
            .arg(hkey(id))
            .arg("status")
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
            .invocation(&self.begin, &id)
            .arg(&self.replica)
            .arg(self.attempts)
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
                let progress = batch
                    .iter()
                    .rev()
                    .find(|ev| ev.name == "progress")
                    .map_or_else(String::new, |ev| ev.data.to_string());
                let mut inv = self.invocation(&self.events, &id);
                inv.arg(MAX_EVENTS).arg(progress);
                for ev in &batch {
                    inv.arg(ev.name).arg(&*ev.data);
                }
                let mut c = self.conn();
                match inv.invoke_async::<u64>(&mut c).await {
                    Ok(used) => self.meter.set_pressure(used as usize > self.meter.max()),
                    Err(e) => tracing::warn!(job = %id, "jobs: events not stored: {e}"),
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
            .arg("cancel")
            .cmd("GET")
            .arg(USED);
        match p.query_async::<(Option<String>, Option<u64>)>(&mut c).await {
            Ok((flag, used)) => {
                if flag.as_deref() == Some("1") {
                    job.cancel.cancel();
                }
                // Past the budget with only running jobs left: they drop their chatter.
                let used = used.unwrap_or(0) as usize;
                self.meter.set_pressure(used > self.meter.max());
            }
            Err(e) => tracing::warn!(job = %job.id, "jobs: lease not renewed: {e}"),
        }
    }

    /// Writes the end of attempt `attempt` (tries a few times while the store is away).
    async fn end(&self, id: &str, attempt: u64, end: &Value) -> bool {
        let status = end["status"].as_str().unwrap_or("failed").to_string();
        let result = end["result"].to_string();
        let counted = result
            .len()
            .saturating_sub(super::result_bytes(&end["result"]));
        let error = end["error"].to_string();
        for i in 0..20u32 {
            let mut c = self.conn();
            let r: redis::RedisResult<i64> = self
                .invocation(&self.finish, id)
                .arg(attempt)
                .arg(&status)
                .arg(&result)
                .arg(&error)
                .arg(counted)
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

/// The data of an `end` event stored without its result (`{"status", "error"}`) with the
/// record's `result` put back, in the order of an in-memory job's `end`.
fn end_with_result(data: &str, result: Option<String>) -> String {
    #[derive(serde::Deserialize)]
    struct Stored {
        status: String,
        #[serde(default)]
        error: Value,
    }
    #[derive(serde::Serialize)]
    struct End<'a> {
        status: &'a str,
        result: Option<Box<serde_json::value::RawValue>>,
        error: &'a Value,
    }
    let Ok(stored) = serde_json::from_str::<Stored>(data) else {
        return data.to_string();
    };
    let result = result.and_then(|r| serde_json::value::RawValue::from_string(r).ok());
    let end = End {
        status: &stored.status,
        result,
        error: &stored.error,
    };
    serde_json::to_string(&end).unwrap_or_else(|_| data.to_string())
}

/// The status of a record, as text.
pub fn status_of(record: &Value) -> &str {
    record["status"].as_str().unwrap_or("queued")
}

/// Whether a record's job has ended.
pub fn ended(record: &Value) -> bool {
    is_final(status_of(record))
}
