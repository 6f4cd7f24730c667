//! `POST /v1/aggregate`: one context gathered from several sources in parallel.
//!
//! Sources are configured (`[[aggregate.sources]]`; a request may pick a subset by name, never
//! add a URL — the daemon does not fetch arbitrary addresses for its callers):
//!
//! * `local` — this daemon's own index,
//! * `ctxd` — another ctxd over HTTP (`POST <url>/v1/context`; its index version from
//!   `GET <url>/v1/status`),
//! * `mcp` — an MCP server over streamable HTTP whose `get_context` tool takes
//!   `{query, budget}` (ctxd's does): `initialize`, then `tools/call`.
//!
//! Each source gets a share of the token budget proportional to its `priority` and its own
//! timeout; a source that fails or is slow is reported (`status: "timeout" | "error"`) and
//! its share is simply missing — never an error of the whole request. The answers are then
//! merged below the wire (`ctxd_context::merge`: deduplicated across sources, re-counted with
//! this daemon's tokenizer, packed into the budget by priority, then relevance). Answers of `local` and `ctxd` sources are cached under
//! `(source, index version, query, share)`: a new commit changes the version, so the cache
//! never serves stale context and needs no TTL. MCP sources expose no version and are not
//! cached. Per-source latency, tokens, blocks and cache hits are in the response and in
//! `ctxd_aggregate_*` metrics (label `source` = the configured name).

use std::collections::HashSet;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::metrics as m;
use ctxd_choice::SourceKind;
use ctxd_context::assembler::Assembler;
use ctxd_context::merge::{merge, render, SourceAnswer, SourcedBlock};
use ctxd_context::request::ContextRequest;
use ctxd_context::{Block, Format};
use ctxd_index::{record::Chunk, record::Hit};
use ctxd_search::error::SearchError;
use ctxd_search::Bounded;

/// One configured source.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceSpec {
    pub name: String,
    pub kind: SourceKind,
    /// Base URL of a `ctxd` source (`http://host:7700`), endpoint of an `mcp` source.
    #[serde(default)]
    pub url: Option<String>,
    /// Share of the budget, relative to the other sources.
    #[serde(default = "default_priority")]
    pub priority: u32,
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    /// Bearer token sent to the source.
    #[serde(default, skip_serializing)]
    pub token: Option<String>,
}

fn default_priority() -> u32 {
    1
}
fn default_timeout_ms() -> u64 {
    2000
}

/// The body of `POST /v1/aggregate`.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AggregateRequest {
    #[schemars(length(min = 1, max = ctxd_search::search::MAX_QUERY_BYTES / 4), pattern(r"\S"))]
    pub query: String,
    #[schemars(range(min = 1, max = ctxd_context::request::MAX_BUDGET))]
    pub budget: usize,
    /// Names of configured sources to ask (default: all).
    #[serde(default)]
    pub sources: Option<Vec<String>>,
    #[serde(default)]
    pub format: Format,
    /// Only these named sources of the local index (see `ctxd_search::sources`; narrowed by the
    /// wire to what the caller's token may read). Other daemons answer with their own sources.
    #[serde(default, deserialize_with = "ctxd_search::sources::de_sources")]
    #[schemars(with = "Option<ctxd_search::sources::SourceNames>")]
    pub source: Option<ctxd_index::scope::SourceScope>,
    /// A git source's branch, tag or commit to read (default: each git source's first ref).
    #[serde(default, rename = "ref")]
    pub git_ref: Option<String>,
}

/// What one source did.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct SourceReport {
    pub name: String,
    pub kind: SourceKind,
    /// `ok`, `timeout` or `error`.
    pub status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub latency_ms: f64,
    pub budget: usize,
    /// Blocks and tokens of this source in the final context.
    pub blocks: usize,
    pub tokens: usize,
    pub cache_hit: bool,
    pub version: Option<u64>,
}

/// The answer.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct AggregateResponse {
    pub blocks: Vec<SourcedBlock>,
    pub tokens_used: usize,
    pub budget: usize,
    pub duplicates_dropped: usize,
    pub sources: Vec<SourceReport>,
    pub context: String,
}

