//! The accept loop of `tavern serve`, with the connection limits axum's own `serve` does not
//! offer (issue 24 item 4):
//! - a **header-read timeout** (hyper's HTTP/1 `header_read_timeout`, on hyper-util's Tokio
//!   timer): a request head must arrive whole within it, counted from when the connection
//!   starts waiting for one — when it opens, and again after each response — so a client
//!   trickling headers (slowloris) or sending nothing is closed;
//! - an **idle timeout**: a kept-alive connection with no request in flight for that long
//!   is closed (a request is in flight from its head until its response body is dropped,
//!   so a long call or an open event stream is never idle). Requests only count themselves
//!   in and out with atomics; the connection's one idle timer looks at the count when it
//!   fires and, unless the connection has been idle long enough, is set again for when it
//!   would be (per request, no wake-up of the connection's task and no new timer);
//! - a **connection cap**: past it a new connection gets one `503 too_many_connections`
//!   JSON answer and is closed, so descriptors cannot run out and new clients are told why
//!   instead of hanging.
//!
//! Shutdown: [`Conns::close_all`] asks every connection to finish its request in flight and
//! close; [`Conns::wait`] waits for them.

use std::convert::Infallible;
use std::future::Future;
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::Request;
use axum::response::Response;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

/// The connection limits of a server.
#[derive(Debug, Clone, Copy)]
pub struct ConnLimits {
    /// A request head must arrive within this (from when the connection waits for one).
    pub header_timeout: Duration,
    /// A connection with no request in flight is closed after this.
    pub idle_timeout: Duration,
    /// Most connections open at once.
    pub max_connections: usize,
}

/// Refused connections answered at once at most; past it a refused connection is just
/// closed (answering must not itself use up descriptors).
const REFUSING_MAX: usize = 64;

/// The open connections of a server.
pub struct Conns {
    permits: Arc<Semaphore>,
    refusing: Arc<Semaphore>,
    max: usize,
    closing: CancellationToken,
}

impl Conns {
    fn new(max: usize) -> Self {
        let max = max.max(1);
        Conns {
            permits: Arc::new(Semaphore::new(max)),
            refusing: Arc::new(Semaphore::new(REFUSING_MAX)),
            max,
            closing: CancellationToken::new(),
        }
    }

    /// Asks every connection to close after its request in flight.
    pub fn close_all(&self) {
        self.closing.cancel();
    }

    /// Waits (at most `max`) until every connection has closed; returns whether they did.
    pub async fn wait(&self, max: Duration) -> bool {
        let all = self.permits.acquire_many(self.max as u32);
        matches!(tokio::time::timeout(max, all).await, Ok(Ok(_)))
    }
}

/// A handle on the connection a request came on (in the request's extensions): a route
/// whose client has stopped reading (a stuck event-stream reader) closes it with
/// [`ConnHandle::close_soon`].
#[derive(Clone, Debug)]
pub struct ConnHandle(CancellationToken);

/// How long a connection asked to close gets to finish what it is writing.
pub const CLOSE_GRACE: Duration = Duration::from_secs(2);

impl ConnHandle {
    /// Closes the connection within [`CLOSE_GRACE`], whatever it is doing then.
    pub fn close_soon(&self) {
        self.0.cancel();
    }
}

/// What one connection is doing: requests in flight and when the last one ended. Written
/// by its requests with plain atomics (nothing wakes the connection's task), read by its
/// idle timer only when that fires.
struct Activity {
    in_flight: AtomicUsize,
    /// Milliseconds since `start` when the last request ended.
    last_ms: AtomicU64,
    start: Instant,
}

impl Activity {
    fn new() -> Self {
        Activity {
            in_flight: AtomicUsize::new(0),
            last_ms: AtomicU64::new(0),
            start: Instant::now(),
        }
    }

    fn begin(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        InFlight(self.clone())
    }

    /// When the connection will have been idle `limit`, or `None` while a request runs.
    fn idle_deadline(&self, limit: Duration) -> Option<tokio::time::Instant> {
        if self.in_flight.load(Ordering::Acquire) > 0 {
            return None;
        }
        let last = self.start + Duration::from_millis(self.last_ms.load(Ordering::Acquire));
        Some(tokio::time::Instant::from_std(last + limit))
    }
}

/// One request in flight on a connection; ends when dropped (with its response body).
struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        let a = &self.0;
        // The time first: a timer that sees no request in flight must see this end.
        a.last_ms
            .store(a.start.elapsed().as_millis() as u64, Ordering::Release);
        a.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A response body that keeps its request counted in flight until it is dropped.
struct Tracked {
    inner: Body,
    _in_flight: InFlight,
}

