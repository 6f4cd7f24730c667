//! Versioned snapshots of the chunks table.
//!
//! Every commit of the chunks table is a LanceDB version. [`Index::snapshots`] lists them
//! with their time, row count and tags; [`Snapshots::tag`] names a version (a git commit, a
//! release); [`Snapshots::at`] opens a read-only view of one version — a separate table handle
//! checked out at it, so queries "as of" a snapshot run while ingestion goes on committing
//! new versions through the writer's handle. Tagged versions are kept by old-version cleanup.
//!
//! A tag names the same moment in the side tables: the symbols and edges of that version and,
//! when the tagged version is the current one, the current git history (`file_history`, see
//! [`crate::history`]), so a view as of a tag reads the history recorded with it (an untagged
//! past version reads today's).

use std::collections::BTreeMap;
use std::str::FromStr;

use lancedb::Table;

use crate::{edges::EDGES_TABLE, error::IndexError, history::HISTORY_TABLE, store::Index, symbols::SYMBOLS_TABLE};

/// One version of the chunks table.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Snapshot {
    pub version: u64,
    /// Commit time, RFC 3339 (UTC).
    pub timestamp: String,
    /// Chunk rows in this version.
    pub rows: usize,
    /// Tags naming this version.
    pub tags: Vec<String>,
}

/// A snapshot named by version number (`12`, `v12`) or by tag.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum AsOf {
    Version(u64),
    Tag(String),
}

impl FromStr for AsOf {
    type Err = IndexError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        if s.is_empty() {
            return Err(IndexError::Snapshot { uri: String::new(), message: "empty snapshot name".into() });
        }
        let digits = s.strip_prefix('v').unwrap_or(s);
        match digits.parse::<u64>() {
            Ok(v) => Ok(AsOf::Version(v)),
            Err(_) => Ok(AsOf::Tag(s.to_string())),
        }
    }
}

impl std::fmt::Display for AsOf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AsOf::Version(v) => write!(f, "version {v}"),
            AsOf::Tag(t) => write!(f, "tag '{t}'"),
        }
    }
}

impl Index {
    fn snapshot_error(&self, message: String) -> IndexError {
        IndexError::Snapshot { uri: self.uri.clone(), message }
    }

    /// A second handle on the chunks table (checking it out leaves the writer's alone).
    async fn view(&self) -> Result<Table, IndexError> {
        let conn = crate::connection::connect(&self.uri).await?;
        conn.open_table(&self.table_name).execute().await.map_err(|e| self.lance(e))
    }

    /// `version → tags` of the chunks table.
    async fn tags_by_version(&self) -> Result<BTreeMap<u64, Vec<String>>, IndexError> {
        let tags = self.table.tags().await.map_err(|e| self.lance(e))?;
        let mut out: BTreeMap<u64, Vec<String>> = BTreeMap::new();
        for (name, contents) in tags.list().await.map_err(|e| self.lance(e))? {
            out.entry(contents.version).or_default().push(name);
        }
        for names in out.values_mut() {
            names.sort();
        }
        Ok(out)
    }

    /// Deletes a side table's tag `name` where it has one (the side tables carry a tag only when
    /// the tagged version had them: see `tag`).
    async fn drop_side_tag(&self, table: &Table, name: &str) -> Result<(), IndexError> {
        let mut tags = table.tags().await.map_err(|e| self.lance(e))?;
        if tags.get_version(name).await.is_ok() {
            tags.delete(name).await.map_err(|e| self.lance(e))?;
        }
        Ok(())
    }

    async fn check_version(&self, version: u64) -> Result<(), IndexError> {
        let versions = self.table.list_versions().await.map_err(|e| self.lance(e))?;
        if versions.iter().any(|v| v.version == version) {
            return Ok(());
        }
        let (lo, hi) = (versions.first().map_or(0, |v| v.version), versions.last().map_or(0, |v| v.version));
        Err(self.snapshot_error(format!("no version {version} (versions on disk: {lo}..={hi})")))
    }

