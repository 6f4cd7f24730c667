//! The daemon configuration: strict TOML (unknown keys are errors), defaults for everything,
//! semantic checks reported together.
//!
//! ```toml
//! [source]
//! root = "examples/demo"      # folder to index and watch
//! debounce_ms = 200
//! max_file_bytes = 10485760
//!
//! [index]
//! db = ".ctxd/db"             # LanceDB directory
//!
//! [model]
//! name = "sentence-transformers/all-MiniLM-L6-v2"   # hub id or local directory
//!
//! [server]
//! listen = "127.0.0.1:7700"
//! ```
//! See `configs/ctxd.toml` for every key with its default.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::PipelineError;

/// The whole configuration.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub source: SourceConfig,
    pub index: IndexConfig,
    pub model: ModelConfig,
    pub chunk: ChunkSection,
    pub pipeline: PipelineConfig,
    pub server: ServerConfig,
    pub aggregate: AggregateConfig,
}

/// `[aggregate]`: the sources `POST /v1/aggregate` gathers context from.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
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
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AggregateSourceConfig {
    pub name: String,
    /// `local` (this index), `ctxd` (another daemon's base URL), `mcp` (a streamable-HTTP MCP
    /// endpoint with a `get_context` tool).
    pub kind: String,
    #[serde(default)]
    pub url: Option<String>,
    /// Relative share of the token budget.
    #[serde(default = "one")]
    pub priority: u32,
    #[serde(default = "two_seconds")]
    pub timeout_ms: u64,
    /// Environment variable holding the bearer token to send (never the token itself).
    #[serde(default)]
    pub token_env: Option<String>,
}

fn one() -> u32 {
    1
}
fn two_seconds() -> u64 {
    2000
}

/// `[source]`: what to index.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
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
}

impl SourceConfig {
    /// True when the root is an `s3://` prefix.
    pub fn is_object_store(&self) -> bool {
        ctxd_stages::object::ObjectUri::is_object_uri(&self.root.to_string_lossy())
    }

    /// The mirror directory of an `s3://` root.
    pub fn mirror(&self) -> PathBuf {
        if let Some(dir) = &self.mirror_dir {
            return dir.clone();
        }
        let uri = ctxd_stages::object::ObjectUri::parse(&self.root.to_string_lossy());
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
        }
    }
}

/// `[index]`: where the index lives.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct IndexConfig {
    /// LanceDB database directory.
    pub db: PathBuf,
    /// Fold new rows into the full-text index after this many commits…
    pub optimize_every_commits: u64,
    /// …or once this many rows were written since the last fold (the fold's memory grows
    /// with the rows it indexes, so big streamed files are folded in slices).
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
}

impl Default for IndexConfig {
    fn default() -> Self {
        Self {
            db: PathBuf::from(".ctxd/db"),
            optimize_every_commits: 50,
            optimize_every_rows: 50_000,
            maintenance_interval_secs: 600,
            retain_versions_secs: 3600,
            vector_index_min_rows: 100_000,
            index_cache_mb: 0,
            metadata_cache_mb: 32,
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
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ModelConfig {
    /// Hugging Face id or local directory.
    pub name: String,
    /// Cap on padded tokens per forward pass.
    pub max_batch_tokens: usize,
    /// Cap on texts per forward pass.
    pub max_batch_texts: usize,
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
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
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
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StageTuning {
    /// Capacity of the stage's input queue.
    pub capacity: usize,
    /// Concurrent workers.
    pub workers: usize,
}

/// `[pipeline]`: the stage graph.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
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
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    pub listen: String,
    /// Arrow Flight (gRPC) address; empty: no Flight server.
    pub flight_listen: String,
    /// File holding the bearer token every endpoint but `/healthz` requires
    /// (`CTXD_AUTH_TOKEN` in the environment wins). None: no authentication.
    pub auth_token_file: Option<PathBuf>,
    /// Routed searches (and contexts) rescore this many best candidates by late interaction
    /// (`ctxd_serve::rerank`, same default); 0 turns it off for every request. A request can
    /// still skip it with `"rerank": false`.
    pub rerank_depth: usize,
}

/// Most candidates `server.rerank_depth` may ask to rescore (one forward pass over them per query).
pub const MAX_RERANK_DEPTH: usize = 200;

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:7700".into(),
            flight_listen: "127.0.0.1:7701".into(),
            auth_token_file: None,
            rerank_depth: 30,
        }
    }
}

