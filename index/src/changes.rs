//! The change log: which files each of this process's writes to a chunks table changed, so a
//! cache above the index can tell, for two versions, which files differ between them — or that
//! it cannot tell.
//!
//! The answer cache (`ctxd_search::answers`, a crate above this one) keeps an answer across a
//! commit when none of the files it answers with is among the commit's changed files; while the
//! writer ingests, every commit used to start an empty cache (`benches/load.py`: repeated
//! questions' p99 about 13× their idle p99 while the writer edits 20 files a second).
//!
//! Each write that holds the database's turn ([`crate::write_gate`]) logs a **span**: the
//! version before it, the version after it, and the paths whose rows it inserted or deleted —
//! a commit its batch's files, a finished stream its file, a compaction or an index fold none
//! (they rewrite rows and indexes, not what a file holds). Holding the turn, no other write of
//! this process lands in between, so a span's versions are all its own. The write is logged as
//! **pending** before it starts (its version before it and its paths), because its new version
//! is readable the moment it commits, before the write returns and its span is logged: a query
//! that reads the new version in that moment learns from the pending write what changed (without
//! it, the answer cache would carry nothing to that version and compute every question again).
//! Only its own paths can have changed then: an index build outside the turn moves no file's rows.
//! [`changed_between`] joins the spans from one version to another and answers `None` where one is missing:
//! a write this process did not log (building the vector index, which does not take the turn),
//! another process's write (a reader never writes; a second writer is refused by the lease),
//! or versions older than the [`SPANS_KEPT`] last spans. `None` means "unknown", never "none".
//!
//! Paths are kept as 64-bit hashes ([`path_key`]): a collision can only make a file look
//! changed (an answer computed again), never make a changed file look unchanged — and with 64
//! bits it does not happen in practice.

use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::{Hash, Hasher};
use std::sync::{LazyLock, Mutex};

use crate::error::IndexError;
use crate::store::Index;

/// Spans kept per table (a commit each; older versions answer `None`).
pub const SPANS_KEPT: usize = 512;

/// One logged write: versions `from` → `to` (`to` > `from`), the files it changed.
struct Span {
    from: u64,
    to: u64,
    paths: Vec<u64>,
}

/// One table's log: its spans, oldest first, and the write in progress (its version before
/// it and its paths), if any.
#[derive(Default)]
struct TableLog {
    spans: VecDeque<Span>,
    pending: Option<(u64, Vec<u64>)>,
}

/// The tables' logs, by (database URI, table).
static LOG: LazyLock<Mutex<HashMap<(String, String), TableLog>>> = LazyLock::new(Default::default);

fn keys<'a>(paths: impl IntoIterator<Item = &'a str>) -> Vec<u64> {
    let mut keys: Vec<u64> = paths.into_iter().map(path_key).collect();
    keys.sort_unstable();
    keys.dedup();
    keys
}

/// Runs `f` on the log of `table` in the database at `uri`.
fn with_log<T>(uri: &str, table: &str, f: impl FnOnce(&mut TableLog) -> T) -> T {
    let mut log = LOG.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    f(log.entry((uri.to_string(), table.to_string())).or_default())
}

/// The key a path is logged and looked up by (stable within a process).
pub fn path_key(path: &str) -> u64 {
    let mut h = std::hash::DefaultHasher::new();
    path.hash(&mut h);
    h.finish()
}

/// Logs that the write from version `from` to `to` of `table` in the database at `uri` changed
/// the rows of `paths` (none: a write that moved no file's rows). Nothing is logged when the
/// write made no version. [`Index`]'s own writes log themselves, in the database's turn; a
/// write through [`Index::table`] is not logged, so the versions it makes read as unknown.
pub fn record<'a>(uri: &str, table: &str, from: u64, to: u64, paths: impl IntoIterator<Item = &'a str>) {
    begin(uri, table, from, paths).finish(to);
}

/// Logs that a write of `table` starting at version `from` is changing the rows of `paths`, until
/// [`Pending::finish`] logs its span (dropped unfinished — a failed write —, it logs nothing: its
/// versions read as unknown). The caller holds the database's turn.
pub fn begin<'a>(uri: &str, table: &str, from: u64, paths: impl IntoIterator<Item = &'a str>) -> Pending {
    let paths = keys(paths);
    with_log(uri, table, |log| log.pending = Some((from, paths)));
    Pending { uri: uri.to_string(), table: table.to_string() }
}

/// A write in progress ([`begin`]).
pub struct Pending {
    uri: String,
    table: String,
}

impl Pending {
    /// The write ended at version `to`: its span is logged.
    pub fn finish(self, to: u64) {
        with_log(&self.uri, &self.table, |log| match log.pending.take() {
            Some((from, paths)) if to > from => {
                log.spans.push_back(Span { from, to, paths });
                while log.spans.len() > SPANS_KEPT {
                    log.spans.pop_front();
                }
            }
            _ => {}
        });
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        with_log(&self.uri, &self.table, |log| log.pending = None);
    }
}