/// Cache of source answers keyed by (source, version, query, share).
type Cache = Bounded<(String, u64, String, usize), Vec<Block>>;

/// Gathers context from the configured sources.
pub struct Aggregator {
    local: Arc<Assembler>,
    sources: Vec<SourceSpec>,
    http: reqwest::Client,
    cache: Mutex<Cache>,
}

/// Sends `req`; a transport failure or a non-2xx status is an error message naming `what`.
async fn send(req: reqwest::RequestBuilder, what: &str) -> Result<reqwest::Response, String> {
    let resp = req.send().await.map_err(|e| format!("{what}: {e}"))?;
    if !resp.status().is_success() {
        return Err(format!("{what}: http {}", resp.status()));
    }
    Ok(resp)
}

/// Why an aggregator could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum AggregateError {
    #[error("aggregate source '{0}' is configured twice")]
    Twice(String),
    #[error("aggregate source '{name}' ({kind:?}) needs a url")]
    NoUrl { name: String, kind: SourceKind },
    #[error("aggregate source '{0}': priority and timeout_ms must be at least 1")]
    Limits(String),
    #[error("http client: {0}")]
    Client(#[source] reqwest::Error),
}

impl Aggregator {
    /// The answer cache. A panic while it was held leaves at worst one entry half-put (the
    /// requests' answers are whole), so a poisoned lock is taken over rather than failing every
    /// later aggregate.
    fn cache(&self) -> std::sync::MutexGuard<'_, Cache> {
        self.cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// `sources` must have unique names; `cache_entries` 0 disables the cache.
    pub fn new(local: Arc<Assembler>, sources: Vec<SourceSpec>, cache_entries: usize) -> Result<Self, AggregateError> {
        let mut names = HashSet::new();
        for s in &sources {
            if !names.insert(s.name.as_str()) {
                return Err(AggregateError::Twice(s.name.clone()));
            }
            if s.kind != SourceKind::Local && s.url.is_none() {
                return Err(AggregateError::NoUrl { name: s.name.clone(), kind: s.kind });
            }
            if s.priority == 0 || s.timeout_ms == 0 {
                return Err(AggregateError::Limits(s.name.clone()));
            }
        }
        let http = reqwest::Client::builder().build().map_err(AggregateError::Client)?;
        Ok(Self { local, sources, http, cache: Mutex::new(Cache::new(cache_entries)) })
    }

    /// The configured sources.
    pub fn sources(&self) -> &[SourceSpec] {
        &self.sources
    }

