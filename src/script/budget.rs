//! The per-call instruction and wall-clock budget shared by a Lua state's hook and the
//! Rust functions it calls (pattern matching charges its steps here too).

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::time::Instant;

/// Why a run was stopped by its budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Abort {
    /// Too many instructions.
    #[error("instruction limit exceeded")]
    Instructions,
    /// Past the wall-clock deadline.
    #[error("time limit exceeded")]
    Timeout,
    /// The caller cancelled the call.
    #[error("cancelled")]
    Cancelled,
}

/// A call's budget while the call is away from its script state ([`Budget::save`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Saved {
    used: u64,
    limit: u64,
    deadline_ns: u64,
    wall_ms: u64,
    abort: u8,
}

/// Budget of the current (outermost) call on one script state.
#[derive(Debug)]
pub(crate) struct Budget {
    epoch: Instant,
    used: AtomicU64,
    limit: AtomicU64,
    deadline_ns: AtomicU64,
    /// The wall-clock allowance of the current call in ms (for the timeout message).
    wall_ms: AtomicU64,
    abort: AtomicU8,
}

impl Budget {
    pub fn new() -> Self {
        Budget {
            epoch: Instant::now(),
            used: AtomicU64::new(0),
            limit: AtomicU64::new(u64::MAX),
            deadline_ns: AtomicU64::new(u64::MAX),
            wall_ms: AtomicU64::new(0),
            abort: AtomicU8::new(0),
        }
    }

    /// Starts a new budget of `instructions` ending at `deadline` (wall clock: time spent
    /// in host functions the script calls counts too); `wall_ms` is the allowance the
    /// deadline stands for (for the timeout message). Cancellation is not kept here: a
    /// charge reads the running call's own token ([`super::host::current_cancelled`]), so
    /// starting a budget copies no token.
    pub fn reset(&self, instructions: u64, deadline: Instant, wall_ms: u64) {
        self.used.store(0, Ordering::Relaxed);
        self.limit.store(instructions, Ordering::Relaxed);
        self.wall_ms.store(wall_ms, Ordering::Relaxed);
        let d = deadline.saturating_duration_since(self.epoch).as_nanos() as u64;
        self.deadline_ns.store(d, Ordering::Relaxed);
        self.abort.store(0, Ordering::Relaxed);
    }

    /// The state of the current call's budget, for a call that gives its script state up
    /// while it waits (another call then starts a budget of its own) and takes it back later.
    pub fn save(&self) -> Saved {
        Saved {
            used: self.used.load(Ordering::Relaxed),
            limit: self.limit.load(Ordering::Relaxed),
            deadline_ns: self.deadline_ns.load(Ordering::Relaxed),
            wall_ms: self.wall_ms.load(Ordering::Relaxed),
            abort: self.abort.load(Ordering::Relaxed),
        }
    }

    /// Goes on with a budget [`Budget::save`] kept: the same instructions used, the same
    /// deadline (time spent away counts).
    pub fn restore(&self, s: Saved) {
        self.used.store(s.used, Ordering::Relaxed);
        self.limit.store(s.limit, Ordering::Relaxed);
        self.deadline_ns.store(s.deadline_ns, Ordering::Relaxed);
        self.wall_ms.store(s.wall_ms, Ordering::Relaxed);
        self.abort.store(s.abort, Ordering::Relaxed);
    }

    /// The wall-clock allowance (ms) the current call started with.
    pub fn wall_ms(&self) -> u64 {
        self.wall_ms.load(Ordering::Relaxed)
    }

    /// Why the run was stopped, if it was. Once set, stays set until the next `reset`.
    pub fn aborted(&self) -> Option<Abort> {
        match self.abort.load(Ordering::Relaxed) {
            0 => None,
            1 => Some(Abort::Instructions),
            2 => Some(Abort::Timeout),
            _ => Some(Abort::Cancelled),
        }
    }

    fn set(&self, a: Abort) -> Abort {
        let code = match a {
            Abort::Instructions => 1,
            Abort::Timeout => 2,
            Abort::Cancelled => 3,
        };
        // Keep the first reason.
        let _ = self
            .abort
            .compare_exchange(0, code, Ordering::Relaxed, Ordering::Relaxed);
        self.aborted().unwrap_or(a)
    }

    /// Charges `n` steps; checks the instruction limit, the deadline and whether the
    /// script call running on this thread was cancelled.
    pub fn charge(&self, n: u64) -> Result<(), Abort> {
        if let Some(a) = self.aborted() {
            return Err(a);
        }
        let used = self.used.fetch_add(n, Ordering::Relaxed) + n;
        if used > self.limit.load(Ordering::Relaxed) {
            return Err(self.set(Abort::Instructions));
        }
        let now = self.epoch.elapsed().as_nanos() as u64;
        if now > self.deadline_ns.load(Ordering::Relaxed) {
            return Err(self.set(Abort::Timeout));
        }
        // Charges come from the thread running the script, inside its call.
        if super::host::current_cancelled() {
            return Err(self.set(Abort::Cancelled));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::script::host::{ActiveCall, CallInfo};

    fn far() -> Instant {
        Instant::now() + std::time::Duration::from_secs(60)
    }

    #[test]
    fn a_budget_watches_the_token_of_the_call_running_on_its_thread() {
        let b = Budget::new();
        let first = CallInfo::host("t:first");
        let second = CallInfo::host("t:second");
        ActiveCall::new(&first, 60_000).run(|| {
            b.reset(1_000_000, far(), 60_000);
            assert_eq!(b.charge(1), Ok(()));
            first.cancel.cancel();
            assert_eq!(b.charge(1), Err(Abort::Cancelled));
        });
        // A new call with another token starts clean and no longer watches the first.
        ActiveCall::new(&second, 60_000).run(|| {
            b.reset(1_000_000, far(), 60_000);
            assert_eq!(b.charge(1), Ok(()));
            second.cancel.cancel();
            assert_eq!(b.charge(1), Err(Abort::Cancelled));
        });
        // Outside any call nothing cancels.
        b.reset(1_000_000, far(), 60_000);
        assert_eq!(b.charge(1), Ok(()));
    }

    #[test]
    fn a_reset_clears_the_count_and_the_abort() {
        let b = Budget::new();
        b.reset(10, far(), 60_000);
        assert_eq!(b.charge(11), Err(Abort::Instructions));
        assert_eq!(b.aborted(), Some(Abort::Instructions));
        b.reset(10, far(), 60_000);
        assert_eq!(b.aborted(), None);
        assert_eq!(b.charge(10), Ok(()));
        b.reset(10, Instant::now(), 0);
        std::thread::sleep(std::time::Duration::from_millis(2));
        assert_eq!(b.charge(1), Err(Abort::Timeout));
    }
}
