//! Errors of the stages. Each variant has a short `kind()` used as a metric label.

use std::path::PathBuf;

/// A stage failed on one item; the item is counted and skipped, the pipeline goes on.
#[derive(Debug, thiserror::Error)]
pub enum StageError {
    #[error("reading {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("embedding {count} chunks of {paths}: {message}")]
    Embed { paths: String, count: usize, message: String },
    #[error("committing {files} files to the index: {source}")]
    Commit {
        files: usize,
        #[source]
        source: ctxd_index::IndexError,
    },
    #[error("watching {path}: {message}")]
    Watch { path: PathBuf, message: String },
    #[error("object store {uri}: {message}")]
    Object { uri: String, message: String },
    #[error("git repository {path}: {message}")]
    Git { path: PathBuf, message: String },
    #[error("source configuration: {message}")]
    Config { message: String },
    #[error("{stage} stage crashed on {path}: {message}")]
    Panic { stage: &'static str, path: String, message: String },
}

impl StageError {
    /// Short, bounded label for metrics (never a path).
    pub fn kind(&self) -> &'static str {
        match self {
            StageError::Read { .. } => "read",
            StageError::Embed { .. } => "embed",
            StageError::Commit { .. } => "commit",
            StageError::Watch { .. } => "watch",
            StageError::Object { .. } => "object_store",
            StageError::Panic { .. } => "panic",
            StageError::Config { .. } => "config",
            StageError::Git { .. } => "git",
        }
    }
}
