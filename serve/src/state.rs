//! What the HTTP handlers share: [`AppState`] (the searcher, assembler, auth, access, MCP server,
//! aggregator, webhook poke and admission gate the binary hands to [`crate::http::router`]),
//! the per-router [`Wire`] state (the completion caches and graph tools kept beside it) with
//! the `FromRef` impls axum's `State` extractors use, and [`CallerExt`], the caller the bearer
//! middleware authenticated.

use std::sync::Arc;

use axum::extract::FromRef;
use ctxd_codegraph::tools::GraphTools;
use ctxd_context::assembler::Assembler;
use ctxd_context::completion::Completer;
use ctxd_search::searcher::Searcher;
use metrics_exporter_prometheus::PrometheusHandle;

use crate::admission::Admission;
use crate::aggregate::Aggregator;
use crate::auth::{Auth, Caller};
use crate::mcp::McpServer;

/// Wakes a git source's poll by name; false when no such source runs.
pub type Poke = Arc<dyn Fn(&str) -> bool + Send + Sync>;

/// Largest request body accepted.
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// Reads a pipeline's progress as JSON (`ctxd_pipeline::progress::IndexProgress` with its rates).
pub type ProgressFn = Arc<dyn Fn() -> serde_json::Value + Send + Sync>;

/// Shared state of the handlers.
#[derive(Clone)]
pub struct AppState {
    pub searcher: Arc<Searcher>,
    pub assembler: Arc<Assembler>,
    pub ready: Arc<dyn Fn() -> bool + Send + Sync>,
    /// How far the writer's first pass is (`/v1/status`'s `indexing`); none: a reader.
    pub progress: Option<ProgressFn>,
    pub prometheus: Option<PrometheusHandle>,
    /// Bearer tokens required on every route but `/healthz` (none: open), each with the
    /// sources it may read ([`crate::auth`]).
    pub auth: Option<Auth>,
    /// The configured source names, which `source` on a request is checked against.
    pub access: ctxd_search::sources::LiveAccess,
    /// The MCP handler behind `POST /mcp` (none: the route answers 404).
    pub mcp: Option<Arc<McpServer>>,
    /// The sources behind `POST /v1/aggregate` (none: 404).
    pub aggregator: Option<Arc<Aggregator>>,
    /// Wakes a git source's poll by name (false: no such source runs); none: this process
    /// runs no sources ([`crate::webhook`]).
    pub poll: Option<Poke>,
    /// The git hosts' webhook secret (`[server] webhook_secret_file`).
    pub webhook_secret: Option<String>,
    /// The process's admission gate (queries at once and waiting, [`crate::admission`]),
    /// shared with Arrow Flight.
    pub gate: Arc<Admission>,
    /// Serve the web page at `GET /ui` (`[server] ui`).
    pub ui: bool,
    /// The writer lease this process holds, as `/v1/status` names it (none: a reader).
    pub lease: Option<String>,
}

/// What the router's handlers extract: the caller's [`AppState`] and what the wire keeps
/// beside it (the completion-context caches, one [`Completer`] per router; the graph tools
/// sharing the assembler's locator).
#[derive(Clone)]
pub(crate) struct Wire {
    app: AppState,
    completer: Arc<Completer>,
    graph: Arc<GraphTools>,
}

impl Wire {
    /// The state of one router over `app`.
    pub(crate) fn new(app: AppState) -> Self {
        let completer = Arc::new(Completer::new((*app.searcher).clone()));
        let graph = Arc::new(GraphTools::with_locator(app.assembler.locator().clone()));
        Wire { app, completer, graph }
    }
}

impl FromRef<Wire> for Arc<Admission> {
    fn from_ref(wire: &Wire) -> Self {
        wire.app.gate.clone()
    }
}

impl FromRef<Wire> for Arc<GraphTools> {
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

/// The sources each caller may read (one `Arc` clone: what the scoped extractor needs, without
/// the whole `AppState`).
impl FromRef<Wire> for ctxd_search::sources::LiveAccess {
    fn from_ref(wire: &Wire) -> Self {
        wire.app.access.clone()
    }
}

impl FromRef<Wire> for Arc<Completer> {
    fn from_ref(wire: &Wire) -> Self {
        wire.completer.clone()
    }
}

/// The caller a request was authenticated as (every source without tokens).
pub(crate) type CallerExt = Option<axum::Extension<Caller>>;
