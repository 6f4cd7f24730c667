//! The search handle every caller holds: one [`Searcher`] answers a [`SearchRequest`] in any
//! mode — routed ([`Routing`], the default), symbol, or the plain vector, BM25 and hybrid
//! modes ([`Retriever`]) — and follows model switches.
//!
//! It is the two layers side by side, nothing more: the core ([`Retriever`]: the pinned index
//! and model, snapshot views, the plain modes) and the router's state ([`Routing`]: its
//! vocabularies and the rescoring token cache, kept per (index, model) pair). Clones share
//! both. Consumers above it keep their own state: completion context its cache (`Completer`),
//! context assembly its tokenizer (`Assembler`).

use std::sync::Arc;

use ctxd_index::Index;
use ctxd_models::EmbedService;

use crate::answers::AnswerCache;
use crate::pressure::Pressure;
use crate::retriever::Retriever;
use crate::routed::{QueryVector, Routing, Vocab};
use crate::search::{Mode, SearchRequest, SearchResponse};
use crate::SearchError;

/// Answers queries against one index (see the module docs).
///
/// Each request pins the (index, model) pair in force when it starts ([`Searcher::search`]),
/// so a query vector is never searched in a table of another model; [`Searcher::switch`]
/// replaces the pair for every clone.
#[derive(Clone)]
pub struct Searcher {
    core: Retriever,
    routing: Routing,
    /// Answers of the current index version ([`crate::answers`]).
    answers: AnswerCache,
}

impl Searcher {
    /// A searcher over `index`, embedding queries with `embed` (same model as the index).
    /// Without a model (a full-text-only index, or a bm25-only caller) `hybrid` falls back to
    /// bm25 and `vector` is refused.
    pub fn new(index: Arc<Index>, embed: Option<EmbedService>) -> Self {
        Self {
            core: Retriever::new(index, embed),
            routing: Routing::new(crate::rerank::RERANK_DEPTH),
            answers: AnswerCache::default(),
        }
    }

    /// The same searcher rescoring `depth` candidates per routed search (0: never; see
    /// [`crate::rerank`]).
    pub fn with_rerank_depth(mut self, depth: usize) -> Self {
        self.routing.rerank_depth = depth;
        self
    }

    /// The same searcher shedding rescoring while `pressure` reports waiting queries (the
    /// serving process's admission control keeps it; see [`crate::pressure`]).
    pub fn with_pressure(mut self, pressure: Pressure) -> Self {
        self.routing.pressure = pressure;
        self
    }

    /// The load this searcher sheds work under.
    pub fn pressure(&self) -> &Pressure {
        &self.routing.pressure
    }

    /// This searcher pinned to the latest index and model.
    pub fn current(&self) -> Self {
        Self { core: self.core.current(), routing: self.routing.clone(), answers: self.answers.clone() }
    }

    /// Makes `index` and `embed` (a table of another model and that model) the ones every clone
    /// of this searcher uses from its next request on; requests in flight finish on the old pair.
    pub fn switch(&self, index: Arc<Index>, embed: Option<EmbedService>) {
        self.core.switch(index, embed);
    }

    /// The core: the pinned index and model.
    pub fn retriever(&self) -> &Retriever {
        &self.core
    }

    /// True when queries can be embedded.
    pub fn has_model(&self) -> bool {
        self.core.has_model()
    }

    /// The latest index (after a model switch: the new table).
    pub fn index(&self) -> Arc<Index> {
        self.core.index()
    }

    /// Checks a request's query and k.
    pub fn validate(req: &SearchRequest) -> Result<(), SearchError> {
        req.validate()
    }

    /// Embeds queries in one request to the model thread.
    pub async fn embed_queries(&self, queries: Vec<String>) -> Result<Vec<Vec<f32>>, SearchError> {
        self.core.embed_queries(queries).await
    }

    /// The answer cache's key of `req` on the pinned index: (table, version, model), the
    /// version, the request. `None`: not cached (`as_of`, or a large `k`).
    async fn answer_key(&self, req: &SearchRequest) -> Result<Option<(String, u64, String)>, SearchError> {
        if req.as_of.is_some() || req.k > crate::answers::ANSWER_CACHE_MAX_K {
            return Ok(None);
        }
        let index = self.core.pinned_index();
        let version = index.version().await?;
        // The git refs' overlays change how a ref reads without a new version of the table.
        let overlays = match index.overlays_version().await? {
            0 => String::new(),
            v => format!("+overlays@{v}"),
        };
        let epoch = format!("{}@{version}{overlays}:{}", index.table_name(), index.model_id());
        Ok(Some((epoch, version, format!("{req:?}"))))
    }

    /// The answer kept for `req` at the latest version, if any (nothing is computed; a serving
    /// process asks this before it queues the request for a slot).
    pub async fn cached(&self, req: &SearchRequest) -> Result<Option<SearchResponse>, SearchError> {
        req.validate()?;
        let Some((epoch, _, key)) = self.current().answer_key(req).await? else { return Ok(None) };
        let loaded = self.routing.pressure.queued() > 0;
        Ok(self.answers.peek(&epoch, &key, loaded).map(|a| (*a).clone()))
    }

    /// Answers a request; a request asked before at the same index version is answered from
    /// the answer cache ([`crate::answers`]).
    pub async fn search(&self, req: &SearchRequest) -> Result<SearchResponse, SearchError> {
        req.validate()?;
        // One index and model for the whole request, even if a model switch lands meanwhile.
        let pinned = self.current();
        let Some((epoch, version, key)) = pinned.answer_key(req).await? else {
            return pinned.search_uncached(req).await;
        };
        let pressure = &self.routing.pressure;
        if let Some(hit) = self.answers.get(&epoch, &key, pressure.queued() > 0) {
            return Ok((*hit).clone());
        }
        let depth = self.routing.rerank_depth;
        let full = pressure.rerank_depth(depth) == depth;
        let answer = pinned.search_uncached(req).await?;
        self.answers.put(&epoch, version, key, std::sync::Arc::new(answer.clone()), full);
        Ok(answer)
    }

    async fn search_uncached(&self, req: &SearchRequest) -> Result<SearchResponse, SearchError> {
        if let (Mode::Routed, Some(embed)) = (req.mode, self.core.embed()) {
            return self.routed_search(req, QueryVector::Embed(embed)).await;
        }
        let vector = match (req.mode, self.core.embed()) {
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
        req.validate()?;
        match req.mode {
            Mode::Routed => {
                let v = vector.map_or(QueryVector::None, QueryVector::Ready);
                self.routed_search(req, v).await
            }
            Mode::Symbol => self.symbol_search(req).await,
            _ => self.core.search_plain(req, vector).await,
        }
    }

    /// Answers a request by routing it (see [`crate::routed`]).
    pub async fn routed_search(
        &self,
        req: &SearchRequest,
        vector: QueryVector<'_>,
    ) -> Result<SearchResponse, SearchError> {
        self.routing.search(&self.core, req, vector).await
    }

    /// The symbol table alone: the query's identifiers, or else its longer words, as names.
    pub async fn symbol_search(&self, req: &SearchRequest) -> Result<SearchResponse, SearchError> {
        crate::routed::symbol_search(&self.core, req).await
    }

    /// Indexed paths and folder names of the latest version (cached for a few seconds).
    pub(crate) async fn latest_vocab(&self) -> Result<Arc<Vocab>, SearchError> {
        self.routing.latest_vocab(&self.core).await
    }
}