    pub async fn aggregate(&self, req: &AggregateRequest) -> Result<AggregateResponse, SearchError> {
        if req.query.trim().is_empty() {
            return Err(SearchError::BadRequest("query is empty".into()));
        }
        if req.budget < 16 || req.budget > ctxd_context::request::MAX_BUDGET {
            return Err(SearchError::BadRequest(format!(
                "budget must be between 16 and {} tokens",
                ctxd_context::request::MAX_BUDGET
            )));
        }
        let chosen: Vec<&SourceSpec> = match &req.sources {
            None => self.sources.iter().collect(),
            Some(names) => {
                let mut out = Vec::new();
                for n in names {
                    match self.sources.iter().find(|s| &s.name == n) {
                        Some(s) => out.push(s),
                        None => return Err(SearchError::BadRequest(format!("unknown aggregate source '{n}'"))),
                    }
                }
                out
            }
        };
        if chosen.is_empty() {
            return Err(SearchError::BadRequest("no aggregate sources configured".into()));
        }
        let total: u64 = chosen.iter().map(|s| s.priority as u64).sum();
        let shares: Vec<usize> =
            chosen.iter().map(|s| ((req.budget as u64 * s.priority as u64) / total).max(16) as usize).collect();
        let runs = chosen.iter().zip(&shares).map(|(s, share)| self.ask(s, &req.query, *share, req.source.as_ref()));
        let answers = futures::future::join_all(runs).await;

        let merged = merge(
            &chosen
                .iter()
                .zip(&shares)
                .zip(&answers)
                .map(|((s, share), answer)| SourceAnswer {
                    name: &s.name,
                    priority: s.priority,
                    share: *share,
                    blocks: answer.0.as_deref().ok(),
                })
                .collect::<Vec<_>>(),
            req.budget,
            self.local.tokens(),
            req.format,
        );
        let blocks = merged.blocks;
        let mut reports = Vec::new();
        for (i, s) in chosen.iter().enumerate() {
            let (res, latency, cache_hit, version) = &answers[i];
            let (status, error) = match res {
                Ok(_) => ("ok", None),
                Err(e) if e == "timeout" => ("timeout", Some(format!("no answer within {} ms", s.timeout_ms))),
                Err(e) => ("error", Some(e.clone())),
            };
            let mine: Vec<&SourcedBlock> = blocks.iter().filter(|b| b.source == s.name).collect();
            let tokens = mine.iter().map(|b| b.block.tokens).sum();
            metrics::histogram!(m::AGGREGATE_SOURCE_SECONDS, "source" => s.name.clone()).record(latency / 1000.0);
            metrics::counter!(m::AGGREGATE_SOURCE_REQUESTS_TOTAL, "source" => s.name.clone(), "status" => status)
                .increment(1);
            metrics::counter!(m::AGGREGATE_SOURCE_TOKENS_TOTAL, "source" => s.name.clone()).increment(tokens as u64);
            if *cache_hit {
                metrics::counter!(m::AGGREGATE_CACHE_HITS_TOTAL, "source" => s.name.clone()).increment(1);
            }
            reports.push(SourceReport {
                name: s.name.clone(),
                kind: s.kind,
                status,
                error,
                latency_ms: *latency,
                budget: shares[i],
                blocks: mine.len(),
                tokens,
                cache_hit: *cache_hit,
                version: *version,
            });
        }
        let context = render(&blocks, req.format);
        Ok(AggregateResponse {
            blocks,
            tokens_used: merged.tokens_used,
            budget: req.budget,
            duplicates_dropped: merged.duplicates_dropped,
            sources: reports,
            context,
        })
    }

    /// Asks one source within its timeout: (blocks or error, latency ms, cache hit, version).
    async fn ask(
        &self,
        s: &SourceSpec,
        query: &str,
        share: usize,
        scope: Option<&ctxd_index::scope::SourceScope>,
    ) -> (Result<Vec<Block>, String>, f64, bool, Option<u64>) {
        let started = Instant::now();
        let limit = Duration::from_millis(s.timeout_ms);
        let run = async {
            let version = match s.kind {
                SourceKind::Local => Some(self.local.searcher().index().version().await.map_err(|e| e.to_string())?),
                SourceKind::Ctxd => Some(self.remote_version(s).await?),
                SourceKind::Mcp => None,
            };
            // The local answer depends on the sources read: a cached one is reused only for the same.
            let scoped = match (s.kind, scope) {
                (SourceKind::Local, Some(scope)) => format!("{query}\u{1f}{}", scope.key()),
                _ => query.to_string(),
            };
            let key = version.map(|v| (s.name.clone(), v, scoped, share));
            if let Some(hit) = key.as_ref().and_then(|k| self.cache().get(k).cloned()) {
                return Ok((hit, true, version));
            }
            let blocks = match s.kind {
                SourceKind::Local => {
                    let mut req = ContextRequest::new(query, share);
                    req.source = scope.cloned();
                    let req = req.check().map_err(|e| e.to_string())?;
                    let mut blocks = self.local.assemble(&req, |_| {}).await.map_err(|e| e.to_string())?.blocks;
                    // An aggregated block's `source` is the aggregate source that sent it.
                    blocks.iter_mut().for_each(|b| b.hit.chunk.source.clear());
                    blocks
                }
                SourceKind::Ctxd => self.remote_context(s, query, share).await?,
                SourceKind::Mcp => self.mcp_context(s, query, share).await?,
            };
            if let Some(k) = key {
                self.cache().put(k, blocks.clone());
            }
            Ok::<_, String>((blocks, false, version))
        };
        let out = match tokio::time::timeout(limit, run).await {
            Ok(Ok((blocks, hit, version))) => (Ok(blocks), hit, version),
            Ok(Err(e)) => (Err(e), false, None),
            Err(_) => (Err("timeout".to_string()), false, None),
        };
        (out.0, started.elapsed().as_secs_f64() * 1000.0, out.1, out.2)
    }

