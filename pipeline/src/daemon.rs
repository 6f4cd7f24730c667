//! The ctxd graph: `watch → load → chunk → embed → upsert`, one-shot or as a daemon.
//!
//! [`Engine::open`] resolves and loads the model (on its own thread), opens or creates the
//! index, and reads the incremental state from it. [`Engine::run`] starts the graph:
//!
//! 1. the source starts the filesystem watcher first (so nothing changes unseen), then scans
//!    the root and, once the scan completed, emits removals for indexed files that are gone
//!    (start-up reconciliation; an interrupted scan never removes anything);
//! 2. in daemon mode it then follows debounced events until the kill switch flips;
//!    An `s3://` root is listed instead ([`ctxd_stages::object`]): the first listing reports
//!    every object (changed ones downloaded into the local mirror) and reconciles removals the
//!    same way; later listings, every `source.poll_interval_secs`, report only the diff.
//! 3. when the source stops, the graph drains in order and the sink commits its last batch.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ctxd_index::Index;
use ctxd_models::{EmbedService, EmbedServiceConfig, TokenCounter};
use ctxd_stages::chunk::{ChunkConfig, ChunkedFile, Chunker, PartBudget};
use ctxd_stages::embed::{Embed, EmbeddedFile};
use ctxd_stages::load::{load, LoadConfig, LoadOutcome, LoadedFile};
use ctxd_stages::object::{ObjectChange, ObjectSource, ObjectUri};
use ctxd_stages::upsert::Upsert;
use ctxd_stages::watch::{EventWatcher, Scanner, WatchEvent};
use ctxd_stages::{FileState, FileWork, SourceFile, StageError};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::config::Config;
use crate::graph::{
    edge, spawn_batch_stage, spawn_sink, spawn_stage, BatchLimits, BatchStage, Output, Sink, Stage, Tracker,
};
use crate::metrics as m;
use crate::PipelineError;

/// Counts behind the one-shot summary.
#[derive(Default)]
struct Counters {
    seen: AtomicU64,
    indexed: AtomicU64,
    removed: AtomicU64,
    unchanged: AtomicU64,
    skipped: AtomicU64,
    failed: AtomicU64,
    chunks: AtomicU64,
    commits: AtomicU64,
}

/// When each watched change happened, from the source's event to the sink's commit.
#[derive(Default)]
struct Freshness(std::sync::Mutex<std::collections::HashMap<String, std::time::SystemTime>>);

impl Freshness {
    fn changed(&self, rel: &str, at: std::time::SystemTime) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).insert(rel.to_string(), at);
    }

    /// Records the freshness of the committed `paths` that came from watch events.
    fn committed(&self, paths: &[String]) {
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let now = std::time::SystemTime::now();
        for p in paths {
            if let Some(at) = map.remove(p) {
                let lag = now.duration_since(at).unwrap_or_default().as_secs_f64();
                metrics::histogram!(m::PIPELINE_FRESHNESS_SECONDS).record(lag);
                metrics::gauge!(m::PIPELINE_FRESHNESS_LAG_SECONDS).set(lag);
            }
        }
    }
}

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

/// Model, index and state, ready to run the graph or answer queries.
pub struct Engine {
    cfg: Config,
    index: Arc<Index>,
    /// `None` for a full-text-only source (`source.embed = false`): the weights are not loaded.
    service: Option<EmbedService>,
    counter: TokenCounter,
    state: FileState,
}

