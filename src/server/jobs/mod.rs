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
//! - Retention: a finished job is kept `job_ttl` after it ended; past `max_jobs` the oldest
//!   finished job is evicted first; when every kept job is still running a new one is refused.
//! - Cancelling reuses the call's `CancellationToken` (scripts, processes and workflow runs
//!   already stop on it); the job then waits a short grace for the work to wind down and
//!   drops whatever is left.

pub mod journal;
#[cfg(feature = "store-redis")]
pub mod redis;
#[cfg(feature = "store-redis")]
pub mod redis_routes;
pub mod routes;

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::tools::{CallObserver, NodeEvent};

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

/// One event of a job's log: the SSE event name and its `data` object.
#[derive(Debug, Clone)]
pub struct JobEvent {
    /// `status`, `progress`, `node`, `call` or `end`.
    pub name: &'static str,
    /// The event's data.
    pub data: Value,
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
    result: Option<Value>,
    error: Option<Value>,
    events: Vec<Arc<JobEvent>>,
    dropped: u64,
    counts: Counts,
}

/// One job: its id, cancel token, state and event log.
#[derive(Debug)]
pub struct Job {
    /// `job-<boot>-<seq>`.
    pub id: String,
    /// When it was made (Unix ms).
    pub created_ms: u64,
    /// Cancelled by `DELETE`; the job's calls carry it.
    pub cancel: CancellationToken,
    state: Mutex<JobState>,
    /// The number of events in the log, published after each append.
    len: watch::Sender<usize>,
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
    fn new(id: String) -> Arc<Job> {
        let (len, _) = watch::channel(0);
        Arc::new(Job {
            id,
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
            }),
            len,
        })
    }

    fn lock(&self) -> MutexGuard<'_, JobState> {
        // Every writer leaves the state whole between statements: a poisoned lock still
        // holds a valid state.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn push_locked(&self, st: &mut JobState, name: &'static str, data: Value) {
        if st.events.len() >= MAX_EVENTS && !matches!(name, "status" | "end") {
            st.dropped += 1;
            return;
        }
        st.events.push(Arc::new(JobEvent { name, data }));
        let n = st.events.len();
        self.len.send_replace(n);
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
        self.push_locked(&mut st, "status", json!({"status": "running"}));
        self.progress_locked(&mut st, "running".into());
    }

    fn progress_locked(&self, st: &mut JobState, message: String) {
        let c = &st.counts;
        let p = json!({
            "done": c.calls_done + c.nodes_done,
            "total": c.calls_total + c.nodes_total,
            "message": message,
        });
        st.progress = Some(p.clone());
        self.push_locked(st, "progress", p);
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
        st.result = result.clone();
        st.error = error.clone();
        self.push_locked(&mut st, "status", json!({"status": status.as_str()}));
        self.push_locked(
            &mut st,
            "end",
            json!({"status": status.as_str(), "result": result, "error": error}),
        );
    }

    /// The job as the API shows it.
    pub fn to_json(&self) -> Value {
        let st = self.lock();
        let elapsed = match (st.started_ms, st.ended_ms) {
            (Some(s), Some(e)) => e.saturating_sub(s),
            (Some(s), None) => now_ms().saturating_sub(s),
            _ => 0,
        };
        json!({
            "id": self.id,
            "status": st.status.as_str(),
            "created_ms": self.created_ms,
            "started_ms": st.started_ms,
            "ended_ms": st.ended_ms,
            "elapsed_ms": elapsed,
            "progress": st.progress,
            "result": st.result,
            "error": st.error,
        })
    }

    /// Event `idx` of the log, or (when it is not there yet) a receiver that changes when
    /// the log grows. Subscribing under the log's lock means no event can slip between.
    pub fn next_event(&self, idx: usize) -> Result<Arc<JobEvent>, watch::Receiver<usize>> {
        let st = self.lock();
        match st.events.get(idx) {
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

    fn ended_ms(&self) -> Option<u64> {
        self.lock().ended_ms
    }

    /// Events left out of the log because it was full.
    pub fn dropped_events(&self) -> u64 {
        self.lock().dropped
    }
}

fn cancelled_error() -> Value {
    json!({"code": "cancelled", "message": "the job was cancelled (DELETE /api/jobs/{id})"})
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
            json!({"tool": tool, "ok": ok, "elapsed_ms": ms}),
        );
        st.counts.calls_done += 1;
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
            json!({
                "workflow": ev.workflow,
                "node": ev.node,
                "type": ev.node_type,
                "status": ev.state.as_str(),
                "elapsed_ms": ms,
            }),
        );
        match ev.state {
            crate::tools::NodeState::Pending => st.counts.nodes_total += 1,
            s if s.is_final() => {
                st.counts.nodes_done += 1;
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
        st.progress = Some(p.clone());
        job.push_locked(&mut st, "progress", p);
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
            json!({"level": level.as_str(), "source": source, "message": message}),
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

/// Every kept job is still running and the count limit is reached.
#[derive(Debug, thiserror::Error)]
#[error("{0} jobs are running, the most this server keeps (--max-jobs); wait for one to end or cancel one")]
pub struct JobsFull(pub usize);

#[derive(Default)]
struct Store {
    jobs: HashMap<String, Arc<Job>>,
    /// Ids in creation order (oldest first).
    order: VecDeque<String>,
}

/// The jobs of one server.
pub struct Jobs {
    boot: String,
    seq: AtomicU64,
    store: Mutex<Store>,
    journal: journal::Journal,
    ttl: Duration,
    max: usize,
}

impl std::fmt::Debug for Jobs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Jobs").field("boot", &self.boot).finish()
    }
}

