//! A sharded first build: N processes each write their share of the sources as uncommitted
//! fragments ([`crate::fragments`]) of the chunks, symbols, edges and streams tables, and one
//! commit publishes each table's fragments of every shard in **one** Lance commit.
//!
//! `ctxd index --shard I/N` runs the pipeline over the files whose stored path hashes to shard
//! `I` (`ctxd_stages::select`); its upsert stage hands each batch to [`ShardBuild::write`]
//! instead of committing it, and when the run is done [`ShardBuild::record`] writes one row per
//! table into the staging table ([`crate::staged`], targets `build:chunks`, `build:symbols`,
//! `build:edges`, `build:streams`), plus the versions of the S3 objects it read
//! (`build:objects`), all in one small commit. `ctxd index --commit` then runs [`publish`]:
//! it takes the newest run (each shard's newest record), refuses while a shard of it has recorded
//! nothing (naming it), publishes symbols, edges, streams and then chunks (one commit each; a
//! fragment a table already holds is left out, so a commit run again after dying halfway
//! appends nothing twice), records the objects for the writer ([`crate::source_objects`]) and
//! clears the staging rows.
//!
//! A shard that dies wrote no record: run it again and it redoes its own share only (its
//! earlier data files are referenced by no version; a cleanup deletes them once older than its
//! retention). A shard run twice leaves two records and the newest counts. A build is a *first*
//! build: [`ShardBuild::start`] refuses an index that holds chunks, since a shard neither replaces
//! nor deletes (its files are new to the index by construction).

use std::sync::Arc;

use crate::edges::edges_to_batch;
use crate::error::IndexError;
use crate::fragments::Fragments;
use crate::schema::rows_to_batch;
use crate::source_objects::SourceObject;
use crate::staged::{self, StagedShard};
use crate::store::Index;
use crate::streams::stream_batch;
use crate::symbols::symbols_to_batch;
use crate::writer::{CommitBatch, CommitStats};

/// The staging targets of a build's tables, in the order [`publish`] commits them (chunks last:
/// a reader finds a chunk's symbols and edges as soon as it finds the chunk).
const TABLES: [Part; 4] = [Part::Symbols, Part::Edges, Part::Streams, Part::Chunks];

/// The staging target of the objects a shard read.
const OBJECTS: &str = "build:objects";

/// One table a shard writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    Chunks,
    Symbols,
    Edges,
    Streams,
}

impl Part {
    fn target(self) -> &'static str {
        match self {
            Part::Chunks => "build:chunks",
            Part::Symbols => "build:symbols",
            Part::Edges => "build:edges",
            Part::Streams => "build:streams",
        }
    }

    fn table(self, index: &Index) -> Result<&lancedb::Table, IndexError> {
        let table = match self {
            Part::Chunks => Some(&index.table),
            Part::Symbols => index.symbols.as_ref(),
            Part::Edges => index.edges.as_ref(),
            Part::Streams => index.streams.as_ref(),
        };
        table.ok_or_else(|| IndexError::Staged {
            uri: index.uri.clone(),
            message: format!("the index has no {} table: open it for writing once (`ctxd index`)", self.target()),
        })
    }
}

/// Where `part` is in [`TABLES`] (and in a shard's written fragments).
fn slot(part: Part) -> usize {
    TABLES.iter().position(|p| *p == part).expect("every part is in TABLES")
}

/// One shard's share of a first build, written and not committed yet.
pub struct ShardBuild {
    index: Arc<Index>,
    shard: u32,
    of: u32,
    /// Fragments written so far, per part (in [`TABLES`] order).
    written: tokio::sync::Mutex<[Fragments; 4]>,
}

/// What a shard recorded.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct ShardWritten {
    pub chunks: u64,
    pub symbols: u64,
    pub edges: u64,
    /// Data files written, over all tables.
    pub fragments: u64,
    pub objects: u64,
}

impl ShardBuild {
    /// Shard `shard` of `of` over `index` (a writer's handle of an index without chunks).
    pub async fn start(index: Arc<Index>, shard: u32, of: u32) -> Result<Self, IndexError> {
        let staged = |message: String| IndexError::Staged { uri: index.uri.clone(), message };
        if of == 0 || shard >= of {
            return Err(staged(format!("{shard}/{of} is not a shard: write I/N with 0 <= I < N")));
        }
        let rows = index.table.count_rows(None).await.map_err(|e| index.lance(e))?;
        if rows > 0 {
            return Err(staged(format!(
                "the index holds {rows} chunks: a sharded build (`ctxd index --shard`) is the first build of an empty \
                 index; keep this one current with the writer (`ctxd serve`) or `ctxd index`"
            )));
        }
        for part in TABLES {
            part.table(&index)?;
        }
        staged::prepare(&index.uri).await?;
        Ok(Self { index, shard, of, written: Default::default() })
    }

