//! The embed stage: chunks → vectors, through the model thread of [`EmbedService`].
//!
//! Many files are embedded in one request (the runtime hands this stage a batch capped by
//! chunk tokens), so short files share forward passes. The index is the embedding cache: every
//! chunk's vector is stored under its **embedding key**, the hash of the model id and the exact
//! text embedded ([`ctxd_models::chunk_text`]: path, symbol and content; [`ctxd_models::embed_key`]).
//! Before embedding, the stored vectors of every chunk in the batch whose key is already in the
//! index are read back and reused, so editing one function re-embeds that function, switching
//! the source to another git commit or branch re-embeds only the chunks that differ, and a
//! moved or renamed file is embedded again (its path is part of the text, so the old vector is
//! not the vector of the new text). Reused and computed chunks are counted
//! (`ctxd_embed_cache_hits_total` / `_misses_total`).
//!
//! Where the model gives token states (and `CTXD_LATE_CODEC` does not say `none`: see
//! [`ctxd_models::late::LateCodec::for_model`]), the same forward pass that gives a chunk's vector gives its token states, and the chunk is stored
//! with their code (the `late` column), so rescoring reads it instead of encoding the chunk per
//! question; reused vectors bring their stored codes along.

pub mod stage;

use std::collections::HashMap;
use std::sync::Arc;

use ctxd_index::{schema::ChunkRow, store::Index, vectors::StoredEmbedding};
use ctxd_models::late::LateCodec;
use ctxd_models::service::EmbedService;

use crate::chunk::ChunkedFile;
use crate::error::StageError;
use crate::metrics as m;
use ctxd_index::record::Chunk;

/// A file with one index row per chunk, vectors filled in.
#[derive(Debug, Clone)]
pub struct EmbeddedFile {
    pub rel: String,
    pub file_hash: String,
    pub rows: Vec<ChunkRow>,
    /// The file's definitions, for the symbol table.
    pub symbols: Vec<ctxd_index::symbols::SymbolRow>,
    /// The file's outgoing code-graph edges, for the edges table.
    pub edges: Vec<ctxd_index::edges::EdgeRow>,
    /// Set for the parts of a streamed file.
    pub part: Option<crate::chunk::Part>,
}

/// The text the model sees for a chunk ([`ctxd_models::chunk_text`]) and its key under
/// `model` ([`ctxd_models::embed_key`]).
pub fn embedding_text(path: &str, chunk: &Chunk, model: &str) -> (String, String) {
    ctxd_models::keyed_chunk_text(model, path, chunk.symbol.as_deref(), &chunk.content)
}

/// Embeds chunked files.
#[derive(Clone)]
pub struct Embed {
    service: Option<EmbedService>,
    index: Arc<Index>,
    vectors: bool,
    counts: Arc<EmbedCounts>,
    /// The model's late-interaction codec, when one ships and the model gives token states.
    codec: Option<Arc<LateCodec>>,
}

/// Chunks embedded by the model vs. taken from the index, since the stage started.
#[derive(Debug, Default)]
pub struct EmbedCounts {
    pub computed: std::sync::atomic::AtomicU64,
    pub reused: std::sync::atomic::AtomicU64,
}

/// The `model` value of rows stored without a vector (full-text-only sources).
pub const NO_MODEL: &str = ctxd_index::NO_MODEL;

impl Embed {
    /// An embed stage using `service`, reusing vectors stored in `index`. Without a service
    /// chunks are stored without vectors (see [`Embed::with_vectors`]).
    pub fn new(service: Option<EmbedService>, index: Arc<Index>) -> Self {
        let vectors = service.is_some();
        let codec = service.as_ref().and_then(late_codec);
        Self { service, index, vectors, counts: Arc::default(), codec }
    }

    /// The stage's running counts of computed and reused embeddings.
    pub fn counts(&self) -> Arc<EmbedCounts> {
        self.counts.clone()
    }

