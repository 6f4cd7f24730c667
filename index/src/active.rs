//! Which chunks table queries and the daemon's writer use: the **active table** pointer.
//!
//! A database directory starts with one chunks table, `chunks`. `ctxd reembed` writes every
//! chunk again, embedded by another model, into a second table (`chunks__<model-slug>`) while the
//! first keeps serving, then switches by appending one row to the small `active_model` table:
//!
//! | column | type | meaning |
//! |---|---|---|
//! | seq | uint64 | 0, 1, 2, … — the row with the highest `seq` is in force |
//! | table_name | utf8 | the chunks table to read and write |
//! | model_id | utf8 | the id stored in that table's `model` column |
//! | model_spec | utf8 | what to load the model from (hub id or directory); empty for the row recording the model an index was built with |
//! | dim | uint32 | the vectors' dimension |
//! | switched_at | timestamp[us, UTC] | when the switch was committed |
//!
//! The switch is one LanceDB commit (atomic on a local disk and on object stores alike), and the
//! table keeps the history, so switching back to an earlier model finds its table again and only
//! catches up on what changed since. Without the table (every index not re-embedded yet) the
//! active table is `chunks`. [`crate::store::Index::open`] and [`crate::store::Index::open_or_create`] follow
//! the pointer; a running daemon polls it ([`current`]) and re-opens when it changes.

use std::sync::Arc;

use arrow_array::{RecordBatch, StringArray, TimestampMicrosecondArray, UInt32Array, UInt64Array};
use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};
use futures::TryStreamExt;
use lancedb::query::ExecutableQuery;

use crate::columns::typed_col;
use crate::connection::connect;
use crate::{error::IndexError, CHUNKS_TABLE};

/// Name of the pointer table inside the database directory.
pub const ACTIVE_TABLE: &str = "active_model";

/// One row of the pointer table: a chunks table and the model its vectors come from.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ActiveTable {
    pub seq: u64,
    pub table_name: String,
    pub model_id: String,
    pub model_spec: String,
    pub dim: usize,
    /// Microseconds since the Unix epoch.
    pub switched_at: i64,
}

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("seq", DataType::UInt64, false),
        Field::new("table_name", DataType::Utf8, false),
        Field::new("model_id", DataType::Utf8, false),
        Field::new("model_spec", DataType::Utf8, false),
        Field::new("dim", DataType::UInt32, false),
        Field::new("switched_at", DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())), false),
    ]))
}

/// The chunks table for `model_id`: `chunks__` and the id in lowercase with every run of
/// characters other than letters and digits replaced by one `-`.
pub fn table_for_model(model_id: &str) -> String {
    let mut slug = String::new();
    for c in model_id.chars() {
        if c.is_ascii_alphanumeric() {
            slug.push(c.to_ascii_lowercase());
        } else if !slug.ends_with('-') {
            slug.push('-');
        }
    }
    format!("{CHUNKS_TABLE}__{}", slug.trim_matches('-'))
}

/// Every switch recorded at `uri`, oldest first (empty when the index was never re-embedded).
pub async fn history(uri: &str) -> Result<Vec<ActiveTable>, IndexError> {
    let lance = |source| IndexError::Lance { uri: uri.to_string(), source };
    let Some(table) = crate::connection::open_if_exists(uri, ACTIVE_TABLE).await? else { return Ok(Vec::new()) };
    let batches: Vec<RecordBatch> = table.query().execute().await.map_err(lance)?.try_collect().await.map_err(lance)?;
    let mut rows = Vec::new();
    for b in &batches {
        let strings = |name: &str| typed_col::<StringArray>(b, name, uri);
        let (table_name, model_id, model_spec) = (strings("table_name")?, strings("model_id")?, strings("model_spec")?);
        let seq = typed_col::<UInt64Array>(b, "seq", uri)?;
        let dim = typed_col::<UInt32Array>(b, "dim", uri)?;
        let at = typed_col::<TimestampMicrosecondArray>(b, "switched_at", uri)?;
        for i in 0..b.num_rows() {
            rows.push(ActiveTable {
                seq: seq.value(i),
                table_name: table_name.value(i).to_string(),
                model_id: model_id.value(i).to_string(),
                model_spec: model_spec.value(i).to_string(),
                dim: dim.value(i) as usize,
                switched_at: at.value(i),
            });
        }
    }
    rows.sort_by_key(|r| r.seq);
    Ok(rows)
}