    /// Writes `batch` (new files only) as uncommitted fragments of each table.
    pub async fn write(&self, batch: &CommitBatch) -> Result<CommitStats, IndexError> {
        if let Some(path) = batch.replace_paths.iter().chain(&batch.delete_paths).next() {
            return Err(IndexError::Staged {
                uri: self.index.uri.clone(),
                message: format!("a shard of a first build writes new files only; {path} would replace or delete rows"),
            });
        }
        let ix = &self.index;
        let named = ix.named_sources.load(std::sync::atomic::Ordering::Relaxed);
        let mut parts = Vec::new();
        if !batch.rows.is_empty() {
            parts.push((Part::Chunks, rows_to_batch(&batch.rows, ix.dim, named, ix.vectorless)?));
        }
        if !batch.symbols.is_empty() {
            parts.push((Part::Symbols, symbols_to_batch(&batch.symbols)?));
        }
        if !batch.edges.is_empty() {
            parts.push((Part::Edges, edges_to_batch(&batch.edges)?));
        }
        self.stage(parts).await?;
        Ok(CommitStats { version: 0, inserted: batch.rows.len() as u64, deleted: 0 })
    }

    /// Marks a file written in parts complete (its row in the streams table, staged like the rest).
    pub async fn finish_stream(&self, path: &str, hash: &str) -> Result<(), IndexError> {
        self.stage(vec![(Part::Streams, stream_batch(path, hash))]).await
    }

    /// Writes each record as fragments of its part's table, and keeps them only once every
    /// part is written: a batch retried after a failure halfway records no fragment twice (the
    /// failed attempt's files are referenced by nothing).
    async fn stage(&self, parts: Vec<(Part, arrow_array::RecordBatch)>) -> Result<(), IndexError> {
        let mut written = Vec::new();
        for (part, record) in parts {
            written.push((part, self.index.write_fragments_into(part.table(&self.index)?, vec![record]).await?));
        }
        let mut kept = self.written.lock().await;
        for (part, fragments) in written {
            kept[slot(part)].extend(fragments);
        }
        Ok(())
    }

    /// Records what this shard wrote, and the S3 objects it read, in one commit of the staging
    /// table: from now on [`publish`] counts the shard done.
    pub async fn record(&self, objects: &[SourceObject]) -> Result<ShardWritten, IndexError> {
        let written = self.written.lock().await.clone();
        let holder = crate::lease::holder_name(&format!("ctxd index --shard {}/{}", self.shard, self.of));
        let row = |target: &str, rows: u64, fragments: String| StagedShard {
            target: target.to_string(),
            shard: self.shard,
            of: self.of,
            rows,
            source_version: 0,
            fragments,
            holder: holder.clone(),
            written_at: 0,
        };
        let mut rows: Vec<StagedShard> =
            TABLES.iter().zip(&written).map(|(p, f)| row(p.target(), f.rows(), f.to_json())).collect();
        let objects_json = serde_json::to_string(objects).expect("object versions serialize");
        rows.push(row(OBJECTS, objects.len() as u64, objects_json));
        staged::record(&self.index.uri, &rows).await?;
        let count = |p: Part| written[slot(p)].rows();
        Ok(ShardWritten {
            chunks: count(Part::Chunks),
            symbols: count(Part::Symbols),
            edges: count(Part::Edges),
            fragments: written.iter().map(|f| f.len() as u64).sum(),
            objects: objects.len() as u64,
        })
    }
}

/// What [`publish`] did.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Published {
    /// Shards of the run published (0: nothing was staged and the index holds a build already).
    pub shards: u32,
    /// Rows appended per table (chunks, symbols, edges, streams).
    pub chunks: u64,
    pub symbols: u64,
    pub edges: u64,
    pub streams: u64,
    /// Data files appended, over all tables.
    pub fragments: u64,
    /// S3 objects recorded for the writer.
    pub objects: u64,
}

