//! Routed (the default, see [`crate::routed`]), vector, BM25 and hybrid (reciprocal-rank
//! fusion) search over the chunks table.

use std::collections::HashMap;
use std::str::FromStr;
use std::sync::Arc;

use ctxd_index::{AsOf, Hit, Index};
use ctxd_models::EmbedService;
use serde::{Deserialize, Deserializer, Serialize};

use crate::SearchError;

/// Longest query accepted, in bytes.
pub const MAX_QUERY_BYTES: usize = 8192;
/// Largest `k` accepted.
pub const MAX_K: usize = 200;
/// The RRF constant (Cormack et al. 2009).
const RRF_K: f32 = 60.0;

/// Which signal ranks the results.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// The router picks the signals and their weights (see [`crate::routed`]).
    #[default]
    Routed,
    Hybrid,
    Vector,
    Bm25,
    /// Only the symbol table (identifiers in the query, else its words as names).
    Symbol,
}

impl Mode {
    /// Lowercase name (metric label).
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Routed => "routed",
            Mode::Hybrid => "hybrid",
            Mode::Vector => "vector",
            Mode::Bm25 => "bm25",
            Mode::Symbol => "symbol",
        }
    }
}

impl FromStr for Mode {
    type Err = SearchError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "routed" | "auto" => Ok(Mode::Routed),
            "hybrid" => Ok(Mode::Hybrid),
            "vector" => Ok(Mode::Vector),
            "bm25" | "fts" => Ok(Mode::Bm25),
            "symbol" | "symbols" => Ok(Mode::Symbol),
            other => Err(SearchError::BadMode(other.to_string())),
        }
    }
}

fn default_k() -> usize {
    10
}

/// A search request (the body of `POST /v1/search`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchRequest {
    pub query: String,
    #[serde(default = "default_k")]
    pub k: usize,
    #[serde(default)]
    pub mode: Mode,
    /// Query this snapshot (a version number or a tag) instead of the latest version.
    #[serde(default, deserialize_with = "version_or_tag")]
    pub as_of: Option<String>,
    /// The caller's current file (relative path): its chunks and its folder's are boosted.
    #[serde(default)]
    pub current_file: Option<String>,
    /// Only paths under this prefix.
    #[serde(default)]
    pub path_prefix: Option<String>,
    /// Only this language (`rust`, `python`, `markdown`, …).
    #[serde(default)]
    pub language: Option<String>,
    /// `file`, `module` (both relative to `current_file`), `project` or `dependencies`.
    #[serde(default)]
    pub scope: Option<crate::routed::Scope>,
    /// At most this many chunks per file (routed mode; default 3).
    #[serde(default)]
    pub max_per_file: Option<usize>,
    /// Rescore the best candidates by late interaction (routed mode, see [`crate::rerank`]);
    /// on by default when the index has a model.
    #[serde(default)]
    pub rerank: Option<bool>,
    /// Routed mode without symbol-table and path lookups (vector + BM25 + boosts only): for
    /// latency-bound callers such as completion context. Not part of the JSON API.
    #[serde(skip)]
    pub lean: bool,
}

impl SearchRequest {
    /// A request for `query` with defaults (routed, k = 10, latest version).
    pub fn new(query: impl Into<String>) -> Self {
        Self {
            query: query.into(),
            k: default_k(),
            mode: Mode::default(),
            as_of: None,
            current_file: None,
            path_prefix: None,
            language: None,
            scope: None,
            max_per_file: None,
            rerank: None,
            lean: false,
        }
    }

    /// Same request with `k` and `mode`.
    pub fn with(mut self, k: usize, mode: Mode) -> Self {
        self.k = k;
        self.mode = mode;
        self
    }
}

/// `as_of` as a JSON number or string.
fn version_or_tag<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum V {
        N(u64),
        S(String),
    }
    Ok(Option::<V>::deserialize(d)?.map(|v| match v {
        V::N(n) => n.to_string(),
        V::S(s) => s,
    }))
}

/// One result.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SearchResult {
    /// Stable id of the chunk (path, range and content).
    #[serde(default)]
    pub chunk_id: String,
    pub path: String,
    pub start_line: u32,
    pub end_line: u32,
    pub symbol: Option<String>,
    pub kind: Option<String>,
    pub language: String,
    pub score: f32,
    pub content: String,
}