impl ServerConfig {
    /// The bearer token: `CTXD_AUTH_TOKEN`, else the contents of `auth_token_file`.
    pub fn auth_token(&self) -> Result<Option<String>, PipelineError> {
        if let Some(t) = std::env::var("CTXD_AUTH_TOKEN").ok().filter(|t| !t.trim().is_empty()) {
            return Ok(Some(t));
        }
        let Some(file) = &self.auth_token_file else { return Ok(None) };
        let text = std::fs::read_to_string(file).map_err(|e| PipelineError::Config {
            path: file.clone(),
            message: format!("reading server.auth_token_file: {e}"),
        })?;
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

/// A stage's `{capacity, workers}` table has no per-key defaults: an override of one key of a
/// stage the file does not mention starts from that stage's defaults.
fn seed_stage_defaults(table: &mut toml::Table, path: &[String]) {
    let [section, stage, _] = path else { return };
    if section != "pipeline" {
        return;
    }
    let d = PipelineConfig::default();
    let tuning = match stage.as_str() {
        "load" => d.load,
        "chunk" => d.chunk,
        "embed" => d.embed,
        "upsert" => d.upsert,
        _ => return,
    };
    let pipeline = table.entry("pipeline").or_insert_with(|| toml::Value::Table(Default::default()));
    if let toml::Value::Table(p) = pipeline {
        p.entry(stage.clone()).or_insert_with(|| {
            let mut t = toml::Table::new();
            t.insert("capacity".into(), toml::Value::Integer(tuning.capacity as i64));
            t.insert("workers".into(), toml::Value::Integer(tuning.workers as i64));
            toml::Value::Table(t)
        });
    }
}

/// The key a deserialization error is about: `unknown field `x` … in `a.b`` → `a.b.x`;
/// `invalid type … in `a.b`` → `a.b`. None for errors no single key causes (missing fields).
fn offending_key(message: &str) -> Option<Vec<String>> {
    let quoted = |s: &str| -> Option<String> {
        let start = s.find('`')? + 1;
        let end = start + s[start..].find('`')?;
        Some(s[start..end].to_string())
    };
    let first = message.lines().next()?;
    let within: Vec<String> = message
        .lines()
        .find_map(|l| l.strip_prefix("in "))
        .and_then(quoted)
        .map(|p| p.split('.').map(str::to_string).collect())
        .unwrap_or_default();
    if first.starts_with("unknown field") {
        let mut path = within;
        path.push(quoted(first)?);
        Some(path)
    } else if first.starts_with("invalid type") || first.starts_with("invalid value") {
        (!within.is_empty()).then_some(within)
    } else {
        None
    }
}

/// Removes `path` from `table` (inside arrays of tables: from the elements holding it).
fn remove_key(table: &mut toml::Table, path: &[String]) -> bool {
    let Some((last, parents)) = path.split_last() else { return false };
    fn walk(v: &mut toml::Table, parents: &[String], last: &str) -> bool {
        match parents.split_first() {
            None => v.remove(last).is_some(),
            Some((head, rest)) => match v.get_mut(head) {
                Some(toml::Value::Table(t)) => walk(t, rest, last),
                Some(toml::Value::Array(items)) => {
                    let mut any = false;
                    for item in items.iter_mut() {
                        if let toml::Value::Table(t) = item {
                            any |= walk(t, rest, last);
                        }
                    }
                    any
                }
                _ => false,
            },
        }
    }
    walk(table, parents, last)
}

/// The 1-based line of `path`'s key in `text`: under its `[section]` / `[[section]]` header
/// (or an inline table on a line of that section), else `None`.
fn key_line(text: &str, path: &[String]) -> Option<usize> {
    let (key, parents) = path.split_last()?;
    let is_key = |line: &str, k: &str| {
        let l = line.trim_start();
        l.strip_prefix(k).is_some_and(|r| r.trim_start().starts_with('='))
    };
    let mut section: Vec<String> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let t = line.trim();
        if t.starts_with('[') {
            section = t.trim_matches(|c| c == '[' || c == ']').split('.').map(|s| s.trim().to_string()).collect();
            if parents.is_empty() && section.first() == Some(key) {
                return Some(i + 1);
            }
            continue;
        }
        if section == parents && is_key(line, key) {
            return Some(i + 1);
        }
        // `load = { capacity = 1, x = 2 }` inside `[pipeline]`.
        if parents.len() == section.len() + 1
            && parents.starts_with(&section)
            && is_key(line, &parents[parents.len() - 1])
            && line.contains(key.as_str())
        {
            return Some(i + 1);
        }
    }
    None
}

/// The sections environment overrides may address (`CTXD_<SECTION>_<KEY>`).
const SECTIONS: &[&str] = &["source", "index", "model", "chunk", "pipeline", "server", "aggregate"];

/// The overrides found in `vars`: `CTXD_<SECTION>_<KEY>=value` sets `<section>.<key>`
/// (`__` inside the key nests deeper: `CTXD_PIPELINE_EMBED__WORKERS=2` sets
/// `pipeline.embed.workers`). Other `CTXD_*` variables (`CTXD_LOG`, `CTXD_AUTH_TOKEN`) are not
/// config keys and are ignored. Values are TOML scalars (`true`, `42`, `"text"`); anything else
/// is taken as a string.
pub fn env_overrides(vars: impl IntoIterator<Item = (String, String)>) -> Vec<(String, Vec<String>, toml::Value)> {
    let mut out = Vec::new();
    for (name, value) in vars {
        let Some(rest) = name.strip_prefix("CTXD_") else { continue };
        let rest = rest.to_ascii_lowercase();
        let Some((section, key)) = rest.split_once('_') else { continue };
        if !SECTIONS.contains(&section) || key.is_empty() {
            continue;
        }
        let mut path = vec![section.to_string()];
        path.extend(key.split("__").map(str::to_string));
        let parsed = toml::from_str::<toml::Table>(&format!("v = {value}"))
            .ok()
            .and_then(|mut t| t.remove("v"))
            .filter(|v| !matches!(v, toml::Value::Table(_) | toml::Value::Array(_)))
            .unwrap_or_else(|| toml::Value::String(value.clone()));
        out.push((name, path, parsed));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

impl Config {
    /// Parses TOML text; `origin` names the file in errors. Relative paths in the file are
    /// resolved against the file's directory.
    pub fn from_toml(text: &str, origin: &Path) -> Result<Self, PipelineError> {
        Self::from_toml_with(text, origin, Vec::new())
    }

    /// [`Config::from_toml`] with environment overrides applied on top of the file (see
    /// [`env_overrides`]); errors name the variable that set a bad key.
    pub fn from_toml_with(
        text: &str,
        origin: &Path,
        overrides: Vec<(String, Vec<String>, toml::Value)>,
    ) -> Result<Self, PipelineError> {
        let err = |message: String| PipelineError::Config { path: origin.to_path_buf(), message };
        // Syntax errors stop the parser (one at a time, with line and column).
        let mut table: toml::Table = toml::from_str(text).map_err(|e| err(e.to_string()))?;
        let mut from_env: Vec<(Vec<String>, String)> = Vec::new();
        for (name, path, value) in overrides {
            seed_stage_defaults(&mut table, &path);
            let mut at = &mut table;
            for part in &path[..path.len() - 1] {
                let entry = at.entry(part.clone()).or_insert_with(|| toml::Value::Table(Default::default()));
                at = match entry {
                    toml::Value::Table(t) => t,
                    _ => return Err(err(format!("{name}: {} is not a table", path.join(".")))),
                };
            }
            at.insert(path[path.len() - 1].clone(), value);
            from_env.push((path, name));
        }
        // Unknown keys and wrong types: every one is reported, each with its line (or the
        // environment variable that set it), by dropping it and deserializing again.
        let mut problems = Vec::new();
        let mut cfg: Option<Config> = None;
        for _ in 0..64 {
            match toml::Value::Table(table.clone()).try_into::<Config>() {
                Ok(c) => {
                    cfg = Some(c);
                    break;
                }
                Err(e) => {
                    let message = e.to_string();
                    let Some(path) = offending_key(&message) else {
                        problems.push(message.replace('\n', " "));
                        break;
                    };
                    let what = message.lines().next().unwrap_or("").to_string();
                    let place = match from_env.iter().find(|(p, _)| *p == path) {
                        Some((_, var)) => var.clone(),
                        None => match key_line(text, &path) {
                            Some(n) => format!("line {n}"),
                            None => "here".to_string(),
                        },
                    };
                    problems.push(format!("{place}: {}: {what}", path.join(".")));
                    if !remove_key(&mut table, &path) {
                        break;
                    }
                }
            }
        }
        let mut cfg = match (cfg, problems.is_empty()) {
            (Some(c), true) => c,
            _ => return Err(err(problems.join("; "))),
        };
        let base = origin.parent().unwrap_or(Path::new("."));
        if cfg.source.root.is_relative() && !cfg.source.is_object_store() {
            cfg.source.root = base.join(&cfg.source.root);
        }
        if let Some(dir) = cfg.source.mirror_dir.as_mut().filter(|d| d.is_relative()) {
            *dir = base.join(&*dir);
        }
        if let Some(file) = cfg.server.auth_token_file.as_mut().filter(|d| d.is_relative()) {
            *file = base.join(&*file);
        }
        if cfg.index.db.is_relative() && !cfg.index.db.to_string_lossy().contains("://") {
            cfg.index.db = base.join(&cfg.index.db);
        }
        cfg.validate().map_err(|message| PipelineError::Config { path: origin.to_path_buf(), message })?;
        Ok(cfg)
    }

    /// Reads and parses a config file.
    pub fn load(path: &Path) -> Result<Self, PipelineError> {
        Self::load_from(Some(path), Vec::new())
    }

    /// The configuration a run uses: `file` (or the defaults) with the process's `CTXD_*`
    /// overrides on top. Relative paths resolve against the file's directory (the working
    /// directory without a file).
    pub fn load_with_env(file: Option<&Path>) -> Result<Self, PipelineError> {
        Self::load_from(file, env_overrides(std::env::vars()))
    }

    fn load_from(
        file: Option<&Path>,
        overrides: Vec<(String, Vec<String>, toml::Value)>,
    ) -> Result<Self, PipelineError> {
        match file {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| PipelineError::Config { path: path.to_path_buf(), message: e.to_string() })?;
                Self::from_toml_with(&text, path, overrides)
            }
            None if overrides.is_empty() => Ok(Self::default()),
            None => Self::from_toml_with("", Path::new("./(environment)"), overrides),
        }
    }

    /// Semantic checks; every problem is reported, one per line.
    pub fn validate(&self) -> Result<(), String> {
        let mut errs = Vec::new();
        let p = &self.pipeline;
        for (name, t) in [("load", p.load), ("chunk", p.chunk), ("embed", p.embed), ("upsert", p.upsert)] {
            if t.capacity == 0 {
                errs.push(format!("pipeline.{name}.capacity must be at least 1"));
            }
            if t.workers == 0 {
                errs.push(format!("pipeline.{name}.workers must be at least 1"));
            }
        }
        if self.source.stream_block_bytes < 4096 || self.source.stream_block_bytes > 1 << 30 {
            errs.push("source.stream_block_bytes must be between 4096 and 1073741824".into());
        }
        if self.source.is_object_store() && self.source.poll_interval_secs == 0 {
            errs.push("source.poll_interval_secs must be at least 1".into());
        }
        if self.chunk.max_tokens < 16 {
            errs.push("chunk.max_tokens must be at least 16".into());
        }
        if self.chunk.overlap_tokens >= self.chunk.max_tokens {
            errs.push("chunk.overlap_tokens must be below chunk.max_tokens".into());
        }
        if self.chunk.merge_tokens > self.chunk.max_tokens {
            errs.push("chunk.merge_tokens must not exceed chunk.max_tokens".into());
        }
        if self.model.max_batch_tokens == 0 || self.model.max_batch_texts == 0 {
            errs.push("model.max_batch_tokens and model.max_batch_texts must be at least 1".into());
        }
        errs.extend(self.model.runtime().validate().into_iter().map(|e| format!("model: {e}")));
        if self.server.listen.parse::<std::net::SocketAddr>().is_err() {
            errs.push(format!("server.listen '{}' is not an address like 127.0.0.1:7700", self.server.listen));
        }
        if !self.server.flight_listen.is_empty() && self.server.flight_listen.parse::<std::net::SocketAddr>().is_err() {
            errs.push(format!(
                "server.flight_listen '{}' is not an address like 127.0.0.1:7701 (or empty for none)",
                self.server.flight_listen
            ));
        }
        if self.server.rerank_depth > MAX_RERANK_DEPTH {
            errs.push(format!("server.rerank_depth must be at most {MAX_RERANK_DEPTH} (0 turns rescoring off)"));
        }
        let mut names = std::collections::HashSet::new();
        for (i, src) in self.aggregate.sources.iter().enumerate() {
            if !names.insert(src.name.as_str()) {
                errs.push(format!("aggregate.sources[{i}].name '{}' is used twice", src.name));
            }
            if !["local", "ctxd", "mcp"].contains(&src.kind.as_str()) {
                errs.push(format!("aggregate.sources[{i}].kind '{}' is not local, ctxd or mcp", src.kind));
            }
            if src.kind != "local"
                && !src.url.as_deref().is_some_and(|u| u.starts_with("http://") || u.starts_with("https://"))
            {
                errs.push(format!("aggregate.sources[{i}].url must be an http(s) URL for kind '{}'", src.kind));
            }
            if src.priority == 0 || src.timeout_ms == 0 {
                errs.push(format!("aggregate.sources[{i}].priority and timeout_ms must be at least 1"));
            }
        }
        if errs.is_empty() {
            Ok(())
        } else {
            Err(errs.join("; "))
        }
    }
}

#[cfg(test)]
mod tests {

