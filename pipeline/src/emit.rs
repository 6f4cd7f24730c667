//! The source's end of the pipeline: every file it emits is counted in flight (so readiness
//! waits for it) and, for updates, as seen; an emit that finds the pipeline closed takes its
//! count back.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use ctxd_stages::counters::Counters;
use ctxd_stages::{FileWork, SourceFile};

use crate::stage_tasks::{Output, Tracker};

/// Sends the source's work into the pipeline.
#[derive(Clone)]
pub(crate) struct Emitter {
    pub(crate) out: Output<FileWork<SourceFile>>,
    pub(crate) tracker: Tracker,
    pub(crate) counters: Arc<Counters>,
}

impl Emitter {
    fn enter(&self, work: &FileWork<SourceFile>) {
        if matches!(work, FileWork::Update(_)) {
            self.counters.seen.fetch_add(1, Ordering::Relaxed);
        }
        self.tracker.add(1);
    }

    /// Emits `work`, waiting while the queue is full; false once the pipeline is closed.
    pub(crate) async fn emit(&self, work: FileWork<SourceFile>) -> bool {
        self.enter(&work);
        if self.out.send(work).await.is_err() {
            self.tracker.done(1);
            return false;
        }
        true
    }

    /// [`Emitter::emit`] for a blocking thread (the directory scan).
    pub(crate) fn emit_blocking(&self, work: FileWork<SourceFile>) -> bool {
        self.enter(&work);
        if self.out.send_blocking(work).is_err() {
            self.tracker.done(1);
            return false;
        }
        true
    }
}
