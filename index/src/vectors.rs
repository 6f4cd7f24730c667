//! Reads of stored vectors: a file's chunks with their vectors (completion's neighbours), the
//! vectors of given chunks, and the embedding cache — vectors under their embedding keys — with
//! the late-interaction codes stored beside them, by embedding key too.
//!
//! The embedding cache's reads ([`Vectors::embeddings_for`], [`Vectors::late_for`]) are not filtered by
//! a view's scope: a key names a model and a text, so a row of any source, ref or path holds the
//! same vector and codes.

use std::collections::HashMap;

use arrow_array::{Array, BinaryArray, FixedSizeListArray, RecordBatch, UInt32Array};
use lancedb::query::{QueryBase, Select};

use crate::columns::{str_col, typed_col, vector_at};
use crate::schema::{EMBED_KEY, LATE};
use crate::sql::{in_list, sql_str};
use crate::{error::IndexError, store::Index, NO_MODEL};

/// What the embedding cache holds under one key ([`Vectors::embeddings_for`]): the vector and the
/// late-interaction codes stored with it (empty where the row has none, or none were asked).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StoredEmbedding {
    pub vector: Vec<f32>,
    pub late: Vec<u8>,
}

/// A chunk's place and stored vector ([`Vectors::chunk_vectors_of`]).
#[derive(Debug, Clone)]
pub struct ChunkVector {
    pub chunk_id: String,
    pub start_line: u32,
    pub end_line: u32,
    pub vector: Vec<f32>,
}

impl Index {
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
        for batch in &self.rows_keyed_by(key, filter, keys, &[key, "vector"]).await? {
            let keys = str_col(batch, key, &self.uri)?;
            let vectors = typed_col::<FixedSizeListArray>(batch, "vector", &self.uri)?;
            for i in 0..batch.num_rows() {
                if !out.contains_key(keys.value(i)) {
                    out.insert(keys.value(i).to_string(), vector_at(vectors, i, &self.uri)?);
                }
            }
        }
        Ok(out)
    }

    /// `columns` of the rows matching `filter` whose string column `key` is one of `keys`, in
    /// queries of 512 keys (an `IN` list the B-tree on `key` answers), batches in query order.
    async fn rows_keyed_by(
        &self,
        key: &str,
        filter: &str,
        keys: &[String],
        columns: &[&str],
    ) -> Result<Vec<RecordBatch>, IndexError> {
        let mut batches = Vec::new();
        for chunk in keys.chunks(512) {
            let filter = format!("{filter} AND {}", in_list(key, chunk));
            batches.extend(self.collect(self.table.query().only_if(filter).select(Select::columns(columns))).await?);
        }
        Ok(batches)
    }
}

/// The stored vectors and token codes: by chunk, by file, by embedding key, and a re-embedding
/// shard's share of rows.
///
/// Made by [`Index::vectors`]; it borrows the handle (and so its view: scope, pinned version).
#[derive(Clone, Copy)]
pub struct Vectors<'a> {
    pub(crate) index: &'a Index,
}

impl Index {
    /// The stored vectors and token codes: see [`Vectors`].
    pub fn vectors(&self) -> Vectors<'_> {
        Vectors { index: self }
    }
}

