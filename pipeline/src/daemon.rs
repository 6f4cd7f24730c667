//! The ctxd pipeline: `watch → load → chunk → embed → upsert`, one-shot or as a daemon.
//!
//! [`Pipeline::run`] wires the pipeline: a bounded queue between each pair of stages, each stage's
//! workers (the stages themselves, with their [`ctxd_stages::stage`] impls, live in
//! `ctxd-stages`), the source task (`source`) and, for a daemon, the maintenance loop:
//!
//! 1. the source starts the filesystem watcher first (so nothing changes unseen), then scans
//!    the root and, once the scan completed, emits removals for indexed files that are gone
//!    (start-up reconciliation, `reconcile`: an interrupted scan never removes anything);
//! 2. in daemon mode it then follows debounced events until the kill switch flips (an `s3://`
//!    root is listed instead, every `source.poll_interval_secs`);
//! 3. when the source stops, the pipeline drains in order and the sink commits its last batch.
//!
//! [`Running`] is the handle of a started pipeline (readiness, join); [`Summary`] what a run did.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ctxd_index::maintenance::MaintenanceOptions;
use ctxd_index::store::Index;
use ctxd_stages::chunk::stage::ChunkStage;
use ctxd_stages::chunk::{ChunkConfig, ChunkedFile, Chunker, PartBudget};
use ctxd_stages::counters::Counters;
use ctxd_stages::embed::stage::EmbedStage;
use ctxd_stages::embed::{Embed, EmbedCounts, EmbeddedFile};
use ctxd_stages::load::stage::LoadStage;
use ctxd_stages::load::{LoadConfig, LoadedFile};
use ctxd_stages::upsert::stage::{FoldEvery, Folds, UpsertSink};
use ctxd_stages::upsert::Upsert;
use ctxd_stages::{error::StageError, FileWork, SourceFile};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::emit::Emitter;
use crate::error::PipelineError;
use crate::freshness::Freshness;
use crate::metrics as m;
use crate::pipeline::Pipeline;
use crate::source::{Origin, ScanGate, Source};
use crate::stage_tasks::{queue, spawn_batch_stage, spawn_sink, spawn_stage, BatchLimits, Output, Tracker};

/// What a run did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Summary {
    pub files_seen: u64,
    pub files_indexed: u64,
    pub files_removed: u64,
    pub files_unchanged: u64,
    pub files_skipped: u64,
    pub files_failed: u64,
    pub chunks_written: u64,
    pub commits: u64,
    pub seconds: f64,
    pub index_rows: usize,
    pub index_version: u64,
    /// Chunks embedded by the model in this run.
    pub chunks_embedded: u64,
    /// Chunks whose vector was taken from the index (same content, same model).
    pub chunks_reused: u64,
}

/// Opens every source of `cfg` as a pipeline would (a folder must exist, a git `git` must be a
/// repository, a bucket prefix must parse, …) and closes them again: what a daemon checks before
/// it stops its pipeline to reload its sources.
pub fn check_sources(cfg: &ctxd_config::Config) -> Result<(), PipelineError> {
    for src in cfg.sources() {
        Origin::open_all(cfg, &src)?;
    }
    Ok(())
}

