//! The upsert stage as the graph's [`Sink`]: one [`Upsert::commit`] per batch, the run's
//! [`Counters`] updated, streamed parts' [`PartBudget`] slots released, new rows folded into
//! the full-text index every `optimize_every` commits or `optimize_every_rows` rows (every
//! commit while queries are being answered; the parts of a streamed file every
//! [`STREAM_FOLD_ROWS`] rows; a one-shot run merges the fragments of a fold's commits first), and the
//! committed paths reported to an [`OnCommit`] callback (the daemon's freshness metrics).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use ctxd_index::store::Index;

use super::Upsert;
use crate::chunk::PartBudget;
use crate::counters::Counters;
use crate::embed::EmbeddedFile;
use crate::stage::Sink;
use crate::{error::StageError, FileWork};

/// Told the paths of each successful commit (streamed files once, with their last part).
pub type OnCommit = Arc<dyn Fn(&[String]) + Send + Sync>;
/// Says whether queries are being answered now.
pub type QueriesActive = Arc<dyn Fn() -> bool + Send + Sync>;

/// Rows of a big streamed file folded into the full-text index at once (unless queries are being
/// answered): one index segment per this many rows, not one per part. Per-part folds left a
/// 1 GB log with 342 segments, merged over and over while it was read (each merge's memory grows
/// with its rows) and remapped one by one by the compaction at the end.
pub const STREAM_FOLD_ROWS: u64 = 64_000;

/// How a sink folds new rows into the indexes, besides every [`FoldEvery`] (one mode per run).
pub enum Folds {
    /// Only every [`FoldEvery`] (a daemon that answers no queries itself).
    Batched,
    /// Also each commit's rows at once while the function says queries are being answered
    /// (each query searches the rows not folded yet without the index, tokenizing them).
    EagerWhileQueried(QueriesActive),
    /// Each fold first merges the fragments written since the last one
    /// ([`Maintenance::compact_then_fold`]): a run nobody queries while it writes (`ctxd index`),
    /// where a fold may wait for the compaction.
    CompactFirst,
}

/// When new rows are folded into the full-text index.
#[derive(Debug, Clone, Copy)]
pub struct FoldEvery {
    /// After this many commits…
    pub commits: u64,
    /// …or once this many rows were written since the last fold.
    pub rows: u64,
}

/// Commits batches of embedded files and removals.
pub struct UpsertSink {
    budget: PartBudget,
    upsert: Upsert,
    index: Arc<Index>,
    counters: Arc<Counters>,
    fold: FoldEvery,
    folds: Folds,
    /// Rows inserted since the last fold into the full-text index.
    unfolded: AtomicU64,
    /// The last commit asked for a fold ([`Sink::after_write`] does it).
    fold_due: AtomicBool,
    on_commit: OnCommit,
}

impl UpsertSink {
    /// A sink committing with `upsert` to `index`, releasing streamed parts from `budget`.
    pub fn new(
        upsert: Upsert,
        index: Arc<Index>,
        budget: PartBudget,
        counters: Arc<Counters>,
        fold: FoldEvery,
        on_commit: OnCommit,
    ) -> Self {
        let fold = FoldEvery { commits: fold.commits.max(1), rows: fold.rows.max(1) };
        Self {
            budget,
            upsert,
            index,
            counters,
            fold,
            folds: Folds::Batched,
            unfolded: AtomicU64::new(0),
            fold_due: AtomicBool::new(false),
            on_commit,
        }
    }

    /// The same sink folding as `folds` says (the default: [`Folds::Batched`]).
    pub fn with_folds(mut self, folds: Folds) -> Self {
        self.folds = folds;
        self
    }
}

impl Sink for UpsertSink {
    type In = FileWork<EmbeddedFile>;
    const NAME: &'static str = "upsert";

    fn weight(&self, item: &Self::In) -> usize {
        match item {
            FileWork::Update(f) => f.rows.len().max(1),
            FileWork::Remove(_) => 1,
        }
    }

    async fn write(&self, items: Vec<Self::In>) -> Result<(), StageError> {
        // A streamed file counts once, with its last part.
        let updates =
            items.iter().filter(|i| matches!(i, FileWork::Update(f) if f.part.as_ref().is_none_or(|p| p.last))).count()
                as u64;
        let removes = items.iter().filter(|i| matches!(i, FileWork::Remove(_))).count() as u64;
        let parts = items.iter().filter(|i| matches!(i, FileWork::Update(f) if f.part.is_some())).count();
        // Committed or failed, these parts no longer hold memory: let the reader go on.
        struct Release<'a>(&'a PartBudget, usize);
        impl Drop for Release<'_> {
            fn drop(&mut self) {
                self.0.release(self.1);
            }
        }
        let _release = Release(&self.budget, parts);
        let n = items.len() as u64;
        let only_parts =
            items.iter().all(|i| matches!(i, FileWork::Update(f) if f.part.as_ref().is_some_and(|p| !p.last)));
        let fold_rows = if only_parts { self.fold.rows.max(STREAM_FOLD_ROWS) } else { self.fold.rows };
        let paths: Vec<String> = items
            .iter()
            .filter(|i| !matches!(i, FileWork::Update(f) if f.part.as_ref().is_some_and(|p| !p.last)))
            .map(|i| i.rel_path(|f| &f.rel).to_string())
            .collect();
        match self.upsert.commit(items).await {
            Ok(stats) => {
                (self.on_commit)(&paths);
                let c = &self.counters;
                c.indexed.fetch_add(updates, Ordering::Relaxed);
                c.removed.fetch_add(removes, Ordering::Relaxed);
                c.chunks.fetch_add(stats.inserted, Ordering::Relaxed);
                let commits = c.commits.fetch_add(1, Ordering::Relaxed) + 1;
                let unfolded = self.unfolded.fetch_add(stats.inserted, Ordering::Relaxed) + stats.inserted;
                let eager = unfolded > 0 && matches!(&self.folds, Folds::EagerWhileQueried(active) if active());
                if commits.is_multiple_of(self.fold.commits) || unfolded >= fold_rows || eager {
                    self.unfolded.store(0, Ordering::Relaxed);
                    self.fold_due.store(true, Ordering::Relaxed);
                }
                Ok(())
            }
            Err(e) => {
                self.counters.failed.fetch_add(n, Ordering::Relaxed);
                Err(e)
            }
        }
    }

    /// The fold [`Sink::write`] found due, and the index's figures refreshed.
    async fn after_write(&self) {
        if self.fold_due.swap(false, Ordering::Relaxed) {
            let folded = match self.folds {
                Folds::CompactFirst => self.index.maintenance().compact_then_fold().await,
                Folds::Batched | Folds::EagerWhileQueried(_) => self.index.maintenance().optimize_indices().await,
            };
            if let Err(e) = folded {
                tracing::warn!("optimizing indices: {e}");
            }
        }
        let _ = self.index.reads().stats().await;
    }
}