impl Engine {
    /// Loads the model and opens (or creates) the index named by `cfg`.
    pub async fn open(cfg: Config) -> Result<Self, PipelineError> {
        // Fail on a bad root before loading the model or creating the index directory.
        if !cfg.source.is_object_store() {
            check_root(&cfg.source.root)?;
        }
        let service_cfg = EmbedServiceConfig {
            max_batch_tokens: cfg.model.max_batch_tokens,
            max_batch_texts: cfg.model.max_batch_texts,
            queue: 4,
        };
        let db = cfg.index.db.to_string_lossy().into_owned();
        if !db.contains("://") {
            std::fs::create_dir_all(&cfg.index.db).map_err(|e| PipelineError::Config {
                path: cfg.index.db.clone(),
                message: format!("creating db dir: {e}"),
            })?;
        }
        let mut cfg = cfg;
        // After `ctxd reembed` switched the index to another model, that model is the one to load.
        let active = ctxd_index::active::current(&db).await?;
        if let Some(active) = &active {
            let spec = &active.model_spec;
            if !spec.is_empty() && cfg.model.name != *spec && cfg.model.name != active.model_id {
                tracing::warn!(
                    configured = %cfg.model.name, active = %active.model_id,
                    "the index was switched to another model by `ctxd reembed`; using it (update [model] name)"
                );
                cfg.model.name = active.model_spec.clone();
            }
        }
        let name = cfg.model.name.clone();
        let runtime = cfg.model.runtime();
        let embed = cfg.source.embed;
        let (service, counter, model_id, dim) = tokio::task::spawn_blocking(move || {
            if embed {
                let (service, counter) = ctxd_models::start(&name, service_cfg, &runtime)?;
                let (id, dim) = (service.model_id().to_string(), service.dim());
                Ok::<_, ctxd_models::ModelError>((Some(service), counter, id, dim))
            } else {
                // Full-text only: the tokenizer counts chunk tokens; no weights, no model thread.
                let (counter, id, dim) = ctxd_models::tokenizer_only(&name)?;
                Ok((None, counter, id, dim))
            }
        })
        .await
        .expect("model loading thread panicked")?;
        match &service {
            Some(s) => tracing::info!(model = %model_id, backend = %s.backend(), "embedding model ready"),
            None => tracing::info!(model = %model_id, "full-text only: tokenizer loaded, embedding model not loaded"),
        }
        let table = active.map_or_else(|| ctxd_index::CHUNKS_TABLE.to_string(), |a| a.table_name);
        let mut index = Index::open_or_create_table(&db, &table, &model_id, dim).await?;
        if !index.embed_keyed() {
            // Written by an older ctxd: re-embedded once into a keyed table (logged), then used.
            let model = crate::reembed::JobModel { id: model_id.clone(), dim, service: service.clone() };
            // No model spec recorded: whatever built the index stays configured (as for seq 0).
            crate::reembed::migrate(&db, model, "").await?;
            index = Index::open_or_create(&db, &model_id, dim).await?;
        }
        let index = Arc::new(index);
        // Publishes the row and version gauges before the first commit (the sink refreshes them after each one).
        index.stats().await?;
        index.layout().await?;
        let state = FileState::new(index.file_hashes().await?);
        Ok(Self { cfg, index, service, counter, state })
    }

    /// The index.
    pub fn index(&self) -> Arc<Index> {
        self.index.clone()
    }

    /// The embedding service (queries use it too); `None` for a full-text-only source.
    pub fn embedder(&self) -> Option<EmbedService> {
        self.service.clone()
    }

    /// The tokenizer's counter (context budgets are counted with it).
    pub fn token_counter(&self) -> TokenCounter {
        self.counter.clone()
    }

