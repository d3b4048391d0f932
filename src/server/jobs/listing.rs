//! `GET /api/jobs`: one listing for both modes (in memory, and `--store`), written to the
//! socket as it is read.
//!
//! A page holds at most `?limit=` jobs **and** at most [`PAGE_BYTES`] of JSON; whichever
//! comes first ends it, and `next_cursor` says where the next one starts. A job whose result
//! alone passes [`RESULT_MAX`] is listed with `result: null` and a warning (its own
//! `GET /api/jobs/{id}` answers it). The body is produced one job at a time by a task that
//! hands chunks to the connection through a channel of one: it never holds more than a job
//! and a chunk, whatever the page. A client that takes no chunk for [`WRITE_TIMEOUT`] is
//! dropped (its connection closed, the body aborted). With a store, records are read in
//! batches of [`BATCH`] and results one at a time; a record that cannot be read is left out
//! with a warning in `warnings` (`{"id", "code": "job_unreadable", "message"}`).

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::server::conn::ConnHandle;

/// Most bytes of JSON one page of `GET /api/jobs` holds (a page of one job whose result is
/// not elided may pass it by that job's fields, under 1 KiB).
pub const PAGE_BYTES: usize = 4 * 1024 * 1024;
/// Results longer than this are left out of listings (`result: null` and a warning).
pub const RESULT_MAX: usize = PAGE_BYTES - 64 * 1024;
/// How long a listing waits for its client to take the next chunk before dropping it.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// Records a store listing reads per round trip.
pub const BATCH: usize = 64;
/// Bytes gathered before a chunk goes to the connection.
const CHUNK: usize = 64 * 1024;

/// The client stopped taking the body: the listing stops.
#[derive(Debug)]
pub struct Stalled;

/// Writes one page: `{"jobs": [`, each job, `], "next_cursor", "warnings"}`.
pub struct PageWriter {
    tx: mpsc::Sender<Bytes>,
    timeout: Duration,
    stalled: CancellationToken,
    conn: Option<ConnHandle>,
    buf: Vec<u8>,
    bytes: usize,
    count: usize,
    warnings: Vec<Value>,
}

impl PageWriter {
    /// Jobs written so far.
    pub fn count(&self) -> usize {
        self.count
    }

    /// Whether a job of `n` bytes still fits the page (the first always does).
    pub fn room(&self, n: usize) -> bool {
        self.count == 0 || self.bytes + n < PAGE_BYTES
    }

    /// Adds a warning to the answer's `warnings`.
    pub fn warn(&mut self, id: &str, code: &str, message: String) {
        self.warnings
            .push(json!({"id": id, "code": code, "message": message}));
    }

    /// A job's result is too long for a listing: it is listed without it.
    pub fn result_too_large(&mut self, id: &str, len: usize) {
        self.warn(
            id,
            "result_too_large",
            format!(
                "the result of job '{id}' ({len} bytes) is longer than a listing carries ({RESULT_MAX} bytes); GET /api/jobs/{id} answers it"
            ),
        );
    }

    /// Writes one job's JSON.
    pub async fn job(&mut self, json: &[u8]) -> Result<(), Stalled> {
        if self.count > 0 {
            self.buf.push(b',');
        }
        self.buf.extend_from_slice(json);
        self.bytes += json.len() + 1;
        self.count += 1;
        if self.buf.len() >= CHUNK {
            self.flush().await?;
        }
        Ok(())
    }

    async fn flush(&mut self) -> Result<(), Stalled> {
        let chunk = Bytes::from(std::mem::take(&mut self.buf));
        match tokio::time::timeout(self.timeout, self.tx.send(chunk)).await {
            Ok(Ok(())) => Ok(()),
            // The connection went away.
            Ok(Err(_)) => Err(Stalled),
            Err(_) => {
                self.stalled.cancel();
                if let Some(c) = &self.conn {
                    c.close_soon();
                }
                Err(Stalled)
            }
        }
    }

