//! The chunks table's secondary indexes: the full-text index on `content` (its analysis, its
//! first build, the folds of new rows into it and the merges of its segments) and the B-tree
//! indexes on `embed_key` and `path`.

use std::collections::HashSet;
use std::sync::atomic::Ordering;

use lance::index::DatasetIndexExt;
use lancedb::index::scalar::FtsIndexBuilder;
use lancedb::index::Index as LanceIndex;
use lancedb::table::{OptimizeAction, OptimizeOptions};
use lancedb::Table;

use crate::metrics as m;
use crate::schema::EMBED_KEY;
use crate::{error::IndexError, store::Index};

/// Name LanceDB gives the full-text index on `content`.
const FTS_INDEX: &str = "content_idx";
/// Full-text index segments that trigger a merge… (every query visits each segment of each
/// index and opens the fragments its hits are in: 50 clients beside a stream of commits held
/// ~104 queries/s over the last two minutes of 150 s with 3 and 2 — the table's base segment and
/// at most two deltas, 2–3 fragments — against ~88 with 8 and 4 (5–8 fragments), two runs each in
/// alternating order; 88–113 with 16 and 8 the day before; `benches/load_trend.py`)
pub const MAX_FTS_SEGMENTS: usize = 3;
/// …of this many of the latest segments (with 3 and 2: the newest delta is merged into the one
/// before it, never into the base, so a merge rewrites only what the stream wrote since the last
/// maintenance pass)…
pub const FTS_SEGMENTS_MERGED: usize = 2;
/// …when they hold at most this many rows, with the rows not folded yet (a merge's memory
/// grows with its rows; [`Index::fts_merge_rows`]).
pub const MAX_FTS_MERGE_ROWS: usize = 64_000;
/// A maintenance pass merges every full-text segment into one when the index holds at most
/// this many rows. Queries visit every segment: on 255k chunks in 25 segments a 4-term query
/// took p50 7.6–20 ms, in one segment 2.5–3.5 ms. The merge of those 255k rows took 2.7 s and
/// ~225 MB of memory while it ran (≈ 0.9 KB per row), hence the cap.
pub const MAX_FTS_FULL_MERGE_ROWS: usize = 500_000;

/// Full-text analysis: LanceDB's code tokenizer — identifiers split at camelCase, snake_case
/// and digit boundaries while the whole identifier is kept too (`getUserById` is found by
/// `getuserbyid` and by "user") — plus English stemming and stop words for the prose of
/// comments and documents. Queries go through the same analysis.
fn fts_params() -> FtsIndexBuilder {
    FtsIndexBuilder::default()
        .base_tokenizer("code".to_string())
        .split_identifiers(true)
        .preserve_original(true)
        .stem(true)
        .remove_stop_words(true)
}

/// Builds a B-tree index on each of `columns` of `table` that has none; true if any was built.
pub(crate) async fn ensure_btree(table: &Table, columns: &[&str]) -> lancedb::Result<bool> {
    let indexed: Vec<String> = table.list_indices().await?.into_iter().flat_map(|i| i.columns).collect();
    let mut built = false;
    for column in columns {
        if !indexed.iter().any(|c| c == column) {
            table.create_index(&[*column], LanceIndex::BTree(Default::default())).execute().await?;
            built = true;
        }
    }
    Ok(built)
}

impl Index {
    /// B-tree indexes on `embed_key` (the embedding-cache lookups of [`Vectors::embeddings_for`])
    /// and `path` (a file's chunks: symbol and path routes, completion, replacements), so
    /// neither scans the table; kept current by the index folds.
    pub(crate) async fn ensure_hash_index(&self) -> Result<(), IndexError> {
        let columns: &[&str] = if self.keyed { &[EMBED_KEY, "path"] } else { &["path"] };
        crate::fence::confirm(&self.uri).await?;
        ensure_btree(&self.table, columns).await.map_err(|e| self.lance(e))?;
        Ok(())
    }

    /// Segments and indexed rows of the full-text index (`None` before it exists).
    async fn fts_layout(&self) -> Result<Option<(usize, usize)>, IndexError> {
        let stats = self.table.index_stats(FTS_INDEX).await.map_err(|e| self.lance(e))?;
        Ok(stats.map(|s| (s.num_indices.unwrap_or(1) as usize, s.num_indexed_rows)))
    }

    /// Rows a merge of the latest [`FTS_SEGMENTS_MERGED`] full-text segments would fold: those
    /// of the fragments the merged segments cover and of the fragments no segment covers yet —
    /// not the table's base segment, however large (`None` when a segment does not record the
    /// fragments it covers, or before the index exists).
    pub(crate) async fn fts_merge_rows(&self) -> Result<Option<usize>, IndexError> {
        let dataset = self.dataset().await?;
        let segments = dataset.load_indices_by_name(FTS_INDEX).await.map_err(|e| self.lance(e.into()))?;
        if segments.is_empty() {
            return Ok(None);
        }
        let first_merged = segments.len().saturating_sub(FTS_SEGMENTS_MERGED);
        let (mut covered, mut merged) = (HashSet::new(), HashSet::new());
        for (i, segment) in segments.iter().enumerate() {
            let Some(fragments) = &segment.fragment_bitmap else { return Ok(None) };
            covered.extend(fragments.iter());
            if i >= first_merged {
                merged.extend(fragments.iter());
            }
        }
        let folded = |id: u32| merged.contains(&id) || !covered.contains(&id);
        let fragments = dataset.fragments().iter().filter(|f| u32::try_from(f.id).is_ok_and(folded));
        Ok(Some(fragments.map(|f| f.physical_rows.unwrap_or(0)).sum()))
    }

