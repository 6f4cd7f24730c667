//! The [`Index`] handle: opens or creates the chunks table — the active one ([`crate::active`])
//! or one named by a re-embedding job — with the `symbols` and `streams` tables beside it,
//! checks the model and dimension it was built with, and gives the accessors the other
//! modules build on.
//!
//! `Index` is one type with one `impl Index` block per concern: `reader` (lookups by path, id
//! and name), `search` (vector and full-text search), `vectors` (stored vectors), `writer`
//! (commits), `indices` (full-text and B-tree indexes), `snapshots` and `maintenance`.

use std::sync::atomic::AtomicBool;

use arrow_array::{Array, RecordBatch, StringArray};
use arrow_schema::DataType;
use futures::TryStreamExt;
use lancedb::query::{ExecutableQuery, QueryBase, Select};
use lancedb::Table;

use crate::connection::{connect, open_or_create_table};
use crate::edges::{edges_schema, EDGES_TABLE};
use crate::schema::{chunks_schema, EMBED_KEY};
use crate::sql::sql_str;
use crate::streams::{streams_schema, STREAMS_TABLE};
use crate::symbols::{symbols_schema, SYMBOLS_TABLE};
use crate::{error::IndexError, NO_MODEL};

/// The chunks table of one database directory.
pub struct Index {
    pub(crate) uri: String,
    /// The chunks table in use (see [`crate::active`]: `chunks` until a re-embedding switched).
    pub(crate) table_name: String,
    pub(crate) table: Table,
    /// The symbols table (absent in indexes written before it existed, when opened read-only).
    pub(crate) symbols: Option<Table>,
    /// The edges table of the code graph (see [`crate::edges`]; absent in older indexes
    /// opened read-only).
    pub(crate) edges: Option<Table>,
    /// The streams table (see [`crate::streams`]; absent in older indexes opened read-only).
    pub(crate) streams: Option<Table>,
    pub(crate) dim: usize,
    pub(crate) model_id: String,
    pub(crate) fts_ready: AtomicBool,
    /// Whether the table has the `embed_key` column (tables of older ctxd versions do not).
    pub(crate) keyed: bool,
    /// How the table stores rows without a vector (its `vector` column's nullability).
    pub(crate) vectorless: crate::schema::Vectorless,
    /// Whether the table has the `source` column (tables of older ctxd versions do not until a
    /// writer opens them).
    pub(crate) has_source: bool,
    /// Whether the table has the `late` column (tables of older ctxd versions do not until a
    /// writer opens them).
    pub(crate) has_late: bool,
    /// Set on a writer's handle by a pipeline of named sources ([`Index::name_sources`]).
    pub(crate) named_sources: AtomicBool,
    /// The sources this view reads (`None`: all); see [`crate::scope`].
    pub(crate) scope: Option<std::sync::Arc<crate::scope::SourceScope>>,
    /// The ref overlays the scope reads through (see [`crate::overlay`]).
    pub(crate) lens: Option<std::sync::Arc<crate::overlay::Lens>>,
    /// The version a view of a past version ([`Snapshots::at`]) is checked out at.
    pub(crate) pinned: Option<u64>,
    /// The history version tagged with that version (see [`crate::history`]), read once.
    pub(crate) pinned_history: Option<u64>,
    /// The ref overlays read through this handle and every view made from it.
    pub(crate) overlays: std::sync::Arc<crate::overlay::OverlayCache>,
}

impl Index {
    pub(crate) fn lance(&self, source: lancedb::Error) -> IndexError {
        IndexError::Lance { uri: self.uri.clone(), source }
    }

    /// Opens the index at `uri` for writing with `model_id`/`dim`, creating it when missing.
    /// The chunks table is the active one ([`crate::active`]). Fails when it was built with
    /// another model or dimension.
    pub async fn open_or_create(uri: &str, model_id: &str, dim: usize) -> Result<Self, IndexError> {
        let table = crate::active::current_table(uri).await?;
        Self::open_or_create_table(uri, &table, model_id, dim).await
    }

