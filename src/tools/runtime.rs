//! The async runtime a [`ToolManager`](super::ToolManager) runs work on when its caller has
//! none: a handle the host gave, or a small runtime the manager starts on first use and owns.
//!
//! Process, node and workflow tools need a tokio reactor and timers; `api.tools.call` from a
//! script thread needs a runtime to drive the nested call. With this slot none of them
//! depends on the caller having entered a runtime, and no call builds a throwaway one.

use std::sync::{Mutex, OnceLock};

use tokio::runtime::{Handle, Runtime};

/// Worker threads of a runtime the engine owns (script work runs on them or on the
/// blocking pool; the host's threads stay free).
const OWN_WORKERS: usize = 2;

/// A runtime handle, given or owned.
#[derive(Default)]
pub(crate) struct RuntimeSlot {
    handle: OnceLock<Handle>,
    owned: Mutex<Option<Runtime>>,
}

impl RuntimeSlot {
    /// Uses `handle` from now on. False when a runtime was already chosen.
    pub fn set(&self, handle: Handle) -> bool {
        self.handle.set(handle).is_ok()
    }

    /// The handle: the one given, or that of a runtime started now (once) and owned here.
    pub fn handle(&self) -> std::io::Result<Handle> {
        if let Some(h) = self.handle.get() {
            return Ok(h.clone());
        }
        let mut owned = self.owned.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(h) = self.handle.get() {
            return Ok(h.clone());
        }
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(OWN_WORKERS)
            .thread_name("tavern-engine")
            .on_thread_start(yield_to_host)
            .enable_all()
            .build()?;
        let h = rt.handle().clone();
        *owned = Some(rt);
        // Only this function sets the handle while holding `owned`, and it was unset above.
        let _ = self.handle.set(h.clone());
        Ok(h)
    }

    /// Whether the slot owns a runtime (rather than a handle the host gave, or nothing yet).
    pub fn owns(&self) -> bool {
        self.owned
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
    }
}

/// How much lower than the host's threads the engine's own threads are scheduled: an
/// increment to the inherited nice value (19 is the lowest Linux allows).
#[cfg(target_os = "linux")]
const BACKGROUND_NICE: libc::c_int = 10;

/// Lowers the calling thread's scheduling priority below the host's. Called on every thread
/// the engine starts for its own work (its runtime's workers and blocking pool, plugin script
/// threads), never on a thread of the host's: when a mod's script spins and the scheduler
/// puts it on the host frame thread's CPU, the host's thread is preferred. (It can still
/// wait up to a scheduler tick; BENCHMARKS.md, embedding, measures that floor with this
/// same call on a plain thread.)
/// Lowering a priority needs no privilege; a refusal leaves the thread as it was.
pub fn yield_to_host() {
    // On Linux a thread id names one thread for setpriority; elsewhere PRIO_PROCESS would
    // name the whole process, the host's threads included, so nothing is changed there.
    #[cfg(target_os = "linux")]
    {
        // SAFETY: gettid, getpriority and setpriority take plain integers and touch no
        // memory of ours.
        unsafe {
            let tid = libc::gettid() as libc::id_t;
            // The thread inherits the host's nice value; go that much lower, never higher
            // (as root a smaller value would succeed and outrank the host).
            let now = libc::getpriority(libc::PRIO_PROCESS, tid);
            let lower = (now + BACKGROUND_NICE).min(19);
            if lower > now {
                let _ = libc::setpriority(libc::PRIO_PROCESS, tid, lower);
            }
        }
    }
}

impl Drop for RuntimeSlot {
    fn drop(&mut self) {
        // `shutdown_background` never blocks, so dropping the last engine handle is allowed
        // anywhere, including inside an async task or on one of this runtime's own threads.
        if let Some(rt) = self
            .owned
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            rt.shutdown_background();
        }
    }
}
