//! The writing side of `ctxd serve` (roles `both` and `writer`): [`follow_switches`], which
//! starts a new [`Generation`] when `ctxd reembed` switches the active table and swaps the
//! searcher once it is ready, and applies the sources a `SIGHUP` reloads.

use std::time::Duration;

use ctxd_config::Config;
use ctxd_pipeline::pipeline::Pipeline;
use ctxd_pipeline::trigger::Triggers;
use ctxd_search::searcher::Searcher;
use ctxd_search::sources::LiveAccess;

use crate::error::RoleError;
use crate::generation::Generation;
use crate::reload::{access_of, failed, with_sources};
use crate::sdnotify::notify;

/// What the writer's loop works with besides its generation.
pub struct Writer {
    /// The configuration in force (its sources replaced by a reload).
    pub cfg: Config,
    /// The searcher every query surface holds, moved to each new generation's table and model.
    pub searcher: Searcher,
    /// How long a generation's drain may take.
    pub drain: Duration,
    /// What the query surfaces know of the sources (replaced by a reload).
    pub access: LiveAccess,
    /// The daemon's triggers: every new pipeline gets them (webhook pokes keep reaching the git
    /// sources).
    pub triggers: Triggers,
    /// The pipeline running now (answers' `changed_since`, `/v1/status`), moved to each new one.
    pub live: ctxd_pipeline::progress::LiveRun,
}

/// How often the daemon checks whether `ctxd reembed` switched the active chunks table.
const SWITCH_POLL: Duration = Duration::from_secs(2);

/// Follows model switches until `stop` fires; returns the generation then in force.
///
/// When the active table changes (`ctxd reembed` committed a switch), a new generation is
/// started on it — the new model loaded, the pipeline's start-up reconciliation indexing
/// whatever changed since the job's last catch-up — and once its initial scan is committed
/// the searcher is switched and the old generation drained. Queries are answered by the old
/// table and model until that moment. A failing start keeps the old generation and is retried.
///
/// It also applies reloaded sources (`SIGHUP`, [`crate::reload`]): `reloads` brings the
/// configuration read again; the pipeline is drained and started on the new sources, and the
/// writer's `access` (what the query surfaces know of the sources) replaced.
pub async fn follow_switches(
    mut w: Writer,
    mut current: Generation,
    mut stop: tokio::sync::oneshot::Receiver<()>,
    mut reloads: tokio::sync::mpsc::Receiver<Config>,
) -> Generation {
    let db = w.cfg.index.db.to_string_lossy().into_owned();
    loop {
        tokio::select! {
            _ = &mut stop => return current,
            _ = tokio::time::sleep(SWITCH_POLL) => {}
            Some(fresh) = reloads.recv() => {
                current = apply_sources(&mut w, fresh, current).await;
                continue;
            }
        }
        let active = match ctxd_index::active::current(&db).await {
            Ok(Some(a)) if a.table_name != current.pipeline.index().table_name() => a,
            Ok(_) => continue,
            Err(e) => {
                tracing::warn!("checking the active model of {db}: {e}");
                continue;
            }
        };
        tracing::info!(table = %active.table_name, model = %active.model_id, "model switch: opening the new table");
        let next = async {
            let pipeline = Pipeline::open(w.cfg.clone()).await?.with_triggers(w.triggers.clone());
            if pipeline.index().table_name() != active.table_name {
                let now = pipeline.index().table_name().to_string();
                return Err(RoleError::Raced { expected: active.table_name.clone(), now });
            }
            Generation::start(pipeline)
        };
        let next = tokio::select! {
            _ = &mut stop => return current,
            next = next => next,
        };
        let next = match next {
            Ok(next) => next,
            Err(e) => {
                tracing::error!("model switch to {} failed, still serving the old table: {e}", active.table_name);
                continue;
            }
        };
        let tracker = next.running.tracker();
        tokio::select! {
            _ = &mut stop => {
                next.stop(w.drain).await;
                return current;
            }
            _ = tracker.wait_ready() => {}
        }
        w.searcher.switch(next.pipeline.index(), next.pipeline.embedder());
        w.live.set(next.running.tracker(), next.running.progress());
        metrics::gauge!(ctxd_pipeline::metrics::PIPELINE_READY).set(1.0);
        metrics::counter!(ctxd_pipeline::metrics::MODEL_SWITCHES_TOTAL).increment(1);
        tracing::info!(table = %active.table_name, model = %active.model_id, "model switch: queries use the new table");
        notify(&format!("STATUS=serving model {}", active.model_id));
        let old = std::mem::replace(&mut current, next);
        old.stop(w.drain).await;
    }
}

