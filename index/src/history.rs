//! The `file_history` table: for each indexed file, the recent commits that changed it.
//!
//! | column | type | meaning |
//! |---|---|---|
//! | path | utf8 | the file's stored path (`name@ref/…` for a git source, `name/…` or a plain path for a folder) |
//! | commit | utf8 | the commit id |
//! | time | int64 | commit time, seconds since the Unix epoch |
//! | author | utf8 | the author's name |
//! | summary | utf8 | the first line of the commit message |
//!
//! A source writes the history of one view at a time ([`replace`]: every row under a path
//! prefix, then the new ones); readers load it whole per scope ([`HistoryReads::file_history`]) — it
//! is small (a few rows per file: the last few hundred commits of each ref). Queries use it
//! for recency and co-change (files changed by the same commits), and `ctxd history` lists a
//! file's commits. It is not part of the chunks table's versions, but a tag of the current
//! version tags the history too ([`Snapshots::tag`]): a view as of a tag reads the history recorded
//! with it, an untagged past version today's. "Recorded with it" is exact after a one-shot
//! `ctxd index` (its history is written before it returns); a daemon records a moved ref's
//! history beside its commits, so a tag taken while it runs may hold the history of a moment
//! before or after. Rows of a path outside a caller's scope are never returned.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::{Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, SchemaRef};

use crate::columns::{str_col, typed_col};
use crate::connection::replace_where;
use crate::schema::required_columns;
use crate::sql::sql_str;
use crate::{error::IndexError, store::Index};

/// Name of the table inside the database directory.
pub const HISTORY_TABLE: &str = "file_history";

/// One commit that changed one file.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct FileCommit {
    pub path: String,
    pub commit: String,
    /// Seconds since the Unix epoch.
    pub time: i64,
    pub author: String,
    pub summary: String,
}

/// The history table: one row per (file, commit), the fields of [`FileCommit`].
const COLUMNS: [(&str, DataType); 5] = [
    ("path", DataType::Utf8),
    ("commit", DataType::Utf8),
    ("time", DataType::Int64),
    ("author", DataType::Utf8),
    ("summary", DataType::Utf8),
];

fn schema() -> SchemaRef {
    required_columns(&COLUMNS)
}

/// Replaces the history of every path under `prefix` (`""`: the whole table) with `rows`.
pub async fn replace(uri: &str, prefix: &str, rows: &[FileCommit]) -> Result<(), IndexError> {
    crate::fence::confirm(uri).await?;
    let batch = RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.path.as_str()))),
            Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.commit.as_str()))),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.time))),
            Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.author.as_str()))),
            Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.summary.as_str()))),
        ],
    )?;
    let filter = if prefix.is_empty() {
        "TRUE".to_string()
    } else {
        format!("path LIKE {}", sql_str(&format!("{}%", prefix.replace('%', ""))))
    };
    replace_where(uri, HISTORY_TABLE, &filter, batch).await
}

/// A view's history: every row, by path (newest commit first) and by commit.
#[derive(Debug, Clone, Default)]
pub struct History {
    pub by_path: HashMap<String, Vec<FileCommit>>,
    /// [`History::commit_key`] → the paths the commit changed in that view.
    pub by_commit: HashMap<String, Vec<String>>,
    /// The newest commit time seen (the "now" recency is measured from).
    pub newest: i64,
}

impl History {
    /// The key of `commit` in the view of `path` (its first segment: `lib@main`, `docs`): one
    /// commit seen by two views (two refs, a ref and a work tree) groups each view's files apart.
    pub fn commit_key(path: &str, commit: &str) -> String {
        let view = path.split_once('/').map_or("", |(v, _)| v);
        format!("{view}\u{1f}{commit}")
    }

    /// Adds one row.
    pub fn push(&mut self, row: FileCommit) {
        self.newest = self.newest.max(row.time);
        self.by_commit.entry(Self::commit_key(&row.path, &row.commit)).or_default().push(row.path.clone());
        self.by_path.entry(row.path.clone()).or_default().push(row);
    }

    /// The commits of `path`, newest first.
    pub fn of(&self, path: &str) -> &[FileCommit] {
        self.by_path.get(path).map_or(&[], Vec::as_slice)
    }

    /// Files changed together with `path` (in the same commits), with how often, most first.
    pub fn cochanged(&self, path: &str) -> Vec<(String, usize)> {
        let mut n: HashMap<&str, usize> = HashMap::new();
        for c in self.of(path) {
            for other in self.by_commit.get(&Self::commit_key(path, &c.commit)).into_iter().flatten() {
                if other != path {
                    *n.entry(other.as_str()).or_default() += 1;
                }
            }
        }
        let mut out: Vec<(String, usize)> = n.into_iter().map(|(p, k)| (p.to_string(), k)).collect();
        out.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        out
    }

