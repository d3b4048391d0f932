//! Where jobs are kept, and how much of them: the [`JobStore`] seam and the in-memory
//! [`MemoryStore`] every server uses by default.
//!
//! The contract every store keeps (the jobs routes and MCP tasks rely on it):
//! - **Admission.** [`JobStore::admit`] keeps a new queued job, or refuses it with
//!   [`Refused`]: `Count` when `max_jobs` jobs are kept and none has finished, `Budget` when
//!   the jobs still queued or running alone retain more than `max_bytes`. Before refusing,
//!   finished jobs are evicted, oldest first.
//! - **Retention.** A finished job is kept `ttl` after it ended; past `max_jobs` jobs or
//!   `max_bytes` retained bytes the oldest *finished* job is evicted first; a queued or
//!   running job is never evicted. [`JobStore::settle`] applies these rules now (the jobs
//!   front calls it after every job that ends, since an ending job adds its result).
//! - **Accounting.** What a job retains is measured by [`super::Job::retained_bytes`] (its
//!   result's JSON text, each event's text, and a fixed overhead per record) and summed in
//!   the [`Meter`] the store shares with its jobs; eviction takes a job's bytes off the
//!   meter. While the meter is past its budget, running jobs drop their `progress`, `node`,
//!   `call` and `log` events (never `status` or `end`), so one noisy job cannot grow past it.
//! - **Listing.** [`JobStore::page`] lists kept jobs newest first, `limit` at a time; the
//!   cursor is the sequence number of the last job of the previous page (a job evicted
//!   between pages does not move the page boundary).
//!
//! Another store (one shared by several servers, say) implements the same trait; ids,
//! the restart journal and the 410 answers stay in [`super::Jobs`].

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use super::{now_ms, Job};

/// The bytes the jobs of one store retain, and the budget they must stay under.
#[derive(Debug)]
pub struct Meter {
    used: AtomicUsize,
    max: usize,
    /// Set by a shared store when the jobs it keeps are past the budget (its total counts
    /// other replicas' jobs too, which this meter never sees).
    pressure: AtomicBool,
}

impl Meter {
    /// A meter with budget `max` bytes.
    pub fn new(max: usize) -> Arc<Meter> {
        Arc::new(Meter {
            used: AtomicUsize::new(0),
            max,
            pressure: AtomicBool::new(false),
        })
    }

    /// Bytes retained now.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Acquire)
    }

    /// The budget.
    pub fn max(&self) -> usize {
        self.max
    }

    /// Whether the retained bytes are past the budget (here, or in the shared store).
    pub fn over(&self) -> bool {
        self.used() > self.max || self.pressure.load(Ordering::Acquire)
    }

    /// Says whether the shared store's jobs are past the budget (`--store`).
    #[cfg(feature = "store-redis")]
    pub(super) fn set_pressure(&self, over: bool) {
        self.pressure.store(over, Ordering::Release);
    }

    pub(super) fn add(&self, n: usize) {
        self.used.fetch_add(n, Ordering::AcqRel);
    }

    pub(super) fn sub(&self, n: usize) {
        // Never below zero, even if a job is taken off twice.
        let _ = self
            .used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |u| {
                Some(u.saturating_sub(n))
            });
    }
}

/// How long and how many jobs a store keeps.
#[derive(Debug, Clone, Copy)]
pub struct Retention {
    /// How long a finished job is kept after it ended.
    pub ttl: Duration,
    /// Most jobs kept at once.
    pub max_jobs: usize,
    /// Most bytes the kept jobs retain (results and events).
    pub max_bytes: usize,
}

/// Why a new job was refused.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Refused {
    /// `max_jobs` jobs are kept and all are still queued or running.
    #[error("{0} jobs are running, the most this server keeps (--max-jobs); wait for one to end or cancel one")]
    Count(usize),
    /// The queued and running jobs alone retain more than the byte budget.
    #[error("the jobs still running retain {used} bytes, more than this server's job budget of {max} bytes (--max-job-bytes); wait for one to end, cancel one, or start the server with a larger --max-job-bytes")]
    Budget {
        /// Bytes retained by the jobs still running.
        used: usize,
        /// The budget.
        max: usize,
    },
}

/// One page of a job listing.
#[derive(Debug, Default)]
pub struct Page {
    /// The jobs, newest first.
    pub jobs: Vec<Arc<Job>>,
    /// The cursor of the next page, when there are older jobs.
    pub next: Option<u64>,
}

/// What a store holds now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    /// Jobs kept.
    pub jobs: usize,
    /// Bytes they retain.
    pub bytes: usize,
}

