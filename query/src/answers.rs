//! The answer cache: search answers kept per index version, so a repeated query (agents and
//! IDE plug-ins ask the same things again and again, a team's readers more so) costs a lookup
//! instead of an embedding, a hybrid search and a rescoring pass.
//!
//! A key is the (table, version, model) a request is pinned to plus the request itself, so an
//! answer is never served for another version: when the index moves to a new version (a
//! commit, a reader switching, a model switch) the cache is emptied and starts over. Answers
//! computed while queries waited for a slot (rescoring shrunk, see [`crate::pressure`]) are kept
//! too, marked: under load a repeated question then costs nothing (keeping only full-depth
//! answers left the cache empty exactly when it mattered: `benches/load.py`), but once nothing
//! waits such an answer is computed again at full depth and replaced. At most [`ANSWER_CACHE_ENTRIES`]
//! answers are kept (the oldest dropped first). Hits and misses are counted
//! (`ctxd_query_answer_cache_{hits,misses}_total`).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use crate::metrics as m;
use crate::search::SearchResponse;

/// Answers kept at most.
pub const ANSWER_CACHE_ENTRIES: usize = 2048;
/// Largest `k` whose answers are kept (bounds an entry's size).
pub const ANSWER_CACHE_MAX_K: usize = 50;

/// A kept answer: the response, and whether it was computed with the full rescoring depth.
#[derive(Clone)]
struct Kept {
    answer: Arc<SearchResponse>,
    full: bool,
}

#[derive(Default)]
struct Entries {
    /// The (table, version, model) the entries are of, and that version.
    epoch: String,
    version: u64,
    answers: HashMap<String, Kept>,
    /// Keys, oldest first.
    order: VecDeque<String>,
}

/// Search answers of the current index version (clones share them).
#[derive(Clone, Default)]
pub struct AnswerCache(Arc<Mutex<Entries>>);

impl AnswerCache {
    /// The answer kept for `request` at `epoch`, counting a hit (not a miss: a caller that then
    /// computes the answer counts it through [`AnswerCache::get`]). An answer computed with
    /// shrunk rescoring is only returned while `loaded` (queries wait for a slot).
    pub fn peek(&self, epoch: &str, request: &str, loaded: bool) -> Option<Arc<SearchResponse>> {
        let entries = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let hit = (entries.epoch == epoch)
            .then(|| entries.answers.get(request).filter(|k| k.full || loaded).map(|k| k.answer.clone()))
            .flatten();
        if hit.is_some() {
            metrics::counter!(m::ANSWER_CACHE_HITS_TOTAL).increment(1);
        }
        hit
    }

    /// [`AnswerCache::peek`], counting a miss too.
    pub fn get(&self, epoch: &str, request: &str, loaded: bool) -> Option<Arc<SearchResponse>> {
        let hit = self.peek(epoch, request, loaded);
        if hit.is_none() {
            metrics::counter!(m::ANSWER_CACHE_MISSES_TOTAL).increment(1);
        }
        hit
    }

    /// Keeps `answer` for `request` at `epoch` (of index version `version`; `full`: computed
    /// with the full rescoring depth). A newer version empties the cache first; an answer of an
    /// older version than the cache's is dropped.
    pub fn put(&self, epoch: &str, version: u64, request: String, answer: Arc<SearchResponse>, full: bool) {
        let mut entries = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if entries.epoch != epoch {
            if version < entries.version {
                return;
            }
            *entries = Entries { epoch: epoch.to_string(), version, ..Default::default() };
        }
        if entries.answers.insert(request.clone(), Kept { answer, full }).is_none() {
            entries.order.push_back(request);
        }
        while entries.answers.len() > ANSWER_CACHE_ENTRIES {
            let Some(old) = entries.order.pop_front() else { break };
            entries.answers.remove(&old);
        }
    }

    /// Answers kept now.
    pub fn len(&self) -> usize {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).answers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_kept_per_version_and_bounded() {
        let cache = AnswerCache::default();
        let answer = Arc::new(SearchResponse { version: Some(7), ..Default::default() });
        assert!(cache.get("chunks@1", "q", false).is_none());
        cache.put("chunks@1", 1, "q".into(), answer.clone(), true);
        assert_eq!(cache.get("chunks@1", "q", false).unwrap().version, Some(7));
        assert!(cache.get("chunks@2", "q", false).is_none(), "another version: no answer");
        cache.put("chunks@2", 2, "other".into(), answer.clone(), true);
        assert_eq!(cache.len(), 1, "a new version empties the cache");
        cache.put("chunks@1", 1, "late".into(), answer.clone(), true);
        assert!(cache.get("chunks@2", "other", false).is_some(), "a late answer of an older version is dropped");
        // Computed under load: served while queries wait, computed again once idle.
        cache.put("chunks@2", 2, "shed".into(), answer.clone(), false);
        assert!(cache.peek("chunks@2", "shed", true).is_some());
        assert!(cache.peek("chunks@2", "shed", false).is_none());
        for i in 0..ANSWER_CACHE_ENTRIES + 10 {
            cache.put("chunks@2", 2, format!("q{i}"), answer.clone(), true);
        }
        assert_eq!(cache.len(), ANSWER_CACHE_ENTRIES);
        assert!(cache.get("chunks@2", "q0", false).is_none(), "the oldest went first");
        assert!(cache.get("chunks@2", &format!("q{}", ANSWER_CACHE_ENTRIES + 9), false).is_some());
    }
}
