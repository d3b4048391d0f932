//! Talking to a model: settings, the chat request, the [`ChatBackend`] trait and its
//! backends (an OpenAI-compatible HTTP client with the `llm-http` feature, a scripted one for
//! offline runs, or the host's own) and the `llm:Chat` workflow node.
//!
//! Settings are layered, most specific last: built-in defaults, `tavern.toml` `[llm]`, the
//! agent profile's `llm`, the node's `configValues`, then the run's overrides (`--llm`,
//! `--model`, or [`AgentRuntimeBuilder::llm`](crate::agent::AgentRuntimeBuilder::llm)).

#[cfg(feature = "llm-local")]
mod local;
mod node;
#[cfg(feature = "llm-http")]
mod openai;
mod scripted;

#[cfg(feature = "llm-local")]
pub use local::{check_model_file, LocalBackend, LocalTimings};
pub use node::{register_nodes, LlmRunContext, CHAT_NODE};
// For the server's agents over MCP (sampling through the calling client).
#[cfg(feature = "server")]
pub(crate) use node::{sampled_text, sampling_request, MCP_CLIENT};
#[cfg(feature = "llm-http")]
pub use openai::OpenAiBackend;
pub use scripted::ScriptedBackend;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tokio::sync::mpsc::UnboundedSender;

use crate::config::Settings;

/// Model settings; every field optional so layers can overlay each other.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LlmSettings {
    /// `http(s)://host/v1` of an OpenAI-compatible server (default
    /// `https://api.openai.com/v1`), `scripted:FILE`, or `local:PATH.gguf` (a model run in
    /// this process; the `llm-local` feature).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// Model name (default `gpt-4o-mini`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Sampling temperature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// Most tokens to generate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// Stream the reply (server-sent events); default true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<bool>,
    /// The environment variable holding the API key (default `OPENAI_API_KEY`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    /// Limit for the whole request, or between two chunks when streaming (default 120000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// Limit for opening the connection (default 10000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connect_timeout_ms: Option<u64>,
    /// Retries after a 429, a 5xx, a timeout or a refused connection (default 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retries: Option<u32>,
    /// First retry delay, doubled each time (default 500; a `Retry-After` header wins).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_backoff_ms: Option<u64>,
    /// What an agent's model may write on a call turn: `call`, `call_or_text` or `off`
    /// (default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub constrain: Option<Constrain>,
    /// How the constraint is sent: `grammar` (default; llama.cpp's GBNF `grammar`),
    /// `json_schema` (`response_format`) or `guided_json` (vLLM).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub constrain_shape: Option<ConstrainShape>,
    /// Whether the turn after Observations is left for the answer (default true): no call
    /// is forced on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer_follows_calls: Option<bool>,
    /// What that answer turn may be: `off` (default; anything) or `text` (prose that does
    /// not open like a call; small models otherwise repeat their call).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub constrain_answer: Option<ConstrainAnswer>,
    /// Fields added to every request body as they are (a server's own options:
    /// `cache_prompt`, `top_k`, `repeat_penalty` …); they win over tavern's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extra_body: Option<Map<String, Value>>,
    /// The sampler's seed (sent as `seed`; the local model's sampler), for repeatable runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// Threads a `local:` model computes on (default: the machine's cores, at most 8).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<u32>,
    /// Tokens of context a `local:` model keeps: prompt and answer together (default 4096,
    /// at most what the model was trained on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_size: Option<u32>,
}

/// What an agent's model may write on a turn that should call a tool (issue 38).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Constrain {
    /// Exactly one valid call in the agent's call format.
    Call,
    /// One valid call, or prose that does not open like a call.
    CallOrText,
    /// Anything (no constraint is sent).
    #[default]
    Off,
}

/// What the turn after Observations may be when answers follow calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConstrainAnswer {
    /// Anything (no constraint is sent).
    #[default]
    Off,
    /// Prose that does not open like a call.
    Text,
}

