//! The path vocabulary of an index version (every indexed path, sorted, and the folder names
//! that count as modules), for the router and for resolving the paths a query names; and its
//! caches: the latest version's, re-checked every few seconds, and each queried snapshot's,
//! built once (a snapshot never changes).

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ctxd_index::store::Index;

use crate::error::SearchError;
use crate::retriever::OPEN_VIEWS;

/// How long the path vocabulary is trusted before the index version is checked again.
const VOCAB_TTL: Duration = Duration::from_secs(5);

/// Indexed paths and folder names, for the router and path resolution.
pub struct Vocab {
    version: u64,
    /// Every indexed path, sorted.
    pub paths: Vec<String>,
    pub modules: HashSet<String>,
}

impl Vocab {
    pub(crate) async fn build(index: &Index) -> Result<Self, SearchError> {
        let version = index.version().await?;
        let mut paths: Vec<String> = index.file_hashes().await?.into_keys().collect();
        paths.sort();
        let mut modules = HashSet::new();
        for p in &paths {
            let mut parts: Vec<&str> = p.split('/').collect();
            parts.pop();
            for d in parts {
                if d.len() >= 3 && !matches!(d, "src" | "lib" | "test" | "tests" | "pkg" | "internal") {
                    modules.insert(d.to_lowercase());
                }
            }
        }
        Ok(Self { version, paths, modules })
    }

    /// Indexed files matching a path from a query: exact, else by suffix at a `/`.
    pub(super) fn resolve(&self, path: &str) -> Vec<&str> {
        let path = path.trim_start_matches('/');
        if let Ok(i) = self.paths.binary_search_by(|p| p.as_str().cmp(path)) {
            return vec![self.paths[i].as_str()];
        }
        let suffix = format!("/{path}");
        let mut found: Vec<&str> = self
            .paths
            .iter()
            .filter(|p| p.ends_with(&suffix) || path.ends_with(&format!("/{p}")))
            .map(String::as_str)
            .collect();
        found.truncate(5);
        found
    }
}

/// The vocabularies of one (index, model) pair: the latest version's with when its version
/// was last checked, and those of recently queried snapshots (most recently used last, as many
/// as the retriever keeps views open).
#[derive(Default)]
pub(super) struct Vocabs {
    latest: tokio::sync::Mutex<Option<(Instant, Arc<Vocab>)>>,
    snapshots: tokio::sync::Mutex<Vec<(u64, SnapshotVocab)>>,
}

/// A snapshot's vocabulary, built by the first query that needs it.
type SnapshotVocab = Arc<tokio::sync::OnceCell<Arc<Vocab>>>;

impl Vocabs {
    /// Indexed paths and folder names of the latest version of `index` (cached for a few
    /// seconds).
    pub(super) async fn latest(&self, index: &Index) -> Result<Arc<Vocab>, SearchError> {
        let mut cache = self.latest.lock().await;
        if let Some((checked, v)) = cache.as_mut() {
            if checked.elapsed() < VOCAB_TTL {
                return Ok(v.clone());
            }
            if index.version().await? == v.version {
                *checked = Instant::now();
                return Ok(v.clone());
            }
        }
        let v = Arc::new(Vocab::build(index).await?);
        *cache = Some((Instant::now(), v.clone()));
        Ok(v)
    }

    /// The vocabulary of `snapshot`, the view of version `version` (built once).
    pub(super) async fn at(&self, version: u64, snapshot: &Index) -> Result<Arc<Vocab>, SearchError> {
        let cell = {
            let mut snapshots = self.snapshots.lock().await;
            let cell = match snapshots.iter().position(|(v, _)| *v == version) {
                Some(i) => snapshots.remove(i).1,
                None => Arc::default(),
            };
            if snapshots.len() >= OPEN_VIEWS {
                snapshots.remove(0);
            }
            snapshots.push((version, cell.clone()));
            cell
        };
        let build = || async { Ok::<_, SearchError>(Arc::new(Vocab::build(snapshot).await?)) };
        Ok(cell.get_or_try_init(build).await?.clone())
    }
}
