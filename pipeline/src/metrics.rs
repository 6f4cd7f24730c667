//! Metric names of the runtime (all of them, in one place). Every stage exports the same
//! generic set, told apart by the `stage` label.

/// Counter: items a stage received, label `stage`.
pub const STAGE_RECEIVED_TOTAL: &str = "ctxd_stage_received_items_total";
/// Counter: items a stage sent downstream, label `stage`.
pub const STAGE_SENT_TOTAL: &str = "ctxd_stage_sent_items_total";
/// Counter: items a stage dropped on purpose (unchanged, binary, …), label `stage`.
pub const STAGE_DROPPED_TOTAL: &str = "ctxd_stage_dropped_items_total";
/// Counter: items that failed, labels `stage` and `error` (a short kind, never a path).
pub const STAGE_ERRORS_TOTAL: &str = "ctxd_stage_errors_total";
/// Gauge: items waiting in a stage's input queue, label `stage`.
pub const STAGE_QUEUE_DEPTH: &str = "ctxd_stage_queue_depth_items";
/// Gauge: capacity of a stage's input queue, label `stage`.
pub const STAGE_QUEUE_CAPACITY: &str = "ctxd_stage_queue_capacity_items";
/// Counter: seconds a stage spent blocked on a full downstream queue, label `stage`.
pub const STAGE_BLOCKED_SECONDS_TOTAL: &str = "ctxd_stage_blocked_seconds_total";
/// Histogram: seconds a stage spent on one item or batch, label `stage`.
pub const STAGE_PROCESSING_SECONDS: &str = "ctxd_stage_processing_duration_seconds";
/// Histogram: items per batch of a batching stage, label `stage`.
pub const STAGE_BATCH_ITEMS: &str = "ctxd_stage_batch_size_items";
/// Gauge: files emitted by the source and not yet committed or skipped.
pub const PIPELINE_IN_FLIGHT: &str = "ctxd_pipeline_in_flight_files";
/// Histogram: seconds from a watched file's change (its mtime; the event for a removal) to
/// the commit that makes it searchable.
pub const PIPELINE_FRESHNESS_SECONDS: &str = "ctxd_pipeline_freshness_seconds";
/// Gauge: the freshness of the last change committed, in seconds.
pub const PIPELINE_FRESHNESS_LAG_SECONDS: &str = "ctxd_pipeline_freshness_lag_seconds";
/// Counter: rows a re-embedding job wrote to its target table.
pub const REEMBED_ROWS_TOTAL: &str = "ctxd_reembed_rows_total";
/// Counter: switches of the active chunks table a running daemon followed.
pub const MODEL_SWITCHES_TOTAL: &str = "ctxd_pipeline_model_switches_total";
/// Counter: reloads of the sources a running daemon was asked for (`SIGHUP`), by `result`
/// (`applied`, `unchanged`, `failed`).
pub const SOURCE_RELOADS_TOTAL: &str = "ctxd_pipeline_source_reloads_total";
/// Counter: a daemon's background fits of the query adapter, by `outcome` (`kept`, `refused`:
/// no fit beat the base model, `stopped`: at shutdown, `failed`).
pub const ADAPT_RUNS_TOTAL: &str = "ctxd_adapt_runs_total";
/// Gauge (only increases): seconds those fits worked (their rests left out).
pub const ADAPT_BUSY_SECONDS_TOTAL: &str = "ctxd_adapt_busy_seconds_total";
/// Histogram: wall-clock seconds of a background fit (finished, stopped or failed), rests included.
pub const ADAPT_RUN_SECONDS: &str = "ctxd_adapt_run_duration_seconds";
/// Gauge: 1 while a background fit runs.
pub const ADAPT_RUNNING: &str = "ctxd_adapt_running_bool";
/// Gauge: 1 while the last fit's adapter is in use, 0 when it was refused.
pub const ADAPT_IN_USE: &str = "ctxd_adapt_in_use_bool";
/// Gauge: MRR@10 of the newest commits held out by the last fit, label `ranking` (`base`, `adapted`).
pub const ADAPT_HELD_OUT_MRR: &str = "ctxd_adapt_held_out_mrr_ratio";
/// Gauge: 1 once the initial scan is committed.
pub const PIPELINE_READY: &str = "ctxd_pipeline_ready_bool";

/// Every generic per-stage metric name (used by the metrics-contract test).
pub const PER_STAGE: &[&str] =
    &[STAGE_RECEIVED_TOTAL, STAGE_SENT_TOTAL, STAGE_QUEUE_DEPTH, STAGE_BLOCKED_SECONDS_TOTAL, STAGE_PROCESSING_SECONDS];

