//! Reads of the chunks and symbols tables other than search: the incremental state (which
//! files are indexed with which hash, streamed files included), chunk ids and duplicates,
//! whole-table scans, file overviews and fingerprints, row counts, and symbol definitions by
//! name or kind.

use std::collections::HashMap;

use arrow_array::RecordBatch;
use futures::{StreamExt, TryStreamExt};
use lancedb::query::{ExecutableQuery, QueryBase, Select};

use crate::columns::str_col;
use crate::edges::{batch_to_edges, EdgeRow};
use crate::metrics as m;
use crate::sql::{in_list, sql_str};
use crate::streams::{self, PARTIAL_PREFIX};
use crate::symbols::{batch_to_symbols, SymbolRow};
use crate::{error::IndexError, store::Index};

/// Size facts about the table.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct IndexStats {
    pub rows: usize,
    pub version: u64,
}

impl Index {
    /// `path → hash` of the streamed files recorded complete.
    pub(crate) async fn complete_streams(&self) -> Result<HashMap<String, String>, IndexError> {
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

    /// The table's columns but what its model made (`vector`, `late`).
    pub(crate) async fn columns_without_vectors(&self) -> Result<Vec<String>, IndexError> {
        let schema = self.schema().await?;
        let names = schema.fields().iter().map(|f| f.name().clone());
        Ok(names.filter(|n| n != "vector" && n != crate::schema::LATE).collect())
    }

    /// Symbol rows matching `filter` within this view's scope, at most `limit`.
    async fn symbols_where(
        &self,
        table: &lancedb::Table,
        filter: String,
        limit: Option<usize>,
    ) -> Result<Vec<SymbolRow>, IndexError> {
        let mut query = table.query().only_if(self.within(Some(filter)).unwrap_or_default());
        if let Some(limit) = limit {
            query = query.limit(limit);
        }
        let batches = self.collect(query).await?;
        Ok(batches.iter().flat_map(batch_to_symbols).filter_map(|s| self.shown(s, |s| &mut s.path)).collect())
    }
}

/// The symbol and edge tables: definitions by name, path or kind, every edge, and the code graph's
/// versions.
///
/// Made by [`Index::symbols`]; it borrows the handle (and so its view: scope, pinned version).
#[derive(Clone, Copy)]
pub struct SymbolReads<'a> {
    pub(crate) index: &'a Index,
}

impl Index {
    /// The symbol and edge tables: see [`SymbolReads`].
    pub fn symbols(&self) -> SymbolReads<'_> {
        SymbolReads { index: self }
    }
}

