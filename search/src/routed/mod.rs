//! Routed search: the router's analysis ([`crate::route`]) turned into one ranked list.
//!
//! Every query gets the vector and BM25 signals (BM25 on the query plus the words of its
//! identifiers, so `getUserById` also matches `get_user_by_id` and "user by id"); a query that
//! names identifiers adds the **symbol** signal (symbol table: exact, then prefix, then the
//! last path segment — `Type::method` → `method`); a query that names a file adds that file's
//! chunks, nearest the given line first; a stack trace adds the files of its frames. The lists
//! are fused by a weighted sum of min-max-normalised scores (weights from the intent), then:
//!
//! * whole definitions are boosted over mentions, documents up or down by intent;
//! * chunks in dependency folders (`vendor/`, `node_modules/`, …) are ranked slightly lower;
//! * chunks in the caller's `current_file` (and its folder) or in a module the query names are
//!   boosted;
//! * `path_prefix`, `language` and `scope` (`file|module|project|dependencies`) filter;
//! * the best 30 candidates (`[server] rerank_depth`) that pass the filters are rescored by
//!   late interaction with the model's token embeddings ([`crate::rerank`]; not for lean
//!   requests or `rerank: false`);
//! * at most `max_per_file` chunks per file (default 3), so one file cannot take every slot.
//!
//! The pieces: the path vocabulary and its caches (`vocab`), the symbol-table and path lookups
//! (`lookup`), the BM25 text (`text`); fusion is [`crate::fusion`], rescoring [`crate::rerank`].
//! [`Routing`] is the router's state — the vocabularies and the rescoring caches of each
//! (index, model) pair — shared by the clones of a [`crate::searcher::Searcher`].

use std::sync::Arc;

use ctxd_index::record::Hit;
use ctxd_index::search::Probes;

use crate::answers::read_keys;
use crate::error::SearchError;
use crate::rerank::{rescore, RerankCache, Rescorer};
use crate::retriever::{PerBackend, Retriever};
use crate::route::{analyze, Analysis, IntentWeights, Route};
use crate::search::{SearchRequest, SearchResponse, ValidSearch};

mod lookup;
pub(crate) mod order;
mod text;
mod vocab;

pub use order::is_document;

pub use vocab::Vocab;

pub(crate) use lookup::symbol_search;
use lookup::{path_hits, symbol_hits};
use order::{boost, capped, pin, Filter};
use text::{bm25_text, last_distinct_terms};

