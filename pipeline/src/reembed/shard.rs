//! Distributed re-embedding: `ctxd reembed --shard I/N` on N machines, then one
//! `ctxd reembed --commit`.
//!
//! A large index moved to a new model is a batch job worth many machines (a Kubernetes
//! Indexed Job, `completions = N`). It uses LanceDB's distributed-write pattern
//! ([`ctxd_index::fragments`]):
//!
//! 1. **Shards.** Shard `I` of `N` opens the same source (the active table) and target
//!    (`chunks__<model>`, created by whichever shard comes first) as a one-machine job. Every
//!    shard of a run reads **one source version**: the first to start tags the version current
//!    then (`ctxd-reembed-source-shards-of-N`), the others read the tagged one. Shard `I` reads
//!    only its share of that version's rows — the `I`-th of `N` equal ranges of its live
//!    rows, cut across the data fragments ([`ctxd_index::share`]) — so its reading falls with
//!    `N` (rows and bytes read are in its report), and skips the rows the target holds
//!    already. It embeds them with the same streaming pass as [`crate::reembed`] but writes
//!    **uncommitted data fragments** of the target instead of commits, then records them in the
//!    staging table ([`ctxd_index::staged`]): one row, the only commit a shard makes. No reader
//!    sees any of it.
//! 2. **Commit.** [`crate::reembed::reembed`] with `commit_shards` checks that every shard of the newest run
//!    recorded its fragments and read the same version (naming the ones to run again), publishes all of them in **one**
//!    commit to the target, clears the staging rows, and then goes on as the one-machine job
//!    does: the id diff catches up on whatever the source gained or lost since the shards read
//!    it (a daemon keeps writing), indexes are built and queries switch atomically.
//!
//! Crashes: a shard that dies records nothing — run that shard alone again (its data files are
//! unreferenced and removed by a later cleanup). A shard run twice records twice; the newest
//! row wins. A commit that dies after publishing is run again: fragments already in the table
//! are not appended twice ([`ctxd_index::writer::Writes::commit_fragments`]).

use std::fmt;
use std::str::FromStr;
use std::time::Instant;

use ctxd_index::snapshots::AsOf;
use ctxd_index::staged::{self, StagedShard};
use ctxd_index::store::Index;
use ctxd_index::Fragments;
use ctxd_index::RowShare;
use ctxd_models::service::EmbedService;

use super::job::{job_error, open_job, JobModel, Progress, ReembedOptions, SOURCE_TAG};
use super::pass::{pass, Passed, Rows, Sink};
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
    /// The tag that pins the source version every shard of a run of `of` shards reads (the
    /// commit drops it).
    pub fn source_tag(&self) -> String {
        format!("{SOURCE_TAG}-shards-of-{}", self.of)
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
    /// Rows of the source that are this shard's (the live rows of its share, read).
    pub rows: u64,
    /// Of those, rows the target already held (an earlier job).
    pub resumed: u64,
    /// The share's rows and the bytes of its data files: this shard's reading.
    pub share_rows: u64,
    pub share_bytes: u64,
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
    let source_version = pinned_version(&job.source, &shard).await?;
    let source = job.source.snapshots().at(source_version).await?;
    let (share, passed, resumed) = write_share(&source, &job.target, &model, shard, opts, progress).await?;
    let (rows, embedded, fragments) = (passed.read, passed.embedded, passed.fragments);
    staged::record(
        db,
        &[StagedShard {
            target: job.to_table.clone(),
            shard: shard.index,
            of: shard.of,
            rows: fragments.rows(),
            source_version,
            fragments: fragments.to_json(),
            holder: ctxd_index::lease::holder_name(&format!("ctxd reembed --shard {shard}")),
            written_at: 0,
        }],
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
        share_rows: share.rows(),
        share_bytes: share.bytes(),
        embedded,
        fragments: fragments.len(),
        seconds,
        rows_per_second: embedded as f64 / seconds.max(1e-9),
    })
}

