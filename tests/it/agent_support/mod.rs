//! A real OpenAI-compatible chat-completions server on 127.0.0.1 for the agent tests:
//! replies from a queue (plain JSON or SSE written slowly), every request body recorded.

#![allow(dead_code)]

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{json, Value};

/// One answer of the server.
#[derive(Clone, Debug)]
pub enum Reply {
    /// A chat completion with this text (SSE when the request asks to stream).
    Text(String),
    /// An error status with a JSON error body.
    Status(u16),
    /// SSE in pieces of `piece` characters, `delay` apart (whatever the request asked).
    Slow {
        text: String,
        piece: usize,
        delay: Duration,
    },
}

#[derive(Default)]
struct Shared {
    replies: Mutex<VecDeque<Reply>>,
    requests: Mutex<Vec<Value>>,
}

/// The running server.
pub struct Server {
    pub addr: SocketAddr,
    shared: Arc<Shared>,
}

impl Server {
    /// `http://127.0.0.1:PORT/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Every request body received so far.
    pub fn requests(&self) -> Vec<Value> {
        self.shared.requests.lock().unwrap().clone()
    }

    /// The last message's content of request `i`.
    pub fn last_user_message(&self, i: usize) -> String {
        let r = &self.requests()[i];
        let msgs = r["messages"].as_array().expect("messages");
        msgs.last().unwrap()["content"]
            .as_str()
            .unwrap()
            .to_string()
    }

    /// The system message of request `i`.
    pub fn system_message(&self, i: usize) -> String {
        self.requests()[i]["messages"][0]["content"]
            .as_str()
            .unwrap()
            .to_string()
    }
}

fn sse_event(text: &str) -> String {
    let v = json!({"choices": [{"index": 0, "delta": {"content": text}}]});
    format!("data: {v}\n\n")
}

fn pieces(text: &str, n: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars.chunks(n.max(1)).map(|c| c.iter().collect()).collect()
}

fn sse(text: String, piece: usize, delay: Duration) -> Response {
    let events: VecDeque<String> = pieces(&text, piece)
        .iter()
        .map(|p| sse_event(p))
        .chain(["data: [DONE]\n\n".to_string()])
        .collect();
    let stream = futures_util::stream::unfold((events, true), move |(mut ev, first)| async move {
        let next = ev.pop_front()?;
        if !first && !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        Some((Ok::<_, std::convert::Infallible>(next), (ev, false)))
    });
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .body(Body::from_stream(stream))
        .unwrap()
}

async fn chat(State(s): State<Arc<Shared>>, Json(body): Json<Value>) -> Response {
    let stream = body["stream"] == json!(true);
    s.requests.lock().unwrap().push(body);
    let reply = s
        .replies
        .lock()
        .unwrap()
        .pop_front()
        .unwrap_or(Reply::Text("(the test server has no reply left)".into()));
    match reply {
        Reply::Status(code) => (
            StatusCode::from_u16(code).unwrap(),
            Json(json!({"error": {"message": format!("test server says {code}")}})),
        )
            .into_response(),
        Reply::Slow { text, piece, delay } => sse(text, piece, delay),
        Reply::Text(text) if stream => sse(text, 7, Duration::ZERO),
        Reply::Text(text) => Json(json!({
            "id": "chatcmpl-test",
            "object": "chat.completion",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]
        }))
        .into_response(),
    }
}

/// Starts a server answering with `replies`, in order.
pub async fn serve(replies: Vec<Reply>) -> Server {
    let shared = Arc::new(Shared {
        replies: Mutex::new(replies.into()),
        requests: Mutex::new(Vec::new()),
    });
    let app = Router::new()
        .route("/v1/chat/completions", post(chat))
        .with_state(shared.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Server { addr, shared }
}

/// `<ACTION>` text calling `tool` with `args` (string values).
pub fn action(prose: &str, tool: &str, args: &[(&str, &str)]) -> String {
    let mut s = format!("{prose}\n<ACTION>\n  <{tool}>\n");
    for (k, v) in args {
        s.push_str(&format!("    <{k}>{v}</{k}>\n"));
    }
    s.push_str(&format!("  </{tool}>\n</ACTION>"));
    s
}
