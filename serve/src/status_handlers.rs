//! The routes that tell about the process and the index rather than answer a query:
//! `GET /healthz` (liveness), `/readyz` (the initial scan committed), `/metrics` (Prometheus
//! text), `/v1/status` (version, model, table, the embedding backend, the process's role and
//! the sources the caller may read), `/v1/versions` (the last versions with their tags),
//! `/v1/sessions` (every live session, its last answers) and `/v1/sessions/{id}` (one).

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

/// `{"version","ready","model","table"}` (what an aggregator keys its cache on), the query
/// adapter ([`query_adapter`]), a writer's
/// `indexing` (its first pass: files seen and done, chunks, rates, `secs_left`) and, in an
/// index of named sources, `sources`: `[{name, files, chunks}]` of the sources the caller's
/// token may read (no other source is named).
pub(crate) async fn status(State(state): State<AppState>, caller: CallerExt) -> Response {
    let index = state.searcher.index();
    let version = match index.version().await {
        Ok(v) => v,
        Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    };
    let retriever = state.searcher.retriever().current();
    let mut body = serde_json::json!({
        "version": version,
        "ready": (state.ready)(),
        "model": index.model_id(),
        "table": index.table_name(),
        "backend": retriever.embed().map(|e| e.backend().to_string()),
        "role": if state.progress.is_some() { "writer" } else { "reader" },
        "lease": state.lease,
    });
    match query_adapter(&index).await {
        Ok(adapter) => body["query_adapter"] = adapter,
        Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
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
            let (files, chunks) = match (view.reads().files().await, view.reads().stats().await) {
                (Ok(f), Ok(s)) => (f, s.rows),
                (Err(e), _) | (_, Err(e)) => return error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
            };
            let mut source = serde_json::json!({ "name": name, "files": files.len(), "chunks": chunks });
            if let Some(refs) = stored_by_ref(&files) {
                source["refs"] = refs;
            }
            sources.push(source);
        }
        body["sources"] = serde_json::Value::Array(sources);
    }
    Json(body).into_response()
}

/// The query adapter stored for the index's model (`null` when none was ever fitted):
/// `{"in_use","history_version","newest","report"}` — `in_use`: whether `locate` reads queries
/// through it now (it was kept, and fitted on the history this view reads or an older one);
/// `report`: how it was judged (commits, held out, base and adapted MRR@10, the fit; `"control":
/// "shuffled"` on the shuffled control).
async fn query_adapter(index: &ctxd_index::store::Index) -> Result<serde_json::Value, ctxd_index::error::IndexError> {
    let Some(stored) = index.history().stored_adapter().await? else { return Ok(serde_json::Value::Null) };
    let in_use = stored.in_use_at(index.history().history_version().await?);
    let report = serde_json::from_str(&stored.report).unwrap_or(serde_json::Value::String(stored.report));
    Ok(serde_json::json!({
        "in_use": in_use,
        "history_version": stored.history_version,
        "newest": stored.newest,
        "report": report,
    }))
}

/// A git source's files and chunks stored under each ref's view (`name@ref/…`; a file the same
/// on two refs is stored once, under the first, and read by both): `[{ref, files, chunks}]`,
/// `None` for a folder source.
fn stored_by_ref(files: &[(String, String, usize)]) -> Option<serde_json::Value> {
    let mut refs: std::collections::BTreeMap<String, (usize, usize)> = std::collections::BTreeMap::new();
    for (path, _, chunks) in files {
        let segment = path.split('/').next().unwrap_or_default();
        if segment.contains('@') {
            let e = refs.entry(ctxd_index::record::split_source(segment).1).or_default();
            (e.0, e.1) = (e.0 + 1, e.1 + chunks);
        }
    }
    (!refs.is_empty()).then(|| {
        refs.into_iter()
            .map(|(r, (files, chunks))| serde_json::json!({"ref": r, "files": files, "chunks": chunks}))
            .collect()
    })
}

/// Versions `GET /v1/versions` lists by default and at most.
pub(crate) const VERSIONS_SHOWN: usize = 30;
pub(crate) const MAX_VERSIONS_SHOWN: usize = 200;

/// `?last=N` of `GET /v1/versions`.
#[derive(serde::Deserialize)]
pub(crate) struct VersionsQuery {
    last: Option<usize>,
}

/// `GET /v1/versions?last=N`: `{"versions":[{version,timestamp,rows,tags}]}`, the last N
/// (default 30, at most 200), oldest first — what `as_of` can name.
pub(crate) async fn versions(
    State(state): State<AppState>,
    query: Result<axum::extract::Query<VersionsQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let q = match query {
        Ok(axum::extract::Query(q)) => q,
        Err(rej) => return error(StatusCode::BAD_REQUEST, format!("invalid query string: {}", rej.body_text())),
    };
    let last = q.last.unwrap_or(VERSIONS_SHOWN);
    if last == 0 || last > MAX_VERSIONS_SHOWN {
        return error(StatusCode::BAD_REQUEST, format!("last must be 1 to {MAX_VERSIONS_SHOWN}, not {last}"));
    }
    match state.searcher.index().snapshots().recent_snapshots(last).await {
        Ok(v) => Json(serde_json::json!({ "versions": v })).into_response(),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

/// `GET /v1/sessions`: `{"sessions":[…]}`, every live session's usage and last answers, the
/// most recently used first. Sessions cite files of every source: a token limited to some
/// sources is answered 403 (by `crate::auth`, as for `/metrics`).
pub(crate) async fn sessions(State(state): State<AppState>) -> Response {
    Json(serde_json::json!({ "sessions": state.assembler.sessions().list() })).into_response()
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
