//! Retrieval and serving for ctxd.
//!
//! * [`search`] answers a query in one of three modes: `vector` (cosine over chunk
//!   embeddings), `bm25` (LanceDB full-text index over chunk contents) and `hybrid` (both,
//!   fused with reciprocal-rank fusion). Results carry the path relative to the indexed root,
//!   the 1-based line range, the symbol and the score.
//! * [`eval`] measures retrieval at file level on query sets of the form
//!   `{"id","query","gold":[paths]}`: recall@1/5/10, MRR@10 and nDCG@10.
//! * [`flight`] is the Arrow Flight service: snapshots as flights, searches and whole
//!   versions of the chunks table as record-batch streams.
//! * [`http`] is the axum API: `POST /v1/search`, `GET /healthz`, `GET /readyz`, `GET /metrics`.
//! * [`mcp`] is the Model Context Protocol server (stdio and `POST /mcp`) exposing search,
//!   context, symbols, a repository overview and an index freshness check as tools.
//! * [`aggregate`] gathers one budgeted context from several sources (this index, other ctxd
//!   daemons, MCP servers) with timeouts, priorities, dedup and a version-keyed cache.
//! * [`auth`] is the optional bearer token every endpoint but `/healthz` requires.

pub mod aggregate;
pub mod auth;
mod bounded;
pub mod completion;
pub mod context;
pub mod error;
pub mod eval;
pub mod flight;
pub mod http;
pub mod mcp;
pub mod metrics;
pub mod rerank;
pub mod route;
pub mod routed;
pub mod search;

pub use error::SearchError;
pub use search::{Mode, SearchRequest, SearchResponse, SearchResult, Searcher};
