//! What a re-embedding job takes and reports, shared by `ctxd reembed` (the `reembed` module)
//! and the migration of tables an older ctxd wrote (the `migrate` module): options, progress
//! callbacks, the report, the model a job embeds with, and the tag on the source version a
//! pass reads.

use ctxd_index::MaintenanceOptions;
use ctxd_models::EmbedService;

use crate::PipelineError;

/// How a job runs.
#[derive(Debug, Clone)]
pub struct ReembedOptions {
    /// Rows per block (one embed request, one commit to the target).
    pub rows_per_block: usize,
    /// Switch queries to the new table when done (false: prepare only; run again to switch).
    pub switch: bool,
    /// Catch-up rounds before giving up on a source that keeps changing.
    pub max_catch_up_rounds: usize,
    /// Maintenance of the finished target (vector index threshold, version retention).
    pub maintenance: MaintenanceOptions,
}

impl Default for ReembedOptions {
    fn default() -> Self {
        Self {
            rows_per_block: 256,
            switch: true,
            max_catch_up_rounds: 5,
            maintenance: MaintenanceOptions {
                retain: std::time::Duration::from_secs(3600),
                single_writer: false,
                vector_index_min_rows: ctxd_index::DEFAULT_VECTOR_INDEX_MIN_ROWS,
            },
        }
    }
}

/// Progress callbacks (the CLI drives an indicatif bar with them).
pub trait Progress: Send + Sync {
    /// A pass over `total` rows starts, `done` of them already in the target.
    fn start(&self, phase: &str, total: u64, done: u64);
    /// `n` more rows are in the target.
    fn advance(&self, n: u64);
}

/// No progress output.
pub struct Quiet;

impl Progress for Quiet {
    fn start(&self, _: &str, _: u64, _: u64) {}
    fn advance(&self, _: u64) {}
}

/// What a job did.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct ReembedReport {
    pub from_table: String,
    pub from_model: String,
    pub to_table: String,
    pub to_model: String,
    /// Rows of the source at the end.
    pub rows: usize,
    /// Rows embedded and written by this run.
    pub embedded: u64,
    /// Rows found already done (an earlier, interrupted run).
    pub resumed: usize,
    /// Target rows deleted because the source no longer has them.
    pub removed: usize,
    /// Diff rounds after the first pass.
    pub catch_up_rounds: usize,
    pub seconds: f64,
    pub rows_per_second: f64,
    /// Whether queries now use the target.
    pub switched: bool,
    /// The target's LanceDB version at the end.
    pub version: u64,
    /// With `--commit`: the shards whose fragments were published, and their rows.
    pub shards: u32,
    pub staged_rows: u64,
}

/// Tag on the source version a pass reads (removed when the job is done).
pub const SOURCE_TAG: &str = "ctxd-reembed-source";

pub(crate) fn job_error(db: &str, message: impl Into<String>) -> PipelineError {
    PipelineError::Reembed { db: db.to_string(), message: message.into() }
}

/// The model a job embeds with: its id and dimension, and the service (`None` for a
/// full-text-only index, whose rows have no vectors to compute).
#[derive(Clone)]
pub struct JobModel {
    pub id: String,
    pub dim: usize,
    pub service: Option<EmbedService>,
}

impl From<EmbedService> for JobModel {
    fn from(service: EmbedService) -> Self {
        Self { id: service.model_id().to_string(), dim: service.dim(), service: Some(service) }
    }
}
