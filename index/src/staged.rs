//! The staging table of distributed jobs: which shard wrote which uncommitted fragments
//! ([`crate::fragments`]) into which target — a re-embedding's new chunks table, or a sharded
//! first build's tables (`build:chunks`, …; see [`crate::build_shard`]).
//!
//! `ctxd reembed --shard I/N` creates the table when it starts ([`prepare`]) and appends one
//! row here when its share is written (one small commit; shards append concurrently, which
//! Lance resolves without conflict); `ctxd reembed
//! --commit` reads the rows of its target, checks that every shard of the run is there,
//! publishes their fragments in one commit and deletes the rows. A shard that crashed wrote
//! no row, so re-running it alone is enough; a shard run twice leaves two rows, and only the
//! newest of each shard is committed.
//!
//! | column | type | meaning |
//! |---|---|---|
//! | target | utf8 | the chunks table the fragments belong to (`chunks__<model>`) |
//! | shard, of | uint32 | shard `shard` of `of` (0-based) |
//! | rows | uint64 | rows in the fragments |
//! | source_version | uint64 | the version of the active table the shard read |
//! | fragments | utf8 | the fragments' description (JSON) |
//! | holder | utf8 | who wrote them (command, pid, host) |
//! | written_at | timestamp[us, UTC] | when the row was committed |

use std::sync::Arc;

use arrow_array::{RecordBatch, StringArray, TimestampMicrosecondArray, UInt32Array, UInt64Array};
use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};
use futures::TryStreamExt;
use lancedb::query::{ExecutableQuery, QueryBase};

use crate::columns::typed_col;
use crate::error::IndexError;
use crate::sql::sql_str;

/// Name of the staging table inside the database directory.
pub const STAGED_TABLE: &str = "reembed_shards";

/// One shard's written, not yet committed, share of a re-embedding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StagedShard {
    pub target: String,
    pub shard: u32,
    pub of: u32,
    pub rows: u64,
    pub source_version: u64,
    pub fragments: String,
    pub holder: String,
    /// Microseconds since the Unix epoch.
    pub written_at: i64,
}

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("target", DataType::Utf8, false),
        Field::new("shard", DataType::UInt32, false),
        Field::new("of", DataType::UInt32, false),
        Field::new("rows", DataType::UInt64, false),
        Field::new("source_version", DataType::UInt64, false),
        Field::new("fragments", DataType::Utf8, false),
        Field::new("holder", DataType::Utf8, false),
        Field::new("written_at", DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())), false),
    ]))
}

/// The staging table, created when missing with `create` (a shard recording), else `None`
/// when no shard ever recorded anything in this database (reads and clears create nothing).
async fn table(uri: &str, create: bool) -> Result<Option<lancedb::Table>, IndexError> {
    crate::connection::side_table(uri, STAGED_TABLE, schema(), create).await
}

/// Creates the staging table when missing. A shard calls it when it starts, so that shards
/// started together race on the table's creation while nothing is at stake yet, and their
/// records, minutes later, are plain concurrent appends to an existing table (in the roles test
/// on moto a record written while another shard was still creating the table was lost once).
pub async fn prepare(uri: &str) -> Result<(), IndexError> {
    table(uri, true).await.map(|_| ())
}

/// Records `shards` in one commit (their `written_at` is set to now, the same for all).
pub async fn record(uri: &str, shards: &[StagedShard]) -> Result<(), IndexError> {
    let strings = |f: fn(&StagedShard) -> &str| Arc::new(StringArray::from_iter_values(shards.iter().map(f)));
    let now = chrono::Utc::now().timestamp_micros();
    let batch = RecordBatch::try_new(
        schema(),
        vec![
            strings(|s| &s.target),
            Arc::new(UInt32Array::from_iter_values(shards.iter().map(|s| s.shard))),
            Arc::new(UInt32Array::from_iter_values(shards.iter().map(|s| s.of))),
            Arc::new(UInt64Array::from_iter_values(shards.iter().map(|s| s.rows))),
            Arc::new(UInt64Array::from_iter_values(shards.iter().map(|s| s.source_version))),
            strings(|s| &s.fragments),
            strings(|s| &s.holder),
            Arc::new(TimestampMicrosecondArray::from(vec![now; shards.len()]).with_timezone("UTC")),
        ],
    )?;
    let t = table(uri, true).await?.expect("created when missing");
    t.add(batch).execute().await.map_err(|source| IndexError::Lance { uri: uri.to_string(), source })?;
    Ok(())
}

