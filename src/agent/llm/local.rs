//! The in-process local model (`llm-local` feature, issue 38): a GGUF file run by llama.cpp
//! through the `llama-cpp-2` crate, with no server. `--llm local:PATH.gguf` (or
//! `base_url = "local:PATH.gguf"`) selects it.
//!
//! Each request is rendered with the model's own chat template (from the GGUF; ChatML when
//! the file has none), decoded in a fresh context of `context_size` tokens on `threads`
//! threads, and sampled with the request's [`Constraint`](super::Constraint) as a grammar
//! sampler; tokens go to the streaming reader as they are sampled, so a call runs when it
//! closes. Generation stops at an end-of-generation token, a stop sequence or `max_tokens`.

use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::{LlamaChatMessage, LlamaChatTemplate, LlamaModel};
use llama_cpp_2::sampling::LlamaSampler;
use serde_json::Value;

use super::{ChatBackend, ChatFuture, ChatRequest, ChunkSink, LlmError, ResolvedLlm};

/// llama.cpp's backend, initialised once per process.
fn backend() -> Result<&'static LlamaBackend, LlmError> {
    static BACKEND: OnceLock<Result<LlamaBackend, String>> = OnceLock::new();
    BACKEND
        .get_or_init(|| {
            let mut b = LlamaBackend::init().map_err(|e| e.to_string())?;
            b.void_logs();
            Ok(b)
        })
        .as_ref()
        .map_err(|e| LlmError::Config(format!("cannot start llama.cpp: {e}")))
}

/// A GGUF model loaded in this process.
pub struct LocalBackend {
    model: LlamaModel,
    path: PathBuf,
    template: LlamaChatTemplate,
    /// One generation at a time: a context is made per request, and two would double the
    /// memory and halve each one's threads.
    busy: Mutex<()>,
}

impl std::fmt::Debug for LocalBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalBackend")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// Why a model file cannot be used, before llama.cpp is asked: missing, a directory,
/// unreadable, or not a GGUF file (its first four bytes are `GGUF`).
fn check_file(path: &Path) -> Result<(), LlmError> {
    let bad = |why: String| {
        Err(LlmError::Config(format!(
            "local model {}: {why}",
            path.display()
        )))
    };
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return bad("no such file; give the path of a .gguf model (e.g. --llm local:models/SmolLM2-135M-Instruct.Q4_1.gguf)".into())
        }
        Err(e) => return bad(format!("cannot read it: {e}")),
    };
    if meta.is_dir() {
        return bad("is a directory; give the path of a .gguf file in it".into());
    }
    let mut magic = [0u8; 4];
    let read = std::fs::File::open(path).and_then(|mut f| {
        use std::io::Read;
        f.read_exact(&mut magic)
    });
    match read {
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
            bad("is shorter than a GGUF header; the file is empty or cut off".into())
        }
        Err(e) => bad(format!("cannot read it: {e}")),
        Ok(()) if &magic != b"GGUF" => bad(
            "is not a GGUF model (it does not start with `GGUF`); llama.cpp runs .gguf files"
                .into(),
        ),
        Ok(()) => Ok(()),
    }
}

impl LocalBackend {
    /// Loads the model at `path` (checked first: a missing, unreadable or non-GGUF file is
    /// a [`LlmError::Config`] naming it).
    pub fn load(path: &Path) -> Result<LocalBackend, LlmError> {
        check_file(path)?;
        let backend = backend()?;
        let model = LlamaModel::load_from_file(backend, path, &LlamaModelParams::default())
            .map_err(|e| {
                LlmError::Config(format!(
                    "local model {}: llama.cpp cannot load it ({e}); is it a complete GGUF file of a model this llama.cpp knows?",
                    path.display()
                ))
            })?;
        let template = match model.chat_template(None) {
            Ok(t) => t,
            Err(_) => {
                tracing::warn!(path = %path.display(), "the GGUF has no chat template; using ChatML");
                LlamaChatTemplate::new("chatml").map_err(|e| LlmError::Config(e.to_string()))?
            }
        };
        Ok(LocalBackend {
            model,
            path: path.to_path_buf(),
            template,
            busy: Mutex::new(()),
        })
    }

