//! The jobs routes when jobs live in the shared store (see [`super::redis`]): the same
//! paths and answers as without a store, read from the store, so any replica answers for
//! any job. SSE event ids are the store's entry ids.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;

use axum::http::{header, StatusCode};
use axum::response::sse::Event;
use axum::response::{IntoResponse, Response};
use axum::Json;
use futures_util::Stream;
use serde_json::{json, Value};

use super::listing::{self, PageWriter, BATCH, RESULT_MAX};
use super::redis::{api_error, ListCursor, Listed, Record, RedisJobs};
use crate::server::conn::ConnHandle;
use crate::server::rest::{ApiError, Prepared};

fn unknown(id: &str) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "unknown_job",
        format!(
            "no job '{id}' in the shared store (never made, or ended longer ago than --job-ttl)"
        ),
    )
    .suggest(["GET /api/jobs lists the jobs the store keeps".to_string()])
}

/// An evicted job: 410 `job_expired`, as without a store.
fn evicted(jobs: &RedisJobs, id: &str) -> ApiError {
    ApiError::new(
        StatusCode::GONE,
        "job_expired",
        format!(
            "job '{id}' ended and was removed (the jobs in the shared store keep at most {} bytes of results and events, --max-job-bytes; the oldest finished go first)",
            jobs.max_bytes()
        ),
    )
    .suggest(["start it again with POST /api/jobs".to_string()])
}

/// The record of `id`, or the error its id answers.
fn found(jobs: &RedisJobs, id: &str, r: Record) -> Result<Value, ApiError> {
    match r {
        Record::Found(v) => Ok(v),
        Record::Evicted => Err(evicted(jobs, id)),
        Record::Missing => Err(unknown(id)),
        Record::Garbled(why) => Err(ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "job_unreadable",
            format!("job '{id}' has a record in the shared store that cannot be read: {why}"),
        )
        .suggest([format!(
            "the record was not written by tavern as it is now; DEL {} (and its :events) in Redis drops it",
            super::redis::hkey(id)
        )])),
    }
}

/// `POST /api/jobs`: queues the job for any replica (503 `job_budget_exceeded` while the
/// jobs still running alone pass the budget).
pub async fn create(jobs: &RedisJobs, prepared: Prepared) -> Result<Response, ApiError> {
    let id = jobs
        .admit(prepared)
        .await
        .map_err(api_error)?
        .map_err(|e| super::routes::refused(&e))?;
    let href = format!("/api/jobs/{id}");
    let body = json!({"id": id, "status": "queued", "href": href});
    Ok((StatusCode::ACCEPTED, [(header::LOCATION, href)], Json(body)).into_response())
}

/// `GET /api/jobs`: the first batch is read before answering (so a store that is away
/// answers 503), the rest as the page is written.
pub async fn list(
    jobs: Arc<RedisJobs>,
    after: Option<ListCursor>,
    limit: usize,
    with_result: bool,
    conn: Option<ConnHandle>,
) -> Result<Response, ApiError> {
    let first = jobs
        .list_batch(after.as_ref(), limit.min(BATCH))
        .await
        .map_err(api_error)?;
    Ok(listing::respond(conn, move |w| {
        write_page(w, jobs, first, limit, with_result)
    }))
}

