//! The validated configuration: one type per section, with the defaults of every key and the
//! helpers the daemon uses (object-store roots, cache budgets, the auth token). Built from the
//! TOML by `config::validate`; `Default` is the configuration without a file.

use std::path::PathBuf;
use std::time::Duration;

use crate::PipelineError;

/// The whole configuration.
#[derive(Debug, Clone, Default)]
pub struct Config {
    /// `[source]`, or the settings every `[[source]]` shares (`root` unused then).
    pub source: SourceConfig,
    /// `[[source]]` entries (empty with one unnamed `[source]`); see [`Config::sources`].
    pub named: Vec<crate::config::named::NamedSource>,
    pub index: IndexConfig,
    pub model: ModelConfig,
    pub chunk: ChunkSection,
    pub pipeline: PipelineConfig,
    pub server: ServerConfig,
    pub aggregate: AggregateConfig,
}

/// `[aggregate]`: the sources `POST /v1/aggregate` gathers context from.
#[derive(Debug, Clone)]
pub struct AggregateConfig {
    /// `[[aggregate.sources]]`: `{name, kind = "local"|"ctxd"|"mcp", url, priority, timeout_ms,
    /// token_env}`. Empty: the daemon's own index only.
    pub sources: Vec<AggregateSourceConfig>,
    /// Source answers cached (keyed by source index version); 0 turns the cache off.
    pub cache_entries: usize,
}

impl Default for AggregateConfig {
    fn default() -> Self {
        Self { sources: Vec::new(), cache_entries: 256 }
    }
}

/// One aggregate source.
#[derive(Debug, Clone)]
pub struct AggregateSourceConfig {
    pub name: String,
    /// `local` (this index), `ctxd` (another daemon's base URL), `mcp` (a streamable-HTTP MCP
    /// endpoint with a `get_context` tool).
    pub kind: String,
    pub url: Option<String>,
    /// Relative share of the token budget (default 1).
    pub priority: u32,
    /// Default 2000.
    pub timeout_ms: u64,
    /// Environment variable holding the bearer token to send (never the token itself).
    pub token_env: Option<String>,
}

impl AggregateSourceConfig {
    /// `priority` when not set.
    pub const DEFAULT_PRIORITY: u32 = 1;
    /// `timeout_ms` when not set.
    pub const DEFAULT_TIMEOUT_MS: u64 = 2000;
}

