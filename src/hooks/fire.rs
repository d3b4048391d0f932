//! Firing points, and the [`Interceptor`] that fires the tool points and runs overrides
//! around every call.

use std::sync::Arc;
use std::time::Instant;

use serde_json::{json, Map, Value};

use super::audit::Audited;
use super::points::{PointSpec, ToolAfter, ToolBefore, POINTS, TOOL_AFTER_IX, TOOL_BEFORE_IX};
use super::{event, vetoed, Handlers, HookError, HookHandle, HookReturn, Hooks, MAX_HOOK_DEPTH};
use crate::tools::{CallContext, Caller, Interceptor, KeyMatching, Tool, ToolError, ToolFuture};

/// One field of an event, given in the order of its point's `fields` column
/// ([`PointSpec::fields`]). Strings are written into the buffers of the event map this
/// thread kept from the point's last event; values move in and back out.
pub(super) enum Field<'a> {
    /// A string field.
    Str(&'a str),
    /// A field holding a value written out as a string (the caller).
    Display(&'a (dyn std::fmt::Display + Sync)),
    /// A value, moved into the event. After firing it holds the event's value: a handler's
    /// replacement or the value as it went in. A replaceable field is always given so.
    Value(Value),
    /// Not part of this event (`tool:after-invoke` has `result` or `error`). After firing
    /// it is a [`Field::Value`] when a handler set it (a replaced `result` of a failed call).
    Absent,
}

impl Field<'_> {
    /// The value this field holds (after firing), moved out; null for any other field.
    pub(super) fn take(&mut self) -> Value {
        match self {
            Field::Value(v) => std::mem::take(v),
            _ => Value::Null,
        }
    }
}

/// Which fields of an event handlers replaced, by position in the point's `fields`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Replaced(u64);

impl Replaced {
    /// Whether a handler replaced any field.
    pub(crate) fn any(self) -> bool {
        self.0 != 0
    }

    /// Whether a handler replaced field `i` (its position in the point's `fields`).
    #[cfg(test)]
    pub(crate) fn has(self, i: usize) -> bool {
        i < 64 && self.0 & (1 << i) != 0
    }

    fn set(&mut self, i: usize) {
        if i < 64 {
            self.0 |= 1 << i;
        }
    }
}

/// Fires a point from synchronous code (the engine's build): `fire` (a typed event's
/// `fire`) runs on a thread of its own with its own runtime, so it works inside or outside
/// an async runtime. `name` is the point's, for the log.
pub(crate) fn fire_blocking<F>(name: &str, fire: F) -> Result<Replaced, ToolError>
where
    F: std::future::Future<Output = Result<Replaced, ToolError>> + Send,
{
    let run = || match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt.block_on(fire),
        Err(e) => {
            tracing::warn!(target: "tavern::hooks", "cannot fire {name}: {e}");
            Ok(Replaced::default())
        }
    };
    std::thread::scope(|s| s.spawn(run).join()).unwrap_or_else(|_| {
        tracing::error!(target: "tavern::hooks", "a {name} handler panicked");
        Ok(Replaced::default())
    })
}

