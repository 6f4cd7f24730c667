//! Start-up reconciliation: after a pass over the source that **completed** (a scan of the
//! root, the first listing of an `s3://` prefix), indexed files the pass did not see are
//! removed; an **interrupted** pass (shutdown, the pipeline closing) never removes anything: a
//! file it did not reach is not gone.

use std::collections::HashSet;

use ctxd_stages::select::Selector;
use ctxd_stages::watch::Scanner;
use ctxd_stages::{state::FileState, FileWork};
use tokio::sync::watch;

use crate::emit::Emitter;

/// What a pass over the source saw.
#[derive(Debug, Default)]
pub(crate) struct Pass {
    /// Relative paths listed.
    pub(crate) seen: HashSet<String>,
    /// False when the pass stopped before the end.
    pub(crate) completed: bool,
}

/// The indexed paths a pass did not see, sorted; none when the pass did not complete.
pub(crate) fn gone(indexed: Vec<String>, pass: &Pass) -> Vec<String> {
    if !pass.completed {
        return Vec::new();
    }
    let mut gone: Vec<String> = indexed.into_iter().filter(|p| !pass.seen.contains(p)).collect();
    gone.sort();
    gone
}

/// Emits the removal of every indexed path `pass` did not see; false once the pipeline is closed.
pub(crate) async fn remove_gone(state: &FileState, pass: &Pass, emitter: &Emitter, owns: &Selector) -> bool {
    let indexed = state.paths().into_iter().filter(|p| owns.owns(p)).collect();
    for p in gone(indexed, pass) {
        if !emitter.emit(FileWork::Remove(p)).await {
            return false;
        }
    }
    true
}

/// Scans the root on a blocking thread, emitting every file, until the end, `shutdown` or the
/// pipeline closing.
async fn scan(scanner: &Scanner, emitter: &Emitter, shutdown: &watch::Receiver<bool>) -> Pass {
    let (scanner, emitter, shutdown) = (scanner.clone(), emitter.clone(), shutdown.clone());
    tokio::task::spawn_blocking(move || {
        let mut pass = Pass { completed: true, ..Pass::default() };
        scanner.scan(|file| {
            if *shutdown.borrow() {
                pass.completed = false;
                return false;
            }
            pass.seen.insert(file.rel.clone());
            if !emitter.emit_blocking(FileWork::Update(file)) {
                pass.completed = false;
                return false;
            }
            true
        });
        pass
    })
    .await
    .expect("scan thread panicked")
}

/// Scans the root; when the scan completed (and no shutdown came meanwhile), removes indexed
/// files that are gone.
pub(crate) async fn scan_and_reconcile(
    scanner: &Scanner,
    state: &FileState,
    emitter: &Emitter,
    shutdown: &watch::Receiver<bool>,
) {
    let mut pass = scan(scanner, emitter, shutdown).await;
    pass.completed &= !*shutdown.borrow();
    remove_gone(state, &pass, emitter, scanner.selector()).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stage_tasks::{queue, Input, Tracker};
    use std::collections::HashMap;
    use std::sync::Arc;

    /// A root with `a.rs` and `b.md`; the index holds `a.rs`, `gone.rs` and `dir/old.rs`.
    fn setup() -> (tempfile::TempDir, Scanner, FileState) {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("a.rs"), "fn a() {}\n").unwrap();
        std::fs::write(tmp.path().join("b.md"), "# b\n").unwrap();
        let scanner = Scanner::new(tmp.path(), Vec::new());
        let indexed = ["a.rs", "gone.rs", "dir/old.rs"].map(|p| (p.to_string(), "h".to_string()));
        (tmp, scanner, FileState::new(HashMap::from(indexed)))
    }

    fn emitter(capacity: usize) -> (Emitter, Input<FileWork<ctxd_stages::SourceFile>>) {
        let (out, input) = queue("watch", "load", capacity);
        (Emitter { out, tracker: Tracker::default(), counters: Arc::default() }, input)
    }

    /// Everything emitted: (updated paths sorted, removed paths in order).
    async fn drain(emitter: Emitter, input: Input<FileWork<ctxd_stages::SourceFile>>) -> (Vec<String>, Vec<String>) {
        drop(emitter);
        let (mut updated, mut removed) = (Vec::new(), Vec::new());
        while let Some(work) = input.recv().await {
            match work {
                FileWork::Update(f) => updated.push(f.rel),
                FileWork::Remove(p) => removed.push(p),
            }
        }
        updated.sort();
        (updated, removed)
    }

    #[test]
    fn only_a_completed_pass_removes_and_only_what_it_did_not_see() {
        let indexed = vec!["b".to_string(), "a".to_string(), "c".to_string()];
        let pass = Pass { seen: HashSet::from(["a".to_string()]), completed: true };
        assert_eq!(gone(indexed.clone(), &pass), ["b", "c"], "sorted");
        assert!(gone(indexed, &Pass { completed: false, ..pass }).is_empty());
    }

    #[tokio::test]
    async fn a_completed_scan_emits_every_file_then_removes_the_indexed_files_that_are_gone() {
        let (_tmp, scanner, state) = setup();
        let (emitter, input) = emitter(64);
        let (_stop, shutdown) = watch::channel(false);
        scan_and_reconcile(&scanner, &state, &emitter, &shutdown).await;
        assert_eq!(emitter.tracker.in_flight(), 4, "two files and two removals in flight");
        assert_eq!(emitter.counters.seen.load(std::sync::atomic::Ordering::Relaxed), 2);
        let (updated, removed) = drain(emitter, input).await;
        assert_eq!(updated, ["a.rs", "b.md"]);
        assert_eq!(removed, ["dir/old.rs", "gone.rs"]);
    }

    #[tokio::test]
    async fn a_scan_stopped_by_shutdown_removes_nothing() {
        let (_tmp, scanner, state) = setup();
        let (emitter, input) = emitter(64);
        let (_stop, shutdown) = watch::channel(true);
        scan_and_reconcile(&scanner, &state, &emitter, &shutdown).await;
        let (updated, removed) = drain(emitter, input).await;
        assert!(updated.is_empty() && removed.is_empty(), "{updated:?} {removed:?}");
    }

    #[tokio::test]
    async fn a_scan_cut_short_by_a_closed_pipeline_removes_nothing() {
        let (_tmp, scanner, state) = setup();
        let (emitter, input) = emitter(1);
        drop(input);
        let (_stop, shutdown) = watch::channel(false);
        scan_and_reconcile(&scanner, &state, &emitter, &shutdown).await;
        assert_eq!(emitter.tracker.in_flight(), 0, "nothing left counted in flight");
        let pass = scan(&scanner, &emitter, &shutdown).await;
        assert!(!pass.completed && gone(state.paths(), &pass).is_empty());
    }
}
