//! The web tool explorer (issue 15): pages at `/`, `/tools/{id}`, `/workflows/{id}`,
//! `/plugins`, `/audit`, `/agents` and `/agents/{id}`, and the JSON endpoints they read.
//!
//! One small single-page app (plain HTML, CSS and JavaScript, no build step) is embedded in
//! the binary with `include_str!`: every page path answers the same shell, and the script
//! renders the page for `location.pathname` from the JSON API. No CDN, no network at run
//! time. `/tools/{id}` is also seed 004's JSON alias: a request whose `Accept` prefers
//! `text/html` (a browser) gets the page, anything else the JSON (see [`wants_html`]).
//!
//! Endpoints added here (all documented in docs/web.md):
//! - `GET /api/catalog`, `GET /api/catalog/{id}` — tools with kind, plugin, manual entry and
//!   the TAM/`<ACTION>` example calls the prompt manuals use ([`catalog`]).
//! - `GET /api/workflows`, `GET /api/workflows/{id}` — graphs laid out in layers.
//! - `GET /api/plugins`, `GET /api/plugins/events` (SSE) — plugins, problems, reloads.
//! - `GET /api/agents`, `GET /api/agents/{id}`, `POST /api/agents/{id}/turn`,
//!   `DELETE /api/agents/{id}/sessions/{session}` — the chat ([`agents`]).

pub mod agents;
pub mod catalog;

use std::sync::Arc;

use axum::http::{header, HeaderMap, HeaderValue, Method};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::Router;

use super::Served;

/// The page shell every page path answers.
pub const INDEX_HTML: &str = include_str!("assets/index.html");
/// The app's script.
pub const APP_JS: &str = include_str!("assets/app.js");
/// The app's style sheet.
pub const APP_CSS: &str = include_str!("assets/app.css");

/// The page paths (the app renders each from `location.pathname`).
pub const PAGES: [&str; 7] = [
    "/",
    "/tools/{id}",
    "/workflows/{id}",
    "/plugins",
    "/audit",
    "/agents",
    "/agents/{id}",
];

/// Scripts and styles only from this server; no inline script, no framing.
const CSP: &str = "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

/// The `q` a media range list gives `ty` (`text/html`): the most specific matching range
/// wins (`text/html` over `text/*` over `*/*`); 0 when nothing matches.
fn quality(accept: &str, ty: &str) -> f32 {
    let (major, _) = ty.split_once('/').unwrap_or((ty, ""));
    let mut best: Option<(u8, f32)> = None;
    for range in accept.split(',') {
        let mut parts = range.split(';');
        let media = parts.next().unwrap_or("").trim().to_ascii_lowercase();
        let q = parts
            .filter_map(|p| p.trim().strip_prefix("q="))
            .find_map(|v| v.trim().parse::<f32>().ok())
            .unwrap_or(1.0);
        let specificity = if media == ty {
            3
        } else if media.strip_suffix("/*") == Some(major) {
            2
        } else if media == "*/*" {
            1
        } else {
            continue;
        };
        if best.is_none_or(|(s, _)| specificity > s) {
            best = Some((specificity, q));
        }
    }
    best.map_or(0.0, |(_, q)| q)
}

/// True when the request's `Accept` prefers `text/html` to `application/json` (browsers);
/// API clients (no `Accept`, `*/*`, `application/json`) get JSON.
pub fn wants_html(headers: &HeaderMap) -> bool {
    let Some(accept) = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    quality(accept, "text/html") > quality(accept, "application/json")
}

/// True for a request that gets only the explorer's static shell or assets (no data): a GET
/// of `/assets/app.js` or `/assets/app.css`, or of a page path by a client preferring HTML.
pub fn is_static_request(method: &Method, path: &str, headers: &HeaderMap) -> bool {
    if method != Method::GET && method != Method::HEAD {
        return false;
    }
    if path == "/assets/app.js" || path == "/assets/app.css" {
        return true;
    }
    let seg: Vec<&str> = path.split('/').skip(1).collect();
    let page = matches!(
        seg.as_slice(),
        [""] | ["plugins"]
            | ["audit"]
            | ["agents"]
            | ["tools", _]
            | ["workflows", _]
            | ["agents", _]
    );
    page && wants_html(headers)
}