/// Applies the sources of `fresh` (see [`crate::reload`]): checked first, then the running
/// pipeline drained and a new one started on them. Returns the generation in force after.
async fn apply_sources(w: &mut Writer, fresh: Config, current: Generation) -> Generation {
    let Writer { cfg, searcher, drain, access, triggers, live } = w;
    let drain = *drain;
    let (next_cfg, ignored) = with_sources(cfg, &fresh);
    if !ignored.is_empty() {
        tracing::warn!(
            "SIGHUP reloads the sources only: restart the daemon to apply the changes to {}",
            ignored.join(", ")
        );
    }
    let Some(next_cfg) = next_cfg else {
        metrics::counter!(ctxd_pipeline::metrics::SOURCE_RELOADS_TOTAL, "result" => "unchanged").increment(1);
        tracing::info!("SIGHUP: the sources are unchanged");
        return current;
    };
    if let Err(e) = ctxd_pipeline::daemon::check_sources(&next_cfg) {
        failed(&e.to_string());
        return current;
    }
    let names = next_cfg.source_names();
    tracing::info!(sources = ?names, "SIGHUP: draining the pipeline to start it on the new sources");
    notify("STATUS=reloading the sources: draining the pipeline");
    current.stop(drain).await;
    match Generation::open(&next_cfg, triggers).await {
        Ok(next) => {
            searcher.switch(next.pipeline.index(), next.pipeline.embedder());
            live.set(next.running.tracker(), next.running.progress());
            access.set(access_of(&next_cfg));
            // The new pipeline's first pass: the ready gauge is 1 again once it is committed.
            when_ready(&next.running, "reloaded sources' initial pass is committed");
            *cfg = next_cfg;
            metrics::counter!(ctxd_pipeline::metrics::SOURCE_RELOADS_TOTAL, "result" => "applied").increment(1);
            tracing::info!(sources = ?names, "SIGHUP: the pipeline runs on the new sources");
            notify("STATUS=serving; sources reloaded");
            next
        }
        Err(e) => {
            failed(&e.to_string());
            // The previous sources again (they were running a moment ago).
            match Generation::open(cfg, triggers).await {
                Ok(previous) => {
                    searcher.switch(previous.pipeline.index(), previous.pipeline.embedder());
                    live.set(previous.running.tracker(), previous.running.progress());
                    previous
                }
                Err(e) => {
                    tracing::error!("restarting the pipeline on the previous sources failed too: {e}; exiting");
                    std::process::exit(1);
                }
            }
        }
    }
}

/// How often a pipeline's first pass logs its progress until it is committed.
const PROGRESS_EVERY: std::time::Duration = std::time::Duration::from_secs(10);

/// Once `running` has committed its initial pass (`what`): the ready gauge set, logged, and told
/// to systemd; until then its progress (files and chunks done, rates, time left) is logged every
/// 10 s.
pub fn when_ready(running: &ctxd_pipeline::daemon::Running, what: &'static str) {
    let (tracker, progress) = (running.tracker(), running.progress());
    tokio::spawn(async move {
        let ready = tracker.wait_ready();
        tokio::pin!(ready);
        loop {
            tokio::select! {
                () = &mut ready => break,
                () = tokio::time::sleep(PROGRESS_EVERY) => {
                    tracing::info!("indexing until the {what}: {}", progress.read().describe());
                }
            }
        }
        metrics::gauge!(ctxd_pipeline::metrics::PIPELINE_READY).set(1.0);
        tracing::info!("ready: {what}");
        notify(&format!("STATUS=ready: {what}, watching for changes"));
    });
}
