//! Where host tools run.
//!
//! - **Sync host tools** (closures given to [`EngineBuilder::host_tool`](crate::EngineBuilder::host_tool),
//!   C callbacks): where blocking is allowed, with at most one hop. Called from model text
//!   (`submit`, `call_blocking`), on the blocking-pool thread that already drives that
//!   request; called from a mod's script (`api.tools.call`), inline on the script's
//!   thread, with the mod's Lua state given up while it runs (the call yields as a
//!   coroutine; see `script::lua`), so other calls to the mod are served meanwhile. Only
//!   where the script cannot yield (inside its own coroutines, below a Rust function such
//!   as a `string.gsub` callback, in a hook handler, or a nested call into a mod already
//!   running on this thread) does the tool run holding the state. A Rhai mod keeps no state between calls:
//!   its calls run side by side, and a tool it calls holds nothing;
//!   from anywhere else (an async `call` on a runtime worker), on the runtime's blocking
//!   pool (`spawn_blocking`), so a slow one never holds a worker other calls need.
//! - **Async host tools** ([`EngineBuilder::host_tool_async`](crate::EngineBuilder::host_tool_async)):
//!   as futures on the engine's runtime; they must not block.
//! - **Main-thread host tools** ([`EngineBuilder::main_thread_tool`](crate::EngineBuilder::main_thread_tool)
//!   and its `_on` / `_send` forms): only inside [`Engine::pump`](crate::Engine::pump) (or a
//!   blocking call waiting) on their thread. A call is parked in the engine's pump queue
//!   until then; one that waits a second is logged once, and it ends at its deadline.

use std::cell::RefCell;
use std::mem::ManuallyDrop;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::thread::ThreadId;
use std::time::Duration;

use serde_json::Value;

use super::pump::PumpShared;
use crate::tools::{CallContext, ToolError, ToolFuture, ToolHandler};

/// A sync host tool's closure.
type SyncHostFn = dyn Fn(&CallContext, Value) -> Result<Value, ToolError> + Send + Sync;

/// A sync host tool: runs on the blocking pool (see the module notes).
struct BlockingFn(Arc<SyncHostFn>);

impl ToolHandler for BlockingFn {
    fn invoke(&self, ctx: CallContext, args: Value) -> ToolFuture {
        // A script's thread is already one that may block (a dedicated thread, or a worker
        // that left the runtime through `block_in_place`), and so is the blocking-pool
        // thread that drives a submitted or blocking call's requests one by one: no hop.
        if crate::script::in_script_thread() || super::run::driving_request() {
            return Box::pin(std::future::ready((self.0)(&ctx, args)));
        }
        let handle = tokio::runtime::Handle::try_current()
            .ok()
            .or_else(|| ctx.manager.runtime_handle().ok());
        let Some(handle) = handle else {
            // No runtime can be had (no thread could start): run where we are.
            return Box::pin(std::future::ready((self.0)(&ctx, args)));
        };
        let f = self.0.clone();
        let tool = ctx.tool_id.clone();
        // A panic is contained where the task is joined (below): quietly.
        let task = handle.spawn_blocking(move || crate::tools::quiet(|| f(&ctx, args)));
        Box::pin(async move {
            match task.await {
                Ok(r) => r,
                // Unwound again here, where the manager's `catch_unwind` turns it into
                // `ToolError::Panicked` with the closure's message.
                Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                Err(_) => Err(ToolError::Cancelled {
                    tool: tool.to_string(),
                }),
            }
        })
    }

    fn is_blocking(&self) -> bool {
        true
    }
}

/// A handler for a sync host tool: it runs on the blocking pool, so a slow one never
/// delays another call. Used for every sync closure and C callback a host registers.
pub fn blocking_handler<F>(f: F) -> Arc<dyn ToolHandler>
where
    F: Fn(&CallContext, Value) -> Result<Value, ToolError> + Send + Sync + 'static,
{
    Arc::new(BlockingFn(Arc::new(f)))
}

/// A value that only one thread may touch. It may be moved to and dropped on other threads
/// (so the engine holding it stays `Send + Sync`), but [`ThreadBound::get`] gives it only to
/// its owner, and dropped elsewhere it is leaked rather than dropped on the wrong thread.
pub(crate) struct ThreadBound<T> {
    owner: ThreadId,
    value: ManuallyDrop<T>,
}