impl SymbolReads<'_> {
    /// Definitions whose name, symbol or qualified name is `name` (exact), or, with
    /// `prefix`, starts with it. At most `limit` rows.
    pub async fn symbols_named(self, name: &str, prefix: bool, limit: usize) -> Result<Vec<SymbolRow>, IndexError> {
        if !prefix {
            return self.symbols_named_any(&[name.to_string()], limit).await;
        }
        let Some(table) = &self.index.symbols else { return Ok(Vec::new()) };
        let like = sql_str(&format!("{}%", name.replace('%', "")));
        let filter = format!("name LIKE {like} OR symbol LIKE {like} OR qualified_name LIKE {like}");
        self.index.symbols_where(table, filter, Some(limit)).await
    }

    /// Definitions whose name, symbol or qualified name is any of `names`, in one query.
    pub async fn symbols_named_any(self, names: &[String], limit: usize) -> Result<Vec<SymbolRow>, IndexError> {
        let Some(table) = &self.index.symbols else { return Ok(Vec::new()) };
        if names.is_empty() {
            return Ok(Vec::new());
        }
        let filter = ["name", "symbol", "qualified_name"].map(|c| in_list(c, names)).join(" OR ");
        self.index.symbols_where(table, filter, Some(limit)).await
    }

    /// Every definition in the files `paths` (a file's outline), in one query.
    pub async fn symbols_in_paths(self, paths: &[String]) -> Result<Vec<SymbolRow>, IndexError> {
        let Some(table) = &self.index.symbols else { return Ok(Vec::new()) };
        if paths.is_empty() {
            return Ok(Vec::new());
        }
        let (stored, answers) = self.index.stored_paths(paths);
        let rows = self.index.symbols_where(table, in_list("path", &stored), None).await?;
        Ok(rows
            .into_iter()
            .filter_map(|mut s| {
                s.path = answers.answer(&s.path)?.1;
                Some(s)
            })
            .collect())
    }

    /// Up to `limit` top-level definitions (no parent) of the given kinds.
    pub async fn top_level_symbols(self, kinds: &[&str], limit: usize) -> Result<Vec<SymbolRow>, IndexError> {
        let Some(table) = &self.index.symbols else { return Ok(Vec::new()) };
        let kinds = kinds.iter().map(|k| sql_str(k)).collect::<Vec<_>>().join(", ");
        let filter = format!("parent IS NULL AND kind IN ({kinds})");
        self.index.symbols_where(table, filter, Some(limit)).await
    }

    /// Every definition in the index (the code graph's nodes; empty for an older index).
    pub async fn all_symbols(self) -> Result<Vec<SymbolRow>, IndexError> {
        let Some(table) = &self.index.symbols else { return Ok(Vec::new()) };
        let batches = self.index.scoped_rows(table).await?;
        Ok(batches.iter().flat_map(batch_to_symbols).filter_map(|s| self.index.shown(s, |s| &mut s.path)).collect())
    }

    /// Every stored edge of the code graph (empty for an index written before the graph).
    pub async fn all_edges(self) -> Result<Vec<EdgeRow>, IndexError> {
        let Some(table) = &self.index.edges else { return Ok(Vec::new()) };
        let batches = self.index.scoped_rows(table).await?;
        Ok(batches.iter().flat_map(batch_to_edges).filter_map(|e| self.index.shown(e, |e| &mut e.path)).collect())
    }

    /// `(chunks, symbols, edges)` versions of this handle: what a cache of the graph is keyed by.
    pub async fn graph_versions(self) -> Result<(u64, u64, u64), IndexError> {
        let mut side = [0u64; 2];
        for (slot, table) in side.iter_mut().zip([&self.index.symbols, &self.index.edges]) {
            if let Some(t) = table {
                *slot = t.version().await.map_err(|e| self.index.lance(e))?;
            }
        }
        Ok((self.index.version().await?, side[0], side[1]))
    }

    /// Files to chunk again to build the code graph of an index written before it existed: when
    /// the edges table is empty but definitions exist, every file that has definitions (else
    /// none). An interrupted backfill is not resumed (the edges table is no longer empty);
    /// `ctxd index` of a fresh database builds everything.
    pub async fn paths_missing_graph(self) -> Result<std::collections::HashSet<String>, IndexError> {
        let (Some(symbols), Some(edges)) = (&self.index.symbols, &self.index.edges) else {
            return Ok(Default::default());
        };
        if edges.count_rows(None).await.map_err(|e| self.index.lance(e))? > 0 {
            return Ok(Default::default());
        }
        let paths = |batches: Vec<RecordBatch>| -> Result<std::collections::HashSet<String>, IndexError> {
            let mut out = std::collections::HashSet::new();
            for b in &batches {
                let col = str_col(b, "path", &self.index.uri)?;
                out.extend((0..b.num_rows()).map(|i| col.value(i).to_string()));
            }
            Ok(out)
        };
        paths(self.index.collect(symbols.query().select(Select::columns(&["path"]))).await?)
    }
}

/// Reads of the chunks table in the view's scope: searches, rows by path, scans, ids, hashes,
/// counts and the stamp a cached answer is keyed by.
///
/// Made by [`Index::reads`]; it borrows the handle (and so its view: scope, pinned version).
#[derive(Clone, Copy)]
pub struct Reads<'a> {
    pub(crate) index: &'a Index,
}

impl Index {
    /// Reads of the chunks table in the view's scope: see [`Reads`].
    pub fn reads(&self) -> Reads<'_> {
        Reads { index: self }
    }
}

