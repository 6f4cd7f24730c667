//! Metric names of search (all of them, in one place): routing, rescoring, admission and the
//! answer cache; each described in [`describe`]. Names keep the `ctxd_query_` subsystem the
//! dashboards read.

/// Histogram: seconds spent rescoring a routed query's best candidates by late interaction.
pub const RERANK_SECONDS: &str = "ctxd_query_rerank_duration_seconds";
/// Counter: rescored candidates whose score or token embeddings came from the cache.
pub const RERANK_CACHE_HITS_TOTAL: &str = "ctxd_query_rerank_cache_hits_total";
/// Counter: rescored candidates encoded by the model.
pub const RERANK_CACHE_MISSES_TOTAL: &str = "ctxd_query_rerank_cache_misses_total";
/// Rescored candidates scored from the late-interaction codes stored with them (no encoding).
pub const RERANK_STORED_TOTAL: &str = "ctxd_query_rerank_stored_total";
/// Query texts a routed search sent to the model (a pass for its vector and token states
/// together counts once).
pub const QUERY_ENCODINGS_TOTAL: &str = "ctxd_query_encodings_total";
/// Counter: routed queries, labels `route` (path|symbol|error|module|hybrid) and `intent`.
pub const ROUTE_QUERIES_TOTAL: &str = "ctxd_query_routed_total";
/// Gauge: queries running now (admission slots taken).
pub const QUERY_IN_FLIGHT: &str = "ctxd_query_in_flight";
/// Gauge: queries waiting for an admission slot now.
pub const QUERY_QUEUED: &str = "ctxd_query_queued";
/// Counter: queries answered 503 by admission control, label `reason` (queue_full|queue_timeout).
pub const QUERY_REJECTED_TOTAL: &str = "ctxd_query_rejected_total";
/// Histogram: seconds a query waited for an admission slot (only those that waited).
pub const QUERY_QUEUE_WAIT_SECONDS: &str = "ctxd_query_queue_wait_seconds";
/// Counter: searches answered from the per-version answer cache.
pub const ANSWER_CACHE_HITS_TOTAL: &str = "ctxd_query_answer_cache_hits_total";
/// Counter: searches answered while busy from a superseded version's answers (`stale_ms` set).
pub const ANSWER_CACHE_STALE_HITS_TOTAL: &str = "ctxd_query_answer_cache_stale_hits_total";
/// Counter: searches answered from an answer carried across commits that changed none of the
/// files it read or ranked (`carried_ms` set).
pub const ANSWER_CACHE_CARRIED_HITS_TOTAL: &str = "ctxd_query_answer_cache_carried_hits_total";
/// Counter: answers carried to a later index version (one per answer and version reached).
pub const ANSWER_CACHE_CARRIED_TOTAL: &str = "ctxd_query_answer_cache_carried_total";
/// Counter: later index versions the answers could not be carried to (the change log could not
/// tell which files the commits in between changed: every question is computed again).
pub const ANSWER_CACHE_UNCARRIED_TOTAL: &str = "ctxd_query_answer_cache_uncarried_total";
/// Counter: searches that waited for the same question's computation by another request.
pub const ANSWER_CACHE_JOINED_TOTAL: &str = "ctxd_query_answer_cache_joined_total";
/// Counter: stale and carried answers' questions computed again in the background.
pub const ANSWER_CACHE_REVALIDATIONS_TOTAL: &str = "ctxd_query_answer_cache_revalidations_total";
/// Gauge: answers the answer cache keeps now, every generation together (bounded by
/// `answers::ANSWER_CACHE_ENTRIES`).
pub const ANSWER_CACHE_ANSWERS: &str = "ctxd_query_answer_cache_answers";
/// Histogram: seconds a rebuild of the latest version's path vocabulary took (a scan of every
/// indexed path, once per changed version and at most every few seconds; queries do not wait for it).
pub const VOCAB_BUILD_SECONDS: &str = "ctxd_query_vocab_build_duration_seconds";
/// Histogram: seconds one signal of a routed search took, label `signal`
/// (embed|vector|fulltext|symbols|paths); the signals of one search partly overlap.
pub const SIGNAL_SECONDS: &str = "ctxd_query_signal_duration_seconds";
/// Counter: searches computed (answer cache misses).
pub const ANSWER_CACHE_MISSES_TOTAL: &str = "ctxd_query_answer_cache_misses_total";

