//! The raw layer: the TOML as written, one serde type per table, before any default or check.
//!
//! Every key is optional (absent: the default applies later) and kept as a [`Field`]: its value
//! when it has the right type, else serde's description of the mismatch, so one wrong type
//! does not hide the others. Keys the schema does not know are collected per table (`unknown`)
//! instead of ignored: the validation step reports each of them as an error, with its path.
//! Nothing here stops at the first problem, and no error text is ever parsed back.

use std::path::PathBuf;

use ctxd_choice::{BackendChoice, DeviceChoice, EndpointKind, PrecisionChoice, RankerName, SourceKind, ToolPreset};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};

/// One key's value as written: the value, or why it does not have the key's type.
#[derive(Debug, Clone)]
pub(crate) enum Field<T> {
    Ok(T),
    /// The type error, as serde describes it (e.g. "invalid type: integer `5`, expected a string").
    Bad(String),
}

impl<'de, T: DeserializeOwned> Deserialize<'de> for Field<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // Any TOML value is accepted here; its type is checked against `T` on its own, so the
        // table holding it still deserializes.
        let value = toml::Value::deserialize(d)?;
        Ok(match T::deserialize(value) {
            Ok(v) => Field::Ok(v),
            Err(e) => Field::Bad(one_line(&e)),
        })
    }
}

/// An error's text on one line (it goes into a `; `-separated report).
fn one_line(e: &impl std::fmt::Display) -> String {
    e.to_string().trim().replace('\n', " ")
}

/// A key of a table as written: absent, or a [`Field`].
pub(crate) type Key<T> = Option<Field<T>>;

/// Keys of a table the schema does not know, with their values.
pub(crate) type Unknown = toml::Table;

/// The whole file.
#[derive(Debug, Deserialize)]
#[serde(expecting = "a table")]
pub(crate) struct RawConfig {
    pub source: Key<RawSources>,
    pub index: Key<RawIndex>,
    pub model: Key<RawModel>,
    pub chunk: Key<RawChunk>,
    pub pipeline: Key<RawPipeline>,
    pub server: Key<RawServer>,
    pub aggregate: Key<RawAggregate>,
    pub rerank: Key<RawRerank>,
    pub locate: Key<RawLocate>,
    #[serde(flatten)]
    pub unknown: Unknown,
}

/// `[rerank]`.
#[derive(Debug, Deserialize)]
#[serde(expecting = "a table")]
pub(crate) struct RawRerank {
    pub model: Key<String>,
    #[serde(flatten)]
    pub unknown: Unknown,
}

/// `[locate]`.
#[derive(Debug, Deserialize)]
#[serde(expecting = "a table")]
pub(crate) struct RawLocate {
    pub model: Key<RankerName>,
    #[serde(flatten)]
    pub unknown: Unknown,
}

/// `[source]` (one table) or `[[source]]` (an array of tables, each with a `name`).
#[derive(Debug)]
pub(crate) enum RawSources {
    One(Box<RawSource>),
    Many(Vec<RawSource>),
}

impl<'de> Deserialize<'de> for RawSources {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let value = toml::Value::deserialize(d)?;
        if value.is_array() {
            Vec::<RawSource>::deserialize(value).map(RawSources::Many).map_err(|e| D::Error::custom(one_line(&e)))
        } else {
            RawSource::deserialize(value)
                .map(|s| RawSources::One(Box::new(s)))
                .map_err(|e| D::Error::custom(one_line(&e)))
        }
    }
}

/// `[source]`, or one `[[source]]`.
#[derive(Debug, Deserialize)]
#[serde(expecting = "a table")]
pub(crate) struct RawSource {
    pub name: Key<String>,
    pub root: Key<PathBuf>,
    pub git: Key<PathBuf>,
    pub refs: Key<Vec<String>>,
    pub include: Key<Vec<String>>,
    pub exclude: Key<Vec<String>>,
    pub poll_interval_secs: Key<u64>,
    pub sqs_queue: Key<String>,
    pub reconcile_interval_secs: Key<u64>,
    pub mirror_dir: Key<PathBuf>,
    pub debounce_ms: Key<u64>,
    pub max_file_bytes: Key<u64>,
    pub stream_threshold_bytes: Key<u64>,
    pub stream_block_bytes: Key<u64>,
    pub embed: Key<bool>,
    #[serde(flatten)]
    pub unknown: Unknown,
}

/// `[index]`.
#[derive(Debug, Deserialize)]
#[serde(expecting = "a table")]
pub(crate) struct RawIndex {
    pub db: Key<PathBuf>,
    pub optimize_every_commits: Key<u64>,
    pub optimize_every_rows: Key<u64>,
    pub maintenance_interval_secs: Key<u64>,
    pub retain_versions_secs: Key<u64>,
    pub vector_index_min_rows: Key<usize>,
    pub index_cache_mb: Key<usize>,
    pub metadata_cache_mb: Key<usize>,
    pub history_commits: Key<usize>,
    pub adapt: Key<bool>,
    pub adapt_cpu_percent: Key<usize>,
    pub adapt_interval_secs: Key<u64>,
    pub lease_ttl_secs: Key<u64>,
    #[serde(flatten)]
    pub unknown: Unknown,
}