    /// `false`: store chunks without vectors (model [`NO_MODEL`], a null vector); only BM25
    /// finds them. Has no effect without a service.
    pub fn with_vectors(mut self, vectors: bool) -> Self {
        self.vectors = vectors && self.service.is_some();
        self
    }

    fn without_vectors(&self, files: Vec<ChunkedFile>) -> Vec<Result<EmbeddedFile, StageError>> {
        let n: usize = files.iter().map(|f| f.chunks.len()).sum();
        metrics::counter!(m::EMBED_SKIPPED_CHUNKS_TOTAL).increment(n as u64);
        files
            .into_iter()
            .map(|mut file| {
                let rows = file
                    .chunks
                    .iter()
                    // No vector: the index stores none (or zeros, in an older table).
                    .map(|c| row(&file, c, embedding_text(&file.rel, c, NO_MODEL).1, Vec::new(), NO_MODEL))
                    .collect();
                Ok(EmbeddedFile {
                    rel: file.rel,
                    file_hash: file.file_hash,
                    rows,
                    symbols: std::mem::take(&mut file.symbols),
                    edges: std::mem::take(&mut file.edges),
                    part: file.part,
                })
            })
            .collect()
    }

    /// Sum of chunk tokens of a file (the batching weight).
    pub fn weight(file: &ChunkedFile) -> usize {
        file.chunks.iter().map(|c| c.token_count as usize).sum::<usize>().max(1)
    }

    /// Stored vectors for the embedding keys of `keyed` (one list per file), wherever in the
    /// index they are (so reverted files and other branches re-use them), with their stored
    /// late-interaction codes when this stage stores codes — one read for both. Parts of
    /// streamed files are not looked up: logs and dumps are rarely re-embedded, and the lookups
    /// would dominate. On a failed read nothing is reused (the chunks are embedded again).
    async fn cached_embeddings(
        &self,
        files: &[ChunkedFile],
        keyed: &[Vec<(String, String)>],
    ) -> HashMap<String, StoredEmbedding> {
        let mut hashes: Vec<String> = files
            .iter()
            .zip(keyed)
            .filter(|(f, _)| f.part.is_none())
            .flat_map(|(_, keys)| keys.iter().map(|(_, key)| key.clone()))
            .collect();
        hashes.sort_unstable();
        hashes.dedup();
        if hashes.is_empty() {
            return HashMap::new();
        }
        match self.index.vectors().embeddings_for(&hashes, self.codec.is_some()).await {
            Ok(v) => v,
            Err(e) => {
                let first = files.first().map_or("", |f| f.rel.as_str());
                tracing::warn!("reading cached vectors for {} files from {first}: {e}", files.len());
                HashMap::new()
            }
        }
    }

