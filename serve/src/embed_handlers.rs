//! This process's model as an embedding server, so one host (a GPU) embeds for many (`[model]
//! endpoint` on the others) and any client of the two common forms can use it:
//!
//! | route | form |
//! |---|---|
//! | `POST /v1/embeddings` | OpenAI: `{"input": "…" \| ["…"], "model"?}` → `{"object":"list","data":[{"object":"embedding","index","embedding"}],"model","usage"}` |
//! | `POST /embed` | text-embeddings-inference: `{"inputs": "…" \| ["…"], "normalize"?, "truncate"?}` → `[[…], …]` |
//! | `GET /info` | text-embeddings-inference: `{"model_id","max_input_length","max_client_batch_size",…}` |
//!
//! The vectors are the ones this process's index stores for the same texts: the model's
//! mean-pooled, unit-length vectors of each text truncated to the model's window (`normalize`
//! and `truncate` are accepted; vectors are always unit length and inputs always truncated). A
//! `model` naming another model is answered 404 (`model_not_found`, as OpenAI does), so a client
//! never mixes two models' vectors. The texts are embedded in the model thread's bulk lane
//! (the daemon's own queries go first). Behind the same bearer token and admission control as
//! the query routes; at most [`MAX_INPUTS`] texts a request.

use axum::extract::rejection::JsonRejection;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use ctxd_models::remote::same_model;
use ctxd_models::service::EmbedService;
use serde::Deserialize;
use serde_json::json;

use crate::reply::{body_error, error};
use crate::state::AppState;

/// Texts one request may carry (OpenAI's limit).
pub const MAX_INPUTS: usize = 2048;

/// One text or several.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub(crate) enum Inputs {
    One(String),
    Many(Vec<String>),
}

impl Inputs {
    fn into_texts(self) -> Vec<String> {
        match self {
            Self::One(t) => vec![t],
            Self::Many(v) => v,
        }
    }
}

/// `POST /v1/embeddings`'s body.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub(crate) struct OpenAiRequest {
    input: Inputs,
    model: Option<String>,
    encoding_format: Option<String>,
}

/// `POST /embed`'s body (`normalize` and `truncate` are accepted and ignored: vectors are
/// always unit length, inputs always truncated to the window).
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub(crate) struct TeiRequest {
    inputs: Inputs,
}

/// The model service of this process, or why there is none.
fn service(state: &AppState) -> Result<&EmbedService, Response> {
    state.searcher.retriever().embed().ok_or_else(|| {
        error(StatusCode::SERVICE_UNAVAILABLE, "this process runs no embedding model (BM25 only)".into())
    })
}

/// A request's body and this process's model service, or the answer that refuses it.
fn request<T>(state: &AppState, body: Result<Json<T>, JsonRejection>) -> Result<(T, &EmbedService), Response> {
    let Json(req) = body.map_err(|rej| body_error(&rej))?;
    Ok((req, service(state)?))
}

async fn embed(service: &EmbedService, texts: Vec<String>) -> Result<Vec<Vec<f32>>, Response> {
    if texts.is_empty() || texts.len() > MAX_INPUTS {
        let message = format!("1 to {MAX_INPUTS} inputs a request, not {}", texts.len());
        return Err(error(StatusCode::BAD_REQUEST, message));
    }
    service.embed_bulk(texts).await.map_err(|e| {
        tracing::error!("embedding for a client failed: {e}");
        error(StatusCode::INTERNAL_SERVER_ERROR, format!("embedding failed: {e}"))
    })
}

/// `POST /v1/embeddings`.
pub(crate) async fn openai(
    State(state): State<AppState>,
    body: Result<Json<OpenAiRequest>, JsonRejection>,
) -> Response {
    let (req, service) = match request(&state, body) {
        Ok(r) => r,
        Err(r) => return r,
    };
    let model = service.model_id().to_string();
    if let Some(asked) = req.model.as_deref().filter(|m| !m.is_empty() && !same_model(m, &model)) {
        let message = format!("model {asked} is not served here: this server embeds with {model}");
        return (StatusCode::NOT_FOUND, Json(json!({ "error": { "message": message, "code": "model_not_found" } })))
            .into_response();
    }
    if req.encoding_format.as_deref().is_some_and(|f| f != "float") {
        return error(StatusCode::BAD_REQUEST, "encoding_format: only \"float\" is served".into());
    }
    let vectors = match embed(service, req.input.into_texts()).await {
        Ok(v) => v,
        Err(r) => return r,
    };
    let data: Vec<_> = vectors
        .into_iter()
        .enumerate()
        .map(|(index, embedding)| json!({ "object": "embedding", "index": index, "embedding": embedding }))
        .collect();
    Json(json!({ "object": "list", "data": data, "model": model, "usage": { "prompt_tokens": 0, "total_tokens": 0 } }))
        .into_response()
}

/// `POST /embed`.
pub(crate) async fn tei(State(state): State<AppState>, body: Result<Json<TeiRequest>, JsonRejection>) -> Response {
    let (req, service) = match request(&state, body) {
        Ok(r) => r,
        Err(r) => return r,
    };
    match embed(service, req.inputs.into_texts()).await {
        Ok(vectors) => Json(vectors).into_response(),
        Err(r) => r,
    }
}

/// `GET /info`.
pub(crate) async fn info(State(state): State<AppState>) -> Response {
    let service = match service(&state) {
        Ok(s) => s,
        Err(r) => return r,
    };
    Json(json!({
        "model_id": service.model_id(),
        "model_type": { "embedding": { "pooling": "mean" } },
        "max_client_batch_size": MAX_INPUTS,
        "dimension": service.dim(),
        "backend": service.backend(),
        "version": env!("CARGO_PKG_VERSION"),
        "server": "ctxd",
    }))
    .into_response()
}
