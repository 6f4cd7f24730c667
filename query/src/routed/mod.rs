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
//! (index, model) pair — shared by the clones of a [`crate::Searcher`].

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use ctxd_index::Hit;

use crate::rerank::{rescore, RerankCache};
use crate::retriever::{PerBackend, Retriever};
use crate::route::{analyze, Route};
use crate::search::{SearchRequest, SearchResponse, SearchResult};
use crate::SearchError;

mod lookup;
mod text;
mod vocab;

pub use crate::search::Scope;
pub(crate) use vocab::Vocab;

pub(crate) use lookup::symbol_search;
use lookup::{path_hits, symbol_hits};
use text::{bm25_text, last_distinct_terms};

/// Folders whose contents count as dependencies, not the project.
const DEPENDENCY_DIRS: &[&str] =
    &["node_modules", "vendor", "third_party", "third-party", "external", "site-packages", ".venv", "venv", "deps"];

/// A chunk of a definition kind ([`ctxd_index::is_definition`], the symbols table's rule too).
fn is_definition(kind: Option<&str>) -> bool {
    kind.is_some_and(ctxd_index::is_definition)
}

/// A language label of prose (Markdown, reST, text, HTML, PDF, notebooks).
pub(crate) fn is_document(language: &str) -> bool {
    matches!(language, "markdown" | "rst" | "text" | "html" | "pdf" | "notebook")
}

fn parent_dir(path: &str) -> &str {
    path.rsplit_once('/').map(|(d, _)| d).unwrap_or("")
}

fn in_dependency(path: &str) -> bool {
    path.split('/').any(|seg| DEPENDENCY_DIRS.contains(&seg))
}

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
    Embed(&'a ctxd_models::EmbedService),
}

/// IVF partitions a lean query's vector search visits (LanceDB's default is 20).
pub(crate) const LEAN_NPROBES: usize = 6;

/// How many hits each signal contributes to the fusion for `k` results.
pub(crate) fn search_depth(k: usize) -> usize {
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
}