/// Where the routed search's query vector comes from.
#[derive(Clone, Copy)]
pub enum QueryVector<'a> {
    /// No vector signal (no model, or BM25-only rows).
    None,
    /// The vector search already ran (completion reuses the neighbours of the chunk at the
    /// cursor): its hits, [`search_depth`] of them at most.
    Hits(&'a [Hit]),
    /// Computed by the caller (evaluation embeds queries in batches).
    Ready(&'a [f32]),
    /// Embedded by the search, concurrently with the full-text search.
    Embed(&'a ctxd_models::service::EmbedService),
}

/// How many hits each signal contributes to the fusion for `k` results.
pub fn search_depth(k: usize) -> usize {
    (k * 4).max(50)
}

/// Terms a lean (completion) query keeps for BM25, and the full-text hits it fuses. Measured on
/// 255k chunks (`benches/completion_latency.py --keystrokes 10`): 10 terms and 50 hits p90 30 ms,
/// 4 terms and 15 hits p90 16 ms; `benches/completion_quality.py` 0.185 vs 0.215 (no loss).
const LEAN_BM25_TERMS: usize = 4;
const LEAN_FTS_DEPTH: usize = 15;

/// The router's state, shared by clones: the caches of the (index, model) pair a request is
/// pinned to, and how many candidates a routed search rescores.
#[derive(Clone)]
pub struct Routing {
    caches: PerBackend<Caches>,
    /// Candidates routed searches rescore by late interaction (0: none).
    pub(crate) rerank_depth: usize,
    /// The process's query load: rescoring shrinks while queries wait ([`crate::pressure`]).
    pub(crate) pressure: crate::pressure::Pressure,
    /// A cross-encoder rescoring in place of late interaction (`[rerank] model`).
    pub(crate) reranker: Option<ctxd_models::service::EmbedService>,
}

/// A routed answer and whether it is the one an idle process gives: false when rescoring was
/// shed under load ([`crate::pressure`]) and the kept scores did not cover the full depth.
pub(crate) struct Routed {
    pub response: SearchResponse,
    pub full: bool,
    /// The files it answers with ([`crate::answers::read_keys`]); `None` when it has fewer than
    /// `k` results or one is shown under another name than it is stored by (a git ref's view of
    /// its base's file): never carried across commits.
    pub read: Option<Arc<[u64]>>,
}

/// What the router keeps per (index, model) pair.
#[derive(Default)]
struct Caches {
    /// Indexed paths and folder names, of the latest version and of queried snapshots.
    vocabs: vocab::Vocabs,
    /// Token embeddings and MaxSim scores of recently rescored chunks (this model's).
    rerank: RerankCache,
}

impl Routing {
    /// A router rescoring `rerank_depth` candidates per search (0: never).
    pub fn new(rerank_depth: usize) -> Self {
        Self { caches: PerBackend::default(), rerank_depth, pressure: Default::default(), reranker: None }
    }

    /// Indexed paths and folder names of the latest version of `core`'s index (cached for a
    /// few seconds).
    pub async fn latest_vocab(&self, core: &Retriever) -> Result<Arc<Vocab>, SearchError> {
        self.caches.of(core).vocabs.latest(core.pinned_index()).await
    }

    /// Whether `req` will be rescored by late interaction with the model's token states (so its
    /// query's token states are worth taking from the pass that embeds it).
    fn late_interaction(&self, core: &Retriever, req: &SearchRequest, w: &IntentWeights) -> bool {
        !req.lean
            && req.rerank != Some(false)
            && self.rerank_depth > 0
            && w.vector > 0.0
            && self.reranker.is_none()
            && core.embed().is_some_and(|e| e.token_states())
    }

    /// Answers a request by routing it (see the module docs).
    pub async fn search(
        &self,
        core: &Retriever,
        req: &ValidSearch,
        vector: QueryVector<'_>,
    ) -> Result<SearchResponse, SearchError> {
        Ok(self.answer(core, req, vector).await?.response)
    }

    /// [`Routing::search`], saying whether rescoring was shed under load.
    pub(crate) async fn answer(
        &self,
        core: &Retriever,
        req: &ValidSearch,
        vector: QueryVector<'_>,
    ) -> Result<Routed, SearchError> {
        let caches = self.caches.of(core);
        // The path vocabulary (for recognising paths in the query) is the whole index's, cached
        // per version; every read that answers goes through the view of the asked sources.
        let (whole, version) = core.index_as_of(req.as_of.as_deref(), None).await?;
        let vocab = match version {
            None => caches.vocabs.latest(&whole).await?,
            Some(v) => caches.vocabs.at(v, &whole).await?,
        };
        let index = match &req.source {
            None => whole,
            Some(scope) => Arc::new(whole.scoped(Some(scope.clone())).await?),
        };
        let a = analyze(&req.query, |w| vocab.modules.contains(&w.to_lowercase()));
        let w = a.intent.weights();
        let late = self.late_interaction(core, req, &w).then_some(&caches.rerank);
        let (lists, pinned) = signals(&index, &vocab, req, &a, &w, vector, late).await?;
        let mut fused = crate::fusion::weighted(&lists);
        boost(&mut fused, req, &a, &w);
        let filter = Filter::new(req);
        let passes = |h: &Hit| filter.passes(h);
        // Whether the answer is the one an idle process gives (rescoring not shed under load).
        let mut full = true;
        if !req.lean
            && req.rerank != Some(false)
            && self.rerank_depth > 0
            && (w.vector > 0.0 || self.reranker.is_some())
        {
            let rescorer = match (&self.reranker, core.embed()) {
                (Some(cross), _) => Some(Rescorer::CrossEncoder(cross)),
                (None, Some(embed)) => Some(Rescorer::LateInteraction(embed, Some(&*index))),
                (None, None) => None,
            };
            if let Some(rescorer) = rescorer {
                let shed = self.pressure.rerank_depth(self.rerank_depth);
                full =
                    rescore(rescorer, &caches.rerank, &req.query, &mut fused, &passes, self.rerank_depth, shed).await;
            }
        }
        let (fused, named) = pin(fused, pinned);
        let results = capped(fused, &filter, &named, req.k, req.max_per_file);
        // Never carried: an answer with fewer than `k` results (a changed file that matches now
        // joins it for sure), and one showing a file under another name than it is stored by (a
        // scoped view shows a git ref's files shared with its base under the ref's name).
        let stored = |h: &Hit| req.source.as_ref().is_none_or(|scope| scope.allows(&h.path));
        let carried = results.len() >= req.k && results.iter().all(stored);
        let read = carried.then(|| read_keys(results.iter().map(|h| h.path.as_str())));
        metrics::counter!(crate::metrics::ROUTE_QUERIES_TOTAL, "route" => a.route.as_str(), "intent" => a.intent.as_str())
            .increment(1);
        let response = SearchResponse {
            results,
            version,
            route: Some(a.route),
            intent: Some(a.intent),
            stale_ms: None,
            carried_ms: None,
            index: None,
        };
        Ok(Routed { response, full, read })
    }
}

/// The ranked lists fusion weighs (vector, BM25, and the symbol table or the named files when
/// the query shows them), and the chunks of the files a path route names (answered first).
async fn signals(
    index: &ctxd_index::store::Index,
    vocab: &Vocab,
    req: &SearchRequest,
    a: &Analysis,
    w: &IntentWeights,
    vector: QueryVector<'_>,
    late: Option<&RerankCache>,
) -> Result<(Vec<(f32, Vec<Hit>)>, Vec<Hit>), SearchError> {
    let depth = search_depth(req.k);
    let mut text = bm25_text(&req.query, a);
    if req.lean {
        // A window of code has dozens of terms; BM25 cost grows with each one. The
        // distinct words nearest the end (the cursor) carry the intent.
        text = last_distinct_terms(&text, LEAN_BM25_TERMS);
    }
    // Lean (completion) queries visit fewer IVF partitions: latency over the last neighbours.
    let probes = if req.lean { Probes::LEAN } else { Probes::DEFAULT };
    // Every signal runs in one join: the full-text search, the symbol table and the named files
    // while the query is being embedded and searched, not after.
    let symbols = !a.symbols.is_empty() && !req.lean;
    let paths = !a.paths.is_empty() && !req.lean;
    let (vec_hits, fts_hits, named_symbols, named_files) = tokio::join!(
        async {
            match vector {
                QueryVector::Ready(v) => {
                    Ok(timed(Signal::Vector, index.reads().vector_search_with(v, depth, probes)).await?)
                }
                QueryVector::Embed(embed) => {
                    let v = timed(Signal::Embed, query_vector(embed, &req.query, late)).await?;
                    Ok(timed(Signal::Vector, index.reads().vector_search_with(&v, depth, probes)).await?)
                }
                QueryVector::None => Ok::<_, SearchError>(Vec::new()),
                QueryVector::Hits(hits) => Ok(hits.to_vec()),
            }
        },
        timed(
            Signal::Fulltext,
            index.reads().fts_search(&text, if req.lean { LEAN_FTS_DEPTH.min(depth) } else { depth })
        ),
        async {
            match symbols {
                true => timed(Signal::Symbols, symbol_hits(index, &a.symbols, 20)).await.map(Some),
                false => Ok(None),
            }
        },
        async {
            match paths {
                true => timed(Signal::Paths, path_hits(index, vocab, a)).await.map(Some),
                false => Ok(None),
            }
        }
    );
    let mut lists = vec![(w.vector, vec_hits?), (w.bm25, fts_hits?)];
    if let Some(hits) = named_symbols? {
        lists.push((w.symbol, hits));
    }
    // A path route answers with the named file's chunks, nearest the line first; the
    // other signals fill the remaining slots. Elsewhere, named files (e.g. a trace's
    // frames) are one more signal.
    let mut pinned: Vec<Hit> = Vec::new();
    if let Some(hits) = named_files? {
        if a.route == Route::Path {
            pinned = hits;
        } else {
            lists.push((0.8, hits));
        }
    }
    Ok((lists, pinned))
}

/// The query's vector from the model (or its cache). When the search will rescore by late
/// interaction (`late`) and the query's token states are not kept yet, one pass gives both, and
/// the token states are kept for the rescoring: a query is encoded once.
async fn query_vector(
    embed: &ctxd_models::service::EmbedService,
    query: &str,
    late: Option<&RerankCache>,
) -> Result<Vec<f32>, SearchError> {
    if let Some(cache) = late.filter(|c| !c.knows_query(query)) {
        if let Some(states) = embed.embed_query_with_tokens(query).await? {
            metrics::counter!(crate::metrics::QUERY_ENCODINGS_TOTAL).increment(1);
            cache.remember_query(query, states.tokens);
            return Ok(states.vector);
        }
    }
    if !embed.query_cached(query) {
        metrics::counter!(crate::metrics::QUERY_ENCODINGS_TOTAL).increment(1);
    }
    let mut v = embed.embed(vec![query.to_string()]).await?;
    v.pop().ok_or(SearchError::Embed(ctxd_models::error::ModelError::Count { expected: 1, got: 0 }))
}

/// The signals a routed search times (`ctxd_query_signal_duration_seconds{signal}`).
#[derive(Clone, Copy)]
enum Signal {
    /// The query's vector from the model thread (waiting for it included).
    Embed,
    /// The nearest chunks by vector.
    Vector,
    /// The BM25 search.
    Fulltext,
    /// The symbol-table lookup of the query's identifiers.
    Symbols,
    /// The chunks of the files the query names.
    Paths,
}

impl Signal {
    fn as_str(self) -> &'static str {
        match self {
            Self::Embed => "embed",
            Self::Vector => "vector",
            Self::Fulltext => "fulltext",
            Self::Symbols => "symbols",
            Self::Paths => "paths",
        }
    }
}

/// Runs `step`, recording its wall time as `signal`'s (failed steps too: their time was spent).
async fn timed<T>(signal: Signal, step: impl std::future::Future<Output = T>) -> T {
    let started = std::time::Instant::now();
    let out = step.await;
    metrics::histogram!(crate::metrics::SIGNAL_SECONDS, "signal" => signal.as_str())
        .record(started.elapsed().as_secs_f64());
    out
}
