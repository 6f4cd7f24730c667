//! The query-vector cache: vectors of recent query texts, kept by the embedding service so a
//! question asked again skips the model.
//!
//! Agents and IDE plug-ins repeat their questions. The answer cache (`ctxd_search::answers`)
//! serves a repeated question only at the index version it was answered at, and a writer that
//! ingests starts a new version every few seconds; a query's *vector* does not depend on the
//! index, only on the model, so it is kept here, per [`crate::service::EmbedService`] (one model: a
//! model switch starts a new service and an empty cache). Without it a repeated question during
//! ingestion waited for the model thread like a new one (behind an indexing sub-batch).
//!
//! Only single texts of the interactive lane up to [`MAX_QUERY_BYTES`] are kept (queries, not
//! documents), [`QUERY_CACHE_ENTRIES`] at most, the oldest dropped first (~1.5 KB each for a
//! 384-dimension model). `ctxd_embed_query_cache_hits_total`, `_misses_total`.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use crate::metrics as m;

/// Vectors kept at most.
pub const QUERY_CACHE_ENTRIES: usize = 4096;
/// Longest text whose vector is kept.
pub const MAX_QUERY_BYTES: usize = 1024;

#[derive(Default)]
struct Entries {
    vectors: HashMap<String, Vec<f32>>,
    /// Texts, oldest first.
    order: VecDeque<String>,
}

/// Recent query vectors of one model (see the module docs).
#[derive(Default)]
pub struct QueryCache(Mutex<Entries>);

impl QueryCache {
    /// The kept vector of `texts` if it is one cacheable text; counts a hit or a miss
    /// (nothing for texts it never keeps).
    pub fn get(&self, texts: &[String]) -> Option<Vec<f32>> {
        let text = Self::key(texts)?;
        let hit = self.0.lock().unwrap_or_else(|e| e.into_inner()).vectors.get(text).cloned();
        let counter = if hit.is_some() { m::EMBED_QUERY_CACHE_HITS_TOTAL } else { m::EMBED_QUERY_CACHE_MISSES_TOTAL };
        metrics::counter!(counter).increment(1);
        hit
    }

    /// Whether the vector of `texts` is kept (counts nothing).
    pub fn contains(&self, texts: &[String]) -> bool {
        Self::key(texts).is_some_and(|text| self.0.lock().unwrap_or_else(|e| e.into_inner()).vectors.contains_key(text))
    }

    /// Keeps the vector of `texts` if it is one cacheable text.
    pub fn put(&self, texts: &[String], vectors: &[Vec<f32>]) {
        let (Some(text), [vector]) = (Self::key(texts), vectors) else { return };
        let mut entries = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if entries.vectors.insert(text.to_string(), vector.clone()).is_none() {
            entries.order.push_back(text.to_string());
            while entries.order.len() > QUERY_CACHE_ENTRIES {
                if let Some(old) = entries.order.pop_front() {
                    entries.vectors.remove(&old);
                }
            }
        }
    }

    fn key(texts: &[String]) -> Option<&str> {
        match texts {
            [text] if text.len() <= MAX_QUERY_BYTES => Some(text),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_single_short_texts_and_drops_the_oldest() {
        let cache = QueryCache::default();
        let one = |s: &str| vec![s.to_string()];
        assert_eq!(cache.get(&one("a")), None);
        cache.put(&one("a"), &[vec![1.0]]);
        assert_eq!(cache.get(&one("a")), Some(vec![1.0]));
        // Batches and long texts are documents, not queries: never kept.
        cache.put(&["x".into(), "y".into()], &[vec![2.0], vec![3.0]]);
        assert_eq!(cache.get(&one("x")), None);
        let long = "q".repeat(MAX_QUERY_BYTES + 1);
        cache.put(&one(&long), &[vec![4.0]]);
        assert_eq!(cache.get(&one(&long)), None);
        for i in 0..QUERY_CACHE_ENTRIES {
            cache.put(&one(&format!("t{i}")), &[vec![i as f32]]);
        }
        assert_eq!(cache.get(&one("a")), None, "the oldest was dropped");
        assert_eq!(
            cache.get(&one(&format!("t{}", QUERY_CACHE_ENTRIES - 1))),
            Some(vec![(QUERY_CACHE_ENTRIES - 1) as f32])
        );
    }
}