impl Pipeline {
    /// Starts the pipeline. With `follow` false it scans once and finishes when everything is
    /// committed; with `follow` true it keeps following filesystem events until `shutdown`
    /// becomes true. Either way, `shutdown` stops the source and drains the pipeline.
    pub fn run(&self, follow: bool, shutdown: watch::Receiver<bool>) -> Result<Running, PipelineError> {
        let origins = self.open_origins()?;
        self.index.name_sources(self.cfg.has_named_sources());
        // A daemon's tasks (everything spawned below, and what they spawn) on the writer's threads.
        let _on_writer_threads = follow.then(|| crate::writer_threads::enter(self.cfg.pipeline.writer_nice)).flatten();
        let tracker = Tracker::default();
        let counters = Arc::new(Counters::default());
        let freshness = Arc::new(Freshness::default());
        let stages = self.spawn_stages(&tracker, &counters, &freshness, follow);
        let emitter = Emitter { out: stages.source_out, tracker: tracker.clone(), counters: counters.clone() };
        let source = self.spawn_sources(origins, emitter, &shutdown, &freshness, follow);
        let adapter = self.spawn_adapt_job(follow, &tracker, &shutdown);
        // One pass: at the end of a one-shot run that left many fragments (`ctxd index`; a
        // shard commits nothing: its commit does the upkeep).
        let maintain_at_end = (!follow && self.shard.is_none() && self.cfg.index.maintenance_interval_secs > 0)
            .then(|| self.cfg.index.maintenance());
        let maintenance = (follow && self.cfg.index.maintenance_interval_secs > 0).then(|| {
            let every = Duration::from_secs(self.cfg.index.maintenance_interval_secs);
            let when = MaintainWhen {
                every,
                after_commits: COMPACT_AFTER_COMMITS,
                commits: counters.clone(),
                scanned: tracker.clone(),
            };
            // Beside the upsert stage's commits: files a commit has written but not yet published
            // are referenced by no version, so the scheduled passes keep unreferenced files
            // (Lance deletes them once they are 7 days old).
            let opts = MaintenanceOptions { single_writer: false, ..self.cfg.index.maintenance() };
            tokio::spawn(maintain_every(self.index.clone(), opts, when, shutdown))
        });
        metrics::gauge!(m::PIPELINE_READY).set(0.0);
        Ok(Running {
            tracker,
            source,
            stages: stages.handles,
            counters,
            started: Instant::now(),
            index: self.index.clone(),
            maintenance,
            adapter,
            maintain_at_end,
            embed_counts: stages.embed_counts,
        })
    }

    /// A daemon's background query-adapter job (`crate::adapt_job`), when it has a model, records
    /// history and `[index] adapt` is on.
    fn spawn_adapt_job(
        &self,
        follow: bool,
        tracker: &Tracker,
        shutdown: &watch::Receiver<bool>,
    ) -> Option<JoinHandle<()>> {
        let ix = &self.cfg.index;
        let embed = self.service.clone().filter(|_| follow && ix.adapt && ix.history_commits > 0)?;
        let job = crate::adapt_job::AdaptJob {
            share: ix.adapt_cpu_percent as f64 / 100.0,
            every: Duration::from_secs(ix.adapt_interval_secs),
        };
        let run = crate::adapt_job::run(self.index.clone(), embed, job, tracker.clone(), shutdown.clone());
        Some(tokio::spawn(run))
    }

    /// Every source of the configuration, opened (a git source with a work tree is two).
    fn open_origins(&self) -> Result<Vec<Origin>, PipelineError> {
        let sources = self.cfg.sources();
        let opened = sources.iter().map(|src| Origin::open_all(&self.cfg, src)).collect::<Result<Vec<_>, _>>()?;
        let origins = opened.into_iter().flatten();
        match &self.shard {
            None => Ok(origins.collect()),
            Some((_, shard)) => origins.map(|o| o.into_share(*shard)).collect(),
        }
    }

