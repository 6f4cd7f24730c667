//! The source: where files come from, and the task that drives it.
//!
//! * A local directory: the filesystem watcher starts first (so nothing changes unseen), then
//!   the root is scanned and reconciled ([`crate::reconcile`]); in daemon mode debounced
//!   events are followed until the kill switch flips.
//! * An `s3://` prefix is listed instead ([`ctxd_stages::object`]): the first listing reports
//!   every object (changed ones downloaded into the local mirror) and reconciles removals the
//!   same way; later listings, every `source.poll_interval_secs`, report only the diff.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use ctxd_stages::object::{ObjectSource, ObjectUri};
use ctxd_stages::watch::{EventWatcher, Scanner, WatchEvent};
use ctxd_stages::{error::StageError, state::FileState, FileWork};
use tokio::sync::watch;

use crate::emit::Emitter;
use crate::error::PipelineError;
use crate::freshness::Freshness;
use crate::history_recorder::{Recorder, View};
use crate::metrics as m;
use crate::reconcile::{remove_gone, scan_and_reconcile, Pass};
use crate::trigger::{Backoff, Triggers};
use ctxd_config::{Config, NamedSource};
use ctxd_index::overlay::Effective;
use ctxd_index::record::WORKTREE;
use ctxd_stages::git::{GitChange, GitSource};
use ctxd_stages::select::Selector;
use ctxd_stages::OverlayChange;

/// Fails unless `root` is a readable directory.
pub(crate) fn check_root(root: &Path) -> Result<(), PipelineError> {
    let meta = std::fs::metadata(root)
        .map_err(|e| PipelineError::Root { path: root.to_path_buf(), message: e.to_string() })?;
    if !meta.is_dir() {
        return Err(PipelineError::Root { path: root.to_path_buf(), message: "not a directory".into() });
    }
    Ok(())
}

/// Where the source's files come from.
pub(crate) enum Origin {
    /// A local directory: scanned, then followed through `notify` events.
    Local(Scanner),
    /// An `s3://` prefix: listed every `every`, changed objects mirrored locally; with `events`
    /// (an SQS queue's URL, the reconciling listing's interval) its changes come from the queue.
    Objects { source: Box<ObjectSource>, every: Duration, events: Option<(String, Duration)> },
    /// A git repository: its refs polled every `every` ([`ctxd_stages::git`]).
    Git { source: Box<GitSource>, every: Duration },
}

impl Origin {
    /// The origins of source `src` of `cfg`: a local directory (scan + events), an `s3://`
    /// prefix (listing), or a git repository's refs — and, when its refs list `worktree`, its
    /// work tree as a folder stored under `<name>@worktree/`. The index's own directory is
    /// excluded when it lies inside the source.
    pub(crate) fn open_all(cfg: &Config, src: &NamedSource) -> Result<Vec<Self>, PipelineError> {
        let Some(repo) = &src.git else { return Ok(vec![Self::open(cfg, src)?]) };
        let mut out = Vec::new();
        let refs = src.object_refs();
        if !refs.is_empty() {
            let select = Selector::new(&src.name, &src.include, &src.exclude)?;
            let git = GitSource::open(repo, &src.name, refs.clone(), select, src.mirror(), cfg.source.max_file_bytes)?;
            tracing::info!(source = %src.name, repository = %repo.display(), refs = ?refs, "reading git refs from the object database");
            let every = Duration::from_secs(src.poll_interval_secs.max(1));
            out.push(Origin::Git { source: Box::new(git), every });
        }
        if let Some(tree) = src.worktree() {
            let top = ctxd_stages::git_log::work_tree_of(tree).filter(|(_, at)| at.is_empty()).ok_or_else(|| {
                PipelineError::Root {
                    path: tree.to_path_buf(),
                    message: format!(
                        "source '{}' lists the ref \"{WORKTREE}\", but this is not the top of a clone's work tree \
                         (a bare repository has none): point `git` at the clone, or drop \"{WORKTREE}\" from refs",
                        src.name
                    ),
                }
            })?;
            let select = Selector::new(&format!("{}@{WORKTREE}", src.name), &src.include, &src.exclude)?;
            tracing::info!(source = %src.name, work_tree = %top.0.display(), "watching the work tree as ref \"worktree\"");
            out.push(Origin::Local(Scanner::new(top.0, index_excludes(cfg)).with_selector(select)));
        }
        Ok(out)
    }

