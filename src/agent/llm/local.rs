//! The in-process local model (the `llm-local` feature, issue 38): a GGUF file run by
//! llama.cpp through the `llama-cpp-2` crate, with no server. `--llm local:PATH.gguf`,
//! `base_url = "local:PATH.gguf"` (`[llm]` or a profile's `llm`), or
//! [`LocalBackend::open`] for a host's own agents select it.
//!
//! Each request is rendered with the model's own chat template (from the GGUF; ChatML when
//! the file has none llama.cpp knows), decoded in a context of `context_size` tokens on
//! `threads` threads, and sampled with the request's [`Constraint`](super::Constraint) as a
//! grammar sampler; text goes to the streaming reader as it is sampled, so a call runs when
//! it closes. Generation ends at an end-of-generation token, a stop sequence, `max_tokens`
//! or the end of the context. The context is kept between requests: the part of a prompt
//! that repeats the last one (the system prompt and the conversation so far) is not read
//! again.

use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::{LlamaChatMessage, LlamaChatTemplate, LlamaModel};
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::data::LlamaTokenData;
use llama_cpp_2::token::data_array::LlamaTokenDataArray;
use llama_cpp_2::token::LlamaToken;
use serde_json::Value;

use super::{ChatBackend, ChatFuture, ChatRequest, ChunkSink, LlmError, ResolvedLlm, LOCAL};

/// llama.cpp's backend, initialised once per process; its log goes to `tracing`.
fn backend() -> Result<&'static LlamaBackend, LlmError> {
    static BACKEND: OnceLock<Result<LlamaBackend, String>> = OnceLock::new();
    BACKEND
        .get_or_init(|| {
            llama_cpp_2::send_logs_to_tracing(llama_cpp_2::LogOptions::default());
            LlamaBackend::init().map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| LlmError::Config(format!("cannot start llama.cpp: {e}")))
}

/// What one generation took (the last request's, from [`LocalBackend::last_timings`]).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct LocalTimings {
    /// Tokens of the prompt.
    pub prompt_tokens: usize,
    /// Of those, tokens already in the context from the request before (not read again).
    pub reused_tokens: usize,
    /// Time to read the rest of the prompt, in milliseconds.
    pub prompt_ms: f64,
    /// Tokens generated.
    pub generated_tokens: usize,
    /// Time to generate them (sampling and constraint included), in milliseconds.
    pub generate_ms: f64,
}

/// A loaded model: the file, the weights, the template and the context kept between
/// requests.
struct Loaded {
    path: PathBuf,
    /// Loaded once per process and kept (see [`shared`]); `'static` so the context that
    /// borrows it can live beside it.
    model: &'static LlamaModel,
    template: LlamaChatTemplate,
    /// One generation at a time: the context and what it holds.
    session: Mutex<Option<Session>>,
    last: Mutex<Option<LocalTimings>>,
}

/// A llama.cpp context and the tokens its cache holds (sequence 0).
struct Session {
    ctx: LlamaContext<'static>,
    n_ctx: u32,
    threads: i32,
    tokens: Vec<LlamaToken>,
}

/// A GGUF model run in this process: a [`ChatBackend`]. Cheap to clone; every backend of
/// one file shares its weights and its context (one generation at a time).
#[derive(Clone)]
pub struct LocalBackend {
    loaded: Arc<Loaded>,
}

impl std::fmt::Debug for LocalBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalBackend")
            .field("path", &self.loaded.path)
            .finish_non_exhaustive()
    }
}

/// `local model PATH: WHY` as a settings error.
fn file_error(path: &Path, why: impl std::fmt::Display) -> LlmError {
    LlmError::Config(format!("local model {}: {why}", path.display()))
}

/// Why a model file cannot be used, before llama.cpp is asked: missing, a directory,
/// unreadable, or not a GGUF file (its first four bytes are `GGUF`).
pub fn check_model_file(path: &Path) -> Result<(), LlmError> {
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(file_error(
                path,
                "no such file; give the path of a .gguf model (--llm local:PATH.gguf, or llm.base_url = \"local:PATH.gguf\", relative to the home)",
            ))
        }
        Err(e) => return Err(file_error(path, format!("cannot read it: {e}"))),
    };
    if meta.is_dir() {
        return Err(file_error(
            path,
            "is a directory; give the path of a .gguf file in it",
        ));
    }
    let mut magic = [0u8; 4];
    let read = std::fs::File::open(path).and_then(|mut f| {
        use std::io::Read;
        f.read_exact(&mut magic)
    });
    match read {
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Err(file_error(
            path,
            "is shorter than a GGUF header: the file is empty or cut off; download it again",
        )),
        Err(e) => Err(file_error(
            path,
            format!("cannot read it: {e}; check its permissions"),
        )),
        Ok(()) if &magic != b"GGUF" => Err(file_error(
            path,
            "is not a GGUF model (it does not start with `GGUF`); llama.cpp runs .gguf files: convert the model or download its GGUF build",
        )),
        Ok(()) => Ok(()),
    }
}