impl http_body::Body for Tracked {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// The JSON answer of a connection past the cap.
fn refusal(max: usize) -> Vec<u8> {
    let body = serde_json::json!({"error": {
        "code": "too_many_connections",
        "message": format!("this server has {max} connections open, the most it keeps (--max-connections); try again shortly"),
        "suggestions": ["close idle connections, or start the server with a larger --max-connections"],
    }})
    .to_string();
    format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\nretry-after: 1\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Reads what the client sent (briefly, so closing does not reset the connection before
/// the client reads the answer), answers 503 and closes.
async fn refuse(mut tcp: TcpStream, max: usize) {
    let mut buf = [0u8; 4096];
    let _ = tokio::time::timeout(Duration::from_millis(500), tcp.read(&mut buf)).await;
    let _ = tcp.write_all(&refusal(max)).await;
    let _ = tcp.shutdown().await;
    // Drain what is left, briefly, then drop.
    let _ = tokio::time::timeout(Duration::from_millis(500), async {
        while matches!(tcp.read(&mut buf).await, Ok(n) if n > 0) {}
    })
    .await;
}

/// Serves every request of a connection accepted on `listener` with `handler` until `stop`
/// resolves; returns the open connections (to close and wait for). Accept errors (out of
/// descriptors, say) are logged and retried.
pub async fn accept_loop<H, F>(
    listener: TcpListener,
    handler: H,
    limits: ConnLimits,
    stop: impl Future<Output = ()>,
) -> Conns
where
    H: Fn(Request) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response> + Send + 'static,
{
    let conns = Conns::new(limits.max_connections);
    let mut stop = pin!(stop);
    loop {
        let (tcp, _) = tokio::select! {
            _ = &mut stop => break,
            r = listener.accept() => match r {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!("accepting a connection failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        // Small JSON-RPC answers must not wait for Nagle + delayed ACK (~40 ms per call).
        let _ = tcp.set_nodelay(true);
        let Ok(permit) = conns.permits.clone().try_acquire_owned() else {
            if let Ok(p) = conns.refusing.clone().try_acquire_owned() {
                let max = conns.max;
                tokio::spawn(async move {
                    refuse(tcp, max).await;
                    drop(p);
                });
            }
            continue;
        };
        // A token of its own per connection: waiting on the server-wide one would take
        // that one's lock at every wake-up of every connection.
        let closing = conns.closing.child_token();
        let handler = handler.clone();
        tokio::spawn(async move {
            serve_one(tcp, handler, limits, closing).await;
            drop(permit);
        });
    }
    conns
}

async fn serve_one<H, F>(tcp: TcpStream, handler: H, limits: ConnLimits, closing: CancellationToken)
where
    H: Fn(Request) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response> + Send + 'static,
{
    let activity = Arc::new(Activity::new());
    let kill = CancellationToken::new();
    let service = {
        let a = activity.clone();
        let handle = ConnHandle(kill.clone());
        hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
            let in_flight = a.begin();
            let mut req = req.map(Body::new);
            req.extensions_mut().insert(handle.clone());
            let answer = handler(req);
            async move {
                let res = answer.await;
                Ok::<_, Infallible>(res.map(|inner| Tracked {
                    inner,
                    _in_flight: in_flight,
                }))
            }
        })
    };
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .keep_alive(true);
    let conn = builder.serve_connection(TokioIo::new(tcp), service);
    let mut conn = pin!(conn);
    let mut closing = pin!(closing.cancelled_owned());
    let mut killed = pin!(kill.cancelled());
    // One timer per connection, looked at only when it fires: idle then closes; otherwise
    // it is set again for when the connection would next have been idle long enough.
    let limit = limits.idle_timeout;
    let mut idle = pin!(tokio::time::sleep(limit));
    let mut closed = false;
    loop {
        tokio::select! {
            // The connection first: a request that has arrived (after the runtime was
            // busy, say) is read and counted before the idle deadline is looked at.
            biased;
            r = conn.as_mut() => {
                if let Err(e) = r {
                    tracing::debug!("connection ended: {e}");
                }
                break;
            }
            _ = closing.as_mut(), if !closed => {
                closed = true;
                conn.as_mut().graceful_shutdown();
            }
            _ = killed.as_mut() => {
                // Let it finish what it is writing, briefly; then drop it, whatever it does.
                conn.as_mut().graceful_shutdown();
                let _ = tokio::time::timeout(CLOSE_GRACE, conn.as_mut()).await;
                break;
            }
            _ = idle.as_mut(), if !closed => {
                let now = tokio::time::Instant::now();
                match activity.idle_deadline(limit) {
                    Some(d) if d <= now => {
                        closed = true;
                        conn.as_mut().graceful_shutdown();
                    }
                    Some(d) => idle.as_mut().reset(d),
                    None => idle.as_mut().reset(now + limit),
                }
            }
        }
    }
}
