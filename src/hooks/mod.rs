//! Hooks: script and host callbacks around the ToolManager and the workflow runner, and
//! overrides that replace or wrap a tool (seed 001 §7.2–7.3).
//!
//! - **Points** are a table ([`points::POINTS`]); firing a point with no handlers costs one
//!   atomic load ([`Hooks::active`]) before any event is built.
//! - **Handlers** run by priority (higher first), then registration order, over a snapshot of
//!   the list taken when the point fires (a handler added or removed while it fires takes
//!   effect next time). `once` handlers run a single time; `id` names a handler so that
//!   registering the same owner and id again replaces it.
//! - **The contract** ([`HookReturn`]): nothing lets the work go on; `false` or `{veto = why}`
//!   stops a `before` point (the caller gets [`ToolError::Vetoed`]); a table of fields
//!   replaces those fields (`args`, `result`, `inputs`, `outputs`, see
//!   [`points::PointSpec::replaceable`]). A handler that fails vetoes a `before` point (the
//!   reason names its owner) and is skipped, with a warning, at an `after` point.
//! - **Nesting**: a handler runs with the depth of the call it observes and its own tool calls
//!   go one level deeper; a point fired more than [`MAX_HOOK_DEPTH`] calls deep is cut off.

mod audit;
pub(crate) mod event;
mod fire;
mod overrides;
pub mod points;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;

use serde_json::{Map, Value};

pub use audit::{AuditRecord, AuditSink, AuditTap};
pub(crate) use fire::{fire_blocking, take_map};
pub use overrides::{Next, OverrideHandler, OverrideInfo};
pub use points::{point, PointSpec, POINTS};

use crate::tools::{CallContext, ToolError};

/// Tool-call depth past which hook points are cut off (a handler that triggers its own
/// point through a tool call ends here with a clear error instead of looping).
pub const MAX_HOOK_DEPTH: u32 = 8;

/// What a handler asked for.
#[derive(Debug, Clone, PartialEq)]
pub enum HookReturn {
    /// Go on unchanged.
    Continue,
    /// Stop the work (only at a `before` point), with a reason.
    Veto(String),
    /// Replace these event fields.
    Replace(Map<String, Value>),
}

impl HookReturn {
    /// Reads a script's return value: `nil`/`true` go on, `false` vetoes, a table with
    /// `veto` vetoes with that reason, any other table replaces fields.
    pub fn from_value(v: Value) -> Self {
        match v {
            Value::Bool(false) => HookReturn::Veto(String::new()),
            Value::Object(mut m) => match m.remove("veto") {
                Some(Value::String(s)) => HookReturn::Veto(s),
                Some(Value::Bool(false)) | Some(Value::Null) if m.is_empty() => {
                    HookReturn::Continue
                }
                Some(Value::Bool(false)) | Some(Value::Null) => HookReturn::Replace(m),
                Some(other) => HookReturn::Veto(match other {
                    Value::Bool(true) => String::new(),
                    o => o.to_string(),
                }),
                None if m.is_empty() => HookReturn::Continue,
                None => HookReturn::Replace(m),
            },
            _ => HookReturn::Continue,
        }
    }
}

/// The future a handler returns: what it asked for, or why it failed.
pub type HookFuture = Pin<Box<dyn Future<Output = Result<HookReturn, HookError>> + Send>>;

/// A hook handler (a Lua or Rhai function, or a Rust closure).
pub trait HookHandler: Send + Sync + 'static {
    /// Handles one event. `ctx.tool_id` is the point's subject (tool or workflow id);
    /// tool calls the handler makes go through `ctx` one level deeper.
    fn call(&self, point: &'static str, event: Value, ctx: CallContext) -> HookFuture;

    /// Handles one event to the end on this thread, reading it in place, when the handler
    /// can (sync closures; script handlers except on a current-thread runtime, whose only
    /// thread they must not hold). `None`: the point awaits [`HookHandler::call`] instead.
    /// The default is `None`.
    fn call_now(
        &self,
        point: &'static str,
        event: &Value,
        ctx: &CallContext,
    ) -> Option<Result<HookReturn, HookError>> {
        let _ = (point, event, ctx);
        None
    }

    /// Whether [`HookHandler::call_now`] would handle an event on this thread now (it must
    /// then return `Some`). A point whose handlers all run in place can be fired without a
    /// future around the work it guards. The default is `false`.
    fn in_place(&self) -> bool {
        false
    }

    /// [`HookHandler::call_now`] right after [`HookHandler::in_place`] said yes on this
    /// thread (nothing ran in between): a handler whose check costs something may skip it.
    /// The default is `call_now`.
    fn call_in_place(
        &self,
        point: &'static str,
        event: &Value,
        ctx: &CallContext,
    ) -> Option<Result<HookReturn, HookError>> {
        self.call_now(point, event, ctx)
    }
}

