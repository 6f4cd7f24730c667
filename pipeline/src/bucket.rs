//! An S3 source's task: the prefix listed once at start (every object reported; indexed paths
//! missing from the listing removed), then, when following, every `poll_interval_secs` (only
//! the diff); changed objects downloaded into the local mirror ([`ctxd_stages::object`]).
//!
//! With `sqs_queue` the changes come from the bucket's event notifications instead
//! ([`ctxd_stages::object_events`]): the queue is long-polled, each event applied as it arrives
//! (a download or a removal; duplicates and late events change nothing), and the prefix is
//! listed only at start and every `reconcile_interval_secs`, which repairs what lost events missed.
//!
//! After a sharded first build the objects were downloaded by the shards, not here: the build's
//! commit recorded their versions in the index ([`ctxd_index::source_objects`]). The first
//! listing takes those the index holds as known without a mirrored copy ([`ObjectSource::seed`]),
//! so an unchanged object is neither downloaded nor read again; once the listing is saved in the
//! mirror, the source's records are dropped (this mirror knows them now).

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use ctxd_stages::object::{Listed, ObjectChange, ObjectSource};
use ctxd_stages::{error::StageError, FileWork, SourceFile};
use ctxd_stages::{EventQueue, Received};

use crate::metrics as m;
use crate::reconcile::{remove_gone, Pass};
use crate::source::{retry_later, Source};

/// Objects a listing downloads at once (the listing of a big prefix is bound by request latency,
/// not bandwidth: one at a time took over an hour for 100,000 small objects).
const DOWNLOADS: usize = 16;

/// What one entry of a listing asks the task to do.
enum Step {
    Emit(FileWork<SourceFile>),
    Fetch(Listed),
    Nothing,
}

impl Source {
    /// Lists the bucket prefix: once at start, then, when following, every `every` — or, with
    /// `events` (a queue's URL, an interval), every `reconcile` interval while applying the
    /// queue's event notifications as they arrive.
    pub(crate) async fn run_objects(
        mut self,
        mut objects: ObjectSource,
        every: Duration,
        events: Option<(String, Duration)>,
        follow: bool,
    ) -> Result<(), StageError> {
        let seeded = self.seed(&mut objects).await;
        let queue = match (&events, follow) {
            (Some((url, _)), true) => Some(EventQueue::connect(url, &objects.watched()).await),
            _ => None,
        };
        let listing_every = events.as_ref().filter(|_| queue.is_some()).map_or(every, |(_, reconcile)| *reconcile);
        if let (Some((url, _)), true) = (&events, queue.is_some()) {
            tracing::info!(source = %objects.uri(), queue = %url, every = ?listing_every, "following the bucket's event notifications; listing only to reconcile");
        }
        let mut first = true;
        // A commit failed: the next listing reports every object again (see [`crate::trigger`]).
        let (mut failed, mut backoff, mut recover) =
            (self.triggers.failed_commits(), crate::trigger::Backoff::default(), false);
        loop {
            let all = first || recover;
            match objects.poll(all).await {
                Ok(changes) => {
                    let mut listed = Pass { completed: true, ..Pass::default() };
                    if !self.take_listing(&mut objects, changes, all, &mut listed).await {
                        return Ok(());
                    }
                    objects.save_manifest();
                    if first {
                        if seeded > 0 {
                            self.forget_build_records(&objects).await;
                        }
                        if !self.first_pass_done(&listed, objects.selector()).await || !follow {
                            return Ok(());
                        }
                        first = false;
                    } else if recover && !remove_gone(&self.state, &listed, &self.emitter, objects.selector()).await {
                        return Ok(());
                    }
                    recover = false;
                }
                // Without a first listing a one-shot run has nothing to do: say why. A daemon
                // stays up (not ready) and retries.
                Err(e) if first && !follow => return Err(e),
                Err(e) => retry_later(&e, every),
            }
            // Until the next listing: the queue's events (or nothing) until then.
            let next_listing = Instant::now() + if first { every } else { listing_every };
            let uri = objects.uri().to_string();
            loop {
                let wait = next_listing.saturating_duration_since(Instant::now());
                if wait.is_zero() {
                    break;
                }
                tokio::select! {
                    _ = self.shutdown.changed() => {
                        if *self.shutdown.borrow() {
                            objects.save_manifest();
                            return Ok(());
                        }
                    }
                    Ok(()) = failed.changed() => {
                        self.after_failed_commit(&mut failed, &mut backoff, &uri, "listing everything again").await;
                        recover = true;
                        break;
                    }
                    got = next_events(queue.as_ref(), wait) => match got {
                        None => break,
                        Some(Ok(received)) => {
                            let queue = queue.as_ref().expect("events come from a queue");
                            if !self.apply_events(&mut objects, queue, received).await {
                                return Ok(());
                            }
                        }
                        Some(Err(e)) => {
                            retry_later(&e, every);
                            tokio::time::sleep(every.min(wait)).await;
                        }
                    },
                }
            }
        }
    }

