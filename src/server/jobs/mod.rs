//! Jobs: long-running calls answered at once with an id (seed 000 §8, issue 15).
//!
//! A job runs the same body `POST /api/invoke` takes, in the background; its state, its
//! result (the very JSON `/api/invoke` would have answered) and an event log are kept in a
//! [`Jobs`] store the served state owns. The HTTP face is [`routes`]; the restart journal
//! is [`journal`].
//!
//! Invariants:
//! - Status only moves forward: `queued → running → succeeded | failed | cancelled`; `end`
//!   is the last event of a log and is pushed exactly once, with the final state.
//! - Every event is appended to the job's log under its lock and the log length is then
//!   published on a `watch` channel, so a subscriber that copies the log and then follows
//!   the channel sees every event once, in order, however late it connects; a slow
//!   subscriber never holds a call up (the job never waits for readers).
//! - Ids are `job-<boot>-<seq>`: `<boot>` is random per server start, `<seq>` counts up.
//!   An id of this boot that is no longer stored was evicted (`job_expired`); an id in the
//!   journal of an earlier boot was lost to a restart (`job_lost`); anything else is unknown.
//! - Retention: a finished job is kept `job_ttl` after it ended; past `max_jobs` jobs or
//!   `max_job_bytes` retained bytes (results and events) the oldest finished job is evicted
//!   first; when every kept job is still running, or the running ones alone pass the byte
//!   budget, a new one is refused. Where jobs are kept and these rules are applied is the
//!   [`store::JobStore`] seam ([`store::MemoryStore`] by default).
//! - Cancelling reuses the call's `CancellationToken` (scripts, processes and workflow runs
//!   already stop on it); the job then waits a short grace for the work to wind down and
//!   drops whatever is left.

pub mod journal;
pub mod listing;
#[cfg(feature = "store-redis")]
pub mod redis;
#[cfg(feature = "store-redis")]
pub mod redis_routes;
pub mod routes;
pub mod store;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::tools::{CallObserver, NodeEvent};
use store::{JobStore, Meter, Refused};

/// Most events one job's log keeps; past it `progress`, `call` and `node` events are
/// dropped (counted) so a huge run cannot fill memory. `status` and `end` always go in.
pub const MAX_EVENTS: usize = 20_000;

/// How long a cancelled job's work gets to wind down before it is dropped.
pub const CANCEL_GRACE: Duration = Duration::from_secs(2);

/// Where a job is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobStatus {
    /// Made, not started yet.
    Queued,
    /// Running.
    Running,
    /// Every call of the block succeeded.
    Succeeded,
    /// A call failed, the body had an error, or the job timed out.
    Failed,
    /// Cancelled (`DELETE /api/jobs/{id}`).
    Cancelled,
}

impl JobStatus {
    /// The lower-case name the API uses.
    pub fn as_str(self) -> &'static str {
        match self {
            JobStatus::Queued => "queued",
            JobStatus::Running => "running",
            JobStatus::Succeeded => "succeeded",
            JobStatus::Failed => "failed",
            JobStatus::Cancelled => "cancelled",
        }
    }

    /// Whether the job has ended.
    pub fn is_final(self) -> bool {
        matches!(
            self,
            JobStatus::Succeeded | JobStatus::Failed | JobStatus::Cancelled
        )
    }
}

/// One event of a job's log: the SSE event name and its `data` object as JSON text
/// (written once, sent as it is to every subscriber).
#[derive(Debug, Clone)]
pub struct JobEvent {
    /// `status`, `progress`, `node`, `call`, `log` or `end`.
    pub name: &'static str,
    /// The event's data, JSON text.
    pub data: Arc<str>,
}

/// Bytes counted for each kept event besides its text (the record and its pointer).
const EVENT_OVERHEAD: usize = 64;
/// Bytes counted for each kept job besides its result and events.
const JOB_OVERHEAD: usize = 512;

