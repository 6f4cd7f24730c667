//! One generation: a [`Pipeline`] (model + active chunks table) and its stages running, started and drained as a
//! unit: a writer serves from one generation at a time and replaces it on a model switch or a
//! reload of its sources.

use std::time::Duration;

use ctxd_config::Config;
use ctxd_pipeline::daemon::Running;
use ctxd_pipeline::pipeline::Pipeline;
use ctxd_pipeline::trigger::Triggers;

use crate::error::RoleError;

/// One pipeline and its running stages.
pub struct Generation {
    pub pipeline: Pipeline,
    kill: tokio::sync::watch::Sender<bool>,
    pub running: Running,
}

impl Generation {
    /// Starts the stages of `pipeline` (following its sources' changes).
    pub fn start(pipeline: Pipeline) -> Result<Self, RoleError> {
        let (kill, shutdown) = tokio::sync::watch::channel(false);
        let running = pipeline.run(true, shutdown)?;
        Ok(Self { pipeline, kill, running })
    }

    /// A new pipeline on `cfg` with its stages running, poked through `triggers`.
    pub async fn open(cfg: &Config, triggers: &Triggers) -> Result<Self, RoleError> {
        Self::start(Pipeline::open(cfg.clone()).await?.with_triggers(triggers.clone()))
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
