//! The history signals of localization, read from the index's `file_history` table
//! (`ctxd_index::history`; recorded for git sources and folders that are git work trees):
//!
//! * [`Signal::Recency`] — how recently a file changed, measured from the newest commit of
//!   the view (not the clock: an index of an old commit is as fresh as that commit). A boost
//!   for files other signals already found, `exp(−age / 30 days)`, heavier for a debugging
//!   text (a traceback, an error message, "regression", "since"): what broke is most often
//!   what changed lately.
//! * [`Signal::Cochange`] — files that changed in the same commits as the best files so far
//!   (`P(other changes | best file changes)` over the recorded commits, from the ten best
//!   files, weighted by their scores): a fix that touches a parser also touches its tests'
//!   fixtures and the dialect next to it.
//!
//! Both say *why* in the file's `why` (the commit's short id, age and message; the partner
//! file and how often). Without history (an index of a plain folder) both are silent.
//!
//! [`Signal::Recency`]: super::Signal::Recency
//! [`Signal::Cochange`]: super::Signal::Cochange

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ctxd_index::{history::History, store::Index};
use tokio::sync::Mutex;

use super::signals::Scores;
use crate::graph::impact::CoChanged;
use crate::graph::CodeGraph;
use ctxd_search::error::SearchError;

/// Age (seconds) at which recency has fallen to 1/e.
const RECENCY_SCALE: f64 = 30.0 * 86_400.0;
/// Files seeding co-change.
const COCHANGE_SEEDS: usize = 10;
/// A seed must have changed at least this often for its partners to count.
const MIN_COMMITS: usize = 2;

/// How long a cached history is used before the table's version is checked again.
const RECHECK: Duration = Duration::from_secs(2);

/// Histories loaded per view, keyed by the view and the history table's version (checked at
/// most every two seconds, so a search does not open the table each time).
#[derive(Clone, Default)]
pub struct HistoryCache {
    slots: Arc<Mutex<Vec<Slot>>>,
}

/// A cached history: view key, table version, when the version was last checked, history.
type Slot = (String, u64, Instant, Arc<History>);

impl HistoryCache {
    /// The history of `index`'s view (empty when none was recorded).
    pub async fn get(&self, index: &Index) -> Result<Arc<History>, SearchError> {
        // A view of a tagged past version reads the history tagged with it: its own slot.
        let key = format!("{}{}@{:?}", index.uri(), index.scope_key(), index.pinned());
        if let Some((_, _, at, h)) = self.slots.lock().await.iter().find(|s| s.0 == key) {
            if at.elapsed() < RECHECK {
                return Ok(h.clone());
            }
        }
        let version = index.history().history_version().await?;
        let mut slots = self.slots.lock().await;
        if let Some(slot) = slots.iter_mut().find(|s| s.0 == key && s.1 == version) {
            slot.2 = Instant::now();
            return Ok(slot.3.clone());
        }
        let h = Arc::new(if version == 0 { History::default() } else { index.history().file_history().await? });
        slots.retain(|s| s.0 != key);
        slots.push((key, version, Instant::now(), h.clone()));
        if slots.len() > 8 {
            slots.remove(0);
        }
        Ok(h)
    }
}

/// One commit of a file, as `history` lists it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct CommitLine {
    pub commit: String,
    /// Commit time, RFC 3339 (UTC).
    pub date: String,
    pub author: String,
    pub summary: String,
}

/// A file's history: its commits (newest first) and the files that changed with it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct FileLog {
    pub path: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub source: String,
    #[serde(rename = "ref", skip_serializing_if = "String::is_empty")]
    pub git_ref: String,
    pub commits: Vec<CommitLine>,
    /// `(path, commits in common)`, most first.
    pub cochanged: Vec<(String, usize)>,
}

/// The answer of `history`: every indexed view of the file the request names.
#[derive(Debug, Clone, serde::Serialize)]
pub struct HistoryAnswer {
    pub files: Vec<FileLog>,
}

