//! Routed search: the router's analysis ([`crate::route`]) turned into one ranked list.
//!
//! Every query gets the vector and BM25 signals (BM25 on the query plus the words of its
//! identifiers, so `getUserById` also matches `get_user_by_id` and "user by id"); a query that
//! names identifiers adds the **symbol** signal (symbol table: exact, then prefix, then the
//! last path segment — `Type::method` → `method`); a query that names a file adds that file's
//! chunks, nearest the given line first; a stack trace adds the files of its frames. The lists
//! are fused by a weighted sum of min-max-normalised scores (weights from the intent), then:
//!
//! * whole definitions are boosted over mentions, documents up or down by intent;
//! * chunks in dependency folders (`vendor/`, `node_modules/`, …) are ranked slightly lower;
//! * chunks in the caller's `current_file` (and its folder) or in a module the query names are
//!   boosted;
//! * `path_prefix`, `language` and `scope` (`file|module|project|dependencies`) filter;
//! * the best 30 candidates (`[server] rerank_depth`) that pass the filters are rescored by
//!   late interaction with the model's token embeddings ([`crate::rerank`]; not for lean
//!   requests or `rerank: false`);
//! * at most `max_per_file` chunks per file (default 3), so one file cannot take every slot.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ctxd_index::{Hit, Index};
use serde::Deserialize;

use crate::route::{analyze, identifier_words, Analysis, Route};
use crate::search::{combine, SearchRequest, SearchResponse, SearchResult, Searcher};
use crate::SearchError;

/// How long the path vocabulary is trusted before the index version is checked again.
const VOCAB_TTL: Duration = Duration::from_secs(5);
/// Folders whose contents count as dependencies, not the project.
const DEPENDENCY_DIRS: &[&str] =
    &["node_modules", "vendor", "third_party", "third-party", "external", "site-packages", ".venv", "venv", "deps"];

/// Which part of the index a query covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// Only `current_file`.
    File,
    /// `current_file`'s folder and below.
    Module,
    /// Everything but dependency folders (`node_modules`, `vendor`, …).
    Project,
    /// Only dependency folders.
    Dependencies,
}

/// Indexed paths and folder names, for the router and path resolution.
pub(crate) struct Vocab {
    version: u64,
    /// Every indexed path, sorted.
    pub(crate) paths: Vec<String>,
    modules: HashSet<String>,
}