/// How a constraint is sent to an OpenAI-compatible server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConstrainShape {
    /// llama.cpp's `grammar` field (GBNF).
    #[default]
    Grammar,
    /// `response_format: {"type": "json_schema", …}` (OpenAI, llama.cpp, vLLM, LM Studio);
    /// only for call formats whose answer is one JSON document (`json`, `llama_json`).
    JsonSchema,
    /// vLLM's `guided_json`; the same schema.
    GuidedJson,
}

/// The constraint of one turn: what the model may write, in the shapes servers take.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Constraint {
    /// A GBNF grammar (llama.cpp's `grammar`, the local model's sampler).
    pub gbnf: String,
    /// The JSON schema of the whole answer, when the call format's answer is one JSON
    /// document and the turn admits only a call.
    pub json_schema: Option<Value>,
}

/// Why LLM settings could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LlmSettingsError {
    /// A known key has a value of the wrong type (serde's message names it).
    #[error("llm settings: {0}")]
    Invalid(String),
    /// `--llm` names no backend tavern knows.
    #[error(
        "'{0}' is neither openai:BASE_URL (e.g. openai:http://127.0.0.1:8080/v1) nor scripted:FILE nor local:PATH.gguf"
    )]
    Backend(String),
    /// The `[llm]` section of `tavern.toml` (or `--set llm.*`) is invalid.
    #[error("tavern.toml [llm]: {0}")]
    Settings(Box<LlmSettingsError>),
}

impl LlmSettings {
    /// `self` with every field that `over` sets replaced.
    pub fn overlay(&self, over: &LlmSettings) -> LlmSettings {
        LlmSettings {
            base_url: over.base_url.clone().or_else(|| self.base_url.clone()),
            model: over.model.clone().or_else(|| self.model.clone()),
            temperature: over.temperature.or(self.temperature),
            max_tokens: over.max_tokens.or(self.max_tokens),
            stream: over.stream.or(self.stream),
            api_key_env: over
                .api_key_env
                .clone()
                .or_else(|| self.api_key_env.clone()),
            timeout_ms: over.timeout_ms.or(self.timeout_ms),
            connect_timeout_ms: over.connect_timeout_ms.or(self.connect_timeout_ms),
            retries: over.retries.or(self.retries),
            retry_backoff_ms: over.retry_backoff_ms.or(self.retry_backoff_ms),
            constrain: over.constrain.or(self.constrain),
            constrain_shape: over.constrain_shape.or(self.constrain_shape),
            answer_follows_calls: over.answer_follows_calls.or(self.answer_follows_calls),
            constrain_answer: over.constrain_answer.or(self.constrain_answer),
            // Key by key: a profile adds to `[llm.extra_body]`.
            extra_body: match (&self.extra_body, &over.extra_body) {
                (Some(a), Some(b)) => {
                    let mut m = a.clone();
                    m.extend(b.iter().map(|(k, v)| (k.clone(), v.clone())));
                    Some(m)
                }
                (a, b) => b.clone().or_else(|| a.clone()),
            },
            seed: over.seed.or(self.seed),
            threads: over.threads.or(self.threads),
            context_size: over.context_size.or(self.context_size),
        }
    }

    /// Reads an object of settings (a node's `configValues`, a profile's `llm`); unknown
    /// keys are ignored, wrongly typed ones are an error naming the key.
    pub fn from_map(m: &Map<String, Value>) -> Result<LlmSettings, LlmSettingsError> {
        let known = [
            "base_url",
            "model",
            "temperature",
            "max_tokens",
            "stream",
            "api_key_env",
            "timeout_ms",
            "connect_timeout_ms",
            "retries",
            "retry_backoff_ms",
            "constrain",
            "constrain_shape",
            "answer_follows_calls",
            "constrain_answer",
            "extra_body",
            "seed",
            "threads",
            "context_size",
        ];
        let picked: Map<String, Value> = m
            .iter()
            .filter(|(k, v)| known.contains(&k.as_str()) && !v.is_null())
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        serde_json::from_value(Value::Object(picked))
            .map_err(|e| LlmSettingsError::Invalid(e.to_string()))
    }

