//! The engine's one log sink: mods' `print` and `api.log.*` lines, `ctx.log`, and the
//! engine's own warnings (a panicking tool, a script panic, load problems) go through the
//! [`LogSink`] of the engine's [`ToolManager`](super::ToolManager). With a host callback set
//! they go to it; without one, an engine built with the defaults writes them on stderr
//! (`[info] plugin:<name>: ...`, from `Info` up), and one built with `log_to_stderr(false)`
//! (the CLI, the server) makes them `tracing` events (target `tavern::script`). Per engine: two engines can log to two callbacks.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwapOption;

use super::LogLevel;

/// One line for the host's log callback.
#[derive(Debug, Clone, Copy)]
pub struct LogRecord<'a> {
    /// How serious (`print` and `ctx.log` are `Info`).
    pub level: LogLevel,
    /// Who wrote it: `plugin:<name>` for a mod, `script:<name>` for a power-user script,
    /// `tool:<id>` or `engine` for the engine's own messages, a file for a load problem.
    pub source: &'a str,
    /// The text.
    pub message: &'a str,
}

/// A host's log callback. Called from engine threads (and the pumping thread), possibly
/// from several at once; it must be quick and must not block.
pub type LogCallback = Arc<dyn Fn(&LogRecord<'_>) + Send + Sync>;

/// Where an engine's log lines go (see the module notes).
#[derive(Default)]
pub struct LogSink {
    callback: ArcSwapOption<LogCallback>,
    /// Without a callback, lines from `Info` up go to stderr (else to `tracing`).
    stderr: AtomicBool,
}

impl std::fmt::Debug for LogSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogSink")
            .field("callback", &self.callback.load().is_some())
            .finish()
    }
}

impl LogSink {
    /// Sends the lines to `callback` from now on (`None`: back to `tracing`).
    pub fn set(&self, callback: Option<LogCallback>) {
        self.callback.store(callback.map(Arc::new));
    }

    /// Whether lines go to stderr when no callback is set (the builder's
    /// `log_to_stderr`; the CLI and the server keep `tracing`).
    pub fn set_stderr(&self, yes: bool) {
        self.stderr.store(yes, Ordering::Relaxed);
    }

    /// Whether a host callback is set.
    pub fn has_callback(&self) -> bool {
        self.callback.load().is_some()
    }

    /// Logs one line.
    pub fn emit(&self, level: LogLevel, source: &str, message: &str) {
        if let Some(cb) = &*self.callback.load() {
            cb(&LogRecord {
                level,
                source,
                message,
            });
            return;
        }
        if level != LogLevel::Debug && self.stderr.load(Ordering::Relaxed) {
            let tag = match level {
                LogLevel::Info => "info",
                LogLevel::Warning => "warn",
                _ => "error",
            };
            eprintln!("[{tag}] {source}: {message}");
            return;
        }
        match level {
            LogLevel::Debug => tracing::debug!(target: "tavern::script", source, "{message}"),
            LogLevel::Info => tracing::info!(target: "tavern::script", source, "{message}"),
            LogLevel::Warning => tracing::warn!(target: "tavern::script", source, "{message}"),
            LogLevel::Error => tracing::error!(target: "tavern::script", source, "{message}"),
        }
    }

    /// Logs a warning.
    pub fn warn(&self, source: &str, message: &str) {
        self.emit(LogLevel::Warning, source, message);
    }
}