/// The logs of `path` in `h`: the stored path itself, or every view whose path ends with it
/// (`src/a.py` finds `lib@main/src/a.py` and `lib@v2/src/a.py`); `limit` commits each, and
/// every co-changed file.
pub fn file_logs(h: &History, path: &str, limit: usize) -> HistoryAnswer {
    let path = path.trim_start_matches("./");
    let mut paths: Vec<&String> = match h.by_path.get_key_value(path) {
        Some((p, _)) => vec![p],
        None => h.by_path.keys().filter(|p| p.ends_with(path) && p[..p.len() - path.len()].ends_with('/')).collect(),
    };
    paths.sort();
    let files = paths
        .into_iter()
        .map(|p| {
            // A git view names its source and ref; a folder's first segment may be a folder.
            let (source, git_ref) = match p.split_once('/') {
                Some((segment, _)) if segment.contains('@') => {
                    let (name, r) = ctxd_index::record::split_source(segment);
                    (name.to_string(), r)
                }
                _ => (String::new(), String::new()),
            };
            let commits = h
                .of(p)
                .iter()
                .take(limit)
                .map(|c| CommitLine {
                    commit: c.commit.clone(),
                    date: chrono::DateTime::from_timestamp(c.time, 0).map(|d| d.to_rfc3339()).unwrap_or_default(),
                    author: c.author.clone(),
                    summary: c.summary.clone(),
                })
                .collect();
            FileLog { path: p.clone(), source, git_ref, commits, cochanged: h.cochanged(p) }
        })
        .collect();
    HistoryAnswer { files }
}

/// The files that changed in the same commits as any of `paths` (each found as `file_logs`
/// finds it), without `paths` themselves and files `indexed` refuses; the most shared commits
/// first, at most `limit`.
pub fn cochanged_with(h: &History, paths: &[String], limit: usize, indexed: impl Fn(&str) -> bool) -> Vec<CoChanged> {
    let logs: Vec<FileLog> = paths.iter().flat_map(|p| file_logs(h, p, 0).files).collect();
    let changed: std::collections::HashSet<&str> = logs.iter().map(|l| l.path.as_str()).collect();
    let mut best: HashMap<&str, CoChanged> = HashMap::new();
    for log in &logs {
        for (p, n) in &log.cochanged {
            if changed.contains(p.as_str()) || !indexed(p) {
                continue;
            }
            let entry =
                best.entry(p).or_insert_with(|| CoChanged { path: p.clone(), commits: 0, with: log.path.clone() });
            if *n > entry.commits {
                (entry.commits, entry.with) = (*n, log.path.clone());
            }
        }
    }
    let mut out: Vec<CoChanged> = best.into_values().collect();
    out.sort_by(|a, b| b.commits.cmp(&a.commits).then_with(|| a.path.cmp(&b.path)));
    out.truncate(limit);
    out
}

/// `abc1234 3d ago: Fix the parser` for a file's last commit.
fn last_change(h: &History, path: &str) -> Option<(f64, String)> {
    let c = h.of(path).first()?;
    let age = (h.newest - c.time).max(0) as f64;
    let short = &c.commit[..c.commit.len().min(7)];
    let days = age / 86_400.0;
    let when = if days < 1.0 {
        "the newest commit's day".to_string()
    } else {
        format!("{days:.0} days before the newest commit")
    };
    Some((age, format!("last changed {when} ({short}: {})", c.summary)))
}

/// Recency of the `candidates` (files with evidence already).
pub fn recency(g: &CodeGraph, h: &History, candidates: impl Iterator<Item = usize>) -> Scores {
    let mut s = Scores::default();
    if h.is_empty() {
        return s;
    }
    for f in candidates {
        if let Some((age, why)) = last_change(h, &g.files[f]) {
            s.add(f, (-age / RECENCY_SCALE).exp(), || why);
        }
    }
    s
}

