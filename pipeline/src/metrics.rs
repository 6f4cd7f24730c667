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
/// Gauge: 1 once the initial scan is committed.
pub const PIPELINE_READY: &str = "ctxd_pipeline_ready_bool";

/// Every generic per-stage metric name (used by the metrics-contract test).
pub const PER_STAGE: &[&str] =
    &[STAGE_RECEIVED_TOTAL, STAGE_SENT_TOTAL, STAGE_QUEUE_DEPTH, STAGE_BLOCKED_SECONDS_TOTAL, STAGE_PROCESSING_SECONDS];
