//! An OpenAI-compatible chat-completions client (`POST {base_url}/chat/completions`), plain
//! and streaming (server-sent events), with timeouts and retries on 429/5xx.

use std::sync::Mutex;
use std::time::Duration;

use serde_json::{json, Map, Value};

use super::{
    ChatBackend, ChatFuture, ChatRequest, ChunkSink, ConstrainShape, LlmError, ResolvedLlm,
};

/// The HTTP backend. One per process is enough; it keeps a connection pool.
#[derive(Debug, Default)]
pub struct OpenAiBackend {
    /// A client per connect timeout (built on first use).
    client: Mutex<Option<(Duration, reqwest::Client)>>,
}

impl OpenAiBackend {
    /// A backend with no connection open yet.
    pub fn new() -> Self {
        Self::default()
    }

    fn client(&self, connect: Duration) -> Result<reqwest::Client, LlmError> {
        // A poisoned lock only means another request panicked while cloning; the slot is fine.
        let mut slot = self.client.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((c, client)) = slot.as_ref() {
            if *c == connect {
                return Ok(client.clone());
            }
        }
        let client = reqwest::Client::builder()
            .connect_timeout(connect)
            .build()
            .map_err(|e| LlmError::Config(format!("cannot build the HTTP client: {e}")))?;
        *slot = Some((connect, client.clone()));
        Ok(client)
    }
}

/// What one attempt ended in.
enum Attempt {
    Done(String),
    /// Worth another try (429, 5xx, timeout, refused connection), after this delay if given.
    Retry(LlmError, Option<Duration>),
    Fail(LlmError),
}

fn body_json(req: &ChatRequest, s: &ResolvedLlm) -> Value {
    let mut b = Map::new();
    b.insert("model".into(), json!(s.model));
    b.insert("messages".into(), Value::Array(req.messages.clone()));
    if let Some(t) = s.temperature {
        b.insert("temperature".into(), json!(t));
    }
    if let Some(m) = s.max_tokens {
        b.insert("max_tokens".into(), json!(m));
    }
    if !req.tools.is_empty() {
        b.insert("tools".into(), Value::Array(req.tools.clone()));
    }
    b.insert("stream".into(), json!(s.stream));
    if let Some(seed) = s.seed {
        b.insert("seed".into(), json!(seed));
    }
    if !req.stop.is_empty() {
        b.insert("stop".into(), json!(req.stop));
    }
    if let Some(c) = &req.constraint {
        match (s.constrain_shape, &c.json_schema) {
            (ConstrainShape::Grammar, _) => {
                b.insert("grammar".into(), json!(c.gbnf));
            }
            (ConstrainShape::JsonSchema, Some(schema)) => {
                b.insert(
                    "response_format".into(),
                    json!({"type": "json_schema", "json_schema": {"name": "tool_call", "schema": schema, "strict": true}}),
                );
            }
            (ConstrainShape::GuidedJson, Some(schema)) => {
                b.insert("guided_json".into(), schema.clone());
            }
            // A turn a JSON schema cannot say (a call or prose, a format that is not one
            // JSON document): only the stop sequences.
            (_, None) => {}
        }
    }
    for (k, v) in &s.extra_body {
        b.insert(k.clone(), v.clone());
    }
    Value::Object(b)
}

fn short(s: &str) -> String {
    let s = s.trim();
    match s.char_indices().nth(300) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

/// The text of a message: its `content` (a string or a list of text parts); when it holds
/// `tool_calls`, the whole message as JSON (the protocol's JSON reader takes that form).
fn message_text(msg: &Value) -> Option<String> {
    let content = match msg.get("content") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect(),
        _ => String::new(),
    };
    match msg.get("tool_calls") {
        Some(Value::Array(tc)) if !tc.is_empty() => {
            Some(json!({"content": content, "tool_calls": tc}).to_string())
        }
        _ if msg.get("content").is_some() || msg.is_object() => Some(content),
        _ => None,
    }
}

fn server_error(v: &Value) -> Option<String> {
    let e = v.get("error")?;
    Some(
        e.get("message")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| e.to_string()),
    )
}

/// Accumulates a streamed reply.
#[derive(Default)]
struct StreamState {
    text: String,
    /// Tool-call deltas by index: (id, name, arguments).
    calls: Vec<(String, String, String)>,
    pending: Vec<u8>,
    done: bool,
}

impl StreamState {
    /// Feeds raw bytes; sends new text to `sink`. Errors carry the server's message.
    fn feed(&mut self, bytes: &[u8], sink: Option<&ChunkSink>) -> Result<(), String> {
        self.pending.extend_from_slice(bytes);
        while let Some(nl) = memchr::memchr(b'\n', &self.pending) {
            let line: Vec<u8> = self.pending.drain(..=nl).collect();
            let line = String::from_utf8_lossy(&line);
            self.line(line.trim_end_matches(['\r', '\n']), sink)?;
        }
        Ok(())
    }

