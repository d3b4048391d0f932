//! Firing points, and the [`Interceptor`] that fires the tool points and runs overrides
//! around every call.

use std::sync::Arc;
use std::time::Instant;

use serde_json::{json, Map, Value};

use super::points::{self, POINTS, TOOL_AFTER_IX, TOOL_BEFORE_IX};
use super::{event, vetoed, Handlers, HookHandle, HookReturn, Hooks, MAX_HOOK_DEPTH};
use crate::tools::{CallContext, Caller, Interceptor, KeyMatching, Tool, ToolError, ToolFuture};

impl Hooks {
    /// Fires `point` with `event`: runs its handlers (a snapshot, by priority then
    /// registration order) and returns the event with the fields they replaced. At a
    /// `before` point a veto or a failing handler is a [`ToolError::Vetoed`] for
    /// `ctx.tool_id`; at an `after` point they are logged and skipped.
    pub async fn fire(
        &self,
        point: &str,
        event: Map<String, Value>,
        ctx: &CallContext,
    ) -> Result<Map<String, Value>, ToolError> {
        let Some(ix) = points::point(point).and_then(|s| points::index(s.name)) else {
            return Ok(event);
        };
        let mut ev = Value::Object(event);
        self.fire_at(ix, &mut ev, ctx).await?;
        Ok(match ev {
            Value::Object(m) => m,
            _ => Map::new(),
        })
    }

    /// [`Hooks::fire`] by point index, over `event` (an object) in place, so the caller can
    /// move its values in and take them back out without copies. Returns whether a handler
    /// replaced a field (every point has at most one replaceable field).
    pub(crate) async fn fire_at(
        &self,
        ix: usize,
        event: &mut Value,
        ctx: &CallContext,
    ) -> Result<bool, ToolError> {
        // Handlers that all run here and now fire over the registry's list as it stands;
        // others over a copy of it that can be held while they are awaited.
        match self.handlers_in_place(ix).or_else(|| self.handlers(ix)) {
            Some(handlers) => self.fire_over(ix, handlers, event, ctx).await,
            None => Ok(false),
        }
    }

    /// [`Hooks::fire_at`] over `handlers`, a snapshot taken earlier (by a caller that had to
    /// know something of them first, such as whether they all run in place).
    pub(crate) async fn fire_over(
        &self,
        ix: usize,
        handlers: Handlers,
        event: &mut Value,
        ctx: &CallContext,
    ) -> Result<bool, ToolError> {
        let Some(spec) = POINTS.get(ix) else {
            return Ok(false);
        };
        let in_place = handlers.in_place();
        let list = handlers.list();
        if list.is_empty() {
            return Ok(false);
        }
        if ctx.depth > MAX_HOOK_DEPTH {
            let reason = format!(
                "hook point '{}' cut off: it fired {} tool calls deep (hooks stop at {MAX_HOOK_DEPTH}); a handler probably triggers its own point through a tool call",
                spec.name, ctx.depth
            );
            if spec.before {
                self.audit_decision(ctx, "vetoed", &reason);
                return Err(vetoed(&ctx.tool_id, reason));
            }
            tracing::warn!(target: "tavern::hooks", point = spec.name, "{reason}");
            return Ok(false);
        }
        let mut replaced = false;
        for e in list.iter() {
            if e.once {
                if e.spent.swap(true, std::sync::atomic::Ordering::AcqRel) {
                    continue;
                }
                self.off(HookHandle(e.handle));
            }
            // Handlers that can run here and now read the event in place (no copy, no
            // future); the others get their own copy.
            let now = if in_place {
                e.handler.call_in_place(spec.name, event, ctx)
            } else {
                e.handler.call_now(spec.name, event, ctx)
            };
            let r = match now {
                Some(r) => r,
                None => e.handler.call(spec.name, event.clone(), ctx.clone()).await,
            };
            let r = match r {
                Ok(HookReturn::Replace(fields)) => match misshapen(&fields) {
                    Some(why) => Err(why),
                    None => Ok(HookReturn::Replace(fields)),
                },
                other => other,
            };
            match r {
                Ok(HookReturn::Continue) => {}
                Ok(HookReturn::Veto(why)) if spec.before => {
                    let reason = if why.is_empty() {
                        format!("refused by a {} hook of {}", spec.name, e.owner)
                    } else {
                        format!("{why} ({} hook of {})", spec.name, e.owner)
                    };
                    self.audit_decision(ctx, "vetoed", &reason);
                    return Err(vetoed(&ctx.tool_id, reason));
                }
                Ok(HookReturn::Veto(_)) => tracing::warn!(target: "tavern::hooks",
                    point = spec.name, owner = %e.owner,
                    "a veto at an after point has nothing to stop; ignored"),
                Ok(HookReturn::Replace(fields)) => {
                    for (k, v) in fields {
                        if is_object_field(&k) && v.is_null() {
                            // `{inputs = null}` replaces nothing.
                            continue;
                        }
                        if spec.replaceable.contains(&k.as_str()) {
                            if let Some(m) = event.as_object_mut() {
                                m.insert(k, v);
                                replaced = true;
                            }
                        } else {
                            tracing::warn!(target: "tavern::hooks", point = spec.name,
                                owner = %e.owner, field = %k,
                                "a handler returned a field this point does not replace (replaceable: {:?}); ignored",
                                spec.replaceable);
                        }
                    }
                }
                Err(msg) if spec.before => {
                    let reason = format!(
                        "the {} hook of {} failed, so the work is refused: {msg}",
                        spec.name, e.owner
                    );
                    self.audit_decision(ctx, "vetoed", &reason);
                    return Err(vetoed(&ctx.tool_id, reason));
                }
                Err(msg) => tracing::warn!(target: "tavern::hooks", point = spec.name,
                    owner = %e.owner, "hook handler failed and was skipped: {msg}"),
            }
        }
        Ok(replaced)
    }