    /// Overrides from the command line: `--llm openai:BASE_URL | scripted:FILE |
    /// local:PATH.gguf | http(s)://…` and `--model M`.
    pub fn from_flags(
        llm: Option<&str>,
        model: Option<&str>,
    ) -> Result<LlmSettings, LlmSettingsError> {
        let base_url = match llm.map(str::trim) {
            None | Some("") => None,
            Some(s) if s.starts_with("scripted:") || s.starts_with(LOCAL) => Some(s.to_string()),
            Some(s) if s.starts_with("openai:") => Some(s["openai:".len()..].to_string()),
            Some(s) if s.starts_with("http://") || s.starts_with("https://") => Some(s.to_string()),
            Some(s) => return Err(LlmSettingsError::Backend(s.to_string())),
        };
        Ok(LlmSettings {
            base_url,
            model: model.map(str::to_string),
            ..LlmSettings::default()
        })
    }

    /// The `[llm]` section of `tavern.toml` (and `--set llm.model=…`).
    pub fn from_settings(s: &Settings) -> Result<LlmSettings, LlmSettingsError> {
        let mut m: Map<String, Value> = Map::new();
        let mut extra = Map::new();
        for (k, v) in s.section("llm") {
            // `[llm.extra_body]` arrives as `extra_body.KEY`.
            match k.strip_prefix("extra_body.") {
                Some(key) => {
                    extra.insert(key.to_string(), v);
                }
                None => {
                    m.insert(k, v);
                }
            }
        }
        if !extra.is_empty() {
            m.insert("extra_body".into(), Value::Object(extra));
        }
        Self::from_map(&m).map_err(|e| LlmSettingsError::Settings(Box::new(e)))
    }

    /// Fills defaults and reads the API key.
    pub fn resolve(&self) -> Result<ResolvedLlm, LlmError> {
        let key_var = self.api_key_env.clone();
        let api_key = match &key_var {
            Some(var) => match std::env::var(var) {
                Ok(k) if !k.trim().is_empty() => Some(k.trim().to_string()),
                _ => {
                    return Err(LlmError::Config(format!(
                        "the API key variable {var} (llm.api_key_env) is not set; export {var}=… or remove api_key_env"
                    )))
                }
            },
            None => std::env::var("OPENAI_API_KEY")
                .ok()
                .map(|k| k.trim().to_string())
                .filter(|k| !k.is_empty()),
        };
        Ok(ResolvedLlm {
            base_url: self
                .base_url
                .clone()
                .unwrap_or_else(|| "https://api.openai.com/v1".into())
                .trim_end_matches('/')
                .to_string(),
            model: self.model.clone().unwrap_or_else(|| "gpt-4o-mini".into()),
            temperature: self.temperature,
            max_tokens: self.max_tokens,
            stream: self.stream.unwrap_or(true),
            api_key,
            timeout: Duration::from_millis(self.timeout_ms.unwrap_or(120_000).max(1)),
            connect_timeout: Duration::from_millis(
                self.connect_timeout_ms.unwrap_or(10_000).max(1),
            ),
            retries: self.retries.unwrap_or(3),
            backoff: Duration::from_millis(self.retry_backoff_ms.unwrap_or(500)),
            constrain_shape: self.constrain_shape.unwrap_or_default(),
            extra_body: self.extra_body.clone().unwrap_or_default(),
            seed: self.seed,
            threads: self.threads.filter(|&t| t > 0).unwrap_or_else(|| {
                std::thread::available_parallelism().map_or(4, |n| n.get().min(8) as u32)
            }),
            context_size: self.context_size.filter(|&c| c > 0).unwrap_or(4096),
        })
    }
}

