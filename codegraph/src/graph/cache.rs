//! The graphs in memory: one [`CachedGraph`] (the [`CodeGraph`] and its [`FileGraph`]) per index
//! version asked, built once from the files, symbols and edges of that version and shared by
//! every request on it. Keyed by the database, chunks table and the three tables' versions, so
//! a commit (or an `as_of` view) gets its own graph and the latest is rebuilt only after a
//! change. A few graphs are kept (the latest and recent snapshots), least recently used out.

use std::sync::Arc;
use std::time::Instant;

use ctxd_index::store::Index;

use super::build::build;
use super::def_index::DefIndex;
use super::rank::FileGraph;
use super::CodeGraph;
use ctxd_search::error::SearchError;

/// Graphs kept.
const KEPT: usize = 3;

/// The cache's entry: one version's code graph with its file-level walk, centrality and definitions.
pub struct CachedGraph {
    pub code: CodeGraph,
    pub files: FileGraph,
    /// The graph's centrality (PageRank without seeds), per file.
    pub centrality: Vec<f64>,
    /// The definitions as words (localization's `definitions` signal).
    pub definitions: DefIndex,
    /// Milliseconds it took to load and build.
    pub build_ms: u64,
}

type Key = (String, String, (u64, u64, u64));
/// The graphs held, newest last.
type Slots = Vec<(Key, Arc<CachedGraph>)>;

/// The cache; cheap to clone (clones share it).
#[derive(Clone, Default)]
pub struct GraphCache {
    slots: Arc<tokio::sync::Mutex<Slots>>,
}

impl GraphCache {
    /// The graph of `index`'s version (built now when not cached).
    pub async fn get(&self, index: &Index) -> Result<Arc<CachedGraph>, SearchError> {
        let versions = index.symbols().graph_versions().await?;
        let key: Key = (format!("{}{}", index.uri(), index.scope_key()), index.table_name().to_string(), versions);
        // Held across the build: concurrent requests for a new version wait for one build.
        let mut slots = self.slots.lock().await;
        if let Some(pos) = slots.iter().position(|(k, _)| *k == key) {
            let hit = slots.remove(pos);
            let graph = hit.1.clone();
            slots.push(hit);
            return Ok(graph);
        }
        let started = Instant::now();
        let files: Vec<String> = index.reads().files().await?.into_iter().map(|(p, _, _)| p).collect();
        let symbols = index.symbols().all_symbols().await?;
        let edges = index.symbols().all_edges().await?;
        let graph = tokio::task::spawn_blocking(move || {
            let code = build(files, symbols, edges, versions);
            let files = FileGraph::new(&code);
            let centrality = files.pagerank(&[]);
            let definitions = DefIndex::build(&code);
            CachedGraph { code, files, centrality, definitions, build_ms: 0 }
        })
        .await
        .map_err(|e| SearchError::BadRequest(format!("building the code graph failed: {e}")))?;
        let graph = Arc::new(CachedGraph { build_ms: started.elapsed().as_millis() as u64, ..graph });
        metrics::histogram!(crate::metrics::GRAPH_BUILD_SECONDS).record(started.elapsed().as_secs_f64());
        tracing::debug!(
            files = graph.code.files.len(),
            symbols = graph.code.symbols.len(),
            edges = graph.code.edges.len(),
            ms = graph.build_ms,
            "code graph built"
        );
        if slots.len() >= KEPT {
            slots.remove(0);
        }
        slots.push((key, graph.clone()));
        Ok(graph)
    }
}
