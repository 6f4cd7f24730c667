//! The objects of an S3 source a sharded first build indexed, and the version of each it read:
//! what the writer needs so that its first start does not download every object again.
//!
//! A writer mirrors an S3 source into a local folder and remembers the listing it last saw
//! (`.ctxd-objects.json` in the mirror, `ctxd_stages::object`). After a sharded build
//! ([`crate::build_shard`]) that listing is on the shards' machines, not the writer's: the build's
//! commit records the union here, and a writer that finds an object listed with the same ETag and
//! size, and its path in the index, takes it as indexed without downloading it. Once its own
//! listing is saved it drops its source's rows ([`clear`]), so a later writer on an empty mirror
//! never trusts a record older than what the index holds.
//!
//! | column | type | meaning |
//! |---|---|---|
//! | source | utf8 | the source's name (empty: the unnamed source) |
//! | rel | utf8 | the object's key relative to the source's prefix |
//! | etag | utf8 (nullable) | its ETag when it was read |
//! | size | uint64 | its size in bytes |

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::{Array, RecordBatch, RecordBatchIterator, StringArray, UInt64Array};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use futures::TryStreamExt;
use lancedb::query::{ExecutableQuery, QueryBase};

use crate::columns::typed_col;
use crate::error::IndexError;
use crate::sql::sql_str;

/// Name of the table inside the database directory.
pub const SOURCE_OBJECTS_TABLE: &str = "source_objects";

/// What identifies one version of an object in a listing.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ObjectVersion {
    pub etag: Option<String>,
    pub size: u64,
}

/// One object of a source, as a build read it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SourceObject {
    pub source: String,
    pub rel: String,
    pub version: ObjectVersion,
}

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("source", DataType::Utf8, false),
        Field::new("rel", DataType::Utf8, false),
        Field::new("etag", DataType::Utf8, true),
        Field::new("size", DataType::UInt64, false),
    ]))
}

fn lance(uri: &str) -> impl Fn(lancedb::Error) -> IndexError + '_ {
    move |source| IndexError::Lance { uri: uri.to_string(), source }
}

/// The table, `None` when it does not exist (and `create` is false).
async fn table(uri: &str, create: bool) -> Result<Option<lancedb::Table>, IndexError> {
    crate::connection::side_table(uri, SOURCE_OBJECTS_TABLE, schema(), create).await
}

/// Records `objects` (a row per source and key: a recorded key takes the new version), in one
/// commit; nothing for none.
pub async fn record(uri: &str, objects: &[SourceObject]) -> Result<(), IndexError> {
    if objects.is_empty() {
        return Ok(());
    }
    crate::fence::confirm(uri).await?;
    let batch = RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(StringArray::from_iter_values(objects.iter().map(|o| o.source.as_str()))),
            Arc::new(StringArray::from_iter_values(objects.iter().map(|o| o.rel.as_str()))),
            Arc::new(objects.iter().map(|o| o.version.etag.as_deref()).collect::<StringArray>()),
            Arc::new(UInt64Array::from_iter_values(objects.iter().map(|o| o.version.size))),
        ],
    )?;
    let t = table(uri, true).await?.expect("created when missing");
    let reader = RecordBatchIterator::new(vec![Ok(batch)], schema());
    let mut merge = t.merge_insert(&["source", "rel"]);
    merge.when_matched_update_all(None).when_not_matched_insert_all();
    merge.execute(Box::new(reader)).await.map_err(lance(uri))?;
    Ok(())
}

/// The recorded objects of `source`, by key (none when nothing was recorded).
pub async fn load(uri: &str, source: &str) -> Result<HashMap<String, ObjectVersion>, IndexError> {
    let Some(t) = table(uri, false).await? else { return Ok(HashMap::new()) };
    let query = t.query().only_if(format!("source = {}", sql_str(source)));
    let batches: Vec<RecordBatch> =
        query.execute().await.map_err(lance(uri))?.try_collect().await.map_err(lance(uri))?;
    let mut out = HashMap::new();
    for b in &batches {
        let (rels, etags) = (typed_col::<StringArray>(b, "rel", uri)?, typed_col::<StringArray>(b, "etag", uri)?);
        let sizes = typed_col::<UInt64Array>(b, "size", uri)?;
        for i in 0..b.num_rows() {
            let etag = (!etags.is_null(i)).then(|| etags.value(i).to_string());
            out.insert(rels.value(i).to_string(), ObjectVersion { etag, size: sizes.value(i) });
        }
    }
    Ok(out)
}

/// Drops the rows of `source` (its writer keeps its own listing now); nothing when none.
pub async fn clear(uri: &str, source: &str) -> Result<(), IndexError> {
    let Some(t) = table(uri, false).await? else { return Ok(()) };
    crate::fence::confirm(uri).await?;
    t.delete(&format!("source = {}", sql_str(source))).await.map_err(lance(uri))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(source: &str, rel: &str, etag: Option<&str>, size: u64) -> SourceObject {
        SourceObject {
            source: source.into(),
            rel: rel.into(),
            version: ObjectVersion { etag: etag.map(str::to_string), size },
        }
    }

    #[tokio::test]
    async fn recorded_per_source_merged_by_key_and_cleared() {
        let dir = tempfile::tempdir().unwrap();
        let uri = dir.path().to_string_lossy().into_owned();
        assert!(load(&uri, "docs").await.unwrap().is_empty());
        clear(&uri, "docs").await.unwrap();
        assert!(std::fs::read_dir(dir.path()).unwrap().next().is_none(), "reads and clears create no table");
        let first = [object("docs", "a.md", Some("\"e1\""), 3), object("code", "a.md", None, 5)];
        record(&uri, &first).await.unwrap();
        // A shard's objects recorded again (a commit run twice) take the newest version.
        record(&uri, &[object("docs", "a.md", Some("\"e2\""), 4), object("docs", "b.md", None, 1)]).await.unwrap();
        let docs = load(&uri, "docs").await.unwrap();
        assert_eq!(docs.len(), 2);
        assert_eq!(docs["a.md"], ObjectVersion { etag: Some("\"e2\"".into()), size: 4 });
        assert_eq!(docs["b.md"].etag, None);
        clear(&uri, "docs").await.unwrap();
        assert!(load(&uri, "docs").await.unwrap().is_empty());
        assert_eq!(load(&uri, "code").await.unwrap()["a.md"].size, 5);
    }
}
