//! The embed stage: chunks → vectors, through the model thread of [`EmbedService`].
//!
//! Many files are embedded in one request (the runtime hands this stage a batch capped by
//! chunk tokens), so short files share forward passes. Before embedding a file that is already
//! in the index, the vectors of its unchanged chunks (same content hash) are read back and
//! reused: editing one function re-embeds that function, not the file.

use std::collections::HashMap;
use std::sync::Arc;

use ctxd_index::{ChunkRow, Index};
use ctxd_models::EmbedService;

use crate::chunk::{chunk_id, Chunk, ChunkedFile};
use crate::metrics as m;
use crate::{FileState, StageError};

/// A file with one index row per chunk, vectors filled in.
#[derive(Debug, Clone)]
pub struct EmbeddedFile {
    pub rel: String,
    pub file_hash: String,
    pub rows: Vec<ChunkRow>,
    /// The file's definitions, for the symbol table.
    pub symbols: Vec<ctxd_index::SymbolRow>,
    /// Set for the parts of a streamed file.
    pub part: Option<crate::chunk::Part>,
}

/// The text the model sees for a chunk: a short header (path and symbol) and the content.
pub fn embedding_text(path: &str, chunk: &Chunk) -> String {
    match &chunk.symbol {
        Some(sym) => format!("{path} {sym}\n{}", chunk.content),
        None => format!("{path}\n{}", chunk.content),
    }
}

/// Embeds chunked files.
#[derive(Clone)]
pub struct Embed {
    service: Option<EmbedService>,
    index: Arc<Index>,
    state: FileState,
    vectors: bool,
}

/// The `model` value of rows stored without a vector (full-text-only sources).
pub const NO_MODEL: &str = ctxd_index::NO_MODEL;

impl Embed {
    /// An embed stage using `service`, reusing vectors from `index` for files in `state`.
    /// Without a service chunks are stored without vectors (see [`Embed::with_vectors`]).
    pub fn new(service: Option<EmbedService>, index: Arc<Index>, state: FileState) -> Self {
        let vectors = service.is_some();
        Self { service, index, state, vectors }
    }

    /// `false`: store chunks without vectors (zero vector, model [`NO_MODEL`]); only BM25
    /// finds them. Has no effect without a service.
    pub fn with_vectors(mut self, vectors: bool) -> Self {
        self.vectors = vectors && self.service.is_some();
        self
    }

    fn without_vectors(&self, files: Vec<ChunkedFile>) -> Vec<Result<EmbeddedFile, StageError>> {
        let dim = self.index.dim();
        let n: usize = files.iter().map(|f| f.chunks.len()).sum();
        metrics::counter!(m::EMBED_SKIPPED_CHUNKS_TOTAL).increment(n as u64);
        files
            .into_iter()
            .map(|mut file| {
                let rows = file.chunks.iter().map(|c| row(&file, c, vec![0.0; dim], NO_MODEL)).collect();
                Ok(EmbeddedFile {
                    rel: file.rel,
                    file_hash: file.file_hash,
                    rows,
                    symbols: std::mem::take(&mut file.symbols),
                    part: file.part,
                })
            })
            .collect()
    }

    /// Sum of chunk tokens of a file (the batching weight).
    pub fn weight(file: &ChunkedFile) -> usize {
        file.chunks.iter().map(|c| c.token_count as usize).sum::<usize>().max(1)
    }

    async fn cached_vectors(&self, file: &ChunkedFile) -> HashMap<String, Vec<f32>> {
        // Parts of a streamed file do not read back the (huge) previous version's vectors.
        if file.part.is_some() || self.state.get(&file.rel).is_none() {
            return HashMap::new();
        }
        match self.index.vectors_of(&file.rel).await {
            Ok(v) => v,
            Err(e) => {
                tracing::warn!("reading cached vectors of {}: {e}", file.rel);
                HashMap::new()
            }
        }
    }

    /// Embeds a batch of files in one model request; returns one result per file, in order.
    pub async fn embed_files(&self, files: Vec<ChunkedFile>) -> Vec<Result<EmbeddedFile, StageError>> {
        let Some(service) = self.service.as_ref().filter(|_| self.vectors) else {
            return self.without_vectors(files);
        };
        let mut caches = Vec::with_capacity(files.len());
        for f in &files {
            caches.push(self.cached_vectors(f).await);
        }
        let mut texts = Vec::new();
        let mut slots: Vec<(usize, usize)> = Vec::new();
        for (fi, (file, cache)) in files.iter().zip(&caches).enumerate() {
            for (ci, chunk) in file.chunks.iter().enumerate() {
                if !cache.contains_key(&chunk.content_hash) {
                    texts.push(embedding_text(&file.rel, chunk));
                    slots.push((fi, ci));
                }
            }
        }
        let hits: usize = files.iter().map(|f| f.chunks.len()).sum::<usize>() - texts.len();
        metrics::counter!(m::EMBED_CACHE_HITS_TOTAL).increment(hits as u64);
        metrics::counter!(m::EMBED_CACHE_MISSES_TOTAL).increment(texts.len() as u64);
        let count = texts.len();
        let vectors = match service.embed(texts).await {
            Ok(v) => v,
            Err(source) => {
                let paths = files.iter().map(|f| f.rel.as_str()).collect::<Vec<_>>().join(", ");
                let message = source.to_string();
                return files
                    .iter()
                    .map(|_| Err(StageError::Embed { paths: paths.clone(), count, message: message.clone() }))
                    .collect();
            }
        };
        metrics::counter!(m::EMBED_CHUNKS_TOTAL).increment(count as u64);
        let mut fresh: Vec<HashMap<usize, Vec<f32>>> = vec![HashMap::new(); files.len()];
        for ((fi, ci), v) in slots.into_iter().zip(vectors) {
            fresh[fi].insert(ci, v);
        }
        let model = service.model_id().to_string();
        files
            .into_iter()
            .zip(caches)
            .zip(fresh)
            .map(|((file, cache), mut fresh)| {
                let rows = file
                    .chunks
                    .iter()
                    .enumerate()
                    .map(|(ci, c)| {
                        let v = fresh.remove(&ci).or_else(|| cache.get(&c.content_hash).cloned()).unwrap_or_default();
                        row(&file, c, v, &model)
                    })
                    .collect();
                Ok(EmbeddedFile {
                    rel: file.rel,
                    file_hash: file.file_hash,
                    rows,
                    symbols: file.symbols,
                    part: file.part,
                })
            })
            .collect()
    }
}

fn row(file: &ChunkedFile, c: &Chunk, vector: Vec<f32>, model: &str) -> ChunkRow {
    ChunkRow {
        chunk_id: chunk_id(&file.rel, c),
        path: file.rel.clone(),
        language: file.language.to_string(),
        symbol: c.symbol.clone(),
        kind: c.kind.clone(),
        start_line: c.start_line,
        end_line: c.end_line,
        content: c.content.clone(),
        content_hash: c.content_hash.clone(),
        file_hash: file.file_hash.clone(),
        token_count: c.token_count,
        vector,
        model: model.to_string(),
    }
}
