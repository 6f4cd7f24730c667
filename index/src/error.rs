//! Errors of the storage layer.

/// Everything that can go wrong talking to the LanceDB index.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    #[error("lancedb at {uri}: {source}")]
    Lance {
        uri: String,
        #[source]
        source: lancedb::Error,
    },
    #[error("arrow: {0}")]
    Arrow(#[from] arrow_schema::ArrowError),
    #[error("no index at {uri}: run `ctxd index <PATH> --db {uri}` first")]
    Missing { uri: String },
    #[error(
        "index at {uri} is in format {found}, and this build of ctxd reads formats {oldest} to {supported}: open it \
         with the ctxd that wrote it or a newer one (docs/running-as-a-service.md, \"The index format\"), or index into \
         a new --db"
    )]
    Format { uri: String, found: String, oldest: u32, supported: u32 },
    #[error(
        "index at {uri} was built with model '{indexed}' (dim {indexed_dim}) but '{requested}' (dim {requested_dim}) was requested; use the same model or a new --db"
    )]
    ModelMismatch { uri: String, indexed: String, indexed_dim: usize, requested: String, requested_dim: usize },
    #[error("vector of length {got} does not match index dimension {expected}")]
    Dimension { expected: usize, got: usize },
    #[error("snapshot of {uri}: {message}")]
    Snapshot { uri: String, message: String },
    #[error(
        "table {table} of {uri} was written by an older ctxd: its vectors are keyed by content alone, so some may \
         be of another text than their row's; it can be searched but not written — open it with `ctxd index` or \
         `ctxd serve`, which re-embed it once into a keyed table"
    )]
    Unkeyed { uri: String, table: String },
    #[error(
        "index {uri} is already being written by {holder}{detail} (writer lock {lock}): one writer per index — \
         stop that process first (a daemon keeps its index fresh by itself: query it over HTTP), or serve this \
         one with --role reader"
    )]
    Locked { uri: String, holder: String, lock: String, detail: String },
    #[error(
        "{why}: this process writes nothing more to {uri} and stops (the lease {lock} is another writer's or has \
         lapsed); the next writer redoes what this one had in flight — restart this one only where no other writer \
         runs (it waits for the lease)"
    )]
    LeaseLost { uri: String, lock: String, why: String },
    #[error("writer lease of {uri}: {message}")]
    Lease { uri: String, message: String },
    #[error("distributed job (sharded build or re-embedding) on {uri}: {message}")]
    Staged { uri: String, message: String },
    #[error("unexpected column '{column}' type in {uri}")]
    Column { uri: String, column: String },
}

/// An error and each of its causes (`source()`), `: `-separated: what a user reads when the
/// error travels as a boxed `dyn Error` (an MCP tool result, a log line).
pub fn with_causes(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        text.push_str(&format!(": {c}"));
        cause = c.source();
    }
    text
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_error_is_said_with_its_causes() {
        #[derive(Debug, thiserror::Error)]
        #[error("opening db/x")]
        struct Outer(#[source] std::io::Error);
        let e = Outer(std::io::Error::new(std::io::ErrorKind::NotFound, "no such file"));
        assert_eq!(super::with_causes(&e), "opening db/x: no such file");
        let plain = std::io::Error::other("alone");
        assert_eq!(super::with_causes(&plain), "alone");
    }
}