/// How much of a report's text is a repeat: each successful result's `observation` says
/// its `value` again (`… Result: <value>`). A result counts against the byte budget as
/// its text less these repeats, so one value counts once (both modes).
pub fn result_bytes(report: &Value) -> usize {
    report["results"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r.get("value").is_some())
        .filter_map(|r| {
            let o = r.get("observation")?.as_str()?;
            let at = o.find("Result: ")? + "Result: ".len();
            Some(o.len() - at)
        })
        .sum()
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

#[derive(Debug, Default)]
struct Counts {
    calls_total: u64,
    calls_done: u64,
    nodes_total: u64,
    nodes_done: u64,
}

#[derive(Debug)]
struct JobState {
    status: JobStatus,
    started_ms: Option<u64>,
    ended_ms: Option<u64>,
    progress: Option<Value>,
    /// The `/api/invoke` answer, kept as its JSON text.
    result: Option<Arc<RawValue>>,
    error: Option<Value>,
    /// The log; `end`'s data is written when it is read (it holds the result, which is
    /// kept once, above).
    events: Vec<Arc<JobEvent>>,
    dropped: u64,
    counts: Counts,
    /// What this job retains (result, events, overhead), in bytes.
    bytes: usize,
    /// Whether `bytes` is on the store's meter (from admission to eviction).
    metered: bool,
}

/// One job: its id, cancel token, state and event log.
#[derive(Debug)]
pub struct Job {
    /// `job-<boot>-<seq>`.
    pub id: String,
    /// The `<seq>` of the id: jobs are listed by it, newest (largest) first.
    pub seq: u64,
    /// When it was made (Unix ms).
    pub created_ms: u64,
    /// Cancelled by `DELETE`; the job's calls carry it.
    pub cancel: CancellationToken,
    state: Mutex<JobState>,
    /// The number of events in the log, published after each append.
    len: watch::Sender<usize>,
    meter: Arc<Meter>,
}

/// How a job's work ended, for [`Job::finish`].
#[derive(Debug)]
pub enum Outcome {
    /// The block ran to its end: the report and whether any part failed.
    Done {
        /// The `/api/invoke` answer.
        result: Value,
        /// The first failure, when there was one: `{code, message}`.
        error: Option<Value>,
    },
    /// Cancelled; the report when the work wound down within the grace.
    Cancelled(Option<Value>),
    /// Passed the server's call time limit.
    TimedOut {
        /// The limit.
        after: Duration,
        /// The report when the work wound down within the grace.
        result: Option<Value>,
    },
}

impl Job {
    /// A queued job `id` (sequence number `seq`) whose retained bytes count on `meter` once
    /// a store admits it.
    pub fn new(id: String, seq: u64, meter: Arc<Meter>) -> Arc<Job> {
        let (len, _) = watch::channel(0);
        Arc::new(Job {
            id,
            seq,
            meter,
            created_ms: now_ms(),
            cancel: CancellationToken::new(),
            state: Mutex::new(JobState {
                status: JobStatus::Queued,
                started_ms: None,
                ended_ms: None,
                progress: None,
                result: None,
                error: None,
                events: Vec::new(),
                dropped: 0,
                counts: Counts::default(),
                bytes: JOB_OVERHEAD,
                metered: false,
            }),
            len,
        })
    }

    fn lock(&self) -> MutexGuard<'_, JobState> {
        // Every writer leaves the state whole between statements: a poisoned lock still
        // holds a valid state.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn push_locked<T: Serialize>(&self, st: &mut JobState, name: &'static str, data: &T) {
        let essential = matches!(name, "status" | "end");
        if !essential && (st.events.len() >= MAX_EVENTS || self.meter.over()) {
            st.dropped += 1;
            return;
        }
        // Written once, as text: what is kept is what is sent (and what is counted).
        let data: Arc<str> = if name == "end" {
            Arc::from("")
        } else {
            Arc::from(serde_json::to_string(data).unwrap_or_default())
        };
        self.grow(st, EVENT_OVERHEAD + data.len());
        st.events.push(Arc::new(JobEvent { name, data }));
        let n = st.events.len();
        self.len.send_replace(n);
    }

    fn grow(&self, st: &mut JobState, n: usize) {
        st.bytes += n;
        if st.metered {
            self.meter.add(n);
        }
    }

    /// Puts this job's bytes on the meter (its store kept it).
    pub fn admitted(&self) {
        let mut st = self.lock();
        if !st.metered {
            st.metered = true;
            self.meter.add(st.bytes);
        }
    }

    /// Takes this job's bytes off the meter (its store let it go).
    pub fn evicted(&self) {
        let mut st = self.lock();
        if st.metered {
            st.metered = false;
            self.meter.sub(st.bytes);
        }
    }

    /// What this job retains, in bytes: its result's JSON text, each event's text, and a
    /// fixed overhead per job and per event.
    pub fn retained_bytes(&self) -> usize {
        self.lock().bytes
    }

    /// The job's status now.
    pub fn status(&self) -> JobStatus {
        self.lock().status
    }

    /// Marks the job running with `calls` calls to make.
    pub fn start(&self, calls: usize) {
        let mut st = self.lock();
        if st.status != JobStatus::Queued {
            return;
        }
        st.status = JobStatus::Running;
        st.started_ms = Some(now_ms());
        st.counts.calls_total = calls as u64;
        self.push_locked(&mut st, "status", &json!({"status": "running"}));
        self.progress_locked(&mut st, "running".into());
    }

    fn progress_locked(&self, st: &mut JobState, message: String) {
        let c = &st.counts;
        let p = json!({
            "done": c.calls_done + c.nodes_done,
            "total": c.calls_total + c.nodes_total,
            "message": message,
        });
        self.push_locked(st, "progress", &p);
        st.progress = Some(p);
    }

    /// Ends the job with `outcome` (once; later calls change nothing) and pushes `end`.
    pub fn finish(&self, outcome: Outcome) {
        let mut st = self.lock();
        if st.status.is_final() {
            return;
        }
        let cancelled = self.cancel.is_cancelled();
        let (status, result, error) = match outcome {
            Outcome::Cancelled(r) => (JobStatus::Cancelled, r, Some(cancelled_error())),
            // A cancel that raced the end still wins: the client asked for it.
            Outcome::Done { result, .. } if cancelled => {
                (JobStatus::Cancelled, Some(result), Some(cancelled_error()))
            }
            Outcome::Done {
                result,
                error: None,
            } => (JobStatus::Succeeded, Some(result), None),
            Outcome::Done { result, error } => (JobStatus::Failed, Some(result), error),
            Outcome::TimedOut { after, result } => (
                JobStatus::Failed,
                result,
                Some(json!({
                    "code": "timeout",
                    "message": format!(
                        "the job did not finish within {} ms (the server's --call-timeout-ms); it was stopped",
                        after.as_millis()
                    ),
                })),
            ),
        };
        st.status = status;
        let now = now_ms();
        st.started_ms.get_or_insert(now);
        st.ended_ms = Some(now);
        // A Value always writes as valid JSON text.
        let counted = result.as_ref().map(result_bytes);
        let raw = result.and_then(|r| RawValue::from_string(r.to_string()).ok());
        if let (Some(r), Some(repeats)) = (&raw, counted) {
            self.grow(&mut st, r.get().len().saturating_sub(repeats));
        }
        st.result = raw.map(Arc::from);
        st.error = error;
        self.push_locked(&mut st, "status", &json!({"status": status.as_str()}));
        self.push_locked(&mut st, "end", &Value::Null);
    }

    /// The job as the API shows it; `result` is left out (`null`) unless `with_result`.
    /// Serializes without copying the result into a `Value`.
    pub fn view(&self, with_result: bool) -> JobView {
        let st = self.lock();
        let elapsed = match (st.started_ms, st.ended_ms) {
            (Some(s), Some(e)) => e.saturating_sub(s),
            (Some(s), None) => now_ms().saturating_sub(s),
            _ => 0,
        };
        JobView {
            id: self.id.clone(),
            status: st.status.as_str(),
            created_ms: self.created_ms,
            started_ms: st.started_ms,
            ended_ms: st.ended_ms,
            elapsed_ms: elapsed,
            progress: st.progress.clone(),
            result: if with_result { st.result.clone() } else { None },
            error: st.error.clone(),
        }
    }

    /// The job as the API shows it, result included, as a `Value`.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self.view(true)).unwrap_or(Value::Null)
    }

    /// Event `idx` of the log, or (when it is not there yet) a receiver that changes when
    /// the log grows. Subscribing under the log's lock means no event can slip between.
    pub fn next_event(&self, idx: usize) -> Result<Arc<JobEvent>, watch::Receiver<usize>> {
        let st = self.lock();
        match st.events.get(idx) {
            Some(e) if e.name == "end" => {
                let end = EndData {
                    status: st.status.as_str(),
                    result: st.result.as_deref(),
                    error: st.error.as_ref(),
                };
                let data = serde_json::to_string(&end).unwrap_or_default();
                Ok(Arc::new(JobEvent {
                    name: "end",
                    data: Arc::from(data),
                }))
            }
            Some(e) => Ok(e.clone()),
            None => Err(self.len.subscribe()),
        }
    }

    /// Waits (at most `max`) until the job has ended.
    pub async fn ended(&self, max: Duration) {
        let mut rx = self.len.subscribe();
        let wait = async {
            while !self.status().is_final() {
                if rx.changed().await.is_err() {
                    break;
                }
            }
        };
        let _ = tokio::time::timeout(max, wait).await;
    }

    pub(crate) fn ended_ms(&self) -> Option<u64> {
        self.lock().ended_ms
    }

    /// Events left out of the log because it was full.
    pub fn dropped_events(&self) -> u64 {
        self.lock().dropped
    }
}