    /// The queues between stages and its four stages (load, chunk, embed, upsert) spawned; the source's
    /// end of the first queue is returned for the sources to feed. A one-shot run (not `follow`)
    /// that answers no queries merges each fold's fragments before folding them.
    fn spawn_stages(
        &self,
        tracker: &Tracker,
        counters: &Arc<Counters>,
        freshness: &Arc<Freshness>,
        follow: bool,
    ) -> Stages {
        let p = &self.cfg.pipeline;
        let (src_out, load_in) = queue::<FileWork<SourceFile>>("watch", "load", p.load.capacity);
        let (load_out, chunk_in) = queue::<FileWork<LoadedFile>>("load", "chunk", p.chunk.capacity);
        let (chunk_out, embed_in) = queue::<FileWork<ChunkedFile>>("chunk", "embed", p.embed.capacity);
        let (embed_out, upsert_in) = queue::<FileWork<EmbeddedFile>>("embed", "upsert", p.upsert.capacity);

        let mut handles = Vec::new();
        let load_cfg = LoadConfig {
            max_file_bytes: self.cfg.source.max_file_bytes,
            stream_threshold_bytes: self.cfg.source.stream_threshold_bytes,
        };
        let load_stage = LoadStage::new(self.state.clone(), load_cfg, counters.clone());
        handles.extend(spawn_stage(Arc::new(load_stage), p.load.workers, load_in, load_out, tracker.clone()));
        let (chunk_cfg, why) = chunk_budget(&self.cfg.chunk, self.counter.window());
        if let Some(why) = why {
            tracing::info!(max_tokens = chunk_cfg.max_tokens, "chunk budget: {why}");
        }
        let chunker = Chunker::with_tokenizer(self.counter.clone(), chunk_cfg);
        // Parts of streamed files read but not committed: 4 × stream_block_bytes of text.
        let budget = PartBudget::new(4);
        // Each extra part of a streamed file is one more item in flight until the sink commits it.
        let (parts, part_tracker) = (chunk_out.clone(), tracker.clone());
        let send_part = Arc::new(move |part: ChunkedFile| {
            part_tracker.add(1);
            let sent = parts.send_blocking(FileWork::Update(part)).is_ok();
            if !sent {
                part_tracker.done(1);
            }
            sent
        });
        let block_bytes = self.cfg.source.stream_block_bytes as usize;
        let chunk_stage = ChunkStage::new(chunker, budget.clone(), send_part, block_bytes);
        handles.extend(spawn_stage(Arc::new(chunk_stage), p.chunk.workers, chunk_in, chunk_out, tracker.clone()));
        let embedder = Embed::new(self.service.clone(), self.index.clone()).with_vectors(self.cfg.source.embed);
        let embed_counts = embedder.counts();
        let embed = EmbedStage::new(embedder, counters.clone());
        let embed_limits = BatchLimits {
            max_weight: p.embed_batch_tokens,
            max_items: 256,
            max_wait: Duration::from_millis(p.embed_batch_wait_ms),
        };
        handles.extend(spawn_batch_stage(
            Arc::new(embed),
            p.embed.workers,
            embed_limits,
            embed_in,
            embed_out,
            tracker.clone(),
        ));
        let fold = match self.shard {
            // A shard commits nothing to fold.
            Some(_) => FoldEvery { commits: u64::MAX, rows: u64::MAX },
            None => {
                FoldEvery { commits: self.cfg.index.optimize_every_commits, rows: self.cfg.index.optimize_every_rows }
            }
        };
        let committed = freshness.clone();
        let upsert = Upsert::new(self.index.clone(), self.state.clone());
        let sink = UpsertSink::new(
            match &self.shard {
                Some((build, _)) => upsert.staging(build.clone()),
                None => upsert,
            },
            self.index.clone(),
            budget,
            counters.clone(),
            fold,
            Arc::new(move |paths: &[String]| committed.committed(paths)),
        );
        let sink = sink.with_folds(match self.service.clone() {
            Some(service) => Folds::EagerWhileQueried(Arc::new(move || service.queries_active())),
            None if !follow => Folds::CompactFirst,
            None => Folds::Batched,
        });
        let sink_limits = BatchLimits { max_weight: p.commit_max_rows, max_items: 4096, max_wait: p.commit_interval() };
        let triggers = self.triggers.clone();
        handles.push(spawn_sink(Arc::new(sink), sink_limits, upsert_in, tracker.clone(), move || {
            triggers.commit_failed()
        }));
        Stages { handles, source_out: src_out, embed_counts }
    }

