//! The core of every search: one (index, query model) pair, pinned per request and switchable
//! under running requests, the read-only views of past versions (`as_of`), and the plain modes
//! — vector, BM25 and hybrid (reciprocal-rank fusion).
//!
//! A retriever holds nothing of its consumers: routing, rescoring and completion keep their
//! caches in their own state, per [`Retriever::generation`] (see [`PerBackend`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use ctxd_index::stamp::{ChangedSince, IndexStamp};
use ctxd_index::{scope::SourceScope, snapshots::AsOf, store::Index};
use ctxd_models::service::EmbedService;

use crate::error::SearchError;
use crate::fusion::rrf;
use crate::route::Route;
use crate::search::{Mode, SearchResponse, ValidSearch};

/// Answers the plain modes against one index.
///
/// A retriever is a *pinned* pair of index and query model plus a shared cell holding the
/// latest pair: [`Retriever::switch`] (a daemon following a model switch, see
/// `ctxd_index::active`) replaces the latest pair for every clone, and each request pins the
/// pair in force when it starts ([`Retriever::current`]), so a query vector is never searched
/// in a table of another model.
#[derive(Clone)]
pub struct Retriever {
    /// The pair this retriever answers with.
    pinned: Backend,
    /// The latest pair, shared by every clone.
    live: Arc<std::sync::RwLock<Backend>>,
    /// Files changed since the last commit, where this process knows (a daemon's writer).
    changed_since: Option<ChangedSince>,
}

/// What a retriever searches with; replaced whole on a model switch.
#[derive(Clone)]
struct Backend {
    index: Arc<Index>,
    embed: Option<EmbedService>,
    /// Unique to this pair (and every clone of it): what consumers key their caches on.
    generation: u64,
    /// Read-only views of past versions, by version (a few, most recently used last).
    views: Arc<tokio::sync::Mutex<Vec<View>>>,
}

/// Generations handed out so far (0 is never one).
static GENERATIONS: AtomicU64 = AtomicU64::new(0);

impl Backend {
    fn new(index: Arc<Index>, embed: Option<EmbedService>) -> Self {
        let generation = GENERATIONS.fetch_add(1, Ordering::Relaxed) + 1;
        Self { index, embed, generation, views: Arc::default() }
    }
}

/// A past version kept open.
#[derive(Clone)]
struct View {
    version: u64,
    index: Arc<Index>,
}

/// Past versions kept open for `as_of` queries.
pub(crate) const OPEN_VIEWS: usize = 8;

impl Retriever {
    /// A retriever over `index`, embedding queries with `embed` (same model as the index).
    /// Without a model (a full-text-only index, or a bm25-only caller) `hybrid` falls back to
    /// bm25 and `vector` is refused.
    pub fn new(index: Arc<Index>, embed: Option<EmbedService>) -> Self {
        let pinned = Backend::new(index, embed);
        Self { live: Arc::new(std::sync::RwLock::new(pinned.clone())), pinned, changed_since: None }
    }

    /// The same retriever stamping answers of the latest version with `changed` (files changed
    /// since the last commit: a daemon's pipeline knows).
    pub fn with_changed_since(mut self, changed: ChangedSince) -> Self {
        self.changed_since = Some(changed);
        self
    }

    /// Files changed since the last commit, where this process knows.
    pub fn changed_since(&self) -> Option<u64> {
        self.changed_since.as_ref().map(|count| count())
    }

    /// The version an answer for `as_of` (the latest when `None`) reads, its commit time and,
    /// for the latest where this process knows, the files changed since
    /// ([`ctxd_index::stamp`]).
    pub async fn stamp(&self, as_of: Option<&str>) -> Result<IndexStamp, SearchError> {
        let (index, _) = self.index_as_of(as_of, None).await?;
        self.stamp_of(&index, as_of.is_none()).await
    }

    /// [`Self::stamp`] of an index the caller already opened with [`Self::index_as_of`]
    /// (`latest`: opened without `as_of`).
    pub async fn stamp_of(&self, index: &Index, latest: bool) -> Result<IndexStamp, SearchError> {
        let mut stamp = index.reads().stamp().await?;
        if latest {
            stamp.changed_since = self.changed_since();
        }
        Ok(stamp)
    }

    /// This retriever pinned to the latest index and model.
    pub fn current(&self) -> Self {
        let pinned = self.live.read().unwrap_or_else(|e| e.into_inner()).clone();
        Self { pinned, live: self.live.clone(), changed_since: self.changed_since.clone() }
    }

    /// Makes `index` and `embed` (a table of another model and that model) the ones every clone
    /// of this retriever uses from its next request on; requests in flight finish on the old
    /// pair.
    pub fn switch(&self, index: Arc<Index>, embed: Option<EmbedService>) {
        let backend = Backend::new(index, embed);
        *self.live.write().unwrap_or_else(|e| e.into_inner()) = backend;
    }

    /// The latest index (after a model switch: the new table).
    pub fn index(&self) -> Arc<Index> {
        self.live.read().unwrap_or_else(|e| e.into_inner()).index.clone()
    }

    /// The pinned index.
    pub fn pinned_index(&self) -> &Arc<Index> {
        &self.pinned.index
    }

    /// The pinned query model, if the index has one.
    pub fn embed(&self) -> Option<&EmbedService> {
        self.pinned.embed.as_ref()
    }