/// A job as the API shows it ([`Job::view`]).
#[derive(Debug, Serialize)]
pub struct JobView {
    /// The id.
    pub id: String,
    /// `queued`, `running`, `succeeded`, `failed` or `cancelled`.
    pub status: &'static str,
    /// When it was made (Unix ms).
    pub created_ms: u64,
    /// When it started.
    pub started_ms: Option<u64>,
    /// When it ended.
    pub ended_ms: Option<u64>,
    /// Run time so far.
    pub elapsed_ms: u64,
    /// The latest progress.
    pub progress: Option<Value>,
    /// The `/api/invoke` answer (left out of listings unless asked for).
    pub result: Option<Arc<RawValue>>,
    /// The first failure.
    pub error: Option<Value>,
}

/// The data of `end`, written when it is read.
#[derive(Serialize)]
struct EndData<'a> {
    status: &'a str,
    result: Option<&'a RawValue>,
    error: Option<&'a Value>,
}

fn cancelled_error() -> Value {
    json!({"code": "cancelled", "message": "the job was cancelled (DELETE /api/jobs/{id})"})
}

/// The data of a `call` event.
#[derive(Serialize)]
struct CallData<'a> {
    tool: &'a str,
    ok: bool,
    elapsed_ms: f64,
}

/// The data of a `node` event.
#[derive(Serialize)]
struct NodeData<'a> {
    workflow: &'a str,
    node: &'a str,
    #[serde(rename = "type")]
    node_type: &'a str,
    status: &'a str,
    elapsed_ms: f64,
}

