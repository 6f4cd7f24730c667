//! The HTTP API (axum), bound to 127.0.0.1 by default.
//!
//! | route | answer |
//! |---|---|
//! | `POST /v1/search` | `{"query","k"?,"mode"?}` → `{"results":[{path,start_line,end_line,symbol,score,content,…}]}` |
//! | `POST /v1/context` | `{"query","budget","reserve"?,"format"?,…}` → `{"blocks":[…],"tokens_used","budget","utilization","dedup_rate","route","intent","context"}` |
//! | `POST /v1/context/stream` | the same, as NDJSON: one `{"block":{…}}` line per block as it is chosen (relevance order), then `{"done":{…summary…}}` |
//! | `POST /v1/completion-context` | `{uri,language?,prefix,suffix?,line,max_chunks?,min_score?,strategy?}` → `{"snippets":[{uri,line_start,line_end,symbol_name,value,importance}]}` (empty until ready) |
//! | `POST /v1/aggregate` | `{query, budget, sources?, format?}` → blocks from several sources ([`crate::aggregate`]) |
//! | `POST /v1/locate` | `{"text","k"?,"without"?}` (text ≤ 1 MB) → `{"files":[{path,score,why,definitions}]}` ([`ctxd_codegraph::locate`]) |
//! | `POST /v1/graph/<tool>` | `find_references`, `callers`, `callees`, `imports`, `imported_by`, `impact`, `repo_map`, `history` with the MCP tool's arguments ([`ctxd_codegraph::tools`]) |
//! | `POST /v1/embeddings`, `POST /embed`, `GET /info` | this process's model as an embedding server, OpenAI's and text-embeddings-inference's forms ([`crate::embed_handlers`]) |
//! | `GET /v1/status` | `{"version","ready","model","table","backend","role"}`, a writer's first-scan `indexing` progress, `sources` |
//! | `GET /v1/versions?last=N` | `{"versions":[{version,timestamp,rows,tags}]}`: the last N (30) versions, oldest first |
//! | `GET /v1/sessions`, `GET /v1/sessions/{id}` | live sessions' usage and last answers (all, or one) |
//! | `GET /ui` | the web page ([`crate::ui`]; `[server] ui = false` turns it off): static, no index data without the token |
//! | `POST /mcp` | Model Context Protocol (JSON-RPC; see [`crate::mcp`], its HTTP transport in [`crate::mcp_http`]) |
//! | `POST /v1/sources/{name}/poll` | a git source polls its refs now: a git host's push webhook (GitHub/GitLab signatures with `[server] webhook_secret_file`), see [`crate::webhook`] |
//! | `GET /healthz` | 200 while the process serves requests |
//! | `GET /readyz` | 200 once the initial scan is committed, 503 before |
//! | `GET /metrics` | Prometheus text |
//! | `GET /openapi.json` | the API's OpenAPI 3.1 document, from the handlers' types ([`crate::openapi`]); no token needed |
//!
//! With a bearer token configured ([`crate::auth`]) every route but `/healthz`, `/openapi.json` and the web page answers 401
//! without it (the webhook route checks it itself, beside a git host's signature). Bodies over 64 KiB are refused (413; 3 MiB for `/v1/locate`, `/v1/graph/*`, `/v1/embeddings` and `/embed`, whose texts, diffs and batches may be long); `k` ≤ 200, budgets ≤ 1M tokens.
//!
//! Client mistakes (bad JSON, empty query, k out of range, unknown mode) are answered with
//! 400 and `{"error": "..."}`; server faults with 500 and the same shape. Every answer carries
//! an `x-request-id` header (the client's, when it sent a usable one); a handler that panics is
//! answered 500 with `"request_id"` and logged with it, and the daemon runs on (`panics.rs`).
//!
//! This file is the router alone: the handlers are in `query_handlers.rs`, `tool_handlers.rs`,
//! `status_handlers.rs`, `embed_handlers.rs`, `mcp_http.rs` and `webhook.rs`, what they share in `state.rs` and
//! `reply.rs`. The query routes (search, context, completion, aggregate, locate, graph, symbols,
//! MCP) pass admission control ([`crate::admission`]): a bounded number run at once, a bounded queue
//! waits, and the rest are answered 503 with `Retry-After` at once.

use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};
use axum::Router;

use crate::embed_handlers as embeds;
use crate::query_handlers as query;
use crate::state::{AppState, Wire, MAX_BODY_BYTES};
use crate::status_handlers as status;
use crate::tool_handlers as tools;

/// The router with every route.
pub fn router(state: AppState) -> Router {
    let ui = state.ui;
    let auth = state.auth.clone();
    let gate = state.gate.clone();
    let wire = Wire::new(state);
    let long_body = DefaultBodyLimit::max(ctxd_codegraph::tools::MAX_TOOL_BODY_BYTES);
    let authenticated = Router::new()
        .route("/v1/context", post(query::context))
        .route("/v1/completion-context", post(query::completion_context))
        .route("/v1/aggregate", post(query::aggregate))
        .route("/v1/locate", post(tools::locate).layer(long_body))
        .route("/v1/graph/{tool}", post(tools::graph).layer(long_body))
        .route("/v1/symbols/{which}", post(tools::symbols))
        .route("/v1/embeddings", post(embeds::openai).layer(long_body))
        .route("/embed", post(embeds::tei).layer(long_body))
        .route("/info", get(embeds::info))
        .route("/mcp", post(crate::mcp_http::mcp).get(crate::mcp_http::mcp_get))
        // Only the routes above queue for a query slot; search does itself, after the cache, and
        // the stream holds its slot until the stream ends.
        .route_layer(axum::middleware::from_fn_with_state(gate, crate::admission::admit))
        .route("/v1/search", post(query::search))
        .route("/v1/context/stream", post(query::context_stream))
        .route("/v1/status", get(status::status))
        .route("/v1/versions", get(status::versions))
        .route("/v1/sessions", get(status::sessions))
        .route("/v1/sessions/{id}", get(status::session_usage))
        .route("/healthz", get(status::healthz))
        .route("/readyz", get(status::readyz))
        .route("/metrics", get(status::prometheus))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(wire.clone())
        .layer(axum::middleware::from_fn_with_state(auth, crate::auth::require_bearer));
    // A git host's signed webhook carries no bearer token: its handler checks the signature, or
    // the token when there is none.
    let webhook = Router::new()
        .route("/v1/sources/{name}/poll", post(crate::webhook::poll_handler))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(wire);
    // The API's contract holds no index data: it is served without the token.
    let contract = Router::new().route("/openapi.json", get(crate::openapi::handler));
    let routes = authenticated.merge(webhook).merge(contract);
    let routes = if ui { routes.merge(crate::ui::router()) } else { routes };
    // Outermost: every answer carries its request id; a handler's panic is answered 500.
    routes.layer(axum::middleware::from_fn(crate::panics::answer_panics))
}

/// Serves `router` on `listener` until `shutdown` resolves.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: AppState,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router(state)).with_graceful_shutdown(shutdown).await
}
