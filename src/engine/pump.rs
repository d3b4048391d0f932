//! Frame-budgeted work for a game loop: [`Engine::submit`] queues a request, [`Engine::pump`]
//! runs main-thread host tools and collects finished requests within a time budget,
//! [`Engine::take`] hands a report over, [`Engine::cancel`] stops one.
//!
//! Finished requests and parked main-thread calls are pushed into one state under a mutex;
//! `pump` takes what is there and returns (it never waits), and a blocking call on a thread
//! with main-thread tools sleeps on the state's condition variable, serving parked calls,
//! until its own result arrives.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::host_tools::MainThreadTool;
use super::{CallOptions, CallReport, CancelToken, EmbedError, Request};
use crate::tools::{CallContext, ToolError};
use crate::Engine;

/// A submitted call's number (never 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ticket(pub u64);

type Finished = (u64, Result<CallReport, EmbedError>);

/// A main-thread tool call parked until a pump on the tool's thread runs it.
struct Job {
    tool: Arc<MainThreadTool>,
    ctx: CallContext,
    args: Value,
    reply: oneshot::Sender<Result<Value, ToolError>>,
}

#[derive(Default)]
struct State {
    /// Finished submissions not yet collected by a pump.
    arrived: Vec<Finished>,
    /// Parked main-thread calls, oldest first.
    jobs: VecDeque<Job>,
    /// The thread that pumped last (for the message about a stranded call).
    last_pumper: Option<ThreadId>,
}

/// What the engine's threads share with the pumping thread: finished work and parked
/// main-thread calls, and the signal a waiting pump sleeps on.
#[derive(Default)]
pub(crate) struct PumpShared {
    state: Mutex<State>,
    signal: Condvar,
    /// Parked main-thread calls (read without the lock on `pump`'s idle path).
    queued: AtomicUsize,
    /// Whether a main-thread tool exists (then blocking calls serve parked calls).
    has_main: AtomicBool,
    /// The thread whose pumps run main-thread tools registered with
    /// `main_thread_tool_send`: the builder's `pump_thread`, else the first to pump.
    pump_thread: OnceLock<ThreadId>,
}

impl PumpShared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Every section under the lock only pushes or pops whole entries.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn arrive(&self, f: Finished) {
        self.lock().arrived.push(f);
        self.signal.notify_all();
    }

    /// Wakes every waiter (taking the lock first, so a waiter that checked its condition
    /// under the lock cannot miss it).
    fn notify(&self) {
        drop(self.lock());
        self.signal.notify_all();
    }

    /// The engine's pump thread, once named or claimed.
    pub(crate) fn pump_thread(&self) -> Option<ThreadId> {
        self.pump_thread.get().copied()
    }

    /// Names the pump thread (the builder's `pump_thread`).
    pub(crate) fn set_pump_thread(&self, t: ThreadId) {
        let _ = self.pump_thread.set(t);
    }

    /// The thread that pumped last, if any did.
    pub(crate) fn last_pumper(&self) -> Option<ThreadId> {
        self.lock().last_pumper
    }

    pub(crate) fn main_tool_added(&self) {
        self.has_main.store(true, Ordering::Release);
    }

    /// Parks a main-thread call; the receiver gets its result.
    pub(crate) fn park(
        &self,
        tool: Arc<MainThreadTool>,
        ctx: CallContext,
        args: Value,
    ) -> oneshot::Receiver<Result<Value, ToolError>> {
        let (reply, rx) = oneshot::channel();
        let mut st = self.lock();
        st.jobs.push_back(Job {
            tool,
            ctx,
            args,
            reply,
        });
        self.queued.fetch_add(1, Ordering::AcqRel);
        drop(st);
        self.signal.notify_all();
        rx
    }

    /// The oldest parked call this thread may run now; calls whose caller stopped waiting
    /// are dropped on the way.
    fn take_job(&self, st: &mut State) -> Option<Job> {
        let before = st.jobs.len();
        st.jobs.retain(|j| !j.reply.is_closed());
        let mut found = None;
        for (i, j) in st.jobs.iter().enumerate() {
            if j.tool.ready_here() {
                found = Some(i);
                break;
            }
        }
        let job = found.and_then(|i| st.jobs.remove(i));
        let gone = before - st.jobs.len();
        if gone > 0 {
            self.queued.fetch_sub(gone, Ordering::AcqRel);
        }
        job
    }

    /// Runs a taken job on this thread and sends its result back.
    fn run_job(&self, job: Job) {
        match job.tool.run(&job.ctx, job.args.clone()) {
            Some(r) => {
                let _ = job.reply.send(r);
            }
            // Cannot happen (`take_job` checked): keep the call parked, not lost.
            None => {
                let mut st = self.lock();
                st.jobs.push_front(job);
                self.queued.fetch_add(1, Ordering::AcqRel);
            }
        }
    }
}

