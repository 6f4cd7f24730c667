//! Recording each source's recent history into the index (`ctxd_index::history`).
//!
//! A git source records the history of every ref it indexes each time the ref moves (and
//! clears a ref that is gone); a folder source that is a git work tree records its `HEAD` after
//! its first pass and again whenever `HEAD` points at another commit (a commit, a checkout, a
//! pull; checked every few seconds). A view's rows are replaced whole. Reading the history is
//! gitoxide work on a blocking thread; a failure is logged and counted
//! (`ctxd_stage_errors_total{stage="history"}`), never fatal: the files are indexed anyway.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use ctxd_index::history::FileCommit;
use ctxd_stages::git_log::{self, CommitFiles};
use ctxd_stages::select::Selector;
use tokio::sync::watch;

use crate::metrics as m;

/// How often a folder's `HEAD` is checked for a new commit.
const HEAD_EVERY: Duration = Duration::from_secs(3);

/// Writes views' histories into one index.
pub(crate) struct Recorder {
    uri: String,
    commits: usize,
    /// One write at a time (the first creates the table; replaces must not interleave).
    writing: tokio::sync::Mutex<()>,
    /// Each diff's changed files, kept across reads: a moved ref costs its new commits' diffs.
    diffs: Arc<git_log::Diffs>,
}

/// One view to record: the repository at `tip`, its files under `repo_prefix`, stored under
/// `stored_prefix`, those `keep` accepts.
pub(crate) struct View {
    pub repo: PathBuf,
    pub tip: String,
    pub repo_prefix: String,
    pub stored_prefix: String,
    pub keep: Selector,
}

impl Recorder {
    /// `None` when history is off (`[index] history_commits = 0`).
    pub(crate) fn new(uri: String, commits: usize) -> Option<Arc<Self>> {
        (commits > 0)
            .then(|| Arc::new(Self { uri, commits, writing: tokio::sync::Mutex::new(()), diffs: Arc::default() }))
    }

    /// Reads and stores the history of `view`; returns the commits read (0 after a failure).
    pub(crate) async fn record(&self, view: View) -> usize {
        let commits = self.commits;
        let (repo, tip, repo_prefix) = (view.repo.clone(), view.tip.clone(), view.repo_prefix.clone());
        let diffs = self.diffs.clone();
        let read = tokio::task::spawn_blocking(move || git_log::read(&repo, &tip, &repo_prefix, commits, &diffs)).await;
        let list = match read {
            Ok(Ok(list)) => list,
            Ok(Err(e)) => return self.failed(&view.stored_prefix, &e.to_string()),
            Err(e) => return self.failed(&view.stored_prefix, &e.to_string()),
        };
        let rows = rows_of(&list, &view);
        let _one = self.writing.lock().await;
        match ctxd_index::history::replace(&self.uri, &view.stored_prefix, &rows).await {
            Ok(()) => {
                tracing::info!(view = %view.stored_prefix, commits = list.len(), rows = rows.len(), "recorded the history");
                list.len()
            }
            Err(e) => self.failed(&view.stored_prefix, &e.to_string()),
        }
    }

    /// Drops the history of a view that is gone (a ref deleted or no longer configured).
    pub(crate) async fn clear(&self, stored_prefix: &str) {
        let _one = self.writing.lock().await;
        if let Err(e) = ctxd_index::history::replace(&self.uri, stored_prefix, &[]).await {
            self.failed(stored_prefix, &e.to_string());
        }
    }

    fn failed(&self, view: &str, why: &str) -> usize {
        metrics::counter!(m::STAGE_ERRORS_TOTAL, "stage" => "history", "error" => "history").increment(1);
        tracing::warn!("recording the history of {view:?} failed: {why}; ranking goes on without it");
        0
    }
}

/// The rows of `list` for the files `view` keeps.
fn rows_of(list: &[CommitFiles], view: &View) -> Vec<FileCommit> {
    let mut rows = Vec::new();
    for c in list {
        for f in c.files.iter().filter(|f| view.keep.matches(f)) {
            rows.push(FileCommit {
                path: format!("{}{f}", view.stored_prefix),
                commit: c.id.clone(),
                time: c.time,
                author: c.author.clone(),
                summary: c.summary.clone(),
            });
        }
    }
    rows
}

/// Records the history of a folder source that is a git work tree (nothing otherwise): once,
/// then (when `follow`) whenever its `HEAD` moves, until `shutdown`.
pub(crate) async fn follow_work_tree(
    recorder: Arc<Recorder>,
    root: PathBuf,
    select: Selector,
    follow: bool,
    mut shutdown: watch::Receiver<bool>,
) {
    let r = root.clone();
    let Ok(Some((repo, repo_prefix))) = tokio::task::spawn_blocking(move || git_log::work_tree_of(&r)).await else {
        return;
    };
    let stored_prefix = select.prefix().to_string();
    let head = |repo: PathBuf| async move {
        tokio::task::spawn_blocking(move || git_log::head_commit(&repo)).await.ok().flatten()
    };
    let mut last = None;
    loop {
        let now = head(repo.clone()).await;
        if now.is_some() && now != last {
            let view = View {
                repo: repo.clone(),
                tip: now.clone().unwrap_or_default(),
                repo_prefix: repo_prefix.clone(),
                stored_prefix: stored_prefix.clone(),
                keep: select.clone(),
            };
            recorder.record(view).await;
            last = now;
        }
        if !follow {
            return;
        }
        tokio::select! {
            _ = tokio::time::sleep(HEAD_EVERY) => {}
            _ = shutdown.changed() => {}
        }
        if *shutdown.borrow() {
            return;
        }
    }
}