    /// The sources' task: the files of sources no longer configured (or of the unnamed source a
    /// configuration of named ones replaced) removed first, then every origin run (scanned, and
    /// followed with `follow`) into `emitter`.
    fn spawn_sources(
        &self,
        origins: Vec<Origin>,
        emitter: Emitter,
        shutdown: &watch::Receiver<bool>,
        freshness: &Arc<Freshness>,
        follow: bool,
    ) -> JoinHandle<Result<(), StageError>> {
        let gate = ScanGate::new(origins.len());
        let db = self.cfg.index.db.to_string_lossy().into_owned();
        // A shard records no history: the writer does on its first start.
        let history = crate::history_recorder::Recorder::new(db.clone(), self.cfg.index.history_commits)
            .filter(|_| self.shard.is_none());
        let runs: Vec<_> = origins
            .into_iter()
            .map(|origin| {
                let source = Source {
                    state: self.state.clone(),
                    emitter: emitter.clone(),
                    shutdown: shutdown.clone(),
                    debounce: Duration::from_millis(self.cfg.source.debounce_ms),
                    freshness: freshness.clone(),
                    gate: gate.clone(),
                    history: history.clone(),
                    db: db.clone(),
                    triggers: self.triggers.clone(),
                    overlays: self.index.reads().overlay_cache(),
                };
                source.run(origin, follow)
            })
            .collect();
        let dropped = self.cfg.has_named_sources().then(|| {
            // `name/…` of a folder or bucket, `name@ref/…` of a git source's refs.
            let names = ctxd_index::scope::SourceScope::new(self.cfg.source_names());
            let gone: Vec<String> = self.state.paths().into_iter().filter(|p| !names.allows(p)).collect();
            gone
        });
        tokio::spawn(async move {
            if let Some(gone) = dropped.filter(|g| !g.is_empty()) {
                tracing::info!(files = gone.len(), "dropping the files of sources no longer configured");
                for p in gone {
                    if !emitter.emit(FileWork::Remove(p)).await {
                        return Ok(());
                    }
                }
            }
            drop(emitter);
            let results = futures::future::join_all(runs).await;
            results.into_iter().collect::<Result<Vec<()>, StageError>>().map(|_| ())
        })
    }
}

/// What [`Pipeline::spawn_stages`] started: the stage tasks, the queue the sources feed, and the
/// embedder's reuse counts.
struct Stages {
    handles: Vec<JoinHandle<()>>,
    source_out: Output<FileWork<SourceFile>>,
    embed_counts: Arc<EmbedCounts>,
}

/// Commits that bring the next maintenance pass forward (at most one pass per
/// [`MIN_MAINTENANCE_GAP`]): each commit adds a data fragment (and deletion files), and every
/// query reads every fragment. Measured on CoSQA (6.5k chunks, release build, one client): a
/// routed search took 30 ms over the 86 fragments a few ingests had left and 13 ms after
/// compaction; 50 clients answered 99 QPS after it.
pub const COMPACT_AFTER_COMMITS: u64 = 32;
/// During a long burst of commits (an initial scan) the pass waits for a quiet poll, unless
/// this many times [`COMPACT_AFTER_COMMITS`] accumulated (each pass rewrites the small
/// fragments, so passing after every 32 commits of a big scan would rewrite it over and over).
const BURST_FACTOR: u64 = 8;
/// The shortest time between two maintenance passes brought forward by commits.
const MIN_MAINTENANCE_GAP: Duration = Duration::from_secs(30);

/// When the daemon's maintenance runs: every `every`, and sooner once `after_commits` commits
/// were made since the last pass and a poll saw no new one (the fragments the index had at
/// start count as commits), or after [`BURST_FACTOR`] times as many; and once as soon as the
/// first scan is committed into a table without a vector index that has rows enough for one, so
/// that the first questions after it are answered through one (not by reading every vector
/// until the interval).
struct MaintainWhen {
    every: Duration,
    after_commits: u64,
    commits: Arc<Counters>,
    /// Says when the first scan is committed.
    scanned: Tracker,
}

/// Why a maintenance pass runs (said in the log).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Due {
    /// `every` passed since the last pass.
    Interval,
    /// Many commits since the last pass (see [`MaintainWhen`]).
    ManyCommits,
    /// The first scan is committed and the table has no vector index yet.
    FirstScan,
}

impl Due {
    fn as_str(self) -> &'static str {
        match self {
            Self::Interval => "interval",
            Self::ManyCommits => "after many commits",
            Self::FirstScan => "first scan committed",
        }
    }
}

impl MaintainWhen {
    fn commits(&self) -> u64 {
        self.commits.commits.load(Ordering::Relaxed)
    }

    /// Whether a pass is due `elapsed` after the last one, `since` commits (and inherited
    /// fragments) later; `quiet`: no commit since the previous poll; `first_scan`: the first
    /// scan was just committed into a table without a vector index (due at once).
    fn due(&self, elapsed: Duration, since: u64, quiet: bool, first_scan: bool) -> Option<Due> {
        let many = elapsed >= MIN_MAINTENANCE_GAP
            && ((quiet && since >= self.after_commits) || since >= self.after_commits * BURST_FACTOR);
        match (first_scan, many, elapsed >= self.every) {
            (true, _, _) => Some(Due::FirstScan),
            (false, true, _) => Some(Due::ManyCommits),
            (false, false, true) => Some(Due::Interval),
            (false, false, false) => None,
        }
    }
}