/// The models loaded in this process, by canonical path: agents and nodes that name the
/// same file share it, and it stays loaded until the process ends.
fn shared(path: &Path) -> Result<LocalBackend, LlmError> {
    static LOADED: OnceLock<Mutex<Vec<LocalBackend>>> = OnceLock::new();
    check_model_file(path)?;
    let canon = std::fs::canonicalize(path).map_err(|e| file_error(path, e))?;
    let loaded = LOADED.get_or_init(|| Mutex::new(Vec::new()));
    // A poisoned lock only means a load panicked; the list itself is intact.
    let mut list = loaded.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(b) = list.iter().find(|b| b.loaded.path == canon) {
        return Ok(b.clone());
    }
    let b = LocalBackend::load(&canon)?;
    list.push(b.clone());
    Ok(b)
}

impl LocalBackend {
    /// The model at `path`, loaded on first use and shared by every later caller in this
    /// process. A missing, unreadable or non-GGUF file, or one llama.cpp cannot load, is a
    /// [`LlmError::Config`] naming the file and saying what to do.
    pub fn open(path: impl AsRef<Path>) -> Result<LocalBackend, LlmError> {
        shared(path.as_ref())
    }

    fn load(path: &Path) -> Result<LocalBackend, LlmError> {
        let backend = backend()?;
        let model = LlamaModel::load_from_file(backend, path, &LlamaModelParams::default())
            .map_err(|e| {
                file_error(
                    path,
                    format!("llama.cpp cannot load it ({e}); is it a whole GGUF file of a model architecture this llama.cpp knows? Download it again, or use a newer GGUF")
                )
            })?;
        let model: &'static LlamaModel = Box::leak(Box::new(model));
        let probe = [LlamaChatMessage::new("user".into(), "hi".into())
            .map_err(|e| LlmError::Config(e.to_string()))?];
        let template = match model.chat_template(None) {
            Ok(t) if model.apply_chat_template(&t, &probe, true).is_ok() => t,
            found => {
                let why = if found.is_ok() {
                    "llama.cpp does not know its chat template"
                } else {
                    "it has no chat template"
                };
                tracing::warn!(path = %path.display(), "{why}; using ChatML");
                LlamaChatTemplate::new("chatml").map_err(|e| LlmError::Config(e.to_string()))?
            }
        };
        Ok(LocalBackend {
            loaded: Arc::new(Loaded {
                path: path.to_path_buf(),
                model,
                template,
                session: Mutex::new(None),
                last: Mutex::new(None),
            }),
        })
    }

    /// The loaded file (canonical path).
    pub fn path(&self) -> &Path {
        &self.loaded.path
    }

    /// The size of the context the model was trained on (`context_size` is capped to it).
    pub fn trained_context(&self) -> u32 {
        self.loaded.model.n_ctx_train()
    }

    /// Drops the kept context (its memory, and what it holds of the last prompt): the next
    /// request reads its whole prompt in a new one.
    pub fn forget_context(&self) {
        *self
            .loaded
            .session
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = None;
    }