    /// The configuration in force.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// Starts the graph. With `follow` false it scans once and finishes when everything is
    /// committed; with `follow` true it keeps following filesystem events until `shutdown`
    /// becomes true. Either way, `shutdown` stops the source and drains the graph.
    pub fn run(&self, follow: bool, shutdown: watch::Receiver<bool>) -> Result<Running, PipelineError> {
        let origin = self.origin()?;
        let tracker = Tracker::default();
        let counters = Arc::new(Counters::default());
        let freshness = Arc::new(Freshness::default());
        let p = &self.cfg.pipeline;

        let (src_out, load_in) = edge::<FileWork<SourceFile>>("watch", "load", p.load.capacity);
        let (load_out, chunk_in) = edge::<FileWork<LoadedFile>>("load", "chunk", p.chunk.capacity);
        let (chunk_out, embed_in) = edge::<FileWork<ChunkedFile>>("chunk", "embed", p.embed.capacity);
        let (embed_out, upsert_in) = edge::<FileWork<EmbeddedFile>>("embed", "upsert", p.upsert.capacity);

        let mut handles = Vec::new();
        let load_stage = LoadStage {
            state: self.state.clone(),
            cfg: LoadConfig {
                max_file_bytes: self.cfg.source.max_file_bytes,
                stream_threshold_bytes: self.cfg.source.stream_threshold_bytes,
            },
            counters: counters.clone(),
        };
        handles.extend(spawn_stage(Arc::new(load_stage), p.load.workers, load_in, load_out, tracker.clone()));
        let chunker = Chunker::with_tokenizer(
            self.counter.clone(),
            ChunkConfig {
                max_tokens: self.cfg.chunk.max_tokens,
                overlap_tokens: self.cfg.chunk.overlap_tokens,
                min_tokens: self.cfg.chunk.min_tokens,
                merge_tokens: self.cfg.chunk.merge_tokens,
            },
        );
        // Parts of streamed files read but not committed: 4 × stream_block_bytes of text.
        let budget = PartBudget::new(4);
        let chunk_stage = ChunkStage {
            chunker,
            budget: budget.clone(),
            parts: chunk_out.clone(),
            tracker: tracker.clone(),
            block_bytes: self.cfg.source.stream_block_bytes as usize,
        };
        handles.extend(spawn_stage(Arc::new(chunk_stage), p.chunk.workers, chunk_in, chunk_out, tracker.clone()));
        let embedder = Embed::new(self.service.clone(), self.index.clone()).with_vectors(self.cfg.source.embed);
        let embed_counts = embedder.counts();
        let embed = EmbedStage { embed: embedder, counters: counters.clone() };
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
        let sink = UpsertSink {
            budget,
            upsert: Upsert::new(self.index.clone(), self.state.clone()),
            index: self.index.clone(),
            counters: counters.clone(),
            optimize_every: self.cfg.index.optimize_every_commits.max(1),
            optimize_every_rows: self.cfg.index.optimize_every_rows.max(1),
            unfolded: AtomicU64::new(0),
            freshness: freshness.clone(),
        };
        let sink_limits = BatchLimits { max_weight: p.commit_max_rows, max_items: 4096, max_wait: p.commit_interval() };
        handles.push(spawn_sink(Arc::new(sink), sink_limits, upsert_in, tracker.clone()));

        let source = Source {
            state: self.state.clone(),
            out: src_out,
            tracker: tracker.clone(),
            counters: counters.clone(),
            shutdown: shutdown.clone(),
            debounce: Duration::from_millis(self.cfg.source.debounce_ms),
            freshness: freshness.clone(),
        };
        let maintenance_stop = shutdown;
        let maintenance = (follow && self.cfg.index.maintenance_interval_secs > 0).then(|| {
            let every = Duration::from_secs(self.cfg.index.maintenance_interval_secs);
            tokio::spawn(maintain_every(self.index.clone(), self.cfg.index.maintenance(), every, maintenance_stop))
        });
        let source_handle = tokio::spawn(source.run(origin, follow));
        metrics::gauge!(m::PIPELINE_READY).set(0.0);
        Ok(Running {
            tracker,
            source: source_handle,
            stages: handles,
            counters,
            started: Instant::now(),
            index: self.index.clone(),
            maintenance,
            embed_counts,
        })
    }
}

impl Engine {
    /// Where files come from: a local directory (scan + events) or an `s3://` prefix (listing).
    fn origin(&self) -> Result<Origin, PipelineError> {
        let src = &self.cfg.source;
        let root = src.root.clone();
        if src.is_object_store() {
            let uri = root.to_string_lossy().into_owned();
            let mut objects = ObjectSource::open(&uri, src.mirror(), src.max_file_bytes)?;
            // An index inside the watched prefix must not index itself.
            let db = self.cfg.index.db.to_string_lossy().into_owned();
            if let (Some(u), Some(d)) = (ObjectUri::parse(&uri), ObjectUri::parse(&db)) {
                if u.bucket == d.bucket {
                    let inside = if u.prefix.is_empty() {
                        Some(d.prefix.as_str())
                    } else {
                        d.prefix.strip_prefix(u.prefix.as_str()).and_then(|r| r.strip_prefix('/'))
                    };
                    if let Some(rel) = inside {
                        objects = objects.exclude(rel);
                    }
                }
            }
            tracing::info!(source = %uri, mirror = %objects.mirror().display(), "watching object storage by listing");
            return Ok(Origin::Objects { source: objects, every: Duration::from_secs(src.poll_interval_secs.max(1)) });
        }
        check_root(&root)?;
        let mut excludes = vec![self.cfg.index.db.clone()];
        if let Ok(db) = self.cfg.index.db.canonicalize() {
            excludes.push(db);
        }
        Ok(Origin::Local(Scanner::new(root, excludes)))
    }
}

