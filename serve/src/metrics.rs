//! Metric names of retrieval and serving (all of them, in one place).

/// Histogram: seconds to answer a query, labels `endpoint` and `mode`.
pub const QUERY_DURATION_SECONDS: &str = "ctxd_query_duration_seconds";
/// Counter: queries answered, labels `endpoint`, `mode` and `status` (ok|client_error|error).
pub const QUERY_REQUESTS_TOTAL: &str = "ctxd_query_requests_total";
/// Histogram: seconds spent rescoring a routed query's best candidates by late interaction.
pub const RERANK_SECONDS: &str = "ctxd_query_rerank_duration_seconds";
/// Counter: rescored candidates whose token embeddings came from the cache.
pub const RERANK_CACHE_HITS_TOTAL: &str = "ctxd_query_rerank_cache_hits_total";
/// Counter: rescored candidates encoded by the model.
pub const RERANK_CACHE_MISSES_TOTAL: &str = "ctxd_query_rerank_cache_misses_total";
/// Counter: routed queries, labels `route` (path|symbol|error|module|hybrid) and `intent`.
pub const ROUTE_QUERIES_TOTAL: &str = "ctxd_query_routed_total";
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
/// Counter: completion-context requests answered from the per-location cache.
pub const COMPLETION_CACHE_HITS_TOTAL: &str = "ctxd_query_completion_cache_hits_total";
/// Counter: completion-context requests that searched (cache misses).
pub const COMPLETION_CACHE_MISSES_TOTAL: &str = "ctxd_query_completion_cache_misses_total";