impl Jobs {
    /// A store keeping finished jobs `ttl` and at most `max` jobs, journalling ids in
    /// `journal`.
    pub fn new(ttl: Duration, max: usize, journal: journal::Journal) -> Self {
        let boot = uuid::Uuid::new_v4().simple().to_string()[..12].to_string();
        Jobs {
            boot,
            seq: AtomicU64::new(1),
            store: Mutex::new(Store::default()),
            journal,
            ttl,
            max: max.max(1),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Store> {
        // The map and the order are updated together under the lock; never left half-done.
        self.store.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Drops finished jobs past their time to live.
    fn sweep(&self, store: &mut Store) {
        let ttl = self.ttl.as_millis() as u64;
        let now = now_ms();
        let Store { jobs, order } = store;
        order.retain(|id| {
            let keep = jobs
                .get(id)
                .and_then(|j| j.ended_ms())
                .is_none_or(|e| now.saturating_sub(e) < ttl);
            if !keep {
                jobs.remove(id);
            }
            keep
        });
    }

    /// Makes a new queued job (evicting the oldest finished one past the count limit).
    pub fn create(&self) -> Result<Arc<Job>, JobsFull> {
        let job = {
            let mut store = self.lock();
            self.sweep(&mut store);
            while store.jobs.len() >= self.max {
                let oldest_done = store
                    .order
                    .iter()
                    .position(|id| store.jobs.get(id).is_some_and(|j| j.status().is_final()));
                match oldest_done {
                    Some(i) => {
                        if let Some(id) = store.order.remove(i) {
                            store.jobs.remove(&id);
                        }
                    }
                    None => return Err(JobsFull(store.jobs.len())),
                }
            }
            let seq = self.seq.fetch_add(1, Ordering::Relaxed);
            let job = Job::new(format!("job-{}-{seq}", self.boot));
            store.order.push_back(job.id.clone());
            store.jobs.insert(job.id.clone(), job.clone());
            job
        };
        job.push_locked(&mut job.lock(), "status", json!({"status": "queued"}));
        self.journal.record(&job.id, job.created_ms);
        Ok(job)
    }

    /// What `id` answers to.
    pub fn get(&self, id: &str) -> Lookup {
        {
            let mut store = self.lock();
            self.sweep(&mut store);
            if let Some(j) = store.jobs.get(id) {
                return Lookup::Found(j.clone());
            }
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

    /// Every stored job, newest first.
    pub fn list(&self) -> Vec<Arc<Job>> {
        let mut store = self.lock();
        self.sweep(&mut store);
        store
            .order
            .iter()
            .rev()
            .filter_map(|id| store.jobs.get(id).cloned())
            .collect()
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
        Jobs::new(Duration::from_secs(3600), max, journal::Journal::disabled())
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
}