// SAFETY: the value is reached only through `get`, which checks that the caller is the
// owning thread, and is dropped only on that thread (elsewhere it is leaked); moving its
// bytes between threads without touching them is sound for any `T`.
unsafe impl<T> Send for ThreadBound<T> {}
// SAFETY: as above: a shared `ThreadBound` hands `&T` to the owning thread only, so no two
// threads ever hold a reference to the value.
unsafe impl<T> Sync for ThreadBound<T> {}

impl<T> ThreadBound<T> {
    pub(crate) fn new(owner: ThreadId, value: T) -> Self {
        ThreadBound {
            owner,
            value: ManuallyDrop::new(value),
        }
    }

    /// The value, on the owning thread only.
    pub(crate) fn get(&self) -> Option<&T> {
        (std::thread::current().id() == self.owner).then_some(&*self.value)
    }
}

impl<T> Drop for ThreadBound<T> {
    fn drop(&mut self) {
        if std::thread::current().id() == self.owner {
            // SAFETY: dropped once, here, on the owning thread; never touched again.
            unsafe { ManuallyDrop::drop(&mut self.value) }
        }
        // Elsewhere the value is leaked: its destructor may only run on its owner.
    }
}

/// A main-thread tool's handler, as the host wrote it (need not be `Send`).
pub(crate) type MainFn = dyn FnMut(&CallContext, Value) -> Result<Value, ToolError>;

/// A main-thread tool's handler that may move between threads.
pub(crate) type SendMainFn = dyn FnMut(&CallContext, Value) -> Result<Value, ToolError> + Send;

/// A main-thread tool's handler and the thread whose pumps run it.
pub(crate) enum BoundMainFn {
    /// Bound to one thread (the one that registered a non-`Send` handler, or the one named
    /// with `main_thread_tool_on`).
    Thread(ThreadBound<RefCell<Box<MainFn>>>),
    /// Run on the engine's pump thread: the one named with
    /// [`EngineBuilder::pump_thread`](crate::EngineBuilder::pump_thread), else the first
    /// thread that pumps.
    Pumper(std::sync::Mutex<Box<SendMainFn>>),
}

/// Binds a handler to `owner` (the thread whose pumps run it).
pub(crate) fn bind(owner: ThreadId, f: Box<MainFn>) -> BoundMainFn {
    BoundMainFn::Thread(ThreadBound::new(owner, RefCell::new(f)))
}

/// A handler run by the engine's pump thread, whichever that is.
pub(crate) fn on_pumper(f: Box<SendMainFn>) -> BoundMainFn {
    BoundMainFn::Pumper(std::sync::Mutex::new(f))
}

/// A main-thread tool: the handler (bound to its thread) and the pump that runs it.
pub(crate) struct MainThreadTool {
    f: BoundMainFn,
    pump: Weak<PumpShared>,
    /// Whether a call waiting for a pump that does not come was logged (once per tool).
    stranded_logged: AtomicBool,
}

/// How long a parked call waits before the engine logs that no pump runs it.
const STRANDED_AFTER: Duration = Duration::from_secs(1);

impl MainThreadTool {
    pub(crate) fn new(f: BoundMainFn, pump: &Arc<PumpShared>) -> Arc<Self> {
        pump.main_tool_added();
        Arc::new(MainThreadTool {
            f,
            pump: Arc::downgrade(pump),
            stranded_logged: AtomicBool::new(false),
        })
    }

    /// Whether this thread is the one whose pumps run the handler.
    fn on_its_thread(&self) -> bool {
        match &self.f {
            BoundMainFn::Thread(b) => b.get().is_some(),
            BoundMainFn::Pumper(_) => self
                .pump
                .upgrade()
                .is_some_and(|p| p.pump_thread() == Some(std::thread::current().id())),
        }
    }

    /// The thread whose pumps run the handler, for messages.
    fn owner_text(&self) -> String {
        match &self.f {
            BoundMainFn::Thread(b) => {
                format!("thread {:?} (the one it was registered for)", b.owner)
            }
            BoundMainFn::Pumper(_) => match self.pump.upgrade().and_then(|p| p.pump_thread()) {
                Some(t) => format!("the engine's pump thread {t:?}"),
                None => "the engine's pump thread (no thread has pumped yet)".to_string(),
            },
        }
    }

