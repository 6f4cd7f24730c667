//! The wire of ctxd: translation between requests on the network and the query crate
//! (`ctxd_search`, `ctxd_codegraph`, `ctxd_context`), which answer them.
//!
//! * [`http`] is the axum API: `POST /v1/search`, `/v1/context`, `/v1/completion-context`,
//!   `/v1/aggregate`, `GET /healthz`, `GET /readyz`, `GET /metrics`, …
//! * [`mcp`] is the Model Context Protocol server (stdio and `POST /mcp`) exposing search,
//!   context, symbols, a repository overview and an index freshness check as tools.
//! * [`flight`] is the Arrow Flight service: snapshots as flights, searches and whole
//!   versions of the chunks table as record-batch streams.
//! * [`aggregate`] gathers one budgeted context from several sources (this index, other ctxd
//!   daemons, MCP servers) with timeouts, priorities, dedup and a version-keyed cache.
//! * [`graph_tools`] and [`symbol_tools`] describe `locate`, the code-graph and the symbol
//!   tools for MCP; `tool_handlers.rs` serves them on HTTP.
//! * [`auth`] is the optional bearer token every endpoint but `/healthz` requires;
//!   [`admission`] bounds the queries running and waiting (503 with `Retry-After` beyond).
//! * [`state`] is what the HTTP handlers share, `reply.rs` how they read a request and answer;
//!   [`webhook`] is a git host's push webhook; `panics.rs` gives every request an id and answers
//!   a handler's panic 500 with it, the daemon running on.
//! * [`ui`] is the web page at `GET /ui` (status, ask, graph, sessions over this API).
//! * [`metrics`] names the wire's metrics; [`openapi`] is `GET /openapi.json`, the API's
//!   contract generated from the handlers' types.
//!
//! Types of the query side are imported from their own crates: one path to every type.

// Handlers answer with axum's `Response` (128 bytes) as their error: it is what they send, and
// boxing it only to unbox it in the next line saves nothing.
#![allow(clippy::result_large_err)]

pub(crate) mod admission;
pub mod aggregate;
pub(crate) mod auth;
pub(crate) mod embed_handlers;
pub mod flight;
pub(crate) mod graph_tools;
pub mod http;
pub mod mcp;
pub mod mcp_catalog;
mod mcp_http;
pub mod metrics;
pub(crate) mod openapi;
mod panics;
mod query_handlers;
mod reference;
mod reply;
pub(crate) mod state;
mod status_handlers;
pub(crate) mod symbol_tools;
mod tool_handlers;
pub(crate) mod ui;
pub(crate) mod webhook;

pub use admission::{Admission, AdmissionLimits};
pub use auth::{Auth, SourceTokens, Token};
pub use state::{AppState, ProgressFn};
