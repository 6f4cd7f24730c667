//! The [`Index`]: open/create the chunks table, commit batches, search.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use arrow_array::{
    Array, FixedSizeListArray, Float32Array, RecordBatch, RecordBatchIterator, StringArray, UInt32Array,
};
use arrow_schema::DataType;
use futures::{StreamExt, TryStreamExt};
use lancedb::index::scalar::{FtsIndexBuilder, FullTextSearchQuery};
use lancedb::index::Index as LanceIndex;
use lancedb::query::{ExecutableQuery, QueryBase, Select};
use lancedb::table::{OptimizeAction, OptimizeOptions};
use lancedb::{Connection, DistanceType, Table};

use crate::metrics as m;
use crate::schema::{chunks_schema, rows_to_batch, ChunkRow, EMBED_KEY};
use crate::streams::{self, stream_batch, streams_schema, PARTIAL_PREFIX, STREAMS_TABLE};
use crate::symbols::{batch_to_symbols, symbols_schema, symbols_to_batch, SymbolRow, SYMBOLS_TABLE};
use crate::{IndexError, NO_MODEL};

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
    /// `(path, hash)` of streamed files whose first part is in `rows`: rows `partial:<hash>`
    /// of the same path left by an interrupted earlier attempt are deleted first (the rows
    /// of the previous complete version stay searchable until [`Index::finish_stream`]).
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

/// One search result row.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Hit {
    pub chunk_id: String,
    pub path: String,
    pub language: String,
    pub symbol: Option<String>,
    pub kind: Option<String>,
    pub start_line: u32,
    pub end_line: u32,
    pub content: String,
    /// Similarity for vector hits (1 − cosine distance), BM25 score for full-text hits.
    pub score: f32,
}

/// A chunk's place and stored vector ([`Index::chunk_vectors_of`]).
#[derive(Debug, Clone)]
pub struct ChunkVector {
    pub chunk_id: String,
    pub start_line: u32,
    pub end_line: u32,
    pub vector: Vec<f32>,
}

/// Size facts about the table.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct IndexStats {
    pub rows: usize,
    pub version: u64,
}

/// The chunks table of one database directory.
pub struct Index {
    pub(crate) uri: String,
    /// The chunks table in use (see [`crate::active`]: `chunks` until a re-embedding switched).
    pub(crate) table_name: String,
    pub(crate) table: Table,
    /// The symbols table (absent in indexes written before it existed, when opened read-only).
    pub(crate) symbols: Option<Table>,
    /// The streams table (see [`crate::streams`]; absent in older indexes opened read-only).
    streams: Option<Table>,
    dim: usize,
    pub(crate) model_id: String,
    fts_ready: AtomicBool,
    /// Whether the table has the `embed_key` column (tables of older ctxd versions do not).
    keyed: bool,
}

const HIT_COLUMNS: [&str; 8] = ["chunk_id", "path", "language", "symbol", "kind", "start_line", "end_line", "content"];

