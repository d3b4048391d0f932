//! Where host tools run.
//!
//! - **Sync host tools** (closures given to [`EngineBuilder::host_tool`](crate::EngineBuilder::host_tool),
//!   C callbacks): on the engine runtime's blocking pool (`spawn_blocking`), so a slow one
//!   holds one blocking thread and never a worker other calls need. Called from a script
//!   (`api.tools.call`), they run inline on the script's thread, which may block already.
//! - **Async host tools** ([`EngineBuilder::host_tool_async`](crate::EngineBuilder::host_tool_async)):
//!   as futures on the engine's runtime; they must not block.
//! - **Main-thread host tools** ([`EngineBuilder::main_thread_tool`](crate::EngineBuilder::main_thread_tool)):
//!   only inside [`Engine::pump`](crate::Engine::pump) (or a blocking call waiting) on the
//!   thread that registered them. A call is parked in the engine's pump queue until then.

use std::cell::RefCell;
use std::mem::ManuallyDrop;
use std::sync::{Arc, Weak};
use std::thread::ThreadId;

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
        // that left the runtime through `block_in_place`): no hop.
        if crate::script::in_script_thread() {
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
        let task = handle.spawn_blocking(move || f(&ctx, args));
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

/// A main-thread tool's handler bound to the thread it runs on.
pub(crate) type BoundMainFn = ThreadBound<RefCell<Box<MainFn>>>;

/// Binds a handler to `owner` (the thread whose pumps run it).
pub(crate) fn bind(owner: ThreadId, f: Box<MainFn>) -> BoundMainFn {
    ThreadBound::new(owner, RefCell::new(f))
}

/// A main-thread tool: the handler (bound to its thread) and the pump that runs it.
pub(crate) struct MainThreadTool {
    pub(crate) f: ThreadBound<RefCell<Box<MainFn>>>,
    pump: Weak<PumpShared>,
}

impl MainThreadTool {
    pub(crate) fn new(f: BoundMainFn, pump: &Arc<PumpShared>) -> Arc<Self> {
        pump.main_tool_added();
        Arc::new(MainThreadTool {
            f,
            pump: Arc::downgrade(pump),
        })
    }

    /// Runs the handler now, on its thread; `None` off its thread or while it runs already
    /// (a handler that pumps again), when the call stays queued.
    pub(crate) fn run(&self, ctx: &CallContext, args: Value) -> Option<Result<Value, ToolError>> {
        let cell = self.f.get()?;
        let mut f = cell.try_borrow_mut().ok()?;
        let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(ctx, args)));
        Some(out.unwrap_or_else(|p| {
            let message = crate::tools::panic_message(p.as_ref());
            ctx.manager.log().warn(
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
        self.f.get().is_some_and(|c| c.try_borrow_mut().is_ok())
    }
}

/// The handler the ToolManager holds for a main-thread tool: parks the call in the pump
/// queue and waits for a pump on the tool's thread to run it (or the call's cancel token or
/// deadline, or the engine going away).
pub(crate) struct Parked(pub(crate) Arc<MainThreadTool>);

impl ToolHandler for Parked {
    fn invoke(&self, ctx: CallContext, args: Value) -> ToolFuture {
        let tool = ctx.tool_id.to_string();
        let Some(pump) = self.0.pump.upgrade() else {
            return Box::pin(std::future::ready(Err(ToolError::failed(
                &tool,
                "the engine that runs this main-thread tool is gone",
            ))));
        };
        let cancel = ctx.cancel.clone();
        let deadline = ctx.deadline;
        let started = std::time::Instant::now();
        let rx = pump.park(self.0.clone(), ctx, args);
        Box::pin(async move {
            let sleep = async {
                match deadline {
                    Some(d) => tokio::time::sleep_until(d.into()).await,
                    None => std::future::pending().await,
                }
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
                }),
            }
        })
    }
}
