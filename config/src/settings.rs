//! The validated configuration: one type per section, with the defaults of every key and the
//! helpers the daemon uses (the sources, object-store roots, cache budgets); the server's
//! sections are in `server.rs`. Built from the
//! TOML by `config::validate`; `Default` is the configuration without a file.

use std::path::PathBuf;
use std::time::Duration;

use ctxd_choice::{BackendChoice, DeviceChoice, EndpointKind, PrecisionChoice};

use crate::named::{mirror_of, NamedSource};
use crate::server::{AggregateConfig, LocateConfig, RerankConfig, ServerConfig};

/// The whole configuration.
#[derive(Debug, Clone, Default)]
pub struct Config {
    /// `[source]`, or the settings every `[[source]]` shares (`root` unused then).
    pub source: SourceConfig,
    /// `[[source]]` entries (empty with one unnamed `[source]`); see [`Config::sources`].
    pub named: Vec<NamedSource>,
    pub index: IndexConfig,
    pub model: ModelConfig,
    pub chunk: ChunkSizes,
    pub pipeline: PipelineConfig,
    pub server: ServerConfig,
    pub aggregate: AggregateConfig,
    pub rerank: RerankConfig,
    pub locate: LocateConfig,
}

impl Config {
    /// Every source this configuration indexes: the `[[source]]` entries, or the one `[source]`.
    pub fn sources(&self) -> Vec<NamedSource> {
        if !self.named.is_empty() {
            return self.named.clone();
        }
        let s = &self.source;
        vec![NamedSource {
            name: String::new(),
            root: s.root.clone(),
            include: s.include.clone(),
            exclude: s.exclude.clone(),
            mirror_dir: s.mirror_dir.clone(),
            poll_interval_secs: s.poll_interval_secs,
            sqs_queue: s.sqs_queue.clone(),
            reconcile_interval_secs: s.reconcile_interval_secs,
            git: None,
            refs: Vec::new(),
        }]
    }

    /// The git sources that watch their work tree (`"worktree"` among their refs).
    pub fn worktree_sources(&self) -> Vec<String> {
        self.named.iter().filter(|s| s.worktree().is_some()).map(|s| s.name.clone()).collect()
    }

    /// `(name, default ref)` of each git source.
    pub fn git_sources(&self) -> Vec<(String, String)> {
        self.named.iter().filter(|s| s.git.is_some()).map(|s| (s.name.clone(), s.default_ref().to_string())).collect()
    }

    /// True when the sources have names (their files are stored under `<name>/`).
    pub fn has_named_sources(&self) -> bool {
        !self.named.is_empty()
    }

    /// The names of the named sources (empty with one unnamed source).
    pub fn source_names(&self) -> Vec<String> {
        self.named.iter().map(|s| s.name.clone()).collect()
    }
}

/// `[source]`: what to index.
#[derive(Debug, Clone)]
pub struct SourceConfig {
    /// A local directory, or an object-storage prefix `s3://bucket/prefix` (credentials and
    /// endpoint from the `AWS_*` environment variables).
    pub root: PathBuf,
    /// For an `s3://` root: seconds between two listings of the prefix (without `sqs_queue`).
    pub poll_interval_secs: u64,
    /// For an `s3://` root: the URL of an SQS queue that receives the bucket's event
    /// notifications; the prefix is then listed only at start and every `reconcile_interval_secs`.
    pub sqs_queue: Option<String>,
    /// With `sqs_queue`: seconds between two listings that repair what events missed.
    pub reconcile_interval_secs: u64,
    /// For an `s3://` root: where objects are mirrored locally (default:
    /// `$XDG_CACHE_HOME/ctxd/objects/<bucket>/<prefix>`).
    pub mirror_dir: Option<PathBuf>,
    /// Quiet time before a changed file is processed.
    pub debounce_ms: u64,
    /// Larger files are skipped and counted.
    pub max_file_bytes: u64,
    /// Larger files are streamed: hashed in one pass, chunked and committed in parts of
    /// `stream_block_bytes`, never held in memory whole.
    pub stream_threshold_bytes: u64,
    /// Bytes of whole lines read per part of a streamed file.
    pub stream_block_bytes: u64,
    /// Embed chunks (`false`: full-text only — chunks are stored without vectors and found by
    /// BM25; for logs and data dumps).
    pub embed: bool,
    /// Globs of paths (relative to the root) to index; empty: every file.
    pub include: Vec<String>,
    /// Globs of paths (relative to the root) never to index.
    pub exclude: Vec<String>,
}

impl SourceConfig {
    /// True when the root is an `s3://` prefix.
    pub fn is_object_store(&self) -> bool {
        ctxd_stages::object::ObjectUri::is_object_uri(&self.root.to_string_lossy())
    }