/// Submitted calls: their results arrive in the shared state; `pump` moves them to `done`.
pub(crate) struct Pump {
    next: AtomicU64,
    /// Submitted and not yet moved to `done` (read without a lock on the hot path).
    pending: AtomicUsize,
    pub(crate) shared: Arc<PumpShared>,
    done: Mutex<HashMap<u64, Result<CallReport, EmbedError>>>,
    /// The cancel tokens of submissions still running, by ticket.
    running: Mutex<HashMap<u64, CancellationToken>>,
}

impl Default for Pump {
    fn default() -> Self {
        Pump::new(Arc::default())
    }
}

impl Pump {
    pub(crate) fn new(shared: Arc<PumpShared>) -> Self {
        Pump {
            next: AtomicU64::new(1),
            pending: AtomicUsize::new(0),
            shared,
            done: Mutex::new(HashMap::new()),
            running: Mutex::new(HashMap::new()),
        }
    }

    fn running(&self) -> MutexGuard<'_, HashMap<u64, CancellationToken>> {
        self.running.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits for `rx` on a thread that may own main-thread tools, running their parked
    /// calls meanwhile (a blocking call from the game thread that reaches a main-thread
    /// tool would otherwise wait for a pump that cannot come).
    pub(crate) fn wait_serving<T>(&self, rx: &std::sync::mpsc::Receiver<T>) -> Option<T> {
        let sh = &self.shared;
        let mut st = sh.lock();
        loop {
            match rx.try_recv() {
                Ok(v) => return Some(v),
                Err(std::sync::mpsc::TryRecvError::Disconnected) => return None,
                Err(std::sync::mpsc::TryRecvError::Empty) => {}
            }
            if let Some(job) = sh.take_job(&mut st) {
                drop(st);
                sh.run_job(job);
                st = sh.lock();
                continue;
            }
            st = sh.signal.wait(st).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Whether blocking calls must serve parked main-thread calls while they wait.
    pub(crate) fn has_main_thread_tools(&self) -> bool {
        self.shared.has_main.load(Ordering::Acquire)
    }

    /// Called by a blocking call's task when its result is sent.
    pub(crate) fn notifier(&self) -> Arc<PumpShared> {
        self.shared.clone()
    }
}

impl PumpShared {
    /// Wakes threads waiting in [`Pump::wait_serving`].
    pub(crate) fn wake(&self) {
        self.notify();
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
    pub fn submit_request(&self, mut req: Request) -> Result<Ticket, EmbedError> {
        let handle = self
            .tools()
            .runtime_handle()
            .map_err(|e| EmbedError::Runtime(e.to_string()))?;
        let n = self.pump.next.fetch_add(1, Ordering::Relaxed);
        // A child of the host's token (firing the host's still stops the calls), so
        // `Engine::cancel` of this ticket never fires the host's token.
        let token = req
            .options
            .cancel
            .as_ref()
            .map_or_else(CancellationToken::new, |c| c.token().child_token());
        req.options.cancel = Some(CancelToken::from_token(token.clone()));
        self.pump.running().insert(n, token);
        self.pump.pending.fetch_add(1, Ordering::AcqRel);
        let shared = self.pump.shared.clone();
        super::run::spawn_request(&handle, self.tools().clone(), req, move |r| {
            shared.arrive((n, r))
        });
        Ok(Ticket(n))
    }

    /// Runs parked main-thread tool calls and collects finished submissions, within
    /// `budget`; returns the tickets of the submissions it collected (take their reports
    /// with [`Engine::take`]), so a host need not poll every ticket every frame.
    ///
    /// - It returns as soon as the work it can do is done — the calls parked for
    ///   main-thread tools this thread runs, and the submissions that have finished — not
    ///   at the end of the budget while only other work is running: a long call costs a
    ///   frame nothing but this check. Having run a main-thread call, it waits (within the
    ///   budget, sleeping) for what that call's caller does next — its end, or its next
    ///   main-thread call — so a mod's call to a main-thread tool ends in the frame that
    ///   served it.
    /// - It starts a main-thread call only while the budget lasts (the first one always, so
    ///   `pump(Duration::ZERO)` still makes progress): it returns past its budget by at most
    ///   one handler's own run, however many calls were parked at once.
    /// - Main-thread tools run on their thread only: a non-`Send` one on the thread that
    ///   registered it, one from `main_thread_tool_on` on the thread named there, one from
    ///   `main_thread_tool_send` on the engine's pump thread
    ///   ([`EngineBuilder::pump_thread`](crate::EngineBuilder::pump_thread), else the
    ///   first thread that calls `pump`).
    ///
    /// ```
    /// use std::time::Duration;
    /// # let home = tempfile::tempdir().unwrap();
    /// let engine = tavern::Engine::builder().home(home.path()).build().unwrap();
    /// // Nothing queued: returns at once, with nothing finished.
    /// assert!(engine.pump(Duration::from_millis(5)).is_empty());
    /// let ticket = engine.submit("<|[REQUEST_TOOL]|>\ncommand:「始」system:echo「末」\ntext:「始」x「末」\n<|[END_TOOL]|>").unwrap();
    /// let finished = loop {
    ///     let done = engine.pump(Duration::from_millis(1));
    ///     if !done.is_empty() {
    ///         break done;
    ///     }
    ///     std::thread::sleep(Duration::from_millis(1)); // ... the rest of the frame ...
    /// };
    /// assert_eq!(finished, [ticket]);
    /// assert!(engine.take(ticket).is_some());
    /// ```
    pub fn pump(&self, budget: Duration) -> Vec<Ticket> {
        let p = &self.pump;
        let sh = &p.shared;
        // The first pump names the pump thread (one atomic load once it is named).
        if sh.pump_thread.get().is_none() {
            let _ = sh.pump_thread.set(std::thread::current().id());
        }
        if p.pending.load(Ordering::Acquire) == 0 && sh.queued.load(Ordering::Acquire) == 0 {
            return Vec::new();
        }
        let me = std::thread::current().id();
        let until = Instant::now() + budget;
        let mut st = sh.lock();
        st.last_pumper = Some(me);
        let mut finished = Vec::new();
        // Whether a main-thread call ran, and whether a result came in since the last one.
        let mut ran = false;
        let mut heard = false;
        loop {
            if !st.arrived.is_empty() {
                heard = true;
                let mut done = p.done.lock().unwrap_or_else(|e| e.into_inner());
                let mut running = p.running();
                for (n, r) in st.arrived.drain(..) {
                    running.remove(&n);
                    done.insert(n, r);
                    p.pending.fetch_sub(1, Ordering::AcqRel);
                    finished.push(Ticket(n));
                }
            }
            // The budget is checked before each handler starts: past it by one run at most.
            let now = Instant::now();
            if ran && now >= until {
                break;
            }
            if let Some(job) = sh.take_job(&mut st) {
                drop(st);
                sh.run_job(job);
                ran = true;
                heard = false;
                st = sh.lock();
                continue;
            }
            // Nothing to run here. Having served a main-thread call, wait (within the
            // budget) for what its caller does next — its end or its next main-thread call —
            // so a mod's call ends in the frame that served it; else return now.
            if !ran || heard || p.pending.load(Ordering::Acquire) == 0 {
                break;
            }
            st = sh
                .signal
                .wait_timeout(st, until - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
            if Instant::now() >= until && st.arrived.is_empty() {
                break;
            }
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

    /// Stops a submission that is still running (its cancel token fires: scripts stop at
    /// their next budget check, parked and pending calls before they start); its report,
    /// with the calls failed as cancelled, is collected by a pump as usual. False when the
    /// ticket is unknown or its submission has already finished.
    ///
    /// ```
    /// use std::time::Duration;
    /// use serde_json::json;
    /// # let home = tempfile::tempdir().unwrap();
    /// let engine = tavern::Engine::builder()
    ///     .home(home.path())
    ///     .main_thread_tool(
    ///         tavern::ToolDefinition::host("world:never", "Runs when pumped.", json!({"type": "object"})),
    ///         |_ctx, _args| Ok(json!(null)),
    ///     )
    ///     .build()
    ///     .unwrap();
    /// // Parked until a pump runs it; cancelled first.
    /// let ticket = engine.submit("<|[REQUEST_TOOL]|>\ncommand:「始」world:never「末」\n<|[END_TOOL]|>").unwrap();
    /// assert!(engine.cancel(ticket));
    /// let report = loop {
    ///     engine.pump(Duration::from_millis(5));
    ///     if let Some(r) = engine.take(ticket) {
    ///         break r.unwrap();
    ///     }
    /// };
    /// assert_eq!(report.outcomes[0].result.as_ref().unwrap_err().code(), "cancelled");
    /// assert!(!engine.cancel(ticket), "finished: nothing to cancel");
    /// ```
    pub fn cancel(&self, ticket: Ticket) -> bool {
        match self.pump.running().get(&ticket.0) {
            Some(t) => {
                t.cancel();
                true
            }
            None => false,
        }
    }

    /// How many submissions are not yet collected by a pump.
    pub fn pending(&self) -> usize {
        self.pump.pending.load(Ordering::Acquire)
    }
}