    /// [`Index::open_or_create`] on the chunks table `table_name`, active or not (a
    /// re-embedding job fills a table before it becomes the active one).
    pub async fn open_or_create_table(
        uri: &str,
        table_name: &str,
        model_id: &str,
        dim: usize,
    ) -> Result<Self, IndexError> {
        let conn = connect(uri).await?;
        let lance = |source| IndexError::Lance { uri: uri.to_string(), source };
        let names = conn.table_names().execute().await.map_err(lance)?;
        let schema = crate::format::stamped(&chunks_schema(dim));
        let table = open_or_create_table(&conn, &names, table_name, schema).await.map_err(lance)?;
        let symbols = open_or_create_table(&conn, &names, SYMBOLS_TABLE, symbols_schema()).await.map_err(lance)?;
        let streams = open_or_create_table(&conn, &names, STREAMS_TABLE, streams_schema()).await.map_err(lance)?;
        let edges = open_or_create_table(&conn, &names, EDGES_TABLE, edges_schema()).await.map_err(lance)?;
        let mut index = Self::from_table(uri, table_name, table).await?;
        index.add_missing_columns().await?;
        index.symbols = Some(symbols);
        index.edges = Some(edges);
        index.streams = Some(streams);
        let indexed_model = index.stored_model().await?;
        if index.dim != dim || indexed_model.as_deref().is_some_and(|m| m != model_id) {
            return Err(IndexError::ModelMismatch {
                uri: uri.to_string(),
                indexed: indexed_model.unwrap_or_default(),
                indexed_dim: index.dim,
                requested: model_id.to_string(),
                requested_dim: dim,
            });
        }
        Ok(Self { model_id: model_id.to_string(), ..index })
    }

    /// Opens an existing index for reading (model id and dimension are read from it); the
    /// active chunks table ([`crate::active`]).
    pub async fn open(uri: &str) -> Result<Self, IndexError> {
        let table = crate::active::current_table(uri).await?;
        Self::open_table(uri, &table).await
    }

    /// [`Index::open`] on the chunks table `table_name`.
    pub async fn open_table(uri: &str, table_name: &str) -> Result<Self, IndexError> {
        let conn = connect(uri).await?;
        let lance = |source| IndexError::Lance { uri: uri.to_string(), source };
        let names = conn.table_names().execute().await.map_err(lance)?;
        if !names.iter().any(|n| n == table_name) {
            return Err(IndexError::Missing { uri: uri.to_string() });
        }
        let table = conn.open_table(table_name).execute().await.map_err(lance)?;
        let mut index = Self::from_table(uri, table_name, table).await?;
        if names.iter().any(|n| n == SYMBOLS_TABLE) {
            index.symbols = Some(conn.open_table(SYMBOLS_TABLE).execute().await.map_err(lance)?);
        }
        if names.iter().any(|n| n == STREAMS_TABLE) {
            index.streams = Some(conn.open_table(STREAMS_TABLE).execute().await.map_err(lance)?);
        }
        if names.iter().any(|n| n == EDGES_TABLE) {
            index.edges = Some(conn.open_table(EDGES_TABLE).execute().await.map_err(lance)?);
        }
        index.model_id = index.stored_model().await?.unwrap_or_default();
        Ok(index)
    }

