//! `api.hooks` and `api.services` for scripts: handlers registered by Lua or Rhai code are
//! script functions kept under a key (`hook#<n>`, `override#<n>`), run through the same
//! [`ScriptToolHandler`] as tools, so they run under their owner's budgets and off the async
//! executor. Handlers registered while the scripts load wait until the scripts are built.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use serde_json::{json, Value};

use super::host::{in_script_thread, set_thread_handle, ScriptEnv};
use super::plugin::{HookFn, PluginScripts, ScriptToolHandler};
use super::ScriptError;
use crate::hooks::OverrideHandler;
use crate::hooks::{
    HookError, HookFuture, HookHandle, HookHandler, HookOptions, HookReturn, Hooks, Next,
};
use crate::tools::{CallContext, ToolError, ToolFuture, ToolHandler, ToolManager};

/// Reaches the built scripts (set once they are built; `None` once they are dropped).
pub(crate) type Factory = Box<dyn Fn() -> Option<PluginScripts> + Send + Sync>;

enum Kind {
    Hook {
        point: &'static str,
        opts: HookOptions,
    },
    Override {
        tool: String,
    },
}

struct Pending {
    n: u64,
    key: String,
    kind: Kind,
}

#[derive(Default)]
struct State {
    factory: Option<Factory>,
    pending: Vec<Pending>,
    live: HashMap<u64, HookHandle>,
}

/// One plugin's (or power-user script's) hook registrations.
#[derive(Default)]
pub(crate) struct ScriptHooks {
    next: AtomicU64,
    state: Mutex<State>,
    /// Pending `next` continuations of running overrides, by token.
    nexts: Arc<NextTable>,
}

/// Continuations of running overrides, by token.
#[derive(Default)]
struct NextTable {
    next: AtomicU64,
    map: Mutex<HashMap<u64, (Next, CallContext)>>,
}

impl NextTable {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<u64, (Next, CallContext)>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn manager(env: &ScriptEnv) -> Option<Arc<ToolManager>> {
    env.tools.as_ref().and_then(Weak::upgrade)
}

/// The registry the scripts' hooks and overrides go in.
fn registry(env: &ScriptEnv) -> Option<Arc<Hooks>> {
    env.hooks.as_ref().and_then(Weak::upgrade)
}

impl ScriptHooks {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A fresh key number.
    pub fn next_key(&self) -> u64 {
        self.next.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Checks `point` and the permission for it; returns the canonical point name.
    pub fn check_point(
        env: &ScriptEnv,
        api: &str,
        point: &str,
    ) -> Result<&'static str, ScriptError> {
        let spec = crate::hooks::point(point).ok_or_else(|| {
            let bare = point
                .strip_prefix("hook:client:")
                .or_else(|| point.strip_prefix("hook:"))
                .unwrap_or(point);
            let names = crate::hooks::points::POINTS.iter().map(|p| p.name);
            let names: Vec<&str> = names.collect();
            // The suggestion when there is one, else the list to pick from.
            let hint = match crate::suggest::closest(bare, &names) {
                Some(c) => format!(", did you mean '{c}'?"),
                None => format!(" (points: {})", names.join(", ")),
            };
            ScriptError::runtime(format!("{api}: unknown hook point '{point}'{hint}"))
        })?;
        if !env.permissions.may_hook(spec.name) {
            return Err(ScriptError::PermissionDenied {
                permission: format!("hooks: {}", spec.name),
            });
        }
        Ok(spec.name)
    }

    /// Resolves and checks an override target; returns the canonical tool id. A
    /// `plugin:tool` id that is not registered yet (its plugin loads later) is kept as
    /// written; any other unknown id is an error.
    pub fn check_override(env: &ScriptEnv, id: &str) -> Result<String, ScriptError> {
        let canonical = match manager(env).map(|m| m.get(id)) {
            Some(Ok(t)) => t.id().to_string(),
            Some(Err(_)) | None if id.contains(':') => id.to_string(),
            Some(Err(e)) => {
                return Err(ScriptError::runtime(format!("api.services.override: {e}")))
            }
            None => id.to_string(),
        };
        if !env.permissions.may_override(&canonical) {
            return Err(ScriptError::PermissionDenied {
                permission: format!("services.override: {canonical}"),
            });
        }
        Ok(canonical)
    }

    /// Registers a hook whose function is stored under `key`; returns the script's handle.
    pub fn add_hook(
        &self,
        env: &ScriptEnv,
        n: u64,
        key: String,
        point: &'static str,
        opts: HookOptions,
    ) -> Result<u64, ScriptError> {
        self.add(
            env,
            Pending {
                n,
                key,
                kind: Kind::Hook { point, opts },
            },
        )?;
        Ok(n)
    }

    /// Registers an override whose function is stored under `key`.
    pub fn add_override(
        &self,
        env: &ScriptEnv,
        n: u64,
        key: String,
        tool: String,
    ) -> Result<(), ScriptError> {
        self.add(
            env,
            Pending {
                n,
                key,
                kind: Kind::Override { tool },
            },
        )
    }

    fn add(&self, env: &ScriptEnv, p: Pending) -> Result<(), ScriptError> {
        let mut st = self.state();
        match &st.factory {
            None => {
                st.pending.push(p);
                Ok(())
            }
            Some(f) => match f() {
                Some(scripts) => {
                    let State { live, .. } = &mut *st;
                    self.install(env, live, p, &scripts)
                }
                None => Err(ScriptError::runtime(
                    "the plugin's scripts are being unloaded",
                )),
            },
        }
    }