/// The hit columns plus the score column of a search (selected explicitly so LanceDB does not
/// have to auto-project it).
fn with_score(score: &'static str) -> Vec<&'static str> {
    let mut cols = HIT_COLUMNS.to_vec();
    cols.push(score);
    cols
}

/// Quotes a string for a LanceDB SQL filter.
pub fn sql_str(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

fn in_list(column: &str, values: &[String]) -> String {
    let list: Vec<String> = values.iter().map(|v| sql_str(v)).collect();
    format!("{column} IN ({})", list.join(", "))
}

/// Name LanceDB gives the full-text index on `content`.
const FTS_INDEX: &str = "content_idx";
/// Full-text index segments that trigger a merge…
pub const MAX_FTS_SEGMENTS: usize = 16;
/// …of this many of the latest segments…
pub const FTS_SEGMENTS_MERGED: usize = 8;
/// …when they hold about this many rows at most (a merge's memory grows with its rows).
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

/// Opens table `name` of `conn` (whose tables are `names`), creating it empty with `schema`
/// when missing; if another writer creates it in the meantime, that one is opened.
async fn open_or_create_table(
    conn: &Connection,
    names: &[String],
    name: &str,
    schema: arrow_schema::SchemaRef,
) -> Result<Table, lancedb::Error> {
    if names.iter().any(|n| n == name) {
        return conn.open_table(name).execute().await;
    }
    match conn.create_empty_table(name, schema).execute().await {
        Ok(t) => Ok(t),
        Err(_) => conn.open_table(name).execute().await,
    }
}

impl Index {
    pub(crate) fn lance(&self, source: lancedb::Error) -> IndexError {
        IndexError::Lance { uri: self.uri.clone(), source }
    }

    pub(crate) async fn connect(uri: &str) -> Result<Connection, IndexError> {
        lancedb::connect(uri)
            .session(crate::session::session())
            .execute()
            .await
            .map_err(|source| IndexError::Lance { uri: uri.to_string(), source })
    }

    /// Opens the index at `uri` for writing with `model_id`/`dim`, creating it when missing.
    /// The chunks table is the active one ([`crate::active`]). Fails when it was built with
    /// another model or dimension.
    pub async fn open_or_create(uri: &str, model_id: &str, dim: usize) -> Result<Self, IndexError> {
        let table = crate::active::current_table(uri).await?;
        Self::open_or_create_table(uri, &table, model_id, dim).await
    }

    /// [`Index::open_or_create`] on the chunks table `table_name`, active or not (a
    /// re-embedding job fills a table before it becomes the active one).
    pub async fn open_or_create_table(
        uri: &str,
        table_name: &str,
        model_id: &str,
        dim: usize,
    ) -> Result<Self, IndexError> {
        let conn = Self::connect(uri).await?;
        let lance = |source| IndexError::Lance { uri: uri.to_string(), source };
        let names = conn.table_names().execute().await.map_err(lance)?;
        let table = open_or_create_table(&conn, &names, table_name, chunks_schema(dim)).await.map_err(lance)?;
        let symbols = open_or_create_table(&conn, &names, SYMBOLS_TABLE, symbols_schema()).await.map_err(lance)?;
        let streams = open_or_create_table(&conn, &names, STREAMS_TABLE, streams_schema()).await.map_err(lance)?;
        let mut index = Self::from_table(uri, table_name, table).await?;
        index.symbols = Some(symbols);
        index.streams = Some(streams);
        let indexed_model = index.stored_model().await?;
        if index.dim != dim || indexed_model.as_deref().is_some_and(|m| m != model_id) {
            return Err(IndexError::ModelMismatch {
                uri: uri.to_string(),
                indexed: indexed_model.unwrap_or_default(),
                indexed_dim: index.dim,
                requested: model_id.to_string(),
                requested_dim: dim,
            });
        }
        Ok(Self { model_id: model_id.to_string(), ..index })
    }

    /// Opens an existing index for reading (model id and dimension are read from it); the
    /// active chunks table ([`crate::active`]).
    pub async fn open(uri: &str) -> Result<Self, IndexError> {
        let table = crate::active::current_table(uri).await?;
        Self::open_table(uri, &table).await
    }

    /// [`Index::open`] on the chunks table `table_name`.
    pub async fn open_table(uri: &str, table_name: &str) -> Result<Self, IndexError> {
        let conn = Self::connect(uri).await?;
        let lance = |source| IndexError::Lance { uri: uri.to_string(), source };
        let names = conn.table_names().execute().await.map_err(lance)?;
        if !names.iter().any(|n| n == table_name) {
            return Err(IndexError::Missing { uri: uri.to_string() });
        }
        let table = conn.open_table(table_name).execute().await.map_err(lance)?;
        let mut index = Self::from_table(uri, table_name, table).await?;
        if names.iter().any(|n| n == SYMBOLS_TABLE) {
            index.symbols = Some(conn.open_table(SYMBOLS_TABLE).execute().await.map_err(lance)?);
        }
        if names.iter().any(|n| n == STREAMS_TABLE) {
            index.streams = Some(conn.open_table(STREAMS_TABLE).execute().await.map_err(lance)?);
        }
        index.model_id = index.stored_model().await?.unwrap_or_default();
        Ok(index)
    }

    pub(crate) async fn from_table(uri: &str, table_name: &str, table: Table) -> Result<Self, IndexError> {
        let schema = table.schema().await.map_err(|source| IndexError::Lance { uri: uri.to_string(), source })?;
        let dim = match schema.field_with_name("vector").map(|f| f.data_type().clone()) {
            Ok(DataType::FixedSizeList(_, n)) => n as usize,
            _ => return Err(IndexError::Column { uri: uri.to_string(), column: "vector".into() }),
        };
        let indices =
            table.list_indices().await.map_err(|source| IndexError::Lance { uri: uri.to_string(), source })?;
        let fts_ready = indices.iter().any(|i| i.columns.iter().any(|c| c == "content"));
        let keyed = schema.field_with_name(EMBED_KEY).is_ok();
        Ok(Self {
            uri: uri.to_string(),
            table_name: table_name.to_string(),
            table,
            symbols: None,
            streams: None,
            dim,
            model_id: String::new(),
            fts_ready: AtomicBool::new(fts_ready),
            keyed,
        })
    }

    async fn stored_model(&self) -> Result<Option<String>, IndexError> {
        let filter = format!("model != {}", sql_str(NO_MODEL));
        let batches =
            self.collect(self.table.query().only_if(filter).select(Select::columns(&["model"])).limit(1)).await?;
        Ok(batches
            .iter()
            .find(|b| b.num_rows() > 0)
            .and_then(|b| b.column(0).as_any().downcast_ref::<StringArray>().map(|a| a.value(0).to_string())))
    }

    /// The database URI.
    pub fn uri(&self) -> &str {
        &self.uri
    }

    /// The chunks table in use (`chunks`, or `chunks__<model>` after a re-embedding).
    pub fn table_name(&self) -> &str {
        &self.table_name
    }

    /// Whether the table keys its vectors by the embedded text (`embed_key`). A table written
    /// by an older ctxd does not: its vectors were cached by content alone, so some may be of
    /// another text than their row's (a moved file, a re-embedding of bare content). Such a
    /// table can be read and searched, but not written: a writer re-embeds it once first
    /// (`ctxd_pipeline::reembed::migrate`).
    pub fn embed_keyed(&self) -> bool {
        self.keyed
    }

    /// Every `chunk_id` in the table (at its version). One column is read.
    pub async fn chunk_ids(&self) -> Result<std::collections::HashSet<String>, IndexError> {
        Ok(self.chunk_ids_and_duplicates().await?.0)
    }

    /// Every `chunk_id` in the table, and those held by more than one row (none, unless two
    /// jobs appended the same rows), sorted. One scan of one column.
    pub async fn chunk_ids_and_duplicates(
        &self,
    ) -> Result<(std::collections::HashSet<String>, Vec<String>), IndexError> {
        let stream =
            self.table.query().select(Select::columns(&["chunk_id"])).execute().await.map_err(|e| self.lance(e))?;
        let batches: Vec<RecordBatch> = stream.try_collect().await.map_err(|e| self.lance(e))?;
        let mut ids = std::collections::HashSet::new();
        let mut twice = std::collections::BTreeSet::new();
        for b in &batches {
            for id in str_col(b, "chunk_id", &self.uri)?.iter().flatten() {
                if !ids.insert(id.to_string()) {
                    twice.insert(id.to_string());
                }
            }
        }
        Ok((ids, twice.into_iter().collect()))
    }

    /// Every row without its vector (the columns of `chunks_schema` but `vector`), as a stream
    /// of record batches; only rows whose id is in `only` when given.
    pub async fn scan_without_vectors(
        &self,
        only: Option<&[String]>,
    ) -> Result<futures::stream::BoxStream<'static, Result<RecordBatch, IndexError>>, IndexError> {
        let columns: Vec<String> =
            self.schema().await?.fields().iter().map(|f| f.name().clone()).filter(|n| n != "vector").collect();
        let mut query = self.table.query().select(Select::columns(&columns));
        if let Some(ids) = only {
            query = query.only_if(in_list("chunk_id", ids));
        }
        let stream = query.execute().await.map_err(|e| self.lance(e))?;
        let uri = self.uri.clone();
        Ok(stream.map_err(move |source| IndexError::Lance { uri: uri.clone(), source }).boxed())
    }

    /// Appends rows (a batch of `chunks_schema(dim)`) as one commit; no dedup, no deletes.
    pub async fn append(&self, batch: RecordBatch) -> Result<(), IndexError> {
        self.table.add(batch).execute().await.map_err(|e| self.lance(e))?;
        Ok(())
    }

    /// Deletes the rows with these ids (one commit per 1,000 ids).
    pub async fn delete_chunk_ids(&self, ids: &[String]) -> Result<(), IndexError> {
        for part in ids.chunks(1000) {
            self.table.delete(&in_list("chunk_id", part)).await.map_err(|e| self.lance(e))?;
        }
        Ok(())
    }

    /// Moves this handle to the table's latest version (other processes may have committed).
    pub async fn refresh(&self) -> Result<(), IndexError> {
        self.table.checkout_latest().await.map_err(|e| self.lance(e))
    }

    /// Vector dimension of the table.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Model id of the vectors (empty for an empty table opened read-only).
    pub fn model_id(&self) -> &str {
        &self.model_id
    }

    /// The underlying LanceDB table (for callers that need more than this API).
    pub fn table(&self) -> &Table {
        &self.table
    }

    /// `path → file_hash` of every indexed file: the incremental state, read from the index.
    /// A streamed file whose rows are all `partial:<hash>` maps to `<hash>` when the streams
    /// table says it is complete, else to `partial:<hash>` (never equal to a real hash, so it
    /// is indexed again).
    pub async fn file_hashes(&self) -> Result<HashMap<String, String>, IndexError> {
        let complete = self.complete_streams().await?;
        let mut stream = self
            .table
            .query()
            .select(Select::columns(&["path", "file_hash"]))
            .execute()
            .await
            .map_err(|e| self.lance(e))?;
        let mut out: HashMap<String, String> = HashMap::new();
        while let Some(batch) = stream.try_next().await.map_err(|e| self.lance(e))? {
            let paths = str_col(&batch, "path", &self.uri)?;
            let hashes = str_col(&batch, "file_hash", &self.uri)?;
            for i in 0..batch.num_rows() {
                let path = paths.value(i);
                let hash = streams::resolve(hashes.value(i), complete.get(path).map(String::as_str));
                // A complete version wins over leftovers of an interrupted newer stream.
                match out.get_mut(path) {
                    Some(h) if h.starts_with(PARTIAL_PREFIX) && !hash.starts_with(PARTIAL_PREFIX) => {
                        *h = hash.to_string()
                    }
                    Some(_) => {}
                    None => {
                        out.insert(path.to_string(), hash.to_string());
                    }
                }
            }
        }
        Ok(out)
    }

    /// `path → hash` of the streamed files recorded complete.
    async fn complete_streams(&self) -> Result<HashMap<String, String>, IndexError> {
        let Some(table) = &self.streams else { return Ok(HashMap::new()) };
        let batches = self.collect(table.query()).await?;
        let mut out = HashMap::new();
        for batch in &batches {
            let paths = str_col(batch, "path", &self.uri)?;
            let hashes = str_col(batch, "file_hash", &self.uri)?;
            for i in 0..batch.num_rows() {
                out.insert(paths.value(i).to_string(), hashes.value(i).to_string());
            }
        }
        Ok(out)
    }

    /// Applies `batch` as one commit: new chunks inserted, stale chunks of the replaced files
    /// and all chunks of deleted files removed, in the same LanceDB version.
    pub async fn commit(&self, batch: CommitBatch) -> Result<CommitStats, IndexError> {
        if batch.is_empty() {
            return Ok(CommitStats { version: self.version().await?, ..Default::default() });
        }
        if !self.keyed {
            return Err(IndexError::Unkeyed { uri: self.uri.clone(), table: self.table_name.clone() });
        }
        let started = Instant::now();
        let mut touched: Vec<String> = batch.replace_paths.iter().chain(&batch.delete_paths).cloned().collect();
        touched.sort();
        touched.dedup();
        // Symbols first: an idempotent merge, so when the chunk commit below fails and the
        // batch is retried, nothing is duplicated.
        self.commit_symbols(&batch.symbols, &touched).await?;
        if let (Some(streams), false) = (&self.streams, touched.is_empty()) {
            // Replaced or deleted files are no longer streamed versions.
            streams.delete(&in_list("path", &touched)).await.map_err(|e| self.lance(e))?;
        }
        if !batch.stream_starts.is_empty() {
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
        let stats = if batch.rows.is_empty() {
            let res = self.table.delete(in_list("path", &touched).as_str()).await.map_err(|e| self.lance(e))?;
            CommitStats { version: res.version, inserted: 0, deleted: res.num_deleted_rows }
        } else if touched.is_empty() {
            // Only files the index has never seen: nothing can be stale, a plain append is
            // enough (and does not join against the whole table).
            let record = rows_to_batch(&batch.rows, self.dim)?;
            let inserted = record.num_rows() as u64;
            let res = self.table.add(record).execute().await.map_err(|e| self.lance(e))?;
            CommitStats { version: res.version, inserted, deleted: 0 }
        } else {
            let record = rows_to_batch(&batch.rows, self.dim)?;
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
            self.build_fts().await?;
        }
        Ok(CommitStats { version, ..stats })
    }

    /// (Re)builds the full-text index on `content` (and the B-tree indexes), covering every row.
    pub async fn build_fts(&self) -> Result<(), IndexError> {
        self.table
            .create_index(&["content"], LanceIndex::FTS(fts_params()))
            .replace(true)
            .execute()
            .await
            .map_err(|e| self.lance(e))?;
        self.fts_ready.store(true, Ordering::Release);
        metrics::counter!(m::INDEX_FTS_UPDATES_TOTAL).increment(1);
        self.ensure_hash_index().await
    }

    /// B-tree indexes on `embed_key` (the embedding-cache lookups of [`Index::vectors_for`])
    /// and `path` (a file's chunks: symbol and path routes, completion, replacements), so
    /// neither scans the table; kept current by the index folds.
    pub async fn ensure_hash_index(&self) -> Result<(), IndexError> {
        let columns: &[&str] = if self.keyed { &[EMBED_KEY, "path"] } else { &["path"] };
        ensure_btree(&self.table, columns).await.map_err(|e| self.lance(e))?;
        Ok(())
    }
    /// Completes a file committed in parts: deletes the rows of its previous version (any
    /// `file_hash` other than `partial:<hash>`), then records `(path, hash)` in the streams
    /// table, so the file counts as indexed only once every part is in. Both are cheap (a
    /// deletion vector and a one-row merge): the file's rows are not rewritten.
    pub async fn finish_stream(&self, path: &str, hash: &str) -> Result<(), IndexError> {
        let partial = format!("{PARTIAL_PREFIX}{hash}");
        let filter = format!("path = {} AND file_hash != {}", sql_str(path), sql_str(&partial));
        self.table.delete(&filter).await.map_err(|e| self.lance(e))?;
        if let Some(symbols) = &self.symbols {
            symbols.delete(&format!("path = {}", sql_str(path))).await.map_err(|e| self.lance(e))?;
        }
        let Some(streams) = &self.streams else { return Ok(()) };
        let record = stream_batch(path, hash);
        let schema = record.schema();
        let reader = RecordBatchIterator::new(vec![Ok(record)], schema);
        let mut merge = streams.merge_insert(&["path"]);
        merge.when_matched_update_all(None).when_not_matched_insert_all();
        merge.execute(Box::new(reader)).await.map_err(|e| self.lance(e))?;
        Ok(())
    }

    async fn commit_symbols(&self, rows: &[SymbolRow], touched: &[String]) -> Result<(), IndexError> {
        let Some(table) = &self.symbols else { return Ok(()) };
        if rows.is_empty() {
            if !touched.is_empty() {
                table.delete(in_list("path", touched).as_str()).await.map_err(|e| self.lance(e))?;
            }
            return Ok(());
        }
        let record = symbols_to_batch(rows)?;
        let schema = record.schema();
        let reader = RecordBatchIterator::new(vec![Ok(record)], schema);
        let mut merge = table.merge_insert(&["symbol_id"]);
        merge.when_not_matched_insert_all();
        if !touched.is_empty() {
            merge.when_not_matched_by_source_delete(Some(in_list("path", touched)));
        }
        merge.execute(Box::new(reader)).await.map_err(|e| self.lance(e))?;
        Ok(())
    }

    /// Definitions whose name, symbol or qualified name is `name` (exact), or, with
    /// `prefix`, starts with it. At most `limit` rows.
    pub async fn symbols_named(&self, name: &str, prefix: bool, limit: usize) -> Result<Vec<SymbolRow>, IndexError> {
        if !prefix {
            return self.symbols_named_any(&[name.to_string()], limit).await;
        }
        let Some(table) = &self.symbols else { return Ok(Vec::new()) };
        let like = sql_str(&format!("{}%", name.replace('%', "")));
        let filter = format!("name LIKE {like} OR symbol LIKE {like} OR qualified_name LIKE {like}");
        let batches = self.collect(table.query().only_if(filter).limit(limit)).await?;
        Ok(batches.iter().flat_map(batch_to_symbols).collect())
    }

    /// Folds rows written since the last index build into the full-text index. Rows not yet
    /// folded in are still searched (flat), so this is about speed, not correctness.
    ///
    /// A fold writes the new rows as a new index segment (LanceDB's default would merge them
    /// into the latest segment, rewriting it: time and memory would grow with the table, not
    /// with the rows folded). Once there are [`MAX_FTS_SEGMENTS`] segments, the latest
    /// [`FTS_SEGMENTS_MERGED`] are merged into one, so queries never visit many — unless
    /// that would merge more than [`MAX_FTS_MERGE_ROWS`] rows (memory, not time, is the limit).
    pub async fn optimize_indices(&self) -> Result<(), IndexError> {
        if !self.fts_ready.load(Ordering::Acquire) {
            return Ok(());
        }
        let (segments, rows) = self.fts_layout().await.ok().flatten().unwrap_or((1, 0));
        // A merge holds the merged segments' postings in memory: only small segments are
        // merged (the many little ones a daemon's folds leave), never the big ones a huge
        // streamed file leaves — there, more segments beat memory growing with the file.
        let merged_rows = rows / segments.max(1) * FTS_SEGMENTS_MERGED;
        let options = if segments >= MAX_FTS_SEGMENTS && merged_rows <= MAX_FTS_MERGE_ROWS {
            OptimizeOptions::merge(FTS_SEGMENTS_MERGED)
        } else {
            OptimizeOptions::append()
        };
        self.table.optimize(OptimizeAction::Index(options)).await.map_err(|e| self.lance(e))?;
        metrics::counter!(m::INDEX_FTS_UPDATES_TOTAL).increment(1);
        Ok(())
    }

    /// Segments and indexed rows of the full-text index (`None` before it exists).
    async fn fts_layout(&self) -> Result<Option<(usize, usize)>, IndexError> {
        let stats = self.table.index_stats(FTS_INDEX).await.map_err(|e| self.lance(e))?;
        Ok(stats.map(|s| (s.num_indices.unwrap_or(1) as usize, s.num_indexed_rows)))
    }

    /// Segments of the full-text index (0 before it exists).
    pub async fn fts_segments(&self) -> Result<usize, IndexError> {
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
        self.table
            .optimize(OptimizeAction::Index(OptimizeOptions::merge(segments)))
            .await
            .map_err(|e| self.lance(e))?;
        metrics::counter!(m::INDEX_FTS_UPDATES_TOTAL).increment(1);
        Ok(segments)
    }

    /// Every row of the table (at its version), as a stream of record batches; `vector`
    /// included. For Arrow Flight and exports.
    pub async fn scan(
        &self,
    ) -> Result<futures::stream::BoxStream<'static, Result<RecordBatch, IndexError>>, IndexError> {
        let stream = self.table.query().execute().await.map_err(|e| self.lance(e))?;
        let uri = self.uri.clone();
        Ok(stream.map_err(move |source| IndexError::Lance { uri: uri.clone(), source }).boxed())
    }

    /// The Arrow schema of the chunks table.
    pub async fn schema(&self) -> Result<arrow_schema::SchemaRef, IndexError> {
        self.table.schema().await.map_err(|e| self.lance(e))
    }

    /// Current LanceDB version of the table.
    pub async fn version(&self) -> Result<u64, IndexError> {
        self.table.version().await.map_err(|e| self.lance(e))
    }

    /// Row count and version.
    pub async fn stats(&self) -> Result<IndexStats, IndexError> {
        let rows = self.table.count_rows(None).await.map_err(|e| self.lance(e))?;
        let version = self.version().await?;
        metrics::gauge!(m::INDEX_ROWS).set(rows as f64);
        metrics::gauge!(m::INDEX_VERSION).set(version as f64);
        Ok(IndexStats { rows, version })
    }

    /// Nearest chunks to `vector` by cosine similarity.
    pub async fn vector_search(&self, vector: &[f32], k: usize) -> Result<Vec<Hit>, IndexError> {
        self.vector_search_probes(vector, k, None).await
    }

    /// [`Index::vector_search`] visiting `nprobes` IVF partitions (LanceDB's default, 20, when
    /// `None`): fewer is faster and may miss a few neighbours (latency-bound callers).
    pub async fn vector_search_probes(
        &self,
        vector: &[f32],
        k: usize,
        nprobes: Option<usize>,
    ) -> Result<Vec<Hit>, IndexError> {
        if vector.len() != self.dim {
            return Err(IndexError::Dimension { expected: self.dim, got: vector.len() });
        }
        let mut query = self.table.query().nearest_to(vector).map_err(|e| self.lance(e))?;
        if let Some(n) = nprobes {
            query = query.minimum_nprobes(n).map_err(|e| self.lance(e))?;
            query = query.maximum_nprobes(Some(n)).map_err(|e| self.lance(e))?;
        }
        let batches = self
            .collect(
                query
                    .distance_type(DistanceType::Cosine)
                    // After the search, not before: a pre-filter reads the `model` column of
                    // every row on each query (rows stored without a vector are zeros, which
                    // never rank near a real query anyway).
                    .only_if(format!("model != {}", sql_str(NO_MODEL)))
                    .postfilter()
                    .select(Select::columns(&with_score("_distance")))
                    .limit(k),
            )
            .await?;
        let mut hits = self.hits(&batches, "_distance", |d| 1.0 - d)?;
        hits.sort_by(|a, b| b.score.total_cmp(&a.score));
        Ok(hits)
    }

    /// Best BM25 matches of `query` in chunk contents.
    pub async fn fts_search(&self, query: &str, k: usize) -> Result<Vec<Hit>, IndexError> {
        if !self.fts_ready.load(Ordering::Acquire) || query.trim().is_empty() {
            return Ok(Vec::new());
        }
        let batches = self
            .collect(
                self.table
                    .query()
                    .full_text_search(FullTextSearchQuery::new(query.to_string()))
                    .select(Select::columns(&with_score("_score")))
                    .limit(k),
            )
            .await?;
        let mut hits = self.hits(&batches, "_score", |s| s)?;
        hits.sort_by(|a, b| b.score.total_cmp(&a.score));
        Ok(hits)
    }

    /// The chunks of several files in one query, by path (each sorted by line).
    pub async fn chunks_of_paths(&self, paths: &[String]) -> Result<HashMap<String, Vec<Hit>>, IndexError> {
        let mut out: HashMap<String, Vec<Hit>> = HashMap::new();
        if paths.is_empty() {
            return Ok(out);
        }
        let batches = self
            .collect(self.table.query().only_if(in_list("path", paths)).select(Select::columns(&HIT_COLUMNS)))
            .await?;
        for h in self.hits(&batches, "", |s| s)? {
            out.entry(h.path.clone()).or_default().push(h);
        }
        for hits in out.values_mut() {
            hits.sort_by_key(|h| h.start_line);
        }
        Ok(out)
    }

    /// Line ranges, ids and vectors of the chunks of `path` that have a vector (one query
    /// through the `path` B-tree), by start line.
    pub async fn chunk_vectors_of(&self, path: &str) -> Result<Vec<ChunkVector>, IndexError> {
        let filter = format!("path = {} AND model != {}", sql_str(path), sql_str(NO_MODEL));
        let query = self.table.query().only_if(filter).select(Select::columns(&[
            "chunk_id",
            "start_line",
            "end_line",
            "vector",
        ]));
        let mut out = Vec::new();
        for batch in &self.collect(query).await? {
            let ids = str_col(batch, "chunk_id", &self.uri)?;
            let starts = typed_col::<UInt32Array>(batch, "start_line", &self.uri)?;
            let ends = typed_col::<UInt32Array>(batch, "end_line", &self.uri)?;
            let vectors = typed_col::<FixedSizeListArray>(batch, "vector", &self.uri)?;
            for i in 0..batch.num_rows() {
                out.push(ChunkVector {
                    chunk_id: ids.value(i).to_string(),
                    start_line: starts.value(i),
                    end_line: ends.value(i),
                    vector: vector_at(vectors, i, &self.uri)?,
                });
            }
        }
        out.sort_by_key(|c| c.start_line);
        Ok(out)
    }

    /// Definitions whose name, symbol or qualified name is any of `names`, in one query.
    pub async fn symbols_named_any(&self, names: &[String], limit: usize) -> Result<Vec<SymbolRow>, IndexError> {
        let Some(table) = &self.symbols else { return Ok(Vec::new()) };
        if names.is_empty() {
            return Ok(Vec::new());
        }
        let filter = ["name", "symbol", "qualified_name"].map(|c| in_list(c, names)).join(" OR ");
        let batches = self.collect(table.query().only_if(filter).limit(limit)).await?;
        Ok(batches.iter().flat_map(batch_to_symbols).collect())
    }

    /// All chunks of one file, in line order.
    pub async fn chunks_of(&self, path: &str) -> Result<Vec<Hit>, IndexError> {
        Ok(self.chunks_of_paths(&[path.to_string()]).await?.remove(path).unwrap_or_default())
    }

    /// Every indexed file with its language and number of chunks, sorted by path (for
    /// overviews; reads two string columns only).
    pub async fn files(&self) -> Result<Vec<(String, String, usize)>, IndexError> {
        let batches = self.collect(self.table.query().select(Select::columns(&["path", "language"]))).await?;
        let mut files: std::collections::BTreeMap<String, (String, usize)> = std::collections::BTreeMap::new();
        for batch in &batches {
            let (paths, langs) = (str_col(batch, "path", &self.uri)?, str_col(batch, "language", &self.uri)?);
            for i in 0..batch.num_rows() {
                let e = files.entry(paths.value(i).to_string()).or_insert_with(|| (langs.value(i).to_string(), 0));
                e.1 += 1;
            }
        }
        Ok(files.into_iter().map(|(p, (l, n))| (p, l, n)).collect())
    }

    /// Up to `limit` top-level definitions (no parent) of the given kinds.
    pub async fn top_level_symbols(&self, kinds: &[&str], limit: usize) -> Result<Vec<SymbolRow>, IndexError> {
        let Some(table) = &self.symbols else { return Ok(Vec::new()) };
        let kinds = kinds.iter().map(|k| sql_str(k)).collect::<Vec<_>>().join(", ");
        let filter = format!("parent IS NULL AND kind IN ({kinds})");
        let batches = self.collect(table.query().only_if(filter).limit(limit)).await?;
        Ok(batches.iter().flat_map(batch_to_symbols).collect())
    }

    /// Every `(path, chunk_id, content_hash)` in the table, sorted (for comparing two indexes).
    pub async fn fingerprint(&self) -> Result<Vec<(String, String, String)>, IndexError> {
        let mut stream = self
            .table
            .query()
            .select(Select::columns(&["path", "chunk_id", "content_hash"]))
            .execute()
            .await
            .map_err(|e| self.lance(e))?;
        let mut out = Vec::new();
        while let Some(batch) = stream.try_next().await.map_err(|e| self.lance(e))? {
            let p = str_col(&batch, "path", &self.uri)?;
            let c = str_col(&batch, "chunk_id", &self.uri)?;
            let h = str_col(&batch, "content_hash", &self.uri)?;
            for i in 0..batch.num_rows() {
                out.push((p.value(i).to_string(), c.value(i).to_string(), h.value(i).to_string()));
            }
        }
        out.sort();
        Ok(out)
    }

    /// Vectors of the given chunks, by chunk id (chunks without a vector are left out).
    pub async fn vectors_of_chunks(&self, ids: &[String]) -> Result<HashMap<String, Vec<f32>>, IndexError> {
        self.vectors_keyed_by("chunk_id", &format!("model != {}", sql_str(NO_MODEL)), ids).await
    }

    /// Stored vectors under these embedding keys (`ctxd_models::embed_key`: the model and the
    /// exact text embedded), wherever they are (an older version of the same file, the same
    /// file on another branch): the embedding cache. `embed_key → vector`; empty for a table
    /// without keys.
    pub async fn vectors_for(&self, keys: &[String]) -> Result<HashMap<String, Vec<f32>>, IndexError> {
        if !self.keyed {
            return Ok(HashMap::new());
        }
        self.vectors_keyed_by(EMBED_KEY, &format!("model = {}", sql_str(&self.model_id)), keys).await
    }

    /// `key → vector` of the rows matching `filter` whose string column `key` is one of `keys`
    /// (the first row wins for a key held by several). Empty for an index without a model.
    async fn vectors_keyed_by(
        &self,
        key: &str,
        filter: &str,
        keys: &[String],
    ) -> Result<HashMap<String, Vec<f32>>, IndexError> {
        let mut out = HashMap::new();
        if self.model_id.is_empty() || self.model_id == NO_MODEL {
            return Ok(out);
        }
        for chunk in keys.chunks(512) {
            let filter = format!("{filter} AND {}", in_list(key, chunk));
            let query = self.table.query().only_if(filter).select(Select::columns(&[key, "vector"]));
            for batch in &self.collect(query).await? {
                let keys = str_col(batch, key, &self.uri)?;
                let vectors = typed_col::<FixedSizeListArray>(batch, "vector", &self.uri)?;
                for i in 0..batch.num_rows() {
                    if !out.contains_key(keys.value(i)) {
                        out.insert(keys.value(i).to_string(), vector_at(vectors, i, &self.uri)?);
                    }
                }
            }
        }
        Ok(out)
    }

    async fn collect(&self, query: impl ExecutableQuery) -> Result<Vec<RecordBatch>, IndexError> {
        query.execute().await.map_err(|e| self.lance(e))?.try_collect().await.map_err(|e| self.lance(e))
    }

    fn hits(&self, batches: &[RecordBatch], score_col: &str, f: impl Fn(f32) -> f32) -> Result<Vec<Hit>, IndexError> {
        let mut out = Vec::new();
        for batch in batches {
            let col = |name: &str| str_col(batch, name, &self.uri);
            let (ids, paths, langs, syms, kinds, contents) =
                (col("chunk_id")?, col("path")?, col("language")?, col("symbol")?, col("kind")?, col("content")?);
            let starts = typed_col::<UInt32Array>(batch, "start_line", &self.uri)?;
            let ends = typed_col::<UInt32Array>(batch, "end_line", &self.uri)?;
            let scores = batch.column_by_name(score_col).and_then(|c| c.as_any().downcast_ref::<Float32Array>());
            for i in 0..batch.num_rows() {
                let opt = |a: &StringArray| (!a.is_null(i)).then(|| a.value(i).to_string());
                out.push(Hit {
                    chunk_id: ids.value(i).to_string(),
                    path: paths.value(i).to_string(),
                    language: langs.value(i).to_string(),
                    symbol: opt(syms),
                    kind: opt(kinds),
                    start_line: starts.value(i),
                    end_line: ends.value(i),
                    content: contents.value(i).to_string(),
                    score: scores.map(|s| f(s.value(i))).unwrap_or(0.0),
                });
            }
        }
        Ok(out)
    }
}

/// Column `name` of `batch` as an array of type `T`, or a clear error naming it.
pub fn typed_col<'a, T: Array + 'static>(batch: &'a RecordBatch, name: &str, uri: &str) -> Result<&'a T, IndexError> {
    batch
        .column_by_name(name)
        .and_then(|c| c.as_any().downcast_ref::<T>())
        .ok_or_else(|| IndexError::Column { uri: uri.to_string(), column: name.into() })
}

fn str_col<'a>(batch: &'a RecordBatch, name: &str, uri: &str) -> Result<&'a StringArray, IndexError> {
    typed_col(batch, name, uri)
}