/// The version every shard of this run reads: the run's tag's, created at the current version
/// by the first shard to start (never moved). Without it (tagging failed) the current version
/// is read, and the commit refuses the shard if that is not the tag's.
async fn pinned_version(source: &Index, shard: &Shard) -> Result<u64, PipelineError> {
    let tag = shard.source_tag();
    match source.snapshots().tag_once(&tag).await {
        Ok(v) => Ok(v),
        Err(e) => {
            tracing::warn!(tag = %tag, "re-embedding shard {shard}: tagging the source version failed ({e}); reading untagged");
            Ok(source.version().await?)
        }
    }
}

/// The shard's share of `source` (a pinned version), less what the target holds, embedded
/// into fragments: (the share, what the pass did, rows skipped as done).
async fn write_share(
    source: &Index,
    target: &Index,
    model: &JobModel,
    shard: Shard,
    opts: &ReembedOptions,
    progress: &dyn Progress,
) -> Result<(RowShare, Passed, u64), PipelineError> {
    let share = source.vectors().row_share(shard.index, shard.of).await?;
    let done = target.reads().chunk_ids().await?;
    progress.start(&format!("shard {shard}"), share.rows(), 0);
    let sink = Sink::Stage { rows_per_fragment: ROWS_PER_FRAGMENT };
    let rows = Rows::Share(share.clone(), done);
    let passed = pass(source, target, model, rows, opts.rows_per_block, sink, progress).await?;
    let resumed = passed.read.saturating_sub(passed.embedded);
    Ok((share, passed, resumed))
}

