//! Embedding models for ctxd, on [candle].
//!
//! This crate owns everything about turning text into vectors:
//!
//! * [`resolve`] finds a model's files: an explicit local directory, ctxd's own model cache
//!   (`$CTXD_MODEL_DIR` or `~/.cache/ctxd/models/<org>/<name>`), the Hugging Face cache
//!   (`$HF_HOME/hub`), and finally a real download through `hf-hub` unless `HF_HUB_OFFLINE=1`.
//! * [`bert`] runs a BERT-family sentence-embedding model (default
//!   `sentence-transformers/all-MiniLM-L6-v2`) with mean pooling over the attention mask and L2
//!   normalisation, exactly as sentence-transformers does.
//! * [`tokens`] counts tokens with the model's real tokenizer (used by the chunker for budgets).
//! * [`fast`] is the fast CPU path for BERT encoders: no padding, oneDNN matmuls with fused
//!   epilogues ([`dnnl`], loaded at run time), bf16 where the CPU has it, one worker per core;
//!   [`kernels`] holds its element-wise loops.
//! * [`runtime`] picks the backend from the config (`device`, `precision`, `backend`,
//!   `threads`): the fast CPU path when oneDNN is present, candle otherwise and on CUDA.
//! * [`service`] runs an [`Embedder`] on its own OS thread behind a bounded channel, so async
//!   code never blocks on matrix multiplications; batches are sorted by length and capped by
//!   padded tokens so padding waste stays small.
//!
//! The [`Embedder`] trait is the seam other crates use; unit tests of other stages may plug a
//! fake implementation, end-to-end tests always use [`bert::BertEmbedder`].

pub mod bert;
pub mod dnnl;
pub mod error;
pub mod fast;
pub mod kernels;
pub mod metrics;
pub mod resolve;
pub mod runtime;
pub mod service;
pub mod tokens;

pub use bert::BertEmbedder;
pub use error::ModelError;
pub use fast::{FastBert, Precision};
pub use resolve::{resolve_model, ModelFiles, DEFAULT_MODEL};
pub use runtime::{Backend, Runtime};
pub use service::{EmbedService, EmbedServiceConfig};
pub use tokens::TokenCounter;

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
    /// Positions a forward pass over sequences of these lengths computes (tokens plus
    /// padding); padded batches by default.
    fn padded_tokens(&self, lens: &[usize]) -> usize {
        lens.len() * lens.iter().copied().max().unwrap_or(0)
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

/// Resolves `spec` and reads its tokenizer, id and embedding dimension without loading the
/// weights: for full-text-only indexing, which counts tokens but never embeds.
pub fn tokenizer_only(spec: &str) -> Result<(TokenCounter, String, usize), ModelError> {
    let files = resolve_model(spec)?;
    let counter = TokenCounter::from_model(&files)?;
    Ok((counter, files.model_id(), files.dim()?))
}

/// Resolves `spec`, loads the model as `runtime` asks (see [`runtime`]) and starts its service
/// thread; also returns a token counter with the same tokenizer. Blocking (reads the weights,
/// warms the model up). [`EmbedService::backend`] says what was picked.
pub fn start(
    spec: &str,
    cfg: EmbedServiceConfig,
    runtime: &Runtime,
) -> Result<(EmbedService, TokenCounter), ModelError> {
    let files = resolve_model(spec)?;
    let counter = TokenCounter::from_model(&files)?;
    Ok((runtime.spawn(&files, cfg)?, counter))
}