/// Registers every metric of this crate with its description (the `# HELP` line of a scrape)
/// and creates at zero the series the dashboards and alert rules read. Called by the binary
/// once the recorder is installed.
pub fn describe() {
    // The series the dashboards and alert rules read exist from the first scrape, at zero.
    metrics::gauge!(QUERY_IN_FLIGHT).set(0.0);
    metrics::gauge!(QUERY_QUEUED).set(0.0);
    for reason in ["queue_full", "queue_timeout"] {
        metrics::counter!(QUERY_REJECTED_TOTAL, "reason" => reason).increment(0);
    }
    metrics::counter!(ANSWER_CACHE_HITS_TOTAL).increment(0);
    metrics::counter!(ANSWER_CACHE_STALE_HITS_TOTAL).increment(0);
    metrics::counter!(ANSWER_CACHE_JOINED_TOTAL).increment(0);
    metrics::counter!(ANSWER_CACHE_UNCARRIED_TOTAL).increment(0);
    metrics::counter!(ANSWER_CACHE_REVALIDATIONS_TOTAL).increment(0);
    metrics::counter!(ANSWER_CACHE_MISSES_TOTAL).increment(0);
    metrics::describe_histogram!(
        RERANK_SECONDS,
        "Seconds spent rescoring a routed query's best candidates by late interaction."
    );
    metrics::describe_counter!(
        RERANK_CACHE_HITS_TOTAL,
        "Rescored candidates whose score or token embeddings came from the cache (no encoding)."
    );
    metrics::describe_counter!(RERANK_CACHE_MISSES_TOTAL, "Rescored candidates encoded by the model.");
    metrics::describe_counter!(
        RERANK_STORED_TOTAL,
        "Rescored candidates scored from the late-interaction codes stored with them (no encoding)."
    );
    metrics::describe_counter!(
        QUERY_ENCODINGS_TOTAL,
        "Query texts routed searches sent to the model (vector and token states from one pass count once)."
    );
    metrics::describe_counter!(
        ROUTE_QUERIES_TOTAL,
        "Routed queries, labels route (path|symbol|error|module|hybrid) and intent."
    );
    metrics::describe_gauge!(QUERY_IN_FLIGHT, "Queries running now (admission slots taken).");
    metrics::describe_gauge!(QUERY_QUEUED, "Queries waiting for an admission slot now.");
    metrics::describe_counter!(
        QUERY_REJECTED_TOTAL,
        "Queries answered 503 with Retry-After by admission control, label reason (queue_full|queue_timeout)."
    );
    metrics::describe_histogram!(
        QUERY_QUEUE_WAIT_SECONDS,
        "Seconds a query waited for an admission slot (only queries that waited)."
    );
    metrics::describe_counter!(ANSWER_CACHE_HITS_TOTAL, "Searches answered from the per-version answer cache.");
    metrics::describe_counter!(
        ANSWER_CACHE_STALE_HITS_TOTAL,
        "Searches answered while queries waited from the answers of a superseded index version (server.stale_answer_ms)."
    );
    metrics::describe_counter!(
        ANSWER_CACHE_CARRIED_HITS_TOTAL,
        "Searches answered from an answer kept across commits that changed none of the files it answers with (carried_ms set)."
    );
    metrics::describe_counter!(
        ANSWER_CACHE_CARRIED_TOTAL,
        "Answers carried to a later index version because its commits changed none of the files they answer with."
    );
    metrics::describe_counter!(
        ANSWER_CACHE_UNCARRIED_TOTAL,
        "Later index versions no answer could be carried to, because the change log could not tell which files the commits in between changed."
    );
    metrics::describe_counter!(
        ANSWER_CACHE_JOINED_TOTAL,
        "Searches that waited, without a slot, for another request computing the same question at the same version."
    );
    metrics::describe_counter!(
        ANSWER_CACHE_REVALIDATIONS_TOTAL,
        "Questions answered stale while busy, or from a carried answer, computed again at the latest version in the background."
    );
    metrics::describe_counter!(ANSWER_CACHE_MISSES_TOTAL, "Searches computed (answer cache misses).");
    metrics::describe_histogram!(
        VOCAB_BUILD_SECONDS,
        "Seconds a rebuild of the latest version's path vocabulary took (every indexed path scanned; queries go on with the previous one)."
    );
    metrics::describe_histogram!(
        SIGNAL_SECONDS,
        "Seconds one signal of a computed routed search took, label signal (embed|vector|fulltext|symbols|paths; embed includes the wait for the model thread, and it runs beside fulltext; a search given its nearest chunks, as completion context's, times no vector step)."
    );
    metrics::describe_gauge!(ANSWER_CACHE_ANSWERS, "Answers the answer cache keeps now, every generation together.");
}