    /// Whether anything runs around tool calls (tool points, overrides, auditing).
    fn wants_tools(&self, tool_id: &str) -> bool {
        self.active_at(TOOL_BEFORE_IX)
            || self.active_at(TOOL_AFTER_IX)
            || self.overrides.has(tool_id)
            || self.audit.enabled()
    }

    async fn run_call(
        &self,
        tool: Arc<Tool>,
        ctx: CallContext,
        mut args: Value,
    ) -> Result<Value, ToolError> {
        let after = self.active_at(TOOL_AFTER_IX);
        let audit = self.audit.enabled();
        // The clock is read only for what reports a duration.
        let started = (after || audit).then(Instant::now);
        if self.active_at(TOOL_BEFORE_IX) {
            // The arguments move into the event and back out: no copy. The map and its
            // strings are the last before-event's on this thread (no key hashed anew).
            let mut m = event::event_map(TOOL_BEFORE_IX, &["tool", "args", "caller"]);
            for (i, slot) in m.values_mut().enumerate() {
                match i {
                    0 => event::set_str(slot, tool.id()),
                    1 => *slot = std::mem::take(&mut args),
                    _ => event::set_display(slot, &ctx.caller),
                }
            }
            let mut ev = Value::Object(m);
            let fired = self.fire_at(TOOL_BEFORE_IX, &mut ev, &ctx).await;
            if let Value::Object(mut m) = ev {
                // A replacement took the same key, in the same place.
                args = m
                    .values_mut()
                    .nth(1)
                    .map(std::mem::take)
                    .unwrap_or_default();
                event::recycle(TOOL_BEFORE_IX, m);
            }
            match fired {
                // Replaced arguments pass the schema again.
                Ok(true) => args = tool.prepare(args, KeyMatching::Loose)?,
                Ok(false) => {}
                Err(e) => {
                    if audit {
                        self.audit_call(&ctx, "vetoed", started, None);
                    }
                    return Err(e);
                }
            }
        }
        if !after && !audit {
            // Nothing reads the context after the call: it moves in.
            return self.overrides.run(&tool, ctx, args).await;
        }
        let by = self.overrides.top_owner(tool.id());
        // The after event needs the arguments the tool got: keep a copy only then.
        let kept = after.then(|| args.clone());
        let mut result = self.overrides.run(&tool, ctx.clone(), args).await;
        if let Some(args) = kept {
            let mut ev = Map::with_capacity(7);
            ev.insert("tool".into(), Value::String(tool.id().to_string()));
            ev.insert("args".into(), args);
            ev.insert("caller".into(), Value::String(ctx.caller.to_string()));
            ev.insert("ok".into(), Value::Bool(result.is_ok()));
            let ok = result.is_ok();
            match result {
                Ok(v) => {
                    ev.insert("result".into(), v);
                    result = Ok(Value::Null);
                }
                Err(ref e) => {
                    ev.insert(
                        "error".into(),
                        json!({"code": e.code(), "message": e.to_string()}),
                    );
                }
            }
            let elapsed = started.map_or(0.0, |t| t.elapsed().as_secs_f64() * 1000.0);
            ev.insert("elapsed_ms".into(), json!(elapsed));
            let mut ev = Value::Object(ev);
            let replaced = matches!(self.fire_at(TOOL_AFTER_IX, &mut ev, &ctx).await, Ok(true));
            // The result moves back out; a replaced one (also for a failed call) wins.
            if ok || replaced {
                result = Ok(take(&mut ev, "result"));
            }
        }
        if audit {
            let outcome = match &result {
                Ok(_) => "ok",
                Err(e) => e.code(),
            };
            self.audit_call(&ctx, outcome, started, by.as_deref());
        }
        result
    }
}

/// Fields that hold an object of named values (workflow and node inputs and outputs).
fn is_object_field(k: &str) -> bool {
    k == "inputs" || k == "outputs"
}

/// Why a replacement cannot be taken: inputs or outputs that are not an object (the
/// handler failed, so the event keeps what it had).
fn misshapen(fields: &Map<String, Value>) -> Option<String> {
    fields.iter().find_map(|(k, v)| {
        (is_object_field(k) && !v.is_object() && !v.is_null())
            .then(|| format!("it replaced '{k}' with {v}, which is not an object of named values"))
    })
}

/// Takes field `key` out of an event object (null when it is missing).
fn take(ev: &mut Value, key: &str) -> Value {
    ev.as_object_mut()
        .and_then(|m| m.get_mut(key))
        .map(std::mem::take)
        .unwrap_or(Value::Null)
}

impl Interceptor for Hooks {
    fn wants(&self, tool_id: &str) -> bool {
        self.wants_tools(tool_id)
    }

    fn intercept(&self, tool: Arc<Tool>, ctx: CallContext, args: Value) -> ToolFuture {
        // The future must own the registry: it is the manager's interceptor.
        let me = ctx.manager.interceptor().cloned();
        Box::pin(async move {
            match me.as_ref().and_then(|i| i.as_any().downcast_ref::<Hooks>()) {
                Some(h) => h.run_call(tool, ctx, args).await,
                None => tool.handler().invoke(ctx, args).await,
            }
        })
    }

    fn refused(&self, tool_id: &str, caller: &Caller, depth: u32, error: &ToolError) {
        self.audit_refused(tool_id, caller, depth, error);
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}