    /// A folder or an `s3://` prefix.
    fn open(cfg: &Config, src: &NamedSource) -> Result<Self, PipelineError> {
        let root = src.root.clone();
        let select = Selector::new(&src.name, &src.include, &src.exclude)?;
        if src.is_object_store() {
            let uri = root.to_string_lossy().into_owned();
            let mut objects = ObjectSource::open(&uri, src.mirror(), cfg.source.max_file_bytes)?.with_selector(select);
            // An index inside the watched prefix must not index itself.
            let db = cfg.index.db.to_string_lossy().into_owned();
            if let (Some(u), Some(d)) = (ObjectUri::parse(&uri), ObjectUri::parse(&db)) {
                if u.bucket == d.bucket {
                    let inside = if u.prefix.is_empty() {
                        Some(d.prefix.as_str())
                    } else {
                        d.prefix.strip_prefix(u.prefix.as_str()).and_then(|r| r.strip_prefix('/'))
                    };
                    if let Some(rel) = inside {
                        objects = objects.exclude(rel);
                    }
                }
            }
            let how = if src.sqs_queue.is_some() { "its event notifications" } else { "listing" };
            tracing::info!(source = %uri, mirror = %objects.mirror().display(), "watching object storage by {how}");
            let reconcile = Duration::from_secs(src.reconcile_interval_secs.max(1));
            return Ok(Origin::Objects {
                source: Box::new(objects),
                every: Duration::from_secs(src.poll_interval_secs.max(1)),
                events: src.sqs_queue.clone().map(|queue| (queue, reconcile)),
            });
        }
        if src.sqs_queue.is_some() {
            let message = "sqs_queue is for an s3:// root (its bucket's event notifications); drop it here".into();
            return Err(PipelineError::Root { path: root, message });
        }
        check_root(&root)?;
        Ok(Origin::Local(Scanner::new(root, index_excludes(cfg)).with_selector(select)))
    }
}

/// What a folder scan never enters: the index's own directory (as written and resolved).
fn index_excludes(cfg: &Config) -> Vec<std::path::PathBuf> {
    let mut excludes = vec![cfg.index.db.clone()];
    if let Ok(db) = cfg.index.db.canonicalize() {
        excludes.push(db);
    }
    excludes
}

/// Readiness waits for every source's first pass: the last one to finish marks the pipeline
/// scanned.
#[derive(Clone)]
pub(crate) struct ScanGate(Arc<std::sync::atomic::AtomicUsize>);

impl ScanGate {
    pub(crate) fn new(sources: usize) -> Self {
        Self(Arc::new(std::sync::atomic::AtomicUsize::new(sources)))
    }

    fn passed(&self, tracker: &crate::stage_tasks::Tracker) {
        if self.0.fetch_sub(1, Ordering::AcqRel) == 1 {
            tracker.mark_scanned();
        }
    }
}

/// The source task: emits the files of its [`Origin`] into the pipeline.
pub(crate) struct Source {
    pub(crate) state: FileState,
    pub(crate) emitter: Emitter,
    pub(crate) shutdown: watch::Receiver<bool>,
    pub(crate) debounce: Duration,
    pub(crate) freshness: Arc<Freshness>,
    pub(crate) gate: ScanGate,
    /// Records the history of git refs and of a folder that is a git work tree (`None`: off).
    pub(crate) history: Option<Arc<Recorder>>,
    /// The database (its URI): where a git source records its refs' overlays.
    pub(crate) db: String,
    /// Pokes of git sources and the failed-commit signal ([`crate::trigger`]).
    pub(crate) triggers: Triggers,
    /// The index handle's overlay cache: a git source records its refs' overlays through it, so
    /// the queries of this process read them at once.
    pub(crate) overlays: Arc<ctxd_index::overlay::OverlayCache>,
}