fn asset(body: &'static str, content_type: &'static str) -> Response {
    let mut r = body.into_response();
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    r
}

/// The app's page shell, with its security headers.
pub fn page() -> Response {
    let mut r = asset(INDEX_HTML, "text/html; charset=utf-8");
    r.headers_mut().insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    r.headers_mut()
        .insert(header::VARY, HeaderValue::from_static("Accept"));
    r
}

async fn page_handler() -> Response {
    page()
}

async fn app_js() -> Response {
    asset(APP_JS, "text/javascript; charset=utf-8")
}

async fn app_css() -> Response {
    asset(APP_CSS, "text/css; charset=utf-8")
}

/// The explorer's routes (pages, assets, JSON API), for `served`. `/tools/{id}` is not here:
/// the REST route answers it and hands browsers [`page`].
pub fn router(served: Arc<Served>) -> Router {
    let sessions = agents::Sessions::default();
    Router::new()
        .route("/", get(page_handler))
        .route("/workflows/{id}", get(page_handler))
        .route("/plugins", get(page_handler))
        .route("/audit", get(page_handler))
        .route("/agents", get(page_handler))
        .route("/agents/{id}", get(page_handler))
        .route("/assets/app.js", get(app_js))
        .route("/assets/app.css", get(app_css))
        .route("/api/catalog", get(catalog::list_tools))
        .route("/api/catalog/{id}", get(catalog::get_tool))
        .route("/api/workflows", get(catalog::list_workflows))
        .route("/api/workflows/{id}", get(catalog::get_workflow))
        .route("/api/plugins", get(catalog::list_plugins))
        .route("/api/plugins/events", get(catalog::plugin_events))
        .with_state(served.clone())
        .merge(
            Router::new()
                .route("/api/agents", get(agents::list))
                .route("/api/agents/{id}", get(agents::get))
                .route("/api/agents/{id}/turn", post(agents::turn))
                .route(
                    "/api/agents/{id}/sessions/{session}",
                    delete(agents::end_session),
                )
                .with_state(agents::AgentState { served, sessions }),
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_negotiation() {
        let cases: &[(&str, bool)] = &[
            // Chromium's and Firefox's navigation Accept headers.
            ("text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8,application/signed-exchange;v=b3;q=0.7", true),
            ("text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", true),
            ("*/*", false),
            ("application/json", false),
            ("application/json, text/html;q=0.5", false),
            ("text/html;q=0.9, application/json;q=0.8", true),
            ("text/*", true),
            ("text/plain", false),
            ("", false),
        ];
        for (accept, html) in cases {
            let mut h = HeaderMap::new();
            h.insert(header::ACCEPT, HeaderValue::from_str(accept).unwrap());
            assert_eq!(wants_html(&h), *html, "Accept: {accept}");
        }
        assert!(!wants_html(&HeaderMap::new()), "no Accept means JSON");
    }

    #[test]
    fn only_the_shell_and_assets_are_static() {
        let mut html = HeaderMap::new();
        html.insert(header::ACCEPT, HeaderValue::from_static("text/html"));
        let json = HeaderMap::new();
        let cases: &[(&Method, &str, &HeaderMap, bool)] = &[
            (&Method::GET, "/", &html, true),
            (&Method::GET, "/tools/Inn:room_price", &html, true),
            (&Method::GET, "/workflows/w", &html, true),
            (&Method::GET, "/plugins", &html, true),
            (&Method::GET, "/audit", &html, true),
            (&Method::GET, "/agents", &html, true),
            (&Method::GET, "/agents/host", &html, true),
            (&Method::GET, "/assets/app.js", &json, true),
            (&Method::GET, "/assets/app.css", &json, true),
            // Data: seed 004's JSON alias, the API, other methods and paths.
            (&Method::GET, "/tools/Inn:room_price", &json, false),
            (&Method::GET, "/", &json, false),
            (&Method::GET, "/api/catalog", &html, false),
            (&Method::GET, "/tools", &html, false),
            (&Method::GET, "/tools/a/b", &html, false),
            (&Method::GET, "/assets/other.js", &json, false),
            (&Method::POST, "/", &html, false),
            (&Method::POST, "/invoke", &html, false),
        ];
        for (m, path, h, want) in cases {
            assert_eq!(is_static_request(m, path, h), *want, "{m} {path}");
        }
    }
}
