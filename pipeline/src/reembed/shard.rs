//! Distributed re-embedding: `ctxd reembed --shard I/N` on N machines, then one
//! `ctxd reembed --commit`.
//!
//! A large index moved to a new model is a batch job worth many machines (a Kubernetes
//! Indexed Job, `completions = N`). It uses LanceDB's distributed-write pattern
//! ([`ctxd_index::fragments`]):
//!
//! 1. **Shards.** Shard `I` of `N` opens the same source (the active table) and target
//!    (`chunks__<model>`, created by whichever shard comes first) as a one-machine job, and
//!    takes the chunk ids whose hash is `I` modulo `N` and that the target does not hold yet.
//!    It embeds them with the same streaming pass as [`crate::reembed`] but writes **uncommitted
//!    data fragments** of the target instead of commits, then records them in the staging table
//!    ([`ctxd_index::staged`]): one row, the only commit a shard makes. No reader sees any of it.
//!    The source version it reads is tagged (`ctxd-reembed-source-shard-I-of-N`) while it reads.
//! 2. **Commit.** [`crate::reembed::reembed_commit`] checks that every shard of the newest run
//!    recorded its fragments (naming the ones to run again), publishes all of them in **one**
//!    commit to the target, clears the staging rows, and then goes on as the one-machine job
//!    does: the id diff catches up on whatever the source gained or lost since the shards read
//!    it (a daemon keeps writing), indexes are built and queries switch atomically.
//!
//! Crashes: a shard that dies records nothing — run that shard alone again (its data files are
//! unreferenced and removed by a later cleanup). A shard run twice records twice; the newest
//! row wins. A commit that dies after publishing is run again: fragments already in the table
//! are not appended twice ([`ctxd_index::store::Index::commit_fragments`]).

use std::collections::HashSet;
use std::fmt;
use std::str::FromStr;
use std::time::Instant;

use ctxd_index::fragments::Fragments;
use ctxd_index::staged::{self, StagedShard};
use ctxd_index::store::Index;
use ctxd_models::service::EmbedService;

use super::job::{job_error, open_job, JobModel, Progress, ReembedOptions, SOURCE_TAG};
use super::pass::{pass, Rows, Sink};
use crate::error::PipelineError;

/// Rows per uncommitted fragment a shard writes (one Lance data file each).
pub const ROWS_PER_FRAGMENT: usize = 8192;

/// Shard `index` of `of` (`I/N` on the command line, 0-based: `0/3`, `1/3`, `2/3`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    pub index: u32,
    pub of: u32,
}

/// Text that names no shard.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("'{0}' is not a shard: write I/N with 0 <= I < N (e.g. 0/3; in a Kubernetes Indexed Job: $(JOB_COMPLETION_INDEX)/3)")]
pub struct NotAShard(pub String);

impl FromStr for Shard {
    type Err = NotAShard;

    fn from_str(s: &str) -> Result<Self, NotAShard> {
        let err = || NotAShard(s.to_string());
        let (i, n) = s.split_once('/').ok_or_else(err)?;
        let (index, of) = (i.trim().parse::<u32>().map_err(|_| err())?, n.trim().parse::<u32>().map_err(|_| err())?);
        if of == 0 || index >= of || of > 100_000 {
            return Err(err());
        }
        Ok(Self { index, of })
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.of)
    }
}

impl Shard {
    /// Whether chunk `id` is this shard's: FNV-1a of the id, modulo `of` (stable across
    /// processes and versions, so every shard computes the same split).
    pub fn owns(&self, id: &str) -> bool {
        let hash = id.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3));
        hash % self.of as u64 == self.index as u64
    }

    /// The tag that keeps the source version this shard reads.
    pub fn source_tag(&self) -> String {
        format!("{SOURCE_TAG}-shard-{}-of-{}", self.index, self.of)
    }
}

/// What one shard did.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct ShardReport {
    /// `I/N`.
    pub shard: String,
    pub from_table: String,
    pub to_table: String,
    pub to_model: String,
    /// The source version the shard read.
    pub source_version: u64,
    /// Rows of the source that are this shard's.
    pub rows: usize,
    /// Of those, rows the target already held (an earlier job).
    pub resumed: usize,
    /// Rows embedded into uncommitted fragments.
    pub embedded: u64,
    /// Fragments (data files) written.
    pub fragments: usize,
    pub seconds: f64,
    pub rows_per_second: f64,
}