/// `[source]`: what to index.
#[derive(Debug, Clone)]
pub struct SourceConfig {
    /// A local directory, or an object-storage prefix `s3://bucket/prefix` (credentials and
    /// endpoint from the `AWS_*` environment variables).
    pub root: PathBuf,
    /// For an `s3://` root: seconds between two listings of the prefix.
    pub poll_interval_secs: u64,
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

/// The mirror directory of an `s3://` root: `mirror_dir` when set, else under the cache.
pub(crate) fn mirror_of(root: &std::path::Path, mirror_dir: Option<&PathBuf>) -> PathBuf {
    if let Some(dir) = mirror_dir {
        return dir.clone();
    }
    let uri = ctxd_stages::object::ObjectUri::parse(&root.to_string_lossy());
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    let mut dir = cache.join("ctxd").join("objects");
    if let Some(u) = uri {
        dir.push(u.bucket);
        if !u.prefix.is_empty() {
            dir.push(u.prefix);
        }
    }
    dir
}

impl Default for SourceConfig {
    fn default() -> Self {
        Self {
            root: PathBuf::from("."),
            poll_interval_secs: 10,
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
            vector_index_min_rows: ctxd_index::DEFAULT_VECTOR_INDEX_MIN_ROWS,
            index_cache_mb: 0,
            metadata_cache_mb: 32,
            history_commits: ctxd_stages::history::DEFAULT_COMMITS,
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
        ctxd_index::set_cache_limits(ctxd_index::CacheLimits {
            index_bytes,
            metadata_bytes: self.metadata_cache_mb << 20,
        });
    }

    /// The index cache budget: `index_cache_mb`, or for 0 (auto) 1.5 × the bytes of the index
    /// files (`*.lance/_indices`) in the database directory, clamped to 64 MiB..=1 GiB (64 MiB
    /// for an `s3://` or a new index). Queries on a large index read the same posting lists and
    /// vector partitions again and again: too small a cache re-reads them every time (255k
    /// chunks, ~150 MB of index files: completion p50 42 ms with 64 MiB, 27 ms with 256 MiB),
    /// while a fresh ingest keeps the small budget that holds its memory flat.
    pub fn index_cache_bytes(&self) -> usize {
        const MIN: usize = 64 << 20;
        const MAX: usize = 1 << 30;
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
        ((index_files as usize).saturating_mul(3) / 2).clamp(MIN, MAX)
    }

    /// The maintenance pass these settings ask for (the daemon is its table's one writer).
    pub fn maintenance(&self) -> ctxd_index::MaintenanceOptions {
        ctxd_index::MaintenanceOptions {
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
    /// `auto` (the GPU when the binary has CUDA and one answers, else the CPU), `cpu` or
    /// `cuda:N` (CUDA needs a `--features cuda` build: scripts/build-cuda.sh).
    pub device: String,
    /// `auto` (bf16 where native and faster than f32, else f32; f16 on a GPU), `f32`, `bf16`;
    /// `f16` on CUDA.
    pub precision: String,
    /// `auto` (the fast oneDNN CPU path when installed, else candle), `onednn` or `candle`.
    pub backend: String,
    /// Embedding worker threads of the CPU path; 0 = one per core.
    pub threads: usize,
}

impl Default for ModelConfig {
    fn default() -> Self {
        let rt = ctxd_models::Runtime::default();
        Self {
            name: ctxd_models::DEFAULT_MODEL.to_string(),
            max_batch_tokens: 8192,
            max_batch_texts: 64,
            indexing_share_percent: ctxd_models::EmbedServiceConfig::default().bulk_share_percent,
            device: rt.device,
            precision: rt.precision,
            backend: rt.backend,
            threads: rt.threads,
        }
    }
}

impl ModelConfig {
    /// The runtime settings for `ctxd_models::start`.
    pub fn runtime(&self) -> ctxd_models::Runtime {
        ctxd_models::Runtime {
            device: self.device.clone(),
            precision: self.precision.clone(),
            backend: self.backend.clone(),
            threads: self.threads,
        }
    }
}

/// `[chunk]`: chunk sizes.
#[derive(Debug, Clone)]
pub struct ChunkSection {
    pub max_tokens: usize,
    pub overlap_tokens: usize,
    /// Whole code definitions below this many tokens are merged with sibling definitions…
    pub min_tokens: usize,
    /// …up to this many tokens per merged chunk (0: never merge).
    pub merge_tokens: usize,
}

impl Default for ChunkSection {
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

/// `[pipeline]`: the stage graph.
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
        }
    }
}

impl PipelineConfig {
    /// Commit interval as a duration.
    pub fn commit_interval(&self) -> Duration {
        Duration::from_millis(self.commit_interval_ms)
    }
}

/// `[server]`: the HTTP API.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub listen: String,
    /// Arrow Flight (gRPC) address; empty: no Flight server.
    pub flight_listen: String,
    /// File holding the bearer token every endpoint but `/healthz` requires
    /// (`CTXD_AUTH_TOKEN` in the environment wins). None: no authentication.
    pub auth_token_file: Option<PathBuf>,
    /// Tokens limited to some named sources (`[[token]] token, sources`; see
    /// `ctxd_serve::auth::SourceTokens`): a request with one reads only those sources.
    pub source_tokens_file: Option<PathBuf>,
    /// The shared secret of git hosting webhooks (`POST /v1/sources/<name>/poll`): GitHub's
    /// `X-Hub-Signature-256` or GitLab's `X-Gitlab-Token` is checked against it instead of a
    /// bearer token. None: the route takes the bearer token like every other.
    pub webhook_secret_file: Option<PathBuf>,
    /// Routed searches (and contexts) rescore this many best candidates by late interaction
    /// (`ctxd_serve::rerank`, same default); 0 turns it off for every request. A request can
    /// still skip it with `"rerank": false`.
    pub rerank_depth: usize,
    /// A session (`"session"` on `/v1/context`, MCP, `--session`) idle this long is forgotten.
    pub session_ttl_secs: u64,
    /// Sessions kept at most (the least recently used dropped first).
    pub max_sessions: usize,
    /// Memory all sessions may hold, estimated, in MiB (the least recently used dropped first).
    pub session_memory_mb: usize,
    /// `--role reader`: how often the latest committed version is checked, in milliseconds.
    pub reader_poll_ms: u64,
    /// Queries (search, context, locate, graph, MCP, …) running at once; 0: one per CPU core.
    pub max_concurrent_queries: usize,
    /// Queries waiting for a slot at most; more are answered 503 with `Retry-After`.
    pub max_queued_queries: usize,
    /// Longest wait for a slot, in milliseconds (then 503 with `Retry-After`).
    pub queue_timeout_ms: u64,
    /// While queries wait for a slot, a repeated search may be answered from an index version
    /// superseded at most this many milliseconds ago (the answer says `stale_ms`); 0: never.
    pub stale_answer_ms: u64,
}

/// `server.stale_answer_ms` by default: off — answers are always of the latest version unless an
/// operator trades that for latency under load (see `query/src/answers.rs` and the README).
pub const DEFAULT_STALE_ANSWER_MS: u64 = 0;
/// Largest `server.stale_answer_ms` (a minute: beyond that an answer is not "under load" any more).
pub const MAX_STALE_ANSWER_MS: u64 = 60_000;

/// Most candidates `server.rerank_depth` may ask to rescore (one forward pass over them per query).
pub const MAX_RERANK_DEPTH: usize = 200;

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:7700".into(),
            flight_listen: "127.0.0.1:7701".into(),
            auth_token_file: None,
            source_tokens_file: None,
            webhook_secret_file: None,
            rerank_depth: 30,
            session_ttl_secs: 7200,
            max_sessions: 1000,
            session_memory_mb: 64,
            reader_poll_ms: 500,
            max_concurrent_queries: 0,
            max_queued_queries: 64,
            queue_timeout_ms: 2000,
            stale_answer_ms: DEFAULT_STALE_ANSWER_MS,
        }
    }
}

