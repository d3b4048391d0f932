//! A re-entrant per-plugin lock with deadlock detection.
//!
//! A plugin's Lua state runs one call at a time. A call may re-enter its own plugin through
//! `api.tools.call` (same thread: allowed), and two threads may each hold one plugin and call
//! into the other's (A→B on one thread, B→A on another). Waiting would deadlock; the waiter
//! finds the cycle in the wait-for graph and fails with [`ScriptError::Busy`] instead.
//! Any wait also ends at the caller's deadline.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use super::ScriptError;

#[derive(Default)]
struct State {
    owner: Option<ThreadId>,
    count: usize,
    /// Threads blocked in `acquire` (a wake-up costs a syscall; skip it when nobody waits).
    waiters: usize,
}

/// The lock of one plugin's script state.
#[derive(Default)]
pub(crate) struct PluginLock {
    state: Mutex<State>,
    cv: Condvar,
}

thread_local! {
    static ME: ThreadId = std::thread::current().id();
}

/// This thread's id, read once per thread (`thread::current()` clones a handle each time).
fn this_thread() -> ThreadId {
    ME.try_with(|id| *id)
        .unwrap_or_else(|_| std::thread::current().id())
}

/// Which lock each blocked thread waits for.
fn waits() -> &'static Mutex<HashMap<ThreadId, Arc<PluginLock>>> {
    static W: OnceLock<Mutex<HashMap<ThreadId, Arc<PluginLock>>>> = OnceLock::new();
    W.get_or_init(Default::default)
}

/// Releases one level of the lock when dropped.
pub(crate) struct LockGuard<'a> {
    lock: &'a PluginLock,
}

impl Drop for LockGuard<'_> {
    fn drop(&mut self) {
        let mut st = self.lock.state.lock().unwrap_or_else(|p| p.into_inner());
        st.count = st.count.saturating_sub(1);
        if st.count == 0 {
            st.owner = None;
            if st.waiters > 0 {
                self.lock.cv.notify_one();
            }
        }
    }
}

impl PluginLock {
    fn owner(&self) -> Option<ThreadId> {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).owner
    }

    fn try_take(&self, me: ThreadId) -> bool {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        match st.owner {
            None => {
                st.owner = Some(me);
                st.count = 1;
                true
            }
            Some(o) if o == me => {
                st.count += 1;
                true
            }
            Some(_) => false,
        }
    }

    /// Whether waiting for `start` from thread `me` would close a cycle.
    fn would_deadlock(start: &Arc<PluginLock>, me: ThreadId) -> bool {
        let w = waits().lock().unwrap_or_else(|p| p.into_inner());
        let mut cur = start.clone();
        for _ in 0..1024 {
            let Some(owner) = cur.owner() else {
                return false;
            };
            if owner == me {
                return true;
            }
            match w.get(&owner) {
                Some(next) => cur = next.clone(),
                None => return false,
            }
        }
        true
    }

    /// Takes the lock (re-entrantly), failing on a deadlock or at `deadline`.
    pub fn acquire(
        self: &Arc<Self>,
        plugin: &str,
        deadline: Instant,
    ) -> Result<LockGuard<'_>, ScriptError> {
        let me = this_thread();
        if self.try_take(me) {
            return Ok(LockGuard { lock: self });
        }
        waits()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(me, self.clone());
        let out = loop {
            if Self::would_deadlock(self, me) {
                break Err(ScriptError::Busy {
                    plugin: plugin.into(),
                    message: "its script is running a call that waits for this one (a cycle of tool calls across threads); try again".into(),
                });
            }
            let now = Instant::now();
            if now >= deadline {
                break Err(ScriptError::Busy {
                    plugin: plugin.into(),
                    message:
                        "its script stayed busy with another call until this call's time limit"
                            .into(),
                });
            }
            let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
            if st.owner.is_none() {
                drop(st);
                if self.try_take(me) {
                    break Ok(LockGuard { lock: self });
                }
                continue;
            }
            // Wake up now and then to re-check the wait-for graph (it changes as others block).
            let wait = (deadline - now).min(Duration::from_millis(20));
            st.waiters += 1;
            let (mut st, _) = self
                .cv
                .wait_timeout(st, wait)
                .unwrap_or_else(|p| p.into_inner());
            st.waiters -= 1;
        };
        waits()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&me);
        out
    }
}
