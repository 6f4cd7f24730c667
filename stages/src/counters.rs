//! The file counts behind a run's summary, shared by the source and the stages of one graph.

use std::sync::atomic::AtomicU64;

/// Counts of one run (the one-shot summary of `ctxd index`).
#[derive(Debug, Default)]
pub struct Counters {
    /// Files the source emitted (updates, not removals).
    pub seen: AtomicU64,
    /// Files committed (a streamed file once, with its last part).
    pub indexed: AtomicU64,
    /// Removals committed.
    pub removed: AtomicU64,
    /// Files skipped because their content hash is unchanged.
    pub unchanged: AtomicU64,
    /// Files skipped for another reason (binary, too large, vanished).
    pub skipped: AtomicU64,
    /// Files that failed in a stage or a commit.
    pub failed: AtomicU64,
    /// Chunks written.
    pub chunks: AtomicU64,
    /// Commits made.
    pub commits: AtomicU64,
}
