//! Embedding models for ctxd, on [candle].
//!
//! This crate owns everything about turning text into vectors:
//!
//! * [`resolve`] finds a model's files: an explicit local directory, ctxd's own model cache
//!   (`$CTXD_MODEL_DIR` or `~/.cache/ctxd/models/<org>/<name>`), the Hugging Face cache
//!   (`$HF_HOME/hub`), and finally a real download through `hf-hub` unless `HF_HUB_OFFLINE=1`.
//! * [`loaded`] reads a resolved model's configuration and tokenizer once into a
//!   [`LoadedModel`], which every backend and the token counter take their parts from.
//! * [`bert`] runs a BERT-family sentence-embedding model (default
//!   `sentence-transformers/all-MiniLM-L6-v2`) with mean pooling over the attention mask and L2
//!   normalisation, exactly as sentence-transformers does, on candle through [`encoder`] (ctxd's
//!   own BERT encoder: one GEMM per dense layer, fused kernels, an attention bias that f16 holds).
//! * [`tokens`] holds the model's tokenizer: encoding for the embedders, and counting tokens
//!   (used by the chunker for budgets).
//! * [`fast`] is the fast CPU path for BERT encoders: no padding, oneDNN matmuls with fused
//!   epilogues ([`dnnl`], loaded at run time), bf16 where the CPU has it, one worker per core;
//!   [`kernels`] holds its element-wise loops.
//! * [`runtime`] picks the backend from the config (`device`, `precision`, `backend`,
//!   `threads`): the fast CPU path when oneDNN is present, candle otherwise and on CUDA;
//!   [`gpu`] says whether a GPU can run it (driver and CUDA libraries opened at run time, so a
//!   CUDA build starts without them).
//! * [`forward`] measures the forward pass alone and the embedding service end to end
//!   (`ctxd bench --forward`, and the `ctxd-forward` binary a GPU check carries).
//! * [`service`] runs an [`Embedder`] on its own OS thread behind a bounded channel, so async
//!   code never blocks on matrix multiplications; batches are sorted by length and capped by
//!   padded tokens so padding waste stays small.
//!
//! Besides one pooled vector per text, the BERT embedders return **token embeddings** (one
//! unit vector per token, [`Embedder::forward_tokens`]): retrieval uses them to rescore its best
//! candidates by late interaction (each query token's best match in the candidate, averaged —
//! ColBERT's MaxSim, here with the sentence model's own token states).
//!
//! The [`Embedder`] trait is the seam other crates use; unit tests of other stages may plug a
//! fake implementation, end-to-end tests always use [`bert::BertEmbedder`].

pub mod arch;
pub mod bert;
pub mod card;
pub mod cpu;
pub mod cross;
pub mod dnnl;
pub mod encoder;
pub mod encoder_kernels;
pub mod error;
pub mod fast;
pub mod forward;
pub mod gpu;
pub mod kernels;
pub mod loaded;
pub mod metrics;
pub mod query_cache;
pub mod remote;
pub mod resolve;
pub mod runtime;
pub mod service;
pub mod tokens;

use error::ModelError;
use loaded::LoadedModel;
use runtime::Runtime;
use service::{EmbedService, EmbedServiceConfig};
use tokens::TokenCounter;

/// Something that turns a batch of texts into unit-length vectors.
///
/// Implementations are synchronous and may be slow; [`EmbedService`] runs them off the async
/// runtime.
pub trait Embedder: Send + 'static {
    /// Stable identifier of the model (stored with every vector in the index).
    fn model_id(&self) -> &str;
    /// Vector dimension.
    fn dim(&self) -> usize;
    /// Tokenizes `texts` (truncated to the model's window, at least one token each).
    fn encode(&self, texts: &[String]) -> Result<Vec<Vec<u32>>, ModelError>;
    /// Embeds token id sequences; returns one unit vector of length [`Embedder::dim`] per
    /// sequence, in order.
    fn forward(&mut self, ids: &[Vec<u32>]) -> Result<Vec<Vec<f32>>, ModelError>;
    /// Token embeddings: for each sequence, every token's final hidden state scaled to unit
    /// length, the first and last ([CLS] and [SEP]) left out when there is anything between
    /// them, as one row-major `tokens × dim` matrix. Embedders without them refuse.
    fn forward_tokens(&mut self, ids: &[Vec<u32>]) -> Result<Vec<Vec<f32>>, ModelError> {
        let _ = ids;
        Err(ModelError::Backend(format!("model {} has no token embeddings", self.model_id())))
    }
    /// Positions a forward pass over sequences of these lengths computes (tokens plus
    /// padding); padded batches by default.
    fn padded_tokens(&self, lens: &[usize]) -> usize {
        lens.len() * lens.iter().copied().max().unwrap_or(0)
    }
    /// Whether [`Embedder::forward_tokens`] can answer (an embedding server cannot): late-interaction
    /// rescoring is skipped where not.
    fn has_token_states(&self) -> bool {
        true
    }
    /// Whether the embedder takes texts rather than token ids (an embedding server,
    /// [`remote::RemoteEmbedder`]): the service then hands it each batch's texts.
    fn takes_texts(&self) -> bool {
        false
    }
    /// Embeds texts as they are (embedders that [`Embedder::takes_texts`]); the default
    /// tokenizes and runs [`Embedder::forward`].
    fn forward_texts(&mut self, texts: &[String]) -> Result<Vec<Vec<f32>>, ModelError> {
        let ids = self.encode(texts)?;
        self.forward(&ids)
    }
    /// The per-stage clock of embedders that have one (the candle [`encoder::Encoder`]), for
    /// `--profile`.
    fn stage_clock(&mut self) -> Option<&mut encoder::StageClock> {
        None
    }
    /// Tokenizes and embeds `texts` in one call.
    fn embed(&mut self, texts: &[String]) -> Result<Vec<Vec<f32>>, ModelError> {
        let ids = self.encode(texts)?;
        let vectors = self.forward(&ids)?;
        if vectors.len() != texts.len() {
            return Err(ModelError::Count { expected: texts.len(), got: vectors.len() });
        }
        Ok(vectors)
    }
}

