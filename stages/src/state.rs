//! The incremental state: which file is indexed with which content hash.
//!
//! Loaded from the index at start-up (so it survives restarts) and updated by the upsert
//! stage after each successful commit. The loader consults it to skip unchanged files.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

/// Shared `path → file_hash` map of what the index holds. Cheap to clone.
#[derive(Clone, Default)]
pub struct FileState {
    inner: Arc<RwLock<HashMap<String, String>>>,
}

impl FileState {
    /// Starts from a map read from the index.
    pub fn new(map: HashMap<String, String>) -> Self {
        Self { inner: Arc::new(RwLock::new(map)) }
    }

    /// Hash the index holds for `path`.
    pub fn get(&self, path: &str) -> Option<String> {
        self.inner.read().expect("state lock").get(path).cloned()
    }

    /// True when the index holds `path` with exactly `hash`.
    pub fn is_current(&self, path: &str, hash: &str) -> bool {
        self.inner.read().expect("state lock").get(path).is_some_and(|h| h == hash)
    }

    /// Records a committed file.
    pub fn set(&self, path: &str, hash: &str) {
        self.inner.write().expect("state lock").insert(path.to_string(), hash.to_string());
    }

    /// Records a removed file.
    pub fn remove(&self, path: &str) {
        self.inner.write().expect("state lock").remove(path);
    }

    /// All indexed paths.
    pub fn paths(&self) -> Vec<String> {
        self.inner.read().expect("state lock").keys().cloned().collect()
    }

    /// Number of indexed files.
    pub fn len(&self) -> usize {
        self.inner.read().expect("state lock").len()
    }

    /// True when nothing is indexed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