    fn line(&mut self, line: &str, sink: Option<&ChunkSink>) -> Result<(), String> {
        let Some(data) = line.strip_prefix("data:") else {
            return Ok(()); // comments, `event:`, `id:`, blank separators
        };
        let data = data.trim();
        if data == "[DONE]" {
            self.done = true;
            return Ok(());
        }
        if data.is_empty() || self.done {
            return Ok(());
        }
        let v: Value = serde_json::from_str(data)
            .map_err(|e| format!("a stream event is not JSON ({e}): {}", short(data)))?;
        if let Some(m) = server_error(&v) {
            return Err(format!("the stream reported an error: {m}"));
        }
        let Some(delta) = v.pointer("/choices/0/delta") else {
            return Ok(());
        };
        if let Some(t) = delta.get("content").and_then(Value::as_str) {
            if !t.is_empty() {
                self.text.push_str(t);
                if let Some(s) = sink {
                    let _ = s.send(t.to_string());
                }
            }
        }
        if let Some(Value::Array(tcs)) = delta.get("tool_calls") {
            for tc in tcs {
                let i = tc.get("index").and_then(Value::as_u64).unwrap_or(0) as usize;
                while self.calls.len() <= i {
                    self.calls.push(Default::default());
                }
                let slot = &mut self.calls[i];
                if let Some(id) = tc.get("id").and_then(Value::as_str) {
                    slot.0.push_str(id);
                }
                if let Some(f) = tc.get("function") {
                    if let Some(n) = f.get("name").and_then(Value::as_str) {
                        slot.1.push_str(n);
                    }
                    if let Some(a) = f.get("arguments").and_then(Value::as_str) {
                        slot.2.push_str(a);
                    }
                }
            }
        }
        Ok(())
    }

    fn finish(mut self, sink: Option<&ChunkSink>) -> Result<String, String> {
        if !self.pending.is_empty() {
            let rest = String::from_utf8_lossy(&std::mem::take(&mut self.pending)).into_owned();
            self.line(rest.trim_end(), sink)?;
        }
        if self.calls.is_empty() {
            return Ok(self.text);
        }
        let calls: Vec<Value> = self
            .calls
            .into_iter()
            .map(|(id, name, args)| {
                json!({"id": id, "type": "function", "function": {"name": name, "arguments": args}})
            })
            .collect();
        Ok(json!({"content": self.text, "tool_calls": calls}).to_string())
    }
}

fn retry_after(resp: &reqwest::Response) -> Option<Duration> {
    let v = resp
        .headers()
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?;
    let secs: f64 = v.trim().parse().ok()?;
    Some(Duration::from_secs_f64(secs.clamp(0.0, 30.0)))
}