/// Turns a call's reported events into the job's log.
pub struct JobObserver(pub Arc<Job>);

impl CallObserver for JobObserver {
    fn call_ended(&self, tool: &str, ok: bool, elapsed: Duration) {
        let job = &self.0;
        let mut st = job.lock();
        if st.status.is_final() {
            return;
        }
        let ms = (elapsed.as_secs_f64() * 1000.0 * 1000.0).round() / 1000.0;
        job.push_locked(
            &mut st,
            "call",
            &CallData {
                tool,
                ok,
                elapsed_ms: ms,
            },
        );
        st.counts.calls_done += 1;
        // Work that ends after a cancel ends because of it: the progress stays where the
        // cancel found it (not a full bar of "failed").
        if job.cancel.is_cancelled() {
            return;
        }
        let msg = format!("{tool} {}", if ok { "succeeded" } else { "failed" });
        job.progress_locked(&mut st, msg);
    }

    fn node(&self, ev: NodeEvent<'_>) {
        let job = &self.0;
        let mut st = job.lock();
        if st.status.is_final() {
            return;
        }
        let ms = (ev.elapsed.as_secs_f64() * 1000.0 * 1000.0).round() / 1000.0;
        job.push_locked(
            &mut st,
            "node",
            &NodeData {
                workflow: ev.workflow,
                node: ev.node,
                node_type: ev.node_type,
                status: ev.state.as_str(),
                elapsed_ms: ms,
            },
        );
        match ev.state {
            crate::tools::NodeState::Pending => st.counts.nodes_total += 1,
            s if s.is_final() => {
                st.counts.nodes_done += 1;
                if job.cancel.is_cancelled() {
                    return;
                }
                let msg = format!("{}: node {} {}", ev.workflow, ev.node, s.as_str());
                job.progress_locked(&mut st, msg);
            }
            _ => {}
        }
    }

