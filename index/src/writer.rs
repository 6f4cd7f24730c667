//! The writer: a [`CommitBatch`] applied as **one** LanceDB commit (`merge_insert` that inserts
//! the new chunks and deletes the stale chunks of the same files in a single version), with
//! the batch's symbols written first; files committed in parts ([`crate::streams`]) completed
//! by [`Writes::finish_stream`]; plain appends and deletions by id for the re-embedding job.
//!
//! Every commit is a LanceDB version; nothing here ever rewrites a chunk row in place.

use std::sync::atomic::Ordering;
use std::time::Instant;

use arrow_array::{RecordBatch, RecordBatchIterator};

use crate::edges::{edges_to_batch, EdgeRow};
use crate::metrics as m;
use crate::schema::{rows_to_batch, ChunkRow};
use crate::sql::{in_list, sql_str};
use crate::streams::{stream_batch, PARTIAL_PREFIX};
use crate::symbols::{symbols_to_batch, SymbolRow};
use crate::write_gate::Turn;
use crate::{error::IndexError, store::Index};

/// One atomic change to the index: the complete new chunk set of some files, and files that
/// are gone. Applied as a single LanceDB commit.
#[derive(Debug, Default, Clone)]
pub struct CommitBatch {
    /// All chunks of every file in `replace_paths` (files with no chunks contribute none).
    pub rows: Vec<ChunkRow>,
    /// Files already in the index whose previous chunks are replaced by the ones in `rows`.
    /// Files new to the index need not be listed (their rows are simply appended).
    pub replace_paths: Vec<String>,
    /// Files removed from the source: all their chunks are deleted.
    pub delete_paths: Vec<String>,
    /// The definitions of every file in `rows` (replacing those of replaced/deleted paths).
    pub symbols: Vec<SymbolRow>,
    /// The code-graph edges of every file in `rows` (replacing those of replaced/deleted paths).
    pub edges: Vec<EdgeRow>,
    /// `(path, hash)` of streamed files whose first part is in `rows`: rows `partial:<hash>`
    /// of the same path left by an interrupted earlier attempt are deleted first (the rows
    /// of the previous complete version stay searchable until [`Writes::finish_stream`]).
    pub stream_starts: Vec<(String, String)>,
}

impl CommitBatch {
    /// True when the batch changes nothing.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
            && self.replace_paths.is_empty()
            && self.delete_paths.is_empty()
            && self.stream_starts.is_empty()
    }
}

/// What a commit did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct CommitStats {
    pub version: u64,
    pub inserted: u64,
    pub deleted: u64,
}