    pub(crate) async fn from_table(uri: &str, table_name: &str, table: Table) -> Result<Self, IndexError> {
        let schema = table.schema().await.map_err(|source| IndexError::Lance { uri: uri.to_string(), source })?;
        crate::format::check(uri, &schema)?;
        let dim = match schema.field_with_name("vector").map(|f| f.data_type().clone()) {
            Ok(DataType::FixedSizeList(_, n)) => n as usize,
            _ => return Err(IndexError::Column { uri: uri.to_string(), column: "vector".into() }),
        };
        let indices =
            table.list_indices().await.map_err(|source| IndexError::Lance { uri: uri.to_string(), source })?;
        let fts_ready = indices.iter().any(|i| i.columns.iter().any(|c| c == "content"));
        let keyed = schema.field_with_name(EMBED_KEY).is_ok();
        let vectorless = crate::schema::Vectorless::of(&schema);
        let has_source = schema.field_with_name(crate::schema::SOURCE).is_ok();
        let has_late = schema.field_with_name(crate::schema::LATE).is_ok();
        Ok(Self {
            uri: uri.to_string(),
            table_name: table_name.to_string(),
            table,
            symbols: None,
            edges: None,
            streams: None,
            dim,
            model_id: String::new(),
            fts_ready: AtomicBool::new(fts_ready),
            keyed,
            vectorless,
            has_source,
            has_late,
            named_sources: AtomicBool::new(false),
            scope: None,
            overlays: Default::default(),
            lens: None,
            pinned: None,
            pinned_history: None,
        })
    }

    /// Gives a table written before the `source` or `late` column existed the columns it lacks
    /// (null: no name, no codes), in one metadata-only commit, in [`chunks_schema`]'s order
    /// (`source`, then `late`: both are last), so the batches of [`crate::schema::rows_to_batch`]
    /// match the table's schema before any write.
    async fn add_missing_columns(&mut self) -> Result<(), IndexError> {
        use arrow_schema::{Field, Schema};
        let mut missing = Vec::new();
        if !self.has_source {
            missing.push(Field::new(crate::schema::SOURCE, DataType::Utf8, true));
        }
        if !self.has_late {
            missing.push(Field::new(crate::schema::LATE, DataType::Binary, true));
        }
        if missing.is_empty() {
            return Ok(());
        }
        crate::fence::confirm(&self.uri).await?;
        let added = self
            .table
            .add_columns()
            .transform(lance::dataset::NewColumnTransform::AllNulls(std::sync::Arc::new(Schema::new(missing))))
            .execute()
            .await;
        if let Err(e) = added {
            // Another writer (a parallel re-embedding shard) may have added them first.
            self.refresh().await?;
            let schema = self.schema().await?;
            if [crate::schema::SOURCE, crate::schema::LATE].iter().any(|c| schema.field_with_name(c).is_err()) {
                return Err(self.lance(e));
            }
        }
        (self.has_source, self.has_late) = (true, true);
        Ok(())
    }

    async fn stored_model(&self) -> Result<Option<String>, IndexError> {
        let filter = format!("model != {}", sql_str(NO_MODEL));
        let batches =
            self.collect(self.table.query().only_if(filter).select(Select::columns(&["model"])).limit(1)).await?;
        Ok(batches
            .iter()
            .find(|b| b.num_rows() > 0)
            .and_then(|b| b.column(0).as_any().downcast_ref::<StringArray>().map(|a| a.value(0).to_string())))
    }

    /// The database URI.
    pub fn uri(&self) -> &str {
        &self.uri
    }

    /// The version a view of a past version is checked out at (`None`: the live table).
    pub fn pinned(&self) -> Option<u64> {
        self.pinned
    }

    /// The chunks table in use (`chunks`, or `chunks__<model>` after a re-embedding).
    pub fn table_name(&self) -> &str {
        &self.table_name
    }

    /// Whether the table keys its vectors by the embedded text (`embed_key`). A table written
    /// by an older ctxd does not: its vectors were cached by content alone, so some may be of
    /// another text than their row's (a moved file, a re-embedding of bare content). Such a
    /// table can be read and searched, but not written: a writer re-embeds it once first
    /// (`ctxd_pipeline::reembed::migrate`).
    pub fn embed_keyed(&self) -> bool {
        self.keyed
    }

    /// How the table stores rows without a vector: null, or zeros in a table created before
    /// `vector` was nullable.
    pub fn vectorless(&self) -> crate::schema::Vectorless {
        self.vectorless
    }

    /// Moves this handle to the table's latest version (other processes may have committed).
    pub async fn refresh(&self) -> Result<(), IndexError> {
        self.table.checkout_latest().await.map_err(|e| self.lance(e))
    }