/// The keys ([`path_key`]) of the files whose rows differ between versions `from` and `to`
/// (`from` < `to`) of `table` in the database at `uri`, when every write in between was logged;
/// `None` when one was not (see the module docs). Equal versions: nothing changed.
pub fn changed_between(uri: &str, table: &str, from: u64, to: u64) -> Option<HashSet<u64>> {
    if from == to {
        return Some(HashSet::new());
    }
    if from > to {
        return None;
    }
    let log = LOG.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let log = log.get(&(uri.to_string(), table.to_string()))?;
    let mut changed = HashSet::new();
    let mut at = from;
    // Spans are logged in commit order, so they are sorted by version.
    for span in log.spans.iter().skip_while(|s| s.from < from) {
        if span.from != at {
            return None; // a write nobody logged lies between
        }
        changed.extend(span.paths.iter().copied());
        at = span.to;
        if at >= to {
            break;
        }
    }
    match &log.pending {
        // The rest is the write in progress (committed, its span not logged yet).
        Some((start, paths)) if at < to && *start == at => {
            changed.extend(paths.iter().copied());
            Some(changed)
        }
        _ => (at == to).then_some(changed),
    }
}

impl Index {
    /// Runs `write` — a write of the chunks table in this process's turn — and logs the versions
    /// it made as changing the rows of `paths` (none for a compaction or an index fold or merge:
    /// they move no file's rows), pending while it runs ([`begin`]). A failed write logs nothing:
    /// its versions read as unknown.
    pub(crate) async fn logged<'a, T>(
        &self,
        paths: impl IntoIterator<Item = &'a str>,
        write: impl std::future::Future<Output = Result<T, IndexError>>,
    ) -> Result<T, IndexError> {
        let pending = begin(&self.uri, &self.table_name, self.version().await?, paths);
        let out = write.await?;
        pending.finish(self.version().await?);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_join_into_the_files_changed_and_a_gap_means_unknown() {
        let (uri, table) = ("mem://changes-test", "chunks");
        record(uri, table, 3, 4, ["a.py", "b.py"]);
        record(uri, table, 4, 6, ["c.py"]);
        record(uri, table, 6, 7, std::iter::empty()); // a compaction
        record(uri, table, 9, 10, ["d.py"]); // 7 → 9 was not logged
        record(uri, table, 10, 10, ["never.py"]); // made no version
        let keys = |paths: &[&str]| paths.iter().map(|p| path_key(p)).collect::<HashSet<_>>();
        assert_eq!(changed_between(uri, table, 3, 4), Some(keys(&["a.py", "b.py"])));
        assert_eq!(changed_between(uri, table, 3, 7), Some(keys(&["a.py", "b.py", "c.py"])));
        assert_eq!(changed_between(uri, table, 6, 7), Some(keys(&[])), "a compaction changes no file");
        assert_eq!(changed_between(uri, table, 4, 4), Some(keys(&[])));
        assert_eq!(changed_between(uri, table, 7, 10), None, "the write from 7 to 9 is unknown");
        assert_eq!(changed_between(uri, table, 3, 5), None, "5 is inside a span: not a version between writes");
        assert_eq!(changed_between(uri, table, 2, 4), None, "before the log");
        assert_eq!(changed_between(uri, table, 9, 11), None, "past the log");
        assert_eq!(changed_between(uri, "chunks__other", 3, 4), None, "another table has its own log");
        assert_eq!(changed_between(uri, table, 4, 3), None);
    }

    #[test]
    fn a_version_read_before_its_write_is_logged_is_told_by_the_pending_write() {
        let (uri, table) = ("mem://changes-pending", "chunks");
        record(uri, table, 3, 4, ["a.py"]);
        let keys = |paths: &[&str]| paths.iter().map(|p| path_key(p)).collect::<HashSet<_>>();
        let write = begin(uri, table, 4, ["b.py"]);
        // Version 5 is committed and read before the write returns.
        assert_eq!(changed_between(uri, table, 4, 5), Some(keys(&["b.py"])));
        assert_eq!(changed_between(uri, table, 3, 5), Some(keys(&["a.py", "b.py"])));
        assert_eq!(changed_between(uri, table, 2, 5), None, "before the log");
        write.finish(5);
        assert_eq!(changed_between(uri, table, 4, 5), Some(keys(&["b.py"])));
        assert_eq!(changed_between(uri, table, 5, 6), None, "nothing pending: 5 → 6 is unknown");
        let failed = begin(uri, table, 5, ["c.py"]);
        drop(failed);
        assert_eq!(changed_between(uri, table, 5, 6), None, "a failed write logs nothing");
        assert_eq!(changed_between(uri, table, 3, 5), Some(keys(&["a.py", "b.py"])));
    }

    #[test]
    fn the_log_keeps_the_last_spans() {
        let (uri, table) = ("mem://changes-bound", "chunks");
        for v in 0..(SPANS_KEPT as u64 + 10) {
            record(uri, table, v, v + 1, ["x.py"]);
        }
        assert_eq!(changed_between(uri, table, 0, 1), None, "dropped");
        let last = SPANS_KEPT as u64 + 10;
        assert_eq!(changed_between(uri, table, last - 5, last).map(|s| s.len()), Some(1));
    }
}
