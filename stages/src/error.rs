//! Errors of the stages. Each variant has a short `kind()` used as a metric label, and keeps
//! the error it stems from as its `source()` (the library's own error, boxed when several
//! kinds can occur, shared when one failure fails every file of a batch).

use std::path::PathBuf;
use std::sync::Arc;

/// The underlying error of a failure in a library the stages call (gitoxide, object_store,
/// notify, a worker thread).
pub type Cause = Box<dyn std::error::Error + Send + Sync + 'static>;

/// A stage failed on one item; the item is counted and skipped, the pipeline goes on.
#[derive(Debug, thiserror::Error)]
pub enum StageError {
    #[error("reading {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("embedding {count} chunks of {paths}: {source}")]
    Embed {
        paths: String,
        count: usize,
        #[source]
        source: Arc<ctxd_models::error::ModelError>,
    },
    #[error("committing {files} files to the index: {source}")]
    Commit {
        files: usize,
        #[source]
        source: ctxd_index::error::IndexError,
    },
    #[error("watching {path}: {source}")]
    Watch {
        path: PathBuf,
        #[source]
        source: Cause,
    },
    #[error("{uri} is not an s3:// uri: write s3://bucket/prefix")]
    NotObjectUri { uri: String },
    #[error("object store {uri}: {source}")]
    Object {
        uri: String,
        #[source]
        source: Cause,
    },
    #[error("git repository {path}: {what}: {source}")]
    Git {
        path: PathBuf,
        what: String,
        #[source]
        source: Cause,
    },
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
            StageError::Object { .. } | StageError::NotObjectUri { .. } => "object_store",
            StageError::Panic { .. } => "panic",
            StageError::Config { .. } => "config",
            StageError::Git { .. } => "git",
        }
    }
}