    /// The pinned pair's generation: a number no other pair (of any retriever) has.
    pub fn generation(&self) -> u64 {
        self.pinned.generation
    }

    /// True when queries can be embedded.
    pub fn has_model(&self) -> bool {
        self.pinned.embed.is_some()
    }

    /// Embeds queries in one request to the model thread.
    pub async fn embed_queries(&self, queries: Vec<String>) -> Result<Vec<Vec<f32>>, SearchError> {
        let embed = self.pinned.embed.as_ref().ok_or(SearchError::NoModel("vector"))?;
        Ok(embed.embed(queries).await?)
    }

    /// The index to search for `as_of` (the latest when `None`), narrowed to the sources of
    /// `source` (all when `None`; see [`crate::sources`]), and the version it is at.
    pub async fn index_as_of(
        &self,
        as_of: Option<&str>,
        source: Option<&SourceScope>,
    ) -> Result<(Arc<Index>, Option<u64>), SearchError> {
        let (index, version) = match as_of {
            None => (self.pinned.index.clone(), None),
            Some(spec) => {
                let view = self.view(spec).await?;
                (view.index, Some(view.version))
            }
        };
        Ok(match source {
            None => (index, version),
            Some(scope) => (Arc::new(index.scoped(Some(scope.clone())).await?), version),
        })
    }

    /// The open view of the version `spec` names (opened, and the oldest view closed, when
    /// it is not open yet).
    async fn view(&self, spec: &str) -> Result<View, SearchError> {
        let as_of: AsOf =
            spec.parse().map_err(|e: ctxd_index::error::IndexError| SearchError::BadSnapshot(e.to_string()))?;
        let version = self.pinned.index.snapshots().resolve(&as_of).await.map_err(snapshot_error)?;
        let mut views = self.pinned.views.lock().await;
        if let Some(i) = views.iter().position(|v| v.version == version) {
            let view = views.remove(i);
            views.push(view);
        } else {
            let index = Arc::new(self.pinned.index.snapshots().at(version).await.map_err(snapshot_error)?);
            if views.len() >= OPEN_VIEWS {
                views.remove(0);
            }
            views.push(View { version, index });
        }
        Ok(views.last().expect("just pushed").clone())
    }

    /// Answers a vector, BM25 or hybrid request whose query vector is already computed (`None`
    /// for bm25; hybrid without one falls back to bm25).
    pub async fn search_plain(&self, req: &ValidSearch, vector: Option<&[f32]>) -> Result<SearchResponse, SearchError> {
        let k = req.k;
        let (index, version) = self.index_as_of(req.as_of.as_deref(), req.source.as_ref()).await?;
        let hits = match (req.mode, vector) {
            (Mode::Bm25 | Mode::Symbol, _) => index.reads().fts_search(&req.query, k).await?,
            (Mode::Vector, Some(v)) => index.reads().vector_search(v, k).await?,
            (Mode::Hybrid | Mode::Routed, Some(v)) => {
                let depth = (k * 4).max(50);
                let (vec_hits, fts_hits) =
                    tokio::join!(index.reads().vector_search(v, depth), index.reads().fts_search(&req.query, depth));
                rrf(&[vec_hits?, fts_hits?], k)
            }
            (_, None) => index.reads().fts_search(&req.query, k).await?,
        };
        let route = match (req.mode, vector) {
            (Mode::Vector, _) => Route::Vector,
            (Mode::Symbol, _) => Route::Symbol,
            (Mode::Hybrid | Mode::Routed, Some(_)) => Route::Hybrid,
            (Mode::Bm25 | Mode::Hybrid | Mode::Routed, _) => Route::Bm25,
        };
        Ok(SearchResponse {
            results: hits,
            version,
            route: Some(route),
            intent: None,
            stale_ms: None,
            carried_ms: None,
            index: None,
        })
    }
}

/// Unknown versions and tags are the caller's mistake; anything else is the server's.
fn snapshot_error(e: ctxd_index::error::IndexError) -> SearchError {
    match e {
        ctxd_index::error::IndexError::Snapshot { .. } => SearchError::BadSnapshot(e.to_string()),
        other => SearchError::Index(other),
    }
}

/// State a consumer keeps for one (index, model) pair of a retriever, shared by the
/// consumer's clones: a request pinned to a newer pair (after a model switch) replaces it with
/// a fresh one, so caches never outlive their model; a request still in flight on an older
/// pair gets a fresh one of its own, used once.
pub struct PerBackend<T> {
    cell: Arc<std::sync::Mutex<(u64, Arc<T>)>>,
}

impl<T> Clone for PerBackend<T> {
    fn clone(&self) -> Self {
        Self { cell: self.cell.clone() }
    }
}

impl<T: Default> Default for PerBackend<T> {
    fn default() -> Self {
        Self { cell: Arc::new(std::sync::Mutex::new((0, Arc::default()))) }
    }
}

impl<T: Default> PerBackend<T> {
    /// The state of the pair `retriever` is pinned to.
    pub fn of(&self, retriever: &Retriever) -> Arc<T> {
        let generation = retriever.generation();
        let mut cell = self.cell.lock().unwrap_or_else(|e| e.into_inner());
        if cell.0 < generation {
            *cell = (generation, Arc::default());
        }
        if cell.0 == generation {
            cell.1.clone()
        } else {
            Arc::default()
        }
    }
}
