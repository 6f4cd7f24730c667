//! Poll-now triggers of git sources: the webhook endpoint (`POST /v1/sources/<name>/poll`)
//! wakes a git source's poll loop instead of waiting for `poll_interval_secs`.
//!
//! One registry per process, keyed by source name, outliving the pipeline generations a model
//! switch restarts: a source's task takes its trigger when it starts ([`for_source`]); the wire
//! pokes by name ([`poke`]). A poke while a poll runs is kept (a stored permit), so the push
//! that lands mid-poll is read right after it.
//!
//! **Failed commits** ([`commit_failed`]): when the sink gives up on a batch (the disk full, the
//! bucket unreachable past the retries), the files of that batch were not recorded as indexed.
//! Git and bucket sources find them again at their next poll; a folder source only follows
//! events, so it waits on [`failed_commits`] and, [`RESCAN_AFTER_FAILURE`] later, rescans its
//! root: every file whose content differs from the index (exactly those of the lost batch, and
//! anything changed meanwhile) goes through the pipeline again, removals are reconciled. While
//! the fault lasts the pause doubles up to [`RESCAN_AFTER_FAILURE_MAX`] ([`Backoff`]); once it is
//! gone the index catches up by itself. A bucket or git source lists only what changed since
//! its last listing, so after the same pause its next poll reports everything again (as at
//! start: the files whose content the index lacks are indexed, the others skipped by hash, and
//! removals reconciled).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

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

fn failures() -> &'static watch::Sender<u64> {
    static FAILED: OnceLock<watch::Sender<u64>> = OnceLock::new();
    FAILED.get_or_init(|| watch::channel(0).0)
}

/// Counts a batch the sink could not commit: every source finds its files again (see the
/// module docs).
pub(crate) fn commit_failed() {
    failures().send_modify(|n| *n += 1);
}

/// Changes after each failed commit (a folder source's loop waits on it).
pub(crate) fn failed_commits() -> watch::Receiver<u64> {
    failures().subscribe()
}

fn registry() -> &'static Mutex<HashMap<String, Arc<Notify>>> {
    static TRIGGERS: OnceLock<Mutex<HashMap<String, Arc<Notify>>>> = OnceLock::new();
    TRIGGERS.get_or_init(Default::default)
}

/// The trigger of git source `name` (created on first use).
pub(crate) fn for_source(name: &str) -> Arc<Notify> {
    let mut map = registry().lock().unwrap_or_else(|e| e.into_inner());
    map.entry(name.to_string()).or_default().clone()
}

/// Wakes git source `name`; false when no git source of that name runs in this process.
pub fn poke(name: &str) -> bool {
    let map = registry().lock().unwrap_or_else(|e| e.into_inner());
    match map.get(name) {
        Some(n) => {
            n.notify_one();
            true
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_poke_wakes_the_source_even_when_it_lands_first() {
        assert!(!poke("not-a-source"));
        let t = for_source("lib");
        assert!(poke("lib"));
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
        let (mut a, mut b) = (failed_commits(), failed_commits());
        commit_failed();
        for rx in [&mut a, &mut b] {
            tokio::time::timeout(std::time::Duration::from_secs(1), rx.changed()).await.unwrap().unwrap();
        }
    }
}
