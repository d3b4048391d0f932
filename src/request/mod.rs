//! The one run path: a [`Request`] (text or parsed calls, and [`CallOptions`]: caller,
//! deadline, cancel token, observer, format, warnings policy, inventory) goes into [`run`],
//! which returns the one [`CallReport`]. `tavern call`, REST invoke and jobs, MCP
//! `tools/call`, the C ABI, `call` / `call_blocking` / `submit` and the agent loop all
//! build a request and call it, so VCP dispatch, chains and their steps, inventories,
//! hooks and observers happen here and nowhere else.
//!
//! It sits below `agent` (whose loop runs its calls through it) and `engine` (whose
//! `call`, `call_blocking` and `submit` place it on the engine's runtime); it knows only
//! `protocol` and `tools`.
//!
//! - `report.rs`: the [`CallReport`] and the JSON `tavern call` prints.

mod report;

pub use report::{outcome_json, CallReport};

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::protocol::{input, Format, Parsed, Severity};
use crate::tools::{CallOutcome, Caller, Invocation, Observer, ToolError, ToolManager};

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

/// Options for one [`Engine::call`](crate::Engine::call): the format to read, who is
/// calling, a deadline, a cancel token and whether warnings refuse the calls.
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
/// run function (through [`Engine::run`](crate::Engine::run),
/// [`Engine::call`](crate::Engine::call), [`Engine::call_blocking`](crate::Engine::call_blocking),
/// [`Engine::submit_with`](crate::Engine::submit_with) or
/// [`Engine::submit_request`](crate::Engine::submit_request)).
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
