//! The wire of ctxd: translation between requests on the network and the query crate
//! ([`ctxd_query`]), which answers them.
//!
//! * [`http`] is the axum API: `POST /v1/search`, `/v1/context`, `/v1/completion-context`,
//!   `/v1/aggregate`, `GET /healthz`, `GET /readyz`, `GET /metrics`, …
//! * [`mcp`] is the Model Context Protocol server (stdio and `POST /mcp`) exposing search,
//!   context, symbols, a repository overview and an index freshness check as tools.
//! * [`flight`] is the Arrow Flight service: snapshots as flights, searches and whole
//!   versions of the chunks table as record-batch streams.
//! * [`aggregate`] gathers one budgeted context from several sources (this index, other ctxd
//!   daemons, MCP servers) with timeouts, priorities, dedup and a version-keyed cache.
//! * [`graph_tools`] is `locate` and the code-graph tools on HTTP and MCP.
//! * [`auth`] is the optional bearer token every endpoint but `/healthz` requires;
//!   [`admission`] bounds the queries running and waiting (503 with `Retry-After` beyond).
//! * [`metrics`] names the wire's metrics (and re-exports the query crate's).
//!
//! The query crate's modules are re-exported under their old names (`ctxd_serve::search`,
//! `ctxd_serve::context`, …) for the callers that import them from here.

pub mod admission;
pub mod aggregate;
pub mod auth;
pub mod flight;
pub mod graph_tools;
pub mod http;
pub mod mcp;
mod mcp_catalog;
mod mcp_http;
pub mod metrics;
pub mod symbol_tools;
pub mod webhook;

pub use ctxd_query::{
    completion, context, doc_type, error, eval, graph, locate, rerank, route, routed, search, session, symbols, tools,
};
pub use ctxd_query::{Mode, SearchError, SearchRequest, SearchResponse, SearchResult, Searcher};
