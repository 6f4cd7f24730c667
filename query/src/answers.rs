//! The answer cache: search answers kept per index version, so a repeated query (agents and
//! IDE plug-ins ask the same things again and again, a team's readers more so) costs a lookup
//! instead of an embedding, a hybrid search and a rescoring pass.
//!
//! A key is the (table, version, model) a request is pinned to plus the request itself, so an
//! answer is never served for another version: when the index moves to a new version (a
//! commit, a reader switching, a model switch) the cache is emptied and starts over. Answers
//! computed while queries waited for a slot (rescoring shrunk, see [`crate::pressure`]) are kept
//! too: under load a repeated question then costs nothing (keeping only full-depth answers left
//! the cache empty exactly when it mattered: `benches/load.py`), at the price of that version
//! answering it with the shallower rescoring. At most [`ANSWER_CACHE_ENTRIES`]
//! answers are kept (the oldest dropped first). Hits and misses are counted
//! (`ctxd_query_answer_cache_{hits,misses}_total`).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use crate::metrics as m;
use crate::search::SearchResponse;

/// Answers kept at most.
pub const ANSWER_CACHE_ENTRIES: usize = 2048;

#[derive(Default)]
struct Entries {
    /// The (table, version, model) the entries are of.
    epoch: String,
    answers: HashMap<String, Arc<SearchResponse>>,
    /// Keys, oldest first.
    order: VecDeque<String>,
}

/// Search answers of the current index version (clones share them).
#[derive(Clone, Default)]
pub struct AnswerCache(Arc<Mutex<Entries>>);

impl AnswerCache {
    /// The answer kept for `request` at `epoch`, counting the hit or miss.
    pub fn get(&self, epoch: &str, request: &str) -> Option<Arc<SearchResponse>> {
        let entries = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let hit = (entries.epoch == epoch).then(|| entries.answers.get(request).cloned()).flatten();
        match hit {
            Some(_) => metrics::counter!(m::ANSWER_CACHE_HITS_TOTAL).increment(1),
            None => metrics::counter!(m::ANSWER_CACHE_MISSES_TOTAL).increment(1),
        }
        hit
    }

    /// [`AnswerCache::get`] counting only a hit (a caller that computes on a miss looks again
    /// through `get`, which counts it).
    pub fn peek(&self, epoch: &str, request: &str) -> Option<Arc<SearchResponse>> {
        let entries = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let hit = (entries.epoch == epoch).then(|| entries.answers.get(request).cloned()).flatten();
        if hit.is_some() {
            metrics::counter!(m::ANSWER_CACHE_HITS_TOTAL).increment(1);
        }
        hit
    }

    /// Keeps `answer` for `request` at `epoch` (a new epoch empties the cache first).
    pub fn put(&self, epoch: &str, request: String, answer: Arc<SearchResponse>) {
        let mut entries = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if entries.epoch != epoch {
            *entries = Entries { epoch: epoch.to_string(), ..Default::default() };
        }
        if entries.answers.insert(request.clone(), answer).is_none() {
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
        assert!(cache.get("chunks@1", "q").is_none());
        cache.put("chunks@1", "q".into(), answer.clone());
        assert_eq!(cache.get("chunks@1", "q").unwrap().version, Some(7));
        assert!(cache.get("chunks@2", "q").is_none(), "another version: no answer");
        cache.put("chunks@2", "other".into(), answer.clone());
        assert_eq!(cache.len(), 1, "a new version empties the cache");
        for i in 0..ANSWER_CACHE_ENTRIES + 10 {
            cache.put("chunks@2", format!("q{i}"), answer.clone());
        }
        assert_eq!(cache.len(), ANSWER_CACHE_ENTRIES);
        assert!(cache.get("chunks@2", "q0").is_none(), "the oldest went first");
        assert!(cache.get("chunks@2", &format!("q{}", ANSWER_CACHE_ENTRIES + 9)).is_some());
    }
}
