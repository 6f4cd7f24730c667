//! Metric names of the storage layer (all of them, in one place).

/// Counter: commits written to the index.
pub const INDEX_COMMITS_TOTAL: &str = "ctxd_index_commits_total";
/// Counter: rows inserted.
pub const INDEX_ROWS_INSERTED_TOTAL: &str = "ctxd_index_rows_inserted_total";
/// Counter: rows deleted (stale chunks of changed files and chunks of removed files).
pub const INDEX_ROWS_DELETED_TOTAL: &str = "ctxd_index_rows_deleted_total";
/// Gauge: rows in the chunks table.
pub const INDEX_ROWS: &str = "ctxd_index_rows";
/// Gauge: current LanceDB version of the chunks table.
pub const INDEX_VERSION: &str = "ctxd_index_version";
/// Histogram: seconds one commit took.
pub const INDEX_COMMIT_SECONDS: &str = "ctxd_index_commit_duration_seconds";
/// Counter: full-text index (re)builds and optimisations.
pub const INDEX_FTS_UPDATES_TOTAL: &str = "ctxd_index_fts_updates_total";
