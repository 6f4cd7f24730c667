//! Errors of the model layer.

use std::path::PathBuf;

/// Everything that can go wrong while resolving, loading or running a model.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("model '{spec}' not found: looked in {searched}; {hint}")]
    NotFound { spec: String, searched: String, hint: String },
    #[error("model file {path} is missing or unreadable: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("invalid model config {path}: {message}")]
    Config { path: PathBuf, message: String },
    #[error("tokenizer {path}: {message}")]
    Tokenizer { path: PathBuf, message: String },
    #[error("tokenization failed: {0}")]
    Encode(String),
    #[error("candle: {0}")]
    Candle(#[from] candle_core::Error),
    #[error("downloading model '{spec}' from the hugging face hub failed: {message}")]
    Download { spec: String, message: String },
    #[error("embedding backend: {0}")]
    Backend(String),
    #[error(
        "precision bf16 cannot run on this CPU: {reason}; use --precision f32 (or auto, which picks bf16 only \
         where it is native), or precision = \"f32\" / \"auto\" in [model]"
    )]
    Bf16Unsupported { reason: String },
    #[error("invalid model runtime setting: {0}")]
    Runtime(String),
    #[error("embedding endpoint {url}: {message}")]
    Endpoint { url: String, message: String },
    #[error("embedding service is shut down")]
    ServiceClosed,
    #[error("embedder returned {got} vectors for {expected} inputs")]
    Count { expected: usize, got: usize },
}
