//! The audit trail: every call, veto and override decision as a `tracing` event (target
//! `tavern::audit`) and, when a sink is set (`--audit FILE`, setting `audit.file`), as a JSON
//! line, and to every tap ([`Hooks::add_audit_tap`]; `tavern serve`'s `/api/audit/events`).

use std::borrow::Cow;
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::Instant;

use serde_json::json;

use super::Hooks;
use crate::tools::{CallContext, Caller};

/// Where audit records go: one JSON object per line.
#[derive(Clone)]
pub struct AuditSink(Arc<Mutex<Box<dyn Write + Send>>>);

impl std::fmt::Debug for AuditSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AuditSink")
    }
}

impl AuditSink {
    /// Appends to `path` (created when missing).
    pub fn file(path: &Path) -> std::io::Result<Self> {
        let f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        Ok(Self::writer(f))
    }

    /// Writes to any writer.
    pub fn writer(w: impl Write + Send + 'static) -> Self {
        AuditSink(Arc::new(Mutex::new(Box::new(w))))
    }

    fn write(&self, record: &AuditRecord) {
        let line = record.to_json();
        let mut w = self.0.lock().unwrap_or_else(|p| p.into_inner());
        // A full disk must not fail the call being audited; it is logged instead.
        if let Err(e) = writeln!(w, "{line}").and_then(|_| w.flush()) {
            tracing::warn!(target: "tavern::audit", "cannot write the audit file: {e}");
        }
    }
}

/// One audit record: a call (done or refused) or a veto/override decision. Taps are
/// handed it typed and turn it into JSON ([`AuditRecord::to_json`]) only when they show or
/// send it, so a tap that merely keeps records (`tavern serve`'s recent list) costs a call
/// no JSON.
#[derive(Debug, Clone)]
pub struct AuditRecord {
    /// When it was made.
    pub ts: chrono::DateTime<chrono::Utc>,
    /// `call` or `decision`.
    pub event: &'static str,
    /// Who made the call.
    pub caller: Caller,
    /// The tool called.
    pub tool: Arc<str>,
    /// `ok`, an error code, or the decision (`vetoed`).
    pub outcome: Cow<'static, str>,
    /// How long the call took (`call` only; 0 for a refused call).
    pub duration_ms: Option<f64>,
    /// How deep in nested calls (`call` only).
    pub depth: Option<u32>,
    /// Why it was refused or decided.
    pub reason: Option<String>,
    /// The override that answered the call instead of the tool.
    pub overridden_by: Option<String>,
    /// The call's id.
    pub call_id: Option<Arc<str>>,
}

impl AuditRecord {
    /// The record as an `--audit` file line holds it (keys in this order: `ts`, `event`,
    /// `caller`, `tool`, `outcome`, `duration_ms`, `depth`, `reason`, `overridden_by`,
    /// `call_id`; absent ones left out).
    pub fn to_json(&self) -> serde_json::Value {
        let mut r = serde_json::Map::with_capacity(10);
        r.insert(
            "ts".into(),
            json!(self.ts.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)),
        );
        r.insert("event".into(), json!(self.event));
        r.insert("caller".into(), json!(self.caller.to_string()));
        r.insert("tool".into(), json!(&*self.tool));
        r.insert("outcome".into(), json!(&*self.outcome));
        if let Some(ms) = self.duration_ms {
            r.insert("duration_ms".into(), json!(ms));
        }
        if let Some(d) = self.depth {
            r.insert("depth".into(), json!(d));
        }
        if let Some(why) = &self.reason {
            r.insert("reason".into(), json!(why));
        }
        if let Some(o) = &self.overridden_by {
            r.insert("overridden_by".into(), json!(o));
        }
        if let Some(id) = &self.call_id {
            r.insert("call_id".into(), json!(&**id));
        }
        serde_json::Value::Object(r)
    }
}

/// Something handed every audit record (what a `--audit FILE` line holds). It runs on the
/// audited call's task: it must be quick and never block.
pub trait AuditTap: Send + Sync {
    /// Whether records are wanted now (a tap with no listener says no, and calls then skip
    /// the timing and the record when nothing else records them).
    fn wanted(&self) -> bool {
        true
    }

    /// Takes one record.
    fn record(&self, record: &AuditRecord);
}

#[derive(Default)]
pub(super) struct Audit {
    sink: OnceLock<AuditSink>,
    taps: RwLock<Vec<Arc<dyn AuditTap>>>,
    /// Whether `taps` is non-empty: the hot path's one load.
    tapped: AtomicBool,
}