struct SyncHook<F>(F);

impl<F> HookHandler for SyncHook<F>
where
    F: Fn(&str, &Value) -> HookReturn + Send + Sync + 'static,
{
    fn call(&self, point: &'static str, event: Value, _ctx: CallContext) -> HookFuture {
        let r = (self.0)(point, &event);
        Box::pin(std::future::ready(Ok(r)))
    }

    fn call_now(
        &self,
        point: &'static str,
        event: &Value,
        _ctx: &CallContext,
    ) -> Option<Result<HookReturn, HookError>> {
        Some(Ok((self.0)(point, event)))
    }

    fn in_place(&self) -> bool {
        true
    }
}

struct AsyncHook<F>(F);

impl<F, Fut> HookHandler for AsyncHook<F>
where
    F: Fn(&'static str, Value, CallContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<HookReturn, HookError>> + Send + 'static,
{
    fn call(&self, point: &'static str, event: Value, ctx: CallContext) -> HookFuture {
        Box::pin((self.0)(point, event, ctx))
    }
}

/// Options of [`Hooks::on`].
#[derive(Debug, Clone, Default)]
pub struct HookOptions {
    /// Higher runs first (default 0); equal priorities run in registration order.
    pub priority: i64,
    /// Run a single time, then drop the handler.
    pub once: bool,
    /// A name: registering the same owner and id again replaces the handler.
    pub id: Option<String>,
}

/// What [`Hooks::on`] returns; give it to [`Hooks::off`] to remove the handler.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct HookHandle(pub u64);

/// What went wrong with a hook: a handler that could not be registered, or one that failed
/// while it handled an event (what a [`HookHandler`] or an async host hook returns as its
/// error; a failure at a `before` point refuses the work, at an `after` point it is logged
/// and skipped). A host hook may return any text as [`HookError::Failed`] (`Err(msg.into())`
/// from a `String` or `&str`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HookError {
    /// No such point.
    #[error("unknown hook point '{0}' (points: {points})", points = points::names())]
    UnknownPoint(String),
    /// The owner did not declare the point in `permissions.hooks`.
    #[error(
        "plugin '{owner}' may not hook '{point}': add it to `permissions.hooks` in plugin.yaml"
    )]
    NotPermitted {
        /// The plugin or script.
        owner: String,
        /// The point.
        point: String,
    },
    /// A handler failed, saying why (a host hook's own message, a script's error).
    #[error("{0}")]
    Failed(String),
    /// A handler replaced `inputs` or `outputs` with something that is not an object of
    /// named values (the event keeps what it had).
    #[error("it replaced '{field}' with {value}, which is not an object of named values")]
    NotAnObject {
        /// The field (`inputs`, `outputs`).
        field: String,
        /// What it was given, as JSON.
        value: String,
    },
    /// A script handler ran past one of its limits (instructions, memory …).
    #[error("the {point} handler exceeded the {limit} limit: {message}")]
    LimitExceeded {
        /// The point.
        point: String,
        /// The limit.
        limit: String,
        /// What happened.
        message: String,
    },
    /// A script handler ran past its time limit.
    #[error("the {point} handler ran past its {after_ms} ms limit")]
    Timeout {
        /// The point.
        point: String,
        /// The limit, in milliseconds.
        after_ms: u64,
    },
}

impl From<String> for HookError {
    fn from(message: String) -> Self {
        HookError::Failed(message)
    }
}

impl From<&str> for HookError {
    fn from(message: &str) -> Self {
        HookError::Failed(message.to_string())
    }
}

/// One registered handler, as listings show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookInfo {
    /// The point.
    pub point: &'static str,
    /// Who registered it (`plugin:<name>`, `script:<name>`, `host`).
    pub owner: String,
    /// Its id, if it has one.
    pub id: Option<String>,
    /// Its priority.
    pub priority: i64,
    /// Its handle.
    pub handle: HookHandle,
}

struct Entry {
    handle: u64,
    owner: String,
    id: Option<String>,
    priority: i64,
    once: bool,
    spent: AtomicBool,
    handler: Arc<dyn HookHandler>,
}

/// A snapshot of one point's handlers, taken by [`Hooks::handlers`] or
/// [`Hooks::handlers_in_place`] and fired by [`Hooks::fire_over`].
pub(crate) struct Handlers(Snapshot);

