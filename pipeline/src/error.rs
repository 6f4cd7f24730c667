//! Errors of the runtime and the daemon wiring.

use std::path::PathBuf;

/// Errors that stop the pipeline from starting (item-level errors never stop it).
#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    /// The index directory could not be created.
    #[error("creating the index directory {path} (`[index] db`)")]
    CreateDb {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("source root {path} is not a readable directory: {message}")]
    Root { path: PathBuf, message: String },
    #[error("re-embedding {db}: {message}")]
    Reembed { db: String, message: String },
    #[error("sharded build of {db}: {message}")]
    Build { db: String, message: String },
    #[error("fitting the query adapter of {db} (`ctxd adapt` retries; `[index] adapt = false` turns it off)")]
    Adapt {
        db: String,
        #[source]
        source: ctxd_models::adapter::AdapterError,
    },
    #[error("fitting the query adapter of {db}: the fit panicked ({message}); `ctxd adapt` retries")]
    AdaptPanicked { db: String, message: String },
    #[error(transparent)]
    Model(#[from] ctxd_models::error::ModelError),
    #[error(transparent)]
    Index(#[from] ctxd_index::error::IndexError),
    #[error(transparent)]
    Stage(#[from] ctxd_stages::error::StageError),
}