/// Loads the cross-encoder `spec` (a directory or hub id: [`cross`]) and starts its service on
/// the device `runtime` resolves to.
pub fn start_reranker(spec: &str, runtime: &Runtime) -> Result<EmbedService, ModelError> {
    runtime.spawn_reranker(&LoadedModel::resolve(spec)?)
}

/// A boxed embedder is an embedder (what [`runtime::Runtime::load`] picked, whichever it is).
impl<E: Embedder + ?Sized> Embedder for Box<E> {
    fn model_id(&self) -> &str {
        (**self).model_id()
    }
    fn dim(&self) -> usize {
        (**self).dim()
    }
    fn encode(&self, texts: &[String]) -> Result<Vec<Vec<u32>>, ModelError> {
        (**self).encode(texts)
    }
    fn forward(&mut self, ids: &[Vec<u32>]) -> Result<Vec<Vec<f32>>, ModelError> {
        (**self).forward(ids)
    }
    fn forward_tokens(&mut self, ids: &[Vec<u32>]) -> Result<Vec<Vec<f32>>, ModelError> {
        (**self).forward_tokens(ids)
    }
    fn padded_tokens(&self, lens: &[usize]) -> usize {
        (**self).padded_tokens(lens)
    }
    fn stage_clock(&mut self) -> Option<&mut encoder::StageClock> {
        (**self).stage_clock()
    }
    fn takes_texts(&self) -> bool {
        (**self).takes_texts()
    }
    fn has_token_states(&self) -> bool {
        (**self).has_token_states()
    }
    fn forward_texts(&mut self, texts: &[String]) -> Result<Vec<Vec<f32>>, ModelError> {
        (**self).forward_texts(texts)
    }
    fn embed(&mut self, texts: &[String]) -> Result<Vec<Vec<f32>>, ModelError> {
        (**self).embed(texts)
    }
}

/// The text the model sees for a chunk: a short header (path and symbol) and the content.
/// The one definition: the indexer, re-embedding jobs, rescoring and the vector cache's key
/// ([`embed_key`]) all go through it, so a stored vector is always the model's vector of
/// exactly this text.
pub fn chunk_text(path: &str, symbol: Option<&str>, content: &str) -> String {
    // A git source's view (`lib@main/src/a.py`) reads as the source's path (`lib/src/a.py`):
    // the same file on two refs is the same text, so its vector is computed once.
    let unref;
    let path = match path.split_once('/') {
        Some((segment, rest)) if segment.contains('@') => {
            unref = format!("{}/{rest}", segment.split('@').next().unwrap_or(segment));
            unref.as_str()
        }
        _ => path,
    };
    match symbol {
        Some(sym) => format!("{path} {sym}\n{content}"),
        None => format!("{path}\n{content}"),
    }
}

/// The vector cache's key for `text` embedded by `model_id`: blake3 of both (hex). Equal keys
/// mean equal vectors — the same chunk text under the same model, whichever file, branch or
/// commit it came from; a moved file or another model gets another key.
pub fn embed_key(model_id: &str, text: &str) -> String {
    let mut h = blake3::Hasher::new();
    h.update(model_id.as_bytes());
    h.update(&[0]);
    h.update(text.as_bytes());
    h.finalize().to_hex().to_string()
}

/// The rows of `hidden` (`tokens × width`, one sequence) without the first and last token when
/// there is anything between them, each scaled to unit length: [`Embedder::forward_tokens`]'s
/// output for one sequence.
pub fn unit_token_rows(hidden: &[f32], width: usize) -> Vec<f32> {
    let rows = hidden.len() / width.max(1);
    let inner = if rows > 2 { &hidden[width..(rows - 1) * width] } else { hidden };
    let mut out = inner.to_vec();
    out.chunks_exact_mut(width.max(1)).for_each(scale_to_unit);
    out
}

