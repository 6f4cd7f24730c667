//! The HTTP API (axum), bound to 127.0.0.1 by default.
//!
//! | route | answer |
//! |---|---|
//! | `POST /v1/search` | `{"query","k"?,"mode"?}` → `{"results":[{path,start_line,end_line,symbol,score,content,…}]}` |
//! | `POST /v1/context` | `{"query","budget","reserve"?,"format"?,…}` → `{"blocks":[…],"tokens_used","budget","utilization","dedup_rate","route","intent","context"}` |
//! | `POST /v1/context/stream` | the same, as NDJSON: one `{"block":{…}}` line per block as it is chosen (relevance order), then `{"done":{…summary…}}` |
//! | `POST /v1/completion-context` | `{uri,language?,prefix,suffix?,line,max_chunks?,min_score?,strategy?}` → `{"snippets":[{uri,line_start,line_end,symbol_name,value,importance}]}` (empty until ready) |
//! | `POST /v1/aggregate` | `{query, budget, sources?, format?}` → blocks from several sources ([`crate::aggregate`]) |
//! | `POST /v1/locate` | `{"text","k"?,"without"?}` (text ≤ 1 MB) → `{"files":[{path,score,why,definitions}]}` ([`ctxd_query::locate`]) |
//! | `POST /v1/graph/<tool>` | `find_references`, `callers`, `callees`, `imports`, `imported_by`, `impact`, `repo_map`, `history` with the MCP tool's arguments ([`ctxd_query::tools`]) |
//! | `GET /v1/status` | `{"version","ready","model"}` |
//! | `POST /mcp` | Model Context Protocol (JSON-RPC; see [`crate::mcp`], its HTTP transport in [`crate::mcp_http`]) |
//! | `POST /v1/sources/{name}/poll` | a git source polls its refs now: a git host's push webhook (GitHub/GitLab signatures with `[server] webhook_secret_file`), see [`crate::webhook`] |
//! | `GET /healthz` | 200 while the process serves requests |
//! | `GET /readyz` | 200 once the initial scan is committed, 503 before |
//! | `GET /metrics` | Prometheus text |
//!
//! With a bearer token configured ([`crate::auth`]) every route but `/healthz` answers 401
//! without it. Bodies over 64 KiB are refused (413; 3 MiB for `/v1/locate` and `/v1/graph/*`, whose texts and diffs may be long); `k` ≤ 200, budgets ≤ 1M tokens.
//!
//! Client mistakes (bad JSON, empty query, k out of range, unknown mode) are answered with
//! 400 and `{"error": "..."}`; server faults with 500 and the same shape.
//!
//! The query routes (search, context, completion, aggregate, locate, graph, symbols, MCP) pass
//! admission control ([`crate::admission`]): a bounded number run at once, a bounded queue
//! waits, and the rest are answered 503 with `Retry-After` at once.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::rejection::JsonRejection;
use axum::extract::{DefaultBodyLimit, FromRef, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use metrics_exporter_prometheus::PrometheusHandle;

use crate::completion::{Completer, CompletionRequest, CompletionResponse};
use crate::context::{Assembler, ContextRequest};
use crate::metrics as m;
use crate::search::SearchRequest;
use ctxd_index::SourceScope;
use crate::Searcher;

/// Largest request body accepted.
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// Shared state of the handlers.
#[derive(Clone)]
pub struct AppState {
    pub searcher: Arc<Searcher>,
    pub assembler: Arc<Assembler>,
    pub ready: Arc<dyn Fn() -> bool + Send + Sync>,
    pub prometheus: Option<PrometheusHandle>,
    /// Bearer tokens required on every route but `/healthz` (none: open), each with the
    /// sources it may read ([`crate::auth`]).
    pub auth: Option<crate::auth::Auth>,
    /// The configured source names, which `source` on a request is checked against.
    pub access: ctxd_query::LiveAccess,
    /// The MCP handler behind `POST /mcp` (none: the route answers 404).
    pub mcp: Option<Arc<crate::mcp::McpServer>>,
    /// The sources behind `POST /v1/aggregate` (none: 404).
    pub aggregator: Option<Arc<crate::aggregate::Aggregator>>,
    /// Wakes a git source's poll by name (false: no such source runs); none: this process
    /// runs no sources ([`crate::webhook`]).
    pub poll: Option<Arc<dyn Fn(&str) -> bool + Send + Sync>>,
    /// The git hosts' webhook secret (`[server] webhook_secret_file`).
    pub webhook_secret: Option<String>,
    /// The process's admission gate (queries at once and waiting, [`crate::admission`]),
    /// shared with Arrow Flight.
    pub gate: Arc<crate::admission::Admission>,
}

/// What the router's handlers extract: the caller's [`AppState`] and what the wire keeps
/// beside it (the completion-context caches, one [`Completer`] per router).
#[derive(Clone)]
struct Wire {
    app: AppState,
    completer: Arc<Completer>,
    graph: Arc<crate::tools::GraphTools>,
    gate: Arc<crate::admission::Admission>,
}

impl FromRef<Wire> for Arc<crate::admission::Admission> {
    fn from_ref(wire: &Wire) -> Self {
        wire.gate.clone()
    }
}

impl FromRef<Wire> for Arc<crate::tools::GraphTools> {
    fn from_ref(wire: &Wire) -> Self {
        wire.graph.clone()
    }
}

impl FromRef<Wire> for Arc<Assembler> {
    fn from_ref(wire: &Wire) -> Self {
        wire.app.assembler.clone()
    }
}

impl FromRef<Wire> for AppState {
    fn from_ref(wire: &Wire) -> Self {
        wire.app.clone()
    }
}

impl FromRef<Wire> for Arc<Completer> {
    fn from_ref(wire: &Wire) -> Self {
        wire.completer.clone()
    }
}

/// 413 for a body over [`MAX_BODY_BYTES`], 400 for any other unreadable body.
pub(crate) fn body_error(rej: &JsonRejection) -> Response {
    let status = if rej.status() == StatusCode::PAYLOAD_TOO_LARGE { rej.status() } else { StatusCode::BAD_REQUEST };
    error(status, format!("invalid request body: {}", rej.body_text()))
}

pub(crate) fn error(status: StatusCode, message: String) -> Response {
    (status, Json(serde_json::json!({ "error": message }))).into_response()
}

/// The caller a request was authenticated as (every source without tokens).
pub(crate) type CallerExt = Option<axum::Extension<crate::auth::Caller>>;

/// The sources a request reads: `requested` checked against the configured names and narrowed
/// to what the caller's token may read; 400 (unknown source) or 403 (not the token's) else.
pub(crate) fn scope_of(
    access: &ctxd_query::Access,
    caller: &CallerExt,
    requested: Option<&SourceScope>,
    git_ref: Option<&str>,
) -> Result<Option<SourceScope>, Response> {
    let allowed = caller.as_ref().and_then(|c| c.sources.as_ref());
    access.resolve(requested, git_ref, allowed).map_err(|e| {
        let status = if e.is_forbidden() { StatusCode::FORBIDDEN } else { StatusCode::BAD_REQUEST };
        error(status, e.to_string())
    })
}

/// [`scope_of`] the `source` of a tool's JSON arguments.
pub(crate) fn scope_of_args(
    access: &ctxd_query::Access,
    caller: &CallerExt,
    args: &serde_json::Value,
) -> Result<Option<SourceScope>, Response> {
    let bad = |e: crate::SearchError| error(StatusCode::BAD_REQUEST, e.to_string());
    let requested = ctxd_query::sources::from_args(args).map_err(bad)?;
    let git_ref = ctxd_query::sources::ref_from_args(args).map_err(bad)?;
    scope_of(access, caller, requested.as_ref(), git_ref.as_deref())
}

async fn search(
    State(state): State<AppState>,
    State(gate): State<Arc<crate::admission::Admission>>,
    caller: CallerExt,
    body: Result<Json<SearchRequest>, JsonRejection>,
) -> Response {
    let started = Instant::now();
    let mut req = match body {
        Ok(Json(req)) => req,
        Err(rej) => {
            metrics::counter!(m::QUERY_REQUESTS_TOTAL, "endpoint" => "search", "mode" => "unknown", "status" => "client_error").increment(1);
            return body_error(&rej);
        }
    };
    let mode = req.mode.as_str();
    req.source = match scope_of(&state.access.get(), &caller, req.source.as_ref(), req.git_ref.as_deref()) {
        Ok(s) => s,
        Err(resp) => return resp,
    };
    // A repeated question is answered from the cache without queueing for a slot, an invalid one
    // (the error) too; the rest wait for a slot.
    let res = match crate::admission::search(Some(&gate), &state.searcher, &req).await {
        Ok(res) => res,
        Err(refused) => return refused.into_response(),
    };
    metrics::histogram!(m::QUERY_DURATION_SECONDS, "endpoint" => "search", "mode" => mode)
        .record(started.elapsed().as_secs_f64());
    match res {
        Ok(resp) => {
            metrics::counter!(m::QUERY_REQUESTS_TOTAL, "endpoint" => "search", "mode" => mode, "status" => "ok")
                .increment(1);
            Json(resp).into_response()
        }
        Err(e) if e.is_client_error() => {
            metrics::counter!(m::QUERY_REQUESTS_TOTAL, "endpoint" => "search", "mode" => mode, "status" => "client_error").increment(1);
            error(StatusCode::BAD_REQUEST, e.to_string())
        }
        Err(e) => {
            metrics::counter!(m::QUERY_REQUESTS_TOTAL, "endpoint" => "search", "mode" => mode, "status" => "error")
                .increment(1);
            tracing::error!("search failed: {e}");
            error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string())
        }
    }
}

