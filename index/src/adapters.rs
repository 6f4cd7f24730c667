//! The `query_adapters` table: the query adapter fitted on this database's git history, one row
//! per model, with what it was fitted on and how it was judged.
//!
//! | column | type | meaning |
//! |---|---|---|
//! | model | utf8 | the model id whose query vectors it maps |
//! | dim | uint32 | their dimension |
//! | history_version | uint64 | the `file_history` table version it was fitted on |
//! | newest | int64 | the newest commit time of that history (seconds since the Unix epoch) |
//! | weights | binary | the map, as `ctxd_models::adapter::QueryAdapter::to_bytes` writes it; empty when none was kept |
//! | report | utf8 | JSON: how the fit was judged (`ctxd_models::adapter::Selection`) |
//!
//! This crate knows nothing of models: the weights are bytes to it. A row whose `weights` are
//! empty records that the last fit did not beat the base model (its `report` says by how much). A reader uses a row only when it was fitted on the history version
//! it reads ([`HistoryReads::history_version`]) or an older one (table versions only grow): a daemon's
//! queries keep the adapter fitted last while the history moves on and the next fit runs, and an
//! `as_of` view pinned to an older history gets none, so no query is ever answered with a map
//! fitted on commits after its snapshot.

use std::sync::Arc;

use arrow_array::{BinaryArray, Int64Array, RecordBatch, StringArray, UInt32Array, UInt64Array};
use arrow_schema::{DataType, SchemaRef};
use lancedb::query::QueryBase;

use crate::columns::{str_col, typed_col};
use crate::connection::{open_if_exists, replace_where};
use crate::error::IndexError;
use crate::history::HistoryReads;
use crate::schema::required_columns;
use crate::sql::sql_str;

/// Name of the table inside the database directory.
pub const ADAPTERS_TABLE: &str = "query_adapters";

/// One stored query adapter (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredAdapter {
    pub model: String,
    pub dim: u32,
    pub history_version: u64,
    pub newest: i64,
    /// Empty: the last fit was not kept.
    pub weights: Vec<u8>,
    pub report: String,
}

/// The adapters table: one row per model, the fields of [`StoredAdapter`].
const COLUMNS: [(&str, DataType); 6] = [
    ("model", DataType::Utf8),
    ("dim", DataType::UInt32),
    ("history_version", DataType::UInt64),
    ("newest", DataType::Int64),
    ("weights", DataType::Binary),
    ("report", DataType::Utf8),
];

fn schema() -> SchemaRef {
    required_columns(&COLUMNS)
}

impl StoredAdapter {
    /// Whether a view reading history version `history_version` uses this adapter: it was kept
    /// (non-empty weights) and fitted on that version or an older one (see the module docs).
    pub fn in_use_at(&self, history_version: u64) -> bool {
        !self.weights.is_empty() && self.history_version <= history_version
    }
}

/// Replaces the row of `row.model` with `row`.
pub async fn store(uri: &str, row: &StoredAdapter) -> Result<(), IndexError> {
    crate::fence::confirm(uri).await?;
    let batch = RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(StringArray::from_iter_values([row.model.as_str()])),
            Arc::new(UInt32Array::from_iter_values([row.dim])),
            Arc::new(UInt64Array::from_iter_values([row.history_version])),
            Arc::new(Int64Array::from_iter_values([row.newest])),
            Arc::new(BinaryArray::from_iter_values([row.weights.as_slice()])),
            Arc::new(StringArray::from_iter_values([row.report.as_str()])),
        ],
    )?;
    replace_where(uri, ADAPTERS_TABLE, &format!("model = {}", sql_str(&row.model)), batch).await
}

impl HistoryReads<'_> {
    /// The adapter stored for this index's model, whatever history it was fitted on (`None`
    /// when none was ever fitted).
    pub async fn stored_adapter(self) -> Result<Option<StoredAdapter>, IndexError> {
        let Some(table) = open_if_exists(&self.index.uri, ADAPTERS_TABLE).await? else { return Ok(None) };
        let filter = format!("model = {}", sql_str(self.index.model_id()));
        let batches = self.index.collect(table.query().only_if(filter)).await?;
        let Some(b) = batches.iter().find(|b| b.num_rows() > 0) else { return Ok(None) };
        Ok(Some(StoredAdapter {
            model: str_col(b, "model", &self.index.uri)?.value(0).to_string(),
            dim: typed_col::<UInt32Array>(b, "dim", &self.index.uri)?.value(0),
            history_version: typed_col::<UInt64Array>(b, "history_version", &self.index.uri)?.value(0),
            newest: typed_col::<Int64Array>(b, "newest", &self.index.uri)?.value(0),
            weights: typed_col::<BinaryArray>(b, "weights", &self.index.uri)?.value(0).to_vec(),
            report: str_col(b, "report", &self.index.uri)?.value(0).to_string(),
        }))
    }

    /// The adapter this view may use: the stored one, when it was kept (non-empty weights) and
    /// fitted on the history version this view reads or an older one.
    pub async fn query_adapter(self) -> Result<Option<StoredAdapter>, IndexError> {
        let Some(row) = self.stored_adapter().await? else { return Ok(None) };
        Ok(row.in_use_at(self.history_version().await?).then_some(row))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{replace, FileCommit};
    use crate::store::Index;

    #[tokio::test]
    async fn an_adapter_is_used_by_views_of_its_history_or_a_newer_one_only() {
        let dir = tempfile::tempdir().unwrap();
        let uri = dir.path().join("db").to_string_lossy().to_string();
        let index = Index::open_or_create(&uri, "m", 2).await.unwrap();
        assert_eq!(index.history().query_adapter().await.unwrap(), None);
        let commit = |c: &str, t| FileCommit {
            path: "a.py".into(),
            commit: c.into(),
            time: t,
            author: "x".into(),
            summary: "s".into(),
        };
        replace(&uri, "", &[commit("c1", 1)]).await.unwrap();
        let version = index.history().history_version().await.unwrap();
        let row = StoredAdapter {
            model: "m".into(),
            dim: 2,
            history_version: version,
            newest: 1,
            weights: vec![1, 2, 3, 4],
            report: "{}".into(),
        };
        store(&uri, &row).await.unwrap();
        store(&uri, &row).await.unwrap();
        assert_eq!(index.history().query_adapter().await.unwrap(), Some(row.clone()));
        // A newer history: the fit on the older one stays in use until the next fit.
        replace(&uri, "", &[commit("c1", 1), commit("c2", 2)]).await.unwrap();
        let newer = index.history().history_version().await.unwrap();
        assert!(newer > version);
        assert_eq!(index.history().query_adapter().await.unwrap(), Some(row.clone()));
        // A fit on the newer history: used by the latest view, never by one pinned to the older.
        let refit = StoredAdapter { history_version: newer, weights: vec![5, 6, 7, 8], ..row.clone() };
        store(&uri, &refit).await.unwrap();
        assert_eq!(index.history().query_adapter().await.unwrap(), Some(refit));
        let mut pinned = index.scoped(None).await.unwrap();
        pinned.pinned_history = Some(version);
        assert_eq!(pinned.history().query_adapter().await.unwrap(), None);
        // A fit that was not kept is stored but never used.
        store(&uri, &StoredAdapter { history_version: newer, weights: Vec::new(), ..row }).await.unwrap();
        assert_eq!(index.history().query_adapter().await.unwrap(), None);
        assert!(index.history().stored_adapter().await.unwrap().is_some_and(|s| s.weights.is_empty()));
    }
}
