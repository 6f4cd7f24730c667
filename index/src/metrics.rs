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
/// Gauge: versions of the chunks table on disk.
pub const INDEX_VERSIONS: &str = "ctxd_index_versions";
/// Gauge: fragments (data files) of the current version.
pub const INDEX_FRAGMENTS: &str = "ctxd_index_fragments";
/// Gauge: unix time of the last compaction + cleanup pass.
pub const INDEX_LAST_COMPACTION: &str = "ctxd_index_last_compaction_timestamp_seconds";
/// Counter: compaction + cleanup passes.
pub const INDEX_COMPACTIONS_TOTAL: &str = "ctxd_index_compactions_total";
