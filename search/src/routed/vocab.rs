//! The path vocabulary of an index version (every indexed path, sorted, and the folder names
//! that count as modules), for the router and for resolving the paths a query names; and its
//! caches: the latest version's, re-checked every few seconds off the query path (a request
//! answers with the cached one while a background task checks the version and rebuilds it), and
//! each queried snapshot's, built once (a snapshot never changes).

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
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

/// [`Vocab::build`], its time recorded (`ctxd_query_vocab_build_duration_seconds`).
async fn timed_build(index: &Index) -> Result<Vocab, SearchError> {
    let started = Instant::now();
    let v = Vocab::build(index).await?;
    metrics::histogram!(crate::metrics::VOCAB_BUILD_SECONDS).record(started.elapsed().as_secs_f64());
    Ok(v)
}

impl Vocab {
    pub(crate) async fn build(index: &Index) -> Result<Self, SearchError> {
        let version = index.version().await?;
        let mut paths: Vec<String> = index.reads().file_hashes().await?.into_keys().collect();
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
    latest: Arc<std::sync::Mutex<Option<Checked>>>,
    /// Set while a refresh (a version check, and a rebuild when the index changed) runs in the
    /// background: one at a time.
    refreshing: Arc<AtomicBool>,
    /// The first build, when no vocabulary exists yet: queries that find none wait for one.
    first: tokio::sync::Mutex<()>,
    /// Builds of the latest version's vocabulary that ran inside a request (the first only).
    built_in_request: AtomicU64,
    snapshots: tokio::sync::Mutex<Vec<(u64, SnapshotVocab)>>,
}

/// A refresh running: clears the flag when it ends, however it ends.
struct Refreshing(Arc<AtomicBool>);

impl Drop for Refreshing {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// The latest version's vocabulary and when its version was last checked.
type Checked = (Instant, Arc<Vocab>);

/// A snapshot's vocabulary, built by the first query that needs it.
type SnapshotVocab = Arc<tokio::sync::OnceCell<Arc<Vocab>>>;

impl Vocabs {
    /// Indexed paths and folder names of the latest version of `index`. Only the first call
    /// builds it (a serving process warms it at start, so no request does); once the cached one
    /// is older than [`VOCAB_TTL`], the call that notices starts a refresh in the background —
    /// the version checked, and the vocabulary rebuilt (a scan of every path) when the index
    /// changed — and answers with the cached one: no request after a commit waits for a scan.
    pub(super) async fn latest(&self, index: &Arc<Index>) -> Result<Arc<Vocab>, SearchError> {
        if let Some((at, v)) = self.cached() {
            if at.elapsed() >= VOCAB_TTL {
                self.refresh(index.clone(), v.clone());
            }
            return Ok(v);
        }
        let _first = self.first.lock().await;
        if let Some((_, v)) = self.cached() {
            // Built by the query this one waited for.
            return Ok(v);
        }
        let v = Arc::new(timed_build(index).await?);
        self.built_in_request.fetch_add(1, Ordering::Relaxed);
        *self.latest.lock().unwrap_or_else(|p| p.into_inner()) = Some((Instant::now(), v.clone()));
        Ok(v)
    }

    /// Starts the background check of `index`'s version (and rebuild, when it moved past
    /// `have`'s) unless one runs. A failed check keeps the cached vocabulary and its age, so the
    /// next query past the TTL tries again.
    fn refresh(&self, index: Arc<Index>, have: Arc<Vocab>) {
        if self.refreshing.swap(true, Ordering::AcqRel) {
            return;
        }
        let (latest, refreshing) = (self.latest.clone(), Refreshing(self.refreshing.clone()));
        tokio::spawn(async move {
            let _refreshing = refreshing;
            let checked = async {
                let version = index.version().await?;
                Ok::<_, SearchError>(match version == have.version {
                    true => have,
                    false => Arc::new(timed_build(&index).await?),
                })
            };
            match checked.await {
                Ok(v) => *latest.lock().unwrap_or_else(|p| p.into_inner()) = Some((Instant::now(), v)),
                Err(e) => tracing::warn!("refreshing the path vocabulary failed (the next query retries): {e}"),
            }
        });
    }

    fn cached(&self) -> Option<Checked> {
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

    /// Calls `latest` until its vocabulary holds `paths` (the background refresh landed).
    async fn refreshed(vocabs: &Vocabs, index: &Arc<Index>, paths: &[&str]) -> Arc<Vocab> {
        for _ in 0..500 {
            let v = vocabs.latest(index).await.unwrap();
            if v.paths == paths && !vocabs.refreshing.load(Ordering::Acquire) {
                return v;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("the vocabulary never came to hold {paths:?}");
    }

    #[tokio::test]
    async fn after_a_commit_the_vocabulary_is_rebuilt_off_the_query_path() {
        let dir = tempfile::tempdir().unwrap();
        let index = Index::open_or_create(&dir.path().join("db").to_string_lossy(), "m", 4).await.unwrap();
        let index = Arc::new(index);
        index.writes().commit(file("app/a.py")).await.unwrap();
        let vocabs = Vocabs::default();
        let first = vocabs.latest(&index).await.unwrap();
        assert_eq!(first.paths, ["app/a.py"]);
        assert!(first.modules.contains("app"));
        assert_eq!(vocabs.built_in_request.load(Ordering::Relaxed), 1, "the first one is built by its query");

        index.writes().commit(file("tools/b.py")).await.unwrap();
        assert!(Arc::ptr_eq(&vocabs.latest(&index).await.unwrap(), &first), "trusted within the TTL");
        age(&vocabs);
        // Past the TTL the query answers with the cached one at once; a background task rebuilds it.
        let stale = vocabs.latest(&index).await.unwrap();
        assert!(Arc::ptr_eq(&stale, &first), "the cached one answers");
        let second = refreshed(&vocabs, &index, &["app/a.py", "tools/b.py"]).await;
        assert!(second.modules.contains("tools"));
        assert_eq!(vocabs.built_in_request.load(Ordering::Relaxed), 1, "no request rebuilt it after the commit");

        age(&vocabs);
        let again = vocabs.latest(&index).await.unwrap();
        assert!(Arc::ptr_eq(&again, &second));
        let kept = refreshed(&vocabs, &index, &["app/a.py", "tools/b.py"]).await;
        assert!(Arc::ptr_eq(&kept, &second), "an unchanged version keeps it");
        assert_eq!(vocabs.built_in_request.load(Ordering::Relaxed), 1);
    }
}