    /// The history table's version recorded with a tag of chunks `version` (see [`Snapshots::tag`]):
    /// the newest when several tags of it tagged the history, `None` when none did — or when the
    /// tags cannot be listed now (another process deleting one): the view then reads today's.
    async fn history_tagged_at(&self, version: u64) -> Option<u64> {
        // No history table (an index of plain folders): no tags to list.
        let h = crate::connection::open_if_exists(&self.uri, HISTORY_TABLE).await.ok()??;
        let names = self.tags_by_version().await.ok()?.remove(&version)?;
        let tags = h.tags().await.ok()?;
        let mut best = None;
        for n in &names {
            if let Ok(v) = tags.get_version(n).await {
                best = best.max(Some(v));
            }
        }
        best
    }

    /// The symbols and edges tables as they were when chunks `version` was committed, checked
    /// out: each side table's latest version written no later than it (a commit writes them
    /// just before its chunks). A side table missing, or with no version that old left on disk,
    /// is left out. Returns (table name, handle, side version).
    async fn side_tables_at(&self, version: u64) -> Result<Vec<(&'static str, Table, u64)>, IndexError> {
        let versions = self.table.list_versions().await.map_err(|e| self.lance(e))?;
        let Some(at) = versions.iter().find(|v| v.version == version).map(|v| v.timestamp) else {
            return Ok(Vec::new());
        };
        let conn = crate::connection::connect(&self.uri).await?;
        let names = conn.table_names().execute().await.map_err(|e| self.lance(e))?;
        let mut out = Vec::new();
        for name in [SYMBOLS_TABLE, EDGES_TABLE] {
            if !names.iter().any(|n| n == name) {
                continue;
            }
            let side = conn.open_table(name).execute().await.map_err(|e| self.lance(e))?;
            let side_versions = side.list_versions().await.map_err(|e| self.lance(e))?;
            let Some(v) = side_versions.iter().filter(|v| v.timestamp <= at).map(|v| v.version).max() else {
                continue;
            };
            side.checkout(v).await.map_err(|e| self.lance(e))?;
            out.push((name, side, v));
        }
        Ok(out)
    }
}

/// The index's snapshots: the tagged and recent versions, tags, what `as_of` names, a view of a
/// past version.
///
/// Made by [`Index::snapshots`]; it borrows the handle (and so its view: scope, pinned version).
#[derive(Clone, Copy)]
pub struct Snapshots<'a> {
    pub(crate) index: &'a Index,
}

impl Index {
    /// The index's snapshots: see [`Snapshots`].
    pub fn snapshots(&self) -> Snapshots<'_> {
        Snapshots { index: self }
    }
}

