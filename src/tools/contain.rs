//! Contained panics stay quiet: a panic the engine catches (a host tool's, a script
//! host's, a node's) becomes a typed error and one record in the engine's log sink, and
//! never reaches the process panic hook — no "thread panicked at" on stderr, no backtrace
//! taken with `RUST_BACKTRACE=1`.
//!
//! How: a thread-local depth says "a panic here will be contained"; a panic hook installed
//! once per process (on the first engine build) returns at once when it is set and
//! otherwise calls the hook that was there before, so the host's own panics still reach
//! its own hook (set before the first engine is built; one set afterwards replaces ours,
//! and then it sees contained panics too).

use std::cell::Cell;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Once;
use std::task::{Context, Poll};

thread_local! {
    /// How many containing sections this thread is inside.
    static QUIET: Cell<u32> = const { Cell::new(0) };
}

static HOOK: Once = Once::new();

/// Wraps the process panic hook (once): panics inside [`quiet`] sections skip it.
pub(crate) fn install_hook() {
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if QUIET.with(Cell::get) > 0 {
                return;
            }
            previous(info);
        }));
    });
}

struct Section;

impl Section {
    fn enter() -> Self {
        QUIET.with(|q| q.set(q.get() + 1));
        Section
    }
}

impl Drop for Section {
    fn drop(&mut self) {
        QUIET.with(|q| q.set(q.get().saturating_sub(1)));
    }
}

/// Runs `f` in a section whose panics skip the process panic hook (the caller contains
/// them: `catch_unwind` here or further up the same thread, or a task join).
pub(crate) fn quiet<R>(f: impl FnOnce() -> R) -> R {
    install_hook();
    let _s = Section::enter();
    f()
}

/// `catch_unwind` whose panic skips the process panic hook; the panic's message on `Err`.
pub(crate) fn contain<R>(f: impl FnOnce() -> R) -> Result<R, String> {
    quiet(|| std::panic::catch_unwind(AssertUnwindSafe(f)))
        .map_err(|p| super::panic_message(p.as_ref()))
}

/// A future whose every poll is a [`quiet`] section (for futures run as tasks, whose
/// panics the runtime catches and the engine reads from the join).
pub(crate) struct Quietly<F>(pub(crate) F);

impl<F: Future> Future for Quietly<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // SAFETY: structural pinning of the only field; `Quietly` never moves it.
        let inner = unsafe { self.map_unchecked_mut(|s| &mut s.0) };
        quiet(|| inner.poll(cx))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_contained_panic_gives_its_message() {
        let r: Result<(), String> = contain(|| panic!("boom {}", 7));
        assert_eq!(r.unwrap_err(), "boom 7");
        assert_eq!(QUIET.with(Cell::get), 0, "the section ended");
    }
}
