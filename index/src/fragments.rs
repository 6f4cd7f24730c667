//! Uncommitted fragments: rows written as data files of a chunks table that no version
//! references yet, and many such sets published together in **one** commit.
//!
//! This is LanceDB's distributed-write pattern (the one its Ray and Spark integrations use):
//! workers write data fragments in parallel — each a Lance data file under the table's
//! `data/` plus a small description (file name, field ids, row count) — and one process commits
//! an `Append` transaction that lists them all. Until that commit no reader sees a row; after
//! it every reader sees all of them at once. ctxd's distributed re-embedding
//! (`ctxd reembed --shard I/N`, then `ctxd reembed --commit`) is built on it:
//!
//! * [`Writes::write_fragments`] writes a shard's rows into the target table's storage and
//!   returns their description, [`Fragments`] (Lance's fragment metadata; JSON through
//!   [`Fragments::to_json`]); the shard records it in the staging table ([`crate::staged`]).
//! * [`Writes::commit_fragments`] publishes described fragments as one `Append` commit.
//!   Committing is idempotent: fragments whose data files the table already references
//!   (a commit that succeeded but whose caller died before clearing the staging rows) are
//!   left out, so a re-run never doubles rows. A described data file that is gone (a cleanup
//!   deleted a staged file older than its retention) fails the commit before anything is
//!   published, naming the files and the shards to run again.
//!
//! Data files of a shard that crashed before recording its fragments are referenced by no
//! version; Lance's cleanup (`ctxd compact`, the daemon's scheduled maintenance) deletes such
//! unreferenced files once they are older than the retention window.

use std::collections::HashSet;
use std::sync::Arc;

use arrow_array::RecordBatch;
use lance::dataset::transaction::{Operation, Transaction};
use lance::dataset::{CommitBuilder, InsertBuilder, WriteMode, WriteParams};
use lance::table::format::Fragment;

use crate::writer::Writes;
use crate::{error::IndexError, store::Index};

/// Data fragments written and not committed: what [`Writes::commit_fragments`] publishes.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct Fragments(Vec<Fragment>);

impl Fragments {
    /// Number of fragments (data files).
    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Rows in all of them.
    pub fn rows(&self) -> u64 {
        self.0.iter().map(|f| f.physical_rows.unwrap_or(0) as u64).sum()
    }

    /// Adds `other`'s fragments.
    pub fn extend(&mut self, other: Fragments) {
        self.0.extend(other.0);
    }

    /// The description as JSON (what the staging table stores).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("fragment metadata serializes")
    }

    /// Reads [`Fragments::to_json`]'s text back; `what` names it in the error.
    pub fn from_json(json: &str, what: &str) -> Result<Self, IndexError> {
        serde_json::from_str(json).map_err(|e| IndexError::Staged {
            uri: what.to_string(),
            message: format!("the staged fragment description is not readable ({e}); run that shard again"),
        })
    }
}

impl Index {
    /// The Lance dataset of `table` (this index's chunks, symbols, edges or streams table) at its
    /// latest version (a native table only).
    pub(crate) async fn dataset_of(&self, table: &lancedb::Table) -> Result<Arc<lance::Dataset>, IndexError> {
        let Some(wrapper) = table.dataset() else {
            return Err(IndexError::Staged {
                uri: self.uri.clone(),
                message: format!(
                    "table {} is not a native Lance table; it cannot take uncommitted fragments",
                    table.name()
                ),
            });
        };
        wrapper.get().await.map_err(|e| self.lance(e))
    }

    /// The chunks table's Lance dataset at its latest version (a native table only).
    pub(crate) async fn dataset(&self) -> Result<Arc<lance::Dataset>, IndexError> {
        self.dataset_of(&self.table).await
    }

    /// [`Writes::write_fragments`] into `table` (one of this index's tables; rows of its schema).
    pub(crate) async fn write_fragments_into(
        &self,
        table: &lancedb::Table,
        batches: Vec<RecordBatch>,
    ) -> Result<Fragments, IndexError> {
        if batches.iter().all(|b| b.num_rows() == 0) {
            return Ok(Fragments::default());
        }
        let dataset = self.dataset_of(table).await?;
        let params = WriteParams { mode: WriteMode::Append, ..Default::default() };
        let txn = InsertBuilder::new(dataset)
            .with_params(&params)
            .execute_uncommitted(batches)
            .await
            .map_err(|e| self.lance(e.into()))?;
        let Operation::Append { fragments } = txn.operation else {
            return Err(self.staged("an append wrote something other than new fragments".into()));
        };
        Ok(Fragments(fragments))
    }