    fn progress(&self, done: f64, total: Option<f64>, message: Option<&str>) {
        let job = &self.0;
        let mut st = job.lock();
        if st.status.is_final() {
            return;
        }
        // The tool's own units (`api.tools.progress`), as it reported them.
        let p = json!({"done": done, "total": total, "message": message});
        job.push_locked(&mut st, "progress", &p);
        st.progress = Some(p);
    }

    fn log(&self, level: crate::tools::LogLevel, source: &str, message: &str) {
        let job = &self.0;
        let mut st = job.lock();
        if st.status.is_final() {
            return;
        }
        job.push_locked(
            &mut st,
            "log",
            &json!({"level": level.as_str(), "source": source, "message": message}),
        );
    }
}

/// What a job id answers to.
#[derive(Debug)]
pub enum Lookup {
    /// A stored job.
    Found(Arc<Job>),
    /// An id of this server's run whose job was evicted.
    Expired,
    /// An id of an earlier run over the same home (made at `created_ms`).
    Lost {
        /// When it was made (Unix ms).
        created_ms: u64,
    },
    /// Never issued (as far as this server knows).
    Unknown,
}

/// The jobs of one server: ids (`job-<boot>-<seq>`), the restart journal, and the
/// [`JobStore`] that keeps them (the in-memory [`store::MemoryStore`] unless another is
/// given).
pub struct Jobs {
    boot: String,
    seq: AtomicU64,
    store: Box<dyn JobStore>,
    meter: Arc<Meter>,
    journal: journal::Journal,
}

impl std::fmt::Debug for Jobs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Jobs").field("boot", &self.boot).finish()
    }
}

impl Jobs {
    /// An in-memory store keeping jobs by `retention`, journalling ids in `journal`.
    pub fn new(retention: store::Retention, journal: journal::Journal) -> Self {
        let meter = Meter::new(retention.max_bytes);
        let store = store::MemoryStore::new(retention, meter.clone());
        Self::with_store(Box::new(store), meter, journal)
    }

    /// Jobs kept in `store`, whose jobs count their bytes on `meter` (the store's).
    pub fn with_store(
        store: Box<dyn JobStore>,
        meter: Arc<Meter>,
        journal: journal::Journal,
    ) -> Self {
        let boot = uuid::Uuid::new_v4().simple().to_string()[..12].to_string();
        Jobs {
            boot,
            seq: AtomicU64::new(1),
            store,
            meter,
            journal,
        }
    }

    /// Makes a new queued job, or says why the store refused it.
    pub fn create(&self) -> Result<Arc<Job>, Refused> {
        let seq = self.seq.fetch_add(1, Ordering::Relaxed);
        let job = Job::new(format!("job-{}-{seq}", self.boot), seq, self.meter.clone());
        self.store.admit(job.clone())?;
        job.push_locked(&mut job.lock(), "status", &json!({"status": "queued"}));
        self.journal.record(&job.id, job.created_ms);
        Ok(job)
    }

    /// Applies retention now (called after a job ends: its result now counts).
    pub fn settle(&self) {
        self.store.settle();
    }

    /// What `id` answers to.
    pub fn get(&self, id: &str) -> Lookup {
        if let Some(j) = self.store.find(id) {
            return Lookup::Found(j);
        }
        if let Some(seq) = id
            .strip_prefix("job-")
            .and_then(|r| r.strip_prefix(self.boot.as_str()))
            .and_then(|r| r.strip_prefix('-'))
            .and_then(|r| r.parse::<u64>().ok())
        {
            if seq > 0 && seq < self.seq.load(Ordering::Relaxed) {
                return Lookup::Expired;
            }
        }
        match self.journal.lost(id) {
            Some(created_ms) => Lookup::Lost { created_ms },
            None => Lookup::Unknown,
        }
    }

    /// Every kept job, newest first.
    pub fn list(&self) -> Vec<Arc<Job>> {
        self.store.page(None, usize::MAX).jobs
    }