pub(crate) fn outcome(endpoint: &'static str, mode: &'static str, started: Instant, err: Option<&crate::SearchError>) {
    metrics::histogram!(m::QUERY_DURATION_SECONDS, "endpoint" => endpoint, "mode" => mode)
        .record(started.elapsed().as_secs_f64());
    let status = match err {
        None => "ok",
        Some(e) if e.is_client_error() => "client_error",
        Some(_) => "error",
    };
    metrics::counter!(m::QUERY_REQUESTS_TOTAL, "endpoint" => endpoint, "mode" => mode, "status" => status).increment(1);
}

async fn context(
    State(state): State<AppState>,
    caller: CallerExt,
    body: Result<Json<ContextRequest>, JsonRejection>,
) -> Response {
    let started = Instant::now();
    let mut req = match body {
        Ok(Json(req)) => req,
        Err(rej) => {
            outcome("context", "unknown", started, Some(&crate::SearchError::BadRequest(String::new())));
            return body_error(&rej);
        }
    };
    req.source = match scope_of(&state.access.get(), &caller, req.source.as_ref(), req.git_ref.as_deref()) {
        Ok(s) => s,
        Err(resp) => return resp,
    };
    let res = state.assembler.assemble(&req, |_| {}).await;
    outcome("context", req.mode.as_str(), started, res.as_ref().err());
    match res {
        Ok(resp) => Json(resp).into_response(),
        Err(e) if e.is_client_error() => error(StatusCode::BAD_REQUEST, e.to_string()),
        Err(e) => {
            tracing::error!("context failed: {e}");
            error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string())
        }
    }
}