/// Settings with defaults filled in.
#[derive(Clone, PartialEq)]
pub struct ResolvedLlm {
    /// Base URL without a trailing `/`.
    pub base_url: String,
    /// Model name.
    pub model: String,
    /// Sampling temperature.
    pub temperature: Option<f64>,
    /// Most tokens to generate.
    pub max_tokens: Option<u64>,
    /// Whether to stream.
    pub stream: bool,
    /// Bearer token, when one is set.
    pub api_key: Option<String>,
    /// Whole-request limit (non-streaming) or the longest silence (streaming).
    pub timeout: Duration,
    /// Connection limit.
    pub connect_timeout: Duration,
    /// Retries after retryable failures.
    pub retries: u32,
    /// First retry delay.
    pub backoff: Duration,
    /// How a request's [`Constraint`] is sent.
    pub constrain_shape: ConstrainShape,
    /// Fields added to the request body.
    pub extra_body: Map<String, Value>,
    /// The sampler's seed, if one is set.
    pub seed: Option<u64>,
    /// Threads of a `local:` model.
    pub threads: u32,
    /// Context of a `local:` model, in tokens.
    pub context_size: u32,
}

impl std::fmt::Debug for ResolvedLlm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the key.
        f.debug_struct("ResolvedLlm")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("stream", &self.stream)
            .field("api_key", &self.api_key.as_ref().map(|_| "***"))
            .finish_non_exhaustive()
    }
}

/// One chat request: messages (`{"role", "content"}` objects) and, for native function
/// calling, OpenAI `tools`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChatRequest {
    /// The conversation.
    pub messages: Vec<Value>,
    /// OpenAI tool definitions (sent as `tools` when non-empty).
    pub tools: Vec<Value>,
    /// What the model may write this turn (an agent's `constrain`), if anything.
    pub constraint: Option<Constraint>,
    /// Where the model should stop (sent as `stop` when non-empty).
    pub stop: Vec<String>,
}

/// Where a streaming backend sends text as it arrives.
pub type ChunkSink = UnboundedSender<String>;

/// The future a backend returns.
pub type ChatFuture<'a> = Pin<Box<dyn Future<Output = Result<String, LlmError>> + Send + 'a>>;

/// Produces the model's text for a request.
pub trait ChatBackend: Send + Sync + 'static {
    /// Answers `req`. When `settings.stream` and a `sink` is given, text is also sent to the
    /// sink as it arrives; the returned string is always the whole text.
    fn chat<'a>(
        &'a self,
        req: &'a ChatRequest,
        settings: &'a ResolvedLlm,
        sink: Option<&'a ChunkSink>,
    ) -> ChatFuture<'a>;
}

/// Picks the backend for a base URL: `scripted:FILE`, `local:PATH.gguf` (with the
/// `llm-local` feature; without it, an error saying so) or an HTTP server (with the
/// `llm-http` feature; without it, an error saying the host must supply a backend).
pub fn backend_for(base_url: &str) -> Result<Arc<dyn ChatBackend>, LlmError> {
    if let Some(file) = base_url.strip_prefix("scripted:") {
        return Ok(Arc::new(ScriptedBackend::from_file(std::path::Path::new(
            file,
        ))?));
    }
    if let Some(path) = base_url.strip_prefix(LOCAL) {
        return local_backend(std::path::Path::new(path.trim()));
    }
    http_backend()
}

/// The `base_url` prefix of a model run in this process: `local:PATH.gguf`.
pub const LOCAL: &str = "local:";

/// The in-process model at `path` (the `llm-local` feature): loaded once per process and
/// shared; a missing, unreadable or non-GGUF file is an error naming it. Without the
/// feature, an error saying how to get it.
pub fn local_backend(path: &std::path::Path) -> Result<Arc<dyn ChatBackend>, LlmError> {
    #[cfg(feature = "llm-local")]
    return Ok(Arc::new(LocalBackend::open(path)?));
    #[cfg(not(feature = "llm-local"))]
    Err(LlmError::Config(format!(
        "local:{}: this build of tavern runs no model in-process (the `llm-local` feature); build it with `cargo build --features llm-local` (llama.cpp is compiled: cmake and a C++ compiler), or serve the model with llama.cpp's llama-server and use openai:http://127.0.0.1:8080/v1",
        path.display()
    )))
}