/// The shards recorded for `target`, oldest first.
pub async fn list(uri: &str, target: &str) -> Result<Vec<StagedShard>, IndexError> {
    let Some(t) = table(uri, false).await? else { return Ok(Vec::new()) };
    let lance = |source| IndexError::Lance { uri: uri.to_string(), source };
    let query = t.query().only_if(format!("target = {}", sql_str(target)));
    let batches: Vec<RecordBatch> = query.execute().await.map_err(lance)?.try_collect().await.map_err(lance)?;
    let mut rows = Vec::new();
    for b in &batches {
        let strings = |name: &str| typed_col::<StringArray>(b, name, uri);
        let (targets, fragments, holders) = (strings("target")?, strings("fragments")?, strings("holder")?);
        let (shard, of) = (typed_col::<UInt32Array>(b, "shard", uri)?, typed_col::<UInt32Array>(b, "of", uri)?);
        let (count, version) =
            (typed_col::<UInt64Array>(b, "rows", uri)?, typed_col::<UInt64Array>(b, "source_version", uri)?);
        let at = typed_col::<TimestampMicrosecondArray>(b, "written_at", uri)?;
        for i in 0..b.num_rows() {
            rows.push(StagedShard {
                target: targets.value(i).to_string(),
                shard: shard.value(i),
                of: of.value(i),
                rows: count.value(i),
                source_version: version.value(i),
                fragments: fragments.value(i).to_string(),
                holder: holders.value(i).to_string(),
                written_at: at.value(i),
            });
        }
    }
    rows.sort_by_key(|r| r.written_at);
    Ok(rows)
}

/// Deletes every row recorded for `target` (after its fragments were committed); nothing when
/// no shard ever recorded anything in this database.
pub async fn clear(uri: &str, target: &str) -> Result<(), IndexError> {
    let Some(t) = table(uri, false).await? else { return Ok(()) };
    t.delete(&format!("target = {}", sql_str(target)))
        .await
        .map_err(|source| IndexError::Lance { uri: uri.to_string(), source })?;
    Ok(())
}

/// The shards of the newest run recorded in `staged`: its `of` is the `of` of the newest row,
/// and of each shard the newest row. Returns them by shard, and the shards of `0..of` that
/// have no row (to be run again).
pub fn newest_run(staged: &[StagedShard]) -> (Vec<StagedShard>, Vec<u32>) {
    let Some(of) = staged.iter().max_by_key(|s| s.written_at).map(|s| s.of) else {
        return (Vec::new(), Vec::new());
    };
    let mut by_shard: Vec<Option<StagedShard>> = vec![None; of as usize];
    for s in staged.iter().filter(|s| s.of == of && s.shard < of) {
        let slot = &mut by_shard[s.shard as usize];
        if slot.as_ref().is_none_or(|old| old.written_at <= s.written_at) {
            *slot = Some(s.clone());
        }
    }
    let missing = (0..of).filter(|i| by_shard[*i as usize].is_none()).collect();
    (by_shard.into_iter().flatten().collect(), missing)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shard(shard: u32, of: u32, at: i64) -> StagedShard {
        StagedShard {
            target: "chunks__m".into(),
            shard,
            of,
            rows: 1,
            source_version: 3,
            fragments: format!("[{shard}]"),
            holder: "test".into(),
            written_at: at,
        }
    }

    #[test]
    fn the_newest_run_takes_the_newest_row_of_each_shard_and_names_the_missing() {
        // An older run of 2 shards, then 3 shards of which shard 1 ran twice and shard 2 not yet.
        let rows = [shard(0, 2, 1), shard(1, 2, 2), shard(0, 3, 3), shard(1, 3, 4), shard(1, 3, 6)];
        let (run, missing) = newest_run(&rows);
        assert_eq!(run.iter().map(|s| (s.shard, s.written_at)).collect::<Vec<_>>(), [(0, 3), (1, 6)]);
        assert_eq!(missing, [2]);
        assert_eq!(newest_run(&[]), (Vec::new(), Vec::new()));
    }

    #[tokio::test]
    async fn rows_are_recorded_listed_and_cleared_per_target() {
        let dir = tempfile::tempdir().unwrap();
        let uri = dir.path().to_string_lossy().into_owned();
        assert!(list(&uri, "chunks__m").await.unwrap().is_empty());
        clear(&uri, "chunks__m").await.unwrap();
        assert!(std::fs::read_dir(dir.path()).unwrap().next().is_none(), "reads and clears create no table");
        record(&uri, &[shard(0, 2, 0), StagedShard { target: "chunks__other".into(), ..shard(1, 2, 0) }])
            .await
            .unwrap();
        let rows = list(&uri, "chunks__m").await.unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!((rows[0].shard, rows[0].of, rows[0].fragments.as_str()), (0, 2, "[0]"));
        assert!(rows[0].written_at > 0, "written_at is the commit time");
        clear(&uri, "chunks__m").await.unwrap();
        assert!(list(&uri, "chunks__m").await.unwrap().is_empty());
        assert_eq!(list(&uri, "chunks__other").await.unwrap().len(), 1);
    }
}