/// `[model]`.
#[derive(Debug, Deserialize)]
#[serde(expecting = "a table")]
pub(crate) struct RawModel {
    pub name: Key<String>,
    pub max_batch_tokens: Key<usize>,
    pub max_batch_texts: Key<usize>,
    pub indexing_share_percent: Key<usize>,
    pub indexing_share_waiting_percent: Key<usize>,
    pub device: Key<DeviceChoice>,
    pub precision: Key<PrecisionChoice>,
    pub backend: Key<BackendChoice>,
    pub threads: Key<usize>,
    pub endpoint: Key<String>,
    pub endpoint_kind: Key<EndpointKind>,
    pub endpoint_batch: Key<usize>,
    pub endpoint_in_flight: Key<usize>,
    pub endpoint_timeout_secs: Key<u64>,
    pub endpoint_token_env: Key<String>,
    pub query_prefix: Key<String>,
    pub document_prefix: Key<String>,
    #[serde(flatten)]
    pub unknown: Unknown,
}

/// `[chunk]`.
#[derive(Debug, Deserialize)]
#[serde(expecting = "a table")]
pub(crate) struct RawChunk {
    pub max_tokens: Key<usize>,
    pub overlap_tokens: Key<usize>,
    pub min_tokens: Key<usize>,
    pub merge_tokens: Key<usize>,
    #[serde(flatten)]
    pub unknown: Unknown,
}

/// `{capacity, workers}` of one stage (both required once the stage is written).
#[derive(Debug, Deserialize)]
#[serde(expecting = "a table {capacity, workers}")]
pub(crate) struct RawStageTuning {
    pub capacity: Key<usize>,
    pub workers: Key<usize>,
    #[serde(flatten)]
    pub unknown: Unknown,
}

/// `[pipeline]`.
#[derive(Debug, Deserialize)]
#[serde(expecting = "a table")]
pub(crate) struct RawPipeline {
    pub load: Key<RawStageTuning>,
    pub chunk: Key<RawStageTuning>,
    pub embed: Key<RawStageTuning>,
    pub upsert: Key<RawStageTuning>,
    pub embed_batch_tokens: Key<usize>,
    pub embed_batch_wait_ms: Key<u64>,
    pub commit_max_rows: Key<usize>,
    pub commit_interval_ms: Key<u64>,
    pub drain_timeout_secs: Key<u64>,
    pub writer_nice: Key<i32>,
    #[serde(flatten)]
    pub unknown: Unknown,
}

/// `[server]`.
#[derive(Debug, Deserialize)]
#[serde(expecting = "a table")]
pub(crate) struct RawServer {
    pub listen: Key<String>,
    pub flight_listen: Key<String>,
    pub auth_token_file: Key<PathBuf>,
    pub source_tokens_file: Key<PathBuf>,
    pub webhook_secret_file: Key<PathBuf>,
    pub rerank_depth: Key<usize>,
    pub session_ttl_secs: Key<u64>,
    pub max_sessions: Key<usize>,
    pub session_memory_mb: Key<usize>,
    pub reader_poll_ms: Key<u64>,
    pub max_concurrent_queries: Key<usize>,
    pub max_queued_queries: Key<usize>,
    pub queue_timeout_ms: Key<u64>,
    pub stale_answer_ms: Key<u64>,
    pub mcp_tools: Key<ToolPreset>,
    pub ui: Key<bool>,
    #[serde(flatten)]
    pub unknown: Unknown,
}

/// `[aggregate]`.
#[derive(Debug, Deserialize)]
#[serde(expecting = "a table")]
pub(crate) struct RawAggregate {
    pub sources: Key<Vec<RawAggregateSource>>,
    pub cache_entries: Key<usize>,
    #[serde(flatten)]
    pub unknown: Unknown,
}

/// One `[[aggregate.sources]]` (`name` and `kind` required).
#[derive(Debug, Deserialize)]
#[serde(expecting = "a table")]
pub(crate) struct RawAggregateSource {
    pub name: Key<String>,
    pub kind: Key<SourceKind>,
    pub url: Key<String>,
    pub priority: Key<u32>,
    pub timeout_ms: Key<u64>,
    pub token_env: Key<String>,
    #[serde(flatten)]
    pub unknown: Unknown,
}

impl RawConfig {
    /// The raw layer of a parsed TOML table. Fails only when serde cannot walk the table at
    /// all; wrong types and unknown keys are kept for the validation step.
    pub(crate) fn from_table(table: toml::Table) -> Result<Self, String> {
        Self::deserialize(toml::Value::Table(table)).map_err(|e| one_line(&e))
    }
}
