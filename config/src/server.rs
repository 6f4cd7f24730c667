//! The validated `[server]`, `[aggregate]`, `[rerank]` and `[locate]` sections: what the HTTP/MCP/Flight servers and the
//! aggregator read (listen addresses, auth and webhook secrets, rescoring depth, sessions,
//! admission limits, stale answers; the aggregate sources), with their defaults and bounds.

use std::path::PathBuf;

use ctxd_choice::{RankerName, SourceKind, ToolPreset};

use crate::error::ConfigError;

/// `[rerank]`: what rescores a routed search's best `[server] rerank_depth` candidates.
#[derive(Debug, Clone, Default)]
pub struct RerankConfig {
    /// A cross-encoder (Hugging Face id or directory: BERT, XLM-RoBERTa or ModernBERT with a
    /// sequence-classification head) scoring each (query, candidate) pair; empty: late
    /// interaction with the embedding model's token states.
    pub model: String,
}

/// `[locate]`: how `locate` ranks files.
#[derive(Debug, Clone, Default)]
pub struct LocateConfig {
    /// The ranking model of a request that names none: `fitted` (the model fitted on the
    /// training issues, the default) or `hand` (the hand-set weights).
    pub model: RankerName,
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
    pub kind: SourceKind,
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
    /// `ctxd_serve::SourceTokens`): a request with one reads only those sources.
    pub source_tokens_file: Option<PathBuf>,
    /// The shared secret of git hosting webhooks (`POST /v1/sources/<name>/poll`): GitHub's
    /// `X-Hub-Signature-256` or GitLab's `X-Gitlab-Token` is checked against it instead of a
    /// bearer token. None: the route takes the bearer token like every other.
    pub webhook_secret_file: Option<PathBuf>,
    /// Routed searches (and contexts) rescore this many best candidates by late interaction
    /// (`ctxd_search::rerank`, same default); 0 turns it off for every request. A request can
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
    /// The tools `POST /mcp` lists and answers: `minimal`, `standard`, `all` or tool names
    /// separated by commas (`ctxd_choice::ToolPreset`); a client may narrow it with
    /// `/mcp?tools=`.
    pub mcp_tools: ToolPreset,
    /// The web page at `GET /ui` (status, ask, graph, sessions; `ctxd_serve::ui`).
    pub ui: bool,
}

/// `server.stale_answer_ms` by default: off — answers are always of the latest version unless an
/// operator trades that for latency under load (see `search/src/answers.rs` and docs/scaling-out.md).
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
            mcp_tools: ToolPreset::All,
            ui: true,
        }
    }
}

/// The text of the file `[server] <key>` names; an error that says which key and why.
fn read_key_file(file: &std::path::Path, key: &'static str) -> Result<String, ConfigError> {
    std::fs::read_to_string(file).map_err(|source| ConfigError::KeyFile { path: file.to_path_buf(), key, source })
}

impl ServerConfig {
    /// The text of `source_tokens_file`, if one is configured.
    pub fn source_tokens(&self) -> Result<Option<(PathBuf, String)>, ConfigError> {
        let Some(file) = &self.source_tokens_file else { return Ok(None) };
        Ok(Some((file.clone(), read_key_file(file, "source_tokens_file")?)))
    }

    /// The webhook secret (the trimmed contents of `webhook_secret_file`), if one is configured.
    pub fn webhook_secret(&self) -> Result<Option<String>, ConfigError> {
        let Some(file) = &self.webhook_secret_file else { return Ok(None) };
        let text = read_key_file(file, "webhook_secret_file")?;
        let secret = text.trim().to_string();
        if secret.len() < 16 {
            return Err(ConfigError::Value {
                path: file.clone(),
                message: "server.webhook_secret_file holds fewer than 16 characters: write a long random secret".into(),
            });
        }
        Ok(Some(secret))
    }

    /// The bearer token: `CTXD_AUTH_TOKEN`, else the contents of `auth_token_file`.
    pub fn auth_token(&self) -> Result<Option<String>, ConfigError> {
        if let Some(t) = std::env::var("CTXD_AUTH_TOKEN").ok().filter(|t| !t.trim().is_empty()) {
            return Ok(Some(t));
        }
        let Some(file) = &self.auth_token_file else { return Ok(None) };
        let text = read_key_file(file, "auth_token_file")?;
        if text.trim().is_empty() {
            return Err(ConfigError::Value { path: file.clone(), message: "server.auth_token_file is empty".into() });
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
