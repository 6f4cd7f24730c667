//! How the HTTP handlers read a request and answer it, in one place: errors as
//! `{"error": "<sentence>"}` with 400/413/403/500, each query's `endpoint`/`mode`/`status`
//! metrics ([`outcome`]), the sources a request may read ([`scope_of`]), and [`Scoped`], the
//! extractor that parses a query body and narrows its `source`/`ref` to what the caller's token
//! may read — so a handler starts from a valid, scoped request.

use std::time::Instant;

use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRef, FromRequest, Request};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use ctxd_index::scope::SourceScope;
use ctxd_search::error::SearchError;
use ctxd_search::sources::LiveAccess;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::auth::Caller;
use crate::metrics as m;
use crate::state::{AppState, CallerExt};

/// `{"error": message}` with `status`.
pub(crate) fn error(status: StatusCode, message: String) -> Response {
    (status, Json(serde_json::json!({ "error": message }))).into_response()
}

/// 413 for a body over the route's limit, 400 for any other unreadable body.
pub(crate) fn body_error(rej: &JsonRejection) -> Response {
    let status = if rej.status() == StatusCode::PAYLOAD_TOO_LARGE { rej.status() } else { StatusCode::BAD_REQUEST };
    error(status, format!("invalid request body: {}", rej.body_text()))
}

/// Records a query's duration and its status (`ok`, `client_error`, `error`).
pub(crate) fn outcome(endpoint: &'static str, mode: &'static str, started: Instant, err: Option<&SearchError>) {
    metrics::histogram!(m::QUERY_DURATION_SECONDS, "endpoint" => endpoint, "mode" => mode)
        .record(started.elapsed().as_secs_f64());
    let status = match err {
        None => "ok",
        Some(e) if e.is_client_error() => "client_error",
        Some(_) => "error",
    };
    metrics::counter!(m::QUERY_REQUESTS_TOTAL, "endpoint" => endpoint, "mode" => mode, "status" => status).increment(1);
}

/// A query's answer: the JSON of `res`, or its error as 400 (the client's fault) or 500 (logged
/// with `what` failed).
pub(crate) fn reply<T: Serialize>(what: &str, res: Result<T, SearchError>) -> Response {
    match res {
        Ok(answer) => Json(answer).into_response(),
        Err(e) if e.is_client_error() => error(StatusCode::BAD_REQUEST, e.to_string()),
        Err(e) => {
            tracing::error!("{what} failed: {e}");
            error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string())
        }
    }
}

/// The sources a request reads: `requested` checked against the configured names and narrowed
/// to what the caller's token may read; 400 (unknown source) or 403 (not the token's) else.
pub(crate) fn scope_of(
    access: &ctxd_search::sources::Access,
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

/// A tool's JSON arguments and the sources they may read (their `source`/`ref` through
/// [`scope_of`]); an unreadable body is counted as a client error of `endpoint`.
pub(crate) fn tool_args(
    state: &AppState,
    caller: &CallerExt,
    body: Result<Json<serde_json::Value>, JsonRejection>,
    (endpoint, mode): (&'static str, &'static str),
    started: Instant,
) -> Result<(serde_json::Value, Option<SourceScope>), Response> {
    let args = match body {
        Ok(Json(v)) => v,
        Err(rej) => {
            outcome(endpoint, mode, started, Some(&SearchError::BadRequest(String::new())));
            return Err(body_error(&rej));
        }
    };
    let bad = |e: SearchError| error(StatusCode::BAD_REQUEST, e.to_string());
    let requested = ctxd_search::sources::from_args(&args).map_err(bad)?;
    let git_ref = ctxd_search::sources::ref_from_args(&args).map_err(bad)?;
    let scope = scope_of(&state.access.get(), caller, requested.as_ref(), git_ref.as_deref())?;
    Ok((args, scope))
}

/// A query request that names the sources it reads (`source`, `ref`).
pub(crate) trait Sourced {
    /// The `endpoint` label an unreadable body of this kind is counted under.
    const ENDPOINT: &'static str;
    /// The request's `source` (to be replaced by the resolved scope) and its `ref`.
    fn sources(&mut self) -> (&mut Option<SourceScope>, Option<&str>);
}

/// A query body parsed and scoped: its `source` replaced by what the caller may read of it
/// ([`scope_of`]). Rejected with the answer to send: 413/400 for a body that does not parse
/// (counted as a client error), 400/403 for sources it may not read.
pub(crate) struct Scoped<T>(pub T);

impl<S, T> FromRequest<S> for Scoped<T>
where
    S: Send + Sync,
    LiveAccess: FromRef<S>,
    T: DeserializeOwned + Sourced + Send,
{
    type Rejection = Response;

    async fn from_request(req: Request, state: &S) -> Result<Self, Response> {
        let started = Instant::now();
        let caller: CallerExt = req.extensions().get::<Caller>().cloned().map(axum::Extension);
        let mut body = match Json::<T>::from_request(req, state).await {
            Ok(Json(body)) => body,
            Err(rej) => {
                outcome(T::ENDPOINT, "unknown", started, Some(&SearchError::BadRequest(String::new())));
                return Err(body_error(&rej));
            }
        };
        let access = LiveAccess::from_ref(state);
        let (source, git_ref) = body.sources();
        *source = scope_of(&access.get(), &caller, source.as_ref(), git_ref)?;
        Ok(Scoped(body))
    }
}

macro_rules! sourced {
    ($($request:ty => $endpoint:literal),* $(,)?) => {$(
        impl Sourced for $request {
            const ENDPOINT: &'static str = $endpoint;
            fn sources(&mut self) -> (&mut Option<SourceScope>, Option<&str>) {
                (&mut self.source, self.git_ref.as_deref())
            }
        }
    )*};
}

sourced! {
    ctxd_search::search::SearchRequest => "search",
    ctxd_context::request::ContextRequest => "context",
    ctxd_context::completion::CompletionRequest => "completion_context",
    crate::aggregate::AggregateRequest => "aggregate",
}