async fn attempt(
    client: &reqwest::Client,
    url: &str,
    body: &Value,
    s: &ResolvedLlm,
    sink: Option<&ChunkSink>,
    n: u32,
) -> Attempt {
    let mut rb = client.post(url).json(body);
    if let Some(k) = &s.api_key {
        rb = rb.bearer_auth(k);
    }
    if !s.stream {
        rb = rb.timeout(s.timeout);
    }
    let timeout_err = || LlmError::Timeout {
        url: url.to_string(),
        after_ms: s.timeout.as_millis() as u64,
        attempts: n,
    };
    let send = tokio::time::timeout(s.timeout + s.connect_timeout, rb.send()).await;
    let resp = match send {
        Err(_) => return Attempt::Retry(timeout_err(), None),
        Ok(Err(e)) if e.is_timeout() => return Attempt::Retry(timeout_err(), None),
        Ok(Err(e)) => {
            let mut msg = e.to_string();
            let mut src = std::error::Error::source(&e);
            while let Some(inner) = src {
                msg = format!("{msg}: {inner}");
                src = inner.source();
            }
            return Attempt::Retry(
                LlmError::Connect {
                    url: url.to_string(),
                    message: msg,
                    attempts: n,
                },
                None,
            );
        }
        Ok(Ok(r)) => r,
    };
    let status = resp.status();
    if !status.is_success() {
        let wait = retry_after(&resp);
        let text = tokio::time::timeout(s.timeout, resp.text())
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or_default();
        let body = serde_json::from_str::<Value>(&text)
            .ok()
            .and_then(|v| server_error(&v))
            .unwrap_or(text);
        let err = LlmError::Status {
            url: url.to_string(),
            status: status.as_u16(),
            body: short(&body),
            attempts: n,
        };
        return if status.as_u16() == 429 || status.is_server_error() {
            Attempt::Retry(err, wait)
        } else {
            Attempt::Fail(err)
        };
    }
    let bad = |message: String| {
        Attempt::Fail(LlmError::BadResponse {
            url: url.to_string(),
            message,
        })
    };
    let is_sse = resp
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("text/event-stream"));
    if s.stream && is_sse {
        let mut resp = resp;
        let mut st = StreamState::default();
        loop {
            match tokio::time::timeout(s.timeout, resp.chunk()).await {
                Err(_) => return Attempt::Fail(timeout_err()),
                Ok(Err(e)) => return bad(format!("the stream broke off: {e}")),
                Ok(Ok(None)) => break,
                Ok(Ok(Some(bytes))) => {
                    if let Err(m) = st.feed(&bytes, sink) {
                        return bad(m);
                    }
                    if st.done {
                        break;
                    }
                }
            }
        }
        return match st.finish(sink) {
            Ok(t) => Attempt::Done(t),
            Err(m) => bad(m),
        };
    }
    // A plain JSON answer (also when a server ignores `stream: true`).
    let text = match tokio::time::timeout(s.timeout, resp.text()).await {
        Err(_) => return Attempt::Fail(timeout_err()),
        Ok(Err(e)) => return bad(format!("cannot read the body: {e}")),
        Ok(Ok(t)) => t,
    };
    let v: Value = match serde_json::from_str(&text) {
        Ok(v) => v,
        Err(e) => return bad(format!("the body is not JSON ({e}): {}", short(&text))),
    };
    if let Some(m) = server_error(&v) {
        return bad(format!("the server reported an error: {m}"));
    }
    match v.pointer("/choices/0/message").and_then(message_text) {
        Some(t) => {
            if let (true, Some(sink)) = (s.stream, sink) {
                let _ = sink.send(t.clone());
            }
            Attempt::Done(t)
        }
        None => bad(format!("no choices[0].message in {}", short(&text))),
    }
}

impl ChatBackend for OpenAiBackend {
    fn chat<'a>(
        &'a self,
        req: &'a ChatRequest,
        s: &'a ResolvedLlm,
        sink: Option<&'a ChunkSink>,
    ) -> ChatFuture<'a> {
        Box::pin(async move {
            let url = format!("{}/chat/completions", s.base_url);
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(LlmError::Config(format!(
                    "base URL '{}' is not http(s)://…; write e.g. http://127.0.0.1:8080/v1 or scripted:replies.json",
                    s.base_url
                )));
            }
            if url.starts_with("https://") && !cfg!(feature = "tls") {
                return Err(LlmError::Config(format!(
                    "{url} needs TLS, and this tavern was built without it: rebuild with `cargo build --features tls`, or use an http:// server"
                )));
            }
            let client = self.client(s.connect_timeout)?;
            let body = body_json(req, s);
            let mut n = 0;
            loop {
                n += 1;
                match attempt(&client, &url, &body, s, sink, n).await {
                    Attempt::Done(t) => return Ok(t),
                    Attempt::Fail(e) => return Err(e),
                    Attempt::Retry(e, wait) => {
                        if n > s.retries {
                            return Err(e);
                        }
                        let backoff = s.backoff.saturating_mul(1 << (n - 1).min(6));
                        let wait = wait.unwrap_or(backoff).min(Duration::from_secs(30));
                        tracing::warn!(
                            attempt = n,
                            "LLM request failed, retrying in {wait:?}: {e}"
                        );
                        tokio::time::sleep(wait).await;
                    }
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sse_lines_split_anywhere_give_the_same_text() {
        let body = "data: {\"choices\":[{\"delta\":{\"content\":\"Hel\"}}]}\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"lo\"}}]}\r\n\r\ndata: [DONE]\n\n";
        for cut in 0..body.len() {
            let mut st = StreamState::default();
            st.feed(&body.as_bytes()[..cut], None).unwrap();
            st.feed(&body.as_bytes()[cut..], None).unwrap();
            assert_eq!(st.finish(None).unwrap(), "Hello", "cut at {cut}");
        }
    }

    #[test]
    fn streamed_tool_calls_become_an_assistant_message() {
        let mut st = StreamState::default();
        st.feed(b"data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c1\",\"function\":{\"name\":\"Echo\",\"arguments\":\"{\\\"te\"}}]}}]}\n", None).unwrap();
        st.feed(b"data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"xt\\\":1}\"}}]}}]}\n", None).unwrap();
        let v: Value = serde_json::from_str(&st.finish(None).unwrap()).unwrap();
        assert_eq!(v["tool_calls"][0]["function"]["name"], "Echo");
        assert_eq!(v["tool_calls"][0]["function"]["arguments"], "{\"text\":1}");
    }
}
