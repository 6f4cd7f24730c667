//! The load stage as a graph [`Stage`]: files are loaded on a blocking thread; removals pass
//! when the file is indexed; skips and failures are counted in the run's [`Counters`].

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::{load, LoadConfig, LoadOutcome, LoadedFile};
use crate::counters::Counters;
use crate::stage::Stage;
use crate::{error::StageError, state::FileState, FileWork, SourceFile};

/// Loads source files (see [`load`]).
pub struct LoadStage {
    state: FileState,
    cfg: LoadConfig,
    counters: Arc<Counters>,
}

impl LoadStage {
    /// A load stage comparing against `state`, counting into `counters`.
    pub fn new(state: FileState, cfg: LoadConfig, counters: Arc<Counters>) -> Self {
        Self { state, cfg, counters }
    }
}

impl Stage for LoadStage {
    type In = FileWork<SourceFile>;
    type Out = FileWork<LoadedFile>;
    const NAME: &'static str = "load";

    async fn process(&self, item: Self::In) -> Result<Option<Self::Out>, StageError> {
        match item {
            FileWork::Remove(rel) => Ok(self.state.get(&rel).map(|_| FileWork::Remove(rel))),
            FileWork::Update(file) => {
                let (state, cfg) = (self.state.clone(), self.cfg.clone());
                let rel = file.rel.clone();
                let res = tokio::task::spawn_blocking(move || load(&file, &state, &cfg).map(|o| (o, file.rel)))
                    .await
                    .map_err(|e| StageError::Panic { stage: "load", path: rel, message: e.to_string() })
                    .and_then(|r| r);
                match res {
                    Ok((LoadOutcome::Loaded(f), _)) => Ok(Some(FileWork::Update(f))),
                    Ok((LoadOutcome::Skipped(reason), _)) => {
                        let c = if reason == "unchanged" { &self.counters.unchanged } else { &self.counters.skipped };
                        c.fetch_add(1, Ordering::Relaxed);
                        Ok(None)
                    }
                    Ok((LoadOutcome::Gone(_), rel)) => {
                        self.counters.skipped.fetch_add(1, Ordering::Relaxed);
                        Ok(Some(FileWork::Remove(rel)))
                    }
                    Err(e) => {
                        self.counters.failed.fetch_add(1, Ordering::Relaxed);
                        Err(e)
                    }
                }
            }
        }
    }
}