impl Audit {
    pub(super) fn set(&self, sink: AuditSink) {
        let _ = self.sink.set(sink);
    }

    pub(super) fn add_tap(&self, tap: Arc<dyn AuditTap>) {
        let mut taps = self.taps.write().unwrap_or_else(|p| p.into_inner());
        taps.push(tap);
        self.tapped.store(true, Ordering::Release);
    }

    /// Whether records are wanted as JSON (a sink or a tap that wants them).
    fn recording(&self) -> bool {
        self.sink.get().is_some() || (self.tapped.load(Ordering::Acquire) && self.tap_wanted())
    }

    fn tap_wanted(&self) -> bool {
        let taps = self.taps.read().unwrap_or_else(|p| p.into_inner());
        taps.iter().any(|t| t.wanted())
    }

    /// Hands `record` to the sink and every tap.
    fn record(&self, record: &AuditRecord) {
        if let Some(s) = self.sink.get() {
            s.write(record);
        }
        if self.tapped.load(Ordering::Acquire) {
            let taps = self.taps.read().unwrap_or_else(|p| p.into_inner());
            for t in taps.iter().filter(|t| t.wanted()) {
                t.record(record);
            }
        }
    }

    /// Whether calls must be timed and recorded (a sink, a tap, or a subscriber for the
    /// target).
    pub(super) fn enabled(&self) -> bool {
        self.recording() || tracing::enabled!(target: "tavern::audit", tracing::Level::INFO)
    }
}

/// What a call's audit record needs of its context, taken before the context moves into
/// the call (so auditing never clones the whole context).
pub(super) struct Audited {
    caller: Caller,
    tool: Arc<str>,
    depth: u32,
    call_id: Option<Arc<str>>,
}

impl Audited {
    pub(super) fn of(ctx: &CallContext) -> Audited {
        Audited {
            caller: ctx.caller.clone(),
            tool: ctx.tool_id.clone(),
            depth: ctx.depth,
            call_id: ctx.call_id.clone(),
        }
    }
}

impl Hooks {
    pub(super) fn audit_call(
        &self,
        call: Audited,
        outcome: Cow<'static, str>,
        started: Option<Instant>,
        overridden_by: Option<&str>,
    ) {
        let ms = started.map_or(0.0, |t| t.elapsed().as_secs_f64() * 1000.0);
        tracing::info!(target: "tavern::audit", caller = %call.caller, tool = %call.tool,
            outcome = &*outcome, duration_ms = ms, overridden_by, "call");
        if self.audit.recording() {
            self.audit.record(&AuditRecord {
                ts: chrono::Utc::now(),
                event: "call",
                caller: call.caller,
                tool: call.tool,
                outcome,
                duration_ms: Some(ms),
                depth: Some(call.depth),
                reason: None,
                overridden_by: overridden_by.map(str::to_string),
                call_id: call.call_id,
            });
        }
    }

    /// A call refused before it ran: a `call` record with the refusal's error code as its
    /// outcome, zero duration and the reason.
    pub(super) fn audit_refused(
        &self,
        tool_id: &str,
        caller: &Caller,
        depth: u32,
        call_id: Option<&str>,
        error: &crate::tools::ToolError,
    ) {
        if !self.audit.enabled() {
            return;
        }
        let (outcome, reason) = (error.code(), error.to_string());
        tracing::info!(target: "tavern::audit", caller = %caller, tool = tool_id, outcome,
            reason = %reason, "call refused");
        if self.audit.recording() {
            self.audit.record(&AuditRecord {
                ts: chrono::Utc::now(),
                event: "call",
                caller: caller.clone(),
                tool: Arc::from(tool_id),
                outcome: Cow::Owned(outcome.to_string()),
                duration_ms: Some(0.0),
                depth: Some(depth),
                reason: Some(reason),
                overridden_by: None,
                call_id: call_id.map(Arc::from),
            });
        }
    }

    pub(super) fn audit_decision(&self, ctx: &CallContext, outcome: &'static str, reason: &str) {
        tracing::info!(target: "tavern::audit", caller = %ctx.caller, tool = %ctx.tool_id, outcome,
            reason, "decision");
        if self.audit.recording() {
            self.audit.record(&AuditRecord {
                ts: chrono::Utc::now(),
                event: "decision",
                caller: ctx.caller.clone(),
                tool: ctx.tool_id.clone(),
                outcome: Cow::Borrowed(outcome),
                duration_ms: None,
                depth: None,
                reason: Some(reason.to_string()),
                overridden_by: None,
                call_id: None,
            });
        }
    }
}
