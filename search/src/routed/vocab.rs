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
    latest: std::sync::Mutex<Option<(Instant, Arc<Vocab>)>>,
    /// One check (and rebuild) of the latest version at a time: while one query checks, the
    /// others answer with the vocabulary they have.
    checking: tokio::sync::Mutex<()>,
    snapshots: tokio::sync::Mutex<Vec<(u64, SnapshotVocab)>>,
}

/// A snapshot's vocabulary, built by the first query that needs it.
type SnapshotVocab = Arc<tokio::sync::OnceCell<Arc<Vocab>>>;

impl Vocabs {
    /// Indexed paths and folder names of the latest version of `index` (cached for a few
    /// seconds). Once the cached one is older than [`VOCAB_TTL`], one query checks the version
    /// (and rebuilds it, a scan of every path, when the index changed) while the others go on
    /// with the cached one: a stream of commits never holds every query behind a rebuild.
    pub(super) async fn latest(&self, index: &Index) -> Result<Arc<Vocab>, SearchError> {
        let _checking = match (self.cached(), self.checking.try_lock()) {
            (Some((at, v)), _) if at.elapsed() < VOCAB_TTL => return Ok(v),
            (Some((_, v)), Err(_)) => return Ok(v),
            (_, Ok(guard)) => guard,
            (None, Err(_)) => self.checking.lock().await,
        };
        let cached = self.cached();
        if let Some((at, v)) = &cached {
            if at.elapsed() < VOCAB_TTL {
                // Built by the query this one waited for (the first ever).
                return Ok(v.clone());
            }
        }
        let version = index.version().await?;
        let v = match cached {
            Some((_, v)) if v.version == version => v,
            _ => {
                let started = Instant::now();
                let v = Arc::new(Vocab::build(index).await?);
                metrics::histogram!(crate::metrics::VOCAB_BUILD_SECONDS).record(started.elapsed().as_secs_f64());
                v
            }
        };
        *self.latest.lock().unwrap_or_else(|p| p.into_inner()) = Some((Instant::now(), v.clone()));
        Ok(v)
    }

    fn cached(&self) -> Option<(Instant, Arc<Vocab>)> {
        self.latest.lock().unwrap_or_else(|p| p.into_inner()).clone()
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

#[cfg(test)]
mod tests {
    use super::*;
    use ctxd_index::{record::Chunk, schema::ChunkRow, writer::CommitBatch};

    fn file(path: &str) -> CommitBatch {
        let chunk = Chunk { chunk_id: path.into(), path: path.into(), content: "x".into(), ..Chunk::default() };
        let row = ChunkRow {
            chunk,
            embed_key: path.into(),
            file_hash: path.into(),
            vector: vec![1.0; 4],
            model: "m".into(),
            late: Vec::new(),
        };
        CommitBatch { rows: vec![row], ..Default::default() }
    }

    /// Makes the cached vocabulary older than the TTL.
    fn age(vocabs: &Vocabs) {
        let mut latest = vocabs.latest.lock().unwrap();
        let at = &mut latest.as_mut().expect("a vocabulary is cached").0;
        *at = Instant::now().checked_sub(VOCAB_TTL * 2).expect("the clock is past the TTL");
    }

    #[tokio::test]
    async fn a_stale_vocabulary_is_checked_by_one_query_while_the_others_go_on() {
        let dir = tempfile::tempdir().unwrap();
        let index = Index::open_or_create(&dir.path().join("db").to_string_lossy(), "m", 4).await.unwrap();
        index.commit(file("app/a.py")).await.unwrap();
        let vocabs = Vocabs::default();
        let first = vocabs.latest(&index).await.unwrap();
        assert_eq!(first.paths, ["app/a.py"]);
        assert!(first.modules.contains("app"));

        index.commit(file("tools/b.py")).await.unwrap();
        assert!(Arc::ptr_eq(&vocabs.latest(&index).await.unwrap(), &first), "trusted within the TTL");
        age(&vocabs);
        let checking = vocabs.checking.try_lock().unwrap();
        let at_once = tokio::time::timeout(Duration::from_secs(5), vocabs.latest(&index)).await;
        let stale = at_once.expect("while another query checks, the others do not wait").unwrap();
        assert!(Arc::ptr_eq(&stale, &first), "the cached one answers");
        drop(checking);
        let second = vocabs.latest(&index).await.unwrap();
        assert_eq!(second.paths, ["app/a.py", "tools/b.py"], "the next query rebuilds it");
        assert!(second.modules.contains("tools"));

        age(&vocabs);
        assert!(Arc::ptr_eq(&vocabs.latest(&index).await.unwrap(), &second), "an unchanged version keeps it");
    }
}
