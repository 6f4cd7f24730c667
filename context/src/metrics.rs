//! Metric names of context assembly, completion and sessions, each described in [`describe`]
//! (subsystem `ctxd_query_`, as the dashboards read them).

/// Counter: completion-context requests answered from the per-location cache.
pub const COMPLETION_CACHE_HITS_TOTAL: &str = "ctxd_query_completion_cache_hits_total";
/// Counter: completion-context requests that searched (cache misses).
pub const COMPLETION_CACHE_MISSES_TOTAL: &str = "ctxd_query_completion_cache_misses_total";
/// Gauge: sessions held (see `session`).
pub const SESSIONS_ACTIVE: &str = "ctxd_query_sessions";
/// Gauge: estimated bytes held by sessions.
pub const SESSIONS_BYTES: &str = "ctxd_query_sessions_memory_bytes";
/// Counter: sessions dropped (expired, or evicted by the count or memory bound).
pub const SESSIONS_EXPIRED_TOTAL: &str = "ctxd_query_sessions_expired_total";
/// Counter: tokens answered within sessions, label `tool`.
pub const SESSION_TOKENS_TOTAL: &str = "ctxd_query_session_tokens_total";
/// Counter: candidates a session had already been sent, cited in one line instead of repeated.
pub const SESSION_REPEATS_AVOIDED_TOTAL: &str = "ctxd_query_session_repeats_avoided_total";

/// Registers every metric of this crate with its description (the `# HELP` line of a scrape)
/// and creates at zero the series the dashboards and alert rules read. Called by the binary
/// once the recorder is installed.
pub fn describe() {
    metrics::describe_counter!(
        COMPLETION_CACHE_HITS_TOTAL,
        "Completion-context requests answered from the per-location cache."
    );
    metrics::describe_counter!(
        COMPLETION_CACHE_MISSES_TOTAL,
        "Completion-context requests that searched (cache misses)."
    );
    metrics::describe_gauge!(SESSIONS_ACTIVE, "Sessions held (each remembers what it was sent).");
    metrics::describe_gauge!(SESSIONS_BYTES, "Estimated bytes held by sessions.");
    metrics::describe_counter!(
        SESSIONS_EXPIRED_TOTAL,
        "Sessions dropped: expired, or evicted by the session count or memory bound."
    );
    metrics::describe_counter!(SESSION_TOKENS_TOTAL, "Tokens answered within sessions, label tool.");
    metrics::describe_counter!(
        SESSION_REPEATS_AVOIDED_TOTAL,
        "Candidates a session had already been sent, cited in one line instead of repeated."
    );
}