impl Source {
    /// Runs until the initial pass is done (`follow` false) or `shutdown` (`follow` true).
    pub(crate) async fn run(mut self, origin: Origin, follow: bool) -> Result<(), StageError> {
        let scanner = match origin {
            Origin::Local(scanner) => scanner,
            Origin::Objects { source, every, events } => {
                return self.run_objects(*source, every, events, follow).await;
            }
            Origin::Git { source, every } => return self.run_git(*source, every, follow).await,
        };
        // Start watching before scanning: a change during the scan is not lost; likewise a
        // commit failing during the first scan.
        let mut watcher = if follow { Some(EventWatcher::start(&scanner, self.debounce)?) } else { None };
        let mut failed = self.triggers.failed_commits();
        scan_and_reconcile(&scanner, &self.state, &self.emitter, &self.shutdown).await;
        self.gate.passed(&self.emitter.tracker);
        if let Some(recorder) = self.history.clone() {
            let (root, select) = (scanner.root().to_path_buf(), scanner.selector().clone());
            let follow_head =
                crate::history_recorder::follow_work_tree(recorder, root, select, follow, self.shutdown.clone());
            if follow {
                tokio::spawn(follow_head);
            } else {
                follow_head.await;
            }
        }
        let Some(watcher) = watcher.as_mut() else { return Ok(()) };
        let mut backoff = Backoff::default();
        loop {
            tokio::select! {
                _ = self.shutdown.changed() => {
                    if *self.shutdown.borrow() { break; }
                }
                Ok(()) = failed.changed() => {
                    // A batch was not committed: its files are not in the index's state, so a
                    // rescan finds them again (see [`crate::trigger`]), after a growing pause.
                    let root = scanner.root().display().to_string();
                    self.after_failed_commit(&mut failed, &mut backoff, &root, "rescanning").await;
                    if *self.shutdown.borrow() { break; }
                    scan_and_reconcile(&scanner, &self.state, &self.emitter, &self.shutdown).await
                }
                ev = watcher.next() => match ev {
                    None => break,
                    Some(WatchEvent::Changed(file)) => {
                        let mtime = std::fs::metadata(&file.abs).and_then(|m| m.modified());
                        self.freshness.changed(&file.rel, mtime.unwrap_or_else(|_| SystemTime::now()));
                        if !self.emitter.emit(FileWork::Update(file)).await { break; }
                    }
                    Some(WatchEvent::Removed(rel)) => {
                        let prefix = format!("{rel}/");
                        let gone: Vec<String> =
                            self.state.paths().into_iter().filter(|p| *p == rel || p.starts_with(&prefix)).collect();
                        for p in gone {
                            self.freshness.changed(&p, SystemTime::now());
                            if !self.emitter.emit(FileWork::Remove(p)).await { return Ok(()); }
                        }
                    }
                    Some(WatchEvent::Rescan) => {
                        scan_and_reconcile(&scanner, &self.state, &self.emitter, &self.shutdown).await
                    }
                }
            }
        }
        Ok(())
    }

    /// A path a poll reports gone: its removal, unless this is the first pass (which reconciles
    /// every indexed path afterwards instead) or the path is not indexed.
    pub(crate) fn removal(&self, rel: String, first: bool) -> Option<FileWork<ctxd_stages::SourceFile>> {
        if first || self.state.get(&rel).is_none() {
            return None;
        }
        self.freshness.changed(&rel, SystemTime::now());
        Some(FileWork::Remove(rel))
    }

    /// After a polled source's first pass (`seen`): its indexed files it no longer has are
    /// removed, and readiness counts it. False when the pipeline is gone.
    pub(crate) async fn first_pass_done(&self, seen: &Pass, owner: &Selector) -> bool {
        if !remove_gone(&self.state, seen, &self.emitter, owner).await {
            return false;
        }
        self.gate.passed(&self.emitter.tracker);
        true
    }