    /// Runs the handler now, on its thread; `None` off its thread or while it runs already
    /// (a handler that pumps again), when the call stays queued.
    pub(crate) fn run(&self, ctx: &CallContext, args: Value) -> Option<Result<Value, ToolError>> {
        if !self.on_its_thread() {
            return None;
        }
        let out = match &self.f {
            BoundMainFn::Thread(b) => {
                let cell = b.get()?;
                let mut f = cell.try_borrow_mut().ok()?;
                crate::tools::contain(|| f(ctx, args))
            }
            BoundMainFn::Pumper(m) => {
                let mut f = m.try_lock().ok()?;
                crate::tools::contain(|| f(ctx, args))
            }
        };
        Some(out.unwrap_or_else(|message| {
            ctx.manager.log().emit(
                crate::tools::LogLevel::Error,
                &format!("tool:{}", ctx.tool_id),
                &format!("main-thread tool panicked: {message}"),
            );
            Err(ToolError::Panicked {
                tool: ctx.tool_id.to_string(),
                message,
            })
        }))
    }

    /// Whether the handler can run now on this thread (its thread, not running already).
    pub(crate) fn ready_here(&self) -> bool {
        self.on_its_thread()
            && match &self.f {
                BoundMainFn::Thread(b) => b.get().is_some_and(|c| c.try_borrow_mut().is_ok()),
                BoundMainFn::Pumper(m) => m.try_lock().is_ok(),
            }
    }

    /// Logs, once per tool, that a call has waited [`STRANDED_AFTER`] for a pump on the
    /// tool's thread.
    fn log_stranded(
        &self,
        ctx_log: &crate::tools::LogSink,
        tool: &str,
        deadline: Option<std::time::Instant>,
    ) {
        if self.stranded_logged.swap(true, Ordering::AcqRel) {
            return;
        }
        let pumped = match self.pump.upgrade().and_then(|p| p.last_pumper()) {
            Some(t) => format!("; the engine was last pumped on thread {t:?}"),
            None => "; the engine has not been pumped yet".to_string(),
        };
        let ends = if deadline.is_some() {
            "it ends at its deadline"
        } else {
            "it has no deadline and waits until cancelled"
        };
        ctx_log.warn(
            &format!("tool:{tool}"),
            &format!(
                "a call to main-thread tool '{tool}' has waited {} ms for a pump on {}{pumped}; {ends}. \
                 Pump on that thread, or register the tool with `main_thread_tool_send` (run by whichever \
                 thread pumps) or `main_thread_tool_on` (a thread you name)",
                STRANDED_AFTER.as_millis(),
                self.owner_text(),
            ),
        );
    }
}

/// The handler the ToolManager holds for a main-thread tool: parks the call in the pump
/// queue and waits for a pump on the tool's thread to run it (or the call's cancel token or
/// deadline, or the engine going away).
pub(crate) struct Parked(pub(crate) Arc<MainThreadTool>);

impl ToolHandler for Parked {
    fn invoke(&self, ctx: CallContext, args: Value) -> ToolFuture {
        let tool = ctx.tool_id.to_string();
        let tool_for_log = tool.clone();
        let Some(pump) = self.0.pump.upgrade() else {
            return Box::pin(std::future::ready(Err(ToolError::failed(
                &tool,
                "the engine that runs this main-thread tool is gone",
            ))));
        };
        let cancel = ctx.cancel.clone();
        let deadline = ctx.deadline;
        let manager = ctx.manager.clone();
        let started = std::time::Instant::now();
        let main = self.0.clone();
        let rx = pump.park(self.0.clone(), ctx, args);
        drop(pump);
        Box::pin(async move {
            let sleep = async {
                match deadline {
                    Some(d) => tokio::time::sleep_until(d.into()).await,
                    None => std::future::pending().await,
                }
            };
            // Waiting long for a pump: say so once (a thread that never pumps strands the
            // call until its deadline), then keep waiting.
            let rx = async {
                tokio::pin!(rx);
                tokio::select! {
                    r = &mut rx => return r,
                    _ = tokio::time::sleep(STRANDED_AFTER) => {}
                }
                main.log_stranded(manager.log(), &tool_for_log, deadline);
                rx.await
            };
            // Cancel first: a caller that gave up hears so even if a pump ran the call meanwhile.
            tokio::select! {
                biased;
                _ = cancel.cancelled() => Err(ToolError::Cancelled { tool }),
                r = rx => r.unwrap_or_else(|_| Err(ToolError::failed(
                    &tool,
                    "the engine was dropped before a pump ran this main-thread tool",
                ))),
                _ = sleep => Err(ToolError::Timeout {
                    tool,
                    after_ms: started.elapsed().as_millis() as u64,
                    at: None,
                }),
            }
        })
    }
}