    /// Emits a listing's changes, the objects to download [`DOWNLOADS`] at a time; false when
    /// the pipeline is gone or shutting down.
    async fn take_listing(
        &self,
        objects: &mut ObjectSource,
        changes: Vec<ObjectChange>,
        all: bool,
        listed: &mut Pass,
    ) -> bool {
        let mut batch = Vec::new();
        for change in changes {
            if *self.shutdown.borrow() {
                objects.save_manifest();
                return false;
            }
            match self.step(objects, change, all, listed) {
                Step::Emit(work) => {
                    if !self.emitter.emit(work).await {
                        return false;
                    }
                }
                Step::Nothing => {}
                Step::Fetch(l) => batch.push(l),
            }
            if batch.len() >= 4 * DOWNLOADS && !self.download_all(objects, std::mem::take(&mut batch), all).await {
                return false;
            }
        }
        self.download_all(objects, batch, all).await
    }

    /// Downloads `batch` [`DOWNLOADS`] at a time, then records and emits what came; false when
    /// the pipeline is gone.
    async fn download_all(&self, objects: &mut ObjectSource, batch: Vec<Listed>, all: bool) -> bool {
        use futures::StreamExt;
        let shared = &*objects;
        let got: Vec<_> = futures::stream::iter(batch)
            .map(|l| async move {
                let r = shared.download(&l).await;
                (l, r)
            })
            .buffer_unordered(DOWNLOADS)
            .collect()
            .await;
        for (l, r) in got {
            let got = r.map(|got| {
                got.map(|(file, version)| {
                    objects.record(&l.rel, version);
                    file
                })
            });
            let Some(work) = self.downloaded(&l, got, all) else { continue };
            if !self.emitter.emit(work).await {
                return false;
            }
        }
        true
    }

    /// What a download of `l` (recorded in the mirror) brings: the file to emit, or `None`
    /// (vanished; or failed, counted and retried at the next listing).
    fn downloaded(
        &self,
        l: &Listed,
        got: Result<Option<SourceFile>, StageError>,
        all: bool,
    ) -> Option<FileWork<SourceFile>> {
        match got {
            Ok(Some(file)) => {
                if !all {
                    self.freshness.changed(&file.rel, l.modified);
                }
                Some(FileWork::Update(file))
            }
            Ok(None) => None,
            Err(e) => {
                self.emitter.counters.failed.fetch_add(1, Ordering::Relaxed);
                metrics::counter!(m::STAGE_ERRORS_TOTAL, "stage" => "watch", "error" => e.kind()).increment(1);
                tracing::warn!("{e}; will retry at the next listing");
                None
            }
        }
    }