    /// Polls a git source: once at start (every file of every ref reported, indexed files of
    /// the source missing from every ref removed), then, when following, every `every` (only
    /// what moved). gitoxide is blocking: each poll runs on a blocking thread.
    async fn run_git(mut self, mut git: GitSource, every: Duration, follow: bool) -> Result<(), StageError> {
        // `<name>@worktree/` is the work tree's, reconciled by its own scan.
        let owner = Selector::owning(&format!("{}@", git.name())).except(&format!("{}@{WORKTREE}/", git.name()));
        let poked = self.triggers.for_source(git.name());
        let mut first = true;
        // Whether the refs moved since the mirror was last cleaned up.
        let mut moved_on = false;
        // A commit failed: the next poll reports every file again (see [`crate::trigger`]).
        let (mut failed, mut backoff, mut recover) = (self.triggers.failed_commits(), Backoff::default(), false);
        loop {
            // The blobs of commits the refs moved past, once nothing emitted is in flight.
            let clean = moved_on && self.emitter.tracker.in_flight() <= 0;
            moved_on &= !clean;
            let all = first || recover;
            let (polled_git, polled) = poll_git(git, clean, recover, all).await?;
            git = polled_git;
            if let Some(recorder) = &self.history {
                record_refs(recorder, &mut git).await;
            }
            let overlays = git.take_overlays();
            for change in &overlays {
                if let Some(interim) = change.interim() {
                    self.record_overlay(&change.view, Some(&interim), Effective::NextCommit).await;
                }
            }
            match polled {
                Ok(changes) => {
                    moved_on |= changes.iter().any(|c| !matches!(c, GitChange::Unchanged(_)));
                    let Some(seen) = self.emit_git_changes(changes, all).await else { return Ok(()) };
                    // The first pass also removes what the source no longer has (a ref stored
                    // whole by an older ctxd keeps only what differs from the base); so does a
                    // pass after a failed commit.
                    if all && !remove_gone(&self.state, &seen, &self.emitter, &owner).await {
                        return Ok(());
                    }
                    recover = false;
                    if !overlays.is_empty() {
                        self.record_final_overlays(git.name(), &overlays).await;
                    }
                    if first {
                        self.retain_overlays(git.name(), &overlays).await;
                        self.gate.passed(&self.emitter.tracker);
                        if !follow {
                            return Ok(());
                        }
                        first = false;
                    }
                }
                Err(e) if first && !follow => return Err(e),
                Err(e) => retry_later(&e, every),
            }
            tokio::select! {
                _ = tokio::time::sleep(every) => {}
                _ = poked.notified() => tracing::debug!("a webhook asked for a poll"),
                _ = self.shutdown.changed() => {}
                Ok(()) = failed.changed() => {
                    self.after_failed_commit(&mut failed, &mut backoff, git.name(), "listing everything again").await;
                    recover = true;
                }
            }
            if *self.shutdown.borrow() {
                return Ok(());
            }
        }
    }

    /// Emits a git poll's `changes` (`all`: a full pass, whose updates are not counted as
    /// changes for freshness); the files seen, or `None` at shutdown or when the pipeline is
    /// gone.
    async fn emit_git_changes(&self, changes: Vec<GitChange>, all: bool) -> Option<Pass> {
        let mut seen = Pass { completed: true, ..Pass::default() };
        for change in changes {
            if *self.shutdown.borrow() {
                return None;
            }
            let work = match change {
                GitChange::Update(file) => {
                    seen.seen.insert(file.rel.clone());
                    if !all {
                        self.freshness.changed(&file.rel, SystemTime::now());
                    }
                    FileWork::Update(file)
                }
                GitChange::Unchanged(rel) => {
                    seen.seen.insert(rel);
                    continue;
                }
                GitChange::Removed(rel) => match self.removal(rel, all) {
                    Some(work) => work,
                    None => continue,
                },
            };
            if !self.emitter.emit(work).await {
                return None;
            }
        }
        Some(seen)
    }

    /// Records the refs' final overlays of a poll of git source `name`, once its files are in
    /// (or after [`OVERLAY_WAIT`]).
    async fn record_final_overlays(&self, name: &str, overlays: &[OverlayChange]) {
        // A ref's view reads the base's files it shares once its own are in.
        if !self.emitter.tracker.wait_drained(OVERLAY_WAIT).await {
            tracing::warn!(
                source = name,
                "files still in flight after {OVERLAY_WAIT:?}; recording the refs' overlays anyway"
            );
        }
        for change in overlays {
            self.record_overlay(&change.view, change.after.as_ref(), Effective::Now).await;
        }
    }