    /// Vector dimension of the table.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Model id of the vectors (empty for an empty table opened read-only).
    pub fn model_id(&self) -> &str {
        &self.model_id
    }

    /// Whether the table has the `late` column (late-interaction codes; its rows may still hold
    /// none, written before it or with codes off).
    pub fn has_late(&self) -> bool {
        self.has_late
    }

    /// The underlying LanceDB table (for callers that need more than this API).
    pub(crate) fn table(&self) -> &Table {
        &self.table
    }

    /// The Arrow schema of the chunks table.
    pub async fn schema(&self) -> Result<arrow_schema::SchemaRef, IndexError> {
        self.table.schema().await.map_err(|e| self.lance(e))
    }

    /// Current LanceDB version of the table.
    pub async fn version(&self) -> Result<u64, IndexError> {
        self.table.version().await.map_err(|e| self.lance(e))
    }

    /// Runs `query` and collects its record batches.
    pub(crate) async fn collect(&self, query: impl ExecutableQuery) -> Result<Vec<RecordBatch>, IndexError> {
        query.execute().await.map_err(|e| self.lance(e))?.try_collect().await.map_err(|e| self.lance(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn missing_index_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let uri = dir.path().join("nothing").to_string_lossy().into_owned();
        let err = Index::open(&uri).await.err().expect("no index there");
        assert!(err.to_string().contains("ctxd index"), "{err}");
    }

    #[tokio::test]
    async fn a_table_without_the_newest_columns_gains_them_in_order_before_any_write() {
        use crate::schema::{rows_to_batch, ChunkRow, Vectorless, LATE};
        use crate::{testing::row, writer::CommitBatch};
        use std::collections::HashMap;
        let codes = |i: usize| ChunkRow { late: vec![i as u8; 3], ..row(i) };
        // Without `late` (format 2 before it), and without `source` and `late` (format 1).
        for lacking in [1, 2] {
            let tmp = tempfile::tempdir().unwrap();
            let uri = tmp.path().join("db").to_string_lossy().into_owned();
            let full = chunks_schema(8);
            let kept: Vec<usize> = (0..full.fields().len() - lacking).collect();
            let old = rows_to_batch(&[row(0)], 8, false, Vectorless::Null).unwrap().project(&kept).unwrap();
            let conn = lancedb::connect(&uri).execute().await.unwrap();
            let schema = crate::format::stamped(&old.schema());
            let table = conn.create_empty_table(crate::CHUNKS_TABLE, schema).execute().await.unwrap();
            table.add(old).execute().await.unwrap();
            let index = Index::open_or_create(&uri, "m", 8).await.unwrap();
            let schema = index.schema().await.unwrap();
            let names = |s: &arrow_schema::Schema| s.fields().iter().map(|f| f.name().clone()).collect::<Vec<_>>();
            assert_eq!(names(&schema), names(&full), "lacking {lacking}: the order of chunks_schema");
            assert!(schema.field_with_name(LATE).unwrap().is_nullable());
            assert_eq!(crate::format::check(&uri, &schema).unwrap(), crate::format::FORMAT);
            let keys: Vec<String> = (0..3).map(|i| format!("k{i}")).collect();
            assert!(index.vectors().late_for(&keys).await.unwrap().is_empty(), "old rows have no codes");
            // An append (a new file) and a merge (a file replaced) both write the column.
            index.writes().commit(CommitBatch { rows: vec![codes(1)], ..Default::default() }).await.unwrap();
            let replace =
                CommitBatch { rows: vec![codes(2)], replace_paths: vec!["f2.txt".into()], ..Default::default() };
            index.writes().commit(replace).await.unwrap();
            let found = index.vectors().late_for(&keys).await.unwrap();
            let expected = HashMap::from([("k1".to_string(), vec![1u8; 3]), ("k2".to_string(), vec![2u8; 3])]);
            assert_eq!(found, expected);
            let reopened = Index::open(&uri).await.unwrap();
            assert_eq!(reopened.vectors().late_for(&keys).await.unwrap(), found);
        }
    }
}