/// Where jobs are kept; see the module docs for the contract.
pub trait JobStore: Send + Sync + std::fmt::Debug {
    /// Keeps `job` (just made, queued), evicting finished jobs as needed, or refuses it.
    fn admit(&self, job: Arc<Job>) -> Result<(), Refused>;
    /// The kept job `id` (`None`: evicted, or never kept here).
    fn find(&self, id: &str) -> Option<Arc<Job>>;
    /// Applies retention now: time to live, then the count and byte limits.
    fn settle(&self);
    /// Kept jobs newest first: at most `limit` of them, older than cursor `before` if given.
    fn page(&self, before: Option<u64>, limit: usize) -> Page;
    /// What the store holds now.
    fn usage(&self) -> Usage;
}

#[derive(Debug, Default)]
struct Kept {
    jobs: HashMap<String, Arc<Job>>,
    /// Ids in creation order (oldest first).
    order: VecDeque<String>,
}

/// The in-memory store: a map and the creation order under one lock.
#[derive(Debug)]
pub struct MemoryStore {
    kept: Mutex<Kept>,
    meter: Arc<Meter>,
    retention: Retention,
}

impl MemoryStore {
    /// A store keeping jobs by `retention`, accounting on `meter` (the meter the store's
    /// jobs are made with).
    pub fn new(retention: Retention, meter: Arc<Meter>) -> Self {
        MemoryStore {
            kept: Mutex::new(Kept::default()),
            meter,
            retention: Retention {
                max_jobs: retention.max_jobs.max(1),
                ..retention
            },
        }
    }

    fn lock(&self) -> MutexGuard<'_, Kept> {
        // The map and the order are updated together under the lock; never left half-done.
        self.kept.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn evict_at(&self, kept: &mut Kept, i: usize) {
        if let Some(id) = kept.order.remove(i) {
            if let Some(job) = kept.jobs.remove(&id) {
                job.evicted();
            }
        }
    }

    /// Drops finished jobs past their time to live.
    fn sweep(&self, kept: &mut Kept) {
        let ttl = self.retention.ttl.as_millis() as u64;
        let now = now_ms();
        let mut i = 0;
        while i < kept.order.len() {
            let expired = kept
                .jobs
                .get(&kept.order[i])
                .and_then(|j| j.ended_ms())
                .is_some_and(|e| now.saturating_sub(e) >= ttl);
            if expired {
                self.evict_at(kept, i);
            } else {
                i += 1;
            }
        }
    }

    /// Evicts the oldest finished job; false when every kept job is still running.
    fn evict_oldest_finished(&self, kept: &mut Kept) -> bool {
        let oldest = kept
            .order
            .iter()
            .position(|id| kept.jobs.get(id).is_some_and(|j| j.status().is_final()));
        match oldest {
            Some(i) => {
                self.evict_at(kept, i);
                true
            }
            None => false,
        }
    }

    fn over_budget(&self, kept: &mut Kept) {
        while self.meter.over() && self.evict_oldest_finished(kept) {}
    }
}

impl JobStore for MemoryStore {
    fn admit(&self, job: Arc<Job>) -> Result<(), Refused> {
        let mut kept = self.lock();
        self.sweep(&mut kept);
        while kept.jobs.len() >= self.retention.max_jobs {
            if !self.evict_oldest_finished(&mut kept) {
                return Err(Refused::Count(kept.jobs.len()));
            }
        }
        self.over_budget(&mut kept);
        if self.meter.over() {
            return Err(Refused::Budget {
                used: self.meter.used(),
                max: self.meter.max(),
            });
        }
        job.admitted();
        kept.order.push_back(job.id.clone());
        kept.jobs.insert(job.id.clone(), job);
        Ok(())
    }

    fn find(&self, id: &str) -> Option<Arc<Job>> {
        let mut kept = self.lock();
        self.sweep(&mut kept);
        kept.jobs.get(id).cloned()
    }

    fn settle(&self) {
        let mut kept = self.lock();
        self.sweep(&mut kept);
        self.over_budget(&mut kept);
    }

    fn page(&self, before: Option<u64>, limit: usize) -> Page {
        let mut kept = self.lock();
        self.sweep(&mut kept);
        let mut jobs = Vec::new();
        let mut next = None;
        for id in kept.order.iter().rev() {
            let Some(job) = kept.jobs.get(id) else {
                continue;
            };
            if before.is_some_and(|b| job.seq >= b) {
                continue;
            }
            if jobs.len() == limit {
                next = jobs.last().map(|j: &Arc<Job>| j.seq);
                break;
            }
            jobs.push(job.clone());
        }
        Page { jobs, next }
    }

    fn usage(&self) -> Usage {
        let kept = self.lock();
        Usage {
            jobs: kept.jobs.len(),
            bytes: self.meter.used(),
        }
    }
}
