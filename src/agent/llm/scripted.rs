//! `scripted:FILE`: a JSON list of replies, one per turn, for offline demos and tests.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::Value;

use super::{ChatBackend, ChatFuture, ChatRequest, ChunkSink, LlmError, ResolvedLlm};

/// Replies from a list, in order; each request takes the next one.
#[derive(Debug)]
pub struct ScriptedBackend {
    name: String,
    replies: Vec<String>,
    next: AtomicUsize,
    cycle: bool,
}

impl ScriptedBackend {
    /// Replies given in code; `name` appears in errors.
    pub fn new(name: impl Into<String>, replies: Vec<String>) -> Self {
        ScriptedBackend {
            name: name.into(),
            replies,
            next: AtomicUsize::new(0),
            cycle: false,
        }
    }

    /// Replies given in code that start over after the last one (benchmarks, idle NPCs).
    pub fn cycling(name: impl Into<String>, replies: Vec<String>) -> Self {
        ScriptedBackend {
            cycle: true,
            ..Self::new(name, replies)
        }
    }

    /// Reads a JSON array of strings (or of `{"reply": "…"}` objects).
    pub fn from_file(path: &Path) -> Result<Self, LlmError> {
        Self::from_file_named(path, path.display().to_string())
    }

    /// [`ScriptedBackend::from_file`], with messages naming the file `name` (its path from
    /// the home, `scripts/innkeeper.replies.json`).
    pub fn from_file_named(path: &Path, name: String) -> Result<Self, LlmError> {
        let err = |message: String| LlmError::Scripted {
            file: name.clone(),
            message,
        };
        let text = std::fs::read_to_string(path).map_err(|e| err(format!("cannot read: {e}")))?;
        let v: Value = serde_json::from_str(&text).map_err(|e| {
            err(format!(
                "not JSON at line {} column {}: {e}",
                e.line(),
                e.column()
            ))
        })?;
        let Value::Array(items) = v else {
            return Err(err("expected a JSON array of replies, one per turn".into()));
        };
        let mut replies = Vec::with_capacity(items.len());
        for (i, item) in items.into_iter().enumerate() {
            match item {
                Value::String(s) => replies.push(s),
                Value::Object(mut o) => match o.remove("reply") {
                    Some(Value::String(s)) => replies.push(s),
                    _ => {
                        return Err(err(format!(
                            "reply {} is an object without a string `reply`",
                            i + 1
                        )))
                    }
                },
                other => {
                    return Err(err(format!(
                        "reply {} should be a string, got {other}",
                        i + 1
                    )))
                }
            }
        }
        Ok(Self::new(name, replies))
    }

    /// How many replies were handed out.
    pub fn used(&self) -> usize {
        self.next.load(Ordering::Relaxed).min(self.replies.len())
    }
}

impl ChatBackend for ScriptedBackend {
    fn chat<'a>(
        &'a self,
        _req: &'a ChatRequest,
        settings: &'a ResolvedLlm,
        sink: Option<&'a ChunkSink>,
    ) -> ChatFuture<'a> {
        let mut i = self.next.fetch_add(1, Ordering::Relaxed);
        if self.cycle && !self.replies.is_empty() {
            i %= self.replies.len();
        }
        let out = match self.replies.get(i) {
            Some(r) => {
                if let (true, Some(sink)) = (settings.stream, sink) {
                    // Token-sized pieces, split on char boundaries, as a server would stream.
                    let mut rest = r.as_str();
                    while !rest.is_empty() {
                        let mut cut = rest.len().min(16);
                        while !rest.is_char_boundary(cut) {
                            cut += 1;
                        }
                        let _ = sink.send(rest[..cut].to_string());
                        rest = &rest[cut..];
                    }
                }
                Ok(r.clone())
            }
            None => Err(LlmError::Scripted {
                file: self.name.clone(),
                message: format!(
                    "no reply left for request {} (the file holds {}); add replies or lower --max-turns",
                    i + 1,
                    self.replies.len()
                ),
            }),
        };
        Box::pin(std::future::ready(out))
    }
}
