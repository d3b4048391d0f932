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
//! - a **body deadline and minimum rate** (issue 35 item 1): a request body must arrive
//!   whole within `body_timeout` of its head, and at `min_body_rate` bytes a second or more
//!   over every [`RATE_WINDOW`]; past either the connection is closed (and with it the
//!   request and what it held). The same one timer per connection checks it: requests
//!   count the bytes of their body with atomics, the timer compares when it fires;
//! - a **cap on the bytes of request bodies held at once** across all connections: a body
//!   that declares its length reserves it when its head arrives (refused 503
//!   `body_budget_exceeded` before it is read when it does not fit); a body without a length
//!   (chunked) counts as it arrives and is refused the same way once the cap is passed. What
//!   a request reserved is given back when its handler has answered, or its connection
//!   closed;
//! - a **connection cap**: past it a new connection gets one `503 too_many_connections`
//!   JSON answer and is closed, so descriptors cannot run out and new clients are told why
//!   instead of hanging. At most `REFUSING_MAX` are being answered at once; past that the
//!   accept loop waits for one to finish (the others wait in the listen backlog) rather
//!   than dropping a connection unanswered.
//!
//! Shutdown: [`Conns::close_all`] asks every connection to finish its request in flight and
//! close; [`Conns::wait`] waits for them.

use std::convert::Infallible;
use std::future::Future;
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::Request;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use http_body::Body as _;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::rest::ApiError;

/// The connection limits of a server.
#[derive(Debug, Clone, Copy)]
pub struct ConnLimits {
    /// A request head must arrive within this (from when the connection waits for one).
    pub header_timeout: Duration,
    /// A connection with no request in flight is closed after this.
    pub idle_timeout: Duration,
    /// Most connections open at once.
    pub max_connections: usize,
    /// The limits on request bodies.
    pub bodies: BodyLimits,
    /// The largest body a request may declare (`--max-body-bytes`): a larger one is refused
    /// unread by the guard (413), so it reserves nothing.
    pub max_body_bytes: usize,
}

/// The limits on request bodies (issue 35 item 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyLimits {
    /// A body must arrive whole within this, counted from when its head arrived.
    pub timeout: Duration,
    /// Fewest bytes a second a body must arrive at, over every [`RATE_WINDOW`] (0 = none).
    pub min_rate: u64,
    /// Most bytes of request bodies held at once, across all connections.
    pub max_held: usize,
}

impl Default for BodyLimits {
    fn default() -> Self {
        BodyLimits {
            timeout: Duration::from_secs(60),
            min_rate: 1024,
            max_held: 256 * 1024 * 1024,
        }
    }
}

/// The span over which a body's rate is measured: a body that brings fewer than
/// `min_rate × 5` bytes in any 5 s (from its head on) is too slow.
pub const RATE_WINDOW: Duration = Duration::from_secs(5);

/// Refused connections being answered at once at most (answering must not itself use up
/// descriptors); past it the accept loop waits for one of them to end.
const REFUSING_MAX: usize = 128;

/// The bytes of request bodies held at once, across all connections.
struct Budget {
    held: AtomicUsize,
    max: usize,
}

impl Budget {
    /// Reserves `n` bytes if they fit.
    fn reserve(&self, n: usize) -> bool {
        self.held
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |h| {
                h.checked_add(n).filter(|t| *t <= self.max)
            })
            .is_ok()
    }

    /// Counts `n` bytes that have arrived; whether the total is still within the cap.
    fn count(&self, n: usize) -> bool {
        self.held.fetch_add(n, Ordering::AcqRel).saturating_add(n) <= self.max
    }

    fn release(&self, n: usize) {
        if n > 0 {
            self.held.fetch_sub(n, Ordering::AcqRel);
        }
    }
}

/// The open connections of a server.
pub struct Conns {
    permits: Arc<Semaphore>,
    refusing: Arc<Semaphore>,
    max: usize,
    closing: CancellationToken,
    budget: Arc<Budget>,
}