/// NDJSON: each block as soon as it is chosen, then the summary (blocks in attention order).
async fn context_stream(
    State(state): State<AppState>,
    State(gate): State<Arc<crate::admission::Admission>>,
    caller: CallerExt,
    body: Result<Json<ContextRequest>, JsonRejection>,
) -> Response {
    let started = Instant::now();
    let mut req = match body {
        Ok(Json(req)) => req,
        Err(rej) => return body_error(&rej),
    };
    req.source = match scope_of(&state.access.get(), &caller, req.source.as_ref(), req.git_ref.as_deref()) {
        Ok(s) => s,
        Err(resp) => return resp,
    };
    if let Err(e) = Assembler::validate(&req) {
        return error(StatusCode::BAD_REQUEST, e.to_string());
    }
    // The slot is held by the task that assembles, until the last line is sent.
    let entered = match gate.enter().await {
        Ok(e) => e,
        Err(refused) => return refused.into_response(),
    };
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    tokio::spawn(async move {
        let _entered = entered;
        let lines = tx.clone();
        let res = state
            .assembler
            .assemble(&req, |b| {
                let _ = lines.send(format!("{}\n", serde_json::json!({ "block": b })));
            })
            .await;
        outcome("context_stream", req.mode.as_str(), started, res.as_ref().err());
        let last = match res {
            Ok(mut r) => {
                r.context.clear();
                serde_json::json!({ "done": r })
            }
            Err(e) => serde_json::json!({ "error": e.to_string() }),
        };
        let _ = tx.send(format!("{last}\n"));
    });
    let stream = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|line| (Ok::<_, std::convert::Infallible>(line), rx))
    });
    ([(axum::http::header::CONTENT_TYPE, "application/x-ndjson")], axum::body::Body::from_stream(stream))
        .into_response()
}

