//! Poll-now triggers of git sources: the webhook endpoint (`POST /v1/sources/<name>/poll`)
//! wakes a git source's poll loop instead of waiting for `poll_interval_secs`.
//!
//! One [`Triggers`] handle per daemon, keyed by source name, outliving the pipeline generations a
//! model switch restarts (the binary makes it and hands it to every [`crate::pipeline::Pipeline`] it
//! opens, and the webhook's poke to the wire): a source's task takes its trigger when it starts
//! ([`Triggers::for_source`]); the wire pokes by name ([`Triggers::poke`]). A poke while a poll
//! runs is kept (a stored permit), so the push that lands mid-poll is read right after it.
//!
//! **Failed commits** ([`Triggers::commit_failed`]): when the sink gives up on a batch (the disk
//! full, the bucket unreachable past the retries), the files of that batch were not recorded as
//! indexed. Git and bucket sources find them again at their next poll; a folder source only
//! follows events, so it waits on [`Triggers::failed_commits`] and, [`RESCAN_AFTER_FAILURE`]
//! later, rescans its
//! root: every file whose content differs from the index (exactly those of the lost batch, and
//! anything changed meanwhile) goes through the pipeline again, removals are reconciled. While
//! the fault lasts the pause doubles up to [`RESCAN_AFTER_FAILURE_MAX`] ([`Backoff`]); once it is
//! gone the index catches up by itself. A bucket or git source lists only what changed since
//! its last listing, so after the same pause its next poll reports everything again (as at
//! start: the files whose content the index lacks are indexed, the others skipped by hash, and
//! removals reconciled).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::{watch, Notify};

/// How long a folder source waits after a failed commit before rescanning (the first time).
pub const RESCAN_AFTER_FAILURE: std::time::Duration = std::time::Duration::from_secs(5);
/// The longest pause between rescans while commits keep failing.
pub const RESCAN_AFTER_FAILURE_MAX: std::time::Duration = std::time::Duration::from_secs(120);

/// The pause before the next rescan: [`RESCAN_AFTER_FAILURE`], doubled for each failure that
/// follows within twice the pause, at most [`RESCAN_AFTER_FAILURE_MAX`].
#[derive(Debug, Default)]
pub(crate) struct Backoff {
    pause: Option<std::time::Duration>,
    last: Option<std::time::Instant>,
}

impl Backoff {
    pub(crate) fn next(&mut self) -> std::time::Duration {
        let now = std::time::Instant::now();
        let pause = match (self.pause, self.last) {
            (Some(p), Some(at)) if now.duration_since(at) <= 2 * p + RESCAN_AFTER_FAILURE_MAX => {
                (p * 2).min(RESCAN_AFTER_FAILURE_MAX)
            }
            _ => RESCAN_AFTER_FAILURE,
        };
        (self.pause, self.last) = (Some(pause), Some(now));
        pause
    }
}

/// The poll triggers of git sources by name and the failed-commit signal, shared by clones.
#[derive(Clone)]
pub struct Triggers {
    polls: Arc<Mutex<HashMap<String, Arc<Notify>>>>,
    failures: Arc<watch::Sender<u64>>,
}

impl Default for Triggers {
    fn default() -> Self {
        Triggers { polls: Arc::default(), failures: Arc::new(watch::channel(0).0) }
    }
}

impl Triggers {
    /// Counts a batch the sink could not commit: every source finds its files again (see the
    /// module docs).
    pub(crate) fn commit_failed(&self) {
        self.failures.send_modify(|n| *n += 1);
    }

    /// Changes after each failed commit (a source's loop waits on it).
    pub(crate) fn failed_commits(&self) -> watch::Receiver<u64> {
        self.failures.subscribe()
    }

    /// The trigger of git source `name` (created on first use).
    pub(crate) fn for_source(&self, name: &str) -> Arc<Notify> {
        let mut map = self.polls.lock().unwrap_or_else(|e| e.into_inner());
        map.entry(name.to_string()).or_default().clone()
    }

    /// Wakes git source `name`; false when no git source of that name runs with these triggers.
    pub fn poke(&self, name: &str) -> bool {
        let map = self.polls.lock().unwrap_or_else(|e| e.into_inner());
        match map.get(name) {
            Some(n) => {
                n.notify_one();
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_poke_wakes_the_source_even_when_it_lands_first() {
        let triggers = Triggers::default();
        assert!(!triggers.poke("not-a-source"));
        let t = triggers.for_source("lib");
        assert!(triggers.poke("lib"));
        assert!(!Triggers::default().poke("lib"), "another daemon's triggers are its own");
        tokio::time::timeout(std::time::Duration::from_secs(1), t.notified()).await.expect("the stored poke wakes it");
    }

    #[test]
    fn rescans_back_off_while_commits_keep_failing() {
        let mut b = Backoff::default();
        let pauses: Vec<u64> = (0..7).map(|_| b.next().as_secs()).collect();
        assert_eq!(pauses, [5, 10, 20, 40, 80, 120, 120]);
    }

    #[tokio::test]
    async fn a_failed_commit_wakes_every_folder_source() {
        let triggers = Triggers::default();
        let (mut a, mut b) = (triggers.failed_commits(), triggers.clone().failed_commits());
        triggers.commit_failed();
        for rx in [&mut a, &mut b] {
            tokio::time::timeout(std::time::Duration::from_secs(1), rx.changed()).await.unwrap().unwrap();
        }
    }
}
