//! Context for LLMs from a ctxd index: what is sent, not just what is found.
//!
//! * [`assembler`] — `Assembler::assemble`: routed candidates (lifted by localization's file
//!   prior for issue-like queries) → [`draft`] (exact duplicates, merges, near-duplicates) →
//!   budget packing, with [`skeletons`] (signature skeletons and outlines of what did not fit)
//!   and [`compress`] (highlights, one-line signatures), laid out by an [`assembly`] strategy
//!   and rendered as [`block`]s; the request and answer types are in [`request`].
//! * [`session`] — what each agent session has been sent (cited, not repeated);
//!   [`symbols`] — the batch symbol tools (outlines, many sources in one budget).
//! * [`completion`] — IDE completion context with its keystroke caches.
//! * [`merge`] — one budgeted context from several sources' answers (the aggregator's packing).
//! * [`eval`] — file-level retrieval and context evaluation; [`doc_type`] — code, docs,
//!   config or tests of a path, for `doc_types` filters.
//!
//! Depends on `ctxd_search` and `ctxd_codegraph`; nothing below depends on it. Every type has
//! one path: its module's (no re-exports at the root).

pub mod assembler;
pub(crate) mod assembly;
pub(crate) mod block;
pub mod completion;
pub(crate) mod compress;
pub mod doc_type;
pub mod draft;
pub mod eval;
pub mod merge;
pub mod metrics;
pub mod request;
pub mod session;
pub(crate) mod skeletons;
pub mod symbols;

pub use assembly::Assembly;
pub use block::{Block, Format};