    /// Embeds a batch of files in one model request; returns one result per file, in order.
    /// Chunks whose text is already embedded by this model (anywhere in the index, or twice in
    /// this batch) are not embedded again.
    pub async fn embed_files(&self, files: Vec<ChunkedFile>) -> Vec<Result<EmbeddedFile, StageError>> {
        let Some(service) = self.service.as_ref().filter(|_| self.vectors) else {
            return self.without_vectors(files);
        };
        let model = service.model_id().to_string();
        // (text, key) of every chunk, per file.
        let keyed: Vec<Vec<(String, String)>> =
            files.iter().map(|f| f.chunks.iter().map(|c| embedding_text(&f.rel, c, &model)).collect()).collect();
        let mut cache = self.cached_embeddings(&files, &keyed).await;
        // Each missing key is embedded once.
        let mut texts = Vec::new();
        let mut missing: Vec<String> = Vec::new();
        let mut queued: std::collections::HashSet<&str> = std::collections::HashSet::new();
        for (text, key) in keyed.iter().flatten() {
            if !cache.contains_key(key) && queued.insert(key) {
                missing.push(key.clone());
                texts.push(text.clone());
            }
        }
        let total: usize = files.iter().map(|f| f.chunks.len()).sum();
        let reused = (total - texts.len()) as u64;
        metrics::counter!(m::EMBED_CACHE_HITS_TOTAL).increment(reused);
        metrics::counter!(m::EMBED_CACHE_MISSES_TOTAL).increment(texts.len() as u64);
        self.counts.reused.fetch_add(reused, std::sync::atomic::Ordering::Relaxed);
        self.counts.computed.fetch_add(texts.len() as u64, std::sync::atomic::Ordering::Relaxed);
        let count = texts.len();
        let embedded = match &self.codec {
            Some(codec) => embed_with_codes(service, codec, texts).await,
            None => service.embed_documents(texts).await.map(|v| (v, Vec::new())),
        };
        let (vectors, new_codes) = match embedded {
            Ok(v) => v,
            Err(source) => {
                let paths = files.iter().map(|f| f.rel.as_str()).collect::<Vec<_>>().join(", ");
                let source = std::sync::Arc::new(source);
                return files
                    .iter()
                    .map(|_| Err(StageError::Embed { paths: paths.clone(), count, source: source.clone() }))
                    .collect();
            }
        };
        metrics::counter!(m::EMBED_CHUNKS_TOTAL).increment(count as u64);
        let mut new_codes = new_codes.into_iter();
        for (key, vector) in missing.into_iter().zip(vectors) {
            cache.insert(key, StoredEmbedding { vector, late: new_codes.next().unwrap_or_default() });
        }
        files
            .into_iter()
            .zip(keyed)
            .map(|(file, keys)| {
                let rows = file
                    .chunks
                    .iter()
                    .zip(keys)
                    .map(|(c, (_, key))| {
                        let StoredEmbedding { vector, late } = cache.get(&key).cloned().unwrap_or_default();
                        ChunkRow { late, ..row(&file, c, key, vector, &model) }
                    })
                    .collect();
                Ok(EmbeddedFile {
                    rel: file.rel,
                    file_hash: file.file_hash,
                    rows,
                    symbols: file.symbols,
                    edges: file.edges,
                    part: file.part,
                })
            })
            .collect()
    }
}

/// Vectors of document `texts` and the late-interaction codes of their token states, from one
/// forward pass ([`EmbedService::embed_documents_with_tokens`]); the codes are computed off the
/// async runtime. Indexing and re-embedding both store chunks this way.
pub async fn embed_with_codes(
    service: &EmbedService,
    codec: &Arc<LateCodec>,
    texts: Vec<String>,
) -> Result<(Vec<Vec<f32>>, Vec<Vec<u8>>), ctxd_models::error::ModelError> {
    let states = service.embed_documents_with_tokens(texts).await?;
    let codec = codec.clone();
    let encode = move || -> (Vec<Vec<f32>>, Vec<Vec<u8>>) {
        states.into_iter().map(|s| (s.vector, codec.encode(&s.tokens, &s.ids))).unzip()
    };
    tokio::task::spawn_blocking(encode)
        .await
        .map_err(|e| ctxd_models::error::ModelError::Backend(format!("encoding token states: {e}")))
}

/// The late-interaction codec chunks embedded by `service` are stored with
/// ([`LateCodec::for_model`]), where the model gives token states.
pub fn late_codec(service: &EmbedService) -> Option<Arc<LateCodec>> {
    Some(service)
        .filter(|s| s.token_states())
        .and_then(|s| LateCodec::for_model(s.model_id(), s.dim(), s.punctuation()))
        .map(Arc::new)
}

fn row(file: &ChunkedFile, c: &Chunk, embed_key: String, vector: Vec<f32>, model: &str) -> ChunkRow {
    ChunkRow {
        chunk: c.clone(),
        embed_key,
        file_hash: file.file_hash.clone(),
        vector,
        model: model.to_string(),
        late: Vec::new(),
    }
}