/// The answer: `{"results": [...]}` (plus `"version"` for an `as_of` query: the snapshot
/// searched).
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
pub struct SearchResponse {
    pub results: Vec<SearchResult>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<u64>,
    /// How the query was answered: a router route (`path`, `symbol`, `error`, `module`,
    /// `hybrid`) in routed mode, else the forced mode (`vector`, `bm25`, `hybrid`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route: Option<String>,
    /// The intent the router read from the query (routed mode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intent: Option<String>,
}

impl From<Hit> for SearchResult {
    fn from(h: Hit) -> Self {
        Self {
            chunk_id: h.chunk_id,
            path: h.path,
            start_line: h.start_line,
            end_line: h.end_line,
            symbol: h.symbol,
            kind: h.kind,
            language: h.language,
            score: h.score,
            content: h.content,
        }
    }
}

/// Reciprocal-rank fusion of ranked lists; ties keep the first list's order.
pub fn rrf(lists: &[Vec<Hit>], k: usize) -> Vec<Hit> {
    let mut fused = combine(
        lists
            .iter()
            .flat_map(|list| list.iter().enumerate().map(|(rank, hit)| (1.0 / (RRF_K + rank as f32 + 1.0), hit))),
    );
    fused.truncate(k);
    fused
}

/// Sums the `(contribution, hit)` pairs per chunk and ranks the chunks by their sums (the sum
/// becomes the score); ties keep first-seen order. The core of every fusion.
pub(crate) fn combine<'a>(contributions: impl IntoIterator<Item = (f32, &'a Hit)>) -> Vec<Hit> {
    let mut scores: HashMap<&str, (f32, usize, &Hit)> = HashMap::new();
    for (add, hit) in contributions {
        let order = scores.len();
        scores.entry(hit.chunk_id.as_str()).and_modify(|e| e.0 += add).or_insert((add, order, hit));
    }
    let mut fused: Vec<(f32, usize, &Hit)> = scores.into_values().collect();
    fused.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    fused
        .into_iter()
        .map(|(s, _, h)| {
            let mut h = h.clone();
            h.score = s;
            h
        })
        .collect()
}

/// Answers queries against one index.
///
/// A searcher is a *pinned* pair of index and query model plus a shared cell holding the
/// latest pair: [`Searcher::switch`] (a daemon following a model switch, see
/// `ctxd_index::active`) replaces the latest pair for every clone, and each request pins the
/// pair in force when it starts ([`Searcher::search`]), so a query vector is never searched
/// in a table of another model.
#[derive(Clone)]
pub struct Searcher {
    /// The pair this searcher answers with.
    pub(crate) pinned: Backend,
    /// The latest pair, shared by every clone.
    live: Arc<std::sync::RwLock<Backend>>,
    /// Candidates routed searches rescore by late interaction (0: none).
    pub(crate) rerank_depth: usize,
}

/// What a searcher searches with and its caches; replaced whole on a model switch.
#[derive(Clone)]
pub(crate) struct Backend {
    pub(crate) index: Arc<Index>,
    pub(crate) embed: Option<EmbedService>,
    /// Read-only views of past versions, by version (a few, most recently used last).
    views: Arc<tokio::sync::Mutex<Views>>,
    /// Indexed paths and folder names of the latest version (routed mode).
    pub(crate) vocab: crate::routed::VocabCache,
    /// Completion-context caches (file chunk vectors, neighbours, answers) of the latest version.
    pub(crate) completion: crate::completion::Cache,
    /// Token embeddings of recently rescored chunks (this model's).
    pub(crate) tokens: crate::rerank::TokenCache,
}

impl Backend {
    fn new(index: Arc<Index>, embed: Option<EmbedService>) -> Self {
        Self {
            index,
            embed,
            views: Arc::default(),
            vocab: Arc::default(),
            completion: Arc::default(),
            tokens: crate::rerank::token_cache(),
        }
    }
}

/// Open views of past versions, most recently used last.
type Views = Vec<View>;

/// A past version kept open, with its path vocabulary once a routed query needed it (a
/// snapshot never changes, so neither does its vocabulary).
#[derive(Clone)]
struct View {
    version: u64,
    index: Arc<Index>,
    vocab: Arc<tokio::sync::OnceCell<Arc<crate::routed::Vocab>>>,
}

/// Past versions kept open for `as_of` queries.
const OPEN_VIEWS: usize = 8;

