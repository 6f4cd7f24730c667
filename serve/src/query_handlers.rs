//! The query routes' handlers: `POST /v1/search`, `/v1/context`, `/v1/context/stream`,
//! `/v1/completion-context` and `/v1/aggregate`. Each takes a [`Scoped`] request (parsed, its
//! sources resolved against the caller's token), asks the query crate, and answers with
//! [`reply`]; what ranks, packs or caches lives below the wire.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use ctxd_context::completion::{Completer, CompletionRequest, CompletionResponse};
use ctxd_context::request::ContextRequest;
use ctxd_search::search::SearchRequest;

use crate::admission::Admission;
use crate::aggregate::AggregateRequest;
use crate::reply::{error, outcome, reply, Scoped};
use crate::state::AppState;

/// `POST /v1/search`. A repeated question is answered from the cache without queueing for a
/// slot, an invalid one (the error) too; the rest wait for a slot.
pub(crate) async fn search(
    State(state): State<AppState>,
    State(gate): State<Arc<Admission>>,
    Scoped(req): Scoped<SearchRequest>,
) -> Response {
    let started = Instant::now();
    let mode = req.mode;
    let res = match req.check() {
        Ok(req) => match crate::admission::search(Some(&gate), &state.searcher, &req).await {
            Ok(res) => res,
            Err(refused) => return refused.into_response(),
        },
        Err(e) => Err(e),
    };
    outcome("search", mode.as_str(), started, res.as_ref().err());
    reply("search", res)
}

/// `POST /v1/context`.
pub(crate) async fn context(State(state): State<AppState>, Scoped(req): Scoped<ContextRequest>) -> Response {
    let started = Instant::now();
    let mode = req.mode;
    let res = match req.check() {
        Ok(req) => state.assembler.assemble(&req, |_| {}).await,
        Err(e) => Err(e),
    };
    outcome("context", mode.as_str(), started, res.as_ref().err());
    reply("context", res)
}

/// `POST /v1/context/stream`, NDJSON: each block as soon as it is chosen, then the summary
/// (blocks in attention order).
pub(crate) async fn context_stream(
    State(state): State<AppState>,
    State(gate): State<Arc<Admission>>,
    Scoped(req): Scoped<ContextRequest>,
) -> Response {
    let started = Instant::now();
    let req = match req.check() {
        Ok(req) => req,
        Err(e) => return error(StatusCode::BAD_REQUEST, e.to_string()),
    };
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

/// `POST /v1/completion-context`; before the index is ready, no context rather than an error
/// (the editor keeps completing).
pub(crate) async fn completion_context(
    State(state): State<AppState>,
    State(completer): State<Arc<Completer>>,
    Scoped(req): Scoped<CompletionRequest>,
) -> Response {
    let started = Instant::now();
    if !(state.ready)() {
        outcome("completion_context", "routed", started, None);
        return Json(CompletionResponse::default()).into_response();
    }
    let res = completer.complete(&req).await;
    outcome("completion_context", "routed", started, res.as_ref().err());
    reply("completion context", res)
}

/// `POST /v1/aggregate` (404 without aggregate sources).
pub(crate) async fn aggregate(State(state): State<AppState>, Scoped(req): Scoped<AggregateRequest>) -> Response {
    let started = Instant::now();
    let Some(agg) = &state.aggregator else {
        return error(StatusCode::NOT_FOUND, "no aggregate sources configured".into());
    };
    let res = agg.aggregate(&req).await;
    outcome("aggregate", "routed", started, res.as_ref().err());
    reply("aggregate", res)
}
