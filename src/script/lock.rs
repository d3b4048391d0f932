//! A re-entrant per-plugin lock with deadlock detection.
//!
//! A plugin's Lua state runs one call at a time. A call may re-enter its own plugin through
//! `api.tools.call` (same thread: allowed), and two threads may each hold one plugin and call
//! into the other's (A→B on one thread, B→A on another). Waiting would deadlock; the waiter
//! finds the cycle in the wait-for graph and fails with [`ScriptError::Busy`] instead.
//! Any wait also ends at the caller's deadline.
//!
//! Every script call and hook takes this lock, so taking a free one is a single atomic
//! exchange and giving it back another; only a waiter touches the mutex and the condvar.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use super::ScriptError;

/// The lock of one plugin's script state.
#[derive(Default)]
pub(crate) struct PluginLock {
    /// The holding thread's number ([`this_thread`]), 0 when the lock is free.
    owner: AtomicU64,
    /// How many times the holder has taken it. Only the holder reads or writes it (taking
    /// the lock orders one holder's writes before the next holder's).
    count: AtomicUsize,
    /// Threads blocked in `acquire` (a wake-up costs a syscall; skip it when nobody waits).
    waiters: AtomicUsize,
    /// Held by a waiter from its last look at `owner` until it sleeps on `cv`.
    sleep: Mutex<()>,
    cv: Condvar,
}

thread_local! {
    static ME: u64 = {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        NEXT.fetch_add(1, Ordering::Relaxed)
    };
}

/// This thread's number (never 0), assigned on first use.
fn this_thread() -> u64 {
    // A thread tearing down its locals takes a number of its own; it holds no lock.
    ME.try_with(|id| *id).unwrap_or_else(|_| {
        static LATE: AtomicU64 = AtomicU64::new(u64::MAX);
        LATE.fetch_sub(1, Ordering::Relaxed)
    })
}

/// Which lock each blocked thread waits for.
fn waits() -> &'static Mutex<HashMap<u64, Arc<PluginLock>>> {
    static W: OnceLock<Mutex<HashMap<u64, Arc<PluginLock>>>> = OnceLock::new();
    W.get_or_init(Default::default)
}

/// Releases one level of the lock when dropped.
pub(crate) struct LockGuard<'a> {
    lock: &'a PluginLock,
}

impl Drop for LockGuard<'_> {
    fn drop(&mut self) {
        let l = self.lock;
        let count = l.count.load(Ordering::Relaxed).saturating_sub(1);
        l.count.store(count, Ordering::Relaxed);
        if count == 0 {
            // SeqCst pairs with the waiter's: either it sees the lock free, or this sees it
            // waiting (and wakes it once it sleeps: it holds `sleep` until then).
            l.owner.store(0, Ordering::SeqCst);
            if l.waiters.load(Ordering::SeqCst) > 0 {
                let _sleep = l.sleep.lock().unwrap_or_else(|p| p.into_inner());
                l.cv.notify_one();
            }
        }
    }
}

impl PluginLock {
    fn owner(&self) -> Option<u64> {
        match self.owner.load(Ordering::Acquire) {
            0 => None,
            o => Some(o),
        }
    }

    fn try_take(&self, me: u64) -> bool {
        // Only this thread ever stores `me`: seeing it means holding the lock.
        if self.owner.load(Ordering::Relaxed) == me {
            let n = self.count.load(Ordering::Relaxed);
            self.count.store(n + 1, Ordering::Relaxed);
            return true;
        }
        if self
            .owner
            .compare_exchange(0, me, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            self.count.store(1, Ordering::Relaxed);
            return true;
        }
        false
    }

    /// Whether waiting for `start` from thread `me` would close a cycle.
    fn would_deadlock(start: &Arc<PluginLock>, me: u64) -> bool {
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
                // A thread that has just taken the lock it waited for still has its entry
                // (it leaves the map after the take): it holds that lock, it does not wait.
                Some(next) if Arc::ptr_eq(next, &cur) => return false,
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
            if self.try_take(me) {
                break Ok(LockGuard { lock: self });
            }
            let sleep = self.sleep.lock().unwrap_or_else(|p| p.into_inner());
            self.waiters.fetch_add(1, Ordering::SeqCst);
            if self.owner.load(Ordering::SeqCst) != 0 {
                // Wake up now and then to re-check the wait-for graph (it changes as others
                // block).
                let wait = (deadline - now).min(Duration::from_millis(20));
                let _ = self
                    .cv
                    .wait_timeout(sleep, wait)
                    .unwrap_or_else(|p| p.into_inner());
            }
            self.waiters.fetch_sub(1, Ordering::SeqCst);
        };
        waits()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&me);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Barrier;

    fn later(secs: u64) -> Instant {
        Instant::now() + Duration::from_secs(secs)
    }

    #[test]
    fn a_holder_takes_it_again_and_others_wait_until_the_last_level_is_given_back() {
        let lock = Arc::new(PluginLock::default());
        let outer = lock.acquire("p", later(10)).expect("free");
        let inner = lock.acquire("p", later(10)).expect("re-entrant");
        let other = {
            let lock = lock.clone();
            std::thread::spawn(move || {
                // Busy while held, however often it looks.
                let busy = lock.acquire("p", Instant::now() + Duration::from_millis(30));
                let busy = matches!(busy, Err(ScriptError::Busy { .. }));
                // Then it waits, and gets it once both levels are given back.
                let got = lock.acquire("p", later(30)).is_ok();
                (busy, got)
            })
        };
        std::thread::sleep(Duration::from_millis(60));
        drop(inner);
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(lock.owner(), Some(this_thread()), "one level is still held");
        drop(outer);
        let (busy, got) = other.join().expect("the other thread ends");
        assert!(busy, "a held lock refuses another thread at its deadline");
        assert!(got, "the waiter gets the lock once it is free");
        assert_eq!(lock.owner(), None, "its guard gave it back");
        assert!(lock.acquire("p", later(1)).is_ok());
    }

    #[test]
    fn two_threads_waiting_for_each_others_lock_are_told_instead_of_hanging() {
        let (a, b) = (
            Arc::new(PluginLock::default()),
            Arc::new(PluginLock::default()),
        );
        let both = Arc::new(Barrier::new(2));
        let run = |mine: Arc<PluginLock>, theirs: Arc<PluginLock>, both: Arc<Barrier>| {
            std::thread::spawn(move || {
                let _held = mine.acquire("mine", later(10)).expect("free");
                both.wait();
                match theirs.acquire("theirs", later(10)) {
                    Ok(_) => "got it",
                    Err(ScriptError::Busy { message, .. }) if message.contains("cycle") => "cycle",
                    Err(_) => "other error",
                }
            })
        };
        let one = run(a.clone(), b.clone(), both.clone());
        let two = run(b, a, both);
        let mut seen = [
            one.join().expect("thread one"),
            two.join().expect("thread two"),
        ];
        seen.sort_unstable();
        // One of them closes the cycle and gives up; the other then gets its lock.
        assert_eq!(seen, ["cycle", "got it"]);
    }

    #[test]
    fn many_threads_each_get_it_exactly_once_at_a_time() {
        let lock = Arc::new(PluginLock::default());
        let inside = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let (lock, inside) = (lock.clone(), inside.clone());
                std::thread::spawn(move || {
                    for _ in 0..200 {
                        let _g = lock.acquire("p", later(30)).expect("gets its turn");
                        assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "alone inside");
                        std::thread::yield_now();
                        inside.fetch_sub(1, Ordering::SeqCst);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("no thread failed");
        }
        assert_eq!(lock.owner(), None);
    }
}