    pub fn is_empty(&self) -> bool {
        self.by_path.is_empty()
    }
}

/// What the index holds of its sources' git history: the per-file history and the query adapter
/// fitted on it.
///
/// Made by [`Index::history`]; it borrows the handle (and so its view: scope, pinned version).
#[derive(Clone, Copy)]
pub struct HistoryReads<'a> {
    pub(crate) index: &'a Index,
}

impl Index {
    /// What the index holds of its sources' git history: see [`HistoryReads`].
    pub fn history(&self) -> HistoryReads<'_> {
        HistoryReads { index: self }
    }
}

impl HistoryReads<'_> {
    /// The history of this view's files (empty when no source recorded any).
    pub async fn file_history(self) -> Result<History, IndexError> {
        let Some(table) = crate::connection::open_if_exists(&self.index.uri, HISTORY_TABLE).await? else {
            return Ok(History::default());
        };
        if let Some(v) = self.index.pinned_history {
            table.checkout(v).await.map_err(|e| self.index.lance(e))?;
        }
        let batches = self.index.scoped_rows(&table).await?;
        let mut h = History::default();
        for b in &batches {
            let (paths, commits) = (str_col(b, "path", &self.index.uri)?, str_col(b, "commit", &self.index.uri)?);
            let (authors, summaries) =
                (str_col(b, "author", &self.index.uri)?, str_col(b, "summary", &self.index.uri)?);
            let times = typed_col::<Int64Array>(b, "time", &self.index.uri)?;
            for i in 0..b.num_rows() {
                if !self.index.sees(paths.value(i)) {
                    continue;
                }
                let row = FileCommit {
                    path: paths.value(i).to_string(),
                    commit: commits.value(i).to_string(),
                    time: times.value(i),
                    author: authors.value(i).to_string(),
                    summary: summaries.value(i).to_string(),
                };
                h.push(row);
            }
        }
        for rows in h.by_path.values_mut() {
            // Stable: commits of the same second keep the walk's order (rows are written newest first).
            rows.sort_by_key(|r| std::cmp::Reverse(r.time));
        }
        Ok(h)
    }

    /// The version of the history table this view reads (`0` without one): a cache key for
    /// [`HistoryReads::file_history`].
    pub async fn history_version(self) -> Result<u64, IndexError> {
        let Some(table) = crate::connection::open_if_exists(&self.index.uri, HISTORY_TABLE).await? else {
            return Ok(0);
        };
        match self.index.pinned_history {
            Some(v) => Ok(v),
            None => table.version().await.map_err(|e| self.index.lance(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(path: &str, commit: &str, time: i64) -> FileCommit {
        FileCommit {
            path: path.into(),
            commit: commit.into(),
            time,
            author: "a".into(),
            summary: format!("c {commit}"),
        }
    }

    #[tokio::test]
    async fn a_view_is_replaced_whole_and_read_by_scope() {
        let dir = tempfile::tempdir().unwrap();
        let uri = dir.path().to_string_lossy().into_owned();
        let idx = Index::open_or_create(&uri, "m", 4).await.unwrap();
        assert!(idx.history().file_history().await.unwrap().is_empty());
        replace(
            &uri,
            "lib@main/",
            &[row("lib@main/a.py", "c1", 10), row("lib@main/b.py", "c1", 10), row("lib@main/a.py", "c2", 20)],
        )
        .await
        .unwrap();
        replace(&uri, "docs/", &[row("docs/x.md", "d1", 5)]).await.unwrap();
        let h = idx.history().file_history().await.unwrap();
        assert_eq!(h.of("lib@main/a.py").iter().map(|r| r.commit.as_str()).collect::<Vec<_>>(), ["c2", "c1"]);
        assert_eq!(h.cochanged("lib@main/a.py"), [("lib@main/b.py".to_string(), 1)]);
        assert_eq!(h.newest, 20);
        // A new tip of lib@main replaces its rows only.
        replace(&uri, "lib@main/", &[row("lib@main/b.py", "c3", 30)]).await.unwrap();
        let h = idx.history().file_history().await.unwrap();
        assert!(h.of("lib@main/a.py").is_empty() && h.of("docs/x.md").len() == 1);
        let docs = idx.scoped(Some(crate::scope::SourceScope::new(["docs"]))).await.unwrap();
        let h = docs.history().file_history().await.unwrap();
        assert_eq!(h.by_path.keys().collect::<Vec<_>>(), ["docs/x.md"]);
        assert!(idx.history().history_version().await.unwrap() >= 3);
    }
}