/// A routed answer and whether it is the one an idle process gives: false when rescoring was
/// shed under load ([`crate::pressure`]) and the kept scores did not cover the full depth.
pub(crate) struct Routed {
    pub response: SearchResponse,
    pub full: bool,
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
        Self { caches: PerBackend::default(), rerank_depth, pressure: Default::default() }
    }

    /// Indexed paths and folder names of the latest version of `core`'s index (cached for a
    /// few seconds).
    pub(crate) async fn latest_vocab(&self, core: &Retriever) -> Result<Arc<Vocab>, SearchError> {
        self.caches.of(core).vocabs.latest(core.pinned_index()).await
    }

    /// Answers a request by routing it (see the module docs).
    pub async fn search(
        &self,
        core: &Retriever,
        req: &SearchRequest,
        vector: QueryVector<'_>,
    ) -> Result<SearchResponse, SearchError> {
        Ok(self.answer(core, req, vector).await?.response)
    }

    /// [`Routing::search`], saying whether rescoring was shed under load.
    pub(crate) async fn answer(
        &self,
        core: &Retriever,
        req: &SearchRequest,
        vector: QueryVector<'_>,
    ) -> Result<Routed, SearchError> {
        req.validate()?;
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
        let k = req.k;
        let depth = search_depth(k);
        let mut text = bm25_text(&req.query, &a);
        if req.lean {
            // A window of code has dozens of terms; BM25 cost grows with each one. The
            // distinct words nearest the end (the cursor) carry the intent.
            text = last_distinct_terms(&text, LEAN_BM25_TERMS);
        }
        // Lean (completion) queries visit fewer IVF partitions: latency over the last neighbours.
        let probes = req.lean.then_some(LEAN_NPROBES);
        // The full-text search runs while the query is being embedded, not after.
        let (vec_hits, fts_hits) = tokio::join!(
            async {
                match vector {
                    QueryVector::Ready(v) => Ok(index.vector_search_probes(v, depth, probes).await?),
                    QueryVector::Embed(embed) => {
                        let v = embed.embed(vec![req.query.clone()]).await?;
                        Ok(index.vector_search_probes(&v[0], depth, probes).await?)
                    }
                    QueryVector::None => Ok::<_, SearchError>(Vec::new()),
                    QueryVector::Hits(hits) => Ok(hits.to_vec()),
                }
            },
            index.fts_search(&text, if req.lean { LEAN_FTS_DEPTH.min(depth) } else { depth })
        );
        let mut lists = vec![(w.vector, vec_hits?), (w.bm25, fts_hits?)];
        if !a.symbols.is_empty() && !req.lean {
            lists.push((w.symbol, symbol_hits(&index, &a.symbols, 20).await?));
        }
        // A path route answers with the named file's chunks, nearest the line first; the
        // other signals fill the remaining slots. Elsewhere, named files (e.g. a trace's
        // frames) are one more signal.
        let mut pinned: Vec<Hit> = Vec::new();
        if !a.paths.is_empty() && !req.lean {
            let hits = path_hits(&index, &vocab, &a).await?;
            if a.route == Route::Path {
                pinned = hits;
            } else {
                lists.push((0.8, hits));
            }
        }
        let mut fused = crate::fusion::weighted(&lists);

        let current = req.current_file.as_deref().map(|f| f.trim_start_matches("./"));
        let current_dir = current.map(parent_dir);
        for h in &mut fused {
            let mut m = 1.0;
            if is_definition(h.kind.as_deref()) {
                m *= w.definition_boost;
            }
            if is_document(&h.language) {
                m *= w.doc_boost;
            }
            if a.modules.iter().any(|md| {
                let md = md.to_lowercase();
                h.path.to_lowercase().split('/').any(|seg| seg == md)
            }) {
                m *= 1.25;
            }
            // Vendored and installed copies rank below the project's own code.
            if req.scope != Some(Scope::Dependencies) && in_dependency(&h.path) {
                m *= 0.9;
            }
            if current == Some(h.path.as_str()) {
                m *= 1.2;
            } else if current_dir.is_some_and(|d| !d.is_empty() && parent_dir(&h.path) == d) {
                m *= 1.1;
            }
            h.score *= m;
        }
        fused.sort_by(|x, y| y.score.total_cmp(&x.score));
        let passes = |h: &Hit| {
            if req.path_prefix.as_ref().is_some_and(|p| !h.path.starts_with(p.trim_start_matches("./"))) {
                return false;
            }
            if req.language.is_some_and(|l| !h.language.eq_ignore_ascii_case(l.as_str())) {
                return false;
            }
            match req.scope {
                None => true,
                Some(Scope::File) => current == Some(h.path.as_str()),
                Some(Scope::Module) => current_dir.is_some_and(|d| h.path.starts_with(d)),
                Some(Scope::Project) => !in_dependency(&h.path),
                Some(Scope::Dependencies) => in_dependency(&h.path),
            }
        };
        // Whether the answer is the one an idle process gives (rescoring not shed under load).
        let mut full = true;
        if !req.lean && req.rerank != Some(false) && self.rerank_depth > 0 && w.vector > 0.0 {
            if let Some(embed) = core.embed() {
                let shed = self.pressure.rerank_depth(self.rerank_depth);
                full = rescore(embed, &caches.rerank, &req.query, &mut fused, &passes, self.rerank_depth, shed).await;
            }
        }
        // The files a path route names are not capped.
        let named: HashSet<String> = pinned.iter().map(|h| h.path.clone()).collect();
        if !pinned.is_empty() {
            let top = fused.first().map_or(1.0, |h| h.score.max(1e-6));
            let pinned_ids: HashSet<String> = pinned.iter().map(|h| h.chunk_id.clone()).collect();
            fused.retain(|h| !pinned_ids.contains(&h.chunk_id));
            let n = pinned.len();
            for (i, h) in pinned.iter_mut().enumerate() {
                h.score = top * (2.0 - i as f32 / n as f32);
            }
            pinned.append(&mut fused);
            fused = pinned;
        }

        let cap = req.max_per_file.unwrap_or(3).max(1);
        let mut per_file: HashMap<String, usize> = HashMap::new();
        let mut results = Vec::with_capacity(k);
        for h in fused {
            if !passes(&h) {
                continue;
            }
            let n = per_file.entry(h.path.clone()).or_default();
            if *n >= cap && !named.contains(&h.path) {
                continue;
            }
            *n += 1;
            results.push(SearchResult::from(h));
            if results.len() >= k {
                break;
            }
        }
        metrics::counter!(crate::metrics::ROUTE_QUERIES_TOTAL, "route" => a.route.as_str(), "intent" => a.intent.as_str())
            .increment(1);
        let response =
            SearchResponse { results, version, route: Some(a.route), intent: Some(a.intent), stale_ms: None };
        Ok(Routed { response, full })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dependency_folders_and_kinds() {
        assert!(in_dependency("web/node_modules/react/index.js"));
        assert!(!in_dependency("src/vendor_api.rs"));
        assert!(is_definition(Some("function_part")) && !is_definition(Some("section")) && !is_definition(None));
    }
}