    /// The package's directory: cargo's run-time `CARGO_MANIFEST_DIR` (right even when a cached test
    /// binary built from another checkout of the same sources is reused), else the build-time one.
    fn manifest_dir() -> std::path::PathBuf {
        std::env::var_os("CARGO_MANIFEST_DIR")
            .map(std::path::PathBuf::from)
            .unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into())
    }

    use super::*;

    #[test]
    fn unknown_keys_are_rejected() {
        let err = Config::from_toml("[source]\nroot = \"x\"\nbogus = 1\n", Path::new("c.toml")).unwrap_err();
        assert!(err.to_string().contains("bogus"), "{err}");
    }

    #[test]
    fn all_semantic_errors_reported_together() {
        let text =
            "[pipeline]\nload = { capacity = 0, workers = 0 }\n[server]\nlisten = \"nope\"\nrerank_depth = 500\n";
        let err = Config::from_toml(text, Path::new("c.toml")).unwrap_err().to_string();
        assert!(err.contains("pipeline.load.capacity"), "{err}");
        assert!(err.contains("pipeline.load.workers"), "{err}");
        assert!(err.contains("server.listen"), "{err}");
        assert!(err.contains("server.rerank_depth must be at most 200"), "{err}");
    }

    fn vars(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn environment_overrides_win_over_the_file_and_bad_ones_are_named() {
        let file = "[index]\ndb = \"db\"\noptimize_every_rows = 10\n[server]\nlisten = \"127.0.0.1:1\"\n";
        let env = env_overrides(vars(&[
            ("CTXD_INDEX_OPTIMIZE_EVERY_ROWS", "99"),
            ("CTXD_SERVER_LISTEN", "127.0.0.1:7799"),
            ("CTXD_PIPELINE_EMBED__WORKERS", "3"),
            ("CTXD_SOURCE_EMBED", "false"),
            ("CTXD_MODEL_NAME", "sentence-transformers/all-MiniLM-L6-v2"),
            ("CTXD_LOG", "debug"),
            ("CTXD_AUTH_TOKEN", "x"),
            ("HOME", "/root"),
        ]));
        assert_eq!(env.len(), 5, "{env:?}");
        let cfg = Config::from_toml_with(file, Path::new("/etc/ctxd/c.toml"), env).unwrap();
        assert_eq!(cfg.index.optimize_every_rows, 99);
        assert_eq!(cfg.index.db, Path::new("/etc/ctxd/db"));
        assert_eq!(cfg.server.listen, "127.0.0.1:7799");
        assert_eq!(cfg.pipeline.embed.workers, 3);
        assert!(!cfg.source.embed);
        assert_eq!(cfg.model.name, "sentence-transformers/all-MiniLM-L6-v2");

        let env = env_overrides(vars(&[("CTXD_INDEX_OPTIMISE_EVERY_ROWS", "1")]));
        let err = Config::from_toml_with(file, Path::new("c.toml"), env).unwrap_err().to_string();
        assert!(err.contains("optimise_every_rows") && err.contains("CTXD_INDEX_OPTIMISE_EVERY_ROWS"), "{err}");
        let env = env_overrides(vars(&[("CTXD_PIPELINE_LOAD__CAPACITY", "0")]));
        let err = Config::from_toml_with(file, Path::new("c.toml"), env).unwrap_err().to_string();
        assert!(err.contains("pipeline.load.capacity"), "{err}");
    }

    #[test]
    fn a_bad_file_names_the_key_and_line() {
        let err =
            Config::from_toml("[index]\ndb = \"d\"\nbogus_key = 1\n", Path::new("c.toml")).unwrap_err().to_string();
        assert!(err.contains("bogus_key") && err.contains("line 3"), "{err}");
    }

    #[test]
    fn every_unknown_key_and_wrong_type_is_reported_at_once_with_its_line() {
        let text = "[index]\ndb = \"d\"\nbogus = 1\n\n[server]\nlisten = 5\nlisen = \"x\"\n\n[pipeline]\nload = { capacity = 1, workers = 1, extra = 2 }\n\n[[aggregate.sources]]\nname = \"a\"\nkind = \"local\"\nfoo = 1\n\n[typo]\nx = 1\n";
        let err = Config::from_toml(text, Path::new("c.toml")).unwrap_err().to_string();
        for want in [
            "line 3: index.bogus",
            "line 6: server.listen: invalid type",
            "line 7: server.lisen",
            "line 10: pipeline.load.extra",
            "line 15: aggregate.sources.foo",
            "line 17: typo",
        ] {
            assert!(err.contains(want), "missing '{want}' in: {err}");
        }
        let env = env_overrides(vars(&[("CTXD_SERVER_LISTN", "127.0.0.1:1")]));
        let err = Config::from_toml_with("", Path::new("c.toml"), env).unwrap_err().to_string();
        assert!(err.contains("CTXD_SERVER_LISTN: server.listn"), "{err}");
    }

    #[test]
    fn the_index_cache_is_sized_from_the_index_files_unless_set() {
        let tmp = tempfile::tempdir().unwrap();
        let mut cfg = IndexConfig { db: tmp.path().join("db"), ..Default::default() };
        assert_eq!(cfg.index_cache_bytes(), 64 << 20, "no index yet: the floor");
        let seg = cfg.db.join("chunks.lance/_indices/abc");
        std::fs::create_dir_all(&seg).unwrap();
        // Sparse files: sizes without the bytes.
        std::fs::File::create(seg.join("part.lance")).unwrap().set_len(200 << 20).unwrap();
        std::fs::create_dir_all(cfg.db.join("chunks.lance/data")).unwrap();
        std::fs::File::create(cfg.db.join("chunks.lance/data/x.lance")).unwrap().set_len(900 << 20).unwrap();
        assert_eq!(cfg.index_cache_bytes(), 300 << 20, "1.5 x the index files, data files not counted");
        std::fs::File::create(seg.join("more.lance")).unwrap().set_len(2 << 30).unwrap();
        assert_eq!(cfg.index_cache_bytes(), 1 << 30, "capped");
        cfg.index_cache_mb = 128;
        assert_eq!(cfg.index_cache_bytes(), 128 << 20, "a number is kept");
        cfg.index_cache_mb = 0;
        cfg.db = "s3://bucket/db".into();
        assert_eq!(cfg.index_cache_bytes(), 64 << 20);
    }

    #[test]
    fn every_shipped_config_parses() {
        let dir = Path::new(&manifest_dir()).join("../configs");
        let mut n = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "toml") {
                Config::load(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                n += 1;
            }
        }
        assert!(n >= 3, "configs/ holds the documented default and examples");
    }

