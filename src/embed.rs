//! What a host embedding the engine calls: per-call options, the call report, sync and async
//! entry points that behave the same under any runtime (or none), and frame-budgeted work
//! (`submit` / `pump` / `take`) for a game loop.
//!
//! Every entry point runs the calls on the engine's runtime (a small one it owns, or the
//! handle given to [`EngineBuilder::runtime`](crate::EngineBuilder::runtime)), never on the
//! caller's thread, so a host with no tokio runtime, a current-thread runtime or another
//! executor gets the same results and nothing panics for lack of a reactor.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::protocol::{self, Format, Parsed, Severity};
use crate::tools::{key_matching_for, CallOutcome, Caller, ToolError};
use crate::Engine;

/// How much of a `pump` budget's end is spent polling instead of asleep. Measured on a
/// 2-core VM (BENCHMARKS.md, embedding), with no engine CPU use: sleeping through a 1 ms
/// budget returned later than 1.5 ms in about 1 pump in 300 (under a parallel build),
/// polling through it in at most 1 of 4,173 (quiet).
const SPIN_TAIL: Duration = Duration::from_millis(1);

/// A cancel signal the host keeps and may fire from any thread; calls made with it stop
/// (scripts at their next budget check, pending calls before they start).
#[derive(Debug, Clone, Default)]
pub struct CancelToken(CancellationToken);

impl CancelToken {
    /// A new, unfired token.
    pub fn new() -> Self {
        Self::default()
    }

    /// Fires the token.
    pub fn cancel(&self) {
        self.0.cancel();
    }

    /// Whether it was fired.
    pub fn is_cancelled(&self) -> bool {
        self.0.is_cancelled()
    }
}

/// Options for one [`Engine::call`]: the format to read, who is calling, a deadline, a
/// cancel token and whether warnings refuse the calls.
///
/// ```
/// use std::time::Duration;
/// use tavern::{CallOptions, Caller, CancelToken};
/// let stop = CancelToken::new();
/// let opts = CallOptions::new()
///     .caller(Caller::Model(None))
///     .timeout(Duration::from_millis(50))
///     .cancel(stop.clone())
///     .refuse_on_warnings(true);
/// assert!(opts.deadline.is_some());
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct CallOptions {
    /// Which call format to look for (default [`Format::Auto`]).
    pub format: Format,
    /// Who is calling (default [`Caller::Host`]); checked against each tool's
    /// [`CallerPolicy`](crate::CallerPolicy).
    pub caller: Caller,
    /// When the host stops waiting: wall clock, so time spent in host tools counts too.
    /// Scripts stop at it; Rust tools see it as [`CallContext::deadline`](crate::tools::CallContext::deadline).
    pub deadline: Option<Instant>,
    /// Fired by the host to stop the calls.
    pub cancel: Option<CancelToken>,
    /// Refuse every call (as [`ToolError::RefusedWarnings`]) when parsing produced warnings.
    pub refuse_on_warnings: bool,
}

impl Default for CallOptions {
    fn default() -> Self {
        CallOptions {
            format: Format::Auto,
            caller: Caller::Host,
            deadline: None,
            cancel: None,
            refuse_on_warnings: false,
        }
    }
}

impl CallOptions {
    /// The defaults: auto format, caller host, no deadline, no cancel, warnings allowed.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the format.
    pub fn format(mut self, format: Format) -> Self {
        self.format = format;
        self
    }

    /// Sets the caller.
    pub fn caller(mut self, caller: Caller) -> Self {
        self.caller = caller;
        self
    }

    /// Sets the deadline.
    pub fn deadline(mut self, at: Instant) -> Self {
        self.deadline = Some(at);
        self
    }

    /// Sets the deadline `after` from now.
    pub fn timeout(self, after: Duration) -> Self {
        self.deadline(Instant::now() + after)
    }

    /// Sets the cancel token.
    pub fn cancel(mut self, token: CancelToken) -> Self {
        self.cancel = Some(token);
        self
    }

    /// Whether warnings refuse the calls.
    pub fn refuse_on_warnings(mut self, yes: bool) -> Self {
        self.refuse_on_warnings = yes;
        self
    }
}

/// What one text produced: what was read and each call's outcome, in order.
#[derive(Debug, Clone, PartialEq)]
pub struct CallReport {
    /// The parse: prose, calls and diagnostics.
    pub parsed: Parsed,
    /// One outcome per entry of `parsed.calls`.
    pub outcomes: Vec<CallOutcome>,
}

impl CallReport {
    /// True when nothing failed: no error diagnostic and every call succeeded.
    pub fn ok(&self) -> bool {
        !self.parsed.has_errors() && self.outcomes.iter().all(|o| o.result.is_ok())
    }

    /// The JSON `tavern call` prints: `{"results": [...], "diagnostics": [...]}`.
    pub fn to_json(&self) -> Value {
        crate::report::call_report(&self.parsed, &self.outcomes).json
    }
}

/// Why an embedding entry point could not run the calls at all (a call that ran and failed
/// is an `Err` in its [`CallOutcome`] instead).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EmbedError {
    /// The engine's runtime could not be started (no thread could be spawned).
    #[error("cannot start the engine's runtime: {0}")]
    Runtime(String),
    /// `call_blocking` was called on a current-thread runtime that the engine also runs
    /// on: waiting would deadlock. Use the async `call` there.
    #[error("call_blocking would block the runtime the engine runs on; use `call().await` on this thread")]
    WouldDeadlock,
    /// The task running the calls ended without a report (it panicked; the panic was
    /// contained and logged).
    #[error("the calls were lost: {0}")]
    Lost(String),
}

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