impl Snapshots<'_> {
    /// The version this handle reads and when it was committed (UTC).
    pub async fn version_committed(self) -> Result<(u64, chrono::DateTime<chrono::Utc>), IndexError> {
        let Some(dataset) = self.index.table.dataset() else {
            return Ok((self.index.version().await?, chrono::Utc::now()));
        };
        let v = dataset.get().await.map_err(|e| self.index.lance(e))?.version();
        Ok((v.version, v.timestamp))
    }

    /// Every version still on disk, oldest first.
    pub async fn list(self) -> Result<Vec<Snapshot>, IndexError> {
        self.recent_snapshots(usize::MAX).await
    }

    /// The last `n` versions still on disk, oldest first (each is opened to count its rows, so
    /// a caller that polls asks for a few).
    pub async fn recent_snapshots(self, n: usize) -> Result<Vec<Snapshot>, IndexError> {
        let mut versions = self.index.table.list_versions().await.map_err(|e| self.index.lance(e))?;
        versions.sort_by_key(|v| v.version);
        let versions = versions.split_off(versions.len().saturating_sub(n));
        let mut tags = self.index.tags_by_version().await?;
        let view = self.index.view().await?;
        let mut out = Vec::with_capacity(versions.len());
        for v in versions {
            view.checkout(v.version).await.map_err(|e| self.index.lance(e))?;
            let rows = view.count_rows(None).await.map_err(|e| self.index.lance(e))?;
            out.push(Snapshot {
                version: v.version,
                timestamp: v.timestamp.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                rows,
                tags: tags.remove(&v.version).unwrap_or_default(),
            });
        }
        Ok(out)
    }

    /// Tags `version` (default: the current one) as `name`, moving the tag if it exists.
    /// Returns the version tagged.
    pub async fn tag(self, name: &str, version: Option<u64>) -> Result<u64, IndexError> {
        if name.trim().is_empty() || name.parse::<u64>().is_ok() {
            return Err(self
                .index
                .snapshot_error(format!("'{name}' cannot be a tag: use a name that is not a number")));
        }
        crate::fence::confirm(&self.index.uri).await?;
        let current = self.index.table.version().await.map_err(|e| self.index.lance(e))?;
        let version = version.unwrap_or(current);
        self.index.check_version(version).await?;
        // The same tag on the symbols and edges of that version, so cleanup keeps them too.
        let mut sides = self.index.side_tables_at(version).await?;
        // The history has no versions in step with the chunks: only the current one is known to
        // be the history of the current version. A tag moved to an older version drops its
        // history tag (that version reads today's history).
        if let Some(h) = crate::connection::open_if_exists(&self.index.uri, HISTORY_TABLE).await? {
            if version == current {
                let v = h.version().await.map_err(|e| self.index.lance(e))?;
                sides.push((HISTORY_TABLE, h, v));
            } else {
                self.index.drop_side_tag(&h, name).await?;
            }
        }
        let tagged = std::iter::once((&self.index.table, version)).chain(sides.iter().map(|(_, side, v)| (side, *v)));
        for (table, at) in tagged {
            // Create, else move an existing tag: no listing of all tags, which fails while another
            // process deletes one of them (parallel re-embedding shards tag and untag the source).
            let mut tags = table.tags().await.map_err(|e| self.index.lance(e))?;
            if let Err(e) = tags.create(name, at).await {
                tags.update(name, at).await.map_err(|_| self.index.lance(e))?;
            }
        }
        Ok(version)
    }

    /// Tags the current version of the chunks table as `name` unless that tag exists; the
    /// version it names either way (of processes racing to create it, all get the winner's).
    pub async fn tag_once(self, name: &str) -> Result<u64, IndexError> {
        if let Ok(v) = self.resolve(&AsOf::Tag(name.to_string())).await {
            return Ok(v);
        }
        crate::fence::confirm(&self.index.uri).await?;
        let current = self.index.table.version().await.map_err(|e| self.index.lance(e))?;
        let mut tags = self.index.table.tags().await.map_err(|e| self.index.lance(e))?;
        match tags.create(name, current).await {
            Ok(()) => Ok(current),
            // Created by another process meanwhile: theirs.
            Err(e) => self.resolve(&AsOf::Tag(name.to_string())).await.map_err(|_| self.index.lance(e)),
        }
    }

    /// Removes a tag (its version becomes eligible for cleanup).
    pub async fn untag(self, name: &str) -> Result<(), IndexError> {
        crate::fence::confirm(&self.index.uri).await?;
        let mut tags = self.index.table.tags().await.map_err(|e| self.index.lance(e))?;
        if tags.get_version(name).await.is_err() {
            return Err(self.index.snapshot_error(format!("no tag '{name}'")));
        }
        tags.delete(name).await.map_err(|e| self.index.lance(e))?;
        let conn = crate::connection::connect(&self.index.uri).await?;
        let names = conn.table_names().execute().await.map_err(|e| self.index.lance(e))?;
        for side in [SYMBOLS_TABLE, EDGES_TABLE, HISTORY_TABLE] {
            if names.iter().any(|n| n == side) {
                let table = conn.open_table(side).execute().await.map_err(|e| self.index.lance(e))?;
                self.index.drop_side_tag(&table, name).await?;
            }
        }
        Ok(())
    }

    /// The version `as_of` names.
    pub async fn resolve(self, as_of: &AsOf) -> Result<u64, IndexError> {
        match as_of {
            AsOf::Version(v) => {
                self.index.check_version(*v).await?;
                Ok(*v)
            }
            AsOf::Tag(t) => {
                let tags = self.index.table.tags().await.map_err(|e| self.index.lance(e))?;
                match tags.list().await.map_err(|e| self.index.lance(e))?.get(t) {
                    Some(c) => Ok(c.version),
                    None => Err(self.index.snapshot_error(format!("no tag '{t}'"))),
                }
            }
        }
    }

    /// A read-only view of the index at `version` (same model and dimension).
    pub async fn at(self, version: u64) -> Result<Index, IndexError> {
        self.index.check_version(version).await?;
        let table = self.index.view().await?;
        table.checkout(version).await.map_err(|e| self.index.lance(e))?;
        let mut index = Index::from_table(&self.index.uri, &self.index.table_name, table).await?;
        index.model_id = self.index.model_id.clone();
        index.pinned = Some(version);
        index.pinned_history = self.index.history_tagged_at(version).await;
        index.overlays = self.index.overlays.clone();
        for (name, side, _) in self.index.side_tables_at(version).await? {
            match name {
                SYMBOLS_TABLE => index.symbols = Some(side),
                _ => index.edges = Some(side),
            }
        }
        Ok(index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{record::Chunk, schema::ChunkRow, writer::CommitBatch};

    fn row(path: &str, content: &str) -> ChunkRow {
        ChunkRow {
            chunk: Chunk {
                chunk_id: format!("{path}#{content}"),
                path: path.into(),
                language: "text".into(),
                symbol: None,
                kind: None,
                start_line: 1,
                end_line: 1,
                content: content.into(),
                content_hash: content.into(),
                token_count: 2,
                source: String::new(),
                git_ref: String::new(),
            },
            embed_key: format!("k-{content}"),
            file_hash: format!("f-{content}"),
            vector: vec![1.0, 0.0, 0.0, 0.0],
            model: "m".into(),
            late: Vec::new(),
        }
    }

    #[tokio::test]
    async fn a_tag_keeps_the_history_recorded_with_its_version() {
        use crate::history::{replace, FileCommit};
        let commit = |c: &str| FileCommit {
            path: "a.py".into(),
            commit: c.into(),
            time: 1,
            author: "a".into(),
            summary: format!("commit {c}"),
        };
        let commits = |h: crate::history::History| h.of("a.py").iter().map(|r| r.commit.clone()).collect::<Vec<_>>();
        let tmp = tempfile::tempdir().unwrap();
        let uri = tmp.path().join("db").to_string_lossy().into_owned();
        let index = Index::open_or_create(&uri, "m", 4).await.unwrap();
        index.writes().commit(CommitBatch { rows: vec![row("a.py", "one")], ..Default::default() }).await.unwrap();
        replace(&uri, "", &[commit("c1")]).await.unwrap();
        let first = index.snapshots().tag("c-1", None).await.unwrap();
        index.writes().commit(CommitBatch { rows: vec![row("b.py", "two")], ..Default::default() }).await.unwrap();
        replace(&uri, "", &[commit("c2")]).await.unwrap();
        let untagged = index.version().await.unwrap();
        assert_eq!(commits(index.history().file_history().await.unwrap()), ["c2"]);
        let past = index.snapshots().at(first).await.unwrap();
        assert_eq!(commits(past.history().file_history().await.unwrap()), ["c1"], "the tag's history");
        assert_ne!(past.history().history_version().await.unwrap(), index.history().history_version().await.unwrap());
        assert_eq!(
            commits(index.snapshots().at(untagged).await.unwrap().history().file_history().await.unwrap()),
            ["c2"]
        );
        index.snapshots().untag("c-1").await.unwrap();
        assert_eq!(
            commits(index.snapshots().at(first).await.unwrap().history().file_history().await.unwrap()),
            ["c2"],
            "today's, untagged"
        );
        // A tag moved to an older version drops the history it had: that version reads today's.
        index.snapshots().tag("c-2", None).await.unwrap();
        replace(&uri, "", &[commit("c3")]).await.unwrap();
        index.snapshots().tag("c-2", Some(first)).await.unwrap();
        assert_eq!(commits(index.snapshots().at(first).await.unwrap().history().file_history().await.unwrap()), ["c3"]);
    }

    #[tokio::test]
    async fn versions_are_listed_tagged_and_queried_as_of() {
        let tmp = tempfile::tempdir().unwrap();
        let uri = tmp.path().join("db").to_string_lossy().into_owned();
        let index = Index::open_or_create(&uri, "m", 4).await.unwrap();
        index
            .writes()
            .commit(CommitBatch { rows: vec![row("a.txt", "old walrus text")], ..Default::default() })
            .await
            .unwrap();
        // (The first commit also builds the full-text index: a version of its own.)
        let first = index.version().await.unwrap();
        assert_eq!(index.snapshots().tag("release-1", None).await.unwrap(), first);
        index
            .writes()
            .commit(CommitBatch {
                rows: vec![row("a.txt", "new narwhal text"), row("b.txt", "another file")],
                replace_paths: vec!["a.txt".into()],
                ..Default::default()
            })
            .await
            .unwrap();
        let snaps = index.snapshots().list().await.unwrap();
        let tagged = snaps.iter().find(|s| s.version == first).unwrap();
        assert_eq!(tagged.tags, vec!["release-1".to_string()]);
        assert_eq!(tagged.rows, 1);
        assert_eq!(snaps.last().unwrap().rows, 2, "{snaps:#?}");
        assert!(snaps.windows(2).all(|w| w[0].version < w[1].version && w[0].timestamp <= w[1].timestamp));
        let last_two = index.snapshots().recent_snapshots(2).await.unwrap();
        assert_eq!(last_two, snaps[snaps.len() - 2..], "the last two, oldest first");
        // The tagged version still has the old text; the latest does not.
        let v = index.snapshots().resolve(&"release-1".parse().unwrap()).await.unwrap();
        let old = index.snapshots().at(v).await.unwrap();
        assert_eq!(old.reads().fts_search("walrus", 5).await.unwrap().len(), 1);
        assert!(old.reads().fts_search("narwhal", 5).await.unwrap().is_empty());
        assert!(index.reads().fts_search("walrus", 5).await.unwrap().is_empty());
        assert_eq!(index.reads().fts_search("narwhal", 5).await.unwrap().len(), 1);
        // Unknown names are clear errors.
        let err = index.snapshots().resolve(&AsOf::Version(999)).await.unwrap_err().to_string();
        assert!(err.contains("no version 999"), "{err}");
        let err = index.snapshots().resolve(&AsOf::Tag("nope".into())).await.unwrap_err().to_string();
        assert!(err.contains("no tag 'nope'"), "{err}");
        assert!(index.snapshots().tag("12", None).await.is_err(), "numeric tags would be ambiguous");
        index.snapshots().untag("release-1").await.unwrap();
        assert!(index.snapshots().list().await.unwrap().iter().all(|s| s.tags.is_empty()));
    }

    #[test]
    fn snapshot_names_parse() {
        assert_eq!("12".parse::<AsOf>().unwrap(), AsOf::Version(12));
        assert_eq!("v7".parse::<AsOf>().unwrap(), AsOf::Version(7));
        assert_eq!("release-1.2".parse::<AsOf>().unwrap(), AsOf::Tag("release-1.2".into()));
        assert!("  ".parse::<AsOf>().is_err());
    }
}
