//! Metric names of the wire (all of them, in one place): requests per endpoint, refused
//! tokens and aggregate sources. The query side's (routing, rescoring, caches) are in its own
//! crates' `metrics.rs`.

/// Histogram: seconds to answer a query, labels `endpoint` and `mode`.
pub const QUERY_DURATION_SECONDS: &str = "ctxd_query_duration_seconds";
/// Counter: queries answered, labels `endpoint`, `mode` and `status` (ok|client_error|error).
pub const QUERY_REQUESTS_TOTAL: &str = "ctxd_query_requests_total";
/// Counter: requests refused for a missing or wrong bearer token, label `transport` (http|flight).
pub const AUTH_FAILURES_TOTAL: &str = "ctxd_auth_failures_total";
/// Histogram: seconds one aggregate source took, label `source` (its configured name).
pub const AGGREGATE_SOURCE_SECONDS: &str = "ctxd_aggregate_source_duration_seconds";
/// Counter: aggregate source calls, labels `source` and `status` (ok|timeout|error).
pub const AGGREGATE_SOURCE_REQUESTS_TOTAL: &str = "ctxd_aggregate_source_requests_total";
/// Counter: tokens of a source's blocks that made it into aggregated contexts, label `source`.
pub const AGGREGATE_SOURCE_TOKENS_TOTAL: &str = "ctxd_aggregate_source_tokens_total";
/// Counter: aggregate source answers served from the cache, label `source`.
pub const AGGREGATE_CACHE_HITS_TOTAL: &str = "ctxd_aggregate_cache_hits_total";

/// Counter: HTTP handlers that panicked (each answered 500 with its request id).
pub const HANDLER_PANICS_TOTAL: &str = "ctxd_server_handler_panics_total";

/// Registers every metric of this crate with its description (the `# HELP` line of a scrape)
/// and creates the series the dashboards and alert rules read at zero (search requests, refused tokens). Called by the binary once the recorder is installed.
pub fn describe() {
    // The series the dashboards and alert rules read exist from the first scrape, at zero.
    metrics::counter!(QUERY_REQUESTS_TOTAL, "endpoint" => "search", "mode" => "routed", "status" => "ok").increment(0);
    let _ = metrics::histogram!(QUERY_DURATION_SECONDS, "endpoint" => "search", "mode" => "routed");
    metrics::counter!(AUTH_FAILURES_TOTAL, "transport" => "http").increment(0);
    metrics::counter!(HANDLER_PANICS_TOTAL).increment(0);
    metrics::describe_counter!(
        HANDLER_PANICS_TOTAL,
        "HTTP handlers that panicked (each answered 500 with its request id)."
    );
    metrics::describe_histogram!(QUERY_DURATION_SECONDS, "Seconds to answer a query, labels endpoint and mode.");
    metrics::describe_counter!(
        QUERY_REQUESTS_TOTAL,
        "Queries answered, labels endpoint, mode and status (ok|client_error|error)."
    );
    metrics::describe_counter!(
        AUTH_FAILURES_TOTAL,
        "Requests refused for a missing or wrong bearer token, label transport (http|flight)."
    );
    metrics::describe_histogram!(
        AGGREGATE_SOURCE_SECONDS,
        "Seconds one aggregate source took, label source (its configured name)."
    );
    metrics::describe_counter!(
        AGGREGATE_SOURCE_REQUESTS_TOTAL,
        "Aggregate source calls, labels source and status (ok|timeout|error)."
    );
    metrics::describe_counter!(
        AGGREGATE_SOURCE_TOKENS_TOTAL,
        "Tokens of a source's blocks that made it into aggregated contexts, label source."
    );
    metrics::describe_counter!(
        AGGREGATE_CACHE_HITS_TOTAL,
        "Aggregate source answers served from the cache, label source."
    );
}