impl Vectors<'_> {
    /// Line ranges, ids and vectors of the chunks of `path` that have a vector (one query
    /// through the `path` B-tree), by start line.
    pub async fn chunk_vectors_of(self, path: &str) -> Result<Vec<ChunkVector>, IndexError> {
        // A file an overlay view shares is stored under its base's path.
        let (stored, _) = self.index.stored_paths(&[path.to_string()]);
        let filter = format!("{} AND model != {}", crate::sql::in_list("path", &stored), sql_str(NO_MODEL));
        let query = self.index.table.query().only_if(filter).select(Select::columns(&[
            "chunk_id",
            "start_line",
            "end_line",
            "vector",
        ]));
        let mut out = Vec::new();
        for batch in &self.index.collect(query).await? {
            let ids = str_col(batch, "chunk_id", &self.index.uri)?;
            let starts = typed_col::<UInt32Array>(batch, "start_line", &self.index.uri)?;
            let ends = typed_col::<UInt32Array>(batch, "end_line", &self.index.uri)?;
            let vectors = typed_col::<FixedSizeListArray>(batch, "vector", &self.index.uri)?;
            for i in 0..batch.num_rows() {
                out.push(ChunkVector {
                    chunk_id: ids.value(i).to_string(),
                    start_line: starts.value(i),
                    end_line: ends.value(i),
                    vector: vector_at(vectors, i, &self.index.uri)?,
                });
            }
        }
        out.sort_by_key(|c| c.start_line);
        Ok(out)
    }

    /// Each file's vector: the unit mean of its chunks' stored vectors (files of this view's
    /// sources with at least one vector), by path — what a query adapter is fitted toward.
    pub async fn file_vectors(self) -> Result<HashMap<String, Vec<f32>>, IndexError> {
        let own = format!("model != {}", sql_str(NO_MODEL));
        let filter = self.index.within(Some(own.clone())).unwrap_or(own);
        let query = self.index.table.query().only_if(filter).select(Select::columns(&["path", "vector"]));
        let mut sums: HashMap<String, Vec<f32>> = HashMap::new();
        for batch in &self.index.collect(query).await? {
            let paths = str_col(batch, "path", &self.index.uri)?;
            let vectors = typed_col::<FixedSizeListArray>(batch, "vector", &self.index.uri)?;
            for i in 0..batch.num_rows() {
                if !self.index.sees(paths.value(i)) {
                    continue;
                }
                let v = vector_at(vectors, i, &self.index.uri)?;
                let sum = sums.entry(paths.value(i).to_string()).or_insert_with(|| vec![0.0; v.len()]);
                sum.iter_mut().zip(&v).for_each(|(s, x)| *s += x);
            }
        }
        for v in sums.values_mut() {
            let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
            if norm > 0.0 {
                v.iter_mut().for_each(|x| *x /= norm);
            }
        }
        Ok(sums)
    }

    /// Vectors of the given chunks, by chunk id (chunks without a vector are left out).
    pub async fn vectors_of_chunks(self, ids: &[String]) -> Result<HashMap<String, Vec<f32>>, IndexError> {
        self.index.vectors_keyed_by("chunk_id", &format!("model != {}", sql_str(NO_MODEL)), ids).await
    }

    /// The embedding cache: what is stored under these embedding keys (`ctxd_models::embed_key`:
    /// the model and the exact text embedded), wherever it is (an older version of the same
    /// file, the same file on another branch), in one read through the `embed_key` B-tree —
    /// `embed_key → vector`, with the late-interaction codes where `late` asks for them and a
    /// row holds some (empty otherwise; a key held by several rows takes one with codes first).
    /// Empty for a table without keys.
    pub async fn embeddings_for(
        self,
        keys: &[String],
        late: bool,
    ) -> Result<HashMap<String, StoredEmbedding>, IndexError> {
        let mut out: HashMap<String, StoredEmbedding> = HashMap::new();
        if !self.index.keyed || self.index.model_id.is_empty() || self.index.model_id == NO_MODEL {
            return Ok(out);
        }
        let late = late && self.index.has_late;
        let mut columns = vec![EMBED_KEY, "vector"];
        columns.extend(late.then_some(LATE));
        let filter = format!("model = {}", sql_str(&self.index.model_id));
        for batch in &self.index.rows_keyed_by(EMBED_KEY, &filter, keys, &columns).await? {
            let keys = str_col(batch, EMBED_KEY, &self.index.uri)?;
            let vectors = typed_col::<FixedSizeListArray>(batch, "vector", &self.index.uri)?;
            let codes = match late {
                true => Some(typed_col::<BinaryArray>(batch, LATE, &self.index.uri)?),
                false => None,
            };
            for i in 0..batch.num_rows() {
                let code = codes.filter(|c| c.is_valid(i)).map(|c| c.value(i)).unwrap_or_default();
                match out.get_mut(keys.value(i)) {
                    Some(had) if had.late.is_empty() && !code.is_empty() => had.late = code.to_vec(),
                    Some(_) => {}
                    None => {
                        let stored =
                            StoredEmbedding { vector: vector_at(vectors, i, &self.index.uri)?, late: code.to_vec() };
                        out.insert(keys.value(i).to_string(), stored);
                    }
                }
            }
        }
        Ok(out)
    }

    /// Stored late-interaction codes (`ctxd_models::late`) under these embedding keys, as
    /// [`Vectors::embeddings_for`] finds vectors: `embed_key → codes` of this index's model, through
    /// the `embed_key` B-tree (rescoring's read: codes alone). Rows without codes (null or empty)
    /// are left out; empty for a table without keys or without the `late` column, and for an
    /// index without a model.
    pub async fn late_for(self, keys: &[String]) -> Result<HashMap<String, Vec<u8>>, IndexError> {
        let mut out = HashMap::new();
        if !self.index.keyed
            || !self.index.has_late
            || self.index.model_id.is_empty()
            || self.index.model_id == NO_MODEL
        {
            return Ok(out);
        }
        let filter = format!("model = {} AND {LATE} IS NOT NULL", sql_str(&self.index.model_id));
        for batch in &self.index.rows_keyed_by(EMBED_KEY, &filter, keys, &[EMBED_KEY, LATE]).await? {
            let keys = str_col(batch, EMBED_KEY, &self.index.uri)?;
            let codes = typed_col::<BinaryArray>(batch, LATE, &self.index.uri)?;
            for i in 0..batch.num_rows() {
                if codes.is_valid(i) && !codes.value(i).is_empty() && !out.contains_key(keys.value(i)) {
                    out.insert(keys.value(i).to_string(), codes.value(i).to_vec());
                }
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use crate::schema::{rows_to_batch, ChunkRow, Vectorless, LATE};
    use crate::testing::row;
    use crate::{store::Index, writer::CommitBatch, NO_MODEL};

    #[tokio::test]
    async fn late_codes_are_read_back_by_embedding_key_in_every_view() {
        let tmp = tempfile::tempdir().unwrap();
        let uri = tmp.path().join("db").to_string_lossy().into_owned();
        let index = Index::open_or_create(&uri, "m", 8).await.unwrap();
        let text_only = ChunkRow { vector: Vec::new(), model: NO_MODEL.into(), late: vec![9], ..row(2) };
        let rows = vec![ChunkRow { late: vec![1, 2, 3], ..row(0) }, row(1), text_only];
        // A row without codes, or without a vector, stores a null.
        let batch = rows_to_batch(&rows, 8, false, Vectorless::Null).unwrap();
        let late = batch.column_by_name(LATE).unwrap();
        assert_eq!((late.is_valid(0), late.is_valid(1), late.is_valid(2)), (true, false, false));
        index.writes().commit(CommitBatch { rows, ..Default::default() }).await.unwrap();
        let keys: Vec<String> = ["k0", "k1", "k2", "k9"].map(String::from).into();
        let expected = std::collections::HashMap::from([("k0".to_string(), vec![1u8, 2, 3])]);
        assert_eq!(index.vectors().late_for(&keys).await.unwrap(), expected);
        // A view of other sources reads the same cache: a key is a model and a text.
        let scoped = index.scoped(Some(crate::scope::SourceScope::new(["elsewhere"]))).await.unwrap();
        assert_eq!(scoped.vectors().late_for(&keys).await.unwrap(), expected);
        assert_eq!(Index::open(&uri).await.unwrap().vectors().late_for(&keys).await.unwrap(), expected, "read-only");
        // The embedding cache's one read: vectors of every key with a vector, codes where asked.
        let cached = index.vectors().embeddings_for(&keys, true).await.unwrap();
        assert_eq!(cached.len(), 2, "{cached:?}");
        assert_eq!((cached["k0"].late.as_slice(), cached["k1"].late.as_slice()), (&[1u8, 2, 3][..], &[][..]));
        assert_eq!(cached["k0"].vector, row(0).vector);
        let plain = index.vectors().embeddings_for(&keys, false).await.unwrap();
        assert!(plain.values().all(|e| e.late.is_empty()) && plain.len() == 2, "{plain:?}");
    }
}
