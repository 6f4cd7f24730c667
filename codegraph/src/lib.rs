//! The code graph of a ctxd index, read side, and what is built on it: the files, definitions
//! and edges of one index version with every stored edge target resolved ([`graph`]),
//! issue → files localization ([`locate`]), and both as one JSON-in/JSON-out tool surface
//! ([`tools`]) that the HTTP and MCP wires call alike.
//!
//! Depends on `ctxd_search` (localization's BM25 and vector signals go through its retriever)
//! and never on `ctxd_context`, which takes localization's file prior for issue-like queries.
//! Every type has one path: its module's (no re-exports at the root).

pub mod graph;
pub mod locate;
pub mod metrics;
pub mod tools;
