//! The writing side of `ctxd serve` (roles `both` and `writer`): the engine and its running
//! pipeline as one [`Generation`], and [`follow_switches`], which starts a new generation when
//! `ctxd reembed` switches the active table and swaps the searcher once it is ready.

use std::time::Duration;

use anyhow::Result;
use ctxd_pipeline::Engine;
use ctxd_serve::Searcher;

/// One engine (model + active chunks table) and its running pipeline.
pub struct Generation {
    pub engine: Engine,
    kill: tokio::sync::watch::Sender<bool>,
    pub running: ctxd_pipeline::Running,
}

impl Generation {
    pub fn start(engine: Engine) -> Result<Self> {
        let (kill, shutdown) = tokio::sync::watch::channel(false);
        let running = engine.run(true, shutdown)?;
        Ok(Self { engine, kill, running })
    }

    /// Stops the source and drains the pipeline (up to `drain`).
    pub async fn stop(self, drain: Duration) {
        let _ = self.kill.send(true);
        match tokio::time::timeout(drain, self.running.join()).await {
            Ok(Ok(summary)) => tracing::info!(
                "drained: {} files indexed, {} removed, {} commits; index at version {}",
                summary.files_indexed,
                summary.files_removed,
                summary.commits,
                summary.index_version
            ),
            Ok(Err(e)) => tracing::error!("pipeline ended with an error: {e:#}"),
            Err(_) => tracing::warn!(
                "drain did not finish within {}s; exiting with work in flight (it is re-done at the next start)",
                drain.as_secs()
            ),
        }
    }
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
/// configuration read again; the pipeline is drained and started on the new sources, and
/// `access` (what the query surfaces know of the sources) replaced.
pub async fn follow_switches(
    mut cfg: ctxd_pipeline::config::Config,
    mut current: Generation,
    searcher: Searcher,
    drain: Duration,
    mut stop: tokio::sync::oneshot::Receiver<()>,
    mut reloads: tokio::sync::mpsc::Receiver<ctxd_pipeline::config::Config>,
    access: ctxd_query::LiveAccess,
) -> Generation {
    let db = cfg.index.db.to_string_lossy().into_owned();
    loop {
        tokio::select! {
            _ = &mut stop => return current,
            _ = tokio::time::sleep(SWITCH_POLL) => {}
            Some(fresh) = reloads.recv() => {
                current = reload(&mut cfg, fresh, current, &searcher, drain, &access).await;
                continue;
            }
        }
        let active = match ctxd_index::active::current(&db).await {
            Ok(Some(a)) if a.table_name != current.engine.index().table_name() => a,
            Ok(_) => continue,
            Err(e) => {
                tracing::warn!("checking the active model of {db}: {e}");
                continue;
            }
        };
        tracing::info!(table = %active.table_name, model = %active.model_id, "model switch: opening the new table");
        let next = async {
            let engine = Engine::open(cfg.clone()).await?;
            anyhow::ensure!(
                engine.index().table_name() == active.table_name,
                "the active table changed again while opening (now {})",
                engine.index().table_name()
            );
            Generation::start(engine)
        };
        let next = tokio::select! {
            _ = &mut stop => return current,
            next = next => next,
        };
        let next = match next {
            Ok(next) => next,
            Err(e) => {
                tracing::error!("model switch to {} failed, still serving the old table: {e:#}", active.table_name);
                continue;
            }
        };
        let tracker = next.running.tracker();
        tokio::select! {
            _ = &mut stop => {
                next.stop(drain).await;
                return current;
            }
            _ = tracker.wait_ready() => {}
        }
        searcher.switch(next.engine.index(), next.engine.embedder());
        metrics::gauge!(ctxd_pipeline::metrics::PIPELINE_READY).set(1.0);
        metrics::counter!(ctxd_pipeline::metrics::MODEL_SWITCHES_TOTAL).increment(1);
        tracing::info!(table = %active.table_name, model = %active.model_id, "model switch: queries use the new table");
        crate::sdnotify::notify(&format!("STATUS=serving model {}", active.model_id));
        let old = std::mem::replace(&mut current, next);
        old.stop(drain).await;
    }
}


/// Applies the sources of `fresh` (see [`crate::reload`]): checked first, then the running
/// pipeline drained and a new one started on them. Returns the generation in force after.
async fn reload(
    cfg: &mut ctxd_pipeline::config::Config,
    fresh: ctxd_pipeline::config::Config,
    current: Generation,
    searcher: &Searcher,
    drain: Duration,
    access: &ctxd_query::LiveAccess,
) -> Generation {
    let (next_cfg, ignored) = crate::reload::with_sources(cfg, &fresh);
    if !ignored.is_empty() {
        tracing::warn!("SIGHUP reloads the sources only: restart the daemon to apply the changes to {}", ignored.join(", "));
    }
    let Some(next_cfg) = next_cfg else {
        metrics::counter!(ctxd_pipeline::metrics::SOURCE_RELOADS_TOTAL, "result" => "unchanged").increment(1);
        tracing::info!("SIGHUP: the sources are unchanged");
        return current;
    };
    if let Err(e) = ctxd_pipeline::daemon::check_sources(&next_cfg) {
        crate::reload::failed(&e.to_string());
        return current;
    }
    let names = next_cfg.source_names();
    tracing::info!(sources = ?names, "SIGHUP: draining the pipeline to start it on the new sources");
    crate::sdnotify::notify("STATUS=reloading the sources: draining the pipeline");
    current.stop(drain).await;
    match start(&next_cfg).await {
        Ok(next) => {
            searcher.switch(next.engine.index(), next.engine.embedder());
            access.set(crate::reload::access_of(&next_cfg));
            // The new pipeline's first pass: the ready gauge is 1 again once it is committed.
            when_ready(next.running.tracker(), "the reloaded sources' initial pass committed");
            *cfg = next_cfg;
            metrics::counter!(ctxd_pipeline::metrics::SOURCE_RELOADS_TOTAL, "result" => "applied").increment(1);
            tracing::info!(sources = ?names, "SIGHUP: the pipeline runs on the new sources");
            crate::sdnotify::notify("STATUS=serving; sources reloaded");
            next
        }
        Err(e) => {
            crate::reload::failed(&format!("{e:#}"));
            // The previous sources again (they were running a moment ago).
            match start(cfg).await {
                Ok(previous) => {
                    searcher.switch(previous.engine.index(), previous.engine.embedder());
                    previous
                }
                Err(e) => {
                    tracing::error!("restarting the pipeline on the previous sources failed too: {e:#}; exiting");
                    std::process::exit(1);
                }
            }
        }
    }
}

/// Once the pipeline `tracker` counts has committed its initial pass (`what`): the ready gauge
/// set, logged, and told to systemd.
pub fn when_ready(tracker: ctxd_pipeline::graph::Tracker, what: &'static str) {
    tokio::spawn(async move {
        tracker.wait_ready().await;
        metrics::gauge!(ctxd_pipeline::metrics::PIPELINE_READY).set(1.0);
        tracing::info!("ready: {what}");
        crate::sdnotify::notify(&format!("STATUS=ready: {what}, watching for changes"));
    });
}

/// A new engine on `cfg` with its pipeline running.
async fn start(cfg: &ctxd_pipeline::config::Config) -> Result<Generation> {
    Generation::start(Engine::open(cfg.clone()).await?)
}