impl Reads<'_> {
    /// The ref overlays' cache of this handle: what records an overlay through it (a git
    /// source of the same process) makes the handle's views see it at once.
    pub fn overlay_cache(self) -> std::sync::Arc<crate::overlay::OverlayCache> {
        self.index.overlays.clone()
    }

    /// `path → file_hash` of every indexed file: the incremental state, read from the index.
    /// A streamed file whose rows are all `partial:<hash>` maps to `<hash>` when the streams
    /// table says it is complete, else to `partial:<hash>` (never equal to a real hash, so it
    /// is indexed again).
    pub async fn file_hashes(self) -> Result<HashMap<String, String>, IndexError> {
        let complete = self.index.complete_streams().await?;
        let mut stream = self
            .index
            .table
            .query()
            .select(Select::columns(&["path", "file_hash"]))
            .execute()
            .await
            .map_err(|e| self.index.lance(e))?;
        let mut out: HashMap<String, String> = HashMap::new();
        while let Some(batch) = stream.try_next().await.map_err(|e| self.index.lance(e))? {
            let paths = str_col(&batch, "path", &self.index.uri)?;
            let hashes = str_col(&batch, "file_hash", &self.index.uri)?;
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

    /// Every `chunk_id` in the table (at its version). One column is read.
    pub async fn chunk_ids(self) -> Result<std::collections::HashSet<String>, IndexError> {
        Ok(self.chunk_ids_and_duplicates().await?.0)
    }

    /// Every `chunk_id` in the table, and those held by more than one row (none, unless two
    /// jobs appended the same rows), sorted. One scan of one column.
    pub async fn chunk_ids_and_duplicates(
        self,
    ) -> Result<(std::collections::HashSet<String>, Vec<String>), IndexError> {
        let batches = self.index.collect(self.index.table.query().select(Select::columns(&["chunk_id"]))).await?;
        let mut ids = std::collections::HashSet::new();
        let mut twice = std::collections::BTreeSet::new();
        for b in &batches {
            for id in str_col(b, "chunk_id", &self.index.uri)?.iter().flatten() {
                if !ids.insert(id.to_string()) {
                    twice.insert(id.to_string());
                }
            }
        }
        Ok((ids, twice.into_iter().collect()))
    }

    /// Every row without what its model made (the columns of `chunks_schema` but `vector` and
    /// `late`), as a stream of record batches; only rows whose id is in `only` when given.
    pub async fn scan_without_vectors(
        self,
        only: Option<&[String]>,
    ) -> Result<futures::stream::BoxStream<'static, Result<RecordBatch, IndexError>>, IndexError> {
        let columns = self.index.columns_without_vectors().await?;
        let mut query = self.index.table.query().select(Select::columns(&columns));
        if let Some(ids) = only {
            query = query.only_if(in_list("chunk_id", ids));
        }
        let stream = query.execute().await.map_err(|e| self.index.lance(e))?;
        let uri = self.index.uri.clone();
        Ok(stream.map_err(move |source| IndexError::Lance { uri: uri.clone(), source }).boxed())
    }

    /// Every row of the table (at its version; of this view's sources), as a stream of record
    /// batches; `vector` included. For Arrow Flight and exports.
    pub async fn scan(
        self,
    ) -> Result<futures::stream::BoxStream<'static, Result<RecordBatch, IndexError>>, IndexError> {
        let mut query = self.index.table.query();
        if let Some(scope) = self.index.within(None) {
            query = query.only_if(scope);
        }
        let stream = query.execute().await.map_err(|e| self.index.lance(e))?;
        let uri = self.index.uri.clone();
        let view = self.index.scoped_copy();
        let stream = stream.map_err(move |source| IndexError::Lance { uri: uri.clone(), source });
        // The exact check of the scope (its filter is a superset: see `crate::scope`), base
        // rows an overlay reads shown under its view.
        Ok(stream
            .map(move |batch| match (&view, batch) {
                (Some(view), Ok(b)) => crate::columns::show_rows(&b, |p| view.show(p)),
                (_, other) => other,
            })
            .boxed())
    }

    /// Row count (of this view's sources) and version.
    pub async fn stats(self) -> Result<IndexStats, IndexError> {
        let rows = self.index.table.count_rows(self.index.within(None)).await.map_err(|e| self.index.lance(e))?;
        let version = self.index.version().await?;
        if self.index.scope.is_none() {
            metrics::gauge!(m::INDEX_ROWS).set(rows as f64);
            metrics::gauge!(m::INDEX_VERSION).set(version as f64);
            // Fragments too (from the manifest in memory), so the gauge follows a stream of
            // commits between maintenance passes.
            if let Some(dataset) = self.index.table.dataset() {
                let fragments = dataset.get().await.map_err(|e| self.index.lance(e))?.count_fragments();
                metrics::gauge!(m::INDEX_FRAGMENTS).set(fragments as f64);
            }
        }
        Ok(IndexStats { rows, version })
    }

    /// Every indexed file with its language and number of chunks, sorted by path (for
    /// overviews; reads two string columns only).
    pub async fn files(self) -> Result<Vec<(String, String, usize)>, IndexError> {
        let mut query = self.index.table.query().select(Select::columns(&["path", "language"]));
        if let Some(scope) = self.index.within(None) {
            query = query.only_if(scope);
        }
        let batches = self.index.collect(query).await?;
        let mut files: std::collections::BTreeMap<String, (String, usize)> = std::collections::BTreeMap::new();
        for batch in &batches {
            let (paths, langs) =
                (str_col(batch, "path", &self.index.uri)?, str_col(batch, "language", &self.index.uri)?);
            for i in 0..batch.num_rows() {
                let Some(path) = self.index.show(paths.value(i)) else { continue };
                let e = files.entry(path.into_owned()).or_insert_with(|| (langs.value(i).to_string(), 0));
                e.1 += 1;
            }
        }
        Ok(files.into_iter().map(|(p, (l, n))| (p, l, n)).collect())
    }

    /// Every `(path, chunk_id, content_hash)` in the table, sorted (for comparing two indexes).
    pub async fn fingerprint(self) -> Result<Vec<(String, String, String)>, IndexError> {
        let mut stream = self
            .index
            .table
            .query()
            .select(Select::columns(&["path", "chunk_id", "content_hash"]))
            .execute()
            .await
            .map_err(|e| self.index.lance(e))?;
        let mut out = Vec::new();
        while let Some(batch) = stream.try_next().await.map_err(|e| self.index.lance(e))? {
            let p = str_col(&batch, "path", &self.index.uri)?;
            let c = str_col(&batch, "chunk_id", &self.index.uri)?;
            let h = str_col(&batch, "content_hash", &self.index.uri)?;
            for i in 0..batch.num_rows() {
                out.push((p.value(i).to_string(), c.value(i).to_string(), h.value(i).to_string()));
            }
        }
        out.sort();
        Ok(out)
    }
}
