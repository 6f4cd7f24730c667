//! The routes that tell about the process and the index rather than answer a query:
//! `GET /healthz` (liveness), `/readyz` (the initial scan committed), `/metrics` (Prometheus
//! text), `/v1/status` (version, model, table, and the sources the caller may read) and
//! `/v1/sessions/{id}` (what a session was sent).

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use ctxd_index::scope::SourceScope;

use crate::reply::error;
use crate::state::{AppState, CallerExt};

/// `GET /healthz`: 200 while the process serves requests.
pub(crate) async fn healthz() -> &'static str {
    "ok\n"
}

/// `GET /readyz`: 200 once the initial scan is committed, 503 before.
pub(crate) async fn readyz(State(state): State<AppState>) -> Response {
    if (state.ready)() {
        (StatusCode::OK, "ready\n").into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "initial scan in progress\n").into_response()
    }
}

/// `GET /metrics`: Prometheus text (404 when metrics are off).
pub(crate) async fn prometheus(State(state): State<AppState>) -> Response {
    match &state.prometheus {
        // The index gauges are set when the engine opens and after every commit.
        Some(h) => ([(axum::http::header::CONTENT_TYPE, "text/plain; version=0.0.4")], h.render()).into_response(),
        None => error(StatusCode::NOT_FOUND, "metrics are not enabled".into()),
    }
}

/// `{"version","ready","model","table"}` (what an aggregator keys its cache on), a writer's
/// `indexing` (its first pass: files seen and done, chunks, rates, `secs_left`) and, in an
/// index of named sources, `sources`: `[{name, files, chunks}]` of the sources the caller's
/// token may read (no other source is named).
pub(crate) async fn status(State(state): State<AppState>, caller: CallerExt) -> Response {
    let index = state.searcher.index();
    let version = match index.version().await {
        Ok(v) => v,
        Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    };
    let mut body = serde_json::json!({
        "version": version,
        "ready": (state.ready)(),
        "model": index.model_id(),
        "table": index.table_name(),
    });
    if let Some(progress) = &state.progress {
        body["indexing"] = progress();
    }
    let access = state.access.get();
    if !access.known.is_empty() {
        let allowed = caller.as_ref().and_then(|c| c.sources.clone());
        let mut sources = Vec::new();
        for name in access.known.iter().filter(|n| allowed.as_ref().is_none_or(|a| a.contains(n))) {
            let view = match index.scoped(Some(SourceScope::new([name.as_str()]))).await {
                Ok(v) => v,
                Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
            };
            let (files, chunks) = match (view.files().await, view.stats().await) {
                (Ok(f), Ok(s)) => (f.len(), s.rows),
                (Err(e), _) | (_, Err(e)) => return error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
            };
            sources.push(serde_json::json!({ "name": name, "files": files, "chunks": chunks }));
        }
        body["sources"] = serde_json::Value::Array(sources);
    }
    Json(body).into_response()
}

/// `GET /v1/sessions/<id>`: what a session was sent and the tokens it used per tool; 404 once
/// it expired (or never existed), 400 for an id that cannot be one.
pub(crate) async fn session_usage(
    State(state): State<AppState>,
    axum::extract::Path(id): axum::extract::Path<String>,
) -> Response {
    if let Err(e) = ctxd_context::session::validate_id(&id) {
        return error(StatusCode::BAD_REQUEST, e.to_string());
    }
    match state.assembler.sessions().usage(&id) {
        Some(u) => Json(u).into_response(),
        None => error(
            StatusCode::NOT_FOUND,
            format!("no session '{id}': it has not been used yet, or it expired (sessions end after an idle time-out)"),
        ),
    }
}