    /// Kept jobs newest first, `limit` at a time, older than cursor `before` when given.
    pub fn page(&self, before: Option<u64>, limit: usize) -> store::Page {
        self.store.page(before, limit)
    }

    /// What the store holds now.
    pub fn usage(&self) -> store::Usage {
        self.store.usage()
    }

    /// This run's boot id (the middle part of its job ids).
    pub fn boot(&self) -> &str {
        &self.boot
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store(max: usize) -> Jobs {
        budget(max, usize::MAX / 2)
    }

    fn budget(max_jobs: usize, max_bytes: usize) -> Jobs {
        let retention = store::Retention {
            ttl: Duration::from_secs(3600),
            max_jobs,
            max_bytes,
        };
        Jobs::new(retention, journal::Journal::disabled())
    }

    fn done(job: &Job) {
        job.finish(Outcome::Done {
            result: json!({"results": []}),
            error: None,
        });
    }

    #[test]
    fn eviction_takes_the_oldest_finished_job_and_never_a_running_one() {
        let jobs = store(2);
        let a = jobs.create().unwrap();
        let b = jobs.create().unwrap();
        a.start(1);
        b.start(1);
        // Both running: no room.
        assert!(jobs.create().is_err());
        done(&b);
        let c = jobs.create().unwrap();
        assert!(matches!(jobs.get(&b.id), Lookup::Expired));
        assert!(matches!(jobs.get(&a.id), Lookup::Found(_)));
        let ids: Vec<String> = jobs.list().iter().map(|j| j.id.clone()).collect();
        assert_eq!(ids, [c.id.clone(), a.id.clone()]);
        assert!(matches!(jobs.get("job-other-1"), Lookup::Unknown));
        assert!(matches!(
            jobs.get(&format!("job-{}-99", jobs.boot())),
            Lookup::Unknown
        ));
    }

    #[test]
    fn status_only_moves_forward_and_end_is_last_and_single() {
        let jobs = store(10);
        let j = jobs.create().unwrap();
        j.start(2);
        JobObserver(j.clone()).call_ended("t", true, Duration::from_millis(1));
        done(&j);
        // Late reports and a second finish change nothing.
        JobObserver(j.clone()).call_ended("t", false, Duration::ZERO);
        j.finish(Outcome::Cancelled(None));
        j.start(1);
        assert_eq!(j.status(), JobStatus::Succeeded);
        let mut names = Vec::new();
        let mut i = 0;
        while let Ok(e) = j.next_event(i) {
            names.push(e.name);
            i += 1;
        }
        assert_eq!(
            names,
            ["status", "status", "progress", "call", "progress", "status", "end"]
        );
        let v = j.to_json();
        assert_eq!(v["progress"]["done"], 1);
        assert_eq!(v["progress"]["total"], 2);
    }

    #[test]
    fn a_cancel_that_races_the_end_wins() {
        let jobs = store(10);
        let j = jobs.create().unwrap();
        j.start(1);
        j.cancel.cancel();
        done(&j);
        assert_eq!(j.status(), JobStatus::Cancelled);
        assert_eq!(j.to_json()["error"]["code"], "cancelled");
    }

    #[test]
    fn the_log_is_bounded_but_keeps_status_and_end() {
        let jobs = store(10);
        let j = jobs.create().unwrap();
        j.start(1);
        let o = JobObserver(j.clone());
        for _ in 0..MAX_EVENTS + 10 {
            o.call_ended("t", true, Duration::ZERO);
        }
        done(&j);
        assert!(j.dropped_events() > 0);
        let last = j.next_event(MAX_EVENTS + 1).unwrap();
        assert_eq!(last.name, "end");
    }

    fn finish_with(job: &Job, bytes: usize) {
        job.finish(Outcome::Done {
            result: json!({"results": [{"value": "x".repeat(bytes)}]}),
            error: None,
        });
    }

    #[test]
    fn finished_jobs_past_the_byte_budget_are_evicted_oldest_first() {
        let jobs = budget(100, 10_000);
        let a = jobs.create().unwrap();
        let b = jobs.create().unwrap();
        a.start(1);
        b.start(1);
        finish_with(&a, 4_000);
        jobs.settle();
        finish_with(&b, 4_000);
        jobs.settle();
        // Both fit (about 8.2 kB of 10 kB).
        assert!(matches!(jobs.get(&a.id), Lookup::Found(_)));
        assert!(a.retained_bytes() > 4_000, "{}", a.retained_bytes());
        let c = jobs.create().unwrap();
        c.start(1);
        finish_with(&c, 4_000);
        jobs.settle();
        // Past the budget: the oldest finished job goes first.
        assert!(matches!(jobs.get(&a.id), Lookup::Expired));
        assert!(matches!(jobs.get(&b.id), Lookup::Found(_)));
        assert!(matches!(jobs.get(&c.id), Lookup::Found(_)));
        assert!(jobs.usage().bytes <= 10_000, "{:?}", jobs.usage());
        assert_eq!(jobs.usage().jobs, 2);
    }

    #[test]
    fn running_jobs_past_the_budget_refuse_new_ones_and_drop_their_chatter() {
        let jobs = budget(100, 4_000);
        let a = jobs.create().unwrap();
        a.start(1);
        let o = JobObserver(a.clone());
        for _ in 0..200 {
            o.log(crate::tools::LogLevel::Info, "p", &"y".repeat(100));
        }
        // The running job's log stopped growing at the budget (status and end still go in).
        assert!(a.dropped_events() > 0);
        assert!(jobs.usage().bytes < 4_000 + 400, "{:?}", jobs.usage());
        match jobs.create() {
            Err(Refused::Budget { max, .. }) => assert_eq!(max, 4_000),
            other => panic!("expected a budget refusal, got {other:?}"),
        }
        assert!(Refused::Budget { used: 1, max: 2 }
            .to_string()
            .contains("--max-job-bytes"));
        // Once it ends and is evicted, there is room again.
        done(&a);
        jobs.settle();
        assert!(jobs.create().is_ok());
        assert!(matches!(jobs.get(&a.id), Lookup::Expired));
    }

    #[test]
    fn views_leave_the_result_out_unless_asked_and_end_carries_it() {
        let jobs = store(10);
        let j = jobs.create().unwrap();
        j.start(1);
        finish_with(&j, 10);
        let without = serde_json::to_value(j.view(false)).unwrap();
        assert_eq!(without["result"], Value::Null);
        assert_eq!(without["status"], "succeeded");
        let with = j.to_json();
        assert_eq!(with["result"]["results"][0]["value"], "x".repeat(10));
        let mut i = 0;
        let end = loop {
            let e = j.next_event(i).unwrap();
            if e.name == "end" {
                break e;
            }
            i += 1;
        };
        let data: Value = serde_json::from_str(&end.data).unwrap();
        assert_eq!(data["status"], "succeeded");
        assert_eq!(data["result"], with["result"]);
    }

    #[test]
    fn a_result_counts_once_though_its_observation_repeats_it() {
        let jobs = store(10);
        let j = jobs.create().unwrap();
        j.start(1);
        let value = "v".repeat(100_000);
        let observation = crate::tools::success_observation("t", &json!(value));
        j.finish(Outcome::Done {
            result: json!({"results": [{"tool": "t", "ok": true, "value": value,
                "observation": observation}], "diagnostics": []}),
            error: None,
        });
        let kept = j.retained_bytes();
        assert!(kept > 100_000, "{kept}");
        assert!(kept < 110_000, "the value counted twice: {kept}");
    }

    #[test]
    fn pages_run_newest_first_with_a_cursor() {
        let jobs = store(100);
        let made: Vec<_> = (0..5).map(|_| jobs.create().unwrap()).collect();
        let p1 = jobs.page(None, 2);
        let ids = |p: &store::Page| p.jobs.iter().map(|j| j.id.clone()).collect::<Vec<_>>();
        assert_eq!(ids(&p1), [made[4].id.clone(), made[3].id.clone()]);
        let p2 = jobs.page(p1.next, 2);
        assert_eq!(ids(&p2), [made[2].id.clone(), made[1].id.clone()]);
        let p3 = jobs.page(p2.next, 2);
        assert_eq!(ids(&p3), [made[0].id.clone()]);
        assert_eq!(p3.next, None);
    }
}
