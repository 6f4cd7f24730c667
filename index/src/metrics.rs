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
/// Counter: renewals of the writer lease of an index in a bucket.
pub const LEASE_RENEWALS_TOTAL: &str = "ctxd_index_lease_renewals_total";
/// Counter: failed renewal attempts of the writer lease (retried until two thirds of its TTL).
pub const LEASE_RENEW_FAILURES_TOTAL: &str = "ctxd_index_lease_renew_failures_total";
/// Counter: writes refused because the writer lease could not be confirmed first (lost or unreachable).
pub const LEASE_FENCED_WRITES_TOTAL: &str = "ctxd_index_lease_fenced_writes_total";
/// Gauge: seconds between a commit and the moment a reader serves it (0 while up to date).
pub const READER_LAG_SECONDS: &str = "ctxd_index_reader_lag_seconds";
/// Gauge: the version of the chunks table a reader serves.
pub const READER_VERSION: &str = "ctxd_index_reader_version";
/// Counter: versions a reader switched to.
pub const READER_SWITCHES_TOTAL: &str = "ctxd_index_reader_switches_total";
/// Counter: failed checks or opens of a new version by a reader (it keeps serving the last one).
pub const READER_ERRORS_TOTAL: &str = "ctxd_index_reader_errors_total";
/// Gauge: bytes held by LanceDB's process-wide caches, label cache (`index`, `metadata`).
pub const INDEX_CACHE_BYTES: &str = "ctxd_index_cache_bytes";
/// Gauge: entries of LanceDB's process-wide caches, label cache (`index`, `metadata`).
pub const INDEX_CACHE_ENTRIES: &str = "ctxd_index_cache_entries";
/// Counter: lookups of LanceDB's process-wide caches that found their entry, label cache (`index`,
/// `metadata`).
pub const INDEX_CACHE_HITS_TOTAL: &str = "ctxd_index_cache_hits_total";
/// Counter: lookups of LanceDB's process-wide caches that did not (the entry was then read from
/// the table's files and decoded), label cache (`index`, `metadata`).
pub const INDEX_CACHE_MISSES_TOTAL: &str = "ctxd_index_cache_misses_total";
/// Counter: entries the index cache dropped because nobody read them while newer ones came in
/// (superseded full-text segments, `index_cache.rs`).
pub const INDEX_CACHE_EXPIRED_TOTAL: &str = "ctxd_index_cache_expired_entries_total";

/// Registers every metric of this crate with its description (the `# HELP` line of a scrape)
/// and creates the series the dashboards read at zero (commits). Called by the binary once the recorder is installed.
pub fn describe() {
    // The series the dashboards read exist from the first scrape, at zero.
    metrics::counter!(INDEX_COMMITS_TOTAL).increment(0);
    metrics::describe_counter!(INDEX_COMMITS_TOTAL, "Commits written to the index.");
    metrics::describe_counter!(INDEX_ROWS_INSERTED_TOTAL, "Rows inserted.");
    metrics::describe_counter!(
        INDEX_ROWS_DELETED_TOTAL,
        "Rows deleted (stale chunks of changed files and chunks of removed files)."
    );
    metrics::describe_gauge!(INDEX_ROWS, "Rows in the chunks table.");
    metrics::describe_gauge!(INDEX_VERSION, "Current LanceDB version of the chunks table.");
    metrics::describe_histogram!(INDEX_COMMIT_SECONDS, "Seconds one commit took.");
    metrics::describe_counter!(INDEX_FTS_UPDATES_TOTAL, "Full-text index (re)builds and optimisations.");
    metrics::describe_gauge!(INDEX_VERSIONS, "Versions of the chunks table on disk.");
    metrics::describe_gauge!(INDEX_FRAGMENTS, "Fragments (data files) of the current version.");
    metrics::describe_gauge!(INDEX_LAST_COMPACTION, "Unix time of the last compaction + cleanup pass.");
    metrics::describe_counter!(INDEX_COMPACTIONS_TOTAL, "Compaction + cleanup passes.");
    metrics::describe_counter!(LEASE_RENEWALS_TOTAL, "Renewals of the writer lease of an index in a bucket.");
    metrics::describe_counter!(
        LEASE_RENEW_FAILURES_TOTAL,
        "Failed renewal attempts of the writer lease (retried until two thirds of its TTL)."
    );
    metrics::describe_counter!(
        LEASE_FENCED_WRITES_TOTAL,
        "Writes refused because the writer lease could not be confirmed first (lost, or the bucket unreachable)."
    );
    metrics::describe_gauge!(
        READER_LAG_SECONDS,
        "Seconds between a commit and the moment a reader serves it (0 while up to date)."
    );
    metrics::describe_gauge!(READER_VERSION, "Version of the chunks table a reader serves.");
    metrics::describe_counter!(READER_SWITCHES_TOTAL, "Versions a reader switched to.");
    metrics::describe_counter!(
        READER_ERRORS_TOTAL,
        "Failed checks or opens of a new version by a reader (it keeps serving the last one)."
    );
    metrics::describe_gauge!(
        INDEX_CACHE_BYTES,
        "Bytes held by LanceDB's process-wide caches, label cache (index: opened index structures; metadata: manifests, footers)."
    );
    metrics::describe_gauge!(
        INDEX_CACHE_ENTRIES,
        "Entries of LanceDB's process-wide caches, label cache (index, metadata)."
    );
    metrics::describe_counter!(
        INDEX_CACHE_HITS_TOTAL,
        "Lookups of LanceDB's process-wide caches that found their entry, label cache (index, metadata)."
    );
    metrics::describe_counter!(
        INDEX_CACHE_MISSES_TOTAL,
        "Lookups of LanceDB's process-wide caches that missed (the entry was read from the table's files and decoded), label cache (index, metadata)."
    );
    metrics::describe_counter!(
        INDEX_CACHE_EXPIRED_TOTAL,
        "Index cache entries dropped because nobody read them for minutes while newer entries came in (superseded full-text segments)."
    );
}
