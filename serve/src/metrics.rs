//! Metric names of retrieval and serving (all of them, in one place).

/// Histogram: seconds to answer a query, labels `endpoint` and `mode`.
pub const QUERY_DURATION_SECONDS: &str = "ctxd_query_duration_seconds";
/// Counter: queries answered, labels `endpoint`, `mode` and `status` (ok|client_error|error).
pub const QUERY_REQUESTS_TOTAL: &str = "ctxd_query_requests_total";
/// Counter: routed queries, labels `route` (path|symbol|error|module|hybrid) and `intent`.
pub const ROUTE_QUERIES_TOTAL: &str = "ctxd_query_routed_total";
/// Counter: requests refused for a missing or wrong bearer token, label `transport` (http|flight).
pub const AUTH_FAILURES_TOTAL: &str = "ctxd_auth_failures_total";