    /// Ends the page.
    pub async fn finish(mut self, next: Option<String>) {
        let tail = json!({"next_cursor": next, "warnings": self.warnings});
        let tail = tail.to_string();
        // `{"next_cursor":…,"warnings":[…]}` after the jobs' closing bracket.
        self.buf.extend_from_slice(b"],");
        self.buf.extend_from_slice(&tail.as_bytes()[1..]);
        let _ = self.flush().await;
    }

    /// Aborts the body (the store went away mid-page): the client sees a cut answer, never
    /// a short one that parses.
    pub fn abort(self) {
        self.stalled.cancel();
    }
}

/// A 200 JSON answer whose body `produce` writes through a [`PageWriter`] on a task of its
/// own; `conn` is closed when the client stops taking it.
pub fn respond<F, Fut>(conn: Option<ConnHandle>, produce: F) -> Response
where
    F: FnOnce(PageWriter) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    respond_within(conn, WRITE_TIMEOUT, produce)
}

/// [`respond`] with another write timeout.
fn respond_within<F, Fut>(conn: Option<ConnHandle>, timeout: Duration, produce: F) -> Response
where
    F: FnOnce(PageWriter) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = mpsc::channel::<Bytes>(1);
    let stalled = CancellationToken::new();
    let mut w = PageWriter {
        tx,
        timeout,
        stalled: stalled.clone(),
        conn,
        buf: Vec::with_capacity(CHUNK),
        bytes: 0,
        count: 0,
        warnings: Vec::new(),
    };
    w.buf.extend_from_slice(b"{\"jobs\":[");
    w.bytes = w.buf.len();
    tokio::spawn(produce(w));
    let body = futures_util::stream::unfold(Some((rx, stalled)), |state| async move {
        let (mut rx, stalled) = state?;
        tokio::select! {
            biased;
            // Cut: the client sees a broken answer, never a short one that parses.
            _ = stalled.cancelled() => {
                Some((Err(std::io::Error::other("the listing was stopped")), None))
            }
            b = rx.recv() => b.map(|b| (Ok::<_, std::io::Error>(b), Some((rx, stalled)))),
        }
    });
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        Body::from_stream(body),
    )
        .into_response()
}

/// The in-memory listing of `jobs` (a page the store chose by count; `next` its cursor):
/// ends early at [`PAGE_BYTES`].
pub async fn write_memory(
    mut w: PageWriter,
    jobs: Vec<Arc<super::Job>>,
    next: Option<u64>,
    with_result: bool,
) {
    let mut next = next.map(|n| n.to_string());
    let mut last: Option<u64> = None;
    for job in &jobs {
        let mut view = job.view(with_result);
        let len = view.result.as_ref().map_or(0, |r| r.get().len());
        if len > RESULT_MAX {
            view.result = None;
            w.result_too_large(&job.id, len);
        }
        let text = serde_json::to_vec(&view).unwrap_or_default();
        if !w.room(text.len()) {
            next = last.map(|s| s.to_string());
            break;
        }
        if w.job(&text).await.is_err() {
            return;
        }
        last = Some(job.seq);
    }
    w.finish(next).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::StreamExt;

    #[tokio::test]
    async fn a_client_that_takes_nothing_is_dropped_after_the_write_timeout() {
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = done.clone();
        let timeout = Duration::from_millis(100);
        let resp = respond_within(None, timeout, move |mut w| async move {
            let big = vec![b'1'; CHUNK];
            // Far more than the channel holds: the writer waits for the client.
            for _ in 0..10 {
                if w.job(&big).await.is_err() {
                    flag.store(true, std::sync::atomic::Ordering::SeqCst);
                    return;
                }
            }
            w.finish(None).await;
        });
        // Well past the timeout (a generous bound, not a timing assertion).
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert!(
            done.load(std::sync::atomic::Ordering::SeqCst),
            "still writing"
        );
        // What the client reads then is cut: an error, never a whole page.
        let mut body = resp.into_body().into_data_stream();
        let mut failed = false;
        while let Some(item) = body.next().await {
            failed |= item.is_err();
        }
        assert!(failed);
    }
}
