//! Errors of retrieval and serving.

/// A query could not be answered.
#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    #[error("query is empty")]
    EmptyQuery,
    #[error("query is too long: {len} bytes (limit {limit})")]
    QueryTooLong { len: usize, limit: usize },
    #[error("k must be between 1 and {max}, got {got}")]
    BadK { got: usize, max: usize },
    #[error("unknown mode '{0}': use routed, hybrid, vector, bm25 or symbol")]
    BadMode(String),
    #[error("{0}")]
    BadRequest(String),
    #[error(
        "mode {0} needs query embeddings, but this index was built without vectors (full-text only): use mode bm25"
    )]
    NoModel(&'static str),
    #[error("{0}")]
    BadSnapshot(String),
    #[error("embedding the query failed: {0}")]
    Embed(#[from] ctxd_models::ModelError),
    #[error(transparent)]
    Index(#[from] ctxd_index::IndexError),
    #[error("reading queries file {path}: {message}")]
    Queries { path: String, message: String },
}

impl SearchError {
    /// True when the caller sent something wrong (HTTP 400), false for server faults.
    pub fn is_client_error(&self) -> bool {
        matches!(
            self,
            SearchError::EmptyQuery
                | SearchError::QueryTooLong { .. }
                | SearchError::BadK { .. }
                | SearchError::BadMode(_)
                | SearchError::BadRequest(_)
                | SearchError::NoModel(_)
                | SearchError::BadSnapshot(_)
        )
    }
}