async fn completion_context(
    State(state): State<AppState>,
    State(completer): State<Arc<Completer>>,
    caller: CallerExt,
    body: Result<Json<CompletionRequest>, JsonRejection>,
) -> Response {
    let started = Instant::now();
    let mut req = match body {
        Ok(Json(req)) => req,
        Err(rej) => return body_error(&rej),
    };
    req.source = match scope_of(&state.access.get(), &caller, req.source.as_ref(), req.git_ref.as_deref()) {
        Ok(s) => s,
        Err(resp) => return resp,
    };
    // Not ready yet: no context rather than an error (the editor keeps completing).
    if !(state.ready)() {
        outcome("completion_context", "routed", started, None);
        return Json(CompletionResponse::default()).into_response();
    }
    let res = completer.complete(&req).await;
    outcome("completion_context", "routed", started, res.as_ref().err());
    match res {
        Ok(resp) => Json(resp).into_response(),
        Err(e) if e.is_client_error() => error(StatusCode::BAD_REQUEST, e.to_string()),
        Err(e) => {
            tracing::error!("completion context failed: {e}");
            error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string())
        }
    }
}

async fn healthz() -> &'static str {
    "ok\n"
}

async fn readyz(State(state): State<AppState>) -> Response {
    if (state.ready)() {
        (StatusCode::OK, "ready\n").into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "initial scan in progress\n").into_response()
    }
}

async fn prometheus(State(state): State<AppState>) -> Response {
    match &state.prometheus {
        // The index gauges are set when the engine opens and after every commit.
        Some(h) => ([(axum::http::header::CONTENT_TYPE, "text/plain; version=0.0.4")], h.render()).into_response(),
        None => error(StatusCode::NOT_FOUND, "metrics are not enabled".into()),
    }
}

async fn aggregate(
    State(state): State<AppState>,
    caller: CallerExt,
    body: Result<Json<crate::aggregate::AggregateRequest>, JsonRejection>,
) -> Response {
    let started = Instant::now();
    let Some(agg) = &state.aggregator else {
        return error(StatusCode::NOT_FOUND, "no aggregate sources configured".into());
    };
    let mut req = match body {
        Ok(Json(r)) => r,
        Err(rej) => return body_error(&rej),
    };
    req.source = match scope_of(&state.access.get(), &caller, req.source.as_ref(), req.git_ref.as_deref()) {
        Ok(s) => s,
        Err(resp) => return resp,
    };
    let res = agg.aggregate(&req).await;
    outcome("aggregate", "routed", started, res.as_ref().err());
    match res {
        Ok(r) => Json(r).into_response(),
        Err(e) if e.is_client_error() => error(StatusCode::BAD_REQUEST, e.to_string()),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

/// `{"version","ready","model","table"}` (what an aggregator keys its cache on) and, in an
/// index of named sources, `sources`: `[{name, files, chunks}]` of the sources the caller's
/// token may read (no other source is named).
async fn status(State(state): State<AppState>, caller: CallerExt) -> Response {
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
async fn session_usage(
    State(state): State<AppState>,
    axum::extract::Path(id): axum::extract::Path<String>,
) -> Response {
    if let Err(e) = ctxd_query::session::validate_id(&id) {
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

/// The router with every route.
pub fn router(state: AppState) -> Router {
    let auth = state.auth.clone();
    let completer = Arc::new(Completer::new((*state.searcher).clone()));
    let graph = Arc::new(crate::tools::GraphTools::with_locator(state.assembler.locator().clone()));
    let gate = state.gate.clone();
    let wire = Wire { app: state, completer, graph, gate: gate.clone() };
    let long_body = DefaultBodyLimit::max(crate::tools::MAX_TOOL_BODY_BYTES);
    Router::new()
        .route("/v1/context", post(context))
        .route("/v1/completion-context", post(completion_context))
        .route("/v1/aggregate", post(aggregate))
        .route("/v1/locate", post(crate::graph_tools::locate_handler).layer(long_body))
        .route("/v1/graph/{tool}", post(crate::graph_tools::graph_handler).layer(long_body))
        .route("/v1/symbols/{which}", post(crate::symbol_tools::handler))
        .route("/mcp", post(crate::mcp_http::mcp).get(crate::mcp_http::mcp_get))
        // Only the routes above queue for a query slot; search does itself, after the cache, and
        // the stream holds its slot until the stream ends.
        .route_layer(axum::middleware::from_fn_with_state(gate, crate::admission::admit))
        .route("/v1/search", post(search))
        .route("/v1/context/stream", post(context_stream))
        .route("/v1/status", get(status))
        .route("/v1/sessions/{id}", get(session_usage))
        .route("/v1/sources/{name}/poll", post(crate::webhook::poll_handler))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(prometheus))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(wire)
        .layer(axum::middleware::from_fn_with_state(auth, crate::auth::require_bearer))
}

/// Serves `router` on `listener` until `shutdown` resolves.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: AppState,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router(state)).with_graceful_shutdown(shutdown).await
}