impl Searcher {
    /// A searcher over `index`, embedding queries with `embed` (same model as the index).
    /// Without a model (a full-text-only index, or a bm25-only caller) `hybrid` falls back to
    /// bm25 and `vector` is refused.
    pub fn new(index: Arc<Index>, embed: Option<EmbedService>) -> Self {
        let pinned = Backend::new(index, embed);
        Self {
            live: Arc::new(std::sync::RwLock::new(pinned.clone())),
            pinned,
            rerank_depth: crate::rerank::RERANK_DEPTH,
        }
    }

    /// The same searcher rescoring `depth` candidates per routed search (0: never; see
    /// [`crate::rerank`]).
    pub fn with_rerank_depth(mut self, depth: usize) -> Self {
        self.rerank_depth = depth;
        self
    }

    /// This searcher pinned to the latest index and model.
    pub fn current(&self) -> Self {
        let pinned = self.live.read().unwrap_or_else(|e| e.into_inner()).clone();
        Self { pinned, live: self.live.clone(), rerank_depth: self.rerank_depth }
    }

    /// Makes `index` and `embed` (a table of another model and that model) the ones every clone
    /// of this searcher uses from its next request on; requests in flight finish on the old pair.
    pub fn switch(&self, index: Arc<Index>, embed: Option<EmbedService>) {
        let backend = Backend::new(index, embed);
        *self.live.write().unwrap_or_else(|e| e.into_inner()) = backend;
    }

    /// The index to search for `as_of` (the latest when `None`) and the version it is at.
    pub(crate) async fn index_as_of(&self, as_of: Option<&str>) -> Result<(Arc<Index>, Option<u64>), SearchError> {
        let Some(spec) = as_of else { return Ok((self.pinned.index.clone(), None)) };
        let view = self.view(spec).await?;
        Ok((view.index, Some(view.version)))
    }

    /// The open view of the version `spec` names (opened, and the oldest view closed, when
    /// it is not open yet).
    async fn view(&self, spec: &str) -> Result<View, SearchError> {
        let as_of: AsOf = spec.parse().map_err(|e: ctxd_index::IndexError| SearchError::BadSnapshot(e.to_string()))?;
        let version = self.pinned.index.resolve(&as_of).await.map_err(snapshot_error)?;
        let mut views = self.pinned.views.lock().await;
        if let Some(i) = views.iter().position(|v| v.version == version) {
            let view = views.remove(i);
            views.push(view);
        } else {
            let index = Arc::new(self.pinned.index.at(version).await.map_err(snapshot_error)?);
            if views.len() >= OPEN_VIEWS {
                views.remove(0);
            }
            views.push(View { version, index, vocab: Arc::default() });
        }
        Ok(views.last().expect("just pushed").clone())
    }

    /// The index for `as_of` with its path vocabulary (the latest one's is refreshed every few
    /// seconds, a snapshot's built once per open view).
    pub(crate) async fn index_and_vocab(
        &self,
        as_of: Option<&str>,
    ) -> Result<(Arc<Index>, Option<u64>, Arc<crate::routed::Vocab>), SearchError> {
        let Some(spec) = as_of else {
            return Ok((self.pinned.index.clone(), None, self.latest_vocab().await?));
        };
        let view = self.view(spec).await?;
        let build = || async { Ok::<_, SearchError>(Arc::new(crate::routed::Vocab::build(&view.index).await?)) };
        let vocab = view.vocab.get_or_try_init(build).await?.clone();
        Ok((view.index, Some(view.version), vocab))
    }

    /// True when queries can be embedded.
    pub fn has_model(&self) -> bool {
        self.pinned.embed.is_some()
    }

    /// The latest index (after a model switch: the new table).
    pub fn index(&self) -> Arc<Index> {
        self.live.read().unwrap_or_else(|e| e.into_inner()).index.clone()
    }

    /// Checks a request's query and k.
    pub fn validate(req: &SearchRequest) -> Result<(), SearchError> {
        if req.query.trim().is_empty() {
            return Err(SearchError::EmptyQuery);
        }
        if req.query.len() > MAX_QUERY_BYTES {
            return Err(SearchError::QueryTooLong { len: req.query.len(), limit: MAX_QUERY_BYTES });
        }
        if req.k == 0 || req.k > MAX_K {
            return Err(SearchError::BadK { got: req.k, max: MAX_K });
        }
        Ok(())
    }

    /// Embeds queries in one request to the model thread.
    pub async fn embed_queries(&self, queries: Vec<String>) -> Result<Vec<Vec<f32>>, SearchError> {
        let embed = self.pinned.embed.as_ref().ok_or(SearchError::NoModel("vector"))?;
        Ok(embed.embed(queries).await?)
    }

