//! The web page: `GET /ui` — four views of the index, its answers and the code graph
//! (status, ask, graph, sessions), written as one HTML page, one script and one style sheet
//! (`serve/ui/`, compiled into the binary: no CDN, no build step, works offline).
//!
//! The page holds no index data. It is served without the token; everything it shows it asks
//! the authenticated API for (`/v1/status`, `/v1/versions`, `/metrics`, `/v1/search`,
//! `/v1/context`, `/v1/locate`, `/v1/graph/*`, `/v1/sessions`) with the token the person typed
//! once, kept in the tab's `sessionStorage`; a 401 shows the sign-in form instead. Answers carry
//! a strict Content-Security-Policy (scripts, styles and connections of this origin only), and
//! the page may not be framed. `[server] ui = false` leaves these routes out.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use axum::Router;

/// The page's files: (name under `/ui/`, content type, text).
const ASSETS: [(&str, &str, &str); 3] = [
    ("", "text/html; charset=utf-8", include_str!("../ui/index.html")),
    ("app.js", "text/javascript; charset=utf-8", include_str!("../ui/app.js")),
    ("app.css", "text/css; charset=utf-8", include_str!("../ui/app.css")),
];

/// What the page may load and reach: its own origin only.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; \
                   base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// Bytes of all the page's files (docs/web-page.md states it).
#[cfg(test)]
pub fn page_bytes() -> usize {
    ASSETS.iter().map(|(_, _, text)| text.len()).sum()
}

/// `GET /ui`, `/ui/`, `/ui/app.js`, `/ui/app.css`, and `/` sent to `/ui`.
pub fn router() -> Router {
    Router::new()
        .route("/", get(|| async { Redirect::to("/ui") }))
        .route("/ui", get(|| async { asset("") }))
        .route("/ui/", get(|| async { asset("") }))
        .route("/ui/{name}", get(|name: axum::extract::Path<String>| async move { asset(&name) }))
}

fn asset(name: &str) -> Response {
    let Some((_, kind, text)) = ASSETS.iter().find(|(n, _, _)| *n == name) else {
        return (StatusCode::NOT_FOUND, "no such file of the web page\n").into_response();
    };
    let mut res = (*text).into_response();
    let h = res.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(kind));
    // The page changes with the binary: always revalidated, never cached stale.
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_page_and_its_files_are_served_with_their_types_and_a_strict_policy() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, router()).await.unwrap() });
        let client = reqwest::Client::new();
        for (path, kind) in [("/ui", "text/html"), ("/ui/app.js", "text/javascript"), ("/ui/app.css", "text/css")] {
            let res = client.get(format!("http://{addr}{path}")).send().await.unwrap();
            assert_eq!(res.status(), StatusCode::OK, "{path}");
            assert!(res.headers()[header::CONTENT_TYPE].to_str().unwrap().starts_with(kind), "{path}");
            let csp = res.headers()[header::CONTENT_SECURITY_POLICY].to_str().unwrap();
            assert!(csp.contains("script-src 'self'") && csp.contains("frame-ancestors 'none'"), "{csp}");
        }
        let res = client.get(format!("http://{addr}/ui/Cargo.toml")).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::NOT_FOUND);
        // Every file the page links is one it is served with; nothing is fetched from elsewhere.
        let html = ASSETS[0].2;
        for linked in ["/ui/app.js", "/ui/app.css"] {
            assert!(html.contains(linked), "{linked}");
        }
        let external = |t: &str| {
            let t = t.replace("http://www.w3.org/2000/svg", ""); // SVG's namespace name, not a fetch
            t.contains("http://") || t.contains("https://")
        };
        assert!(!ASSETS.iter().any(|(_, _, t)| external(t)), "no external URL");
        assert!(page_bytes() < 1 << 20, "the page stays under 1 MB");
    }
}
