//! What a re-embedding job takes and reports, shared by `ctxd reembed` (the `reembed` module)
//! and the migration of tables an older ctxd wrote (the `migrate` module): options, progress
//! callbacks, the report, the model a job embeds with, and the tag on the source version a
//! pass reads.

use ctxd_index::{active, error::IndexError, maintenance::MaintenanceOptions, store::Index};
use ctxd_models::service::EmbedService;

use crate::error::PipelineError;

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
    /// `ctxd reembed --commit`: first publish, in one commit, the fragments every shard of a
    /// distributed job staged ([`super::shard`]), then finish as a whole job does.
    pub commit_shards: bool,
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
                vector_index_min_rows: ctxd_index::maintenance::DEFAULT_VECTOR_INDEX_MIN_ROWS,
            },
            commit_shards: false,
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

/// The table a job for `model` (dimension `dim`) writes: the one an earlier switch used for
/// it, else `chunks__<model-slug>` (`-2`, `-3`, … when that name is taken by the source or by a
/// table of an older ctxd). Never the source, never a table without `embed_key`.
async fn target_table(
    db: &str,
    history: &[active::ActiveTable],
    source: &str,
    model: &str,
    dim: usize,
) -> Result<String, PipelineError> {
    let base = active::table_for_model(model);
    let earlier = history.iter().rev().filter(|r| r.model_id == model && r.dim == dim).map(|r| r.table_name.clone());
    let fresh = std::iter::once(base.clone()).chain((2..10).map(|n| format!("{base}-{n}")));
    for name in earlier.chain(fresh) {
        if name == source {
            continue;
        }
        match Index::open_table(db, &name).await {
            Err(IndexError::Missing { .. }) => return Ok(name),
            Ok(table) if table.embed_keyed() => return Ok(name),
            Ok(_) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(job_error(db, format!("no free table name for model '{model}' ({base}, {base}-2 … {base}-9 are taken)")))
}

/// What a job (or a shard of one) works on: the source (the active table), the target table's
/// name and handle.
pub(crate) struct Job {
    pub source: Index,
    pub to_table: String,
    pub target: Index,
}

/// Opens the source and the target for `model`, refusing the model the index already uses.
/// With `record_history`, an index never switched before first records its current table in
/// the pointer's history (shards do not write the history: their commit step does).
pub(crate) async fn open_job(db: &str, model: &JobModel, record_history: bool) -> Result<Job, PipelineError> {
    let source = Index::open(db).await?;
    let (to_model, dim) = (model.id.clone(), model.dim);
    if source.model_id() == to_model && source.embed_keyed() {
        return Err(job_error(
            db,
            format!("the index already uses model '{to_model}' (table {}); nothing to re-embed", source.table_name()),
        ));
    }
    let mut history = active::history(db).await?;
    if history.is_empty() && record_history {
        // Record what is in force now, so switching back finds this table again (with no spec:
        // whatever built the index is configured already).
        history.push(active::switch(db, source.table_name(), source.model_id(), "", source.dim()).await?);
    }
    let to_table = target_table(db, &history, source.table_name(), &to_model, dim).await?;
    let target = Index::open_or_create_table(db, &to_table, &to_model, dim).await.map_err(|e| match e {
        IndexError::ModelMismatch { indexed, indexed_dim, .. } => job_error(
            db,
            format!(
                "table {to_table} holds vectors of '{indexed}' (dim {indexed_dim}), not '{to_model}' (dim {dim}); drop it or pick another model"
            ),
        ),
        e => e.into(),
    })?;
    Ok(Job { source, to_table, target })
}
