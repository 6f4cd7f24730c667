//! Search over a ctxd index: everything between a search request and its ranked answer,
//! without the wire (HTTP, MCP and Flight are `ctxd_serve`'s) and without the code graph
//! (`ctxd_codegraph`) or context assembly (`ctxd_context`), which build on it.
//!
//! Layers, each depending only on those above it in this list:
//!
//! * [`search`] — what a search is asked and answers: modes, request, results, limits;
//!   [`route`] — query analysis (route, intent, paths, identifiers), no I/O;
//!   [`fusion`] — reciprocal-rank and weighted fusion of ranked lists; [`error`] —
//!   `SearchError` (client vs server fault); [`sources`] — which named sources a request
//!   reads; [`bounded`] — a size-bounded map.
//! * [`retriever`] — the core: the pinned (index, model) pair, snapshot views, and the plain
//!   modes — `vector` (cosine over chunk embeddings), `bm25` (LanceDB full-text index) and
//!   `hybrid` (both, fused with reciprocal-rank fusion).
//! * [`rerank`] — late-interaction rescoring of the best candidates, with its token cache;
//!   [`routed`] — routed search (the default): the router's signals, boosts, filters and
//!   per-file caps, with its vocabulary caches.
//! * [`searcher`] — the handle every caller holds: any mode, following model switches;
//!   [`answers`] keeps its answers per index version, [`pressure`] is the load it sheds
//!   rescoring under.
//!
//! Results carry the path relative to the indexed root, the 1-based line range, the symbol and
//! the score. Every type has one path: its module's (no re-exports at the root).

pub(crate) mod answers;
pub(crate) mod bounded;
pub mod error;
pub(crate) mod fusion;
pub mod metrics;
pub mod pressure;
pub mod rerank;
pub mod retriever;
pub mod route;
pub mod routed;
pub mod search;
pub mod searcher;
pub mod sources;

pub use bounded::Bounded;
