//! Frame-budgeted work for a game loop: [`Engine::submit`] queues a request, [`Engine::pump`]
//! collects finished ones within a time budget, [`Engine::take`] hands a report over.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Mutex};
use std::time::{Duration, Instant};

use super::{CallOptions, CallReport, EmbedError, Request};
use crate::Engine;

/// How much of a `pump` budget's end is spent polling instead of asleep. Measured on a
/// 2-core VM (BENCHMARKS.md, embedding), with no engine CPU use: sleeping through a 1 ms
/// budget returned later than 1.5 ms in about 1 pump in 300 (under a parallel build),
/// polling through it in at most 1 of 4,173 (quiet).
const SPIN_TAIL: Duration = Duration::from_millis(1);

/// A submitted call's number (never 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ticket(pub u64);

type Finished = (u64, Result<CallReport, EmbedError>);

/// Submitted calls: their results arrive on a channel; `pump` moves them to `done`.
pub(crate) struct Pump {
    next: AtomicU64,
    /// Submitted and not yet moved to `done` (read without a lock on the hot path).
    pending: AtomicUsize,
    tx: mpsc::Sender<Finished>,
    rx: Mutex<mpsc::Receiver<Finished>>,
    done: Mutex<HashMap<u64, Result<CallReport, EmbedError>>>,
}

impl Default for Pump {
    fn default() -> Self {
        let (tx, rx) = mpsc::channel();
        Pump {
            next: AtomicU64::new(1),
            pending: AtomicUsize::new(0),
            tx,
            rx: Mutex::new(rx),
            done: Mutex::new(HashMap::new()),
        }
    }
}

impl Engine {
    /// Queues `text` (read with [`Format::Auto`](crate::Format::Auto), caller host) to run on the engine's
    /// runtime and returns at once. Collect the result with [`Engine::pump`] and
    /// [`Engine::take`].
    ///
    /// A fixed-step game loop: submit, then pump a little every frame until it is done.
    ///
    /// ```
    /// use std::time::Duration;
    /// # let home = tempfile::tempdir().unwrap();
    /// let engine = tavern::Engine::builder().home(home.path()).build().unwrap();
    /// let text = "<|[REQUEST_TOOL]|>\ncommand:「始」system:echo「末」\ntext:「始」hi「末」\n<|[END_TOOL]|>";
    /// let ticket = engine.submit(text).unwrap();
    /// let report = loop {
    ///     // ... simulate and draw the frame ...
    ///     engine.pump(Duration::from_millis(1));
    ///     if let Some(done) = engine.take(ticket) {
    ///         break done.unwrap();
    ///     }
    /// };
    /// assert!(report.ok());
    /// assert_eq!(engine.pending(), 0);
    /// ```
    pub fn submit(&self, text: &str) -> Result<Ticket, EmbedError> {
        self.submit_with(text, CallOptions::new())
    }

    /// [`Engine::submit`] with options.
    pub fn submit_with(&self, text: &str, opts: CallOptions) -> Result<Ticket, EmbedError> {
        self.submit_request(Request::text(text).options(opts))
    }

    /// Queues any [`Request`] ([`Engine::submit`] for calls already read, or an agent's
    /// inventory).
    pub fn submit_request(&self, req: Request) -> Result<Ticket, EmbedError> {
        let handle = self
            .tools()
            .runtime_handle()
            .map_err(|e| EmbedError::Runtime(e.to_string()))?;
        let n = self.pump.next.fetch_add(1, Ordering::Relaxed);
        self.pump.pending.fetch_add(1, Ordering::AcqRel);
        let tx = self.pump.tx.clone();
        let fut = super::run(self.tools().clone(), req);
        let task = handle.spawn(fut);
        // A second task reports the first one's end, also when it panicked.
        handle.spawn(async move {
            let r = task.await.map_err(|e| EmbedError::Lost(e.to_string()));
            let _ = tx.send((n, r));
        });
        Ok(Ticket(n))
    }

    /// Collects finished submissions for at most `budget` and returns how many finished
    /// during this pump. Returns at once when nothing is pending; otherwise waits for
    /// results until the budget is spent or nothing is pending. Script work never runs on
    /// this thread, and the engine's own threads run at a lower priority than the host's,
    /// so a looping script cannot hold it past the budget. The last millisecond of the
    /// budget is spent polling (yielding between polls) rather than asleep: on a
    /// loaded machine a sleeping thread's wake-up can come milliseconds late.
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// # let home = tempfile::tempdir().unwrap();
    /// let engine = tavern::Engine::builder().home(home.path()).build().unwrap();
    /// // Nothing queued: returns at once, with nothing finished.
    /// assert_eq!(engine.pump(Duration::from_millis(5)), 0);
    /// let ticket = engine.submit("<|[REQUEST_TOOL]|>\ncommand:「始」system:echo「末」\ntext:「始」x「末」\n<|[END_TOOL]|>").unwrap();
    /// let mut finished = 0;
    /// while finished == 0 {
    ///     finished += engine.pump(Duration::from_millis(1));
    /// }
    /// assert_eq!(finished, 1);
    /// assert!(engine.take(ticket).is_some());
    /// ```
    pub fn pump(&self, budget: Duration) -> usize {
        if self.pump.pending.load(Ordering::Acquire) == 0 {
            return 0;
        }
        let until = Instant::now() + budget;
        let rx = self.pump.rx.lock().unwrap_or_else(|p| p.into_inner());
        let mut finished = 0;
        loop {
            let got = match rx.try_recv() {
                Ok(f) => Some(f),
                Err(mpsc::TryRecvError::Disconnected) => None,
                Err(mpsc::TryRecvError::Empty) => {
                    let now = Instant::now();
                    if now >= until || self.pump.pending.load(Ordering::Acquire) == 0 {
                        None
                    } else if until - now > SPIN_TAIL {
                        rx.recv_timeout(until - now - SPIN_TAIL).ok()
                    } else {
                        // The budget's last stretch: poll rather than sleep, yielding
                        // between polls (a spin without yielding used up this thread's
                        // share and was preempted for whole time slices under load).
                        std::thread::yield_now();
                        continue;
                    }
                }
            };
            let Some((n, r)) = got else { break };
            self.pump
                .done
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(n, r);
            self.pump.pending.fetch_sub(1, Ordering::AcqRel);
            finished += 1;
        }
        finished
    }

    /// The result of a submission once a pump has collected it (then forgotten: a second
    /// `take` of the same ticket is `None`). `None` while it is pending or for an unknown
    /// ticket.
    ///
    /// ```
    /// use std::time::Duration;
    /// # let home = tempfile::tempdir().unwrap();
    /// let engine = tavern::Engine::builder().home(home.path()).build().unwrap();
    /// let ticket = engine.submit("<|[REQUEST_TOOL]|>\ncommand:「始」no:such「末」\n<|[END_TOOL]|>").unwrap();
    /// while engine.pending() > 0 {
    ///     engine.pump(Duration::from_millis(1));
    /// }
    /// let report = engine.take(ticket).expect("collected by pump").unwrap();
    /// // The text was read and run; the call itself failed (an unknown tool).
    /// assert!(report.outcomes[0].result.is_err());
    /// assert!(engine.take(ticket).is_none(), "a result is taken once");
    /// ```
    pub fn take(&self, ticket: Ticket) -> Option<Result<CallReport, EmbedError>> {
        self.pump
            .done
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&ticket.0)
    }

    /// How many submissions are not yet collected by a pump.
    pub fn pending(&self) -> usize {
        self.pump.pending.load(Ordering::Acquire)
    }
}