    /// The loaded file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The prompt for `messages` in the model's chat template, ready for the assistant.
    pub fn prompt(&self, messages: &[Value]) -> Result<String, LlmError> {
        let bad = |m: String| LlmError::BadResponse {
            url: format!("local:{}", self.path.display()),
            message: m,
        };
        let chat = messages
            .iter()
            .map(|m| {
                let role = m.get("role").and_then(Value::as_str).unwrap_or("user");
                let content = match m.get("content") {
                    Some(Value::String(s)) => s.clone(),
                    Some(Value::Null) | None => String::new(),
                    Some(other) => other.to_string(),
                };
                LlamaChatMessage::new(role.to_string(), content)
                    .map_err(|e| bad(format!("a message cannot be given to llama.cpp: {e}")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        self.model
            .apply_chat_template(&self.template, &chat, true)
            .map_err(|e| bad(format!("the chat template failed: {e}")))
    }

    /// Generates the answer to `req` (blocking; run on a blocking thread).
    fn generate(
        &self,
        req: &ChatRequest,
        s: &ResolvedLlm,
        sink: Option<&ChunkSink>,
    ) -> Result<String, LlmError> {
        let url = format!("local:{}", self.path.display());
        let bad = |m: String| LlmError::BadResponse {
            url: url.clone(),
            message: m,
        };
        // A poisoned lock only means an earlier generation panicked; the model is fine.
        let _one = self.busy.lock().unwrap_or_else(|p| p.into_inner());
        let backend = backend()?;
        let prompt = self.prompt(&req.messages)?;
        let vocab = self.model.vocab();
        let tokens = vocab.tokenize(prompt.as_bytes(), true, true);
        let n_ctx = s.context_size.max(64);
        let max_new = s.max_tokens.unwrap_or(256).max(1) as usize;
        if tokens.len() + 1 >= n_ctx as usize {
            return Err(LlmError::Config(format!(
                "local model {}: the prompt has {} tokens and context_size is {n_ctx}; raise llm.context_size or shorten the conversation",
                self.path.display(),
                tokens.len()
            )));
        }
        let threads = s.threads as i32;
        let params = LlamaContextParams::default()
            .with_n_ctx(NonZeroU32::new(n_ctx))
            .with_n_batch(n_ctx)
            .with_n_threads(threads)
            .with_n_threads_batch(threads);
        let mut ctx = self
            .model
            .new_context(backend, params)
            .map_err(|e| bad(format!("cannot make a llama.cpp context: {e}")))?;
        let mut batch = LlamaBatch::new(n_ctx as usize, 1);
        let last = tokens.len() as i32 - 1;
        for (i, t) in tokens.iter().enumerate() {
            batch
                .add(*t, i as i32, &[0], i as i32 == last)
                .map_err(|e| bad(format!("the prompt does not fit the batch: {e}")))?;
        }
        ctx.decode(&mut batch)
            .map_err(|e| bad(format!("llama.cpp could not read the prompt: {e}")))?;
        let mut samplers = Vec::new();
        if let Some(c) = &req.constraint {
            samplers.push(
                LlamaSampler::grammar(&self.model, &c.gbnf, "root")
                    .map_err(|e| bad(format!("llama.cpp refused the call grammar: {e}")))?,
            );
        }
        match s.temperature {
            Some(t) if t <= 0.0 => samplers.push(LlamaSampler::greedy()),
            t => {
                samplers.push(LlamaSampler::top_k(40));
                samplers.push(LlamaSampler::top_p(0.95, 1));
                samplers.push(LlamaSampler::temp(t.unwrap_or(0.8) as f32));
                samplers.push(LlamaSampler::dist(fastrand::u32(..)));
            }
        }
        let mut sampler = LlamaSampler::chain_simple(samplers);
        let mut bytes: Vec<u8> = Vec::new();
        let mut sent = 0usize;
        let mut pos = tokens.len() as i32;
        let mut idx = batch.n_tokens() - 1;
        for _ in 0..max_new {
            let token = sampler.sample(&ctx, idx);
            if vocab.is_eog(token) {
                break;
            }
            bytes.extend(vocab.token_to_piece(token, false, None));
            // Send what is whole UTF-8 so far.
            let upto = match std::str::from_utf8(&bytes) {
                Ok(_) => bytes.len(),
                Err(e) => e.valid_up_to(),
            };
            let text = String::from_utf8_lossy(&bytes[..upto]);
            if let Some(at) = s
                .stop_hits(&req.stop, &text)
            {
                bytes.truncate(at);
                break;
            }
            if let Some(sink) = sink {
                if upto > sent {
                    let _ = sink.send(text[sent..].to_string());
                    sent = upto;
                }
            }
            if pos as u32 + 1 >= n_ctx {
                break;
            }
            batch.clear();
            batch
                .add(token, pos, &[0], true)
                .map_err(|e| bad(format!("the batch is full: {e}")))?;
            pos += 1;
            idx = 0;
            ctx.decode(&mut batch)
                .map_err(|e| bad(format!("llama.cpp stopped generating: {e}")))?;
        }
        let text = String::from_utf8_lossy(&bytes).into_owned();
        if let Some(sink) = sink {
            if text.len() > sent {
                let _ = sink.send(text[sent..].to_string());
            }
        }
        Ok(text)
    }
}

impl ResolvedLlm {
    /// Where the first of `stop` begins in `text`, if one is there.
    fn stop_hits(&self, stop: &[String], text: &str) -> Option<usize> {
        stop.iter()
            .filter(|s| !s.is_empty())
            .filter_map(|s| text.find(s.as_str()))
            .min()
    }
}

/// The models loaded in this process, by path: agents that name the same file share it.
pub fn shared(path: &Path) -> Result<Arc<LocalBackend>, LlmError> {
    static LOADED: OnceLock<Mutex<Vec<Arc<LocalBackend>>>> = OnceLock::new();
    let loaded = LOADED.get_or_init(|| Mutex::new(Vec::new()));
    // A poisoned lock only means a load panicked; the list itself is intact.
    let mut list = loaded.lock().unwrap_or_else(|p| p.into_inner());
    let canon = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    if let Some(b) = list.iter().find(|b| b.path == canon) {
        return Ok(b.clone());
    }
    let b = Arc::new(LocalBackend::load(&canon)?);
    list.push(b.clone());
    Ok(b)
}

impl ChatBackend for LocalBackend {
    fn chat<'a>(
        &'a self,
        req: &'a ChatRequest,
        settings: &'a ResolvedLlm,
        sink: Option<&'a ChunkSink>,
    ) -> ChatFuture<'a> {
        Box::pin(async move {
            let sink = if settings.stream { sink } else { None };
            // llama.cpp blocks; the engine's runtime keeps running its other tasks.
            tokio::task::block_in_place(|| self.generate(req, settings, sink))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_files_are_named_and_explained() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope.gguf");
        let e = LocalBackend::load(&missing).unwrap_err().to_string();
        assert!(e.contains("nope.gguf") && e.contains("no such file"), "{e}");
        let e = LocalBackend::load(dir.path()).unwrap_err().to_string();
        assert!(e.contains("is a directory"), "{e}");
        let text = dir.path().join("notes.gguf");
        std::fs::write(&text, "hello there").unwrap();
        let e = LocalBackend::load(&text).unwrap_err().to_string();
        assert!(e.contains("not a GGUF model"), "{e}");
        let short = dir.path().join("short.gguf");
        std::fs::write(&short, "GG").unwrap();
        let e = LocalBackend::load(&short).unwrap_err().to_string();
        assert!(e.contains("cut off"), "{e}");
        let cut = dir.path().join("cut.gguf");
        std::fs::write(&cut, b"GGUF\x03\x00\x00\x00").unwrap();
        let e = LocalBackend::load(&cut).unwrap_err().to_string();
        assert!(e.contains("cannot load it"), "{e}");
    }
}