/// A point's list: borrowed from the registry (no reference count touched) when every
/// handler said it runs in place on this thread, so firing finishes in one poll; owned
/// otherwise, since firing may wait (a borrow must not be held across an await: the
/// per-thread slots it uses are few).
enum Snapshot {
    InPlace(arc_swap::Guard<Arc<Vec<Arc<Entry>>>>),
    Owned(Arc<Vec<Arc<Entry>>>),
}

impl Handlers {
    /// Whether every handler runs in place ([`Hooks::handlers_in_place`]).
    fn in_place(&self) -> bool {
        matches!(self.0, Snapshot::InPlace(_))
    }

    fn list(&self) -> &[Arc<Entry>] {
        match &self.0 {
            Snapshot::InPlace(g) => g,
            Snapshot::Owned(a) => a,
        }
    }
}

/// The engine's hook registry and override stacks. Installed in the engine's ToolManager
/// as its [`crate::tools::Interceptor`] (which fires the tool points), and handed to what
/// fires other points or registers handlers: workflow runs (`RunOptions::hooks`), the
/// plugin loader and scripts (`ScriptEnv::hooks`), the agent runtime, the engine's build.
pub struct Hooks {
    /// Handler lists by point index (the order of [`POINTS`]); writers replace whole lists,
    /// so firing a point reads its list without a lock.
    lists: Vec<ArcSwap<Vec<Arc<Entry>>>>,
    /// Held by a writer from reading a list to storing its new one.
    write: Mutex<()>,
    /// Handlers per point (same index): [`Hooks::active`] is two atomic loads, no lock.
    counts: Vec<AtomicUsize>,
    /// Handlers registered over all points: the hot path's "nothing to do" check.
    count: AtomicUsize,
    next: AtomicU64,
    overrides: overrides::Overrides,
    audit: audit::Audit,
}

