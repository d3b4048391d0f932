//! Big stacks for Rhai evaluations, mapped once per thread and reused.
//!
//! Rhai evaluates and frees nested values recursively: a value a script nests thousands of
//! levels deep within its budget would overflow a 2 MiB thread when it is dropped, and a
//! stack overflow aborts the process. So every Rhai evaluation (and every drop of its values)
//! runs with at least [`RED_ZONE`] bytes of stack. A thread whose own stack has that much
//! left (the dedicated 64 MiB plugin threads) runs the call in place; any other thread runs
//! it on a [`STACK_SIZE`] segment that it maps the first time and keeps for later calls.
//!
//! Why a kept segment: mapping a fresh segment per call (`stacker::maybe_grow`) costs the
//! `mmap`/`munmap` pair plus a page fault for every stack page the call touches, ~70 µs per
//! Rhai tool call (BENCHMARKS.md). Switching to a kept segment costs a few nanoseconds.
//! To keep a deep call from pinning up to 64 MiB of memory for the thread's lifetime, the
//! part of the segment beyond its first [`KEEP_RESIDENT`] bytes is returned to the kernel
//! (`MADV_DONTNEED`) after a call that reached it (checked with one `mincore`).
//!
//! Elsewhere (Windows) the kept segment is not used: `stacker::maybe_grow` switches to a
//! fresh stack when the thread has less than [`RED_ZONE`] left.

#[cfg(unix)]
use std::cell::{Cell, RefCell};

/// Size of a segment (plus one guard page below it).
pub(crate) const STACK_SIZE: usize = 64 << 20;
/// Stack an evaluation is guaranteed: below this much remaining stack a call moves to a
/// segment.
pub(crate) const RED_ZONE: usize = 48 << 20;
#[cfg(unix)]
/// The top of a segment that stays resident between calls.
const KEEP_RESIDENT: usize = 1 << 20;
#[cfg(unix)]
/// Segments a thread keeps for reuse (a nested call that needs its own is rare).
const KEEP_SEGMENTS: usize = 1;

#[cfg(unix)]
/// One mapped stack: `[base, base + page)` is a guard page, `[base + page, base + len)` is
/// the usable stack.
struct Segment {
    base: *mut u8,
    len: usize,
    page: usize,
}

#[cfg(unix)]
impl Segment {
    fn map() -> Option<Segment> {
        // SAFETY: sysconf has no preconditions.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
            .ok()
            .filter(|p| *p > 0)?;
        let len = STACK_SIZE + page;
        // SAFETY: an anonymous private mapping at an address of the kernel's choice; the
        // result is checked before use.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return None;
        }
        let seg = Segment {
            base: base.cast(),
            len,
            page,
        };
        // SAFETY: the range lies inside the mapping made above; the first page stays
        // PROT_NONE as the guard.
        let ok = unsafe {
            libc::mprotect(
                base.cast::<u8>().add(page).cast(),
                STACK_SIZE,
                libc::PROT_READ | libc::PROT_WRITE,
            )
        } == 0;
        ok.then_some(seg)
    }

    /// Lowest usable address.
    fn low(&self) -> *mut u8 {
        // SAFETY: `page < len`, inside the mapping.
        unsafe { self.base.add(self.page) }
    }

    /// Gives the deep part of the stack back to the kernel if the last call used it.
    fn trim(&self) {
        let probe = STACK_SIZE - KEEP_RESIDENT - self.page;
        let mut resident = 0u8;
        // SAFETY: `probe` is page-aligned and inside the usable range; `mincore` writes one
        // byte for one page.
        let used = unsafe { libc::mincore(self.low().add(probe).cast(), self.page, &mut resident) }
            == 0
            && resident & 1 == 1;
        if used {
            // SAFETY: the range is inside the mapping and no frame lives there now (the call
            // has returned); the pages read back as zeros when touched again.
            unsafe {
                libc::madvise(
                    self.low().cast(),
                    STACK_SIZE - KEEP_RESIDENT,
                    libc::MADV_DONTNEED,
                );
            }
        }
    }
}