/// The daemon's maintenance loop: a pass every `when.every`, or earlier after many commits or
/// the first scan, until shutdown. A failed pass is logged and retried at the next tick
/// (commits never wait for it).
async fn maintain_every(
    index: Arc<Index>,
    opts: ctxd_index::maintenance::MaintenanceOptions,
    when: MaintainWhen,
    mut shutdown: watch::Receiver<bool>,
) {
    let poll = when.every.min(Duration::from_secs(5));
    let (mut last, mut commits_then) = (tokio::time::Instant::now(), when.commits());
    // Fragments left by earlier runs count like commits of this one.
    let mut inherited = index.maintenance().layout().await.map_or(0, |(_, fragments)| fragments as u64);
    let mut commits_polled = commits_then;
    let mut scan_seen = false;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(poll) => {}
            _ = when.scanned.wait_ready(), if !scan_seen => {}
            _ = shutdown.changed() => return,
        }
        if *shutdown.borrow() {
            return;
        }
        let first_scan = !scan_seen && when.scanned.is_ready();
        scan_seen |= first_scan;
        let first_scan = first_scan
            && index.maintenance().vector_index_due(opts.vector_index_min_rows).await.is_ok_and(|d| d.is_some());
        let (elapsed, commits) = (last.elapsed(), when.commits());
        // Quiet: no commit since the previous poll (a burst of ingestion is over).
        let quiet = commits == commits_polled;
        commits_polled = commits;
        let Some(due) = when.due(elapsed, commits.saturating_sub(commits_then) + inherited, quiet, first_scan) else {
            continue;
        };
        (last, commits_then, inherited) = (tokio::time::Instant::now(), commits, 0);
        maintain_once(&index, &opts, due.as_str()).await;
    }
}

/// One maintenance pass, logged with `why` it ran; a failure is logged, not returned (the
/// index is complete without it; the next pass, or `ctxd compact`, retries). True if it ran
/// to the end (new rows are then folded into the indexes).
async fn maintain_once(index: &Index, opts: &ctxd_index::maintenance::MaintenanceOptions, why: &str) -> bool {
    match index.maintenance().maintain(opts).await {
        Ok(r) => {
            tracing::info!(
                versions = format!("{} -> {}", r.versions_before, r.versions_after),
                fragments = format!("{} -> {}", r.fragments_before, r.fragments_after),
                vector_index_built = r.vector_index_built,
                fts_segments_merged = r.fts_segments_merged,
                why,
                "index maintenance"
            );
            true
        }
        Err(e) => {
            tracing::warn!(why, "index maintenance failed (the next pass or `ctxd compact` retries): {e}");
            false
        }
    }
}

/// A running pipeline.
pub struct Running {
    tracker: Tracker,
    source: JoinHandle<Result<(), StageError>>,
    stages: Vec<JoinHandle<()>>,
    counters: Arc<Counters>,
    started: Instant,
    index: Arc<Index>,
    maintenance: Option<JoinHandle<()>>,
    /// A daemon's background query-adapter job (it stops at the shutdown signal).
    adapter: Option<JoinHandle<()>>,
    /// A one-shot run's maintenance pass at its end, if it made many commits.
    maintain_at_end: Option<ctxd_index::maintenance::MaintenanceOptions>,
    embed_counts: Arc<EmbedCounts>,
}

impl Running {
    /// True once the initial scan is committed.
    pub fn is_ready(&self) -> bool {
        self.tracker.is_ready()
    }

    /// A live view of the run's counts: files done of those seen, chunks, rates, time left.
    pub fn progress(&self) -> crate::progress::ProgressHandle {
        crate::progress::ProgressHandle::new(self.counters.clone(), self.tracker.clone(), self.started)
    }

    /// A handle to poll readiness from elsewhere (the HTTP server).
    pub fn tracker(&self) -> Tracker {
        self.tracker.clone()
    }