async fn write_page(
    mut w: PageWriter,
    jobs: Arc<RedisJobs>,
    first: (Vec<Listed>, bool),
    limit: usize,
    with_result: bool,
) {
    let (mut batch, mut more) = first;
    // The last job written, and the last one read (written or left out).
    let mut last: Option<ListCursor> = None;
    let mut read: Option<ListCursor> = None;
    let next = 'page: loop {
        for item in batch {
            if w.count() == limit {
                break 'page last;
            }
            let (cursor, fields, result_len) = match item {
                Listed::Garbled { cursor, why } => {
                    w.warn(
                        &cursor.id,
                        "job_unreadable",
                        unreadable_message(&cursor.id, &why),
                    );
                    read = Some(cursor);
                    continue;
                }
                Listed::Job {
                    cursor,
                    fields,
                    result_len,
                } => (cursor, fields, result_len),
            };
            let mut result = None;
            if with_result && result_len > 0 {
                if result_len > RESULT_MAX {
                    w.result_too_large(&cursor.id, result_len);
                } else if !w.room(result_len) {
                    break 'page last;
                } else {
                    match jobs.result(&cursor.id).await {
                        Ok(r) => result = r,
                        Err(_) => return w.abort(),
                    }
                }
            }
            let raw = match result.map(serde_json::value::RawValue::from_string) {
                None => None,
                Some(Ok(r)) => Some(r),
                Some(Err(_)) => {
                    let why = format!("{}: its result is not JSON", cursor.id);
                    w.warn(
                        &cursor.id,
                        "job_unreadable",
                        unreadable_message(&cursor.id, &why),
                    );
                    read = Some(cursor);
                    continue;
                }
            };
            let text = super::redis::listed_json(&cursor.id, &fields, raw.as_deref());
            if !w.room(text.len()) {
                break 'page last;
            }
            if w.job(&text).await.is_err() {
                return;
            }
            last = Some(cursor.clone());
            read = Some(cursor);
        }
        if !more {
            break None;
        }
        if w.count() == limit {
            break last;
        }
        match jobs
            .list_batch(read.as_ref(), (limit - w.count()).min(BATCH))
            .await
        {
            Ok((b, m)) => (batch, more) = (b, m),
            Err(_) => return w.abort(),
        }
    };
    w.finish(next.map(|c| c.to_string())).await;
}

fn unreadable_message(id: &str, why: &str) -> String {
    format!("job '{id}' is left out: its record in the store cannot be read ({why}); GET /api/jobs/{id} says the same")
}

/// `GET /api/jobs/{id}`.
pub async fn get(jobs: &RedisJobs, id: &str) -> Result<Json<Value>, ApiError> {
    let r = jobs.lookup(id).await.map_err(api_error)?;
    Ok(Json(found(jobs, id, r)?))
}

/// `DELETE /api/jobs/{id}`.
pub async fn cancel(jobs: &RedisJobs, id: &str) -> Result<Json<Value>, ApiError> {
    let r = jobs.cancel_record(id).await.map_err(api_error)?;
    Ok(Json(found(jobs, id, r)?))
}

/// `GET /api/jobs/{id}/events`: the stored events after `after` (a `Last-Event-ID`), then
/// live ones, ending after `end`.
pub async fn follow(
    jobs: Arc<RedisJobs>,
    id: String,
    after: Option<String>,
) -> Result<impl Stream<Item = Result<Event, Infallible>>, ApiError> {
    let r = jobs.lookup(&id).await.map_err(api_error)?;
    found(&jobs, &id, r)?;
    let state = Follow {
        jobs,
        id,
        after,
        queue: VecDeque::new(),
        failures: 0,
    };
    let stream = futures_util::stream::unfold(Some(state), |state| async move {
        let mut st = state?;
        loop {
            if let Some((eid, name, data)) = st.queue.pop_front() {
                let last = name == "end";
                let ev = Event::default().event(name).id(eid).data(data);
                return Some((Ok(ev), (!last).then_some(st)));
            }
            match st.jobs.events_after(&st.id, st.after.as_deref()).await {
                Ok(evs) if evs.is_empty() => {
                    st.failures = 0;
                    // An expired or evicted job ends the stream.
                    if !st.jobs.exists(&st.id).await.unwrap_or(true) {
                        return None;
                    }
                    tokio::time::sleep(super::redis::TICK / 4).await;
                }
                Ok(evs) => {
                    st.failures = 0;
                    st.after = evs.last().map(|e| e.0.clone());
                    st.queue.extend(evs);
                }
                Err(_) => {
                    // The store is away: keep trying for a while, then let the client
                    // reconnect with its Last-Event-ID.
                    st.failures += 1;
                    if st.failures > 50 {
                        return None;
                    }
                    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                }
            }
        }
    });
    Ok(stream)
}

struct Follow {
    jobs: Arc<RedisJobs>,
    id: String,
    after: Option<String>,
    queue: VecDeque<(String, String, String)>,
    failures: u32,
}
