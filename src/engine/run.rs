//! The one run path: a [`Request`] (text or parsed calls, and [`CallOptions`]: caller,
//! deadline, cancel token, observer, format, warnings policy, inventory) goes into [`run`],
//! which returns the one [`CallReport`]. `tavern call`, REST invoke and jobs, MCP
//! `tools/call`, the C ABI, `call` / `call_blocking` / `submit` and the agent loop all
//! build a request and call it, so VCP dispatch, chains and their steps, inventories,
//! hooks and observers happen here and nowhere else.
//!
//! `call`, `call_blocking` and `submit` run it on the engine's runtime (a small one it
//! owns, or the handle given to [`EngineBuilder::runtime`](crate::EngineBuilder::runtime)),
//! never on the caller's thread, so a host with no tokio runtime, a current-thread runtime
//! or another executor gets the same results and nothing panics for lack of a reactor.

use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::CallReport;
use crate::protocol::{input, Format, Parsed, Severity};
use crate::tools::{CallOutcome, Caller, Invocation, Observer, ToolError, ToolManager};
use crate::Engine;

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

    /// Wraps a token a way in already has (a served request's, a job's, a submission's).
    pub(crate) fn from_token(token: CancellationToken) -> Self {
        CancelToken(token)
    }

    /// The token underneath.
    pub(crate) fn token(&self) -> &CancellationToken {
        &self.0
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
/// // A timeout is a duration: the deadline is fixed when a call with these options starts,
/// // so options built once and cloned every frame give every call its full 50 ms.
/// assert_eq!(opts.timeout, Some(Duration::from_millis(50)));
/// assert!(opts.deadline.is_none());
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct CallOptions {
    /// Which call format to look for (default [`Format::Auto`]).
    pub format: Format,
    /// Who is calling (default [`Caller::Host`], which is `Caller::default()`); checked against each tool's
    /// [`CallerPolicy`](crate::CallerPolicy).
    pub caller: Caller,
    /// When the host stops waiting, as an absolute instant: wall clock, so time spent in
    /// host tools counts too. Scripts stop at it; Rust tools see it as
    /// [`CallContext::deadline`](crate::tools::CallContext::deadline).
    pub deadline: Option<Instant>,
    /// How long the calls may take, counted from when they start (`submit`, `call`,
    /// `call_blocking`, `run`): turned into a deadline then (the earlier of it and
    /// [`CallOptions::deadline`] wins), so options built once and cloned for every call give
    /// each call the whole duration.
    pub timeout: Option<Duration>,
    /// Fired by the host to stop the calls.
    pub cancel: Option<CancelToken>,
    /// Refuse every call (as [`ToolError::RefusedWarnings`]) when parsing produced warnings.
    pub refuse_on_warnings: bool,
    /// Who watches the calls (a served job, an MCP progress token). Internal.
    #[doc(hidden)]
    pub observer: Observer,
    /// The tools to run against instead of the engine's own (an agent's inventory).
    /// Internal.
    #[doc(hidden)]
    pub inventory: Option<Arc<ToolManager>>,
}

impl Default for CallOptions {
    fn default() -> Self {
        CallOptions {
            format: Format::Auto,
            caller: Caller::default(),
            deadline: None,
            timeout: None,
            cancel: None,
            refuse_on_warnings: false,
            observer: None,
            inventory: None,
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

    /// Sets an absolute deadline (see [`CallOptions::timeout`] for one counted from the
    /// call's start).
    pub fn deadline(mut self, at: Instant) -> Self {
        self.deadline = Some(at);
        self
    }

    /// Sets how long the calls may take, counted from when they start (not from now): the
    /// deadline is fixed when `submit`, `call`, `call_blocking` or `run` starts them.
    pub fn timeout(mut self, after: Duration) -> Self {
        self.timeout = Some(after);
        self
    }

    /// Fixes the timeout as a deadline counted from `now` (the earlier of it and an
    /// absolute deadline); idempotent. Every way in calls it when a call starts.
    pub(crate) fn start_clock(&mut self, now: Instant) {
        if let Some(after) = self.timeout.take() {
            let at = now.checked_add(after);
            self.deadline = match (self.deadline, at) {
                (Some(d), Some(a)) => Some(d.min(a)),
                (d, None) => d,
                (None, a) => a,
            };
        }
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

    /// Sets who watches the calls. Internal.
    #[doc(hidden)]
    pub fn observer(mut self, observer: Observer) -> Self {
        self.observer = observer;
        self
    }

    /// Runs against `tools` instead of the engine's own. Internal.
    #[doc(hidden)]
    pub fn inventory(mut self, tools: Arc<ToolManager>) -> Self {
        self.inventory = Some(tools);
        self
    }
}

/// What a request carries: a body still to be read, or calls already read.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Input {
    /// A body in any shape the engine reads (TAM, `<ACTION>` or VCP text; `{tool, args}`;
    /// MCP, OpenAI or Anthropic calls and messages; a list of calls), read as
    /// [`CallOptions::format`] says.
    Text(String),
    /// Calls read already (by the agent's stream reader, or a way in that reads the body
    /// itself to check its size first).
    Parsed(Parsed),
}

/// One run: what to run and how. Every way in builds one and hands it to the engine's one
/// run function (through [`Engine::run`], [`Engine::call`], [`Engine::call_blocking`],
/// [`Engine::submit_with`] or [`Engine::submit_request`]).
///
/// ```
/// use tavern::{Caller, Request};
/// let req = Request::text("<|[REQUEST_TOOL]|>\ncommand:「始」system:echo「末」\n<|[END_TOOL]|>")
///     .caller(Caller::Cli);
/// assert_eq!(req.options.caller, Caller::Cli);
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Request {
    /// The body or the calls.
    pub input: Input,
    /// Caller, deadline, cancel token, format, warnings policy.
    pub options: CallOptions,
}

impl Request {
    /// A body to read (see [`Input::Text`]), with default options.
    pub fn text(body: impl Into<String>) -> Self {
        Request {
            input: Input::Text(body.into()),
            options: CallOptions::new(),
        }
    }

    /// Calls already read, with default options.
    pub fn parsed(parsed: Parsed) -> Self {
        Request {
            input: Input::Parsed(parsed),
            options: CallOptions::new(),
        }
    }

    /// Replaces the options.
    pub fn options(mut self, options: CallOptions) -> Self {
        self.options = options;
        self
    }

    /// Sets the caller.
    pub fn caller(mut self, caller: Caller) -> Self {
        self.options.caller = caller;
        self
    }

    /// Sets the format the body is read in.
    pub fn format(mut self, format: Format) -> Self {
        self.options.format = format;
        self
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

/// The one run function: reads the input (if it is text), dispatches VCP calls, refuses
/// everything when warnings must refuse, then runs the calls in order against the
/// request's inventory (else `tools`) with its caller, deadline, cancel token and
/// observer. Chains stop as their `on_error` says. Runs where it is awaited.
pub async fn run(tools: Arc<ToolManager>, req: Request) -> CallReport {
    let mut opts = req.options;
    // A way in that started the clock already (`submit`) left no timeout to turn.
    opts.start_clock(Instant::now());
    let tools = opts.inventory.unwrap_or(tools);
    let mut parsed = match req.input {
        Input::Text(body) => input::read(&body, opts.format),
        Input::Parsed(p) => p,
    };
    // VCP dispatch first, so `parsed.calls` pairs one-to-one with the outcomes.
    parsed.calls = tools.resolve_vcp(std::mem::take(&mut parsed.calls));
    if opts.refuse_on_warnings {
        let warnings: Vec<&str> = parsed
            .diagnostics
            .iter()
            .filter(|d| d.severity == Severity::Warning)
            .map(|d| d.message.as_str())
            .collect();
        if !warnings.is_empty() {
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
                    warnings: Vec::new(),
                })
                .collect();
            return CallReport { parsed, outcomes };
        }
    }
    let inv = Invocation::new(opts.caller)
        .cancel(opts.cancel.map(|c| c.0).unwrap_or_default())
        .deadline(opts.deadline)
        .observer(opts.observer);
    let outcomes = tools.execute(&parsed.calls, inv).await;
    CallReport { parsed, outcomes }
}

thread_local! {
    /// Whether this thread is a blocking-pool thread driving one request (`spawn_request`).
    static DRIVING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Marks this thread as driving a request while it lives.
struct Driving(bool);

impl Driving {
    fn enter() -> Self {
        Driving(DRIVING.with(|d| d.replace(true)))
    }
}

impl Drop for Driving {
    fn drop(&mut self) {
        let was = self.0;
        DRIVING.with(|d| d.set(was));
    }
}

/// Whether this thread is a blocking-pool thread driving a request's calls, one after
/// another: a sync host tool may run right here (it may block; no second hop).
pub(crate) fn driving_request() -> bool {
    DRIVING.with(|d| d.get())
}

/// Runs `req` off the calling thread and hands its report to `done` (on whichever thread
/// finished it). `done` is called exactly once, also when the run panicked.
///
/// On a multi-thread runtime the request is driven on one of the runtime's blocking
/// threads with `Handle::block_on`: a script it reaches runs right there (there is no
/// worker for `block_in_place` to hand over) and its end needs no second task. That is two
/// or three thread wake-ups fewer per submission than spawning it on a worker; on a small
/// VM each costs 10–30 µs (`embed/main_thread_tool_from_lua` in BENCHMARKS.md). The price:
/// a submission in flight holds one blocking thread (512 at most by default; more wait
/// their turn). Elsewhere (a current-thread runtime) it is a task, reported by a second one.
pub(crate) fn spawn_request(
    handle: &tokio::runtime::Handle,
    tools: Arc<ToolManager>,
    req: Request,
    done: impl FnOnce(Result<CallReport, EmbedError>) + Send + 'static,
) {
    let mut req = req;
    // The timeout counts from the submission, time waiting for a thread included.
    req.options.start_clock(Instant::now());
    let fut = run(tools, req);
    if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread {
        let h = handle.clone();
        handle.spawn_blocking(move || {
            let r = crate::tools::contain(|| {
                let _driving = Driving::enter();
                h.block_on(fut)
            })
            .map_err(|m| EmbedError::Lost(format!("the calls panicked: {m}")));
            done(r);
        });
        return;
    }
    let task = handle.spawn(crate::tools::Quietly(fut));
    // A second task reports the first one's end, also when it panicked.
    handle.spawn(async move {
        done(task.await.map_err(|e| EmbedError::Lost(e.to_string())));
    });
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
        self.run(Request::text(text).options(opts)).await
    }

    /// Runs `req` on the engine's runtime ([`Engine::call`] for any [`Request`]). The
    /// future can be awaited under any executor; dropping it fires the calls' cancel token.
    pub async fn run(&self, req: Request) -> Result<CallReport, EmbedError> {
        let Request {
            input,
            options: mut opts,
        } = req;
        opts.start_clock(Instant::now());
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
            return Ok(run(
                self.tools().clone(),
                Request {
                    input,
                    options: opts,
                },
            )
            .await);
        }
        let task = handle.spawn(run(
            self.tools().clone(),
            Request {
                input,
                options: opts,
            },
        ));
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
        self.run_blocking(Request::text(text).options(opts))
    }

    /// [`Engine::run`] for a caller with no async runtime ([`Engine::call_blocking`] for
    /// any [`Request`]).
    pub fn run_blocking(&self, req: Request) -> Result<CallReport, EmbedError> {
        let handle = self
            .tools()
            .runtime_handle()
            .map_err(|e| EmbedError::Runtime(e.to_string()))?;
        let (tx, rx) = mpsc::sync_channel(1);
        let serve = self.pump.has_main_thread_tools();
        let wake = self.pump.notifier();
        spawn_request(&handle, self.tools().clone(), req, move |r| {
            let _ = tx.send(r);
            if serve {
                wake.wake();
            }
        });
        let lost = || EmbedError::Lost("the task running the calls stopped".into());
        // With main-thread tools, this thread may own some the calls reach: run their
        // parked calls while waiting (no pump can come while this thread blocks here).
        let wait = move || {
            if serve {
                self.pump.wait_serving(&rx).ok_or_else(lost)?
            } else {
                rx.recv().map_err(|_| lost())?
            }
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
}