/// Publishes the newest run of a sharded build into `index` (a writer's handle): each table's
/// fragments of every shard in one commit, then the objects read for the writer, then the
/// staging rows cleared. Refuses, naming them, while shards of the run have recorded nothing.
pub async fn publish(index: &Index) -> Result<Published, IndexError> {
    let uri = index.uri.as_str();
    let staged_err = |message: String| IndexError::Staged { uri: uri.to_string(), message };
    let (run, missing) = staged::newest_run(&staged::list(uri, Part::Chunks.target()).await?);
    if run.is_empty() {
        index.refresh().await?;
        if index.table.count_rows(None).await.map_err(|e| index.lance(e))? > 0 {
            // A commit that died after publishing, before or while clearing the staging rows.
            return Ok(Published::default());
        }
        return Err(staged_err(
            "nothing is staged: run the shards first (`ctxd index --shard I/N` for every I), then --commit".into(),
        ));
    }
    let of = run[0].of;
    if !missing.is_empty() {
        let names: Vec<String> = missing.iter().map(|i| format!("{i}/{of}")).collect();
        return Err(staged_err(format!(
            "shard(s) {} of the build have not recorded their share (still running, or dead): run each of them \
             again (`ctxd index --shard {}` …), then --commit",
            names.join(", "),
            names[0]
        )));
    }
    // The rows of `target` recorded with the run's chunks rows (one commit per shard record).
    let of_run = |all: Vec<StagedShard>| -> Vec<StagedShard> {
        all.into_iter()
            .filter(|r| run.iter().any(|c| (c.shard, c.of, c.written_at) == (r.shard, r.of, r.written_at)))
            .collect()
    };
    let mut out = Published { shards: of, ..Published::default() };
    for part in TABLES {
        let rows = of_run(staged::list(uri, part.target()).await?);
        let sets = rows.iter().map(|r| Fragments::from_json(&r.fragments, uri)).collect::<Result<Vec<_>, _>>()?;
        let table = part.table(index)?;
        table.checkout_latest().await.map_err(|e| index.lance(e))?;
        let appended = index.commit_fragments_into(table, sets).await?;
        out.fragments += appended.len() as u64;
        *match part {
            Part::Chunks => &mut out.chunks,
            Part::Symbols => &mut out.symbols,
            Part::Edges => &mut out.edges,
            Part::Streams => &mut out.streams,
        } = appended.rows();
    }
    let mut objects: Vec<SourceObject> = Vec::new();
    for r in of_run(staged::list(uri, OBJECTS).await?) {
        let read: Vec<SourceObject> = serde_json::from_str(&r.fragments).map_err(|e| {
            staged_err(format!("shard {}/{}'s objects are not readable ({e}); run it again", r.shard, r.of))
        })?;
        objects.extend(read);
    }
    crate::source_objects::record(uri, &objects).await?;
    out.objects = objects.len() as u64;
    // The chunks rows last: a commit that dies before finds them and runs again.
    for target in [OBJECTS].into_iter().chain(TABLES.iter().map(|p| p.target())) {
        staged::clear(uri, target).await?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source_objects::ObjectVersion;
    use crate::testing::row;

    #[tokio::test]
    async fn shards_are_published_together_once_and_a_missing_one_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let uri = dir.path().to_string_lossy().into_owned();
        let index = Arc::new(Index::open_or_create(&uri, "m", 8).await.unwrap());
        let (a, b) = (
            ShardBuild::start(index.clone(), 0, 2).await.unwrap(),
            ShardBuild::start(index.clone(), 1, 2).await.unwrap(),
        );
        a.write(&CommitBatch { rows: vec![row(0), row(1)], ..Default::default() }).await.unwrap();
        b.write(&CommitBatch { rows: vec![row(2)], ..Default::default() }).await.unwrap();
        let replacing = CommitBatch { replace_paths: vec!["a.py".into()], ..Default::default() };
        assert!(a.write(&replacing).await.unwrap_err().to_string().contains("new files only"));
        assert_eq!(a.record(&[]).await.unwrap().chunks, 2);
        let err = publish(&index).await.unwrap_err().to_string();
        assert!(err.contains("shard(s) 1/2") && err.contains("--shard 1/2"), "{err}");
        assert!(index.reads().chunk_ids().await.unwrap().is_empty(), "nothing published");
        let object = SourceObject {
            source: "docs".into(),
            rel: "a.md".into(),
            version: ObjectVersion { etag: Some("\"e\"".into()), size: 3 },
        };
        b.record(std::slice::from_ref(&object)).await.unwrap();
        let before = index.version().await.unwrap();
        let done = publish(&index).await.unwrap();
        assert_eq!((done.shards, done.chunks, done.objects), (2, 3, 1));
        assert_eq!(index.version().await.unwrap(), before + 1, "one commit of the chunks table");
        assert_eq!(index.reads().chunk_ids().await.unwrap().len(), 3);
        assert_eq!(publish(&index).await.unwrap().shards, 0, "published once");
        assert_eq!(index.reads().chunk_ids().await.unwrap().len(), 3);
        assert_eq!(crate::source_objects::load(&uri, "docs").await.unwrap()["a.md"], object.version);
        let again = ShardBuild::start(index.clone(), 0, 2).await.err().unwrap().to_string();
        assert!(again.contains("holds 3 chunks"), "{again}");
    }
}