impl Index {
    /// [`Writes::commit`]'s writes, in the database's turn; each table write confirms the
    /// writer lease first ([`crate::fence`]), so a writer paused in the middle commits no more.
    async fn commit_in_turn(&self, batch: &CommitBatch, turn: &Turn) -> Result<CommitStats, IndexError> {
        let started = Instant::now();
        let mut touched: Vec<String> = batch.replace_paths.iter().chain(&batch.delete_paths).cloned().collect();
        touched.sort();
        touched.dedup();
        // Symbols and edges first: idempotent merges, so when the chunk commit below fails and
        // the batch is retried, nothing is duplicated.
        let symbols = match batch.symbols.is_empty() {
            true => None,
            false => Some(symbols_to_batch(&batch.symbols)?),
        };
        self.merge_by_path(self.symbols.as_ref(), "symbol_id", symbols, &touched).await?;
        turn.fence().await?;
        let edges = match batch.edges.is_empty() {
            true => None,
            false => Some(edges_to_batch(&batch.edges)?),
        };
        self.merge_by_path(self.edges.as_ref(), "edge_id", edges, &touched).await?;
        turn.fence().await?;
        if let (Some(streams), false) = (&self.streams, touched.is_empty()) {
            // Replaced or deleted files are no longer streamed versions.
            streams.delete(&in_list("path", &touched)).await.map_err(|e| self.lance(e))?;
        }
        if !batch.stream_starts.is_empty() {
            turn.fence().await?;
            let leftovers = batch
                .stream_starts
                .iter()
                .map(|(p, h)| {
                    format!("(path = {} AND file_hash = {})", sql_str(p), sql_str(&format!("{PARTIAL_PREFIX}{h}")))
                })
                .collect::<Vec<_>>()
                .join(" OR ");
            self.table.delete(&leftovers).await.map_err(|e| self.lance(e))?;
        }
        if batch.rows.is_empty() && touched.is_empty() {
            return Ok(CommitStats { version: self.version().await?, ..Default::default() });
        }
        turn.fence().await?;
        let stats = if batch.rows.is_empty() {
            let res = self.table.delete(in_list("path", &touched).as_str()).await.map_err(|e| self.lance(e))?;
            CommitStats { version: res.version, inserted: 0, deleted: res.num_deleted_rows }
        } else if touched.is_empty() {
            // Only files the index has never seen: nothing can be stale, a plain append is
            // enough (and does not join against the whole table).
            let record =
                rows_to_batch(&batch.rows, self.dim, self.named_sources.load(Ordering::Relaxed), self.vectorless)?;
            let inserted = record.num_rows() as u64;
            let res = self.table.add(record).execute().await.map_err(|e| self.lance(e))?;
            CommitStats { version: res.version, inserted, deleted: 0 }
        } else {
            let record =
                rows_to_batch(&batch.rows, self.dim, self.named_sources.load(Ordering::Relaxed), self.vectorless)?;
            let schema = record.schema();
            let reader = RecordBatchIterator::new(vec![Ok(record)], schema);
            let mut merge = self.table.merge_insert(&["chunk_id"]);
            merge.when_not_matched_insert_all();
            merge.when_not_matched_by_source_delete(Some(in_list("path", &touched)));
            let res = merge.execute(Box::new(reader)).await.map_err(|e| self.lance(e))?;
            CommitStats { version: res.version, inserted: res.num_inserted_rows, deleted: res.num_deleted_rows }
        };
        metrics::counter!(m::INDEX_COMMITS_TOTAL).increment(1);
        metrics::counter!(m::INDEX_ROWS_INSERTED_TOTAL).increment(stats.inserted);
        metrics::counter!(m::INDEX_ROWS_DELETED_TOTAL).increment(stats.deleted);
        metrics::histogram!(m::INDEX_COMMIT_SECONDS).record(started.elapsed().as_secs_f64());
        let version = if stats.version == 0 { self.version().await? } else { stats.version };
        metrics::gauge!(m::INDEX_VERSION).set(version as f64);
        if !self.fts_ready.load(Ordering::Acquire) && stats.inserted > 0 {
            self.maintenance().build_fts().await?;
        }
        Ok(CommitStats { version, ..stats })
    }

    /// Merges `record` (rows keyed by `key`) into a per-file side table (symbols, edges),
    /// dropping the other rows of `touched` paths (idempotent: a retried batch duplicates
    /// nothing). A missing table (an older index) is skipped.
    async fn merge_by_path(
        &self,
        table: Option<&lancedb::Table>,
        key: &str,
        record: Option<RecordBatch>,
        touched: &[String],
    ) -> Result<(), IndexError> {
        let Some(table) = table else { return Ok(()) };
        let Some(record) = record else {
            if !touched.is_empty() {
                table.delete(in_list("path", touched).as_str()).await.map_err(|e| self.lance(e))?;
            }
            return Ok(());
        };
        let schema = record.schema();
        let reader = RecordBatchIterator::new(vec![Ok(record)], schema);
        let mut merge = table.merge_insert(&[key]);
        merge.when_not_matched_insert_all();
        if !touched.is_empty() {
            merge.when_not_matched_by_source_delete(Some(in_list("path", touched)));
        }
        merge.execute(Box::new(reader)).await.map_err(|e| self.lance(e))?;
        Ok(())
    }
}

