//! Keeping the table healthy while it is written to: compaction, old-version cleanup and the
//! vector index.
//!
//! Every commit adds files: appends add fragments, deletes add deletion files, and every
//! commit is a version. [`Maintenance::maintain`] compacts small fragments into large ones
//! (materialising deletions), then removes versions older than the retention (tagged versions
//! are always kept, so named snapshots stay queryable), and builds the ANN vector index
//! (IVF-HNSW-SQ, cosine) once the table has enough embedded rows; later commits are folded
//! into it with the full-text index by [`Maintenance::optimize_indices`]; the pass merges the
//! full-text segments those folds leave back into one (every query visits every segment). The daemon runs it on a
//! schedule; `ctxd compact` runs it once. The figures it returns (versions and fragments
//! before and after) also go to the `ctxd_index_*` gauges.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use lancedb::index::vector::IvfHnswSqIndexBuilder;
use lancedb::index::Index as LanceIndex;
use lancedb::table::{CompactionMode, CompactionOptions, IndexRemapMode, OptimizeAction};
use lancedb::DistanceType;

use crate::indices::{ensure_btree, Maintenance};
use crate::metrics as m;
use crate::sql::sql_str;
use crate::{error::IndexError, store::Index, NO_MODEL};

/// What a maintenance pass should do.
#[derive(Debug, Clone)]
pub struct MaintenanceOptions {
    /// Versions older than this are removed (tagged ones are kept).
    pub retain: Duration,
    /// Remove unreferenced files younger than 7 days too. Safe only when nothing writes to the
    /// table while the pass runs — not even this process: a commit in flight has written data
    /// files that no manifest references yet, and the pass would delete them under it (found by
    /// `benches/faults.py s3-faults`: the daemon's scheduled pass beside its own commits left a
    /// table whose latest version names a deleted file). `ctxd compact` and a one-shot run's
    /// last pass set it; the daemon's scheduled passes do not.
    pub single_writer: bool,
    /// Build the vector index once this many embedded rows exist (0: never).
    pub vector_index_min_rows: usize,
}

impl MaintenanceOptions {
    /// The cleanup of untagged versions older than `retain` (tagged ones are kept).
    fn prune(&self) -> OptimizeAction {
        OptimizeAction::Prune {
            older_than: Some(chrono::Duration::from_std(self.retain).unwrap_or(chrono::Duration::days(7))),
            delete_unverified: Some(self.single_writer),
            error_if_tagged_old_versions: Some(false),
        }
    }
}

/// What a maintenance pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct MaintenanceReport {
    pub versions_before: usize,
    pub versions_after: usize,
    pub fragments_before: usize,
    pub fragments_after: usize,
    pub fragments_removed: usize,
    pub fragments_added: usize,
    pub versions_removed: u64,
    pub bytes_removed: u64,
    pub vector_index_built: bool,
    /// Full-text index segments merged into one (0: one already, or too many rows).
    pub fts_segments_merged: usize,
}

/// Embedded rows from which maintenance builds the vector index by default. Below it a query
/// reads every vector; measured with a release build on CoSQA (6.5k chunks, compacted): vector
/// search 12.4 ms exact vs 7.8 ms with the index, 50 clients 99 vs 136 QPS; routed nDCG@10
/// 0.6036 exact vs 0.6048 indexed (SciFact, 12k chunks: 0.7367 vs 0.7370): no loss.
pub const DEFAULT_VECTOR_INDEX_MIN_ROWS: usize = 5_000;

/// Fragments smaller than this are merged as a stream's folds merge their index segments
/// ([`Index::compact_folded`]), into fragments of at most this many rows; larger ones wait for
/// the maintenance pass. Small, so that the table's base is left alone: at 64,000 (the first
/// rule) a table under that size was rewritten whole at every merge, and each of its index
/// segments remapped (written again).
const STREAM_FRAGMENT_ROWS: usize = 1_024;

/// Name LanceDB gives the index on `vector`.
const VECTOR_INDEX: &str = "vector_idx";