    /// Waits until the initial scan is committed, then flips the ready gauge.
    pub async fn wait_ready(&self) {
        self.tracker.wait_ready().await;
        metrics::gauge!(m::PIPELINE_READY).set(1.0);
    }

    /// Waits for the source to stop and the pipeline to drain; runs a one-shot run's maintenance
    /// pass, folds new rows into the full-text index and returns the summary.
    pub async fn join(self) -> Result<Summary, PipelineError> {
        let source_result = self.source.await.expect("source task panicked");
        for h in self.stages {
            h.await.expect("stage task panicked");
        }
        if let Some(m) = self.maintenance {
            // It stops at the shutdown signal (after its current pass, if any).
            let _ = m.await;
        }
        if let Some(a) = self.adapter {
            // It stops at the shutdown signal (between the steps of a fit).
            let _ = a.await;
        }
        let commits = self.counters.commits.load(Ordering::Relaxed);
        // The pass compacts first, then folds what the indexes lack (nothing to remap); without
        // it (or when it failed) the new rows are folded here.
        let maintained = match self.maintain_at_end.filter(|_| commits >= COMPACT_AFTER_COMMITS) {
            Some(opts) => maintain_once(&self.index, &opts, "end of a run of many commits").await,
            None => false,
        };
        if !maintained {
            if let Err(e) = self.index.maintenance().optimize_indices().await {
                tracing::warn!("optimizing indices: {e}");
            }
        }
        source_result?;
        let stats = self.index.reads().stats().await?;
        let c = &self.counters;
        Ok(Summary {
            files_seen: c.seen.load(Ordering::Relaxed),
            files_indexed: c.indexed.load(Ordering::Relaxed),
            files_removed: c.removed.load(Ordering::Relaxed),
            files_unchanged: c.unchanged.load(Ordering::Relaxed),
            files_skipped: c.skipped.load(Ordering::Relaxed),
            files_failed: c.failed.load(Ordering::Relaxed),
            chunks_written: c.chunks.load(Ordering::Relaxed),
            commits: c.commits.load(Ordering::Relaxed),
            seconds: self.started.elapsed().as_secs_f64(),
            index_rows: stats.rows,
            index_version: stats.version,
            chunks_embedded: self.embed_counts.computed.load(Ordering::Relaxed),
            chunks_reused: self.embed_counts.reused.load(Ordering::Relaxed),
        })
    }
}

/// The chunk budget `[chunk]` asks for, fitted to a model's token window
/// ([`ChunkConfig::fitted_to`]), and why it changed where it did. The daemon and `ctxd chunk`
/// both take theirs from here, so what `ctxd chunk` prints is what an index holds.
pub fn chunk_budget(chunk: &ctxd_config::ChunkSizes, window: usize) -> (ChunkConfig, Option<String>) {
    ChunkConfig {
        max_tokens: chunk.max_tokens,
        overlap_tokens: chunk.overlap_tokens,
        min_tokens: chunk.min_tokens,
        merge_tokens: chunk.merge_tokens,
    }
    .fitted_to(window)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maintenance_comes_early_after_many_commits_once_they_stop() {
        let when = MaintainWhen {
            every: Duration::from_secs(600),
            after_commits: 32,
            commits: Arc::default(),
            scanned: Tracker::default(),
        };
        let s = Duration::from_secs;
        // The interval alone.
        assert_eq!(when.due(s(600), 0, true, false), Some(Due::Interval));
        assert_eq!(when.due(s(599), 31, true, false), None);
        // 32 commits (or inherited fragments) and a quiet poll, not sooner than 30 s after the last pass.
        assert_eq!(when.due(s(31), 32, true, false), Some(Due::ManyCommits));
        assert_eq!(when.due(s(29), 200, true, false), None);
        // A burst still committing waits for quiet, up to 8 × 32 commits.
        assert_eq!(when.due(s(120), 200, false, false), None);
        assert_eq!(when.due(s(120), 256, false, false), Some(Due::ManyCommits));
        // The first scan committed without a vector index: at once, whatever else.
        assert_eq!(when.due(s(1), 3, false, true), Some(Due::FirstScan));
    }
}