    /// What the last generation took.
    pub fn last_timings(&self) -> Option<LocalTimings> {
        *self.loaded.last.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The prompt for `messages` in the model's chat template, ready for the assistant's
    /// answer.
    pub fn prompt(&self, messages: &[Value]) -> Result<String, LlmError> {
        let bad = |m: String| LlmError::BadResponse {
            url: self.url(),
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
        self.loaded
            .model
            .apply_chat_template(&self.loaded.template, &chat, true)
            .map_err(|e| bad(format!("the chat template failed: {e}")))
    }

    fn url(&self) -> String {
        format!("{LOCAL}{}", self.loaded.path.display())
    }

    /// Generates the answer to `req` (blocking: run on a blocking thread). Stops early when
    /// `cancel` is set.
    fn generate(
        &self,
        req: &ChatRequest,
        s: &ResolvedLlm,
        sink: Option<&ChunkSink>,
        cancel: &AtomicBool,
    ) -> Result<String, LlmError> {
        let l = &*self.loaded;
        let url = self.url();
        let bad = |m: String| LlmError::BadResponse {
            url: url.clone(),
            message: m,
        };
        let backend = backend()?;
        let prompt = self.prompt(&req.messages)?;
        let vocab = l.model.vocab();
        // The template writes the special tokens (`<|im_start|>` …) as text.
        let tokens = vocab.tokenize(prompt.as_bytes(), vocab.should_add_bos(), true);
        let trained = l.model.n_ctx_train().max(64);
        let n_ctx = s.context_size.clamp(64, trained);
        if tokens.len() + 1 >= n_ctx as usize {
            return Err(LlmError::Config(format!(
                "local model {}: the prompt has {} tokens and the context {n_ctx}; raise llm.context_size (the model allows up to {trained}) or shorten the conversation (a short manual: manual_style \"short\")",
                l.path.display(),
                tokens.len()
            )));
        }
        let threads = s.threads.max(1) as i32;
        // A poisoned lock only means an earlier generation panicked; the session is dropped
        // below and made again.
        let mut slot = l.session.lock().unwrap_or_else(|p| p.into_inner());
        if slot
            .as_ref()
            .is_some_and(|ss| ss.n_ctx != n_ctx || ss.threads != threads)
        {
            *slot = None;
        }
        if slot.is_none() {
            let params = LlamaContextParams::default()
                .with_n_ctx(NonZeroU32::new(n_ctx))
                .with_n_threads(threads)
                .with_n_threads_batch(threads);
            let ctx = l.model.new_context(backend, params).map_err(|e| {
                LlmError::Config(format!(
                    "local model {}: llama.cpp cannot make a context of {n_ctx} tokens ({e}); lower llm.context_size",
                    l.path.display()
                ))
            })?;
            *slot = Some(Session {
                ctx,
                n_ctx,
                threads,
                tokens: Vec::new(),
            });
        }
        // Taken out while it works: an error drops it (its cache is unknown then).
        let Some(mut session) = slot.take() else {
            return Err(bad("no context".into()));
        };
        let (text, timings) = run(l, &mut session, &tokens, req, s, sink, cancel, &bad)?;
        *slot = Some(session);
        *l.last.lock().unwrap_or_else(|p| p.into_inner()) = Some(timings);
        tracing::debug!(
            model = %l.path.display(),
            prompt_tokens = timings.prompt_tokens,
            reused = timings.reused_tokens,
            prompt_ms = timings.prompt_ms,
            generated = timings.generated_tokens,
            generate_ms = timings.generate_ms,
            "local model answered"
        );
        Ok(text)
    }
}

/// Reads `tokens` into the session's context (only what differs from what it holds) and
/// samples the answer.
#[allow(clippy::too_many_arguments)]
fn run(
    l: &Loaded,
    session: &mut Session,
    tokens: &[LlamaToken],
    req: &ChatRequest,
    s: &ResolvedLlm,
    sink: Option<&ChunkSink>,
    cancel: &AtomicBool,
    bad: &dyn Fn(String) -> LlmError,
) -> Result<(String, LocalTimings), LlmError> {
    let vocab = l.model.vocab();
    let t0 = Instant::now();
    // What the cache already holds of this prompt; at least the last token is read again,
    // for its logits.
    let mut keep = session
        .tokens
        .iter()
        .zip(tokens)
        .take_while(|(a, b)| a == b)
        .count()
        .min(tokens.len() - 1);
    if session
        .ctx
        .clear_kv_cache_seq(Some(0), Some(keep as u32), None)
        .ok()
        != Some(true)
    {
        session.ctx.clear_kv_cache();
        keep = 0;
    }
    session.tokens.truncate(keep);
    let n_batch = session.ctx.n_batch().max(1) as usize;
    let mut batch = LlamaBatch::new(n_batch, 1);
    for (chunk_at, chunk) in tokens[keep..].chunks(n_batch).enumerate() {
        batch.clear();
        let start = keep + chunk_at * n_batch;
        for (i, t) in chunk.iter().enumerate() {
            let pos = start + i;
            batch
                .add(*t, pos as i32, &[0], pos + 1 == tokens.len())
                .map_err(|e| bad(format!("the prompt does not fit the batch: {e}")))?;
        }
        session
            .ctx
            .decode(&mut batch)
            .map_err(|e| bad(format!("llama.cpp could not read the prompt: {e}")))?;
        session.tokens.extend_from_slice(chunk);
        if cancel.load(Ordering::Relaxed) {
            return Err(bad("cancelled".into()));
        }
    }
    let prompt_ms = t0.elapsed().as_secs_f64() * 1000.0;
    let t1 = Instant::now();

    let mut grammar = match &req.constraint {
        Some(c) => Some(LlamaSampler::grammar(l.model, &c.gbnf, "root").map_err(|e| {
            bad(format!(
                "llama.cpp refused the call grammar ({e}); this is a bug in tavern's constraint for this call format"
            ))
        })?),
        None => None,
    };
    let seed = s
        .seed
        .map(|v| v as u32)
        .unwrap_or_else(|| fastrand::u32(..));
    let mut pick = match s.temperature {
        Some(t) if t <= 0.0 => LlamaSampler::greedy(),
        t => LlamaSampler::chain_simple([
            LlamaSampler::top_k(40),
            LlamaSampler::top_p(0.95, 1),
            LlamaSampler::min_p(0.05, 1),
            LlamaSampler::temp(t.unwrap_or(0.8) as f32),
            LlamaSampler::dist(seed),
        ]),
    };
    let room = (session.n_ctx as usize).saturating_sub(tokens.len());
    let max_new = s.max_tokens.map(|m| (m as usize).min(room)).unwrap_or(room);
    let stream = if s.stream { sink } else { None };
    let longest_stop = req.stop.iter().map(String::len).max().unwrap_or(0);
    let mut bytes: Vec<u8> = Vec::new();
    let mut sent = 0usize;
    let mut generated = 0usize;
    let mut logits_at = batch.n_tokens() - 1;
    let mut stopped_at = None;
    while generated < max_new {
        if cancel.load(Ordering::Relaxed) {
            return Err(bad("cancelled".into()));
        }
        let token = sample(&session.ctx, logits_at, &mut pick, grammar.as_mut())
            .ok_or_else(|| bad("the call grammar admits no token here".into()))?;
        if vocab.is_eog(token) {
            break;
        }
        if let Some(g) = grammar.as_mut() {
            g.try_accept(token)
                .map_err(|e| bad(format!("the call grammar refused a token it allowed: {e}")))?;
        }
        generated += 1;
        bytes.extend(vocab.token_to_piece(token, false, None));
        let whole = match std::str::from_utf8(&bytes) {
            Ok(t) => t.len(),
            Err(e) => e.valid_up_to(),
        };
        // Whole UTF-8 so far; `from_utf8` cannot fail below `valid_up_to`.
        let text = std::str::from_utf8(&bytes[..whole]).unwrap_or_default();
        if let Some(at) = first_stop(&req.stop, text) {
            stopped_at = Some(at);
            break;
        }
        if let Some(sink) = stream {
            // Hold back what could still become a stop sequence.
            let safe = safe_end(text, &req.stop, longest_stop);
            if safe > sent {
                let _ = sink.send(text[sent..safe].to_string());
                sent = safe;
            }
        }
        if session.tokens.len() + 1 >= session.n_ctx as usize {
            break;
        }
        batch.clear();
        batch
            .add(token, session.tokens.len() as i32, &[0], true)
            .map_err(|e| bad(format!("the batch is full: {e}")))?;
        session
            .ctx
            .decode(&mut batch)
            .map_err(|e| bad(format!("llama.cpp stopped generating: {e}")))?;
        session.tokens.push(token);
        logits_at = 0;
    }
    let mut text = String::from_utf8_lossy(&bytes).into_owned();
    if let Some(at) = stopped_at {
        text.truncate(at);
    }
    if let Some(sink) = stream {
        if text.len() > sent {
            let _ = sink.send(text[sent..].to_string());
        }
    }
    let timings = LocalTimings {
        prompt_tokens: tokens.len(),
        reused_tokens: keep,
        prompt_ms,
        generated_tokens: generated,
        generate_ms: t1.elapsed().as_secs_f64() * 1000.0,
    };
    Ok((text, timings))
}

/// The next token: sampled without the grammar first and checked against it (cheap), and
/// only when the grammar refuses it sampled again from the candidates the grammar allows
/// (llama.cpp's own order). `None` when the grammar allows no token at all.
fn sample(
    ctx: &LlamaContext<'_>,
    at: i32,
    pick: &mut LlamaSampler,
    grammar: Option<&mut LlamaSampler>,
) -> Option<LlamaToken> {
    let mut all = ctx.token_data_array_ith(at);
    pick.apply(&mut all);
    let first = all.selected_token()?;
    let Some(g) = grammar else {
        return Some(first);
    };
    let mut one = LlamaTokenDataArray::new(vec![LlamaTokenData::new(first, 1.0, 0.0)], false);
    g.apply(&mut one);
    if one.data.first().is_some_and(|d| d.logit().is_finite()) {
        return Some(first);
    }
    let mut allowed = ctx.token_data_array_ith(at);
    g.apply(&mut allowed);
    if !allowed.data.iter().any(|d| d.logit().is_finite()) {
        return None;
    }
    pick.apply(&mut allowed);
    allowed.selected_token()
}

/// Where the first of `stop` begins in `text`, if one is there.
fn first_stop(stop: &[String], text: &str) -> Option<usize> {
    stop.iter()
        .filter(|s| !s.is_empty())
        .filter_map(|s| text.find(s.as_str()))
        .min()
}

/// The end of the part of `text` that can be sent: all of it but a tail that is the start
/// of a stop sequence.
fn safe_end(text: &str, stop: &[String], longest: usize) -> usize {
    let from = text.len().saturating_sub(longest);
    (from..text.len())
        .filter(|&i| text.is_char_boundary(i))
        .find(|&i| {
            let tail = &text[i..];
            stop.iter().any(|s| !s.is_empty() && s.starts_with(tail))
        })
        .unwrap_or(text.len())
}

/// Sets the flag when the request's future is dropped (the run was cancelled), so the
/// blocking generation stops at its next token.
struct CancelOnDrop(Arc<AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

impl ChatBackend for LocalBackend {
    fn chat<'a>(
        &'a self,
        req: &'a ChatRequest,
        settings: &'a ResolvedLlm,
        sink: Option<&'a ChunkSink>,
    ) -> ChatFuture<'a> {
        let me = self.clone();
        let req = req.clone();
        let settings = settings.clone();
        let sink = sink.cloned();
        Box::pin(async move {
            let cancel = Arc::new(AtomicBool::new(false));
            let _guard = CancelOnDrop(cancel.clone());
            // llama.cpp blocks; the engine's runtime keeps running its other tasks.
            tokio::task::spawn_blocking(move || {
                me.generate(&req, &settings, sink.as_ref(), &cancel)
            })
            .await
            .map_err(|e| LlmError::BadResponse {
                url: self.url(),
                message: format!("the generation thread failed: {e}"),
            })?
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
        let e = LocalBackend::open(&missing).unwrap_err().to_string();
        assert!(
            e.contains("nope.gguf") && e.contains("no such file") && e.contains("local:"),
            "{e}"
        );
        let e = LocalBackend::open(dir.path()).unwrap_err().to_string();
        assert!(e.contains("is a directory"), "{e}");
        let text = dir.path().join("notes.gguf");
        std::fs::write(&text, "hello there").unwrap();
        let e = LocalBackend::open(&text).unwrap_err().to_string();
        assert!(e.contains("not a GGUF model"), "{e}");
        let short = dir.path().join("short.gguf");
        std::fs::write(&short, "GG").unwrap();
        let e = LocalBackend::open(&short).unwrap_err().to_string();
        assert!(e.contains("cut off"), "{e}");
        // The magic is right, the rest is not: llama.cpp itself refuses it.
        let cut = dir.path().join("cut.gguf");
        std::fs::write(&cut, b"GGUF\x03\x00\x00\x00").unwrap();
        let e = LocalBackend::open(&cut).unwrap_err().to_string();
        assert!(
            e.contains("cut.gguf") && e.contains("cannot load it"),
            "{e}"
        );
    }

    #[test]
    fn stop_sequences_hold_back_only_what_could_start_one() {
        let stop = vec!["\nObservation:".to_string(), "<tool_response>".to_string()];
        let longest = 15;
        assert_eq!(safe_end("hello", &stop, longest), 5);
        assert_eq!(safe_end("hello\nObs", &stop, longest), 5);
        assert_eq!(safe_end("a <tool", &stop, longest), 2);
        assert_eq!(safe_end("a <b>", &stop, longest), 5);
        assert_eq!(first_stop(&stop, "x\nObservation: y"), Some(1));
        assert_eq!(first_stop(&stop, "x"), None);
        assert_eq!(safe_end("héllo", &[], 0), "héllo".len());
    }
}