impl std::fmt::Debug for Hooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hooks")
            .field("handlers", &self.count.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl Default for Hooks {
    fn default() -> Self {
        Hooks {
            lists: POINTS
                .iter()
                .map(|_| ArcSwap::from_pointee(Vec::new()))
                .collect(),
            write: Mutex::new(()),
            counts: POINTS.iter().map(|_| AtomicUsize::new(0)).collect(),
            count: AtomicUsize::new(0),
            next: AtomicU64::new(0),
            overrides: Default::default(),
            audit: Default::default(),
        }
    }
}

impl Hooks {
    /// An empty registry.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    fn writer(&self) -> std::sync::MutexGuard<'_, ()> {
        // Writers replace whole lists, so a poisoned lock still guards consistent ones.
        self.write.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Publishes the handler counts after a write (called by the writer).
    fn recount(&self) {
        let mut total = 0;
        for (c, l) in self.counts.iter().zip(&self.lists) {
            let n = l.load().len();
            c.store(n, Ordering::Release);
            total += n;
        }
        self.count.store(total, Ordering::Release);
    }

    /// Registers `handler` for `point` (bare or `hook:client:` form) on behalf of `owner`.
    /// Permission checks are the caller's (see [`crate::script::Permissions::may_hook`]).
    pub fn on(
        &self,
        point: &str,
        owner: &str,
        opts: HookOptions,
        handler: Arc<dyn HookHandler>,
    ) -> Result<HookHandle, HookError> {
        let spec = points::point(point).ok_or_else(|| HookError::UnknownPoint(point.into()))?;
        let handle = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        let entry = Arc::new(Entry {
            handle,
            owner: owner.to_string(),
            id: opts.id,
            priority: opts.priority,
            once: opts.once,
            spent: AtomicBool::new(false),
            handler,
        });
        let ix = points::index(spec.name).unwrap_or_default();
        let _writer = self.writer();
        let Some(slot) = self.lists.get(ix) else {
            return Err(HookError::UnknownPoint(point.to_string()));
        };
        let mut list: Vec<Arc<Entry>> = slot.load().to_vec();
        if let Some(id) = &entry.id {
            list.retain(|e| !(e.owner == entry.owner && e.id.as_deref() == Some(id)));
        }
        // Stable: equal priorities keep registration order.
        let at = list
            .iter()
            .position(|e| e.priority < entry.priority)
            .unwrap_or(list.len());
        list.insert(at, entry);
        slot.store(Arc::new(list));
        self.recount();
        Ok(HookHandle(handle))
    }

    /// Registers a synchronous Rust closure.
    pub fn on_fn<F>(&self, point: &str, opts: HookOptions, f: F) -> Result<HookHandle, HookError>
    where
        F: Fn(&str, &Value) -> HookReturn + Send + Sync + 'static,
    {
        self.on(point, "host", opts, Arc::new(SyncHook(f)))
    }

    /// Refuses all work on behalf of `owner`, whose guard could not be set up (a hook
    /// script that failed to load): a handler vetoing with `reason` at every point that may
    /// veto. A reload that loads the script builds a new registry without it.
    pub fn refuse_all(&self, owner: &str, reason: &str) {
        for p in points::POINTS.iter().filter(|p| p.before) {
            let why = reason.to_string();
            let veto = move |_: &str, _: &Value| HookReturn::Veto(why.clone());
            let opts = HookOptions {
                // Before every other handler: nothing may run on a broken guard's watch.
                priority: i64::MAX,
                ..HookOptions::default()
            };
            // Every row's own name is a point `on` knows.
            let _ = self.on(p.name, owner, opts, Arc::new(SyncHook(veto)));
        }
    }

    /// Registers an async Rust closure.
    pub fn on_async<F, Fut>(
        &self,
        point: &str,
        opts: HookOptions,
        f: F,
    ) -> Result<HookHandle, HookError>
    where
        F: Fn(&'static str, Value, CallContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<HookReturn, HookError>> + Send + 'static,
    {
        self.on(point, "host", opts, Arc::new(AsyncHook(f)))
    }

    /// Removes a handler; returns whether it was registered.
    pub fn off(&self, handle: HookHandle) -> bool {
        self.remove_where(|e| e.handle == handle.0) > 0
    }

    /// Removes every handler of `owner` (a plugin being unloaded); returns how many.
    pub fn off_owner(&self, owner: &str) -> usize {
        self.remove_where(|e| e.owner == owner)
    }

    fn remove_where(&self, pred: impl Fn(&Entry) -> bool) -> usize {
        let _writer = self.writer();
        let mut removed = 0;
        for slot in &self.lists {
            let list = slot.load();
            if list.iter().any(|e| pred(e)) {
                let kept: Vec<Arc<Entry>> = list.iter().filter(|e| !pred(e)).cloned().collect();
                removed += list.len() - kept.len();
                slot.store(Arc::new(kept));
            }
        }
        self.recount();
        removed
    }

    /// Whether `point` has handlers. One atomic load when no handler is registered at all,
    /// two otherwise (no lock).
    #[inline]
    pub fn active(&self, point: &str) -> bool {
        self.count.load(Ordering::Acquire) != 0
            && points::index(point).is_some_and(|i| self.active_at(i))
    }

    /// [`Hooks::active`] by point index.
    #[inline]
    pub(crate) fn active_at(&self, ix: usize) -> bool {
        self.counts
            .get(ix)
            .is_some_and(|c| c.load(Ordering::Acquire) != 0)
    }

    /// Every registered handler, by point then running order.
    pub fn list(&self) -> Vec<HookInfo> {
        let mut out = Vec::new();
        for (p, l) in POINTS.iter().zip(&self.lists) {
            for e in l.load().iter() {
                out.push(HookInfo {
                    point: p.name,
                    owner: e.owner.clone(),
                    id: e.id.clone(),
                    priority: e.priority,
                    handle: HookHandle(e.handle),
                });
            }
        }
        out
    }

    /// The handlers of point `ix` as they stand now (the snapshot a firing runs over).
    pub(crate) fn handlers(&self, ix: usize) -> Option<Handlers> {
        self.lists
            .get(ix)
            .map(|l| Handlers(Snapshot::Owned(l.load_full())))
    }

    /// [`Hooks::handlers`] when every one runs in place now ([`HookHandler::in_place`]):
    /// firing them then finishes in one poll (each through [`HookHandler::call_in_place`]),
    /// over a list borrowed from the registry. `None` when one would have to be awaited.
    pub(crate) fn handlers_in_place(&self, ix: usize) -> Option<Handlers> {
        let list = self.lists.get(ix)?.load();
        list.iter()
            .all(|e| e.handler.in_place())
            .then(|| Handlers(Snapshot::InPlace(list)))
    }

    /// Writes audit records (JSON lines) to `sink` from now on.
    pub fn set_audit(&self, sink: AuditSink) {
        self.audit.set(sink);
    }

    /// Hands every audit record from now on to `tap` too (beside the `--audit` file).
    pub fn add_audit_tap(&self, tap: Arc<dyn AuditTap>) {
        self.audit.add_tap(tap);
    }
}

/// The veto a failing or vetoing `before` handler turns into, as a tool error.
pub(crate) fn vetoed(subject: &str, reason: String) -> ToolError {
    ToolError::Vetoed {
        tool: subject.to_string(),
        reason,
    }
}
