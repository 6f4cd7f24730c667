//! Reads of stored vectors: a file's chunks with their vectors (completion's neighbours), the
//! vectors of given chunks, and the embedding cache — vectors under their embedding keys.

use std::collections::HashMap;

use arrow_array::{FixedSizeListArray, UInt32Array};
use lancedb::query::{QueryBase, Select};

use crate::columns::{str_col, typed_col, vector_at};
use crate::schema::EMBED_KEY;
use crate::sql::{in_list, sql_str};
use crate::{error::IndexError, store::Index, NO_MODEL};

/// A chunk's place and stored vector ([`Index::chunk_vectors_of`]).
#[derive(Debug, Clone)]
pub struct ChunkVector {
    pub chunk_id: String,
    pub start_line: u32,
    pub end_line: u32,
    pub vector: Vec<f32>,
}

impl Index {
    /// Line ranges, ids and vectors of the chunks of `path` that have a vector (one query
    /// through the `path` B-tree), by start line.
    pub async fn chunk_vectors_of(&self, path: &str) -> Result<Vec<ChunkVector>, IndexError> {
        // A file an overlay view shares is stored under its base's path.
        let (stored, _) = self.stored_paths(&[path.to_string()]);
        let filter = format!("{} AND model != {}", crate::sql::in_list("path", &stored), sql_str(NO_MODEL));
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
}
