//! Localization: an issue, a stack trace or a task description → the **files** to change,
//! ranked, each with the definitions most likely to change and `why` it is there.
//!
//! [`text`] reads the issue into weighted parts (title, frames, paths, identifiers, messages,
//! cleaned prose); [`signals`] scores files by each signal; [`features`] turns them, with what is
//! known of each file (test, doc, depth, size), into one feature row per candidate; [`fuse`]
//! scores the rows with the fitted [`model`] — before and after personalised PageRank over the
//! code graph from the best files. With a git history in the index ([`history_signals`],
//! [`past_commits`]), recency, co-change and the past commits worded like the text join the
//! rows. `without` zeroes a signal's features (the evaluation's
//! ablation); `features` returns the rows of the best candidates (what the model is fitted on).
//!
//! Texts up to [`MAX_LOCATE_BYTES`] are accepted (real issues carry tracebacks, logs and
//! package lists); only their informative parts reach BM25 and the model.

pub(crate) mod adapter_cache;
pub(crate) mod features;
pub(crate) mod fuse;
pub(crate) mod history_signals;
pub(crate) mod past_commits;
pub mod prior;
pub mod ranker;
pub(crate) mod request;
pub(crate) mod signals;
pub(crate) mod text;

pub use history_signals::cochanged_with;
pub use request::{LocateRequest, MAX_LOCATE_BYTES};
pub use signals::Signal;

use std::sync::Arc;
use std::time::Instant;

use crate::graph::cache::CachedGraph;
use crate::graph::cache::GraphCache;
use ctxd_index::scope::SourceScope;
use ctxd_search::error::SearchError;
use ctxd_search::retriever::Retriever;
use request::{LocateAnswer, ValidLocate};

/// Chunk hits read per retrieval signal.
const DEPTH: usize = 200;

/// Answers localization requests over one searcher's index (and its graph cache).
#[derive(Clone)]
pub struct Locator {
    retriever: Retriever,
    graphs: GraphCache,
    histories: history_signals::HistoryCache,
    adapters: adapter_cache::AdapterCache,
    /// The ranking model of a request that names none (`[locate] model`).
    model: ctxd_choice::RankerName,
}

impl Locator {
    pub fn new(retriever: Retriever, graphs: GraphCache) -> Self {
        let histories = history_signals::HistoryCache::default();
        let adapters = adapter_cache::AdapterCache::default();
        Self { retriever, graphs, histories, adapters, model: ctxd_choice::RankerName::default() }
    }

    /// The same locator ranking with `model` where a request names none.
    pub fn with_model(mut self, model: ctxd_choice::RankerName) -> Self {
        self.model = model;
        self
    }

    /// The graph of the latest index version, or of the snapshot `as_of` names, over the
    /// sources of `source` (all when `None`).
    pub async fn graph(
        &self,
        as_of: Option<&str>,
        source: Option<&SourceScope>,
    ) -> Result<Arc<CachedGraph>, SearchError> {
        let (index, _) = self.retriever.current().index_as_of(as_of, source).await?;
        self.graphs.get(&index).await
    }

    /// The recorded history of `path` (see [`history_signals::file_logs`]) over the sources of
    /// `source`: `limit` commits and co-changed files each.
    pub async fn history(
        &self,
        path: &str,
        limit: usize,
        source: Option<&SourceScope>,
    ) -> Result<history_signals::HistoryAnswer, SearchError> {
        let (index, _) = self.retriever.current().index_as_of(None, source).await?;
        let h = self.histories.get(&index).await?;
        if h.is_empty() {
            return Err(SearchError::BadRequest(
                "this index has no git history: it is recorded for git sources and for source folders that are git \
                 clones (`[index] history_commits` > 0)"
                    .into(),
            ));
        }
        let mut answer = history_signals::file_logs(&h, path, limit);
        // Partners that are not indexed (an LFS pointer, a skipped file) are left out.
        let graph = self.graphs.get(&index).await?;
        for f in &mut answer.files {
            f.cochanged.retain(|(p, _)| graph.code.file(p).is_some());
            f.cochanged.truncate(limit);
        }
        if answer.files.is_empty() {
            return Err(SearchError::BadRequest(format!(
                "no recorded commit changed '{path}' (each view keeps its last `[index] history_commits` commits); give \
                 an indexed path"
            )));
        }
        Ok(answer)
    }