impl Conns {
    fn new(max: usize, max_held: usize) -> Self {
        let max = max.max(1);
        Conns {
            permits: Arc::new(Semaphore::new(max)),
            refusing: Arc::new(Semaphore::new(REFUSING_MAX)),
            max,
            closing: CancellationToken::new(),
            budget: Arc::new(Budget {
                held: AtomicUsize::new(0),
                max: max_held,
            }),
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

/// What one connection is doing: requests in flight and when the last one ended, and the
/// body being read. Written by its requests with plain atomics (nothing wakes the
/// connection's task), read by its timer only when that fires.
struct Activity {
    in_flight: AtomicUsize,
    /// Milliseconds since `start` when the last request ended.
    last_ms: AtomicU64,
    start: Instant,
    /// The number of the body being read (0: none); the last one given.
    body_open: AtomicU64,
    body_seq: AtomicU64,
    /// Milliseconds since `start` when the open body's head arrived.
    body_start_ms: AtomicU64,
    /// Bytes of the open body arrived so far.
    body_bytes: AtomicU64,
    /// Bytes of the current body without a declared length counted in the budget.
    chunked_held: AtomicUsize,
    /// Set when such a body passed the budget (its request is answered 503).
    budget_hit: AtomicBool,
    budget: Arc<Budget>,
}

impl Activity {
    fn new(budget: Arc<Budget>) -> Self {
        Activity {
            in_flight: AtomicUsize::new(0),
            last_ms: AtomicU64::new(0),
            start: Instant::now(),
            body_open: AtomicU64::new(0),
            body_seq: AtomicU64::new(0),
            body_start_ms: AtomicU64::new(0),
            body_bytes: AtomicU64::new(0),
            chunked_held: AtomicUsize::new(0),
            budget_hit: AtomicBool::new(false),
            budget,
        }
    }

    /// Starts counting a body whose head just arrived; its number.
    fn open_body(&self) -> u64 {
        let seq = self.body_seq.fetch_add(1, Ordering::AcqRel) + 1;
        self.body_bytes.store(0, Ordering::Release);
        self.body_start_ms
            .store(self.start.elapsed().as_millis() as u64, Ordering::Release);
        self.body_open.store(seq, Ordering::Release);
        seq
    }

    /// The body being read: its number, when its head arrived and its bytes so far.
    fn open(&self) -> Option<(u64, Instant, u64)> {
        let seq = self.body_open.load(Ordering::Acquire);
        if seq == 0 {
            return None;
        }
        let at = self.start + Duration::from_millis(self.body_start_ms.load(Ordering::Acquire));
        Some((seq, at, self.body_bytes.load(Ordering::Acquire)))
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

/// A request body, counted as it arrives: its bytes for the rate and, when it declared no
/// length, for the budget (an error once the budget is passed). It stops being the
/// connection's open body when it ends or is dropped.
struct Counted {
    inner: hyper::body::Incoming,
    activity: Arc<Activity>,
    seq: u64,
    chunked: bool,
    refused: bool,
}

impl Counted {
    fn end(&mut self) {
        let _ = self.activity.body_open.compare_exchange(
            self.seq,
            0,
            Ordering::AcqRel,
            Ordering::Acquire,
        );
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.end();
    }
}

/// The error a body without a length gives once the budget is passed (the request is then
/// answered 503 whatever its route made of the error).
#[derive(Debug)]
struct OverBudget;

impl std::fmt::Display for OverBudget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the server holds as many request bytes as it keeps at once")
    }
}

impl std::error::Error for OverBudget {}

impl http_body::Body for Counted {
    type Data = axum::body::Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        let this = self.get_mut();
        if this.refused {
            return Poll::Ready(Some(Err(OverBudget.into())));
        }
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(d) = frame.data_ref() {
                    let a = &this.activity;
                    a.body_bytes.fetch_add(d.len() as u64, Ordering::AcqRel);
                    if this.chunked {
                        a.chunked_held.fetch_add(d.len(), Ordering::AcqRel);
                        if !a.budget.count(d.len()) {
                            a.budget_hit.store(true, Ordering::Release);
                            this.refused = true;
                            this.end();
                            return Poll::Ready(Some(Err(OverBudget.into())));
                        }
                    }
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(None) => {
                this.end();
                Poll::Ready(None)
            }
            Poll::Ready(Some(Err(e))) => {
                this.end();
                Poll::Ready(Some(Err(e.into())))
            }
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.refused || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// What a request holds of the budget: released when its handler has answered (or its
/// connection closed, dropping the request).
struct Held {
    activity: Arc<Activity>,
    reserved: usize,
    chunked: bool,
}

impl Drop for Held {
    fn drop(&mut self) {
        let a = &self.activity;
        let counted = if self.chunked {
            a.chunked_held.swap(0, Ordering::AcqRel)
        } else {
            0
        };
        a.budget.release(self.reserved + counted);
    }
}

/// The answer of a request whose body would pass the cap on bytes held at once.
fn over_budget(max: usize) -> Response {
    let mut r = ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "body_budget_exceeded",
        format!("the server holds {max} bytes of request bodies at once, the most it keeps (--max-bodies-bytes); this body would pass it"),
    )
    .suggest(["try again shortly, or start the server with a larger --max-bodies-bytes".to_string()])
    .into_response();
    r.headers_mut()
        .insert(header::RETRY_AFTER, header::HeaderValue::from_static("1"));
    r
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
    let conns = Conns::new(limits.max_connections, limits.bodies.max_held);
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
            // Every connection past the cap is answered: when REFUSING_MAX are being
            // answered already, wait for one of them (new connections wait in the backlog)
            // rather than drop this one unanswered.
            let p = tokio::select! {
                _ = &mut stop => break,
                p = conns.refusing.clone().acquire_owned() => p,
            };
            let max = conns.max;
            tokio::spawn(async move {
                refuse(tcp, max).await;
                drop(p);
            });
            continue;
        };
        // A token of its own per connection: waiting on the server-wide one would take
        // that one's lock at every wake-up of every connection.
        let closing = conns.closing.child_token();
        let handler = handler.clone();
        let budget = conns.budget.clone();
        tokio::spawn(async move {
            serve_one(tcp, handler, limits, budget, closing).await;
            drop(permit);
        });
    }
    conns
}

async fn serve_one<H, F>(
    tcp: TcpStream,
    handler: H,
    limits: ConnLimits,
    budget: Arc<Budget>,
    closing: CancellationToken,
) where
    H: Fn(Request) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response> + Send + 'static,
{
    let activity = Arc::new(Activity::new(budget));
    let kill = CancellationToken::new();
    let service = {
        let a = activity.clone();
        let handle = ConnHandle(kill.clone());
        let max_body = limits.max_body_bytes;
        let max_held = limits.bodies.max_held;
        hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
            let in_flight = a.begin();
            // A body (not a request without one): counted for the deadline and the rate,
            // and held against the budget — what it declares, reserved now, or what
            // arrives when it declares nothing. One past the largest body is refused
            // unread by the guard (413) and reserves nothing.
            let mut held = None;
            let mut refused = false;
            let mut req = if req.body().is_end_stream() {
                req.map(Body::new)
            } else {
                let declared = req.body().size_hint().exact();
                let reserved = match declared {
                    Some(n) if n as usize <= max_body => n as usize,
                    _ => 0,
                };
                let chunked = declared.is_none();
                if reserved > 0 && !a.budget.reserve(reserved) {
                    refused = true;
                } else if chunked {
                    a.budget_hit.store(false, Ordering::Release);
                }
                if !refused {
                    held = Some(Held {
                        activity: a.clone(),
                        reserved,
                        chunked,
                    });
                }
                let seq = a.open_body();
                let activity = a.clone();
                req.map(|inner| {
                    Body::new(Counted {
                        inner,
                        activity,
                        seq,
                        chunked,
                        refused,
                    })
                })
            };
            let answer = if refused {
                None
            } else {
                req.extensions_mut().insert(handle.clone());
                Some(handler(req))
            };
            async move {
                let res = match answer {
                    Some(answer) => {
                        let res = answer.await;
                        let hit = held.as_ref().is_some_and(|h| {
                            h.chunked && h.activity.budget_hit.swap(false, Ordering::AcqRel)
                        });
                        if hit {
                            over_budget(max_held)
                        } else {
                            res
                        }
                    }
                    None => over_budget(max_held),
                };
                // The handler has answered: what its body held is given back.
                drop(held);
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
    // One timer per connection, looked at only when it fires: idle then closes, a body past
    // its deadline or below its rate closes at once; otherwise it is set again for the next
    // moment one of them could happen (at most `tick` away, so a body that starts while
    // the connection waits for a long idle deadline is looked at in time).
    let limit = limits.idle_timeout;
    let body = limits.bodies;
    let tick = limit.min(RATE_WINDOW).min(body.timeout);
    let mut idle = pin!(tokio::time::sleep(tick));
    // The body whose rate is being measured: its number, and when and at how many bytes
    // the current window began.
    let mut window: (u64, Instant, u64) = (0, Instant::now(), 0);
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
            _ = idle.as_mut() => {
                let now = Instant::now();
                let mut next = now + tick;
                if let Some((seq, began, bytes)) = activity.open() {
                    let deadline = began + body.timeout;
                    if now >= deadline {
                        tracing::debug!("closing a connection whose request body took longer than {:?}", body.timeout);
                        break;
                    }
                    if window.0 != seq {
                        window = (seq, began, 0);
                    }
                    let spent = now.saturating_duration_since(window.1);
                    if body.min_rate > 0 && spent >= RATE_WINDOW {
                        let need = (body.min_rate as f64 * spent.as_secs_f64()) as u64;
                        if bytes.saturating_sub(window.2) < need {
                            tracing::debug!("closing a connection whose request body came slower than {} bytes/s", body.min_rate);
                            break;
                        }
                        window = (seq, now, bytes);
                    }
                    next = next.min(deadline);
                    if body.min_rate > 0 {
                        next = next.min(window.1 + RATE_WINDOW);
                    }
                }
                if !closed {
                    match activity.idle_deadline(limit) {
                        Some(d) if d <= tokio::time::Instant::from_std(now) => {
                            tracing::debug!("closing a connection idle for {limit:?}");
                            closed = true;
                            conn.as_mut().graceful_shutdown();
                        }
                        Some(d) => next = next.min(d.into_std()),
                        None => {}
                    }
                }
                idle.as_mut().reset(tokio::time::Instant::from_std(next));
            }
        }
    }
}
