//! The jobs routes: `POST /api/jobs`, `GET /api/jobs`, `GET|DELETE /api/jobs/{id}` and
//! `GET /api/jobs/{id}/events` (server-sent events). See `docs/jobs.md`.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, Query, Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Extension;
use axum::{Json, Router};
use futures_util::{Stream, StreamExt};
use serde_json::{json, Value};

use super::listing;
use super::store::Refused;
use super::{Job, JobObserver, Lookup, Outcome, CANCEL_GRACE};
use crate::server::conn::ConnHandle;
use crate::server::rest::{prepare, run_prepared, ApiError, InvokeQuery, Prepared};
use crate::server::Served;

/// The job `id`, or the error its id answers: 404 `unknown_job`, 410 `job_expired`, 410
/// `job_lost`.
fn find(served: &Served, id: &str) -> Result<Arc<Job>, ApiError> {
    match served.jobs().get(id) {
        Lookup::Found(j) => Ok(j),
        Lookup::Expired => Err(ApiError::new(
            StatusCode::GONE,
            "job_expired",
            format!(
                "job '{id}' ended and was removed (finished jobs are kept {} s, at most {} of them and at most {} bytes of results and events; the oldest go first)",
                served.options.job_ttl.as_secs(),
                served.options.max_jobs,
                served.options.max_job_bytes,
            ),
        )
        .suggest(["start it again with POST /api/jobs".to_string()])),
        Lookup::Lost { created_ms } => {
            let when = chrono::DateTime::from_timestamp_millis(created_ms as i64)
                .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
                .unwrap_or_else(|| format!("{created_ms} ms after the epoch"));
            Err(ApiError::new(
                StatusCode::GONE,
                "job_lost",
                format!(
                    "job '{id}' was lost when the server restarted; it was created at {when}, before the restart, and its result was not kept"
                ),
            )
            .suggest(["start it again with POST /api/jobs".to_string()]))
        }
        Lookup::Unknown => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "unknown_job",
            format!("no job '{id}' on this server"),
        )
        .suggest(["GET /api/jobs lists the jobs this server keeps".to_string()])),
    }
}

async fn create(
    State(served): State<Arc<Served>>,
    Query(q): Query<InvokeQuery>,
    headers: HeaderMap,
    req: Request,
) -> Result<Response, ApiError> {
    let prepared = prepare(&served, &q, &headers, req).await?;
    #[cfg(feature = "store-redis")]
    if let Some(jobs) = served.shared_jobs() {
        return super::redis_routes::create(jobs, prepared).await;
    }
    let job = served.jobs().create().map_err(|e| refused(&e))?;
    spawn(served.clone(), job.clone(), prepared);
    let href = format!("/api/jobs/{}", job.id);
    let body = json!({"id": job.id, "status": job.status().as_str(), "href": href});
    Ok((StatusCode::ACCEPTED, [(header::LOCATION, href)], Json(body)).into_response())
}

/// The answer to a refused job: 429 `too_many_jobs` (count), 503 `job_budget_exceeded`
/// (bytes).
pub(crate) fn refused(e: &Refused) -> ApiError {
    match e {
        Refused::Count(_) => ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            "too_many_jobs",
            e.to_string(),
        )
        .suggest([
            "DELETE /api/jobs/{id} cancels a job; start the server with a larger --max-jobs"
                .to_string(),
        ]),
        Refused::Budget { .. } => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "job_budget_exceeded",
            e.to_string(),
        )
        .suggest([
            "DELETE /api/jobs/{id} cancels a job; start the server with a larger --max-job-bytes"
                .to_string(),
        ]),
    }
}

/// Runs `prepared` as `job` in the background, counted in flight (graceful shutdown waits
/// for it like for any call).
pub(crate) fn spawn(served: Arc<Served>, job: Arc<Job>, prepared: Prepared) {
    tokio::spawn(async move {
        let s = served.clone();
        s.track(run(&served, &job, prepared)).await;
    });
}

pub(super) async fn run(served: &Served, job: &Arc<Job>, prepared: Prepared) {
    let engine = served.engine();
    job.start(prepared.call_count());
    // A child token: the time limit stops the work without marking the job cancelled.
    let work_cancel = job.cancel.child_token();
    let observer: crate::tools::Observer = Some(Arc::new(JobObserver(job.clone())));
    let work = run_prepared(&engine, prepared, work_cancel.clone(), observer);
    let mut work = std::pin::pin!(work);
    let limit = served.options.call_timeout;
    let deadline = async {
        match limit {
            Some(d) => tokio::time::sleep(d).await,
            None => std::future::pending().await,
        }
    };
    let outcome = tokio::select! {
        report = &mut work => {
            let result = report.to_json();
            Outcome::Done { error: first_error(report.failed(), &result), result }
        }
        _ = job.cancel.cancelled() => {
            let r = tokio::time::timeout(CANCEL_GRACE, &mut work).await.ok();
            Outcome::Cancelled(r.map(|r| r.to_json()))
        }
        _ = deadline => {
            work_cancel.cancel();
            let r = tokio::time::timeout(CANCEL_GRACE, &mut work).await.ok();
            Outcome::TimedOut { after: limit.unwrap_or_default(), result: r.map(|r| r.to_json()) }
        }
    };
    job.finish(outcome);
    // Its result now counts against the budget.
    served.jobs().settle();
}