/// The daemon's maintenance loop: a pass every `every` until shutdown. A failed pass is
/// logged and retried at the next tick (commits never wait for it).
async fn maintain_every(
    index: Arc<Index>,
    opts: ctxd_index::MaintenanceOptions,
    every: Duration,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shutdown.changed() => return,
        }
        if *shutdown.borrow() {
            return;
        }
        match index.maintain(&opts).await {
            Ok(r) => tracing::info!(
                versions = format!("{} -> {}", r.versions_before, r.versions_after),
                fragments = format!("{} -> {}", r.fragments_before, r.fragments_after),
                vector_index_built = r.vector_index_built,
                fts_segments_merged = r.fts_segments_merged,
                "index maintenance"
            ),
            Err(e) => tracing::warn!("index maintenance failed: {e}"),
        }
    }
}

fn check_root(root: &std::path::Path) -> Result<(), PipelineError> {
    let meta = std::fs::metadata(root)
        .map_err(|e| PipelineError::Root { path: root.to_path_buf(), message: e.to_string() })?;
    if !meta.is_dir() {
        return Err(PipelineError::Root { path: root.to_path_buf(), message: "not a directory".into() });
    }
    Ok(())
}

/// A running graph.
pub struct Running {
    tracker: Tracker,
    source: JoinHandle<Result<(), StageError>>,
    stages: Vec<JoinHandle<()>>,
    counters: Arc<Counters>,
    started: Instant,
    index: Arc<Index>,
    maintenance: Option<JoinHandle<()>>,
    embed_counts: Arc<ctxd_stages::embed::EmbedCounts>,
}

