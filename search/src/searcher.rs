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

use ctxd_index::store::Index;
use ctxd_models::service::EmbedService;

use crate::answers::{AnswerCache, Epoch, Lead};
use crate::error::SearchError;
use crate::pressure::Pressure;
use crate::retriever::Retriever;
use crate::routed::{QueryVector, Routed, Routing, Vocab};
use crate::search::{Mode, SearchRequest, SearchResponse, ValidSearch};

/// What [`Searcher::cached`] found: the answer, or that the caller computes it (holding the
/// lead that requests asking the same meanwhile wait for; `None` when not cacheable).
pub enum Cached {
    Answer(SearchResponse),
    Compute(Option<Lead>),
}

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
        let searcher = Self {
            core: Retriever::new(index, embed),
            routing: Routing::new(crate::rerank::RERANK_DEPTH),
            answers: AnswerCache::default(),
        };
        searcher.tell_model_of_waiting_queries(searcher.core.embed());
        searcher
    }

    /// Lets `embed`'s indexing slow down further while this searcher's queries wait for a slot
    /// (`ctxd_models::service`'s shares): every new model and every new pressure is told.
    fn tell_model_of_waiting_queries(&self, embed: Option<&EmbedService>) {
        if let Some(embed) = embed {
            embed.watch_queries_waiting(self.routing.pressure.waiting_probe());
        }
    }

    /// The same searcher rescoring `depth` candidates per routed search (0: never; see
    /// [`crate::rerank`]).
    pub fn with_rerank_depth(mut self, depth: usize) -> Self {
        self.routing.rerank_depth = depth;
        self
    }

    /// The same searcher rescoring with the cross-encoder `reranker` (its service:
    /// [`ctxd_models::cross`]) instead of late interaction; `None` keeps late interaction.
    pub fn with_reranker(mut self, reranker: Option<ctxd_models::service::EmbedService>) -> Self {
        self.routing.reranker = reranker;
        self
    }

    /// The same searcher shedding rescoring while `pressure` reports waiting queries (the
    /// serving process's admission control keeps it; see [`crate::pressure`]).
    pub fn with_pressure(mut self, pressure: Pressure) -> Self {
        self.routing.pressure = pressure;
        self.tell_model_of_waiting_queries(self.core.embed());
        self
    }

    /// The same searcher answering, while queries wait for a slot, from the answers of an index
    /// version superseded at most `stale_after` ago (zero: never; see [`crate::answers`]).
    pub fn with_stale_answers(mut self, stale_after: std::time::Duration) -> Self {
        self.answers = AnswerCache::with_stale_answers(stale_after);
        self
    }

    /// The same searcher stamping answers with the files changed since the last commit (see
    /// [`Retriever::stamp`]).
    pub fn with_changed_since(mut self, changed: ctxd_index::stamp::ChangedSince) -> Self {
        self.core = self.core.with_changed_since(changed);
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
        self.tell_model_of_waiting_queries(embed.as_ref());
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

    /// Embeds queries in one request to the model thread.
    pub async fn embed_queries(&self, queries: Vec<String>) -> Result<Vec<Vec<f32>>, SearchError> {
        self.core.embed_queries(queries).await
    }

    /// The answer cache's key of `req` on the pinned index: its epoch and the request. `None`:
    /// not cached (`as_of`, or a large `k`).
    async fn answer_key(&self, req: &SearchRequest) -> Result<Option<(Epoch, String)>, SearchError> {
        if req.as_of.is_some() || req.k > crate::answers::ANSWER_CACHE_MAX_K {
            return Ok(None);
        }
        let index = self.core.pinned_index();
        let epoch = Epoch {
            database: index.uri().to_string(),
            table: index.table_name().to_string(),
            model: index.model_id().to_string(),
            version: index.version().await?,
            // The git refs' overlays change how a ref reads without a new version of the table.
            overlays: index.reads().overlays_version().await?,
        };
        Ok(Some((epoch, format!("{req:?}"))))
    }

    /// The answer of `req` at the latest version if it is kept, or once another request that
    /// is computing it now has finished; else what the caller must do to compute it (with the
    /// [`Lead`] others will wait for, when the answer is cacheable). Nothing is computed here:
    /// a serving process asks this before it queues the request for a slot.
    pub async fn cached(&self, req: &ValidSearch) -> Result<Cached, SearchError> {
        let Some((epoch, key)) = self.current().answer_key(req).await? else { return Ok(Cached::Compute(None)) };
        loop {
            let loaded = self.routing.pressure.queued() > 0;
            if let Some(mut answer) = self.answers.peek(&epoch, &key, loaded) {
                // Kept at this epoch: the files changed since move on (a stale or carried answer
                // keeps its own).
                if let Some(stamp) = answer.index.as_mut().filter(|s| s.version == epoch.version) {
                    stamp.changed_since = self.core.changed_since();
                }
                return Ok(Cached::Answer(answer));
            }
            // Another request computing it: wait, then look again (it may have failed).
            if let Some(lead) = self.answers.lead(&epoch, &key).await {
                return Ok(Cached::Compute(Some(lead)));
            }
        }
    }

    /// The lead to compute `req` again at the latest version after a stale or carried answer
    /// was served for it ([`crate::answers`]): `None` when it is not cacheable, already
    /// answered at the latest version, or being computed by another request now.
    pub async fn revalidation(&self, req: &ValidSearch) -> Option<Lead> {
        let (epoch, key) = self.current().answer_key(req).await.ok()??;
        if self.answers.holds(&epoch, &key) {
            return None;
        }
        self.answers.try_lead(&epoch, &key).ok()
    }

    /// Answers a request; a request asked before at the same index version is answered from
    /// the answer cache ([`crate::answers`]).
    pub async fn search(&self, req: &ValidSearch) -> Result<SearchResponse, SearchError> {
        // One index and model for the whole request, even if a model switch lands meanwhile.
        let pinned = self.current();
        // The version read and how fresh it is; a kept answer of the same epoch read the same
        // version, and is stamped again (the files changed since move on).
        let stamp = pinned.core.stamp(req.as_of.as_deref()).await?;
        let stamped = |answer: SearchResponse| SearchResponse { index: Some(stamp.clone()), ..answer };
        let Some((epoch, key)) = pinned.answer_key(req).await? else {
            return Ok(stamped(pinned.search_uncached(req).await?.response));
        };
        let pressure = &self.routing.pressure;
        if let Some(hit) = self.answers.get(&epoch, &key, pressure.queued() > 0) {
            return Ok(stamped(hit));
        }
        let computed = pinned.search_uncached(req).await?;
        let answer = stamped(computed.response);
        self.answers.put(&epoch, key, Arc::new(answer.clone()), computed.full, computed.read);
        Ok(answer)
    }

    /// The answer, whether it is the one an idle process gives (false: rescoring was shed
    /// under load) and the files it answers with where known (see [`crate::answers`]).
    async fn search_uncached(&self, req: &ValidSearch) -> Result<Routed, SearchError> {
        if let (Mode::Routed, Some(embed)) = (req.mode, self.core.embed()) {
            return self.routing.answer(&self.core, req, QueryVector::Embed(embed)).await;
        }
        let vector = match (req.mode, self.core.embed()) {
            (Mode::Bm25 | Mode::Symbol, _) | (Mode::Hybrid | Mode::Routed, None) => None,
            (Mode::Vector, None) => return Err(SearchError::NoModel("vector")),
            (_, Some(embed)) => embed.embed(vec![req.query.clone()]).await?.into_iter().next(),
        };
        // The plain modes keep no `read`: their answers are never carried across commits.
        Ok(Routed { response: self.search_with_vector(req, vector.as_deref()).await?, full: true, read: None })
    }

    /// Answers a request whose query vector is already computed (`None` for bm25).
    pub async fn search_with_vector(
        &self,
        req: &ValidSearch,
        vector: Option<&[f32]>,
    ) -> Result<SearchResponse, SearchError> {
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
        req: &ValidSearch,
        vector: QueryVector<'_>,
    ) -> Result<SearchResponse, SearchError> {
        self.routing.search(&self.core, req, vector).await
    }

    /// The symbol table alone: the query's identifiers, or else its longer words, as names.
    pub async fn symbol_search(&self, req: &ValidSearch) -> Result<SearchResponse, SearchError> {
        crate::routed::symbol_search(&self.core, req).await
    }

    /// Indexed paths and folder names of the latest version (cached for a few seconds).
    pub async fn latest_vocab(&self) -> Result<Arc<Vocab>, SearchError> {
        self.routing.latest_vocab(&self.core).await
    }
}