/// Per-searcher cache of the vocabulary of the latest version, with when its version was
/// last checked.
pub(crate) type VocabCache = Arc<tokio::sync::Mutex<Option<(Instant, Arc<Vocab>)>>>;

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
    fn resolve(&self, path: &str) -> Vec<&str> {
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

fn is_definition(kind: Option<&str>) -> bool {
    match kind {
        None => false,
        Some(k) => !matches!(k, "module" | "section" | "key" | "table" | "page" | "cell" | "rows" | ""),
    }
}

fn is_document(language: &str) -> bool {
    matches!(language, "markdown" | "rst" | "text" | "html" | "pdf" | "notebook")
}

fn parent_dir(path: &str) -> &str {
    path.rsplit_once('/').map(|(d, _)| d).unwrap_or("")
}

fn in_dependency(path: &str) -> bool {
    path.split('/').any(|seg| DEPENDENCY_DIRS.contains(&seg))
}

/// The BM25 text of a query: the query itself (for an error, its message lines, not the
/// frames) plus the words of every identifier.
fn bm25_text(query: &str, a: &Analysis) -> String {
    let mut text = if a.route == Route::Error {
        let kept: Vec<&str> = query
            .lines()
            .map(str::trim)
            .filter(|l| !l.starts_with("File \"") && !l.starts_with("at ") && !l.starts_with("Traceback"))
            .collect();
        kept.join(" ")
    } else {
        query.to_string()
    };
    for s in &a.symbols {
        let words = identifier_words(s);
        if words.len() > 1 {
            text.push(' ');
            text.push_str(&words.join(" "));
        }
    }
    text
}

/// Where the routed search's query vector comes from.
#[derive(Clone, Copy)]
pub enum QueryVector<'a> {
    /// No vector signal (no model, or BM25-only rows).
    None,
    /// The vector search already ran (completion reuses the neighbours of the chunk at the
    /// cursor): its hits, [`search_depth`] of them at most.
    Hits(&'a [Hit]),
    /// Computed by the caller (evaluation embeds queries in batches).
    Ready(&'a [f32]),
    /// Embedded by the search, concurrently with the full-text search.
    Embed(&'a ctxd_models::EmbedService),
}

/// IVF partitions a lean query's vector search visits (LanceDB's default is 20).
pub(crate) const LEAN_NPROBES: usize = 6;

/// How many hits each signal contributes to the fusion for `k` results.
pub(crate) fn search_depth(k: usize) -> usize {
    (k * 4).max(50)
}

/// Terms a lean (completion) query keeps for BM25, and the full-text hits it fuses. Measured on
/// 255k chunks (`benches/completion_latency.py --keystrokes 10`): 10 terms and 50 hits p90 30 ms,
/// 4 terms and 15 hits p90 16 ms; `benches/completion_quality.py` 0.185 vs 0.215 (no loss).
const LEAN_BM25_TERMS: usize = 4;
const LEAN_FTS_DEPTH: usize = 15;

/// Words every language's code is full of: no signal for BM25.
const CODE_STOP_WORDS: &[&str] = &[
    "the", "and", "for", "let", "mut", "pub", "self", "return", "true", "false", "none", "some", "const", "static",
    "impl", "use", "this", "def", "function", "var", "new", "int", "str", "string", "not", "else", "elif", "while",
    "with", "from", "import", "null", "void", "public", "private", "class", "struct", "enum",
];

/// The last `max` distinct words of `text` (3+ characters, not all digits, not
/// [`CODE_STOP_WORDS`]), in text order.
fn last_distinct_terms(text: &str, max: usize) -> String {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for w in text.split(|c: char| !c.is_alphanumeric() && c != '_').rev() {
        let lower = w.to_lowercase();
        if w.len() < 3 || w.chars().all(|c| c.is_ascii_digit()) || CODE_STOP_WORDS.contains(&lower.as_str()) {
            continue;
        }
        if seen.insert(lower) {
            out.push(w);
            if out.len() >= max {
                break;
            }
        }
    }
    out.reverse();
    out.join(" ")
}

/// Weighted fusion of min-max normalised scores (CombSUM): within each list the best hit
/// scores 1 and the last 0, so a list's confidence gaps count, not only its order. Lists
/// without meaningful scores (symbol and path lookups) are scored by rank.
fn fuse(lists: &[(f32, Vec<Hit>)]) -> Vec<Hit> {
    combine(lists.iter().filter(|(w, list)| *w > 0.0 && !list.is_empty()).flat_map(|(weight, list)| {
        let (lo, hi) = list.iter().fold((f32::MAX, f32::MIN), |(lo, hi), h| (lo.min(h.score), hi.max(h.score)));
        let by_rank = hi <= lo;
        let n = list.len() as f32;
        list.iter().enumerate().map(move |(rank, hit)| {
            let norm = if by_rank { 1.0 - rank as f32 / n } else { (hit.score - lo) / (hi - lo) };
            (weight * norm, hit)
        })
    }))
}

impl Searcher {
    /// Indexed paths and folder names of the latest version (cached for a few seconds).
    pub(crate) async fn latest_vocab(&self) -> Result<Arc<Vocab>, SearchError> {
        let index = &self.pinned.index;
        let mut cache = self.pinned.vocab.lock().await;
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

    /// Definitions named by the query's identifiers, as chunks (exact names first).
    async fn symbol_hits(&self, index: &Index, symbols: &[String], limit: usize) -> Result<Vec<Hit>, SearchError> {
        // Every spelling of every identifier in one exact lookup (`a.b` as `a::b`, and the
        // last segment alone), then one prefix lookup only when nothing matched exactly:
        // two queries at most, whatever the number of identifiers (completion asks with many).
        let symbols: Vec<&String> = symbols.iter().take(6).collect();
        // (spelling, identifier, 0 = as written / `a::b`, 1 = last segment alone)
        let mut variants: Vec<(String, usize, u8)> = Vec::new();
        for (i, s) in symbols.iter().enumerate() {
            variants.push((s.to_string(), i, 0));
            let normalized = s.replace('.', "::");
            if normalized != **s {
                variants.push((normalized, i, 0));
            }
            let last = s.rsplit(['.', ':']).next().unwrap_or(s);
            if last != s.as_str() && last.len() >= 3 {
                variants.push((last.to_string(), i, 1));
            }
        }
        let names: Vec<String> = variants.iter().map(|v| v.0.clone()).collect();
        let rows = index.symbols_named_any(&names, limit * 4).await?;
        // Rank by the identifier (in query order) and spelling that matched; the last segment
        // alone counts only for identifiers with no match as written.
        let best = |r: &ctxd_index::SymbolRow| {
            variants
                .iter()
                .position(|v| v.0 == r.qualified_name || v.0 == r.symbol || v.0 == r.name)
                .unwrap_or(usize::MAX)
        };
        let exact: HashSet<usize> =
            rows.iter().filter_map(|r| variants.get(best(r))).filter(|v| v.2 == 0).map(|v| v.1).collect();
        let mut rows: Vec<_> = rows
            .into_iter()
            .filter(|r| variants.get(best(r)).is_some_and(|v| v.2 == 0 || !exact.contains(&v.1)))
            .collect();
        rows.sort_by_key(|r| (best(r), r.path.clone(), r.start_line));
        if rows.is_empty() {
            if let Some(s) = symbols.iter().find(|s| s.len() >= 4) {
                rows = index.symbols_named(s, true, limit).await?;
            }
        }
        rows.truncate(limit);
        let mut paths: Vec<String> = rows.iter().map(|r| r.path.clone()).collect();
        paths.sort();
        paths.dedup();
        let by_path = index.chunks_of_paths(&paths).await?;
        let mut hits = Vec::new();
        for row in &rows {
            // The chunk holding the definition's first line (a merged or split one included).
            if let Some(c) = by_path
                .get(&row.path)
                .into_iter()
                .flatten()
                .filter(|c| c.start_line <= row.start_line && row.start_line <= c.end_line)
                .min_by_key(|c| c.end_line - c.start_line)
            {
                if !hits.iter().any(|h: &Hit| h.chunk_id == c.chunk_id) {
                    hits.push(c.clone());
                }
            }
        }
        Ok(hits)
    }

    /// Chunks of the files a query names, the chunk holding the line first, then by distance.
    async fn path_hits(&self, index: &Index, vocab: &Vocab, a: &Analysis) -> Result<Vec<Hit>, SearchError> {
        let mut hits = Vec::new();
        for p in a.paths.iter().take(3) {
            for path in vocab.resolve(&p.path) {
                let mut chunks = index.chunks_of(path).await?;
                let line = p.line.unwrap_or(1);
                chunks.sort_by_key(|c| {
                    if c.start_line <= line && line <= c.end_line {
                        0
                    } else {
                        c.start_line.abs_diff(line).min(c.end_line.abs_diff(line)) + 1
                    }
                });
                hits.extend(chunks.into_iter().take(8));
            }
        }
        Ok(hits)
    }

    /// The symbol table alone: the query's identifiers, or else its longer words, as names.
    pub async fn symbol_search(&self, req: &SearchRequest) -> Result<SearchResponse, SearchError> {
        Self::validate(req)?;
        let (index, version) = self.index_as_of(req.as_of.as_deref()).await?;
        let a = analyze(&req.query, |_| false);
        let names: Vec<String> = if a.symbols.is_empty() {
            req.query
                .split(|c: char| !c.is_alphanumeric() && c != '_')
                .filter(|w| w.len() >= 4)
                .map(str::to_string)
                .collect()
        } else {
            a.symbols.clone()
        };
        let mut hits = self.symbol_hits(&index, &names, req.k.max(10)).await?;
        hits.truncate(req.k);
        let n = hits.len();
        Ok(SearchResponse {
            results: hits
                .into_iter()
                .enumerate()
                .map(|(i, mut h)| {
                    h.score = 1.0 - i as f32 / n.max(1) as f32;
                    SearchResult::from(h)
                })
                .collect(),
            version,
            route: Some("symbol".into()),
            intent: Some(a.intent.as_str().to_string()),
        })
    }

    /// Answers a request by routing it (see the module docs).
    pub async fn routed_search(
        &self,
        req: &SearchRequest,
        vector: QueryVector<'_>,
    ) -> Result<SearchResponse, SearchError> {
        Self::validate(req)?;
        let (index, version, vocab) = self.index_and_vocab(req.as_of.as_deref()).await?;
        let a = analyze(&req.query, |w| vocab.modules.contains(&w.to_lowercase()));
        let w = a.intent.weights();
        let k = req.k;
        let depth = search_depth(k);
        let mut text = bm25_text(&req.query, &a);
        if req.lean {
            // A window of code has dozens of terms; BM25 cost grows with each one. The
            // distinct words nearest the end (the cursor) carry the intent.
            text = last_distinct_terms(&text, LEAN_BM25_TERMS);
        }
        // Lean (completion) queries visit fewer IVF partitions: latency over the last neighbours.
        let probes = req.lean.then_some(LEAN_NPROBES);
        // The full-text search runs while the query is being embedded, not after.
        let (vec_hits, fts_hits) = tokio::join!(
            async {
                match vector {
                    QueryVector::Ready(v) => Ok(index.vector_search_probes(v, depth, probes).await?),
                    QueryVector::Embed(embed) => {
                        let v = embed.embed(vec![req.query.clone()]).await?;
                        Ok(index.vector_search_probes(&v[0], depth, probes).await?)
                    }
                    QueryVector::None => Ok::<_, SearchError>(Vec::new()),
                    QueryVector::Hits(hits) => Ok(hits.to_vec()),
                }
            },
            index.fts_search(&text, if req.lean { LEAN_FTS_DEPTH.min(depth) } else { depth })
        );
        let mut lists = vec![(w.vector, vec_hits?), (w.bm25, fts_hits?)];
        if !a.symbols.is_empty() && !req.lean {
            lists.push((w.symbol, self.symbol_hits(&index, &a.symbols, 20).await?));
        }
        // A path route answers with the named file's chunks, nearest the line first; the
        // other signals fill the remaining slots. Elsewhere, named files (e.g. a trace's
        // frames) are one more signal.
        let mut pinned: Vec<Hit> = Vec::new();
        if !a.paths.is_empty() && !req.lean {
            let hits = self.path_hits(&index, &vocab, &a).await?;
            if a.route == Route::Path {
                pinned = hits;
            } else {
                lists.push((0.8, hits));
            }
        }
        let mut fused = fuse(&lists);

        let current = req.current_file.as_deref().map(|f| f.trim_start_matches("./"));
        let current_dir = current.map(parent_dir);
        for h in &mut fused {
            let mut m = 1.0;
            if is_definition(h.kind.as_deref()) {
                m *= w.definition_boost;
            }
            if is_document(&h.language) {
                m *= w.doc_boost;
            }
            if a.modules.iter().any(|md| {
                let md = md.to_lowercase();
                h.path.to_lowercase().split('/').any(|seg| seg == md)
            }) {
                m *= 1.25;
            }
            // Vendored and installed copies rank below the project's own code.
            if req.scope != Some(Scope::Dependencies) && in_dependency(&h.path) {
                m *= 0.9;
            }
            if current == Some(h.path.as_str()) {
                m *= 1.2;
            } else if current_dir.is_some_and(|d| !d.is_empty() && parent_dir(&h.path) == d) {
                m *= 1.1;
            }
            h.score *= m;
        }
        fused.sort_by(|x, y| y.score.total_cmp(&x.score));
        let passes = |h: &Hit| {
            if req.path_prefix.as_ref().is_some_and(|p| !h.path.starts_with(p.trim_start_matches("./"))) {
                return false;
            }
            if req.language.as_ref().is_some_and(|l| !h.language.eq_ignore_ascii_case(l)) {
                return false;
            }
            match req.scope {
                None => true,
                Some(Scope::File) => current == Some(h.path.as_str()),
                Some(Scope::Module) => current_dir.is_some_and(|d| h.path.starts_with(d)),
                Some(Scope::Project) => !in_dependency(&h.path),
                Some(Scope::Dependencies) => in_dependency(&h.path),
            }
        };
        if !req.lean && req.rerank != Some(false) && self.rerank_depth > 0 && w.vector > 0.0 {
            if let Some(embed) = &self.pinned.embed {
                rescore(embed, &self.pinned.tokens, &req.query, &mut fused, &passes, self.rerank_depth).await;
            }
        }
        // The files a path route names are not capped.
        let named: HashSet<String> = pinned.iter().map(|h| h.path.clone()).collect();
        if !pinned.is_empty() {
            let top = fused.first().map_or(1.0, |h| h.score.max(1e-6));
            let pinned_ids: HashSet<String> = pinned.iter().map(|h| h.chunk_id.clone()).collect();
            fused.retain(|h| !pinned_ids.contains(&h.chunk_id));
            let n = pinned.len();
            for (i, h) in pinned.iter_mut().enumerate() {
                h.score = top * (2.0 - i as f32 / n as f32);
            }
            pinned.append(&mut fused);
            fused = pinned;
        }

        let cap = req.max_per_file.unwrap_or(3).max(1);
        let mut per_file: HashMap<String, usize> = HashMap::new();
        let mut results = Vec::with_capacity(k);
        for h in fused {
            if !passes(&h) {
                continue;
            }
            let n = per_file.entry(h.path.clone()).or_default();
            if *n >= cap && !named.contains(&h.path) {
                continue;
            }
            *n += 1;
            results.push(SearchResult::from(h));
            if results.len() >= k {
                break;
            }
        }
        metrics::counter!(crate::metrics::ROUTE_QUERIES_TOTAL, "route" => a.route.as_str(), "intent" => a.intent.as_str())
            .increment(1);
        Ok(SearchResponse {
            results,
            version,
            route: Some(a.route.as_str().to_string()),
            intent: Some(a.intent.as_str().to_string()),
        })
    }
}

/// Rescores the best `depth` hits that pass the filters by late interaction
/// ([`crate::rerank`]) and re-sorts `fused` (sorted by score on entry). On a model error the
/// first-stage order stays, with a warning: rescoring refines an answer, it never costs one.
async fn rescore(
    embed: &ctxd_models::EmbedService,
    cache: &crate::rerank::TokenCache,
    query: &str,
    fused: &mut [Hit],
    passes: &impl Fn(&Hit) -> bool,
    depth: usize,
) {
    let chosen: Vec<usize> = (0..fused.len()).filter(|&i| passes(&fused[i])).take(depth).collect();
    if chosen.len() < 2 {
        return;
    }
    let started = Instant::now();
    let candidates: Vec<&Hit> = chosen.iter().map(|&i| &fused[i]).collect();
    let second = match crate::rerank::late_interaction(embed, cache, query, &candidates).await {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!("rescoring by late interaction failed, keeping the first-stage order: {e}");
            return;
        }
    };
    let first: Vec<f32> = candidates.iter().map(|h| h.score).collect();
    let top = fused.first().map_or(1.0, |h| h.score.max(1e-6));
    for h in fused.iter_mut() {
        h.score /= top;
    }
    for (&i, s) in chosen.iter().zip(crate::rerank::combine(&first, &second)) {
        fused[i].score = s;
    }
    fused.sort_by(|x, y| y.score.total_cmp(&x.score));
    metrics::histogram!(crate::metrics::RERANK_SECONDS).record(started.elapsed().as_secs_f64());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::test_hit as hit;

    #[test]
    fn weights_decide_between_disagreeing_signals() {
        let a = vec![hit("x"), hit("y")];
        let b = vec![hit("y"), hit("x")];
        assert_eq!(fuse(&[(1.0, a.clone()), (0.5, b.clone())])[0].chunk_id, "x");
        assert_eq!(fuse(&[(0.5, a), (1.0, b)])[0].chunk_id, "y");
    }

    #[test]
    fn bm25_text_adds_identifier_words_and_drops_frames() {
        let a = analyze("getUserById returns null", |_| false);
        assert!(bm25_text("getUserById returns null", &a).ends_with("get user by id"));
        let q = "Traceback (most recent call last):\n  File \"a.py\", line 3, in run\nKeyError: 'user_id'";
        let a = analyze(q, |_| false);
        let t = bm25_text(q, &a);
        assert!(t.contains("KeyError") && !t.contains("a.py"), "{t}");
    }

    #[test]
    fn lean_queries_keep_the_last_distinct_informative_terms() {
        let t = last_distinct_terms("let total = self.price * qty;\nreturn apply_discount(total, 10, self.price)", 3);
        assert_eq!(t, "apply_discount total price");
        assert_eq!(last_distinct_terms("fn a() { 1 }", 5), "");
    }

    #[test]
    fn dependency_folders_and_kinds() {
        assert!(in_dependency("web/node_modules/react/index.js"));
        assert!(!in_dependency("src/vendor_api.rs"));
        assert!(is_definition(Some("function_part")) && !is_definition(Some("section")) && !is_definition(None));
    }
}