impl Running {
    /// True once the initial scan is committed.
    pub fn is_ready(&self) -> bool {
        self.tracker.is_ready()
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

    /// Waits for the source to stop and the graph to drain; folds new rows into the
    /// full-text index and returns the summary.
    pub async fn join(self) -> Result<Summary, PipelineError> {
        let source_result = self.source.await.expect("source task panicked");
        for h in self.stages {
            h.await.expect("stage task panicked");
        }
        if let Some(m) = self.maintenance {
            // It stops at the shutdown signal (after its current pass, if any).
            let _ = m.await;
        }
        if let Err(e) = self.index.optimize_indices().await {
            tracing::warn!("optimizing indices: {e}");
        }
        source_result?;
        let stats = self.index.stats().await?;
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

/// Where the source's files come from.
enum Origin {
    /// A local directory: scanned, then followed through `notify` events.
    Local(Scanner),
    /// An `s3://` prefix: listed every `every`, changed objects mirrored locally.
    Objects { source: ObjectSource, every: Duration },
}

struct Source {
    state: FileState,
    out: Output<FileWork<SourceFile>>,
    tracker: Tracker,
    counters: Arc<Counters>,
    shutdown: watch::Receiver<bool>,
    debounce: Duration,
    freshness: Arc<Freshness>,
}

impl Source {
    async fn run(mut self, origin: Origin, follow: bool) -> Result<(), StageError> {
        let scanner = match origin {
            Origin::Local(scanner) => scanner,
            Origin::Objects { source, every } => return self.run_objects(source, every, follow).await,
        };
        // Start watching before scanning: a change during the scan is not lost.
        let mut watcher = if follow { Some(EventWatcher::start(&scanner, self.debounce)?) } else { None };
        self.scan_and_reconcile(&scanner).await;
        self.tracker.mark_scanned();
        let Some(watcher) = watcher.as_mut() else { return Ok(()) };
        loop {
            tokio::select! {
                _ = self.shutdown.changed() => {
                    if *self.shutdown.borrow() { break; }
                }
                ev = watcher.next() => match ev {
                    None => break,
                    Some(WatchEvent::Changed(file)) => {
                        let mtime = std::fs::metadata(&file.abs).and_then(|m| m.modified());
                        self.freshness.changed(&file.rel, mtime.unwrap_or_else(|_| std::time::SystemTime::now()));
                        if !self.emit(FileWork::Update(file)).await { break; }
                    }
                    Some(WatchEvent::Removed(rel)) => {
                        let prefix = format!("{rel}/");
                        let gone: Vec<String> =
                            self.state.paths().into_iter().filter(|p| *p == rel || p.starts_with(&prefix)).collect();
                        for p in gone {
                            self.freshness.changed(&p, std::time::SystemTime::now());
                            if !self.emit(FileWork::Remove(p)).await { return Ok(()); }
                        }
                    }
                    Some(WatchEvent::Rescan) => self.scan_and_reconcile(&scanner).await,
                }
            }
        }
        Ok(())
    }

    async fn emit(&self, work: FileWork<SourceFile>) -> bool {
        if matches!(work, FileWork::Update(_)) {
            self.counters.seen.fetch_add(1, Ordering::Relaxed);
        }
        self.tracker.add(1);
        if self.out.send(work).await.is_err() {
            self.tracker.done(1);
            return false;
        }
        true
    }

    /// Scans the root; when the scan completed, removes indexed files that are gone.
    /// Lists the bucket prefix: once at start (every object reported, indexed paths missing
    /// from the listing removed), then, when following, every `every` (only the diff).
    async fn run_objects(mut self, mut objects: ObjectSource, every: Duration, follow: bool) -> Result<(), StageError> {
        let mut first = true;
        loop {
            match objects.poll(first).await {
                Ok(changes) => {
                    let mut listed: HashSet<String> = HashSet::new();
                    for change in changes {
                        if *self.shutdown.borrow() {
                            objects.save_manifest();
                            return Ok(());
                        }
                        let work = match change {
                            ObjectChange::Unchanged(file) => {
                                listed.insert(file.rel.clone());
                                FileWork::Update(file)
                            }
                            ObjectChange::Fetch(l) => {
                                listed.insert(l.rel.clone());
                                match objects.fetch(&l).await {
                                    Ok(Some(file)) => {
                                        if !first {
                                            self.freshness.changed(&file.rel, l.modified);
                                        }
                                        FileWork::Update(file)
                                    }
                                    Ok(None) => continue,
                                    Err(e) => {
                                        self.counters.failed.fetch_add(1, Ordering::Relaxed);
                                        metrics::counter!(m::STAGE_ERRORS_TOTAL, "stage" => "watch", "error" => e.kind())
                                            .increment(1);
                                        tracing::warn!("{e}; will retry at the next listing");
                                        continue;
                                    }
                                }
                            }
                            ObjectChange::Removed(rel) => {
                                // The first pass reconciles every indexed path below instead.
                                if first || self.state.get(&rel).is_none() {
                                    continue;
                                }
                                self.freshness.changed(&rel, std::time::SystemTime::now());
                                FileWork::Remove(rel)
                            }
                        };
                        if !self.emit(work).await {
                            return Ok(());
                        }
                    }
                    objects.save_manifest();
                    if first {
                        let mut gone: Vec<String> =
                            self.state.paths().into_iter().filter(|p| !listed.contains(p)).collect();
                        gone.sort();
                        for p in gone {
                            if !self.emit(FileWork::Remove(p)).await {
                                return Ok(());
                            }
                        }
                        self.tracker.mark_scanned();
                        first = false;
                        if !follow {
                            return Ok(());
                        }
                    }
                }
                // Without a first listing a one-shot run has nothing to do: say why. A daemon
                // stays up (not ready) and retries.
                Err(e) if first && !follow => return Err(e),
                Err(e) => {
                    metrics::counter!(m::STAGE_ERRORS_TOTAL, "stage" => "watch", "error" => e.kind()).increment(1);
                    tracing::warn!("{e}; retrying in {}s", every.as_secs());
                }
            }
            tokio::select! {
                _ = self.shutdown.changed() => {
                    if *self.shutdown.borrow() { return Ok(()); }
                }
                _ = tokio::time::sleep(every) => {}
            }
        }
    }

    async fn scan_and_reconcile(&self, scanner: &Scanner) {
        let scanner = scanner.clone();
        let out = self.out.clone();
        let tracker = self.tracker.clone();
        let counters = self.counters.clone();
        let shutdown = self.shutdown.clone();
        let scan = tokio::task::spawn_blocking(move || {
            let mut seen: HashSet<String> = HashSet::new();
            let mut completed = true;
            scanner.scan(|file| {
                if *shutdown.borrow() {
                    completed = false;
                    return false;
                }
                seen.insert(file.rel.clone());
                counters.seen.fetch_add(1, Ordering::Relaxed);
                tracker.add(1);
                if out.send_blocking(FileWork::Update(file)).is_err() {
                    tracker.done(1);
                    completed = false;
                    return false;
                }
                true
            });
            (seen, completed)
        });
        let (seen, completed) = scan.await.expect("scan thread panicked");
        if !completed || *self.shutdown.borrow() {
            return;
        }
        let mut gone: Vec<String> = self.state.paths().into_iter().filter(|p| !seen.contains(p)).collect();
        gone.sort();
        for p in gone {
            self.tracker.add(1);
            if self.out.send(FileWork::Remove(p)).await.is_err() {
                self.tracker.done(1);
                return;
            }
        }
    }
}

struct LoadStage {
    state: FileState,
    cfg: LoadConfig,
    counters: Arc<Counters>,
}

impl Stage for LoadStage {
    type In = FileWork<SourceFile>;
    type Out = FileWork<LoadedFile>;
    const NAME: &'static str = "load";

    async fn process(&self, item: Self::In) -> Result<Option<Self::Out>, StageError> {
        match item {
            FileWork::Remove(rel) => Ok(self.state.get(&rel).map(|_| FileWork::Remove(rel))),
            FileWork::Update(file) => {
                let (state, cfg) = (self.state.clone(), self.cfg.clone());
                let rel = file.rel.clone();
                let res = tokio::task::spawn_blocking(move || load(&file, &state, &cfg).map(|o| (o, file.rel)))
                    .await
                    .map_err(|e| StageError::Panic { stage: "load", path: rel, message: e.to_string() })
                    .and_then(|r| r);
                match res {
                    Ok((LoadOutcome::Loaded(f), _)) => Ok(Some(FileWork::Update(f))),
                    Ok((LoadOutcome::Skipped(reason), _)) => {
                        let c = if reason == "unchanged" { &self.counters.unchanged } else { &self.counters.skipped };
                        c.fetch_add(1, Ordering::Relaxed);
                        Ok(None)
                    }
                    Ok((LoadOutcome::Gone(_), rel)) => {
                        self.counters.skipped.fetch_add(1, Ordering::Relaxed);
                        Ok(Some(FileWork::Remove(rel)))
                    }
                    Err(e) => {
                        self.counters.failed.fetch_add(1, Ordering::Relaxed);
                        Err(e)
                    }
                }
            }
        }
    }
}

struct ChunkStage {
    chunker: Chunker,
    budget: PartBudget,
    /// Where the parts of a streamed file go (all but the last, which is the stage's result).
    parts: Output<FileWork<ChunkedFile>>,
    tracker: Tracker,
    block_bytes: usize,
}

impl Stage for ChunkStage {
    type In = FileWork<LoadedFile>;
    type Out = FileWork<ChunkedFile>;
    const NAME: &'static str = "chunk";

    async fn process(&self, item: Self::In) -> Result<Option<Self::Out>, StageError> {
        match item {
            FileWork::Remove(rel) => Ok(Some(FileWork::Remove(rel))),
            FileWork::Update(file) => {
                let chunker = self.chunker.clone();
                let rel = file.rel.clone();
                if let Some(path) = file.stream.clone() {
                    // Each extra part is one more item in flight until the sink commits it.
                    let (parts, tracker, block) = (self.parts.clone(), self.tracker.clone(), self.block_bytes);
                    let budget = self.budget.clone();
                    let last = tokio::task::spawn_blocking(move || {
                        chunker.stream(&file, &path, block, &budget, |part| {
                            tracker.add(1);
                            let sent = parts.send_blocking(FileWork::Update(part)).is_ok();
                            if !sent {
                                tracker.done(1);
                            }
                            sent
                        })
                    })
                    .await
                    .map_err(|e| StageError::Panic { stage: "chunk", path: rel.clone(), message: e.to_string() })?
                    .map_err(|source| StageError::Read { path: rel.into(), source })?;
                    return Ok(Some(FileWork::Update(last)));
                }
                let chunked = tokio::task::spawn_blocking(move || chunker.chunk_file(&file))
                    .await
                    .map_err(|e| StageError::Panic { stage: "chunk", path: rel, message: e.to_string() })?;
                Ok(Some(FileWork::Update(chunked)))
            }
        }
    }
}

struct EmbedStage {
    embed: Embed,
    counters: Arc<Counters>,
}

impl BatchStage for EmbedStage {
    type In = FileWork<ChunkedFile>;
    type Out = FileWork<EmbeddedFile>;
    const NAME: &'static str = "embed";

    fn weight(&self, item: &Self::In) -> usize {
        match item {
            FileWork::Update(f) => Embed::weight(f),
            FileWork::Remove(_) => 1,
        }
    }

    async fn process_batch(&self, items: Vec<Self::In>) -> Vec<Result<Option<Self::Out>, StageError>> {
        let mut files = Vec::new();
        let mut slots = Vec::with_capacity(items.len());
        for item in items {
            match item {
                FileWork::Update(f) => {
                    slots.push(None);
                    files.push(f);
                }
                FileWork::Remove(rel) => slots.push(Some(rel)),
            }
        }
        let mut embedded = self.embed.embed_files(files).await.into_iter();
        slots
            .into_iter()
            .map(|slot| match slot {
                Some(rel) => Ok(Some(FileWork::Remove(rel))),
                None => match embedded.next().expect("one result per file") {
                    Ok(f) => Ok(Some(FileWork::Update(f))),
                    Err(e) => {
                        self.counters.failed.fetch_add(1, Ordering::Relaxed);
                        Err(e)
                    }
                },
            })
            .collect()
    }
}

struct UpsertSink {
    budget: PartBudget,
    upsert: Upsert,
    index: Arc<Index>,
    counters: Arc<Counters>,
    optimize_every: u64,
    optimize_every_rows: u64,
    /// Rows inserted since the last fold into the full-text index.
    unfolded: AtomicU64,
    freshness: Arc<Freshness>,
}

impl Sink for UpsertSink {
    type In = FileWork<EmbeddedFile>;
    const NAME: &'static str = "upsert";

    fn weight(&self, item: &Self::In) -> usize {
        match item {
            FileWork::Update(f) => f.rows.len().max(1),
            FileWork::Remove(_) => 1,
        }
    }

    async fn write(&self, items: Vec<Self::In>) -> Result<(), StageError> {
        // A streamed file counts once, with its last part.
        let updates =
            items.iter().filter(|i| matches!(i, FileWork::Update(f) if f.part.as_ref().is_none_or(|p| p.last))).count()
                as u64;
        let removes = items.iter().filter(|i| matches!(i, FileWork::Remove(_))).count() as u64;
        let parts = items.iter().filter(|i| matches!(i, FileWork::Update(f) if f.part.is_some())).count();
        // Committed or failed, these parts no longer hold memory: let the reader go on.
        struct Release<'a>(&'a PartBudget, usize);
        impl Drop for Release<'_> {
            fn drop(&mut self) {
                self.0.release(self.1);
            }
        }
        let _release = Release(&self.budget, parts);
        let n = items.len() as u64;
        let paths: Vec<String> = items
            .iter()
            .filter(|i| !matches!(i, FileWork::Update(f) if f.part.as_ref().is_some_and(|p| !p.last)))
            .map(|i| i.rel_path(|f| &f.rel).to_string())
            .collect();
        match self.upsert.commit(items).await {
            Ok(stats) => {
                self.freshness.committed(&paths);
                let c = &self.counters;
                c.indexed.fetch_add(updates, Ordering::Relaxed);
                c.removed.fetch_add(removes, Ordering::Relaxed);
                c.chunks.fetch_add(stats.inserted, Ordering::Relaxed);
                let commits = c.commits.fetch_add(1, Ordering::Relaxed) + 1;
                let unfolded = self.unfolded.fetch_add(stats.inserted, Ordering::Relaxed) + stats.inserted;
                if commits.is_multiple_of(self.optimize_every) || unfolded >= self.optimize_every_rows {
                    self.unfolded.store(0, Ordering::Relaxed);
                    if let Err(e) = self.index.optimize_indices().await {
                        tracing::warn!("optimizing indices: {e}");
                    }
                }
                let _ = self.index.stats().await;
                Ok(())
            }
            Err(e) => {
                self.counters.failed.fetch_add(n, Ordering::Relaxed);
                Err(e)
            }
        }
    }
}