    /// After the first poll of git source `name`: drops the recorded overlays of its views
    /// that no ref of `overlays` has.
    async fn retain_overlays(&self, name: &str, overlays: &[OverlayChange]) {
        let views: Vec<String> = overlays.iter().filter(|c| c.after.is_some()).map(|c| c.view.clone()).collect();
        if let Err(e) = ctxd_index::overlay::retain(&self.overlays, &self.db, &format!("{name}@"), &views).await {
            overlay_failed(name, &e);
        }
    }
}

/// One poll of `git` (all files when `all`) on a blocking thread, after collecting the
/// garbage of the mirror (`clean`) and forgetting what it stored (`recover`); `git` back, and
/// what the poll reported.
async fn poll_git(
    mut git: GitSource,
    clean: bool,
    recover: bool,
    all: bool,
) -> Result<(GitSource, Result<Vec<GitChange>, StageError>), StageError> {
    tokio::task::spawn_blocking(move || {
        if clean {
            git.collect_garbage();
        }
        if recover {
            git.forget_stored();
        }
        let out = git.poll(all);
        (git, out)
    })
    .await
    .map_err(|e| StageError::Git { path: Default::default(), what: "the poll thread".into(), source: e.into() })
}

/// How long a git source waits for a poll's files to be committed before it records the
/// refs' overlays anyway.
const OVERLAY_WAIT: Duration = Duration::from_secs(600);

impl Source {
    /// Records how the view of a git ref reads its base ([`ctxd_index::overlay`]); a failure is
    /// counted and logged (the view then reads through its previous overlay until the next poll
    /// that changes it, or a restart).
    async fn record_overlay(&self, view: &str, overlay: Option<&ctxd_index::overlay::Overlay>, from: Effective) {
        if let Err(e) = ctxd_index::overlay::replace(&self.overlays, &self.db, view, overlay, from).await {
            overlay_failed(view, &e);
        }
    }
}

fn overlay_failed(view: &str, e: &ctxd_index::error::IndexError) {
    metrics::counter!(m::STAGE_ERRORS_TOTAL, "stage" => "watch", "error" => "overlay").increment(1);
    tracing::warn!(
        "recording the overlay of the git ref view {view} failed: {e}; it is recorded again at the next restart"
    );
}

/// A failed poll or listing: counted, logged, retried after `every`.
pub(crate) fn retry_later(e: &StageError, every: Duration) {
    metrics::counter!(m::STAGE_ERRORS_TOTAL, "stage" => "watch", "error" => e.kind()).increment(1);
    tracing::warn!("{e}; retrying in {}s", every.as_secs());
}

/// Records the history of the refs of `git` that moved, and clears those that went away.
async fn record_refs(recorder: &Recorder, git: &mut GitSource) {
    for (r, commit) in git.take_moved() {
        let stored_prefix = format!("{}/", git.stored(&r, "").trim_end_matches('/'));
        match commit {
            None => recorder.clear(&stored_prefix).await,
            Some(tip) => {
                let view = View {
                    repo: git.repository().to_path_buf(),
                    tip,
                    repo_prefix: String::new(),
                    stored_prefix,
                    keep: git.selector().clone(),
                };
                recorder.record(view).await;
            }
        }
    }
}

impl Source {
    /// A batch was not committed: waits the growing pause of `backoff` (cut short by
    /// shutdown) before source `what` goes `doing` (a rescan, or a full listing) to find the
    /// batch's files again (see [`crate::trigger`]).
    pub(crate) async fn after_failed_commit(
        &mut self,
        failed: &mut watch::Receiver<u64>,
        backoff: &mut Backoff,
        what: &str,
        doing: &str,
    ) {
        let pause = backoff.next();
        tokio::select! {
            _ = tokio::time::sleep(pause) => {}
            _ = self.shutdown.changed() => {}
        }
        failed.borrow_and_update();
        tracing::info!(source = what, "{doing} after a failed commit ({} s pause)", pause.as_secs());
    }
}