/// Runs `shard` of a distributed re-embedding of `db` with `service`: its rows into
/// uncommitted fragments of the model's table, recorded for `ctxd reembed --commit`.
pub async fn reembed_shard(
    db: &str,
    service: EmbedService,
    shard: Shard,
    opts: &ReembedOptions,
    progress: &dyn Progress,
) -> Result<ShardReport, PipelineError> {
    let started = Instant::now();
    let model: JobModel = service.into();
    let job = open_job(db, &model, false).await?;
    staged::prepare(db).await?;
    let tag = shard.source_tag();
    // The tag keeps the version from cleanup during a long read; without it the shard still
    // runs (at worst a cleanup removes the version and the shard fails: run it again).
    let source_version = match job.source.tag(&tag, None).await {
        Ok(v) => v,
        Err(e) => {
            tracing::warn!(tag = %tag, "re-embedding shard {shard}: tagging the source version failed ({e}); reading untagged");
            job.source.version().await?
        }
    };
    let result = write_share(&job.source, &job.target, &model, shard, opts, progress).await;
    if let Err(e) = job.source.untag(&tag).await {
        tracing::warn!(tag = %tag, "re-embedding shard {shard}: dropping the source tag: {e}");
    }
    let (rows, resumed, embedded, fragments) = result?;
    staged::record(
        db,
        &StagedShard {
            target: job.to_table.clone(),
            shard: shard.index,
            of: shard.of,
            rows: fragments.rows(),
            source_version,
            fragments: fragments.to_json(),
            holder: ctxd_index::lease::holder_name(&format!("ctxd reembed --shard {shard}")),
            written_at: 0,
        },
    )
    .await?;
    let seconds = started.elapsed().as_secs_f64();
    tracing::info!(shard = %shard, table = %job.to_table, embedded, fragments = fragments.len(), "re-embedding shard written (not committed)");
    Ok(ShardReport {
        shard: shard.to_string(),
        from_table: job.source.table_name().to_string(),
        to_table: job.to_table,
        to_model: model.id,
        source_version,
        rows,
        resumed,
        embedded,
        fragments: fragments.len(),
        seconds,
        rows_per_second: embedded as f64 / seconds.max(1e-9),
    })
}

/// The shard's rows not in the target yet, embedded into fragments: (its rows, already done,
/// embedded, fragments).
async fn write_share(
    source: &Index,
    target: &Index,
    model: &JobModel,
    shard: Shard,
    opts: &ReembedOptions,
    progress: &dyn Progress,
) -> Result<(usize, usize, u64, Fragments), PipelineError> {
    let mine: HashSet<String> = source.chunk_ids().await?.into_iter().filter(|id| shard.owns(id)).collect();
    let done = target.chunk_ids().await?;
    let todo: HashSet<String> = mine.difference(&done).cloned().collect();
    let resumed = mine.len() - todo.len();
    if todo.is_empty() {
        return Ok((mine.len(), resumed, 0, Fragments::default()));
    }
    progress.start(&format!("shard {shard}"), mine.len() as u64, resumed as u64);
    let sink = Sink::Stage { rows_per_fragment: ROWS_PER_FRAGMENT };
    let (embedded, fragments) =
        pass(source, target, model, Rows::Scan(todo), opts.rows_per_block, sink, progress).await?;
    Ok((mine.len(), resumed, embedded, fragments))
}