/// The first failure of a report as `{code, message}`: a failed call, else an error
/// diagnostic of the text.
fn first_error(failed: bool, report: &Value) -> Option<Value> {
    if !failed {
        return None;
    }
    let results = report["results"].as_array();
    if let Some(r) = results
        .into_iter()
        .flatten()
        .find(|r| r["ok"] == Value::Bool(false))
    {
        return Some(json!({
            "code": r["error"]["code"],
            "message": r["error"]["message"],
        }));
    }
    let diag = report["diagnostics"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|d| d["severity"] == "error")
        .or_else(|| report["diagnostics"].get(0));
    Some(match diag {
        Some(d) => json!({
            "code": "parse_error",
            "message": d.get("message").cloned().unwrap_or_else(|| json!(d.to_string())),
        }),
        None => json!({"code": "failed", "message": "the block failed"}),
    })
}

/// Jobs per page of `GET /api/jobs` unless `?limit=` says otherwise.
pub const PAGE: usize = 100;
/// The largest `?limit=`.
pub const MAX_PAGE: usize = 1000;

/// `GET /api/jobs`'s query: `?limit=&cursor=&results=`.
#[derive(Debug, Default, serde::Deserialize)]
pub struct ListQuery {
    limit: Option<String>,
    cursor: Option<String>,
    results: Option<String>,
}

fn flag(v: &Option<String>) -> bool {
    matches!(v.as_deref(), Some("1" | "true" | "yes" | ""))
}

fn bad_cursor(c: &str) -> ApiError {
    ApiError::new(
        StatusCode::BAD_REQUEST,
        "bad_cursor",
        format!("?cursor={c} is not a cursor of this server"),
    )
    .suggest(["use the next_cursor of the previous page".to_string()])
}

/// `GET /api/jobs`: the same checks and answer in both modes, written as it is read
/// ([`super::listing`]).
async fn list(
    State(served): State<Arc<Served>>,
    Query(q): Query<ListQuery>,
    conn: Option<Extension<ConnHandle>>,
) -> Result<Response, ApiError> {
    let limit = match q.limit.as_deref() {
        None => PAGE,
        Some(l) => l
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=MAX_PAGE).contains(n))
            .ok_or_else(|| {
                ApiError::new(
                    StatusCode::BAD_REQUEST,
                    "bad_limit",
                    format!("?limit={l} is not a page size; give a number from 1 to {MAX_PAGE}"),
                )
            })?,
    };
    let with_result = flag(&q.results);
    let conn = conn.map(|Extension(c)| c);
    let cursor = q.cursor.as_deref().filter(|c| !c.is_empty());
    #[cfg(feature = "store-redis")]
    if let Some(jobs) = served.shared_jobs() {
        let after = match cursor {
            None => None,
            Some(c) => Some(super::redis::ListCursor::parse(c).ok_or_else(|| bad_cursor(c))?),
        };
        return super::redis_routes::list(jobs.clone(), after, limit, with_result, conn).await;
    }
    let before = match cursor {
        None => None,
        Some(c) => Some(c.parse::<u64>().map_err(|_| bad_cursor(c))?),
    };
    let page = served.jobs().page(before, limit);
    Ok(listing::respond(conn, move |w| {
        listing::write_memory(w, page.jobs, page.next, with_result)
    }))
}

async fn get_job(
    State(served): State<Arc<Served>>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    #[cfg(feature = "store-redis")]
    if let Some(jobs) = served.shared_jobs() {
        return Ok(super::redis_routes::get(jobs, &id).await?.into_response());
    }
    Ok(Json(find(&served, &id)?.view(true)).into_response())
}

async fn cancel(
    State(served): State<Arc<Served>>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    #[cfg(feature = "store-redis")]
    if let Some(jobs) = served.shared_jobs() {
        return super::redis_routes::cancel(jobs, &id).await;
    }
    let job = find(&served, &id)?;
    if !job.status().is_final() {
        job.cancel.cancel();
        // The runner ends the job within the grace (then drops the work); a queued job that
        // never started is ended here.
        job.ended(CANCEL_GRACE + Duration::from_secs(1)).await;
        job.finish(Outcome::Cancelled(None));
        served.jobs().settle();
    }
    Ok(Json(job.to_json()))
}

/// The SSE stream of a job from event `from` on: every stored event, then live ones, ending
/// after `end`.
fn job_stream(job: Arc<Job>, from: usize) -> impl Stream<Item = Result<Event, Infallible>> {
    futures_util::stream::unfold(Some((job, from)), |state| async move {
        let (job, idx) = state?;
        loop {
            match job.next_event(idx) {
                Ok(ev) => {
                    let event = Event::default()
                        .event(ev.name)
                        .id(idx.to_string())
                        .data(&*ev.data);
                    let next = (ev.name != "end").then_some((job, idx + 1));
                    return Some((Ok(event), next));
                }
                Err(mut rx) => {
                    if rx.changed().await.is_err() {
                        return None;
                    }
                }
            }
        }
    })
}

async fn events(
    State(served): State<Arc<Served>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let last = headers.get("last-event-id").and_then(|v| v.to_str().ok());
    #[cfg(feature = "store-redis")]
    if let Some(jobs) = served.shared_jobs() {
        let after = last.map(|v| v.trim().to_string());
        let s = super::redis_routes::follow(jobs.clone(), id, after).await?;
        let s = s.take_until(served.streams_end());
        return Ok(Sse::new(s).keep_alive(KeepAlive::default()).into_response());
    }
    let job = find(&served, &id)?;
    // A reconnecting EventSource resumes after the last event it saw.
    let from = last
        .and_then(|v| v.trim().parse::<usize>().ok())
        .map_or(0, |n| n + 1);
    let s = job_stream(job, from).take_until(served.streams_end());
    Ok(Sse::new(s).keep_alive(KeepAlive::default()).into_response())
}

/// The jobs routes.
pub fn routes() -> Router<Arc<Served>> {
    Router::new()
        .route("/api/jobs", post(create).get(list))
        .route("/api/jobs/{id}", get(get_job).delete(cancel))
        .route("/api/jobs/{id}/events", get(events))
}