/// Compaction as every pass and fold runs it ([`Index::compact`]): one task at a time (each
/// holds its fragments' batches and its output while it runs, and a pass runs beside indexing
/// or queries: a pass after a 1 GB log added 100–120 MB of heap with two tasks on two cores); fragments appended whole (no deletion
/// file) are copied page by page instead of decoded and encoded again (a 1 GB log's 342
/// fragments: 13 s and ~120 MB of heap, against 25 s and ~290 MB); the row-address map of the
/// index remap kept compact. `deletions`: also rewrite fragments with over 10% of rows deleted.
fn compaction_options(deletions: bool) -> CompactionOptions {
    CompactionOptions {
        materialize_deletions: deletions,
        materialize_deletions_threshold: 0.1,
        num_threads: Some(1),
        compaction_mode: Some(CompactionMode::TryBinaryCopy),
        index_remap_mode: IndexRemapMode::Compact,
        ..Default::default()
    }
}

impl Index {
    /// Builds the vector index when it is due ([`Maintenance::vector_index_due`]).
    pub(crate) async fn ensure_vector_index(&self, min_rows: usize) -> Result<bool, IndexError> {
        let Some(rows) = self.maintenance().vector_index_due(min_rows).await? else { return Ok(false) };
        crate::fence::confirm(&self.uri).await?;
        // ~4k rows per IVF partition, HNSW graphs inside each, 8-bit scalar quantisation.
        let partitions = (rows / 4096).clamp(1, 1024) as u32;
        let builder = IvfHnswSqIndexBuilder::default().distance_type(DistanceType::Cosine).num_partitions(partitions);
        self.table
            .create_index(&["vector"], LanceIndex::IvfHnswSq(builder))
            .name(VECTOR_INDEX.to_string())
            .execute()
            .await
            .map_err(|e| self.lance(e))?;
        tracing::info!(rows, partitions, "built the vector index");
        Ok(true)
    }

    /// A side table (symbols, edges, history, ref overlays): compacted, old untagged versions
    /// pruned, B-tree indexes on the columns lookups filter on (symbols: `name`, `symbol`,
    /// `qualified_name`; edges: `path`, which every commit's replacement of a file's edges
    /// filters on; none for the small ones) built once it has rows and kept current.
    async fn maintain_side(
        &self,
        table: Option<&lancedb::Table>,
        columns: &[&str],
        opts: &MaintenanceOptions,
    ) -> Result<(), IndexError> {
        let Some(table) = table else { return Ok(()) };
        let turn = crate::write_gate::turn(&self.uri).await?;
        let lance = |e| self.lance(e);
        if table.count_rows(None).await.map_err(lance)? == 0 {
            return Ok(());
        }
        table
            .optimize(OptimizeAction::Compact { options: CompactionOptions::default(), remap_options: None })
            .await
            .map_err(lance)?;
        turn.fence().await?;
        table.optimize(opts.prune()).await.map_err(lance)?;
        turn.fence().await?;
        if !columns.is_empty() && !ensure_btree(table, columns).await.map_err(lance)? {
            table.optimize(OptimizeAction::Index(Default::default())).await.map_err(lance)?;
        }
        Ok(())
    }

    /// Merges the small fragments a stream of commits left whose index segments a fold has just
    /// merged ([`Maintenance::optimize_indices`]), without waiting for a maintenance pass. A daemon
    /// answering queries folds every commit at once, so every commit leaves a fragment and a
    /// segment; the folds merge the segments, but the fragments stayed until a pass, which
    /// waits for a quiet moment a stream never gives — and every query opens the fragments
    /// its hits are in (a stream of 90 commits beside 50 clients: 153 → 88 queries/s over
    /// 150 s). Only small fragments (under [`STREAM_FRAGMENT_ROWS`]) without many deletions
    /// are rewritten, and only the small segments covering them are remapped, so queries go
    /// on meanwhile; the pass still does the rest.
    pub(crate) async fn compact_folded(&self) -> Result<(), IndexError> {
        let options = CompactionOptions { target_rows_per_fragment: STREAM_FRAGMENT_ROWS, ..compaction_options(false) };
        if let Some(c) = self.compact(options).await? {
            tracing::debug!(removed = c.fragments_removed, added = c.fragments_added, "merged a stream's fragments");
        }
        Ok(())
    }

    /// Merges small fragments with `options` (see [`compaction_options`]); the fragments
    /// removed and added.
    async fn compact(
        &self,
        options: CompactionOptions,
    ) -> Result<Option<lance::dataset::optimize::CompactionMetrics>, IndexError> {
        let _turn = crate::write_gate::turn(&self.uri).await?;
        let compact = async {
            let done = self.table.optimize(OptimizeAction::Compact { options, remap_options: None }).await;
            done.map_err(|e| self.lance(e))
        };
        Ok(self.logged(std::iter::empty(), compact).await?.compaction)
    }
}

