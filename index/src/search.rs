//! Queries that answer with [`Hit`]s: nearest chunks to a vector (cosine), best BM25 matches
//! in chunk contents, and the chunks of given files.

use std::collections::HashMap;
use std::sync::atomic::Ordering;

use arrow_array::{Array, Float32Array, RecordBatch, StringArray, UInt32Array};
use lancedb::index::scalar::FullTextSearchQuery;
use lancedb::query::{QueryBase, Select};
use lancedb::DistanceType;

use crate::columns::{str_col, typed_col};
use crate::reader::Reads;
use crate::sql::{in_list, sql_str};
use crate::{error::IndexError, record::Chunk, record::Hit, store::Index, NO_MODEL};

/// How a vector search visits the vector index (IVF partitions, an HNSW graph over 8-bit codes
/// in each; `maintenance.rs` builds it). Measured against exact search by `ctxd bench
/// --vector-recall` (BENCHMARKS.md "The vector index: probes and refine").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Probes {
    /// IVF partitions visited, always as many (`None`: Lance's adaptive default, which visits
    /// more while too few rows are found).
    pub nprobes: Option<usize>,
    /// Re-rank `k × refine` candidates by their full vectors (`None`: the 8-bit codes' order
    /// stands).
    pub refine: Option<u32>,
}

impl Probes {
    /// What searches use by default.
    pub const DEFAULT: Probes = Probes { nprobes: None, refine: None };
    /// Latency-bound callers (completion context): few partitions, no refine.
    pub const LEAN: Probes = Probes { nprobes: Some(6), refine: None };
}

const HIT_COLUMNS: [&str; 8] = ["chunk_id", "path", "language", "symbol", "kind", "start_line", "end_line", "content"];

impl Index {
    /// The hit columns (with `source` where the table has it) plus the score column of a search,
    /// if any (selected explicitly so LanceDB does not have to auto-project it).
    fn hit_columns(&self, score: Option<&'static str>) -> Vec<&'static str> {
        let mut cols = HIT_COLUMNS.to_vec();
        if self.has_source {
            cols.push(crate::schema::SOURCE);
        }
        cols.extend(score);
        cols
    }

    /// The vector search: through the vector index as `probes` says, or exact (`None`).
    async fn nearest(&self, vector: &[f32], k: usize, probes: Option<Probes>) -> Result<Vec<Hit>, IndexError> {
        if vector.len() != self.dim {
            return Err(IndexError::Dimension { expected: self.dim, got: vector.len() });
        }
        let mut query = self.table.query().nearest_to(vector).map_err(|e| self.lance(e))?;
        match probes {
            None => query = query.bypass_vector_index(),
            Some(Probes { nprobes, refine }) => {
                if let Some(n) = nprobes {
                    query = query.minimum_nprobes(n).map_err(|e| self.lance(e))?;
                    query = query.maximum_nprobes(Some(n)).map_err(|e| self.lance(e))?;
                }
                if let Some(r) = refine {
                    query = query.refine_factor(r);
                }
            }
        }
        let no_model = format!("model != {}", sql_str(NO_MODEL));
        let query =
            query.distance_type(DistanceType::Cosine).select(Select::columns(&self.hit_columns(Some("_distance"))));
        let query = match self.within(None) {
            // After the search, not before: a pre-filter reads the `model` column of every row
            // on each query (rows stored without a vector are zeros, which never rank near a
            // real query anyway).
            None => query.only_if(no_model).postfilter(),
            // A view of some sources filters first, so its `k` best are found however small
            // its sources are beside the others.
            Some(scope) => query.only_if(format!("{scope} AND {no_model}")),
        };
        let batches = self.collect(query.limit(k)).await?;
        let mut hits = self.hits(&batches, "_distance", |d| 1.0 - d)?;
        hits.sort_by(|a, b| b.score.total_cmp(&a.score));
        Ok(hits)
    }

    /// The rows of `batches` as hits, scored by `f` of column `score_col` (0 without it); rows
    /// outside the view's scope are dropped (see [`crate::scope`]).
    fn hits(&self, batches: &[RecordBatch], score_col: &str, f: impl Fn(f32) -> f32) -> Result<Vec<Hit>, IndexError> {
        let mut out = Vec::new();
        for batch in batches {
            let col = |name: &str| str_col(batch, name, &self.uri);
            let (ids, paths, langs, syms, kinds, contents) =
                (col("chunk_id")?, col("path")?, col("language")?, col("symbol")?, col("kind")?, col("content")?);
            let starts = typed_col::<UInt32Array>(batch, "start_line", &self.uri)?;
            let ends = typed_col::<UInt32Array>(batch, "end_line", &self.uri)?;
            let scores = batch.column_by_name(score_col).and_then(|c| c.as_any().downcast_ref::<Float32Array>());
            let sources =
                batch.column_by_name(crate::schema::SOURCE).and_then(|c| c.as_any().downcast_ref::<StringArray>());
            for i in 0..batch.num_rows() {
                // A base row read through an overlay shows under the overlay's view.
                let Some(path) = self.show(paths.value(i)) else { continue };
                let through = matches!(path, std::borrow::Cow::Owned(_));
                let opt = |a: &StringArray| (!a.is_null(i)).then(|| a.value(i).to_string());
                let chunk = Chunk {
                    chunk_id: ids.value(i).to_string(),
                    path: path.to_string(),
                    language: langs.value(i).to_string(),
                    symbol: opt(syms),
                    kind: opt(kinds),
                    start_line: starts.value(i),
                    end_line: ends.value(i),
                    content: contents.value(i).to_string(),
                    ..Chunk::default()
                };
                let mut chunk = chunk;
                let segment = match through {
                    true => Some(crate::record::source_of_path(&chunk.path).to_string()),
                    false => sources.and_then(opt),
                };
                if let Some(segment) = segment {
                    chunk.set_source(&segment);
                }
                out.push(Hit { chunk, score: scores.map(|s| f(s.value(i))).unwrap_or(0.0) });
            }
        }
        Ok(out)
    }
}

impl Reads<'_> {
    /// Nearest chunks to `vector` by cosine similarity ([`Probes::DEFAULT`]).
    pub async fn vector_search(self, vector: &[f32], k: usize) -> Result<Vec<Hit>, IndexError> {
        self.vector_search_with(vector, k, Probes::DEFAULT).await
    }

