//! The web tool explorer (issue 15): pages at `/`, `/tools/{id}`, `/workflows/{id}`,
//! `/plugins`, `/audit`, `/resources`, `/prompts`, `/agents` and `/agents/{id}`, and the JSON
//! endpoints they read.
//!
//! One small single-page app (plain HTML, CSS and JavaScript, no build step) is embedded in
//! the binary with `include_str!`, with a 2 KB font subset holding only the TAM markers'
//! glyphs (「 」 始 末, from Noto Sans Mono CJK, SIL OFL 1.1: `assets/fonts/OFL.txt`), so they
//! render where no CJK font is installed: every page path answers the same shell, and the script
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
/// The TAM markers' font subset (WOFF2; the style sheet's `unicode-range` takes only them).
pub const MARKER_FONT: &[u8] = include_bytes!("assets/fonts/tam-markers.woff2");
/// The font's license (SIL Open Font License 1.1) and how the subset was made.
pub const MARKER_FONT_LICENSE: &str = include_str!("assets/fonts/OFL.txt");

/// The static assets: path, body, content type.
const ASSETS: [(&str, &[u8], &str); 4] = [
    (
        "/assets/app.js",
        APP_JS.as_bytes(),
        "text/javascript; charset=utf-8",
    ),
    (
        "/assets/app.css",
        APP_CSS.as_bytes(),
        "text/css; charset=utf-8",
    ),
    ("/assets/tam-markers.woff2", MARKER_FONT, "font/woff2"),
    (
        "/assets/tam-markers-license.txt",
        MARKER_FONT_LICENSE.as_bytes(),
        "text/plain; charset=utf-8",
    ),
];

/// The page paths (the app renders each from `location.pathname`).
pub const PAGES: [&str; 9] = [
    "/",
    "/tools/{id}",
    "/workflows/{id}",
    "/plugins",
    "/audit",
    "/resources",
    "/prompts",
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
/// of one of the assets (`/assets/app.js`, `/assets/app.css`, the markers' font and its
/// license), or of a page path by a client preferring HTML.
pub fn is_static_request(method: &Method, path: &str, headers: &HeaderMap) -> bool {
    if method != Method::GET && method != Method::HEAD {
        return false;
    }
    if ASSETS.iter().any(|(p, _, _)| *p == path) {
        return true;
    }
    let seg: Vec<&str> = path.split('/').skip(1).collect();
    let page = matches!(
        seg.as_slice(),
        [""] | ["plugins"]
            | ["audit"]
            | ["resources"]
            | ["prompts"]
            | ["agents"]
            | ["tools", _]
            | ["workflows", _]
            | ["agents", _]
    );
    page && wants_html(headers)
}

fn asset(body: &'static [u8], content_type: &'static str) -> Response {
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
    let mut r = asset(INDEX_HTML.as_bytes(), "text/html; charset=utf-8");
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

/// The explorer's routes (pages, assets, JSON API), for `served`. `/tools/{id}` is not here:
/// the REST route answers it and hands browsers [`page`].
pub fn router(served: Arc<Served>) -> Router {
    let sessions = agents::Sessions::default();
    let mut pages = Router::new();
    for path in PAGES {
        // `/tools/{id}` is the REST route's (it hands browsers the page).
        if path != "/tools/{id}" {
            pages = pages.route(path, get(page_handler));
        }
    }
    for (path, body, content_type) in ASSETS {
        pages = pages.route(path, get(move || async move { asset(body, content_type) }));
    }
    pages
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
            (&Method::GET, "/resources", &html, true),
            (&Method::GET, "/prompts", &html, true),
            (&Method::GET, "/agents", &html, true),
            (&Method::GET, "/agents/host", &html, true),
            (&Method::GET, "/assets/app.js", &json, true),
            (&Method::GET, "/assets/app.css", &json, true),
            (&Method::GET, "/assets/tam-markers.woff2", &json, true),
            (&Method::GET, "/assets/tam-markers-license.txt", &json, true),
            // Data: seed 004's JSON alias, the API, other methods and paths.
            (&Method::GET, "/tools/Inn:room_price", &json, false),
            (&Method::GET, "/", &json, false),
            (&Method::GET, "/api/catalog", &html, false),
            (&Method::GET, "/api/resources", &html, false),
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