    /// [`Writes::commit_fragments`] into `table` (one of this index's tables), its handle
    /// refreshed by the caller.
    pub(crate) async fn commit_fragments_into(
        &self,
        table: &lancedb::Table,
        sets: Vec<Fragments>,
    ) -> Result<Fragments, IndexError> {
        crate::fence::confirm(&self.uri).await?;
        let dataset = self.dataset_of(table).await?;
        let present: HashSet<&str> =
            dataset.fragments().iter().flat_map(|f| f.files.iter().map(|d| d.path.as_str())).collect();
        let fragments: Vec<Fragment> = sets
            .into_iter()
            .flat_map(|set| set.0)
            .filter(|f| !f.files.iter().any(|d| present.contains(d.path.as_str())))
            .collect();
        drop(present);
        if fragments.is_empty() {
            return Ok(Fragments::default());
        }
        // A staged data file a cleanup deleted (or a shard that never finished writing it)
        // would make the new version unreadable: nothing is committed then.
        let store = dataset.object_store(None).await.map_err(|e| self.lance(e.into()))?;
        let data = dataset.data_dir();
        let mut missing = Vec::new();
        for file in fragments.iter().flat_map(|f| f.files.iter()) {
            let path = object_store::path::Path::parse(format!("{data}/{}", file.path))
                .map_err(|e| self.staged(format!("staged data file {}: {e}", file.path)))?;
            if !store.exists(&path).await.map_err(|e| self.lance(e.into()))? {
                missing.push(file.path.clone());
            }
        }
        if !missing.is_empty() {
            return Err(self.staged(format!(
                "{} staged data file(s) are gone from {data} ({}); nothing was committed: run the shards that wrote \
                 them again (`--shard I/N` of the job that wrote them, `ctxd reembed` or `ctxd index`; a cleanup \
                 deletes unreferenced files older than its retention), then its `--commit`",
                missing.len(),
                missing.join(", ")
            )));
        }
        let appended = Fragments(fragments.clone());
        let txn = Transaction::new(dataset.version().version, Operation::Append { fragments }, None);
        CommitBuilder::new(dataset).execute(txn).await.map_err(|e| self.lance(e.into()))?;
        table.checkout_latest().await.map_err(|e| self.lance(e))?;
        Ok(appended)
    }

    fn staged(&self, message: String) -> IndexError {
        IndexError::Staged { uri: self.uri.clone(), message }
    }
}

impl Writes<'_> {
    /// Writes `batches` (rows of the chunks table's schema) as data files of the table without
    /// committing them; nothing is written for no rows.
    pub async fn write_fragments(self, batches: Vec<RecordBatch>) -> Result<Fragments, IndexError> {
        self.index.write_fragments_into(&self.index.table, batches).await
    }

    /// Publishes `sets` (from [`Writes::write_fragments`], by any process) in one commit.
    /// Fragments already part of the table are left out. Returns what was appended.
    pub async fn commit_fragments(self, sets: Vec<Fragments>) -> Result<Fragments, IndexError> {
        self.index.refresh().await?;
        self.index.commit_fragments_into(&self.index.table, sets).await
    }
}

#[cfg(test)]
mod tests {
    use crate::testing::row;
    use crate::{store::Index, writer::CommitBatch};

    /// An index in a new folder holding one committed row: its folder, URI and handle.
    async fn one_row() -> (tempfile::TempDir, String, Index) {
        let dir = tempfile::tempdir().unwrap();
        let uri = dir.path().to_string_lossy().into_owned();
        let index = Index::open_or_create(&uri, "m", 8).await.unwrap();
        index.writes().commit(CommitBatch { rows: vec![row(0)], ..Default::default() }).await.unwrap();
        (dir, uri, index)
    }

    #[tokio::test]
    async fn fragments_stay_invisible_until_one_commit_publishes_them_once() {
        let (_dir, uri, index) = one_row().await;
        let batch = |from: usize| {
            crate::schema::rows_to_batch(
                &(from..from + 5).map(row).collect::<Vec<_>>(),
                8,
                false,
                crate::schema::Vectorless::Null,
            )
            .unwrap()
        };
        // Two workers write; nothing is visible yet.
        let (a, b) = (
            index.writes().write_fragments(vec![batch(10)]).await.unwrap(),
            index.writes().write_fragments(vec![batch(20)]).await.unwrap(),
        );
        assert_eq!((a.len(), a.rows()), (1, 5));
        let reader = Index::open(&uri).await.unwrap();
        assert_eq!(reader.reads().chunk_ids().await.unwrap().len(), 1);
        // The descriptions travel as JSON (through the staging table) and are committed together.
        let a = super::Fragments::from_json(&a.to_json(), "test").unwrap();
        let before = index.version().await.unwrap();
        let done = index.writes().commit_fragments(vec![a.clone(), b.clone()]).await.unwrap();
        assert_eq!((done.len(), done.rows()), (2, 10));
        assert_eq!(index.version().await.unwrap(), before + 1, "one commit");
        reader.refresh().await.unwrap();
        assert_eq!(reader.reads().chunk_ids().await.unwrap().len(), 11);
        // Committing the same descriptions again (a re-run after a crash) appends nothing.
        assert!(index.writes().commit_fragments(vec![a, b]).await.unwrap().is_empty());
        reader.refresh().await.unwrap();
        assert_eq!(reader.reads().chunk_ids().await.unwrap().len(), 11);
        assert!(index.writes().write_fragments(Vec::new()).await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn fragments_whose_data_files_are_gone_are_not_committed() {
        let (dir, _, index) = one_row().await;
        let batch = crate::schema::rows_to_batch(
            &(10..15).map(row).collect::<Vec<_>>(),
            8,
            false,
            crate::schema::Vectorless::Null,
        )
        .unwrap();
        let staged = index.writes().write_fragments(vec![batch]).await.unwrap();
        let name = staged.0[0].files[0].path.clone();
        let file = std::fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .map(|t| t.path().join("data").join(&name))
            .find(|p| p.exists());
        std::fs::remove_file(file.expect("the staged data file on disk")).unwrap();
        let before = index.version().await.unwrap();
        let err = index.writes().commit_fragments(vec![staged]).await.unwrap_err().to_string();
        assert!(err.contains("gone") && err.contains(&name) && err.contains("--shard"), "{err}");
        assert_eq!(index.version().await.unwrap(), before, "nothing committed");
        assert_eq!(index.reads().chunk_ids().await.unwrap().len(), 1);
    }
}