    /// Answers a request.
    pub async fn search(&self, req: &SearchRequest) -> Result<SearchResponse, SearchError> {
        Self::validate(req)?;
        // One index and model for the whole request, even if a model switch lands meanwhile.
        let pinned = self.current();
        pinned.search_pinned(req).await
    }

    async fn search_pinned(&self, req: &SearchRequest) -> Result<SearchResponse, SearchError> {
        if let (Mode::Routed, Some(embed)) = (req.mode, &self.pinned.embed) {
            return self.routed_search(req, crate::routed::QueryVector::Embed(embed)).await;
        }
        let vector = match (req.mode, &self.pinned.embed) {
            (Mode::Bm25 | Mode::Symbol, _) | (Mode::Hybrid | Mode::Routed, None) => None,
            (Mode::Vector, None) => return Err(SearchError::NoModel("vector")),
            (_, Some(embed)) => embed.embed(vec![req.query.clone()]).await?.into_iter().next(),
        };
        self.search_with_vector(req, vector.as_deref()).await
    }

    /// Answers a request whose query vector is already computed (`None` for bm25).
    pub async fn search_with_vector(
        &self,
        req: &SearchRequest,
        vector: Option<&[f32]>,
    ) -> Result<SearchResponse, SearchError> {
        Self::validate(req)?;
        match req.mode {
            Mode::Routed => {
                let v = vector.map_or(crate::routed::QueryVector::None, crate::routed::QueryVector::Ready);
                return self.routed_search(req, v).await;
            }
            Mode::Symbol => return self.symbol_search(req).await,
            _ => {}
        }
        let k = req.k;
        let (index, version) = self.index_as_of(req.as_of.as_deref()).await?;
        let hits = match (req.mode, vector) {
            (Mode::Bm25 | Mode::Symbol, _) => index.fts_search(&req.query, k).await?,
            (Mode::Vector, Some(v)) => index.vector_search(v, k).await?,
            (Mode::Hybrid | Mode::Routed, Some(v)) => {
                let depth = (k * 4).max(50);
                let (vec_hits, fts_hits) =
                    tokio::join!(index.vector_search(v, depth), index.fts_search(&req.query, depth));
                rrf(&[vec_hits?, fts_hits?], k)
            }
            (_, None) => index.fts_search(&req.query, k).await?,
        };
        let route = match (req.mode, vector) {
            (Mode::Hybrid, None) => Mode::Bm25,
            (m, _) => m,
        };
        Ok(SearchResponse {
            results: hits.into_iter().map(SearchResult::from).collect(),
            version,
            route: Some(route.as_str().to_string()),
            intent: None,
        })
    }
}

/// Unknown versions and tags are the caller's mistake; anything else is the server's.
fn snapshot_error(e: ctxd_index::IndexError) -> SearchError {
    match e {
        ctxd_index::IndexError::Snapshot { .. } => SearchError::BadSnapshot(e.to_string()),
        other => SearchError::Index(other),
    }
}

/// A bare hit with this chunk id (tests).
#[cfg(test)]
pub(crate) fn test_hit(id: &str) -> Hit {
    Hit {
        chunk_id: id.into(),
        path: format!("{id}.rs"),
        language: "rust".into(),
        symbol: None,
        kind: None,
        start_line: 1,
        end_line: 2,
        content: String::new(),
        score: 0.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use test_hit as hit;

    #[test]
    fn rrf_rewards_agreement() {
        let a = vec![hit("x"), hit("y"), hit("z")];
        let b = vec![hit("y"), hit("w")];
        let fused = rrf(&[a, b], 3);
        assert_eq!(fused[0].chunk_id, "y");
        assert_eq!(fused.len(), 3);
        assert!(fused[0].score > fused[1].score);
    }

    #[test]
    fn requests_are_validated() {
        let bad = |q: &str, k| Searcher::validate(&SearchRequest::new(q).with(k, Mode::Hybrid)).unwrap_err();
        assert!(matches!(bad("  ", 10), SearchError::EmptyQuery));
        assert!(matches!(bad("x", 0), SearchError::BadK { .. }));
        assert!(matches!(bad(&"x".repeat(MAX_QUERY_BYTES + 1), 10), SearchError::QueryTooLong { .. }));
        assert!("nope".parse::<Mode>().is_err());
        assert_eq!("BM25".parse::<Mode>().unwrap(), Mode::Bm25);
    }
}