    /// The mirror directory of an `s3://` root.
    pub fn mirror(&self) -> PathBuf {
        mirror_of(&self.root, self.mirror_dir.as_ref())
    }
}

impl Default for SourceConfig {
    fn default() -> Self {
        Self {
            root: PathBuf::from("."),
            poll_interval_secs: 10,
            sqs_queue: None,
            reconcile_interval_secs: 6 * 3600,
            mirror_dir: None,
            debounce_ms: 200,
            max_file_bytes: 4 << 30,
            stream_threshold_bytes: 10 * 1024 * 1024,
            stream_block_bytes: 1024 * 1024,
            embed: true,
            include: Vec::new(),
            exclude: Vec::new(),
        }
    }
}

/// `[index]`: where the index lives.
#[derive(Debug, Clone)]
pub struct IndexConfig {
    /// LanceDB database directory.
    pub db: PathBuf,
    /// Fold new rows into the full-text index after this many commits…
    pub optimize_every_commits: u64,
    /// …or once this many rows were written since the last fold. Every query searches the rows
    /// not folded yet without the index (it tokenizes them): while the load bench's writer
    /// ingested 300 abstracts (~850 rows, never folded at the former 50,000), that took ~18% of
    /// the CPU. A fold's memory grows with its rows, so big streamed files are folded in slices.
    pub optimize_every_rows: u64,
    /// The daemon compacts fragments, removes old versions and builds the vector index every
    /// this many seconds (0: never; `ctxd compact` runs it once).
    pub maintenance_interval_secs: u64,
    /// Versions younger than this are kept by cleanup (tagged versions are always kept).
    pub retain_versions_secs: u64,
    /// Build the ANN vector index once this many embedded rows exist (0: never; below it
    /// vector search is exact).
    pub vector_index_min_rows: usize,
    /// Budget of LanceDB's cache of opened index structures (vector partitions, posting
    /// lists), shared by every table of the process; 0 = sized from the index on disk
    /// ([`IndexConfig::index_cache_bytes`]).
    pub index_cache_mb: usize,
    /// Budget of LanceDB's metadata cache (manifests, fragment and file footers).
    pub metadata_cache_mb: usize,
    /// Commits of history recorded per git ref, and for a folder that is a git work tree
    /// (0: none): recency and co-change signals, `ctxd history` (see `ctxd_index::history`).
    pub history_commits: usize,
    /// Fit the query adapter on the recorded history: at the end of a one-shot `ctxd index`,
    /// and in a daemon's background whenever the history changed (`ctxd_pipeline::adapt`;
    /// `ctxd adapt` fits it on demand).
    pub adapt: bool,
    /// Percent of the wall-clock time a daemon's background fit may work (it rests the rest).
    pub adapt_cpu_percent: usize,
    /// Fewest seconds between two background fits of a daemon (the first runs once the history
    /// is recorded).
    pub adapt_interval_secs: u64,
    /// Expiry of the writer lease of an index in a bucket (`ctxd_index::lease`): a writer that
    /// died is replaced after at most this long; the holder renews every third of it.
    pub lease_ttl_secs: u64,
}

impl Default for IndexConfig {
    fn default() -> Self {
        Self {
            db: PathBuf::from(".ctxd/db"),
            optimize_every_commits: 50,
            optimize_every_rows: 256,
            maintenance_interval_secs: 600,
            retain_versions_secs: 3600,
            vector_index_min_rows: ctxd_index::maintenance::DEFAULT_VECTOR_INDEX_MIN_ROWS,
            index_cache_mb: 0,
            metadata_cache_mb: 32,
            history_commits: ctxd_stages::git_log::DEFAULT_COMMITS,
            adapt: true,
            adapt_cpu_percent: 25,
            adapt_interval_secs: 300,
            lease_ttl_secs: 15,
        }
    }
}

impl IndexConfig {
    /// Applies the cache budgets to the process (before the first index is opened).
    pub fn apply_cache_limits(&self) {
        let index_bytes = self.index_cache_bytes();
        if self.index_cache_mb == 0 {
            tracing::debug!(mb = index_bytes >> 20, "lancedb index cache sized from the index on disk");
        }
        ctxd_index::connection::set_cache_limits(ctxd_index::connection::CacheLimits {
            index_bytes,
            metadata_bytes: self.metadata_cache_mb << 20,
        });
    }