    /// [`Reads::vector_search`] visiting the vector index as `probes` says (ignored while the
    /// table has none: every vector is read then).
    pub async fn vector_search_with(self, vector: &[f32], k: usize, probes: Probes) -> Result<Vec<Hit>, IndexError> {
        self.index.nearest(vector, k, Some(probes)).await
    }

    /// The exact nearest chunks, every stored vector read (the vector index bypassed): what
    /// [`Probes`] settings are measured against (`ctxd bench --vector-recall`).
    pub async fn exact_vector_search(self, vector: &[f32], k: usize) -> Result<Vec<Hit>, IndexError> {
        self.index.nearest(vector, k, None).await
    }

    /// Best BM25 matches of `query` in chunk contents.
    pub async fn fts_search(self, query: &str, k: usize) -> Result<Vec<Hit>, IndexError> {
        if !self.index.fts_ready.load(Ordering::Acquire) || query.trim().is_empty() {
            return Ok(Vec::new());
        }
        let mut q = self
            .index
            .table
            .query()
            .full_text_search(FullTextSearchQuery::new(query.to_string()))
            .select(Select::columns(&self.index.hit_columns(Some("_score"))));
        if let Some(scope) = self.index.within(None) {
            q = q.only_if(scope);
        }
        let batches = self.index.collect(q.limit(k)).await?;
        let mut hits = self.index.hits(&batches, "_score", |s| s)?;
        hits.sort_by(|a, b| b.score.total_cmp(&a.score));
        Ok(hits)
    }

    /// The chunks of several files in one query, by path (each sorted by line).
    pub async fn chunks_of_paths(self, paths: &[String]) -> Result<HashMap<String, Vec<Hit>>, IndexError> {
        let mut out: HashMap<String, Vec<Hit>> = HashMap::new();
        if paths.is_empty() {
            return Ok(out);
        }
        let (stored, answers) = self.index.stored_paths(paths);
        let batches = self
            .index
            .collect(
                self.index
                    .table
                    .query()
                    .only_if(self.index.within(Some(in_list("path", &stored))).unwrap_or_default())
                    .select(Select::columns(&self.index.hit_columns(None))),
            )
            .await?;
        for mut h in self.index.hits(&batches, "", |s| s)? {
            let Some((asked, shown)) = answers.answer(&h.path) else { continue };
            if shown != h.path {
                h.chunk.set_source(crate::record::source_of_path(&shown));
                h.chunk.path = shown;
            }
            out.entry(asked).or_default().push(h);
        }
        for hits in out.values_mut() {
            hits.sort_by_key(|h| h.start_line);
        }
        Ok(out)
    }

    /// All chunks of one file, in line order.
    pub async fn chunks_of(self, path: &str) -> Result<Vec<Hit>, IndexError> {
        Ok(self.chunks_of_paths(&[path.to_string()]).await?.remove(path).unwrap_or_default())
    }
}
