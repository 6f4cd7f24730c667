//! Errors of answering a query (retrieval, context assembly, completion, evaluation).

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
    /// A name (a route, an intent) that is not one of the accepted ones.
    #[error("unknown {what} '{got}': use {accepted}")]
    UnknownName { what: &'static str, got: String, accepted: String },
    #[error("{0}")]
    BadRequest(String),
    #[error(
        "mode {0} needs query embeddings, but this index was built without vectors (full-text only): use mode bm25"
    )]
    NoModel(&'static str),
    #[error("{0}")]
    BadSnapshot(String),
    #[error("embedding the query failed: {0}")]
    Embed(#[from] ctxd_models::error::ModelError),
    #[error(transparent)]
    Index(#[from] ctxd_index::error::IndexError),
    #[error("reading queries file {path}: {message}")]
    Queries { path: String, message: String },
    /// `source` names a source the index does not have.
    #[error("{0}")]
    BadSource(String),
    /// The caller's token may not read a source the request names (HTTP 403).
    #[error("{0}")]
    Forbidden(String),
    /// A fitted ranking model's parameters cannot be used (a server fault: the file and why).
    #[error("{0}")]
    RankModel(String),
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
                | SearchError::UnknownName { .. }
                | SearchError::BadRequest(_)
                | SearchError::NoModel(_)
                | SearchError::BadSnapshot(_)
                | SearchError::BadSource(_)
                | SearchError::Forbidden(_)
        )
    }

    /// True when the caller's token may not read what it asked for (HTTP 403).
    pub fn is_forbidden(&self) -> bool {
        matches!(self, SearchError::Forbidden(_))
    }
}

/// The value of `all` that `name` calls `s` (any case), else [`SearchError::UnknownName`]
/// listing the accepted names: the one way the enums of an answer are parsed at the edge.
pub fn by_name<T: Copy>(
    what: &'static str,
    s: &str,
    all: &[T],
    name: impl Fn(T) -> &'static str,
) -> Result<T, SearchError> {
    if let Some(v) = all.iter().copied().find(|v| name(*v).eq_ignore_ascii_case(s)) {
        return Ok(v);
    }
    let names: Vec<&str> = all.iter().map(|v| name(*v)).collect();
    let accepted = match names.split_last() {
        Some((last, [])) => last.to_string(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    };
    Err(SearchError::UnknownName { what, got: s.to_string(), accepted })
}