/// Co-change with the best files (`ranked`: file and fused score, best first).
pub fn cochange(g: &CodeGraph, h: &History, ranked: &[(usize, f64)]) -> Scores {
    let mut s = Scores::default();
    let Some(&(_, top)) = ranked.first() else { return s };
    if h.is_empty() || top <= 0.0 {
        return s;
    }
    let mut total: HashMap<usize, (f64, String)> = HashMap::new();
    for &(seed, score) in ranked.iter().take(COCHANGE_SEEDS) {
        let path = &g.files[seed];
        let n = h.of(path).len();
        if n < MIN_COMMITS {
            continue;
        }
        for (other, k) in h.cochanged(path) {
            let Some(f) = g.file(&other) else { continue };
            if f == seed {
                continue;
            }
            let x = (score / top) * (k as f64 / n as f64);
            let e = total.entry(f).or_insert((0.0, String::new()));
            if x > e.0 {
                e.1 = format!("changed with {path} in {k} of its {n} commits");
            }
            e.0 += x;
        }
    }
    for (f, (x, why)) in total {
        s.add(f, x.min(1.0), || why);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use ctxd_index::history::FileCommit;

    fn history(rows: &[(&str, &str, i64)]) -> History {
        let mut h = History::default();
        for (path, commit, time) in rows {
            h.push(FileCommit {
                path: path.to_string(),
                commit: commit.to_string(),
                time: *time,
                author: "a".into(),
                summary: format!("msg {commit}"),
            });
        }
        for v in h.by_path.values_mut() {
            v.sort_by_key(|r| std::cmp::Reverse(r.time));
        }
        h
    }

    fn graph(files: &[&str]) -> CodeGraph {
        crate::graph::build::build(files.iter().map(|f| f.to_string()).collect(), Vec::new(), Vec::new(), (0, 0, 0))
    }

    #[test]
    fn recent_files_score_higher_and_say_which_commit() {
        let day = 86_400;
        let h = history(&[("a.py", "c1aaaaaaaa", 100 * day), ("b.py", "c2bbbbbbbb", 40 * day)]);
        let g = graph(&["a.py", "b.py", "c.py"]);
        let (a, b, c) = (g.file("a.py").unwrap(), g.file("b.py").unwrap(), g.file("c.py").unwrap());
        let s = recency(&g, &h, 0..3);
        assert!((s.score[&a] - 1.0).abs() < 1e-9 && s.score[&b] < 0.2, "{:?}", s.score);
        assert!(!s.score.contains_key(&c), "no history, no score");
        assert!(s.why[&a].contains("c1aaaaa") && s.why[&a].contains("msg c1aaaaaaaa"), "{}", s.why[&a]);
        assert!(recency(&g, &History::default(), 0..3).score.is_empty());
    }

    #[test]
    fn partners_of_the_best_files_rise_by_how_often_they_change_together() {
        let h = history(&[
            ("parser.py", "c1", 1),
            ("dialect.py", "c1", 1),
            ("parser.py", "c2", 2),
            ("dialect.py", "c2", 2),
            ("parser.py", "c3", 3),
            ("readme.py", "c3", 3),
        ]);
        let g = graph(&["parser.py", "dialect.py", "readme.py", "other.py"]);
        let id = |p: &str| g.file(p).unwrap();
        let (parser, dialect, readme, other) = (id("parser.py"), id("dialect.py"), id("readme.py"), id("other.py"));
        let s = cochange(&g, &h, &[(parser, 2.0), (other, 1.0)]);
        assert!(s.score[&dialect] > s.score[&readme], "{:?}", s.score);
        assert!((s.score[&dialect] - 2.0 / 3.0).abs() < 1e-9);
        assert_eq!(s.why[&dialect], "changed with parser.py in 2 of its 3 commits");
        assert!(!s.score.contains_key(&parser) && !s.score.contains_key(&other));
    }

    #[test]
    fn impact_lists_what_changes_with_the_changed_files() {
        let h = history(&[
            ("lib@main/parser.py", "c1", 1),
            ("lib@main/dialect.py", "c1", 1),
            ("lib@main/tokens.py", "c1", 1),
            ("lib@main/parser.py", "c2", 2),
            ("lib@main/dialect.py", "c2", 2),
            ("lib@main/tokens.py", "c3", 3),
            ("lib@main/gone.py", "c3", 3),
        ]);
        let indexed = |p: &str| p != "lib@main/gone.py";
        let out = cochanged_with(&h, &["parser.py".into(), "tokens.py".into()], 10, indexed);
        let got: Vec<(&str, usize, &str)> = out.iter().map(|c| (c.path.as_str(), c.commits, c.with.as_str())).collect();
        assert_eq!(
            got,
            [("lib@main/dialect.py", 2, "lib@main/parser.py")],
            "changed files and unindexed ones are left out"
        );
        assert!(cochanged_with(&History::default(), &["parser.py".into()], 10, |_| true).is_empty());
    }
}