/// A field of named values (inputs, outputs) as a typed event hands it back: empty when it
/// holds none (a handler cannot put anything else there: see `misshapen`).
pub(crate) fn take_map(v: &mut Value) -> Map<String, Value> {
    match std::mem::take(v) {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

/// A `before` handler's `{confirm = message, fallback = "deny" | "allow"}`: asks the user of
/// the MCP client that made the call (`elicitation/create`, an empty form: accept or decline)
/// and goes on only when they accept. Without a client that can ask, `fallback` decides
/// (`deny` unless it says `allow`). `Err` is the veto's reason.
async fn confirm(ctx: &CallContext, fields: &mut Map<String, Value>) -> Result<(), String> {
    let message = match fields.remove("confirm") {
        Some(Value::String(s)) => s,
        Some(other) => other.to_string(),
        None => return Ok(()),
    };
    let allow_without = match fields.remove("fallback") {
        None => false,
        Some(Value::String(s)) if s == "deny" => false,
        Some(Value::String(s)) if s == "allow" => true,
        Some(other) => {
            return Err(format!(
                "`fallback` of a confirm verdict is \"allow\" or \"deny\", not {other}"
            ))
        }
    };
    let params = serde_json::json!({"mode": "form", "message": message,
        "requestedSchema": {"type": "object", "properties": {}}});
    let asked = ctx
        .observer
        .as_ref()
        .and_then(|o| o.client_request("elicitation/create", params));
    let unsupported = crate::tools::UNSUPPORTED;
    let answer = match asked {
        Some(f) => f.await,
        None => Err(format!(
            "{unsupported}: the call does not come from an MCP client that can ask the user"
        )),
    };
    match answer {
        Ok(v) if v["action"] == "accept" => Ok(()),
        Ok(v) => Err(format!(
            "the user did not confirm ({}): {message}",
            v["action"].as_str().unwrap_or("no answer")
        )),
        Err(e) if allow_without && e.starts_with(unsupported) => Ok(()),
        Err(e) => Err(format!(
            "could not ask the user to confirm ({e}): {message}"
        )),
    }
}

impl Hooks {
    /// Fires point `ix` (an index constant of [`super::points`]): builds its event from
    /// `fields` (one per entry of the point's `fields` column, in order), runs its handlers
    /// (a snapshot, by priority then registration order) and hands the event's values back
    /// into `fields`, saying which a handler replaced. Only the row's `replaceable` fields
    /// are taken from a handler; others are ignored with a warning. At a `before` point a
    /// veto or a failing handler is a [`ToolError::Vetoed`] for `ctx.tool_id`; at an
    /// `after` point they are logged and skipped. Callers check [`Hooks::active_at`] first,
    /// so a point with no handlers builds nothing.
    pub(super) async fn fire(
        &self,
        ix: usize,
        fields: &mut [Field<'_>],
        ctx: &CallContext,
    ) -> Result<Replaced, ToolError> {
        // Handlers that all run here and now fire over the registry's list as it stands;
        // others over a copy of it that can be held while they are awaited.
        match self.handlers_in_place(ix).or_else(|| self.handlers(ix)) {
            Some(handlers) => self.fire_over(ix, handlers, fields, ctx).await,
            None => Ok(Replaced::default()),
        }
    }

    /// [`Hooks::fire`] over `handlers`, a snapshot taken earlier (by a caller that had to
    /// know something of them first, such as whether they all run in place).
    pub(super) async fn fire_over(
        &self,
        ix: usize,
        handlers: Handlers,
        fields: &mut [Field<'_>],
        ctx: &CallContext,
    ) -> Result<Replaced, ToolError> {
        let Some(spec) = POINTS.get(ix) else {
            return Ok(Replaced::default());
        };
        if handlers.list().is_empty() {
            return Ok(Replaced::default());
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
            return Ok(Replaced::default());
        }
        debug_assert_eq!(fields.len(), spec.fields.len(), "fields of {}", spec.name);
        let whole = !fields.iter().any(|f| matches!(f, Field::Absent));
        let mut ev = Value::Object(if whole {
            fill(event::event_map(ix, spec.fields), fields)
        } else {
            partial(spec, fields)
        });
        let fired = self.run_handlers(spec, handlers, &mut ev, ctx).await;
        if let Value::Object(mut m) = ev {
            if whole {
                // A replacement took the same key, in the same place.
                for (slot, f) in m.values_mut().zip(fields.iter_mut()) {
                    if let Field::Value(v) = f {
                        *v = std::mem::take(slot);
                    }
                }
                event::recycle(ix, m);
            } else {
                for (name, f) in spec.fields.iter().zip(fields.iter_mut()) {
                    let slot = m.get_mut(*name).map(std::mem::take);
                    match (f, slot) {
                        (Field::Value(v), slot) => *v = slot.unwrap_or_default(),
                        (f @ Field::Absent, Some(v)) => *f = Field::Value(v),
                        _ => {}
                    }
                }
            }
        }
        fired
    }

    /// Runs `handlers` over `event` (an object) in place; which fields they replaced.
    async fn run_handlers(
        &self,
        spec: &'static PointSpec,
        handlers: Handlers,
        event: &mut Value,
        ctx: &CallContext,
    ) -> Result<Replaced, ToolError> {
        let in_place = handlers.in_place();
        let list = handlers.list();
        let mut replaced = Replaced::default();
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
                // `{confirm = message}` at a `before` point: the user decides (elicitation).
                Ok(HookReturn::Replace(mut fields))
                    if spec.before && fields.contains_key("confirm") =>
                {
                    match confirm(ctx, &mut fields).await {
                        Err(why) => Ok(HookReturn::Veto(why)),
                        Ok(()) if fields.is_empty() => Ok(HookReturn::Continue),
                        Ok(()) => match misshapen(&fields) {
                            Some(why) => Err(why),
                            None => Ok(HookReturn::Replace(fields)),
                        },
                    }
                }
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
                        let at = spec.fields.iter().position(|f| *f == k);
                        if let (true, Some(i), Some(m)) = (
                            spec.replaceable.contains(&k.as_str()),
                            at,
                            event.as_object_mut(),
                        ) {
                            m.insert(k, v);
                            replaced.set(i);
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
            // The arguments move into the event and back out: no copy.
            let mut ev = ToolBefore {
                tool: tool.id(),
                args,
                caller: &ctx.caller,
            };
            let fired = ev.fire(self, &ctx).await;
            args = ev.args;
            match fired {
                // Replaced arguments pass the schema again.
                Ok(r) if r.any() => args = tool.prepare(args, KeyMatching::Loose)?,
                Ok(_) => {}
                Err(e) => {
                    if audit {
                        self.audit_call(Audited::of(&ctx), "vetoed".into(), started, None);
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
        let audited = audit.then(|| Audited::of(&ctx));
        if !after {
            // Only the audit reads the call afterwards: the context moves in.
            let result = self.overrides.run(&tool, ctx, args).await;
            if let Some(a) = audited {
                self.audit_call(a, outcome(&result), started, by.as_deref());
            }
            return result;
        }
        // The after event needs the arguments the tool got and the context: copies of both.
        let kept = args.clone();
        let mut result = self.overrides.run(&tool, ctx.clone(), args).await;
        let ok = result.is_ok();
        // The result moves into the event and back out.
        let (res, error) = match &mut result {
            Ok(v) => (Some(std::mem::take(v)), None),
            Err(e) => (
                None,
                Some(json!({"code": e.code(), "message": e.to_string()})),
            ),
        };
        let elapsed = started.map_or(0.0, |t| t.elapsed().as_secs_f64() * 1000.0);
        let mut ev = ToolAfter {
            tool: tool.id(),
            args: kept,
            caller: &ctx.caller,
            ok: Value::Bool(ok),
            result: res,
            error,
            elapsed_ms: json!(elapsed),
        };
        // An after point never fails the call: a failing handler was skipped.
        let _ = ev.fire(self, &ctx).await;
        // The result of a call that succeeded, or a result a handler set (also for a
        // failed call: `result` is in the event only then), wins.
        if let Some(v) = ev.result {
            result = Ok(v);
        }
        if let Some(a) = audited {
            self.audit_call(a, outcome(&result), started, by.as_deref());
        }
        result
    }
}

/// A call's outcome as its audit record says it: `ok` or the error's code.
fn outcome(result: &Result<Value, ToolError>) -> std::borrow::Cow<'static, str> {
    match result {
        Ok(_) => "ok".into(),
        Err(e) => e.code().to_string().into(),
    }
}

/// Fields that hold an object of named values (workflow and node inputs and outputs).
fn is_object_field(k: &str) -> bool {
    k == "inputs" || k == "outputs"
}

/// Why a replacement cannot be taken: inputs or outputs that are not an object (the
/// handler failed, so the event keeps what it had).
fn misshapen(fields: &Map<String, Value>) -> Option<HookError> {
    fields.iter().find_map(|(k, v)| {
        (is_object_field(k) && !v.is_object() && !v.is_null()).then(|| HookError::NotAnObject {
            field: k.clone(),
            value: v.to_string(),
        })
    })
}

/// Fills `m` (a map with the point's keys, in order) with `fields`, moving values in.
fn fill(mut m: Map<String, Value>, fields: &mut [Field<'_>]) -> Map<String, Value> {
    for (slot, f) in m.values_mut().zip(fields.iter_mut()) {
        match f {
            Field::Str(s) => event::set_str(slot, s),
            Field::Display(d) => event::set_display(slot, d),
            Field::Value(v) => *slot = std::mem::take(v),
            Field::Absent => *slot = Value::Null,
        }
    }
    m
}

/// A new event map of the fields that are not [`Field::Absent`].
fn partial(spec: &PointSpec, fields: &mut [Field<'_>]) -> Map<String, Value> {
    let mut m = Map::with_capacity(fields.len());
    for (name, f) in spec.fields.iter().zip(fields.iter_mut()) {
        let v = match f {
            Field::Str(s) => Value::String(s.to_string()),
            Field::Display(d) => Value::String(d.to_string()),
            Field::Value(v) => std::mem::take(v),
            Field::Absent => continue,
        };
        m.insert(name.to_string(), v);
    }
    m
}

impl Interceptor for Hooks {
    fn wants(&self, tool_id: &str) -> bool {
        self.wants_tools(tool_id)
    }

    fn intercept(self: Arc<Self>, tool: Arc<Tool>, ctx: CallContext, args: Value) -> ToolFuture {
        // The future owns the registry the manager handed over.
        Box::pin(async move { self.run_call(tool, ctx, args).await })
    }

    fn refused(
        &self,
        tool_id: &str,
        caller: &Caller,
        depth: u32,
        call_id: Option<&str>,
        error: &ToolError,
    ) {
        self.audit_refused(tool_id, caller, depth, call_id, error);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use serde_json::json;

    use super::*;
    use crate::hooks::points::WORKFLOW_BEFORE_IX;
    use crate::hooks::HookOptions;
    use crate::tools::ToolManager;

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        // Registered sync handlers run in place: one poll would do, a runtime is simpler.
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a current-thread runtime builds")
            .block_on(f)
    }

    fn ctx() -> CallContext {
        CallContext::top("workflow:w", Caller::Cli, ToolManager::new())
    }

    /// Registers a handler at `point` that records its events and returns `ret`.
    fn record(h: &Hooks, point: &str, priority: i64, ret: HookReturn) -> Arc<Mutex<Vec<Value>>> {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = seen.clone();
        let opts = HookOptions {
            priority,
            ..Default::default()
        };
        h.on_fn(point, opts, move |_, ev| {
            s.lock().unwrap().push(ev.clone());
            ret.clone()
        })
        .expect("a known point");
        seen
    }

    #[test]
    fn the_event_is_built_from_the_row_and_its_values_come_back() {
        let h = Hooks::default();
        let seen = record(&h, "workflow:before-execute", 0, HookReturn::Continue);
        let caller = Caller::Cli;
        let mut f = [
            Field::Str("w"),
            Field::Value(json!({"a": 1})),
            Field::Display(&caller),
        ];
        let r = block_on(h.fire(WORKFLOW_BEFORE_IX, &mut f, &ctx())).expect("not vetoed");
        assert!(!r.any());
        assert_eq!(f[1].take(), json!({"a": 1}), "the inputs move back out");
        let ev = seen.lock().unwrap()[0].clone();
        assert_eq!(
            ev,
            json!({"workflow": "w", "inputs": {"a": 1}, "caller": "cli"})
        );
        let keys: Vec<&String> = ev.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["workflow", "inputs", "caller"], "in the row's order");
    }

    #[test]
    fn replaced_fields_come_back_and_others_are_ignored() {
        let h = Hooks::default();
        let mut fields = Map::new();
        fields.insert("inputs".into(), json!({"b": 2}));
        fields.insert("workflow".into(), json!("other"));
        record(
            &h,
            "workflow:before-execute",
            1,
            HookReturn::Replace(fields),
        );
        let later = record(&h, "workflow:before-execute", 0, HookReturn::Continue);
        let caller = Caller::Cli;
        let mut f = [
            Field::Str("w"),
            Field::Value(json!({"a": 1})),
            Field::Display(&caller),
        ];
        let r = block_on(h.fire(WORKFLOW_BEFORE_IX, &mut f, &ctx())).expect("not vetoed");
        assert!(r.has(1) && !r.has(0), "only `inputs` is replaceable: {r:?}");
        assert_eq!(f[1].take(), json!({"b": 2}));
        // The later handler saw the replacement, and not the refused field.
        assert_eq!(
            later.lock().unwrap()[0],
            json!({"workflow": "w", "inputs": {"b": 2}, "caller": "cli"})
        );
    }

    #[test]
    fn an_absent_field_a_handler_sets_comes_back() {
        let h = Hooks::default();
        let mut fields = Map::new();
        fields.insert("result".into(), json!(5));
        let seen = record(&h, "tool:after-invoke", 0, HookReturn::Replace(fields));
        let caller = Caller::Cli;
        let mut f = [
            Field::Str("a:b"),
            Field::Value(json!({})),
            Field::Display(&caller),
            Field::Value(json!(false)),
            Field::Absent,
            Field::Value(json!({"code": "failed"})),
            Field::Value(json!(1.0)),
        ];
        let r = block_on(h.fire(TOOL_AFTER_IX, &mut f, &ctx())).expect("an after point");
        assert!(r.has(4));
        assert_eq!(f[4].take(), json!(5));
        assert_eq!(f[5].take(), json!({"code": "failed"}));
        let ev = seen.lock().unwrap()[0].clone();
        assert!(
            ev.get("result").is_none(),
            "an absent field is not in the event"
        );
        assert_eq!(ev["tool"], json!("a:b"));
    }

    #[test]
    fn a_veto_at_a_before_point_still_hands_the_values_back() {
        let h = Hooks::default();
        record(&h, "tool:before-invoke", 0, HookReturn::Veto("no".into()));
        let caller = Caller::Cli;
        let mut f = [
            Field::Str("a:b"),
            Field::Value(json!({"x": 1})),
            Field::Display(&caller),
        ];
        let e = block_on(h.fire(TOOL_BEFORE_IX, &mut f, &ctx())).expect_err("vetoed");
        assert_eq!(e.code(), "vetoed");
        assert_eq!(f[1].take(), json!({"x": 1}));
        // At an after point a veto has nothing to stop.
        record(&h, "tool:after-invoke", 0, HookReturn::Veto("late".into()));
        let mut f = [
            Field::Str("a:b"),
            Field::Value(json!({})),
            Field::Display(&caller),
            Field::Value(json!(true)),
            Field::Value(json!(1)),
            Field::Absent,
            Field::Value(json!(0.5)),
        ];
        let r = block_on(h.fire(TOOL_AFTER_IX, &mut f, &ctx())).expect("ignored");
        assert!(!r.any());
        assert_eq!(f[4].take(), json!(1));
    }
}
