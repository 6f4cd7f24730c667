//! Metric names of the model layer (all of them, in one place).

/// Counter: texts embedded by the model.
pub const EMBED_TEXTS_TOTAL: &str = "ctxd_embed_texts_total";
/// Counter: model tokens run through the model (padding excluded).
pub const EMBED_TOKENS_TOTAL: &str = "ctxd_embed_tokens_total";
/// Counter: padded positions run through the model (tokens + padding).
pub const EMBED_PADDED_TOKENS_TOTAL: &str = "ctxd_embed_padded_tokens_total";
/// Histogram: seconds one model forward pass took.
pub const EMBED_BATCH_SECONDS: &str = "ctxd_embed_batch_duration_seconds";
/// Histogram: texts per model forward pass.
pub const EMBED_BATCH_SIZE: &str = "ctxd_embed_batch_size_texts";
/// Gauge: model tokens per second of the last forward pass (throughput while busy, unlike
/// `rate(ctxd_embed_tokens_total)`, which includes idle time).
pub const EMBED_THROUGHPUT: &str = "ctxd_embed_throughput_tokens_per_second";
/// Histogram: seconds a request waited for the model thread, by `lane` (`interactive`: queries;
/// `bulk`: indexing and re-embedding; see `service`).
pub const EMBED_QUEUE_WAIT_SECONDS: &str = "ctxd_embed_queue_wait_seconds";
/// Counter: query embeddings answered from the query-vector cache (`query_cache`).
pub const EMBED_QUERY_CACHE_HITS_TOTAL: &str = "ctxd_embed_query_cache_hits_total";
/// Counter: query embeddings the query-vector cache did not have (computed by the model).
pub const EMBED_QUERY_CACHE_MISSES_TOTAL: &str = "ctxd_embed_query_cache_misses_total";
/// Gauge: 1, labelled with what runs the model and why: `backend` = onednn|candle, `device`
/// (`cpu` | `cuda:N`, what `auto` resolved to), `precision`, `isa` (the instruction set oneDNN
/// runs, e.g. `avx2` or `avx512_core_bf16`, which decides bf16; `cuda` on a GPU).
pub const EMBED_BACKEND_INFO: &str = "ctxd_embed_backend_info";
/// Counter: requests to an embedding endpoint (`[model] endpoint`) that failed and were retried,
/// by `kind` (`openai` | `tei`).
pub const EMBED_ENDPOINT_ERRORS_TOTAL: &str = "ctxd_embed_endpoint_errors_total";

/// Registers every metric of this crate with its description (the `# HELP` line of a scrape)
/// and creates the series the dashboards read at zero (texts and tokens embedded, throughput). Called by the binary once the recorder is installed.
pub fn describe() {
    // The series the dashboards read exist from the first scrape, at zero.
    for name in [EMBED_TEXTS_TOTAL, EMBED_TOKENS_TOTAL, EMBED_PADDED_TOKENS_TOTAL] {
        metrics::counter!(name).increment(0);
    }
    // No forward pass yet: no throughput.
    metrics::gauge!(EMBED_THROUGHPUT).set(0.0);
    metrics::describe_counter!(EMBED_TEXTS_TOTAL, "Texts embedded by the model.");
    metrics::describe_counter!(
        EMBED_ENDPOINT_ERRORS_TOTAL,
        "Requests to the embedding endpoint that failed and were retried (no connection, timeout, 429, 5xx)."
    );
    metrics::describe_counter!(EMBED_TOKENS_TOTAL, "Model tokens run through the model (padding excluded).");
    metrics::describe_counter!(EMBED_PADDED_TOKENS_TOTAL, "Padded positions run through the model (tokens + padding).");
    metrics::describe_histogram!(EMBED_BATCH_SECONDS, "Seconds one model forward pass took.");
    metrics::describe_histogram!(EMBED_BATCH_SIZE, "Texts per model forward pass.");
    metrics::describe_counter!(
        EMBED_QUERY_CACHE_HITS_TOTAL,
        "Query embeddings answered from the query-vector cache (a repeated question skips the model)."
    );
    metrics::describe_counter!(
        EMBED_QUERY_CACHE_MISSES_TOTAL,
        "Query embeddings the query-vector cache did not have (computed by the model)."
    );
    metrics::describe_histogram!(EMBED_QUEUE_WAIT_SECONDS, "Seconds a request waited for the model thread, by lane (interactive: queries, taken first; bulk: indexing and re-embedding).");
    metrics::describe_gauge!(EMBED_THROUGHPUT, "Model tokens per second of the last forward pass (throughput while busy, unlike rate(ctxd_embed_tokens_total), which includes idle time).");
    metrics::describe_gauge!(EMBED_BACKEND_INFO, "1, labelled with what runs the model and why: backend = onednn|candle, device (cpu | cuda:N, what auto resolved to), precision, isa (the instruction set oneDNN runs, e.g. avx2 or avx512_core_bf16, which decides bf16; cuda on a GPU).");
}