/// Parses and runs `text` as `opts` says (the body every entry point shares).
async fn run_text(
    tools: std::sync::Arc<crate::tools::ToolManager>,
    text: String,
    opts: CallOptions,
) -> CallReport {
    let mut parsed = protocol::parse(&text, opts.format);
    // VCP dispatch first, so `parsed.calls` pairs one-to-one with the outcomes.
    parsed.calls = tools.resolve_vcp(std::mem::take(&mut parsed.calls));
    let warnings: Vec<&str> = parsed
        .diagnostics
        .iter()
        .filter(|d| d.severity == Severity::Warning)
        .map(|d| d.message.as_str())
        .collect();
    if opts.refuse_on_warnings && !warnings.is_empty() {
        let joined = warnings.join("; ");
        let outcomes = parsed
            .calls
            .iter()
            .map(|c| CallOutcome {
                tool: c.tool.clone(),
                id: tools.canonical_id(&c.tool),
                result: Err(ToolError::RefusedWarnings {
                    tool: c.tool.clone(),
                    warnings: joined.clone(),
                }),
                elapsed: Duration::ZERO,
            })
            .collect();
        return CallReport { parsed, outcomes };
    }
    let cancel = opts.cancel.map(|c| c.0).unwrap_or_default();
    let outcomes = tools
        .execute_within(
            &parsed.calls,
            opts.caller,
            key_matching_for,
            opts.deadline,
            cancel,
        )
        .await;
    CallReport { parsed, outcomes }
}

impl Engine {
    /// Parses `text` and runs its calls on the engine's runtime. The future can be awaited
    /// under any executor; dropping it fires the calls' cancel token.
    ///
    /// ```
    /// # let home = tempfile::tempdir().unwrap();
    /// let engine = tavern::Engine::builder().home(home.path()).build().unwrap();
    /// let text = "<|[REQUEST_TOOL]|>\ncommand:「始」system:echo「末」\ntext:「始」hi「末」\n<|[END_TOOL]|>";
    /// # let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    /// let report = rt.block_on(engine.call(text, tavern::CallOptions::new())).unwrap();
    /// assert!(report.ok());
    /// ```
    pub async fn call(&self, text: &str, opts: CallOptions) -> Result<CallReport, EmbedError> {
        let handle = self
            .tools()
            .runtime_handle()
            .map_err(|e| EmbedError::Runtime(e.to_string()))?;
        // A child of the host's token (firing the host's token still stops the calls), so
        // stopping these calls when this future is dropped never fires the host's token.
        let token = opts
            .cancel
            .as_ref()
            .map_or_else(CancellationToken::new, |c| c.0.child_token());
        let opts = CallOptions {
            cancel: Some(CancelToken(token.clone())),
            ..opts
        };
        // Stop the calls if the caller stops waiting.
        let _stop = token.drop_guard();
        // Already on a multi-thread runtime (a server, the CLI): run here. A hop onto the
        // engine's own runtime costs two thread wake-ups (~60 µs on a small VM) per call;
        // scripts still leave the worker through `block_in_place`. Anywhere else (no
        // runtime, a current-thread one, another executor) the engine's runtime runs it.
        if tokio::runtime::Handle::try_current()
            .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread)
        {
            return Ok(run_text(self.tools().clone(), text.to_string(), opts).await);
        }
        let task = handle.spawn(run_text(self.tools().clone(), text.to_string(), opts));
        task.await.map_err(|e| EmbedError::Lost(e.to_string()))
    }

    /// [`Engine::call`] for a caller with no async runtime (a game loop, a C host): blocks
    /// this thread until the calls finish. Works under any runtime or none; inside a
    /// multi-thread runtime it moves the worker's other tasks away first.
    ///
    /// ```
    /// # let home = tempfile::tempdir().unwrap();
    /// let engine = tavern::Engine::builder().home(home.path()).build().unwrap();
    /// let text = "<|[REQUEST_TOOL]|>\ncommand:「始」system:echo「末」\ntext:「始」hi「末」\n<|[END_TOOL]|>";
    /// let report = engine.call_blocking(text, tavern::CallOptions::new()).unwrap();
    /// assert_eq!(report.outcomes[0].id.as_deref(), Some("system:echo"));
    /// ```
    pub fn call_blocking(&self, text: &str, opts: CallOptions) -> Result<CallReport, EmbedError> {
        let handle = self
            .tools()
            .runtime_handle()
            .map_err(|e| EmbedError::Runtime(e.to_string()))?;
        let (tx, rx) = mpsc::sync_channel(1);
        let fut = run_text(self.tools().clone(), text.to_string(), opts);
        handle.spawn(async move {
            let _ = tx.send(fut.await);
        });
        let wait = move || {
            rx.recv()
                .map_err(|_| EmbedError::Lost("the task running the calls stopped".into()))
        };
        match tokio::runtime::Handle::try_current() {
            Err(_) => wait(),
            Ok(cur) => match cur.runtime_flavor() {
                tokio::runtime::RuntimeFlavor::MultiThread => tokio::task::block_in_place(wait),
                // A current-thread runtime other than the engine's own keeps the engine's
                // workers free; the host's own current-thread runtime would wait for itself.
                _ if self.tools().owns_runtime() => wait(),
                _ => Err(EmbedError::WouldDeadlock),
            },
        }
    }

    /// Queues `text` (read with [`Format::Auto`], caller host) to run on the engine's
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
        let handle = self
            .tools()
            .runtime_handle()
            .map_err(|e| EmbedError::Runtime(e.to_string()))?;
        let n = self.pump.next.fetch_add(1, Ordering::Relaxed);
        self.pump.pending.fetch_add(1, Ordering::AcqRel);
        let tx = self.pump.tx.clone();
        let fut = run_text(self.tools().clone(), text.to_string(), opts);
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