/// Row `i` of a `vector` column.
fn vector_at(vectors: &FixedSizeListArray, i: usize, uri: &str) -> Result<Vec<f32>, IndexError> {
    let row = vectors.value(i);
    let floats = row
        .as_any()
        .downcast_ref::<Float32Array>()
        .ok_or_else(|| IndexError::Column { uri: uri.to_string(), column: "vector".into() })?;
    Ok(floats.values().to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(path: &str, n: u32, content: &str, v: [f32; 4]) -> ChunkRow {
        let content_hash = format!("h-{content}");
        ChunkRow {
            chunk_id: format!("{path}#{n}#{content_hash}"),
            path: path.into(),
            language: "rust".into(),
            symbol: Some(format!("f{n}")),
            kind: Some("function".into()),
            start_line: n * 10 + 1,
            end_line: n * 10 + 5,
            content: content.into(),
            embed_key: format!("k-{content_hash}"),
            content_hash,
            file_hash: format!("file-{path}-{content}"),
            token_count: 3,
            vector: v.to_vec(),
            model: "m".into(),
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
        index.commit(commit(vec![part(0, "v1")], Some("v1"))).await.unwrap();
        assert_eq!(index.file_hashes().await.unwrap()["big.log"], "partial:v1", "not complete yet");
        index.commit(commit(vec![part(1, "v1")], None)).await.unwrap();
        index.finish_stream("big.log", "v1").await.unwrap();
        assert_eq!(index.file_hashes().await.unwrap()["big.log"], "v1");
        assert_eq!(index.chunks_of("big.log").await.unwrap().len(), 2);
        // Version 2: an interrupted attempt leaves one part; v1 still counts as complete.
        index.commit(commit(vec![part(0, "v2")], Some("v2"))).await.unwrap();
        assert_eq!(index.file_hashes().await.unwrap()["big.log"], "v1");
        // The retry starts over: the leftover part is dropped, not duplicated.
        index.commit(commit(vec![part(0, "v2")], Some("v2"))).await.unwrap();
        assert_eq!(index.chunks_of("big.log").await.unwrap().len(), 3, "v1's two rows + one v2 row");
        index.commit(commit(vec![part(1, "v2"), part(2, "v2")], None)).await.unwrap();
        index.finish_stream("big.log", "v2").await.unwrap();
        let rows = index.chunks_of("big.log").await.unwrap();
        assert_eq!(rows.len(), 3, "only v2's rows remain");
        assert!(rows.iter().all(|r| r.content.ends_with("v2")));
        assert_eq!(index.file_hashes().await.unwrap()["big.log"], "v2");
        // Replaced by a small (non-streamed) version: the stream record goes too.
        let small = row("big.log", 0, "small", [0.0, 1.0, 0.0, 0.0]);
        let hash = small.file_hash.clone();
        index
            .commit(CommitBatch { rows: vec![small], replace_paths: vec!["big.log".into()], ..Default::default() })
            .await
            .unwrap();
        assert_eq!(index.file_hashes().await.unwrap()["big.log"], hash);
        assert_eq!(index.chunks_of("big.log").await.unwrap().len(), 1);
        assert!(index.complete_streams().await.unwrap().is_empty());
    }

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
            ..Default::default()
        };
        index.commit(first.clone()).await.unwrap();
        // A retried batch does not duplicate symbols.
        index.commit(CommitBatch { replace_paths: vec!["a.rs".into(), "b.rs".into()], ..first }).await.unwrap();
        let exact = index.symbols_named("parse_config", false, 10).await.unwrap();
        assert_eq!(exact.len(), 1);
        assert_eq!(exact[0].signature, "fn parse_config()");
        assert_eq!(exact[0].doc.as_deref(), Some("does things"));
        assert_eq!(index.symbols_named("a::parse_args", false, 10).await.unwrap().len(), 1, "by qualified name");
        assert_eq!(index.symbols_named("parse", true, 10).await.unwrap().len(), 2, "by prefix");
        // a.rs loses parse_args, b.rs is deleted: their symbols go in the same commit.
        let second = CommitBatch {
            rows: vec![row("a.rs", 0, "parse", [1.0, 0.0, 0.0, 0.0])],
            replace_paths: vec!["a.rs".into()],
            delete_paths: vec!["b.rs".into()],
            symbols: vec![sym("a.rs", "parse_config", 1)],
            ..Default::default()
        };
        index.commit(second).await.unwrap();
        assert!(index.symbols_named("parse_args", false, 10).await.unwrap().is_empty());
        assert!(index.symbols_named("render", false, 10).await.unwrap().is_empty());
        assert_eq!(index.symbols_named("parse_config", false, 10).await.unwrap().len(), 1);
        // A read-only open sees the same table.
        let ro = Index::open(&uri).await.unwrap();
        assert_eq!(ro.symbols_named("parse", true, 10).await.unwrap().len(), 1);
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
        let s1 = index.commit(first).await.unwrap();
        assert_eq!((s1.inserted, s1.deleted), (3, 0));
        assert_eq!(index.stats().await.unwrap().rows, 3);
        let hits = index.fts_search("needle", 5).await.unwrap();
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].path, "b.rs");
        let near = index.vector_search(&[0.0, 0.9, 0.1, 0.0], 2).await.unwrap();
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
        let s2 = index.commit(second).await.unwrap();
        assert_eq!(s2.version, before + 1, "one version per commit");
        assert_eq!((s2.inserted, s2.deleted), (1, 2));
        let files = index.file_hashes().await.unwrap();
        assert_eq!(files.len(), 1);
        assert_eq!(index.chunks_of("a.rs").await.unwrap().len(), 2);
        // Rows written after the FTS index was built are searchable before optimisation.
        assert_eq!(index.fts_search("haystack", 5).await.unwrap().len(), 1);
        assert!(index.fts_search("needle", 5).await.unwrap().is_empty());
        index.optimize_indices().await.unwrap();
        assert_eq!(index.fts_search("haystack", 5).await.unwrap().len(), 1);

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
        let s3 = index.commit(again).await.unwrap();
        assert_eq!((s3.inserted, s3.deleted), (0, 0));

        // Another model or dimension is refused; read-only open finds the model.
        assert!(matches!(Index::open_or_create(&uri, "other", 4).await, Err(IndexError::ModelMismatch { .. })));
        assert!(matches!(Index::open_or_create(&uri, "m", 8).await, Err(IndexError::ModelMismatch { .. })));
        let ro = Index::open(&uri).await.unwrap();
        assert_eq!((ro.model_id(), ro.dim()), ("m", 4));
        assert!(matches!(ro.vector_search(&[1.0], 1).await, Err(IndexError::Dimension { .. })));
    }

    #[tokio::test]
    async fn missing_index_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let uri = dir.path().join("nothing").to_string_lossy().into_owned();
        let err = Index::open(&uri).await.err().expect("no index there");
        assert!(err.to_string().contains("ctxd index"), "{err}");
    }

    #[test]
    fn sql_strings_are_quoted() {
        assert_eq!(sql_str("it's"), "'it''s'");
        assert_eq!(in_list("path", &["a".into(), "b'c".into()]), "path IN ('a', 'b''c')");
    }
}