    /// Applies the events of one receive, then deletes their messages (they are on their way:
    /// a crash now is repaired by the listing at the next start). False when the pipeline is gone.
    async fn apply_events(&self, objects: &mut ObjectSource, queue: &EventQueue, received: Received) -> bool {
        for event in &received.events {
            let work = match objects.apply_event(event).await {
                Ok((change, outcome)) => {
                    metrics::counter!(ctxd_stages::metrics::OBJECT_EVENTS_TOTAL, "outcome" => outcome).increment(1);
                    match change {
                        Some(ObjectChange::Fetch(l)) => {
                            let got = objects.fetch(&l).await;
                            self.downloaded(&l, got, false)
                        }
                        Some(ObjectChange::Removed(rel)) => self.removal(rel, false),
                        _ => None,
                    }
                }
                Err(e) => {
                    metrics::counter!(m::STAGE_ERRORS_TOTAL, "stage" => "watch", "error" => e.kind()).increment(1);
                    tracing::warn!("{e}; the next reconciling listing repairs it");
                    None
                }
            };
            if let Some(work) = work {
                if !self.emitter.emit(work).await {
                    return false;
                }
            }
        }
        if let Err(e) = queue.delete(received.receipts).await {
            tracing::warn!(
                "{e}; the messages come back after their visibility timeout (applying them again is harmless)"
            );
        }
        true
    }

    /// What to do with one entry of a listing (`listed` collects what the listing holds).
    fn step(&self, objects: &ObjectSource, change: ObjectChange, all: bool, listed: &mut Pass) -> Step {
        match change {
            ObjectChange::Unchanged(file) => {
                listed.seen.insert(file.rel.clone());
                Step::Emit(FileWork::Update(file))
            }
            // Indexed by a sharded build and unchanged since: nothing to read while the index
            // holds it (else it is downloaded like a new object).
            ObjectChange::Indexed(l) => {
                let stored = objects.qualify(&l.rel);
                listed.seen.insert(stored.clone());
                match self.state.get(&stored) {
                    Some(_) => Step::Nothing,
                    None => Step::Fetch(l),
                }
            }
            ObjectChange::Fetch(l) => {
                listed.seen.insert(objects.qualify(&l.rel));
                Step::Fetch(l)
            }
            ObjectChange::Removed(rel) => self.removal(rel, all).map_or(Step::Nothing, Step::Emit),
        }
    }

    /// Takes the objects a sharded build recorded for this source and indexed (see the module
    /// docs); how many. A failed read is logged: the objects are then downloaded again.
    async fn seed(&self, objects: &mut ObjectSource) -> usize {
        let name = source_name(objects);
        match ctxd_index::source_objects::load(&self.db, &name).await {
            Ok(versions) if versions.is_empty() => 0,
            Ok(versions) => {
                let taken = objects.seed(versions, |stored| self.state.get(stored).is_some());
                tracing::info!(source = %objects.uri(), objects = taken, "objects a sharded build indexed: not downloaded while unchanged");
                taken
            }
            Err(e) => {
                tracing::warn!(source = %objects.uri(), "reading the objects a sharded build recorded failed ({e}); downloading them instead");
                0
            }
        }
    }

    /// Drops this source's build records once its own listing is saved.
    async fn forget_build_records(&self, objects: &ObjectSource) {
        if let Err(e) = ctxd_index::source_objects::clear(&self.db, &source_name(objects)).await {
            tracing::warn!(source = %objects.uri(), "dropping the objects a sharded build recorded failed ({e}); the mirror's listing answers first");
        }
    }
}

/// The next receive of `queue`, waiting up to `wait`; `None` (after `wait`) without a queue.
async fn next_events(queue: Option<&EventQueue>, wait: Duration) -> Option<Result<Received, StageError>> {
    match queue {
        Some(q) => Some(q.receive(wait).await),
        None => {
            tokio::time::sleep(wait).await;
            None
        }
    }
}

/// The source's name (empty: the unnamed source), as a sharded build records its objects.
fn source_name(objects: &ObjectSource) -> String {
    objects.selector().prefix().trim_end_matches('/').to_string()
}