/// The switch in force at `uri` (`None`: the index was never re-embedded and uses `chunks`).
pub async fn current(uri: &str) -> Result<Option<ActiveTable>, IndexError> {
    Ok(history(uri).await?.pop())
}

/// The name of the chunks table in force at `uri`.
pub async fn current_table(uri: &str) -> Result<String, IndexError> {
    Ok(current(uri).await?.map(|a| a.table_name).unwrap_or_else(|| CHUNKS_TABLE.to_string()))
}

/// Makes `table_name` (holding vectors of `model_id`, loaded from `model_spec`) the active table:
/// one commit appending a row with the next `seq`. Returns the row.
pub async fn switch(
    uri: &str,
    table_name: &str,
    model_id: &str,
    model_spec: &str,
    dim: usize,
) -> Result<ActiveTable, IndexError> {
    let previous = history(uri).await?;
    let row = ActiveTable {
        seq: previous.last().map(|r| r.seq + 1).unwrap_or(0),
        table_name: table_name.to_string(),
        model_id: model_id.to_string(),
        model_spec: model_spec.to_string(),
        dim,
        switched_at: chrono::Utc::now().timestamp_micros(),
    };
    let batch = RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(UInt64Array::from(vec![row.seq])),
            Arc::new(StringArray::from(vec![row.table_name.clone()])),
            Arc::new(StringArray::from(vec![row.model_id.clone()])),
            Arc::new(StringArray::from(vec![row.model_spec.clone()])),
            Arc::new(UInt32Array::from(vec![dim as u32])),
            Arc::new(TimestampMicrosecondArray::from(vec![row.switched_at]).with_timezone("UTC")),
        ],
    )?;
    crate::fence::confirm(uri).await?;
    let conn = connect(uri).await?;
    let lance = |source| IndexError::Lance { uri: uri.to_string(), source };
    let names = conn.table_names().execute().await.map_err(lance)?;
    if names.iter().any(|n| n == ACTIVE_TABLE) {
        let table = conn.open_table(ACTIVE_TABLE).execute().await.map_err(lance)?;
        table.add(batch).execute().await.map_err(lance)?;
    } else {
        conn.create_table(ACTIVE_TABLE, batch).execute().await.map_err(lance)?;
    }
    Ok(row)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_ids_map_to_table_names() {
        assert_eq!(
            table_for_model("sentence-transformers/all-MiniLM-L6-v2"),
            "chunks__sentence-transformers-all-minilm-l6-v2"
        );
        assert_eq!(table_for_model("BAAI/bge-small-en-v1.5"), "chunks__baai-bge-small-en-v1-5");
        assert_eq!(table_for_model("my model (f16)"), "chunks__my-model-f16");
    }

    #[tokio::test]
    async fn the_latest_switch_is_in_force_and_history_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let uri = dir.path().to_string_lossy().into_owned();
        assert_eq!(current(&uri).await.unwrap(), None);
        assert_eq!(current_table(&uri).await.unwrap(), "chunks");
        let first = switch(&uri, "chunks", "a/one", "a/one", 4).await.unwrap();
        let second = switch(&uri, "chunks__b-two", "b/two", "/models/two", 8).await.unwrap();
        assert_eq!((first.seq, second.seq), (0, 1));
        assert_eq!(current_table(&uri).await.unwrap(), "chunks__b-two");
        let now = current(&uri).await.unwrap().unwrap();
        assert_eq!((now.model_id.as_str(), now.model_spec.as_str(), now.dim), ("b/two", "/models/two", 8));
        let back = switch(&uri, "chunks", "a/one", "a/one", 4).await.unwrap();
        assert_eq!(back.seq, 2);
        let h = history(&uri).await.unwrap();
        assert_eq!(h.iter().map(|r| r.table_name.as_str()).collect::<Vec<_>>(), ["chunks", "chunks__b-two", "chunks"]);
    }
}