/// The commit step's first half: publishes every shard's fragments of the newest run into
/// `target` (table `to_table`) in one commit and clears the staging rows. Returns the shards
/// and the rows appended.
pub(crate) async fn publish(
    db: &str,
    source: &Index,
    target: &Index,
    to_table: &str,
) -> Result<(u32, u64), PipelineError> {
    let staged = staged::list(db, to_table).await?;
    let (run, missing) = staged::newest_run(&staged);
    if run.is_empty() && !target.reads().chunk_ids().await?.is_empty() {
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
    let tag = Shard { index: 0, of }.source_tag();
    let pinned = source.snapshots().resolve(&AsOf::Tag(tag)).await.ok();
    same_source_version(db, &run, pinned)?;
    let sets = run.iter().map(|s| Fragments::from_json(&s.fragments, db)).collect::<Result<Vec<_>, _>>()?;
    let appended = target.writes().commit_fragments(sets).await?;
    staged::clear(db, to_table).await?;
    tracing::info!(
        table = %to_table, shards = of, fragments = appended.len(), rows = appended.rows(),
        "re-embedding: published every shard's fragments in one commit"
    );
    Ok((of, appended.rows()))
}

/// Refuses a run whose shards read different source versions (one could not read the run's
/// tag): their shares would overlap or leave rows out. Names the shards off the tagged version
/// (`pinned`; without the tag, off the version most of them read): run again, they read it.
fn same_source_version(db: &str, run: &[StagedShard], pinned: Option<u64>) -> Result<(), PipelineError> {
    let mut counts: std::collections::BTreeMap<u64, usize> = Default::default();
    for s in run {
        *counts.entry(s.source_version).or_default() += 1;
    }
    let most = counts.iter().max_by_key(|(_, n)| **n).map(|(v, _)| *v);
    let Some(common) = pinned.or(most) else { return Ok(()) };
    let off: Vec<String> =
        run.iter().filter(|s| s.source_version != common).map(|s| format!("{}/{}", s.shard, s.of)).collect();
    if off.is_empty() {
        return Ok(());
    }
    Err(job_error(
        db,
        format!(
            "shard(s) {} read another source version than the run's (version {common}): run each of them again \
             (`ctxd reembed --shard {}` …), then --commit",
            off.join(", "),
            off[0]
        ),
    ))
}

/// Drops every shard's source tag left on `source` (a shard killed and never run again, a run
/// with another N), so cleanup may remove those versions again.
pub(crate) async fn drop_shard_tags(source: &Index) {
    let prefix = format!("{SOURCE_TAG}-shard");
    let tags: Vec<String> = match source.snapshots().list().await {
        Ok(snaps) => snaps.into_iter().flat_map(|s| s.tags).filter(|t| t.starts_with(&prefix)).collect(),
        Err(e) => return tracing::warn!("re-embedding: listing the source's tags: {e}"),
    };
    for tag in tags {
        if let Err(e) = source.snapshots().untag(&tag).await {
            tracing::warn!(tag = %tag, "re-embedding: dropping a shard's source tag: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::job::Quiet;
    use super::super::run::reembed;
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
        old.writes().commit(CommitBatch { rows, ..Default::default() }).await.unwrap();
        let service = || EmbedService::spawn(Letters, EmbedServiceConfig::default());
        let opts = ReembedOptions { rows_per_block: 8, ..Default::default() };
        let shard = |i| Shard { index: i, of: 3 };

        // Two of three shards: their rows are written but not visible; the commit names the third.
        let mut embedded = 0;
        for i in [0, 2] {
            let r = reembed_shard(&db, service(), shard(i), &opts, &Quiet).await.unwrap();
            assert_eq!((r.to_table.as_str(), r.resumed), ("chunks__test-letters", 0), "{r:?}");
            // Its share of the pinned version, a third of the rows, read alone.
            assert_eq!((r.share_rows, r.rows, r.embedded), (20, 20, 20), "{r:?}");
            assert!(r.fragments >= 1 && r.share_bytes > 0, "{r:?}");
            embedded += r.embedded;
        }
        let target = Index::open_table(&db, "chunks__test-letters").await.unwrap();
        assert!(target.reads().chunk_ids().await.unwrap().is_empty(), "nothing is visible before the commit");
        let err =
            reembed(&db, service(), "test/letters", &ReembedOptions { commit_shards: true, ..opts.clone() }, &Quiet)
                .await
                .unwrap_err()
                .to_string();
        assert!(err.contains("shard(s) 1/3") && err.contains("--shard 1/3"), "{err}");
        assert_eq!(Index::open(&db).await.unwrap().table_name(), "chunks", "not switched");

        // A shard of another run killed while it read leaves its tag: the commit drops it.
        old.snapshots().tag(&Shard { index: 0, of: 5 }.source_tag(), None).await.unwrap();
        // The third shard (run twice: the newest record wins), and a source change meanwhile.
        reembed_shard(&db, service(), shard(1), &opts, &Quiet).await.unwrap();
        let again = reembed_shard(&db, service(), shard(1), &opts, &Quiet).await.unwrap();
        embedded += again.embedded;
        assert_eq!(embedded, 60, "the shards split the rows");
        let mut changed = row(70, "test/old");
        changed.chunk.path = "src/f0.rs".into();
        old.writes()
            .commit(CommitBatch { rows: vec![changed], replace_paths: vec!["src/f0.rs".into()], ..Default::default() })
            .await
            .unwrap();

        let report =
            reembed(&db, service(), "test/letters", &ReembedOptions { commit_shards: true, ..opts.clone() }, &Quiet)
                .await
                .unwrap();
        assert_eq!((report.shards, report.staged_rows), (3, 60), "{report:?}");
        assert_eq!((report.rows, report.embedded, report.removed), (57, 1, 4), "catch-up after the commit: {report:?}");
        assert!(report.switched);
        let now = Index::open(&db).await.unwrap();
        assert_eq!((now.table_name(), now.model_id()), ("chunks__test-letters", "test/letters"));
        assert_eq!(now.reads().chunk_ids().await.unwrap(), old.reads().chunk_ids().await.unwrap());
        let vectors = now.vectors().vectors_of_chunks(&["c033".to_string()]).await.unwrap();
        assert_eq!(vectors["c033"], letters(text_len(33)));
        assert!(staged::list(&db, "chunks__test-letters").await.unwrap().is_empty(), "staging rows cleared");
        let tags = old.snapshots().list().await.unwrap().into_iter().flat_map(|s| s.tags).collect::<Vec<_>>();
        assert!(tags.iter().all(|t| !t.starts_with(SOURCE_TAG)), "{tags:?}");
        let err =
            reembed(&db, service(), "test/letters", &ReembedOptions { commit_shards: true, ..opts.clone() }, &Quiet)
                .await
                .unwrap_err()
                .to_string();
        assert!(err.contains("already uses model"), "{err}");
    }

    #[tokio::test]
    async fn a_commit_that_died_after_publishing_runs_again() {
        let tmp = tempfile::tempdir().unwrap();
        let db = tmp.path().join("db").to_string_lossy().into_owned();
        let old = Index::open_or_create(&db, "test/old", 4).await.unwrap();
        old.writes()
            .commit(CommitBatch { rows: (0..20).map(|i| row(i, "test/old")).collect(), ..Default::default() })
            .await
            .unwrap();
        let service = || EmbedService::spawn(Letters, EmbedServiceConfig::default());
        let opts = ReembedOptions { rows_per_block: 8, switch: false, ..Default::default() };
        reembed_shard(&db, service(), Shard { index: 0, of: 1 }, &opts, &Quiet).await.unwrap();
        let first =
            reembed(&db, service(), "test/letters", &ReembedOptions { commit_shards: true, ..opts.clone() }, &Quiet)
                .await
                .unwrap();
        assert_eq!((first.shards, first.staged_rows, first.switched), (1, 20, false));
        // Run again (as after a crash past the publish): nothing staged, the job finishes.
        let again = reembed(
            &db,
            service(),
            "test/letters",
            &ReembedOptions { switch: true, commit_shards: true, ..opts },
            &Quiet,
        )
        .await
        .unwrap();
        assert_eq!((again.shards, again.embedded, again.rows, again.switched), (0, 0, 20, true));
    }

    #[test]
    fn a_run_whose_shards_read_other_versions_is_refused_with_them_named() {
        let staged = |shard, source_version| StagedShard {
            target: "chunks__m".into(),
            shard,
            of: 3,
            rows: 1,
            source_version,
            fragments: String::new(),
            holder: String::new(),
            written_at: 0,
        };
        let run = [staged(0, 7), staged(1, 9), staged(2, 7)];
        let err = same_source_version("db", &run, Some(7)).unwrap_err().to_string();
        assert!(err.contains("shard(s) 1/3 read") && err.contains("version 7"), "{err}");
        let err = same_source_version("db", &run, Some(9)).unwrap_err().to_string();
        assert!(err.contains("shard(s) 0/3, 2/3 read"), "the tag's version rules, not the majority: {err}");
        let err = same_source_version("db", &run, None).unwrap_err().to_string();
        assert!(err.contains("shard(s) 1/3 read"), "without the tag, the majority: {err}");
        assert!(same_source_version("db", &[staged(0, 7), staged(2, 7)], Some(7)).is_ok());
    }

    #[test]
    fn shards_parse_and_name_their_run_tag() {
        let s: Shard = "1/3".parse().unwrap();
        assert_eq!((s.index, s.of, s.to_string()), (1, 3, "1/3".to_string()));
        for bad in ["3/3", "1", "a/3", "0/0", "-1/2"] {
            assert!(bad.parse::<Shard>().unwrap_err().to_string().contains("I/N"), "{bad}");
        }
        assert_eq!(Shard { index: 0, of: 2 }.source_tag(), "ctxd-reembed-source-shards-of-2");
    }
}