/// Registers every metric of this crate with its description (the `# HELP` line of a scrape)
/// and creates the series the dashboards and alert rules read at zero (per stage, freshness). Called by the binary once the recorder is installed.
pub fn describe() {
    // The series the dashboards and alert rules read exist from the first scrape, at zero.
    for stage in ["watch", "load", "chunk", "embed", "upsert"] {
        for name in [STAGE_RECEIVED_TOTAL, STAGE_SENT_TOTAL, STAGE_DROPPED_TOTAL] {
            metrics::counter!(name, "stage" => stage).increment(0);
        }
        // Float seconds: a gauge that only increases (the `metrics` facade has no float counter).
        metrics::gauge!(STAGE_BLOCKED_SECONDS_TOTAL, "stage" => stage).increment(0.0);
    }
    metrics::gauge!(PIPELINE_FRESHNESS_LAG_SECONDS).set(0.0);
    let _ = metrics::histogram!(PIPELINE_FRESHNESS_SECONDS);
    metrics::describe_counter!(STAGE_RECEIVED_TOTAL, "Items a stage received, label stage.");
    metrics::describe_counter!(STAGE_SENT_TOTAL, "Items a stage sent downstream, label stage.");
    metrics::describe_counter!(
        STAGE_DROPPED_TOTAL,
        "Items a stage dropped on purpose (unchanged, binary, …), label stage."
    );
    metrics::describe_counter!(
        STAGE_ERRORS_TOTAL,
        "Items that failed, labels stage and error (a short kind, never a path)."
    );
    metrics::describe_gauge!(STAGE_QUEUE_DEPTH, "Items waiting in a stage's input queue, label stage.");
    metrics::describe_gauge!(STAGE_QUEUE_CAPACITY, "Capacity of a stage's input queue, label stage.");
    metrics::describe_gauge!(
        STAGE_BLOCKED_SECONDS_TOTAL,
        "Seconds a stage spent blocked on a full downstream queue, label stage (only increases: rate() it)."
    );
    metrics::describe_histogram!(STAGE_PROCESSING_SECONDS, "Seconds a stage spent on one item or batch, label stage.");
    metrics::describe_histogram!(STAGE_BATCH_ITEMS, "Items per batch of a batching stage, label stage.");
    metrics::describe_gauge!(PIPELINE_IN_FLIGHT, "Files emitted by the source and not yet committed or skipped.");
    metrics::describe_histogram!(PIPELINE_FRESHNESS_SECONDS, "Seconds from a watched file's change (its mtime; the event for a removal) to the commit that makes it searchable.");
    metrics::describe_gauge!(PIPELINE_FRESHNESS_LAG_SECONDS, "The freshness of the last change committed, in seconds.");
    metrics::describe_counter!(REEMBED_ROWS_TOTAL, "Rows a re-embedding job wrote to its target table.");
    metrics::describe_counter!(MODEL_SWITCHES_TOTAL, "Switches of the active chunks table a running daemon followed.");
    metrics::describe_gauge!(PIPELINE_READY, "1 once the initial scan is committed.");
    describe_adapt();
    metrics::describe_counter!(
        SOURCE_RELOADS_TOTAL,
        "Reloads of the sources a running daemon was asked for (SIGHUP), by result (applied, unchanged, failed)."
    );
}

/// The background query-adapter fit's metrics (`crate::adapt_job`); its runs counter at zero.
fn describe_adapt() {
    for outcome in ["kept", "refused", "stopped", "failed"] {
        metrics::counter!(ADAPT_RUNS_TOTAL, "outcome" => outcome).increment(0);
    }
    metrics::gauge!(ADAPT_BUSY_SECONDS_TOTAL).increment(0.0);
    metrics::gauge!(ADAPT_RUNNING).set(0.0);
    metrics::describe_gauge!(ADAPT_RUNNING, "1 while a background fit of the query adapter runs.");
    metrics::describe_counter!(
        ADAPT_RUNS_TOTAL,
        "Background fits of the query adapter, by outcome (kept, refused: no fit beat the base model, stopped: at shutdown, failed)."
    );
    metrics::describe_gauge!(
        ADAPT_BUSY_SECONDS_TOTAL,
        "Seconds the background fits of the query adapter worked, their rests left out (only increases: rate() it)."
    );
    metrics::describe_histogram!(
        ADAPT_RUN_SECONDS,
        "Wall-clock seconds of a background fit of the query adapter (finished, stopped or failed), rests included."
    );
    metrics::describe_gauge!(ADAPT_IN_USE, "1 while the last fit's query adapter is in use, 0 when it was refused.");
    metrics::describe_gauge!(
        ADAPT_HELD_OUT_MRR,
        "MRR@10 of the newest commits held out by the last fit of the query adapter, label ranking (base, adapted)."
    );
}
