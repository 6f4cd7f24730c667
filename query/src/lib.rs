//! Answering queries over a ctxd index: everything between a request and its ranked answer,
//! without the wire (HTTP, MCP and Flight are `ctxd_serve`'s).
//!
//! Layers, each depending only on those above it in this list:
//!
//! * [`search`] — what a search is asked and answers: modes, request, results, limits;
//!   [`route`] — query analysis (route, intent, paths, identifiers), no I/O;
//!   [`fusion`] — reciprocal-rank and weighted fusion of ranked lists.
//! * [`retriever`] — the core: the pinned (index, model) pair, snapshot views, and the plain
//!   modes — `vector` (cosine over chunk embeddings), `bm25` (LanceDB full-text index) and
//!   `hybrid` (both, fused with reciprocal-rank fusion).
//! * [`rerank`] — late-interaction rescoring of the best candidates, with its token cache;
//!   [`routed`] — routed search (the default): the router's signals, boosts, filters and
//!   per-file caps, with its vocabulary caches.
//! * [`Searcher`] — the handle every caller holds: any mode, following model switches;
//!   [`answers`] keeps its answers per index version, [`pressure`] is the load it sheds
//!   rescoring under.
//! * [`context`] — context assembly into a token budget; [`completion`] — IDE completion
//!   context ([`completion::Completer`] keeps its keystroke caches); [`eval`] — file-level
//!   retrieval and context evaluation; [`session`] — what each agent session has been sent;
//!   [`symbols`] — batch symbol tools (outlines, many sources in one budget).
//!
//! Results carry the path relative to the indexed root, the 1-based line range, the symbol and
//! the score.

pub mod answers;
pub mod bounded;
pub mod completion;
pub mod context;
pub mod doc_type;
pub mod error;
pub mod eval;
pub mod fusion;
pub mod graph;
pub mod locate;
pub mod metrics;
pub mod pressure;
pub mod rerank;
pub mod retriever;
pub mod route;
pub mod routed;
pub mod search;
mod searcher;
pub mod session;
pub mod sources;
pub mod symbols;
pub mod tools;

pub use error::SearchError;
pub use route::{Intent, Route};
pub use search::{Mode, Scope, SearchRequest, SearchResponse, SearchResult};
pub use searcher::{Cached, Searcher};
pub use sources::{Access, LiveAccess};
pub use ctxd_index::SourceScope;