/// The commit step's first half: publishes every shard's fragments of the newest run into
/// `target` (table `to_table`) in one commit and clears the staging rows. Returns the shards
/// and the rows appended.
pub(crate) async fn publish(db: &str, target: &Index, to_table: &str) -> Result<(u32, u64), PipelineError> {
    let staged = staged::list(db, to_table).await?;
    let (run, missing) = staged::newest_run(&staged);
    if run.is_empty() && !target.chunk_ids().await?.is_empty() {
        // A commit that died after publishing (the staging rows are cleared right after the
        // Append): the catch-up, indexes and switch that follow are what is left to do.
        tracing::warn!(table = %to_table, "re-embedding: nothing staged, the target holds rows already; finishing the job");
        return Ok((0, 0));
    }
    if run.is_empty() {
        return Err(job_error(
            db,
            format!(
                "nothing is staged for table {to_table}: run the shards first (`ctxd reembed --shard I/N` for every I), \
                 or finish on one machine with `ctxd reembed` without --commit"
            ),
        ));
    }
    let of = run[0].of;
    if !missing.is_empty() {
        let names: Vec<String> = missing.iter().map(|i| format!("{i}/{of}")).collect();
        return Err(job_error(
            db,
            format!(
                "shard(s) {} of the re-embedding into {to_table} have not recorded their fragments (still running, or \
                 crashed): run each of them again (`ctxd reembed --shard {}` …), then --commit",
                names.join(", "),
                names[0]
            ),
        ));
    }
    let sets = run.iter().map(|s| Fragments::from_json(&s.fragments, db)).collect::<Result<Vec<_>, _>>()?;
    let appended = target.commit_fragments(sets).await?;
    staged::clear(db, to_table).await?;
    tracing::info!(
        table = %to_table, shards = of, fragments = appended.len(), rows = appended.rows(),
        "re-embedding: published every shard's fragments in one commit"
    );
    Ok((of, appended.rows()))
}