impl Maintenance<'_> {
    /// Versions on disk and fragments of the current version (also published as gauges).
    pub async fn layout(self) -> Result<(usize, usize), IndexError> {
        let versions = self.index.table.list_versions().await.map_err(|e| self.index.lance(e))?.len();
        let fragments = self.index.table.stats().await.map_err(|e| self.index.lance(e))?.fragment_stats.num_fragments;
        metrics::gauge!(m::INDEX_VERSIONS).set(versions as f64);
        metrics::gauge!(m::INDEX_FRAGMENTS).set(fragments as f64);
        Ok((versions, fragments))
    }

    /// True when the table has an ANN index on `vector`.
    pub async fn has_vector_index(self) -> Result<bool, IndexError> {
        let indices = self.index.table.list_indices().await.map_err(|e| self.index.lance(e))?;
        Ok(indices.iter().any(|i| i.columns.iter().any(|c| c == "vector")))
    }

    /// The embedded rows to build the vector index over, when it is due: there is none yet and
    /// at least `min_rows` embedded rows (0: never). `None` when not due.
    pub async fn vector_index_due(self, min_rows: usize) -> Result<Option<usize>, IndexError> {
        if min_rows == 0 || self.has_vector_index().await? {
            return Ok(None);
        }
        let filter = format!("model != {}", sql_str(NO_MODEL));
        let rows = self.index.table.count_rows(Some(filter)).await.map_err(|e| self.index.lance(e))?;
        Ok((rows >= min_rows).then_some(rows))
    }

    /// Merges the small fragments no index covers yet into one, then folds them into every
    /// index: what a run's folds do when nobody queries while it writes (`ctxd index`). Each
    /// streamed window of a big file (or each fold's worth of commits) becomes one fragment
    /// and one full-text segment, so the end-of-run pass has nothing to rewrite and no index
    /// to remap — for a 1 GB log, remapping 28 full-text segments after one big compaction
    /// took ~5 s and up to ~400 MB of heap each. Deletions are left to [`Maintenance::maintain`].
    pub async fn compact_then_fold(self) -> Result<(), IndexError> {
        self.index.compact(compaction_options(false)).await?;
        self.optimize_indices().await
    }

    /// One maintenance pass: compaction, old-version cleanup, vector index.
    pub async fn maintain(self, opts: &MaintenanceOptions) -> Result<MaintenanceReport, IndexError> {
        let (versions_before, fragments_before) = self.layout().await?;
        let mut report = MaintenanceReport { versions_before, fragments_before, ..Default::default() };
        if let Some(c) = self.index.compact(compaction_options(true)).await? {
            report.fragments_removed = c.fragments_removed;
            report.fragments_added = c.fragments_added;
        }
        crate::fence::confirm(&self.index.uri).await?;
        let stats = self.index.table.optimize(opts.prune()).await.map_err(|e| self.index.lance(e))?;
        if let Some(p) = stats.prune {
            report.versions_removed = p.old_versions;
            report.bytes_removed = p.bytes_removed;
        }
        report.vector_index_built = self.index.ensure_vector_index(opts.vector_index_min_rows).await?;
        report.fts_segments_merged = self.index.merge_fts_segments().await?;
        if report.fts_segments_merged == 0 {
            // Rows not folded yet (the last commits of a run), folded after the compaction
            // so that it had no segment of theirs to remap.
            self.optimize_indices().await?;
        }
        if self.index.reads().stats().await?.rows > 0 {
            self.index.ensure_hash_index().await?;
        }
        self.index.maintain_side(self.index.symbols.as_ref(), &["name", "symbol", "qualified_name"], opts).await?;
        self.index.maintain_side(self.index.edges.as_ref(), &["path"], opts).await?;
        // The small tables sources rewrite per ref (a version per write) are compacted and pruned too.
        let conn = crate::connection::connect(&self.index.uri).await?;
        let names = conn.table_names().execute().await.map_err(|e| self.index.lance(e))?;
        for name in [crate::overlay::OVERLAYS_TABLE, crate::history::HISTORY_TABLE] {
            if names.iter().any(|n| n == name) {
                if name == crate::overlay::OVERLAYS_TABLE {
                    // Overlay records of versions the cleanup removed are no read's any more.
                    let versions = self.index.table.list_versions().await.map_err(|e| self.index.lance(e))?;
                    if let Some(oldest) = versions.iter().map(|v| v.version).min() {
                        crate::overlay::prune(&self.index.overlays, &self.index.uri, oldest, &self.index.table_name)
                            .await?;
                    }
                }
                let table = conn.open_table(name).execute().await.map_err(|e| self.index.lance(e))?;
                self.index.maintain_side(Some(&table), &[], opts).await?;
            }
        }
        let (versions_after, fragments_after) = self.layout().await?;
        report.versions_after = versions_after;
        report.fragments_after = fragments_after;
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64());
        metrics::gauge!(m::INDEX_LAST_COMPACTION).set(now);
        metrics::counter!(m::INDEX_COMPACTIONS_TOTAL).increment(1);
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::testing::row;
    use crate::writer::CommitBatch;

    #[tokio::test]
    async fn compaction_prunes_untagged_versions_and_builds_the_vector_index() {
        let tmp = tempfile::tempdir().unwrap();
        let uri = tmp.path().join("db").to_string_lossy().into_owned();
        let index = Index::open_or_create(&uri, "m", 8).await.unwrap();
        for i in 0..30 {
            index.writes().commit(CommitBatch { rows: vec![row(i)], ..Default::default() }).await.unwrap();
            if i == 10 {
                index.snapshots().tag("keep-me", None).await.unwrap();
            }
        }
        let kept = index.snapshots().resolve(&crate::snapshots::AsOf::Tag("keep-me".into())).await.unwrap();
        let defs = (0..3)
            .map(|i| crate::symbols::SymbolRow {
                symbol_id: format!("f29.txt#parse_{i}"),
                name: format!("parse_{i}"),
                qualified_name: format!("f29::parse_{i}"),
                symbol: format!("parse_{i}"),
                kind: "function".into(),
                language: "text".into(),
                path: "f29.txt".into(),
                start_line: 1,
                end_line: 1,
                signature: format!("fn parse_{i}()"),
                parent: None,
                doc: None,
            })
            .collect();
        index
            .writes()
            .commit(CommitBatch {
                rows: vec![row(29)],
                replace_paths: vec!["f29.txt".into()],
                symbols: defs,
                ..Default::default()
            })
            .await
            .unwrap();
        let opts = MaintenanceOptions { retain: Duration::ZERO, single_writer: true, vector_index_min_rows: 20 };
        let report = index.maintenance().maintain(&opts).await.unwrap();
        assert!(report.fragments_before >= 30, "{report:?}");
        assert!(report.fragments_after < report.fragments_before / 4, "{report:?}");
        assert!(report.versions_after < report.versions_before / 4, "{report:?}");
        assert!(report.vector_index_built, "{report:?}");
        assert!(index.maintenance().has_vector_index().await.unwrap());
        // The symbol table gets its name indexes; lookups go through them.
        let symbols = index.symbols.as_ref().unwrap();
        let cols: Vec<String> = symbols.list_indices().await.unwrap().into_iter().flat_map(|i| i.columns).collect();
        for c in ["name", "symbol", "qualified_name"] {
            assert!(cols.iter().any(|x| x == c), "{cols:?}");
        }
        assert_eq!(index.symbols().symbols_named("parse_1", false, 10).await.unwrap().len(), 1);
        assert_eq!(index.symbols().symbols_named("f29::parse_2", false, 10).await.unwrap()[0].name, "parse_2");
        assert_eq!(index.symbols().symbols_named("parse_", true, 10).await.unwrap().len(), 3);
        // Every row survives; the tagged version is still on disk and queryable; the table keeps
        // its format through the compaction.
        assert_eq!(index.reads().stats().await.unwrap().rows, 30);
        let schema = index.table.schema().await.unwrap();
        assert_eq!(crate::format::check(&uri, &schema).unwrap(), crate::format::FORMAT);
        let versions: Vec<u64> = index.snapshots().list().await.unwrap().iter().map(|s| s.version).collect();
        assert!(versions.contains(&kept), "{versions:?}");
        assert_eq!(index.snapshots().at(kept).await.unwrap().reads().stats().await.unwrap().rows, 11);
        // Search works through the ANN index, and new rows are folded into it.
        let mut q = vec![0.0f32; 8];
        q[3] = 1.0;
        let hits = index.reads().vector_search(&q, 3).await.unwrap();
        assert_eq!(hits.len(), 3);
        index.writes().commit(CommitBatch { rows: vec![row(30)], ..Default::default() }).await.unwrap();
        index.maintenance().optimize_indices().await.unwrap();
        // The code tokenizer also indexes "topic" and "0" of "topic0": the 7 exact ones rank first.
        let hits = index.reads().fts_search("topic0", 50).await.unwrap();
        assert!(hits.iter().take(7).all(|h| h.content.ends_with("topic0")), "{hits:?}");
        assert!(hits.iter().skip(7).all(|h| !h.content.ends_with("topic0")), "{hits:?}");
        // The fold left a second full-text segment; the next pass merges them, and search
        // answers the same.
        assert!(index.fts_segments().await.unwrap() >= 2);
        let again = index.maintenance().maintain(&opts).await.unwrap();
        assert!(again.fts_segments_merged >= 2, "{again:?}");
        assert_eq!(index.fts_segments().await.unwrap(), 1);
        let merged = index.reads().fts_search("topic0", 50).await.unwrap();
        let exact = |hits: &[crate::record::Hit]| -> std::collections::BTreeSet<String> {
            hits.iter().take(7).map(|h| h.chunk_id.clone()).collect()
        };
        assert_eq!(exact(&merged), exact(&hits));
        assert_eq!(merged.len(), hits.len());
        // A second pass right away has little left to do.
        assert!(!again.vector_index_built);
        assert!(again.fragments_after <= report.fragments_after + 2, "{again:?}");
    }

    /// A one-shot run's folds ([`Maintenance::compact_then_fold`]) merge the fragments written since
    /// the last fold before indexing them; the pass does the same with the rows left after.
    #[tokio::test]
    async fn a_pass_beside_writes_keeps_the_files_no_version_references_yet() {
        let tmp = tempfile::tempdir().unwrap();
        let uri = tmp.path().join("db").to_string_lossy().into_owned();
        let index = Index::open_or_create(&uri, "m", 8).await.unwrap();
        for i in 0..3 {
            index.writes().commit(CommitBatch { rows: vec![row(i)], ..Default::default() }).await.unwrap();
        }
        let batch = |from: usize| {
            let rows: Vec<_> = (from..from + 2).map(row).collect();
            crate::schema::rows_to_batch(&rows, 8, false, crate::schema::Vectorless::Null).unwrap()
        };
        // A commit in flight: its data files are written, its manifest not yet.
        let in_flight = index.writes().write_fragments(vec![batch(10)]).await.unwrap();
        let beside = MaintenanceOptions { retain: Duration::ZERO, single_writer: false, vector_index_min_rows: 0 };
        index.maintenance().maintain(&beside).await.unwrap();
        index.writes().commit_fragments(vec![in_flight]).await.unwrap();
        assert_eq!(index.reads().stats().await.unwrap().rows, 5, "the commit after the pass published its rows");
        // The same with unverified files deleted: the in-flight commit's file is gone.
        let in_flight = index.writes().write_fragments(vec![batch(20)]).await.unwrap();
        let alone = MaintenanceOptions { single_writer: true, ..beside };
        index.maintenance().maintain(&alone).await.unwrap();
        let err = index.writes().commit_fragments(vec![in_flight]).await.unwrap_err().to_string();
        assert!(err.contains("gone"), "{err}");
    }

    #[tokio::test]
    async fn folds_merge_new_fragments_first_and_a_pass_folds_the_rest() {
        let tmp = tempfile::tempdir().unwrap();
        let uri = tmp.path().join("db").to_string_lossy().into_owned();
        let index = Index::open_or_create(&uri, "m", 8).await.unwrap();
        let coverage = |name: &'static str| {
            let table = index.table.clone();
            async move {
                let s = table.index_stats(name).await.unwrap().unwrap();
                (s.num_indexed_rows, s.num_unindexed_rows)
            }
        };
        for i in 0..12 {
            index.writes().commit(CommitBatch { rows: vec![row(i)], ..Default::default() }).await.unwrap();
        }
        // The first commit built the indexes over its one row.
        assert_eq!(coverage("content_idx").await, (1, 11));
        assert_eq!(index.maintenance().layout().await.unwrap().1, 12);
        index.maintenance().compact_then_fold().await.unwrap();
        assert_eq!(index.maintenance().layout().await.unwrap().1, 2, "the 11 unindexed fragments become one");
        assert_eq!(coverage("content_idx").await, (12, 0));
        assert_eq!(coverage("path_idx").await, (12, 0));
        for i in 12..24 {
            index.writes().commit(CommitBatch { rows: vec![row(i)], ..Default::default() }).await.unwrap();
        }
        let opts = MaintenanceOptions { retain: Duration::ZERO, single_writer: true, vector_index_min_rows: 1000 };
        let report = index.maintenance().maintain(&opts).await.unwrap();
        assert!(report.fragments_after <= 4, "{report:?}");
        assert_eq!(coverage("content_idx").await, (24, 0));
        assert_eq!(coverage("path_idx").await, (24, 0));
        // Rows of every commit are found through the index (topic3: rows 3, 8, 13, 18, 23).
        let hits = index.reads().fts_search("topic3", 30).await.unwrap();
        let mut ids: Vec<&str> =
            hits.iter().filter(|h| h.content.ends_with("topic3")).map(|h| h.chunk_id.as_str()).collect();
        ids.sort_unstable();
        assert_eq!(ids, ["c13", "c18", "c23", "c3", "c8"]);
        assert_eq!(index.reads().stats().await.unwrap().rows, 24);
    }

    /// A stream of small commits, each folded at once (a daemon answering queries): the folds'
    /// merges of index segments also merge those segments' fragments, so fragments do not
    /// pile up between passes, and every row is still found.
    #[tokio::test]
    async fn a_stream_of_folded_commits_keeps_few_fragments() {
        let tmp = tempfile::tempdir().unwrap();
        let uri = tmp.path().join("db").to_string_lossy().into_owned();
        let index = Index::open_or_create(&uri, "m", 8).await.unwrap();
        // The table's base: one fragment over STREAM_FRAGMENT_ROWS, which the stream leaves alone.
        let base: Vec<_> = (1000..1000 + STREAM_FRAGMENT_ROWS + 100).map(row).collect();
        index.writes().commit(CommitBatch { rows: base, ..Default::default() }).await.unwrap();
        let fragment_ids = |d: Arc<lance::Dataset>| d.get_fragments().iter().map(|f| f.id()).collect::<Vec<_>>();
        let base_ids = fragment_ids(index.dataset().await.unwrap());
        assert_eq!(base_ids.len(), 1);
        for i in 0..48 {
            index.writes().commit(CommitBatch { rows: vec![row(i)], ..Default::default() }).await.unwrap();
            index.maintenance().optimize_indices().await.unwrap();
            assert!(index.fts_segments().await.unwrap() <= crate::indices::MAX_FTS_SEGMENTS);
        }
        let after = fragment_ids(index.dataset().await.unwrap());
        // The base, the merged deltas' fragment and the newest commit's (one each without the merges).
        assert!(after.len() <= 1 + crate::indices::MAX_FTS_SEGMENTS, "48 commits left {} fragments", after.len());
        assert_eq!(after[0], base_ids[0], "the base fragment was rewritten: {after:?}");
        assert_eq!(index.reads().stats().await.unwrap().rows, 48 + STREAM_FRAGMENT_ROWS + 100);
        let hits = index.reads().fts_search("topic3", 2000).await.unwrap();
        let streamed = |h: &&crate::record::Hit| h.chunk_id[1..].parse::<usize>().is_ok_and(|i| i < 1000);
        let found = hits.iter().filter(|h| h.content.ends_with("topic3")).filter(streamed).count();
        assert_eq!(found, 9, "rows 3, 8, …, 43 are found through the index");
        // At three segments the next fold merges the latest two: the stream's rows, not the
        // base's (a table of any size keeps merging what a stream adds).
        if index.fts_segments().await.unwrap() < crate::indices::MAX_FTS_SEGMENTS {
            index.writes().commit(CommitBatch { rows: vec![row(49)], ..Default::default() }).await.unwrap();
            index.maintenance().optimize_indices().await.unwrap();
        }
        assert_eq!(index.fts_segments().await.unwrap(), crate::indices::MAX_FTS_SEGMENTS);
        let merged = index.fts_merge_rows().await.unwrap().expect("the segments record their fragments");
        assert!((1..=49).contains(&merged), "the next merge would fold {merged} rows");
    }
}