    /// `req` carrying the source's bearer token, if it has one.
    fn authed(&self, s: &SourceSpec, req: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &s.token {
            Some(t) => req.bearer_auth(t),
            None => req,
        }
    }

    /// JSON from `<base><path>` (GET without a body, POST with one), any failure as a message.
    async fn remote_json(&self, s: &SourceSpec, path: &str, body: Option<Value>) -> Result<Value, String> {
        let base = s.url.as_deref().unwrap_or_default().trim_end_matches('/');
        let url = format!("{base}{path}");
        let req = match body {
            Some(b) => self.http.post(&url).json(&b),
            None => self.http.get(&url),
        };
        let resp = send(self.authed(s, req), &url).await?;
        resp.json().await.map_err(|e| format!("{url}: {e}"))
    }

    async fn remote_version(&self, s: &SourceSpec) -> Result<u64, String> {
        let v = self.remote_json(s, "/v1/status", None).await?;
        v["version"].as_u64().ok_or_else(|| format!("{}/v1/status: no version", s.url.as_deref().unwrap_or_default()))
    }

    async fn remote_context(&self, s: &SourceSpec, query: &str, share: usize) -> Result<Vec<Block>, String> {
        let v = self.remote_json(s, "/v1/context", Some(json!({ "query": query, "budget": share }))).await?;
        serde_json::from_value(v["blocks"].clone())
            .map_err(|e| format!("{}/v1/context: {e}", s.url.as_deref().unwrap_or_default()))
    }

    async fn mcp_context(&self, s: &SourceSpec, query: &str, share: usize) -> Result<Vec<Block>, String> {
        let url = s.url.clone().unwrap_or_default();
        let rpc = |id: u64, method: &str, params: Value| json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let init = rpc(
            1,
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "ctxd-aggregator", "version": env!("CARGO_PKG_VERSION")}}),
        );
        let post = |body: &Value, session: Option<&str>| {
            let req = self.authed(s, self.http.post(&url)).header("accept", "application/json, text/event-stream");
            match session {
                Some(id) => req.header("mcp-session-id", id),
                None => req,
            }
            .json(body)
        };
        let resp = send(post(&init, None), &format!("{url}: initialize")).await?;
        let session = resp.headers().get("mcp-session-id").and_then(|v| v.to_str().ok()).map(str::to_string);
        let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let _ = post(&note, session.as_deref()).send().await;
        let call = rpc(2, "tools/call", json!({"name": "get_context", "arguments": {"query": query, "budget": share}}));
        let resp = send(post(&call, session.as_deref()), &format!("{url}: tools/call")).await?;
        let text = resp.text().await.map_err(|e| format!("{url}: {e}"))?;
        // JSON, or an SSE stream whose data lines carry the JSON-RPC response.
        let v: Value = serde_json::from_str(&text)
            .or_else(|_| {
                text.lines()
                    .filter_map(|l| l.strip_prefix("data:"))
                    .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
                    .find(|v| v.get("id") == Some(&json!(2)))
                    .ok_or(())
            })
            .map_err(|_| format!("{url}: unreadable tools/call answer"))?;
        let result = &v["result"];
        if result["isError"] == json!(true) || v.get("error").is_some() {
            return Err(format!("{url}: get_context failed: {}", v));
        }
        // ctxd's structured answer carries citations; any server's text content becomes one block.
        let content: String = result["content"]
            .as_array()
            .map(|c| c.iter().filter_map(|p| p["text"].as_str()).collect::<Vec<_>>().join("\n"))
            .unwrap_or_default();
        if content.trim().is_empty() {
            return Ok(Vec::new());
        }
        let citation = result["structuredContent"]["citations"][0].as_str().unwrap_or("").to_string();
        let chunk = Chunk {
            path: if citation.is_empty() { format!("mcp:{}", s.name) } else { citation },
            language: "text".into(),
            content,
            ..Chunk::default()
        };
        Ok(vec![Block::new(Hit { chunk, score: 1.0 }, 0)])
    }
}