    /// The index cache budget: `index_cache_mb`, or for 0 (auto) 1.5 × the bytes of the index
    /// files (`*.lance/_indices`) in the database directory, from 64 MiB up to a quarter of the
    /// machine's memory, at most 4 GiB (64 MiB for an `s3://` or a new index). Queries on a
    /// large index read the same posting lists and vector partitions again and again: too small
    /// a cache re-reads them every time (255k chunks, ~150 MB of index files: completion p50
    /// 42 ms with 64 MiB, 27 ms with 256 MiB), while a fresh ingest keeps the small budget that
    /// holds its memory flat. The cap was 1 GiB, which the vector and full-text indexes of a
    /// 1M-chunk index pass.
    pub fn index_cache_bytes(&self) -> usize {
        self.index_cache_bytes_within(memory_bytes())
    }

    /// [`IndexConfig::index_cache_bytes`] on a machine of `memory` bytes (`None`: not known,
    /// capped at 1 GiB).
    pub(crate) fn index_cache_bytes_within(&self, memory: Option<usize>) -> usize {
        const MIN: usize = 64 << 20;
        let max = memory.map_or(1 << 30, |m| (m / 4).clamp(MIN, 4 << 30));
        if self.index_cache_mb > 0 {
            return self.index_cache_mb << 20;
        }
        if self.db.to_string_lossy().contains("://") {
            return MIN;
        }
        fn size(dir: &std::path::Path) -> u64 {
            let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
            entries
                .flatten()
                .map(|e| match e.file_type() {
                    Ok(t) if t.is_dir() => size(&e.path()),
                    Ok(t) if t.is_file() => e.metadata().map_or(0, |m| m.len()),
                    _ => 0,
                })
                .sum()
        }
        let tables = std::fs::read_dir(&self.db).into_iter().flatten().flatten();
        let index_files: u64 = tables
            .filter(|e| e.file_name().to_string_lossy().ends_with(".lance"))
            .map(|e| size(&e.path().join("_indices")))
            .sum();
        ((index_files as usize).saturating_mul(3) / 2).clamp(MIN, max)
    }

    /// The maintenance pass these settings ask for, with nothing writing beside it (`ctxd compact`,
    /// a one-shot run's last pass; the daemon's scheduled passes keep unreferenced files).
    pub fn maintenance(&self) -> ctxd_index::maintenance::MaintenanceOptions {
        ctxd_index::maintenance::MaintenanceOptions {
            retain: std::time::Duration::from_secs(self.retain_versions_secs),
            single_writer: true,
            vector_index_min_rows: self.vector_index_min_rows,
        }
    }
}

/// `[model]`: the embedding model.
#[derive(Debug, Clone)]
pub struct ModelConfig {
    /// Hugging Face id or local directory.
    pub name: String,
    /// Cap on padded tokens per forward pass.
    pub max_batch_tokens: usize,
    /// Cap on texts per forward pass.
    pub max_batch_texts: usize,
    /// Percent of the model thread's time indexing may take while queries are being answered
    /// (100: it never yields; see `ctxd_models::service`).
    pub indexing_share_percent: usize,
    /// The same while queries also wait for a slot in the admission queue (the cores are their
    /// bottleneck then).
    pub indexing_share_waiting_percent: usize,
    /// `auto` (the GPU when the binary has CUDA and one answers, else the CPU), `cpu` or
    /// `cuda:N` (CUDA needs a `--features cuda` build: scripts/build-cuda.sh).
    pub device: DeviceChoice,
    /// `auto` (bf16 where native and faster than f32, else f32; f16 on a GPU), `f32`, `bf16`;
    /// `f16` on CUDA.
    pub precision: PrecisionChoice,
    /// `auto` (the fast oneDNN CPU path when installed, else candle), `onednn` or `candle`.
    pub backend: BackendChoice,
    /// Embedding worker threads of the CPU path; 0 = one per core.
    pub threads: usize,
    /// An embedding server to embed through (`http://host:port`); empty: the model runs here.
    pub endpoint: String,
    /// `openai` (`POST /v1/embeddings`) or `tei` (`POST /embed`).
    pub endpoint_kind: EndpointKind,
    /// Texts per request to the endpoint.
    pub endpoint_batch: usize,
    /// Requests to the endpoint in flight at once.
    pub endpoint_in_flight: usize,
    /// Seconds a request may take before it is retried.
    pub endpoint_timeout_secs: u64,
    /// Environment variable holding the endpoint's bearer token (empty: none sent).
    pub endpoint_token_env: String,
    /// Put before every query in place of the model card's query prompt (`""`: none).
    pub query_prefix: Option<String>,
    /// Put before every document in place of the model card's document prompt (`""`: none);
    /// changing it re-embeds (it changes the model id the index stores).
    pub document_prefix: Option<String>,
}