#[cfg(unix)]
impl Drop for Segment {
    fn drop(&mut self) {
        // SAFETY: the mapping was made by `map` with this length and nothing runs on it.
        unsafe {
            libc::munmap(self.base.cast(), self.len);
        }
    }
}

#[cfg(unix)]
thread_local! {
    /// Segments this thread keeps for its next calls.
    static SPARE: RefCell<Vec<Segment>> = const { RefCell::new(Vec::new()) };
    /// Lowest usable address of the segment this thread runs on now, if any.
    static LIMIT: Cell<Option<usize>> = const { Cell::new(None) };
}

#[cfg(unix)]
/// Stack left below the current frame.
fn remaining() -> usize {
    let sp = psm::stack_pointer() as usize;
    match LIMIT.with(Cell::get) {
        Some(low) => sp.saturating_sub(low),
        None => stacker::remaining_stack().unwrap_or(0),
    }
}

#[cfg(unix)]
/// Runs `f` with at least [`RED_ZONE`] bytes of stack: in place when the thread has them,
/// otherwise on this thread's kept segment (mapped on first use). A panic in `f` is carried
/// back to the caller's stack and resumed there.
pub(crate) fn on_big_stack<T>(f: impl FnOnce() -> T) -> T {
    if remaining() >= RED_ZONE {
        return f();
    }
    let Some(seg) = SPARE.with(|s| s.borrow_mut().pop()).or_else(Segment::map) else {
        // No memory for a segment: the one-off mapping reports it the way it can.
        return stacker::maybe_grow(RED_ZONE, STACK_SIZE, f);
    };
    let prev = LIMIT.with(|l| l.replace(Some(seg.low() as usize)));
    let mut out = None;
    let run = || {
        crate::tools::quiet(|| {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| out = Some(f())))
        })
        .err()
    };
    // SAFETY: `low()` is page-aligned and `STACK_SIZE` a multiple of the page size; the
    // closure never unwinds (the panic is caught and returned); the segment outlives the
    // call and nothing refers to its frames afterwards.
    let panic = unsafe { psm::on_stack(seg.low(), STACK_SIZE, run) };
    LIMIT.with(|l| l.set(prev));
    seg.trim();
    SPARE.with(|s| {
        let mut s = s.borrow_mut();
        if s.len() < KEEP_SEGMENTS {
            s.push(seg);
        }
    });
    match (panic, out) {
        (Some(p), _) => std::panic::resume_unwind(p),
        (None, Some(v)) => v,
        // `out` is set whenever `f` returned without panicking.
        (None, None) => unreachable!("the call neither returned nor panicked"),
    }
}

/// Runs `f` with at least [`RED_ZONE`] bytes of stack, growing onto a fresh stack when
/// the thread has less.
#[cfg(not(unix))]
pub(crate) fn on_big_stack<T>(f: impl FnOnce() -> T) -> T {
    stacker::maybe_grow(RED_ZONE, STACK_SIZE, f)
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn reuses_one_segment_and_survives_deep_recursion_on_a_small_thread() {
        fn deep(n: u32) -> u32 {
            let pad = std::hint::black_box([0u8; 256]);
            if n == 0 {
                0
            } else {
                deep(n - 1) + u32::from(pad[0] == 0)
            }
        }
        std::thread::Builder::new()
            .stack_size(256 << 10)
            .spawn(|| {
                // ~100k frames of > 256 bytes: far beyond the thread's own 256 KiB.
                assert_eq!(on_big_stack(|| deep(100_000)), 100_000);
                let first = SPARE.with(|s| s.borrow().first().map(|s| s.base as usize));
                assert!(first.is_some());
                assert_eq!(on_big_stack(|| deep(10)), 10);
                let second = SPARE.with(|s| s.borrow().first().map(|s| s.base as usize));
                assert_eq!(first, second, "the segment is reused");
                // Nested: already on the segment with plenty left, runs in place.
                assert_eq!(on_big_stack(|| on_big_stack(|| deep(5))), 5);
                let r = std::panic::catch_unwind(|| on_big_stack(|| panic!("boom")));
                assert!(r.is_err());
                assert_eq!(LIMIT.with(Cell::get), None);
            })
            .unwrap()
            .join()
            .unwrap();
    }
}