/// The text of the file `[server] <key>` names; an error that says which key and why.
fn read_key_file(file: &std::path::Path, key: &str) -> Result<String, PipelineError> {
    std::fs::read_to_string(file)
        .map_err(|e| PipelineError::Config { path: file.to_path_buf(), message: format!("reading server.{key}: {e}") })
}

impl ServerConfig {
    /// The text of `source_tokens_file`, if one is configured.
    pub fn source_tokens(&self) -> Result<Option<(PathBuf, String)>, PipelineError> {
        let Some(file) = &self.source_tokens_file else { return Ok(None) };
        Ok(Some((file.clone(), read_key_file(file, "source_tokens_file")?)))
    }

    /// The webhook secret (the trimmed contents of `webhook_secret_file`), if one is configured.
    pub fn webhook_secret(&self) -> Result<Option<String>, PipelineError> {
        let Some(file) = &self.webhook_secret_file else { return Ok(None) };
        let text = read_key_file(file, "webhook_secret_file")?;
        let secret = text.trim().to_string();
        if secret.len() < 16 {
            return Err(PipelineError::Config {
                path: file.clone(),
                message: "server.webhook_secret_file holds fewer than 16 characters: write a long random secret".into(),
            });
        }
        Ok(Some(secret))
    }

    /// The bearer token: `CTXD_AUTH_TOKEN`, else the contents of `auth_token_file`.
    pub fn auth_token(&self) -> Result<Option<String>, PipelineError> {
        if let Some(t) = std::env::var("CTXD_AUTH_TOKEN").ok().filter(|t| !t.trim().is_empty()) {
            return Ok(Some(t));
        }
        let Some(file) = &self.auth_token_file else { return Ok(None) };
        let text = read_key_file(file, "auth_token_file")?;
        if text.trim().is_empty() {
            return Err(PipelineError::Config {
                path: file.clone(),
                message: "server.auth_token_file is empty".into(),
            });
        }
        Ok(Some(text))
    }

    /// True when a listen address is not a loopback address.
    pub fn exposed(&self) -> bool {
        [&self.listen, &self.flight_listen]
            .iter()
            .filter_map(|a| a.parse::<std::net::SocketAddr>().ok())
            .any(|a| !a.ip().is_loopback())
    }
}
