//! Firing points, and the [`Interceptor`] that fires the tool points and runs overrides
//! around every call.

use std::sync::Arc;
use std::time::Instant;

use serde_json::{json, Map, Value};

use super::points::{self, TOOL_AFTER, TOOL_BEFORE};
use super::{vetoed, HookHandle, HookReturn, Hooks, MAX_HOOK_DEPTH};
use crate::tools::{CallContext, Interceptor, KeyMatching, Tool, ToolError, ToolFuture};

impl Hooks {
    /// Fires `point` with `event`: runs its handlers (a snapshot, by priority then
    /// registration order) and returns the event with the fields they replaced. At a
    /// `before` point a veto or a failing handler is a [`ToolError::Vetoed`] for
    /// `ctx.tool_id`; at an `after` point they are logged and skipped.
    pub async fn fire(
        &self,
        point: &str,
        mut event: Map<String, Value>,
        ctx: &CallContext,
    ) -> Result<Map<String, Value>, ToolError> {
        let Some(spec) = points::point(point) else {
            return Ok(event);
        };
        let Some(list) = self.snapshot(spec.name) else {
            return Ok(event);
        };
        if list.is_empty() {
            return Ok(event);
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
            return Ok(event);
        }
        for e in list.iter() {
            if e.once {
                if e.spent.swap(true, std::sync::atomic::Ordering::AcqRel) {
                    continue;
                }
                self.off(HookHandle(e.handle));
            }
            let r = e
                .handler
                .call(spec.name, Value::Object(event.clone()), ctx.clone())
                .await;
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
                        if spec.replaceable.contains(&k.as_str()) {
                            event.insert(k, v);
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
        Ok(event)
    }

    /// Whether anything runs around tool calls (tool points, overrides, auditing).
    fn wants_tools(&self, tool_id: &str) -> bool {
        self.active(TOOL_BEFORE)
            || self.active(TOOL_AFTER)
            || self.overrides.has(tool_id)
            || self.audit.enabled()
    }

    async fn run_call(
        &self,
        tool: Arc<Tool>,
        ctx: CallContext,
        mut args: Value,
    ) -> Result<Value, ToolError> {
        let started = Instant::now();
        let caller = ctx.caller.to_string();
        if self.active(TOOL_BEFORE) {
            let mut ev = Map::new();
            ev.insert("tool".into(), Value::String(tool.id().to_string()));
            ev.insert("args".into(), args.clone());
            ev.insert("caller".into(), Value::String(caller.clone()));
            match self.fire(TOOL_BEFORE, ev, &ctx).await {
                Ok(mut ev) => {
                    if let Some(new) = ev.remove("args") {
                        if new != args {
                            // Replaced arguments pass the schema again.
                            args = tool.prepare(new, KeyMatching::Loose)?;
                        }
                    }
                }
                Err(e) => {
                    self.audit_call(&ctx, &caller, "vetoed", started, None);
                    return Err(e);
                }
            }
        }
        let by = self.overrides.top_owner(tool.id());
        let mut result = self.overrides.run(&tool, ctx.clone(), args.clone()).await;
        if self.active(TOOL_AFTER) {
            let mut ev = Map::new();
            ev.insert("tool".into(), Value::String(tool.id().to_string()));
            ev.insert("args".into(), args);
            ev.insert("caller".into(), Value::String(caller.clone()));
            ev.insert("ok".into(), Value::Bool(result.is_ok()));
            match &result {
                Ok(v) => {
                    ev.insert("result".into(), v.clone());
                }
                Err(e) => {
                    ev.insert(
                        "error".into(),
                        json!({"code": e.code(), "message": e.to_string()}),
                    );
                }
            }
            ev.insert(
                "elapsed_ms".into(),
                json!(started.elapsed().as_secs_f64() * 1000.0),
            );
            let before = ev.get("result").cloned();
            if let Ok(mut ev) = self.fire(TOOL_AFTER, ev, &ctx).await {
                match ev.remove("result") {
                    Some(r) if Some(&r) != before.as_ref() => result = Ok(r),
                    _ => {}
                }
            }
        }
        let outcome = match &result {
            Ok(_) => "ok",
            Err(e) => e.code(),
        };
        self.audit_call(&ctx, &caller, outcome, started, by.as_deref());
        result
    }
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

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}
