//! A daemon's background query-adapter job: once the first scan is committed it checks every few
//! seconds whether the recorded git history changed since the stored adapter was fitted (a ref
//! moved, a work tree's `HEAD` got a commit) and, at most every `[index] adapt_interval_secs`,
//! fits it again ([`crate::adapt::adapt`]) at `[index] adapt_cpu_percent` of the wall-clock time,
//! its messages embedded in the model's bulk lane (behind queries), on the writer's threads (at
//! `[pipeline] writer_nice`). Queries keep answering throughout: they read the adapter stored
//! last until the new one is committed in one write. Shutdown stops a fit between steps, storing
//! nothing. Each run is logged and counted (`ctxd_adapt_*`, [`crate::metrics`]); a failed one
//! is retried after the interval.

use std::sync::Arc;
use std::time::Duration;

use ctxd_index::store::Index;
use ctxd_models::service::EmbedService;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::adapt::{adapt, AdaptOutcome, Pace};
use crate::metrics as m;
use crate::stage_tasks::Tracker;

/// How often the history's version is compared with the stored adapter's.
const POLL: Duration = Duration::from_secs(5);

/// The job's settings (`[index] adapt_cpu_percent`, `adapt_interval_secs`).
pub(crate) struct AdaptJob {
    pub share: f64,
    pub every: Duration,
}

/// Runs the job until `shutdown` turns true.
pub(crate) async fn run(
    index: Arc<Index>,
    embed: EmbedService,
    job: AdaptJob,
    scanned: Tracker,
    mut shutdown: watch::Receiver<bool>,
) {
    tokio::select! {
        _ = scanned.wait_ready() => {}
        _ = shutdown.wait_for(|s| *s) => return,
    }
    let (mut last, mut seen): (Option<Instant>, u64) = (None, 0);
    loop {
        if last.is_none_or(|t| t.elapsed() >= job.every) && due(&index, &mut seen).await {
            last = Some(Instant::now());
            if !fit_once(&index, &embed, &job, &shutdown).await {
                return;
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(POLL) => {}
            _ = shutdown.wait_for(|s| *s) => return,
        }
    }
}

/// Whether the history at its current version is due a fit ([`crate::adapt::due`]); `seen` is
/// the last version judged not due, so an unchanged table is not read again every poll.
async fn due(index: &Index, seen: &mut u64) -> bool {
    let version = match index.history().history_version().await {
        Ok(v) => v,
        Err(e) => {
            tracing::warn!("query adapter: reading the history's version: {e}");
            return false;
        }
    };
    if version == 0 || version == *seen {
        return false;
    }
    match crate::adapt::due(index, version).await {
        Ok(true) => true,
        Ok(false) => {
            *seen = version;
            false
        }
        Err(e) => {
            tracing::warn!("query adapter: reading the stored adapter and the history: {e}");
            false
        }
    }
}

/// One paced fit, logged and counted; false when shutdown stopped it.
async fn fit_once(index: &Index, embed: &EmbedService, job: &AdaptJob, shutdown: &watch::Receiver<bool>) -> bool {
    tracing::info!(share = job.share, "query adapter: fitting on the changed history in the background");
    let mut pace = Pace::new(job.share, shutdown.clone());
    let started = Instant::now();
    metrics::gauge!(m::ADAPT_RUNNING).set(1.0);
    let result = adapt(index, embed, &mut pace, None).await;
    metrics::gauge!(m::ADAPT_RUNNING).set(0.0);
    // Every run, finished or not, so that busy seconds over run seconds is the share kept.
    metrics::gauge!(m::ADAPT_BUSY_SECONDS_TOTAL).increment(pace.busy().as_secs_f64());
    metrics::histogram!(m::ADAPT_RUN_SECONDS).record(started.elapsed().as_secs_f64());
    let outcome = match result {
        Ok(Some(o)) => {
            record(&o);
            if o.selection.fit.is_some() {
                "kept"
            } else {
                "refused"
            }
        }
        Ok(None) => {
            tracing::info!("query adapter: the background fit stopped at shutdown; nothing stored");
            metrics::counter!(m::ADAPT_RUNS_TOTAL, "outcome" => "stopped").increment(1);
            return false;
        }
        Err(e) => {
            tracing::warn!("query adapter: the background fit failed (retried after the interval): {e}");
            "failed"
        }
    };
    metrics::counter!(m::ADAPT_RUNS_TOTAL, "outcome" => outcome).increment(1);
    true
}

/// Logs a finished fit and sets the gauges of its judgement.
fn record(o: &AdaptOutcome) {
    let s = &o.selection;
    metrics::gauge!(m::ADAPT_IN_USE).set(if s.fit.is_some() { 1.0 } else { 0.0 });
    metrics::gauge!(m::ADAPT_HELD_OUT_MRR, "ranking" => "base").set(s.base_mrr);
    metrics::gauge!(m::ADAPT_HELD_OUT_MRR, "ranking" => "adapted").set(s.adapted_mrr);
    tracing::info!(
        in_use = s.fit.is_some(),
        commits = s.commits,
        held_out = s.held_out,
        base_mrr = format!("{:.3}", s.base_mrr),
        adapted_mrr = format!("{:.3}", s.adapted_mrr),
        busy_ms = o.busy_ms,
        wall_ms = o.wall_ms,
        history_version = o.history_version,
        "query adapter: fitted in the background"
    );
}