    #[test]
    fn documented_default_matches_code_defaults() {
        let path = Path::new(&manifest_dir()).join("../configs/ctxd.toml");
        let file = Config::load(&path).unwrap();
        let code = Config::default();
        assert_eq!(format!("{:?}", file.pipeline), format!("{:?}", code.pipeline));
        assert_eq!(format!("{:?}", file.model), format!("{:?}", code.model));
        assert_eq!(format!("{:?}", file.chunk), format!("{:?}", code.chunk));
        assert_eq!(file.source.debounce_ms, code.source.debounce_ms);
        assert_eq!(file.index.index_cache_mb, code.index.index_cache_mb);
        assert_eq!(file.index.metadata_cache_mb, code.index.metadata_cache_mb);
        assert_eq!(file.index.optimize_every_rows, code.index.optimize_every_rows);
        assert_eq!(file.source.max_file_bytes, code.source.max_file_bytes);
        assert_eq!(file.server.listen, code.server.listen);
    }

    #[test]
    fn relative_paths_resolve_against_the_file() {
        let cfg = Config::from_toml("[source]\nroot = \"src\"\n[index]\ndb = \"db\"\n", Path::new("/etc/ctxd/c.toml"))
            .unwrap();
        assert_eq!(cfg.source.root, PathBuf::from("/etc/ctxd/src"));
        assert_eq!(cfg.index.db, PathBuf::from("/etc/ctxd/db"));
    }
}
