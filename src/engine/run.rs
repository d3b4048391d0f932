//! Where the one run path ([`crate::request::run`]) runs: `call`, `call_blocking`, `run`,
//! `run_blocking` and `submit` place it on the engine's runtime (a small one it owns, or
//! the handle given to [`EngineBuilder::runtime`](crate::EngineBuilder::runtime)), never
//! on the caller's thread, so a host with no tokio runtime, a current-thread runtime or
//! another executor gets the same results and nothing panics for lack of a reactor.

use std::sync::{mpsc, Arc};
use std::time::Instant;

use tokio_util::sync::CancellationToken;

use super::{run, CallOptions, CallReport, CancelToken, Request};
use crate::tools::ToolManager;
use crate::Engine;

/// Why an embedding entry point could not run the calls at all (a call that ran and failed
/// is an `Err` in its [`CallOutcome`](crate::CallOutcome) instead).
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
            .map_or_else(CancellationToken::new, |c| c.token().child_token());
        let opts = CallOptions {
            cancel: Some(CancelToken::from_token(token.clone())),
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