/// The built-in HTTP backend, when this build has one.
pub fn http_backend() -> Result<Arc<dyn ChatBackend>, LlmError> {
    #[cfg(feature = "llm-http")]
    return Ok(Arc::new(OpenAiBackend::new()));
    #[cfg(not(feature = "llm-http"))]
    Err(LlmError::Config(NO_HTTP.to_string()))
}

/// Why an HTTP model cannot be reached in a build without `llm-http`.
#[cfg(not(feature = "llm-http"))]
const NO_HTTP: &str = "this build of tavern has no HTTP model client (the `llm-http` feature); give the agent a ChatBackend (AgentRuntimeBuilder::backend) or use scripted:FILE";

/// Why the model gave no text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LlmError {
    /// The settings cannot work (no TLS, missing key variable, bad URL …).
    #[error("LLM settings: {0}")]
    Config(String),
    /// The server could not be reached.
    #[error("cannot reach the model at {url}: {message} (after {attempts} attempt(s))")]
    Connect {
        /// The request URL.
        url: String,
        /// What the connection said.
        message: String,
        /// Attempts made.
        attempts: u32,
    },
    /// The server did not answer in time.
    #[error(
        "the model at {url} did not answer within {after_ms} ms (after {attempts} attempt(s))"
    )]
    Timeout {
        /// The request URL.
        url: String,
        /// The limit.
        after_ms: u64,
        /// Attempts made.
        attempts: u32,
    },
    /// The server answered with an error status.
    #[error("the model at {url} answered HTTP {status}: {body} (after {attempts} attempt(s))")]
    Status {
        /// The request URL.
        url: String,
        /// HTTP status.
        status: u16,
        /// The start of the body (the server's error message).
        body: String,
        /// Attempts made.
        attempts: u32,
    },
    /// The answer was not a chat completion.
    #[error("the model at {url} sent an unexpected answer: {message}")]
    BadResponse {
        /// The request URL.
        url: String,
        /// What was wrong.
        message: String,
    },
    /// The scripted backend has a problem (file, or no reply left).
    #[error("scripted model {file}: {message}")]
    Scripted {
        /// The replies file.
        file: String,
        /// What is wrong.
        message: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `local:PATH` is read from `--llm`; without `llm-local` it is an error saying how to
    /// get the feature, with it a missing file is named.
    #[test]
    fn local_models_follow_the_feature() {
        let flags = LlmSettings::from_flags(Some("local:models/npc.gguf"), None).unwrap();
        assert_eq!(flags.base_url.as_deref(), Some("local:models/npc.gguf"));
        let e = LlmSettings::from_flags(Some("lokal:x.gguf"), None).unwrap_err();
        assert!(e.to_string().contains("local:PATH.gguf"), "{e}");
        let e = match backend_for("local:/nonexistent/tavern/npc.gguf") {
            Err(LlmError::Config(m)) => m,
            Err(e) => panic!("wrong error: {e}"),
            Ok(_) => panic!("no such model"),
        };
        assert!(e.contains("/nonexistent/tavern/npc.gguf"), "{e}");
        #[cfg(feature = "llm-local")]
        assert!(e.contains("no such file"), "{e}");
        #[cfg(not(feature = "llm-local"))]
        assert!(
            e.contains("`llm-local` feature") && e.contains("cargo build --features llm-local"),
            "{e}"
        );
    }

    /// Without `llm-http` an HTTP base URL is a configuration error that tells the host what
    /// to do; with it, the OpenAI client answers.
    #[test]
    fn http_backend_follows_the_feature() {
        let r = backend_for("http://127.0.0.1:1/v1");
        #[cfg(feature = "llm-http")]
        assert!(r.is_ok());
        #[cfg(not(feature = "llm-http"))]
        match r {
            Err(LlmError::Config(m)) => {
                assert!(m.contains("llm-http") && m.contains("ChatBackend"), "{m}")
            }
            Err(e) => panic!("wrong error: {e}"),
            Ok(_) => panic!("a lean build has no HTTP backend"),
        }
    }
}