    /// The files that change together with `paths` in the git history of `source`'s view (see
    /// [`history_signals::cochanged_with`]), those `code` (the caller's graph) indexes; empty without
    /// history.
    pub async fn cochanged(
        &self,
        code: &crate::graph::CodeGraph,
        paths: &[String],
        limit: usize,
        source: Option<&SourceScope>,
    ) -> Result<Vec<crate::graph::impact::CoChanged>, SearchError> {
        let (index, _) = self.retriever.current().index_as_of(None, source).await?;
        let h = self.histories.get(&index).await?;
        Ok(history_signals::cochanged_with(&h, paths, limit, |p| code.file(p).is_some()))
    }

    /// Ranks the files `req.text` is about.
    pub async fn locate(&self, req: &ValidLocate) -> Result<LocateAnswer, SearchError> {
        let without = req.without();
        let model_name = req.model.unwrap_or(self.model);
        let model = ranker::Ranker::named(model_name).map_err(|e| SearchError::RankModel(e.to_string()))?;
        let started = Instant::now();
        let mut took = request::LocateTimings::default();
        let mut lap = Instant::now();
        let mut mark = |slot: &mut u64| {
            *slot = lap.elapsed().as_millis() as u64;
            lap = Instant::now();
        };
        let pinned = self.retriever.current();
        let (index, _) = pinned.index_as_of(req.as_of.as_deref(), req.source.as_ref()).await?;
        let stamp = pinned.stamp_of(&index, req.as_of.is_none()).await?;
        let graph = self.graphs.get(&index).await?;
        mark(&mut took.graph_ms);
        let issue = text::read(&req.text);
        let on = |s: Signal| !without.contains(&s);
        let bm25_query = fuse::bm25_text(&issue);
        let vector = match (on(Signal::Vector), pinned.embed()) {
            (true, Some(embed)) => embed.embed(vec![issue.summary.clone()]).await?.into_iter().next(),
            _ => None,
        };
        // The index's query adapter fitted on this view's history or an older one, if any (cached).
        let adapter = match &vector {
            Some(_) if !req.no_adapter => self.adapters.get(&index).await?,
            _ => None,
        };
        let vector = match (vector, &adapter) {
            (Some(v), Some(a)) => Some(a.apply(&v)),
            (v, _) => v,
        };
        mark(&mut took.embed_ms);
        let (bm25_hits, vector_hits) = tokio::join!(
            async {
                if on(Signal::Bm25) {
                    index.reads().fts_search(&bm25_query, DEPTH).await
                } else {
                    Ok(Vec::new())
                }
            },
            async {
                match &vector {
                    Some(v) => index.reads().vector_search(v, DEPTH).await,
                    None => Ok(Vec::new()),
                }
            }
        );
        let (bm25_hits, vector_hits) = (bm25_hits?, vector_hits?);
        mark(&mut took.retrieve_ms);
        let mut message_hits = Vec::new();
        if on(Signal::Messages) {
            for m in &issue.messages {
                message_hits.push((m.clone(), index.reads().fts_search(m, 30).await?));
            }
        }
        mark(&mut took.messages_ms);
        let history = if on(Signal::Recency) || on(Signal::Cochange) || on(Signal::Commits) {
            self.histories.get(&index).await?
        } else {
            Default::default()
        };
        mark(&mut took.history_ms);
        let inputs = fuse::Inputs {
            issue: &issue,
            bm25: &bm25_hits,
            vector: &vector_hits,
            messages: &message_hits,
            history: &history,
        };
        let (files, features) = fuse::rank(&graph, &inputs, without, model, req.k, req.definitions, req.features);
        mark(&mut took.rank_ms);
        metrics::histogram!(crate::metrics::LOCATE_SECONDS).record(started.elapsed().as_secs_f64());
        Ok(LocateAnswer {
            files,
            features,
            signals: Signal::ALL.into_iter().filter(|s| on(*s)).collect(),
            model: model_name,
            adapted: adapter.is_some(),
            timings: took,
            took_ms: started.elapsed().as_millis() as u64,
            index: Some(stamp),
        })
    }
}