    /// Segments of the full-text index (0 before it exists).
    #[cfg(test)]
    pub(crate) async fn fts_segments(&self) -> Result<usize, IndexError> {
        Ok(self.fts_layout().await?.map_or(0, |(segments, _)| segments))
    }

    /// Merges every full-text segment (and rows not yet indexed) into one when there are
    /// several and at most [`MAX_FTS_FULL_MERGE_ROWS`] rows; returns the segments merged (0:
    /// nothing done). For the maintenance pass: the folds between passes keep adding segments.
    pub(crate) async fn merge_fts_segments(&self) -> Result<usize, IndexError> {
        if !self.fts_ready.load(Ordering::Acquire) {
            return Ok(0);
        }
        let Some((segments, rows)) = self.fts_layout().await? else { return Ok(0) };
        if segments < 2 || rows > MAX_FTS_FULL_MERGE_ROWS {
            return Ok(0);
        }
        let _turn = crate::write_gate::turn(&self.uri).await?;
        let merge = async {
            let done = self.table.optimize(OptimizeAction::Index(OptimizeOptions::merge(segments))).await;
            done.map_err(|e| self.lance(e))
        };
        self.logged(std::iter::empty(), merge).await?;
        metrics::counter!(m::INDEX_FTS_UPDATES_TOTAL).increment(1);
        Ok(segments)
    }
}

/// The index's upkeep: compaction, the vector and full-text indexes, retention (what `ctxd compact`
/// and the writer's maintenance pass run).
///
/// Made by [`Index::maintenance`]; it borrows the handle (and so its view: scope, pinned version).
#[derive(Clone, Copy)]
pub struct Maintenance<'a> {
    pub(crate) index: &'a Index,
}

impl Index {
    /// The index's upkeep: see [`Maintenance`].
    pub fn maintenance(&self) -> Maintenance<'_> {
        Maintenance { index: self }
    }
}

impl Maintenance<'_> {
    /// (Re)builds the full-text index on `content` (and the B-tree indexes), covering every row.
    pub async fn build_fts(self) -> Result<(), IndexError> {
        crate::fence::confirm(&self.index.uri).await?;
        self.index
            .table
            .create_index(&["content"], LanceIndex::FTS(fts_params()))
            .replace(true)
            .execute()
            .await
            .map_err(|e| self.index.lance(e))?;
        self.index.fts_ready.store(true, Ordering::Release);
        metrics::counter!(m::INDEX_FTS_UPDATES_TOTAL).increment(1);
        self.index.ensure_hash_index().await
    }

    /// Folds rows written since the last index build into the full-text index. Rows not yet
    /// folded in are still searched (flat), so this is about speed, not correctness.
    ///
    /// A fold writes the new rows as a new index segment (LanceDB's default would merge them
    /// into the latest segment, rewriting it: time and memory would grow with the table, not
    /// with the rows folded). Once there are [`MAX_FTS_SEGMENTS`] segments, the latest
    /// [`FTS_SEGMENTS_MERGED`] are merged into one, so queries never visit many — unless
    /// that would merge more than [`MAX_FTS_MERGE_ROWS`] rows (memory, not time, is the limit).
    pub async fn optimize_indices(self) -> Result<(), IndexError> {
        if !self.index.fts_ready.load(Ordering::Acquire) {
            return Ok(());
        }
        let turn = crate::write_gate::turn(&self.index.uri).await?;
        let (segments, rows) = self.index.fts_layout().await.ok().flatten().unwrap_or((1, 0));
        // A merge holds the merged segments' postings in memory: only small segments are
        // merged (the many little ones a daemon's folds leave), never the big ones a huge
        // streamed file leaves — there, more segments beat memory growing with the file.
        let merging = segments >= MAX_FTS_SEGMENTS && {
            let estimated = || rows / segments.max(1) * FTS_SEGMENTS_MERGED;
            self.index.fts_merge_rows().await.ok().flatten().unwrap_or_else(estimated) <= MAX_FTS_MERGE_ROWS
        };
        let options = if merging { OptimizeOptions::merge(FTS_SEGMENTS_MERGED) } else { OptimizeOptions::append() };
        let fold =
            async { self.index.table.optimize(OptimizeAction::Index(options)).await.map_err(|e| self.index.lance(e)) };
        self.index.logged(std::iter::empty(), fold).await?;
        metrics::counter!(m::INDEX_FTS_UPDATES_TOTAL).increment(1);
        // The compaction takes its own turn.
        drop(turn);
        if merging {
            // The merged segments' fragments now share their indexes, so they can be merged
            // too (LanceDB compacts only fragments under the same index segments); see
            // [`Index::compact_folded`].
            self.index.compact_folded().await?;
        }
        Ok(())
    }
}