    fn install(
        &self,
        env: &ScriptEnv,
        live: &mut HashMap<u64, HookHandle>,
        p: Pending,
        scripts: &PluginScripts,
    ) -> Result<(), ScriptError> {
        let Some(hooks) = registry(env) else {
            return Err(ScriptError::runtime(
                "api.hooks: no engine's hook registry is attached to this script (hooks need an engine)",
            ));
        };
        match p.kind {
            Kind::Hook { point, opts } => {
                let Some(f) = scripts.hook_fn(&p.key) else {
                    return Err(ScriptError::Internal(format!(
                        "hook function {} is missing",
                        p.key
                    )));
                };
                let hook = ScriptHook {
                    scripts: scripts.clone(),
                    f,
                };
                let h = hooks
                    .on(point, &env.owner, opts, Arc::new(hook))
                    .map_err(|e| ScriptError::runtime(e.to_string()))?;
                live.insert(p.n, h);
            }
            Kind::Override { tool } => hooks.override_tool(
                &tool,
                &env.owner,
                Arc::new(ScriptOverride {
                    handler: scripts.handler(p.key),
                    nexts: self.nexts.clone(),
                }),
            ),
        }
        Ok(())
    }

    /// The scripts are built: handlers can run now. Registers what waited.
    pub fn activate(&self, env: &ScriptEnv, factory: Factory) -> Result<(), ScriptError> {
        let mut st = self.state();
        let pending = std::mem::take(&mut st.pending);
        let mut first_err = None;
        let State {
            factory: slot,
            live,
            ..
        } = &mut *st;
        if let Some(scripts) = factory() {
            for p in pending {
                if let Err(e) = self.install(env, live, p, &scripts) {
                    first_err.get_or_insert(e);
                }
            }
        }
        *slot = Some(factory);
        match first_err {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// `api.hooks.off(handle)`.
    pub fn off(&self, env: &ScriptEnv, n: u64) -> bool {
        let mut st = self.state();
        let before = st.pending.len();
        st.pending.retain(|p| p.n != n);
        if st.pending.len() != before {
            return true;
        }
        match st.live.remove(&n) {
            Some(h) => registry(env).is_some_and(|hk| hk.off(h)),
            None => false,
        }
    }

    /// Runs the `next` of a running override (`token` from its payload), blocking.
    pub fn take_next(&self, token: u64) -> Option<(Next, CallContext)> {
        self.nexts.map().get(&token).cloned()
    }
}

/// A script function as a hook handler. It runs in place on the thread that fires the
/// point (no thread hop, no copy of the event), except on a current-thread runtime, whose
/// only thread it must not hold: there it runs on a blocking thread.
struct ScriptHook {
    scripts: PluginScripts,
    f: HookFn,
}

/// Whether a script hook may run on this thread now: no runtime, a multi-thread runtime
/// (nested waits leave the worker through `block_in_place`), or already inside a script.
fn runs_in_place() -> bool {
    match tokio::runtime::Handle::try_current() {
        Err(_) => true,
        Ok(h) => {
            h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread || in_script_thread()
        }
    }
}

impl HookHandler for ScriptHook {
    fn call_now(
        &self,
        point: &'static str,
        event: &Value,
        ctx: &CallContext,
    ) -> Option<Result<HookReturn, HookError>> {
        if !runs_in_place() {
            return None;
        }
        self.call_in_place(point, event, ctx)
    }

    fn in_place(&self) -> bool {
        runs_in_place()
    }

    fn call_in_place(
        &self,
        point: &'static str,
        event: &Value,
        ctx: &CallContext,
    ) -> Option<Result<HookReturn, HookError>> {
        Some(
            self.scripts
                .run_hook(&self.f, event, ctx)
                .map_err(|e| hook_error(point, e.into_tool_error(&ctx.tool_id))),
        )
    }

    fn call(&self, point: &'static str, event: Value, ctx: CallContext) -> HookFuture {
        let scripts = self.scripts.clone();
        let f = self.f.clone();
        let handle = tokio::runtime::Handle::try_current().ok();
        let tool = ctx.tool_id.clone();
        let job = move |h: Option<tokio::runtime::Handle>| {
            set_thread_handle(h);
            let r = scripts.run_hook(&f, &event, &ctx);
            set_thread_handle(None);
            r
        };
        Box::pin(async move {
            let r = match handle {
                Some(h) => match tokio::task::spawn_blocking(move || job(Some(h))).await {
                    Ok(r) => r,
                    Err(e) => Err(ScriptError::Internal(format!("script thread failed: {e}"))),
                },
                None => job(None),
            };
            r.map_err(|e| hook_error(point, e.into_tool_error(&tool)))
        })
    }
}

fn hook_error(point: &str, e: ToolError) -> HookError {
    match e {
        ToolError::Failed { message, .. } => HookError::Failed(message),
        ToolError::LimitExceeded { limit, message, .. } => HookError::LimitExceeded {
            point: point.to_string(),
            limit,
            message,
        },
        ToolError::Timeout { after_ms, .. } => HookError::Timeout {
            point: point.to_string(),
            after_ms,
        },
        other => HookError::Failed(other.to_string()),
    }
}

/// A script function as an override: called with `{args, token}`; `next` reaches the
/// continuation stored under `token` while the call runs.
struct ScriptOverride {
    handler: ScriptToolHandler,
    nexts: Arc<NextTable>,
}

impl OverrideHandler for ScriptOverride {
    fn call(&self, args: Value, ctx: CallContext, next: Next) -> ToolFuture {
        let token = self.nexts.next.fetch_add(1, Ordering::Relaxed) + 1;
        let nexts = self.nexts.clone();
        nexts.map().insert(token, (next, ctx.clone()));
        let fut = self
            .handler
            .invoke(ctx, json!({"args": args, "token": token}));
        Box::pin(async move {
            let r = fut.await;
            nexts.map().remove(&token);
            r
        })
    }
}
