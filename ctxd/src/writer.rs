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
pub async fn follow_switches(
    cfg: ctxd_pipeline::config::Config,
    mut current: Generation,
    searcher: Searcher,
    drain: Duration,
    mut stop: tokio::sync::oneshot::Receiver<()>,
) -> Generation {
    let db = cfg.index.db.to_string_lossy().into_owned();
    loop {
        tokio::select! {
            _ = &mut stop => return current,
            _ = tokio::time::sleep(SWITCH_POLL) => {}
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
        metrics::counter!(ctxd_pipeline::metrics::MODEL_SWITCHES_TOTAL).increment(1);
        tracing::info!(table = %active.table_name, model = %active.model_id, "model switch: queries use the new table");
        crate::sdnotify::notify(&format!("STATUS=serving model {}", active.model_id));
        let old = std::mem::replace(&mut current, next);
        old.stop(drain).await;
    }
}