impl Default for ModelConfig {
    fn default() -> Self {
        let rt = ctxd_models::runtime::Runtime::default();
        let endpoint = ctxd_models::remote::Endpoint::new("", EndpointKind::default());
        let service = ctxd_models::service::EmbedServiceConfig::default();
        Self {
            name: ctxd_models::resolve::DEFAULT_MODEL.to_string(),
            max_batch_tokens: service.max_batch_tokens,
            max_batch_texts: service.max_batch_texts,
            indexing_share_percent: service.bulk_share_percent,
            indexing_share_waiting_percent: service.bulk_share_waiting_percent,
            device: rt.device,
            precision: rt.precision,
            backend: rt.backend,
            threads: rt.threads,
            endpoint: endpoint.url,
            endpoint_kind: endpoint.kind,
            endpoint_batch: endpoint.batch,
            endpoint_in_flight: endpoint.in_flight,
            endpoint_timeout_secs: endpoint.timeout_secs,
            endpoint_token_env: endpoint.token_env,
            query_prefix: None,
            document_prefix: None,
        }
    }
}

impl ModelConfig {
    /// The runtime settings for `ctxd_models::start`.
    pub fn runtime(&self) -> ctxd_models::runtime::Runtime {
        use ctxd_models::remote::Endpoint;
        let endpoint = (!self.endpoint.is_empty()).then(|| Endpoint {
            url: self.endpoint.clone(),
            kind: self.endpoint_kind,
            batch: self.endpoint_batch,
            in_flight: self.endpoint_in_flight,
            timeout_secs: self.endpoint_timeout_secs,
            token_env: self.endpoint_token_env.clone(),
        });
        ctxd_models::runtime::Runtime {
            device: self.device,
            precision: self.precision,
            backend: self.backend,
            threads: self.threads,
            endpoint,
            query_prefix: self.query_prefix.clone(),
            document_prefix: self.document_prefix.clone(),
        }
    }
}

/// `[chunk]`: chunk sizes.
#[derive(Debug, Clone)]
pub struct ChunkSizes {
    pub max_tokens: usize,
    pub overlap_tokens: usize,
    /// Whole code definitions below this many tokens are merged with sibling definitions…
    pub min_tokens: usize,
    /// …up to this many tokens per merged chunk (0: never merge).
    pub merge_tokens: usize,
}

impl Default for ChunkSizes {
    fn default() -> Self {
        let d = ctxd_stages::chunk::ChunkConfig::default();
        Self {
            max_tokens: d.max_tokens,
            overlap_tokens: d.overlap_tokens,
            min_tokens: d.min_tokens,
            merge_tokens: d.merge_tokens,
        }
    }
}

/// Queue capacity and workers of one stage.
#[derive(Debug, Clone, Copy)]
pub struct StageTuning {
    /// Capacity of the stage's input queue.
    pub capacity: usize,
    /// Concurrent workers.
    pub workers: usize,
}

/// `[pipeline]`: the stages' queues and workers.
#[derive(Debug, Clone)]
pub struct PipelineConfig {
    pub load: StageTuning,
    pub chunk: StageTuning,
    pub embed: StageTuning,
    pub upsert: StageTuning,
    /// Chunk tokens per embed request.
    pub embed_batch_tokens: usize,
    /// Longest wait to fill an embed request.
    pub embed_batch_wait_ms: u64,
    /// Rows per commit.
    pub commit_max_rows: usize,
    /// Longest wait before a commit (bounds freshness).
    pub commit_interval_ms: u64,
    /// Time allowed to drain on SIGTERM before the process exits anyway.
    pub drain_timeout_secs: u64,
    /// Steps of nice (0–19) the daemon's writer threads run below the daemon's own priority (at
    /// most nice 19): its stages, commits, full-text folds, git reads and upkeep run on threads of
    /// their own at this lower priority, so that queries beside it get the cores first. 0: the
    /// writer shares the queries' threads.
    pub writer_nice: i32,
}

impl Default for PipelineConfig {
    fn default() -> Self {
        Self {
            load: StageTuning { capacity: 64, workers: 2 },
            chunk: StageTuning { capacity: 64, workers: 2 },
            embed: StageTuning { capacity: 64, workers: 1 },
            upsert: StageTuning { capacity: 64, workers: 1 },
            embed_batch_tokens: 4096,
            embed_batch_wait_ms: 20,
            commit_max_rows: 4096,
            commit_interval_ms: 1000,
            drain_timeout_secs: 60,
            writer_nice: 10,
        }
    }
}

impl PipelineConfig {
    /// Commit interval as a duration.
    pub fn commit_interval(&self) -> Duration {
        Duration::from_millis(self.commit_interval_ms)
    }
}

/// The machine's memory (`MemTotal` of `/proc/meminfo`), where it can be read.
fn memory_bytes() -> Option<usize> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: usize = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib << 10)
}