/// The single writer's changes to the chunks table: commits, appends, deletions, streamed files,
/// and a shard's uncommitted fragments.
///
/// Made by [`Index::writes`]; it borrows the handle (and so its view: scope, pinned version).
#[derive(Clone, Copy)]
pub struct Writes<'a> {
    pub(crate) index: &'a Index,
}

impl Index {
    /// The single writer's changes to the chunks table: see [`Writes`].
    pub fn writes(&self) -> Writes<'_> {
        Writes { index: self }
    }
}

impl Writes<'_> {
    /// Applies `batch` as one commit: new chunks inserted, stale chunks of the replaced files
    /// and all chunks of deleted files removed, in the same LanceDB version.
    pub async fn commit(self, batch: CommitBatch) -> Result<CommitStats, IndexError> {
        if batch.is_empty() {
            return Ok(CommitStats { version: self.index.version().await?, ..Default::default() });
        }
        if !self.index.keyed {
            return Err(IndexError::Unkeyed { uri: self.index.uri.clone(), table: self.index.table_name.clone() });
        }
        let turn = crate::write_gate::turn(&self.index.uri).await?;
        // Every version the commit makes is its own (its turn): logged with its files.
        let paths = batch.rows.iter().map(|r| r.chunk.path.as_str());
        let paths = paths.chain(batch.replace_paths.iter().chain(&batch.delete_paths).map(String::as_str));
        let paths = paths.chain(batch.stream_starts.iter().map(|(p, _)| p.as_str()));
        self.index.logged(paths, self.index.commit_in_turn(&batch, &turn)).await
    }

    /// Appends rows (a batch of `chunks_schema(dim)`) as one commit; no dedup, no deletes.
    pub async fn append(self, batch: RecordBatch) -> Result<(), IndexError> {
        crate::fence::confirm(&self.index.uri).await?;
        self.index.table.add(batch).execute().await.map_err(|e| self.index.lance(e))?;
        Ok(())
    }

    /// Deletes the rows with these ids (one commit per 1,000 ids).
    pub async fn delete_chunk_ids(self, ids: &[String]) -> Result<(), IndexError> {
        for part in ids.chunks(1000) {
            crate::fence::confirm(&self.index.uri).await?;
            self.index.table.delete(&in_list("chunk_id", part)).await.map_err(|e| self.index.lance(e))?;
        }
        Ok(())
    }

    /// Completes a file committed in parts: deletes the rows of its previous version (any
    /// `file_hash` other than `partial:<hash>`), then records `(path, hash)` in the streams
    /// table, so the file counts as indexed only once every part is in. Both are cheap (a
    /// deletion vector and a one-row merge): the file's rows are not rewritten.
    pub async fn finish_stream(self, path: &str, hash: &str) -> Result<(), IndexError> {
        let turn = crate::write_gate::turn(&self.index.uri).await?;
        let partial = format!("{PARTIAL_PREFIX}{hash}");
        let filter = format!("path = {} AND file_hash != {}", sql_str(path), sql_str(&partial));
        self.index
            .logged([path], async { self.index.table.delete(&filter).await.map_err(|e| self.index.lance(e)) })
            .await?;
        for table in [&self.index.symbols, &self.index.edges].into_iter().flatten() {
            turn.fence().await?;
            table.delete(&format!("path = {}", sql_str(path))).await.map_err(|e| self.index.lance(e))?;
        }
        let Some(streams) = &self.index.streams else { return Ok(()) };
        turn.fence().await?;
        let record = stream_batch(path, hash);
        let schema = record.schema();
        let reader = RecordBatchIterator::new(vec![Ok(record)], schema);
        let mut merge = streams.merge_insert(&["path"]);
        merge.when_matched_update_all(None).when_not_matched_insert_all();
        merge.execute(Box::new(reader)).await.map_err(|e| self.index.lance(e))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Chunk;

    fn row(path: &str, n: u32, content: &str, v: [f32; 4]) -> ChunkRow {
        let content_hash = format!("h-{content}");
        let embed_key = format!("k-{content_hash}");
        ChunkRow {
            chunk: Chunk {
                chunk_id: format!("{path}#{n}#{content_hash}"),
                path: path.into(),
                language: "rust".into(),
                symbol: Some(format!("f{n}")),
                kind: Some("function".into()),
                start_line: n * 10 + 1,
                end_line: n * 10 + 5,
                content: content.into(),
                content_hash,
                token_count: 3,
                source: String::new(),
                git_ref: String::new(),
            },
            embed_key,
            file_hash: format!("file-{path}-{content}"),
            vector: v.to_vec(),
            model: "m".into(),
            late: Vec::new(),
        }
    }

    #[tokio::test]
    async fn streamed_files_complete_through_the_streams_table() {
        let tmp = tempfile::tempdir().unwrap();
        let uri = tmp.path().join("db").to_string_lossy().into_owned();
        let index = Index::open_or_create(&uri, "m", 4).await.unwrap();
        let part = |n: u32, hash: &str| ChunkRow {
            file_hash: format!("{PARTIAL_PREFIX}{hash}"),
            ..row("big.log", n, &format!("line {n} {hash}"), [1.0, 0.0, 0.0, 0.0])
        };
        let commit = |rows: Vec<ChunkRow>, start: Option<&str>| CommitBatch {
            rows,
            stream_starts: start.map(|h| vec![("big.log".to_string(), h.to_string())]).unwrap_or_default(),
            ..Default::default()
        };
        // Version 1 streamed in two parts and finished.
        index.writes().commit(commit(vec![part(0, "v1")], Some("v1"))).await.unwrap();
        assert_eq!(index.reads().file_hashes().await.unwrap()["big.log"], "partial:v1", "not complete yet");
        index.writes().commit(commit(vec![part(1, "v1")], None)).await.unwrap();
        index.writes().finish_stream("big.log", "v1").await.unwrap();
        assert_eq!(index.reads().file_hashes().await.unwrap()["big.log"], "v1");
        assert_eq!(index.reads().chunks_of("big.log").await.unwrap().len(), 2);
        // Version 2: an interrupted attempt leaves one part; v1 still counts as complete.
        index.writes().commit(commit(vec![part(0, "v2")], Some("v2"))).await.unwrap();
        assert_eq!(index.reads().file_hashes().await.unwrap()["big.log"], "v1");
        // The retry starts over: the leftover part is dropped, not duplicated.
        index.writes().commit(commit(vec![part(0, "v2")], Some("v2"))).await.unwrap();
        assert_eq!(index.reads().chunks_of("big.log").await.unwrap().len(), 3, "v1's two rows + one v2 row");
        index.writes().commit(commit(vec![part(1, "v2"), part(2, "v2")], None)).await.unwrap();
        index.writes().finish_stream("big.log", "v2").await.unwrap();
        let rows = index.reads().chunks_of("big.log").await.unwrap();
        assert_eq!(rows.len(), 3, "only v2's rows remain");
        assert!(rows.iter().all(|r| r.content.ends_with("v2")));
        assert_eq!(index.reads().file_hashes().await.unwrap()["big.log"], "v2");
        // Replaced by a small (non-streamed) version: the stream record goes too.
        let small = row("big.log", 0, "small", [0.0, 1.0, 0.0, 0.0]);
        let hash = small.file_hash.clone();
        index
            .writes()
            .commit(CommitBatch { rows: vec![small], replace_paths: vec!["big.log".into()], ..Default::default() })
            .await
            .unwrap();
        assert_eq!(index.reads().file_hashes().await.unwrap()["big.log"], hash);
        assert_eq!(index.reads().chunks_of("big.log").await.unwrap().len(), 1);
        assert!(index.complete_streams().await.unwrap().is_empty());
    }

    /// The `vector` column of every row, by chunk id (`None`: null).
    async fn stored_vectors(index: &Index) -> std::collections::HashMap<String, Option<Vec<f32>>> {
        use arrow_array::{Array, FixedSizeListArray, Float32Array, StringArray};
        use lancedb::query::{QueryBase, Select};
        let query = index.table.query().select(Select::columns(&["chunk_id", "vector"]));
        let mut out = std::collections::HashMap::new();
        for batch in index.collect(query).await.unwrap() {
            let ids = batch.column(0).as_any().downcast_ref::<StringArray>().unwrap();
            let vectors = batch.column(1).as_any().downcast_ref::<FixedSizeListArray>().unwrap();
            for i in 0..batch.num_rows() {
                let v = vectors
                    .is_valid(i)
                    .then(|| vectors.value(i).as_any().downcast_ref::<Float32Array>().unwrap().values().to_vec());
                out.insert(ids.value(i).to_string(), v);
            }
        }
        out
    }

    #[tokio::test]
    async fn rows_without_a_vector_store_none_and_older_tables_zeros() {
        use crate::schema::{rows_to_batch, Vectorless};
        let dir = tempfile::tempdir().unwrap();
        let text_only = |path: &str| ChunkRow {
            vector: Vec::new(),
            model: crate::NO_MODEL.into(),
            ..row(path, 0, "beta", [0.0; 4])
        };
        // A new table: the vector of a full-text-only row is null.
        let uri = dir.path().join("new").to_string_lossy().into_owned();
        let index = Index::open_or_create(&uri, "m", 4).await.unwrap();
        assert_eq!(index.vectorless(), Vectorless::Null);
        let rows = vec![row("a.rs", 0, "alpha", [1.0, 0.0, 0.0, 0.0]), text_only("b.rs")];
        let ids: Vec<String> = rows.iter().map(|r| r.chunk_id.clone()).collect();
        index.writes().commit(CommitBatch { rows, ..Default::default() }).await.unwrap();
        let stored = stored_vectors(&index).await;
        assert_eq!(stored[&ids[0]], Some(vec![1.0, 0.0, 0.0, 0.0]));
        assert_eq!(stored[&ids[1]], None, "no vector: null, nothing on disk");
        let near = index.reads().vector_search(&[1.0, 0.0, 0.0, 0.0], 5).await.unwrap();
        assert_eq!(near.iter().map(|h| h.chunk.path.as_str()).collect::<Vec<_>>(), ["a.rs"]);
        // A table created before `vector` was nullable takes zeros (its schema says non-null).
        let uri = dir.path().join("old").to_string_lossy().into_owned();
        let first =
            rows_to_batch(&[row("c.rs", 0, "gamma", [0.0, 1.0, 0.0, 0.0])], 4, false, Vectorless::Zeros).unwrap();
        assert!(!first.schema().field_with_name("vector").unwrap().is_nullable());
        let conn = lancedb::connect(&uri).execute().await.unwrap();
        conn.create_table(crate::CHUNKS_TABLE, first).execute().await.unwrap();
        let old = Index::open_or_create(&uri, "m", 4).await.unwrap();
        assert_eq!(old.vectorless(), Vectorless::Zeros);
        let id = text_only("d.rs").chunk_id.clone();
        old.writes().commit(CommitBatch { rows: vec![text_only("d.rs")], ..Default::default() }).await.unwrap();
        assert_eq!(stored_vectors(&old).await[&id], Some(vec![0.0; 4]));
        // A row that claims a model must carry the table's dimension.
        let bad = ChunkRow { vector: vec![1.0], ..row("e.rs", 0, "delta", [0.0; 4]) };
        assert!(index.writes().commit(CommitBatch { rows: vec![bad], ..Default::default() }).await.is_err());
    }

    use crate::{edges::EdgeKind, edges::EdgeRow};

    fn sym(path: &str, name: &str, line: u32) -> SymbolRow {
        SymbolRow {
            symbol_id: format!("{path}#{name}#{line}"),
            name: name.into(),
            qualified_name: format!("{}::{name}", path.trim_end_matches(".rs")),
            symbol: name.into(),
            kind: "function".into(),
            language: "rust".into(),
            path: path.into(),
            start_line: line,
            end_line: line + 3,
            signature: format!("fn {name}()"),
            parent: None,
            doc: Some("does things".into()),
        }
    }

    #[tokio::test]
    async fn symbols_are_replaced_with_their_files_and_found_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let uri = dir.path().join("db").to_string_lossy().into_owned();
        let index = Index::open_or_create(&uri, "m", 4).await.unwrap();
        let first = CommitBatch {
            rows: vec![row("a.rs", 0, "parse", [1.0, 0.0, 0.0, 0.0]), row("b.rs", 0, "render", [0.0, 1.0, 0.0, 0.0])],
            symbols: vec![sym("a.rs", "parse_config", 1), sym("a.rs", "parse_args", 9), sym("b.rs", "render", 1)],
            edges: vec![
                EdgeRow::new("a.rs", "rust", Some("parse_config"), EdgeKind::Calls, "parse_args", None, 2),
                EdgeRow::new("b.rs", "rust", None, EdgeKind::Imports, "crate::a", Some("parse_config"), 1),
            ],
            ..Default::default()
        };
        index.writes().commit(first.clone()).await.unwrap();
        let v1 = index.version().await.unwrap();
        // A retried batch does not duplicate symbols.
        index
            .writes()
            .commit(CommitBatch { replace_paths: vec!["a.rs".into(), "b.rs".into()], ..first })
            .await
            .unwrap();
        let exact = index.symbols().symbols_named("parse_config", false, 10).await.unwrap();
        assert_eq!(exact.len(), 1);
        assert_eq!(exact[0].signature, "fn parse_config()");
        assert_eq!(exact[0].doc.as_deref(), Some("does things"));
        assert_eq!(
            index.symbols().symbols_named("a::parse_args", false, 10).await.unwrap().len(),
            1,
            "by qualified name"
        );
        assert_eq!(index.symbols().symbols_named("parse", true, 10).await.unwrap().len(), 2, "by prefix");
        // a.rs loses parse_args, b.rs is deleted: their symbols go in the same commit.
        let second = CommitBatch {
            rows: vec![row("a.rs", 0, "parse", [1.0, 0.0, 0.0, 0.0])],
            replace_paths: vec!["a.rs".into()],
            delete_paths: vec!["b.rs".into()],
            symbols: vec![sym("a.rs", "parse_config", 1)],
            ..Default::default()
        };
        index.writes().commit(second).await.unwrap();
        assert!(index.symbols().symbols_named("parse_args", false, 10).await.unwrap().is_empty());
        assert!(index.symbols().symbols_named("render", false, 10).await.unwrap().is_empty());
        assert_eq!(index.symbols().symbols_named("parse_config", false, 10).await.unwrap().len(), 1);
        // Edges went with their files: b.rs's are gone, a.rs has none left.
        assert!(index.symbols().all_edges().await.unwrap().is_empty());
        // A read-only open sees the same tables.
        let ro = Index::open(&uri).await.unwrap();
        assert_eq!(ro.symbols().symbols_named("parse", true, 10).await.unwrap().len(), 1);
        // A snapshot sees the symbols and edges of its own version, not the latest.
        let old = index.snapshots().at(v1).await.unwrap();
        assert_eq!(old.symbols().symbols_named("render", false, 10).await.unwrap().len(), 1);
        assert_eq!(old.symbols().all_symbols().await.unwrap().len(), 3);
        let edges = old.symbols().all_edges().await.unwrap();
        assert_eq!(edges.len(), 2, "{edges:?}");
        // A tag keeps the symbols and edges of its version through cleanup, too.
        index.snapshots().tag("first", Some(v1)).await.unwrap();
        let opts = crate::maintenance::MaintenanceOptions {
            retain: std::time::Duration::ZERO,
            single_writer: true,
            vector_index_min_rows: 0,
        };
        index.maintenance().maintain(&opts).await.unwrap();
        let old = index.snapshots().at(v1).await.unwrap();
        assert_eq!(old.symbols().all_symbols().await.unwrap().len(), 3);
        assert_eq!(old.symbols().all_edges().await.unwrap().len(), 2);
        index.snapshots().untag("first").await.unwrap();
    }

    #[tokio::test]
    async fn commit_replace_delete_and_search_on_real_lancedb() {
        let dir = tempfile::tempdir().unwrap();
        let uri = dir.path().join("db").to_string_lossy().into_owned();
        let index = Index::open_or_create(&uri, "m", 4).await.unwrap();
        let first = CommitBatch {
            rows: vec![
                row("a.rs", 0, "parse the config file", [1.0, 0.0, 0.0, 0.0]),
                row("a.rs", 1, "open a network socket", [0.0, 1.0, 0.0, 0.0]),
                row("b.rs", 0, "render the needle widget", [0.0, 0.0, 1.0, 0.0]),
            ],
            replace_paths: vec!["a.rs".into(), "b.rs".into()],
            delete_paths: vec![],
            symbols: vec![],
            ..Default::default()
        };
        let s1 = index.writes().commit(first).await.unwrap();
        assert_eq!((s1.inserted, s1.deleted), (3, 0));
        assert_eq!(index.reads().stats().await.unwrap().rows, 3);
        let hits = index.reads().fts_search("needle", 5).await.unwrap();
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].path, "b.rs");
        let near = index.reads().vector_search(&[0.0, 0.9, 0.1, 0.0], 2).await.unwrap();
        assert_eq!(near[0].content, "open a network socket");
        assert!(near[0].score > near[1].score);

        // a.rs changes one chunk, b.rs is deleted: one commit, one new version.
        let second = CommitBatch {
            rows: vec![
                row("a.rs", 0, "parse the config file", [1.0, 0.0, 0.0, 0.0]),
                row("a.rs", 1, "listen on a haystack port", [0.0, 1.0, 0.0, 0.0]),
            ],
            replace_paths: vec!["a.rs".into()],
            delete_paths: vec!["b.rs".into()],
            symbols: vec![],
            ..Default::default()
        };
        let before = index.version().await.unwrap();
        assert!(before > s1.version, "building the FTS index is a version of its own");
        let s2 = index.writes().commit(second).await.unwrap();
        assert_eq!(s2.version, before + 1, "one version per commit");
        assert_eq!((s2.inserted, s2.deleted), (1, 2));
        let files = index.reads().file_hashes().await.unwrap();
        assert_eq!(files.len(), 1);
        assert_eq!(index.reads().chunks_of("a.rs").await.unwrap().len(), 2);
        // Rows written after the FTS index was built are searchable before optimisation.
        assert_eq!(index.reads().fts_search("haystack", 5).await.unwrap().len(), 1);
        assert!(index.reads().fts_search("needle", 5).await.unwrap().is_empty());
        index.maintenance().optimize_indices().await.unwrap();
        assert_eq!(index.reads().fts_search("haystack", 5).await.unwrap().len(), 1);

        // Re-committing identical rows inserts nothing.
        let again = CommitBatch {
            rows: vec![
                row("a.rs", 0, "parse the config file", [1.0, 0.0, 0.0, 0.0]),
                row("a.rs", 1, "listen on a haystack port", [0.0, 1.0, 0.0, 0.0]),
            ],
            replace_paths: vec!["a.rs".into()],
            delete_paths: vec![],
            symbols: vec![],
            ..Default::default()
        };
        let s3 = index.writes().commit(again).await.unwrap();
        assert_eq!((s3.inserted, s3.deleted), (0, 0));

        // Another model or dimension is refused; read-only open finds the model.
        assert!(matches!(Index::open_or_create(&uri, "other", 4).await, Err(IndexError::ModelMismatch { .. })));
        assert!(matches!(Index::open_or_create(&uri, "m", 8).await, Err(IndexError::ModelMismatch { .. })));
        let ro = Index::open(&uri).await.unwrap();
        assert_eq!((ro.model_id(), ro.dim()), ("m", 4));
        assert!(matches!(ro.reads().vector_search(&[1.0], 1).await, Err(IndexError::Dimension { .. })));
    }
}