/// Drops every shard's source tag left on `source` (a shard killed and never run again, a run
/// with another N), so cleanup may remove those versions again.
pub(crate) async fn drop_shard_tags(source: &Index) {
    let prefix = format!("{SOURCE_TAG}-shard-");
    let tags: Vec<String> = match source.snapshots().await {
        Ok(snaps) => snaps.into_iter().flat_map(|s| s.tags).filter(|t| t.starts_with(&prefix)).collect(),
        Err(e) => return tracing::warn!("re-embedding: listing the source's tags: {e}"),
    };
    for tag in tags {
        if let Err(e) = source.untag(&tag).await {
            tracing::warn!(tag = %tag, "re-embedding: dropping a shard's source tag: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::job::Quiet;
    use super::super::run::reembed_commit;
    use super::*;
    use crate::testkit::{letters, row, text_len, Letters};
    use ctxd_index::{schema::ChunkRow, writer::CommitBatch};
    use ctxd_models::service::EmbedServiceConfig;

    #[tokio::test]
    async fn shards_stage_fragments_that_one_commit_publishes_and_a_missing_shard_is_named() {
        let tmp = tempfile::tempdir().unwrap();
        let db = tmp.path().join("db").to_string_lossy().into_owned();
        let old = Index::open_or_create(&db, "test/old", 4).await.unwrap();
        let rows: Vec<ChunkRow> = (0..60).map(|i| row(i, "test/old")).collect();
        old.commit(CommitBatch { rows, ..Default::default() }).await.unwrap();
        let service = || EmbedService::spawn(Letters, EmbedServiceConfig::default());
        let opts = ReembedOptions { rows_per_block: 8, ..Default::default() };
        let shard = |i| Shard { index: i, of: 3 };

        // Two of three shards: their rows are written but not visible; the commit names the third.
        let mut embedded = 0;
        for i in [0, 2] {
            let r = reembed_shard(&db, service(), shard(i), &opts, &Quiet).await.unwrap();
            assert_eq!((r.to_table.as_str(), r.resumed), ("chunks__test-letters", 0), "{r:?}");
            assert!(r.embedded > 5 && r.fragments >= 1, "{r:?}");
            embedded += r.embedded;
        }
        let target = Index::open_table(&db, "chunks__test-letters").await.unwrap();
        assert!(target.chunk_ids().await.unwrap().is_empty(), "nothing is visible before the commit");
        let err = reembed_commit(&db, service(), "test/letters", &opts, &Quiet).await.unwrap_err().to_string();
        assert!(err.contains("shard(s) 1/3") && err.contains("--shard 1/3"), "{err}");
        assert_eq!(Index::open(&db).await.unwrap().table_name(), "chunks", "not switched");

        // A shard of another run killed while it read leaves its tag: the commit drops it.
        old.tag(&Shard { index: 0, of: 5 }.source_tag(), None).await.unwrap();
        // The third shard (run twice: the newest record wins), and a source change meanwhile.
        reembed_shard(&db, service(), shard(1), &opts, &Quiet).await.unwrap();
        let again = reembed_shard(&db, service(), shard(1), &opts, &Quiet).await.unwrap();
        embedded += again.embedded;
        assert_eq!(embedded, 60, "the shards split the rows");
        let mut changed = row(70, "test/old");
        changed.chunk.path = "src/f0.rs".into();
        old.commit(CommitBatch { rows: vec![changed], replace_paths: vec!["src/f0.rs".into()], ..Default::default() })
            .await
            .unwrap();

        let report = reembed_commit(&db, service(), "test/letters", &opts, &Quiet).await.unwrap();
        assert_eq!((report.shards, report.staged_rows), (3, 60), "{report:?}");
        assert_eq!((report.rows, report.embedded, report.removed), (57, 1, 4), "catch-up after the commit: {report:?}");
        assert!(report.switched);
        let now = Index::open(&db).await.unwrap();
        assert_eq!((now.table_name(), now.model_id()), ("chunks__test-letters", "test/letters"));
        assert_eq!(now.chunk_ids().await.unwrap(), old.chunk_ids().await.unwrap());
        let vectors = now.vectors_of_chunks(&["c033".to_string()]).await.unwrap();
        assert_eq!(vectors["c033"], letters(text_len(33)));
        assert!(staged::list(&db, "chunks__test-letters").await.unwrap().is_empty(), "staging rows cleared");
        let tags = old.snapshots().await.unwrap().into_iter().flat_map(|s| s.tags).collect::<Vec<_>>();
        assert!(tags.iter().all(|t| !t.starts_with(SOURCE_TAG)), "{tags:?}");
        let err = reembed_commit(&db, service(), "test/letters", &opts, &Quiet).await.unwrap_err().to_string();
        assert!(err.contains("already uses model"), "{err}");
    }

    #[tokio::test]
    async fn a_commit_that_died_after_publishing_runs_again() {
        let tmp = tempfile::tempdir().unwrap();
        let db = tmp.path().join("db").to_string_lossy().into_owned();
        let old = Index::open_or_create(&db, "test/old", 4).await.unwrap();
        old.commit(CommitBatch { rows: (0..20).map(|i| row(i, "test/old")).collect(), ..Default::default() })
            .await
            .unwrap();
        let service = || EmbedService::spawn(Letters, EmbedServiceConfig::default());
        let opts = ReembedOptions { rows_per_block: 8, switch: false, ..Default::default() };
        reembed_shard(&db, service(), Shard { index: 0, of: 1 }, &opts, &Quiet).await.unwrap();
        let first = reembed_commit(&db, service(), "test/letters", &opts, &Quiet).await.unwrap();
        assert_eq!((first.shards, first.staged_rows, first.switched), (1, 20, false));
        // Run again (as after a crash past the publish): nothing staged, the job finishes.
        let again = reembed_commit(&db, service(), "test/letters", &ReembedOptions { switch: true, ..opts }, &Quiet)
            .await
            .unwrap();
        assert_eq!((again.shards, again.embedded, again.rows, again.switched), (0, 0, 20, true));
    }

    #[test]
    fn shards_parse_and_split_ids_between_them() {
        let s: Shard = "1/3".parse().unwrap();
        assert_eq!((s.index, s.of, s.to_string()), (1, 3, "1/3".to_string()));
        for bad in ["3/3", "1", "a/3", "0/0", "-1/2"] {
            assert!(bad.parse::<Shard>().unwrap_err().to_string().contains("I/N"), "{bad}");
        }
        // Every id is in exactly one shard, and the split is not lopsided.
        let ids: Vec<String> = (0..3000).map(|i| format!("{:016x}", i * 7919)).collect();
        let shards: Vec<Shard> = (0..3).map(|i| Shard { index: i, of: 3 }).collect();
        let sizes: Vec<usize> = shards.iter().map(|s| ids.iter().filter(|id| s.owns(id)).count()).collect();
        assert_eq!(sizes.iter().sum::<usize>(), ids.len());
        assert!(sizes.iter().all(|&n| n > 800), "{sizes:?}");
        assert_eq!(Shard { index: 0, of: 2 }.source_tag(), "ctxd-reembed-source-shard-0-of-2");
    }
}
