//! The audit trail: every call, veto and override decision as a `tracing` event (target
//! `tavern::audit`) and, when a sink is set (`--audit FILE`, setting `audit.file`), as a JSON
//! line, and to every tap ([`Hooks::add_audit_tap`]; `tavern serve`'s `/api/audit/events`).

use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::Instant;

use serde_json::json;

use super::Hooks;
use crate::tools::CallContext;

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

    fn write(&self, record: &serde_json::Value) {
        let mut w = self.0.lock().unwrap_or_else(|p| p.into_inner());
        // A full disk must not fail the call being audited; it is logged instead.
        if let Err(e) = writeln!(w, "{record}").and_then(|_| w.flush()) {
            tracing::warn!(target: "tavern::audit", "cannot write the audit file: {e}");
        }
    }
}

/// Something handed every audit record (the same object a `--audit FILE` line holds). It
/// runs on the audited call's task: it must be quick and never block.
pub trait AuditTap: Send + Sync {
    /// Whether records are wanted now (a tap with no listener says no, and calls then skip
    /// the timing and the JSON when nothing else records them).
    fn wanted(&self) -> bool {
        true
    }

    /// Takes one record.
    fn record(&self, record: &serde_json::Value);
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
    fn record(&self, record: &serde_json::Value) {
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

fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

impl Hooks {
    pub(super) fn audit_call(
        &self,
        ctx: &CallContext,
        outcome: &str,
        started: Option<Instant>,
        overridden_by: Option<&str>,
    ) {
        let caller = ctx.caller.to_string();
        let caller = caller.as_str();
        let ms = started.map_or(0.0, |t| t.elapsed().as_secs_f64() * 1000.0);
        tracing::info!(target: "tavern::audit", caller, tool = %ctx.tool_id, outcome,
            duration_ms = ms, overridden_by, "call");
        if self.audit.recording() {
            let mut r = json!({"ts": now(), "event": "call", "caller": caller,
                "tool": ctx.tool_id, "outcome": outcome, "duration_ms": ms, "depth": ctx.depth});
            if let Some(o) = overridden_by {
                r["overridden_by"] = json!(o);
            }
            if let Some(id) = &ctx.call_id {
                r["call_id"] = json!(id);
            }
            self.audit.record(&r);
        }
    }

    /// A call refused before it ran: a `call` record with the refusal's error code as its
    /// outcome, zero duration and the reason.
    pub(super) fn audit_refused(
        &self,
        tool_id: &str,
        caller: &crate::tools::Caller,
        depth: u32,
        call_id: Option<&str>,
        error: &crate::tools::ToolError,
    ) {
        if !self.audit.enabled() {
            return;
        }
        let caller = caller.to_string();
        let (outcome, reason) = (error.code(), error.to_string());
        tracing::info!(target: "tavern::audit", caller = %caller, tool = tool_id, outcome,
            reason = %reason, "call refused");
        if self.audit.recording() {
            let mut r = json!({"ts": now(), "event": "call", "caller": caller,
                "tool": tool_id, "outcome": outcome, "duration_ms": 0.0, "depth": depth,
                "reason": reason});
            if let Some(id) = call_id {
                r["call_id"] = json!(id);
            }
            self.audit.record(&r);
        }
    }

    pub(super) fn audit_decision(&self, ctx: &CallContext, outcome: &str, reason: &str) {
        let caller = ctx.caller.to_string();
        tracing::info!(target: "tavern::audit", caller = %caller, tool = %ctx.tool_id, outcome,
            reason, "decision");
        if self.audit.recording() {
            self.audit
                .record(&json!({"ts": now(), "event": "decision", "caller": caller,
                "tool": ctx.tool_id, "outcome": outcome, "reason": reason}));
        }
    }
}