/// `row` scaled to unit length in place (a zero row stays zero).
pub fn scale_to_unit(row: &mut [f32]) {
    let norm = row.iter().map(|v| v * v).sum::<f32>().sqrt().max(1e-12);
    row.iter_mut().for_each(|v| *v /= norm);
}

/// Late-interaction score of a query against a document, both as [`unit_token_rows`]: the
/// mean over query tokens of the best cosine with any document token (ColBERT's MaxSim,
/// averaged so scores compare across queries of different lengths). 0 when either is empty.
pub fn max_sim(query: &[f32], doc: &[f32], width: usize) -> f32 {
    if doc.is_empty() || width == 0 {
        return 0.0;
    }
    max_sim_by(query, width, |q| {
        doc.chunks_exact(width).map(|d| q.iter().zip(d).map(|(a, b)| a * b).sum::<f32>()).fold(f32::MIN, f32::max)
    })
}

/// [`max_sim`] with the document kept in another form: `best` gives a query token's best
/// cosine with any document token. The mean over the query's tokens (0 for an empty query).
pub fn max_sim_by(query: &[f32], width: usize, best: impl Fn(&[f32]) -> f32) -> f32 {
    if query.is_empty() || width == 0 {
        return 0.0;
    }
    let rows = query.chunks_exact(width);
    let n = rows.len();
    rows.map(best).sum::<f32>() / n as f32
}

/// [`chunk_text`] and its [`embed_key`] under `model_id`: what the indexer and a re-embedding
/// job store for a chunk.
pub fn keyed_chunk_text(model_id: &str, path: &str, symbol: Option<&str>, content: &str) -> (String, String) {
    let text = chunk_text(path, symbol, content);
    let key = embed_key(model_id, &text);
    (text, key)
}

/// Resolves `spec` and reads its tokenizer, id and embedding dimension without loading the
/// weights: for full-text-only indexing, which counts tokens but never embeds.
pub fn tokenizer_only(spec: &str) -> Result<(TokenCounter, String, usize), ModelError> {
    let model = LoadedModel::resolve(spec)?;
    Ok((model.token_counter(), model.model_id(), model.dim()?))
}

/// Resolves `spec`, loads the model as `runtime` asks (see [`runtime`]) and starts its service
/// thread; also returns a token counter with the same tokenizer. Blocking (reads the weights,
/// warms the model up). [`EmbedService::backend`] says what was picked. A caller that already
/// holds the [`LoadedModel`] uses [`Runtime::spawn`] and [`LoadedModel::token_counter`] instead.
pub fn start(
    spec: &str,
    cfg: EmbedServiceConfig,
    runtime: &Runtime,
) -> Result<(EmbedService, TokenCounter), ModelError> {
    let model =
        LoadedModel::resolve(spec)?.with_prefixes(runtime.query_prefix.as_deref(), runtime.document_prefix.as_deref());
    Ok((runtime.spawn(&model, cfg)?, model.token_counter()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_git_view_reads_as_its_source_path() {
        let main = keyed_chunk_text("m", "lib@main/src/a.py", Some("f"), "def f(): pass");
        let tag = keyed_chunk_text("m", "lib@v2/src/a.py", Some("f"), "def f(): pass");
        assert_eq!(main, tag, "one vector for the same file on two refs");
        assert!(main.0.starts_with("lib/src/a.py f\n"));
        assert_eq!(chunk_text("src/a.py", None, "x"), "src/a.py\nx");
    }

    #[test]
    fn token_rows_drop_the_ends_and_are_unit_length() {
        // Four 2-d tokens: [CLS], two words, [SEP].
        let rows = unit_token_rows(&[9.0, 9.0, 3.0, 4.0, 0.0, 2.0, 9.0, 9.0], 2);
        assert_eq!(rows, vec![0.6, 0.8, 0.0, 1.0]);
        // Nothing between the ends: kept as they are, normalised.
        assert_eq!(unit_token_rows(&[0.0, 5.0], 2), vec![0.0, 1.0]);
    }

    #[test]
    fn max_sim_averages_each_query_tokens_best_match() {
        let query = [1.0, 0.0, 0.0, 1.0];
        // The first query token matches exactly, the second at best with cosine 0.6.
        let doc = [1.0, 0.0, 0.8, 0.6, -1.0, 0.0];
        assert!((max_sim(&query, &doc, 2) - 0.8).abs() < 1e-6);
        assert_eq!(max_sim(&[], &doc, 2), 0.0);
        assert_eq!(chunk_text("a.rs", Some("f"), "fn f() {}"), "a.rs f\nfn f() {}");
    }

    #[test]
    fn embed_key_covers_the_model_and_the_whole_text() {
        let text = chunk_text("a.rs", Some("f"), "fn f() {}");
        assert_eq!(embed_key("m", &text), embed_key("m", &text));
        assert_ne!(embed_key("m", &text), embed_key("other", &text));
        assert_ne!(embed_key("m", &text), embed_key("m", &chunk_text("b.rs", Some("f"), "fn f() {}")));
        // The separator keeps (model, text) pairs apart.
        assert_ne!(embed_key("ab", "c"), embed_key("a", "bc"));
    }
}
