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
//! * [`service`] runs an [`Embedder`] on its own OS thread behind a bounded channel, so async
//!   code never blocks on matrix multiplications; batches are sorted by length and capped by
//!   padded tokens so padding waste stays small.
//!
//! The [`Embedder`] trait is the seam other crates use; unit tests of other stages may plug a
//! fake implementation, end-to-end tests always use [`bert::BertEmbedder`].

pub mod bert;
pub mod error;
pub mod metrics;
pub mod resolve;
pub mod service;
pub mod tokens;

pub use bert::BertEmbedder;
pub use error::ModelError;
pub use resolve::{resolve_model, ModelFiles, DEFAULT_MODEL};
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
    /// Embeds `texts`; returns one vector of length [`Embedder::dim`] per input, in order.
    fn embed(&mut self, texts: &[String]) -> Result<Vec<Vec<f32>>, ModelError>;
    /// Number of model tokens `text` occupies (after truncation to the model's window),
    /// used to cap batches by padded tokens.
    fn token_len(&self, text: &str) -> usize;
}

/// Resolves `spec`, loads the BERT model on the CPU and starts its service thread; also
/// returns a token counter with the same tokenizer. Blocking (reads the weights).
pub fn start(spec: &str, cfg: EmbedServiceConfig) -> Result<(EmbedService, TokenCounter), ModelError> {
    let files = resolve_model(spec)?;
    let counter = TokenCounter::from_model(&files)?;
    let model = BertEmbedder::load(&files, candle_core::Device::Cpu)?;
    Ok((EmbedService::spawn(model, cfg), counter))
}
