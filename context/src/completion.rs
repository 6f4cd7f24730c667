//! IDE completion context: a few snippets from elsewhere in the project that help complete the
//! code at the cursor (`POST /v1/completion-context`).
//!
//! The query is built from the cursor's surroundings by `strategy`:
//!
//! * `current_line` — the line being typed (the prefix's last line);
//! * `multi_line` (default) — the last 6 lines of the prefix and the first 2 of the suffix;
//! * `symbol` — the identifiers nearest the cursor (the prefix's last 8), looked up in the
//!   symbol table first.
//!
//! It runs the routed search with the cursor's file as `current_file` (its other chunks are
//! boosted), never returns the chunk the cursor is in, drops duplicate texts, keeps
//! `max_chunks` snippets whose importance reaches `min_score`, and returns an empty list — not
//! an error — when the index is not ready or the cursor context holds too little to search for.
//! `importance` is 0–100: the score relative to the best result, decayed by 15% per rank.
//!
//! **The keystroke path.** An editor asks on every keystroke, mostly from the same place. For
//! `current_line` and `multi_line`, the vector signal is the *stored* vector of the indexed chunk
//! around the cursor (its neighbours are the code most like the function being edited; no
//! embedding on the keystroke path), and the identifier being typed and the rest of the cursor's
//! line are left out of the query (a partial word matches nothing yet; the rest of the line
//! changes with every keystroke). The answer is then the same for every keystroke inside
//! one word at one place, and is cached per (index version, file, chunk around the cursor, query
//! text, options): the next keystrokes are answered from memory until the next commit. The file's
//! chunk ranges and vectors and each place's vector-search hits are cached per version too (one
//! B-tree lookup per file and one ANN search per place and commit): when a completed word changes
//! the query, only the full-text search runs again.
//! Outside any indexed chunk (a new file, new code) the cursor window is embedded as before.
//! The caches are the [`Completer`]'s, per (index, model) pair of its searcher.

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;

use ctxd_index::{record::Hit, vectors::ChunkVector};

use serde::{Deserialize, Serialize};

use ctxd_search::error::SearchError;
use ctxd_search::retriever::PerBackend;
use ctxd_search::route::identifier_words;
use ctxd_search::routed::QueryVector;
use ctxd_search::search::{Mode, SearchRequest, SearchResponse};
use ctxd_search::searcher::Searcher;
use ctxd_search::Bounded;

/// How the query is built from the cursor context.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Strategy {
    CurrentLine,
    #[default]
    MultiLine,
    Symbol,
}

fn default_max_chunks() -> usize {
    3
}

/// The body of `POST /v1/completion-context`.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CompletionRequest {
    /// The document: `file:///abs/path`, an absolute path or a path relative to the root.
    pub uri: String,
    #[serde(default)]
    pub language: Option<String>,
    /// Text before the cursor.
    pub prefix: String,
    /// Text after the cursor.
    #[serde(default)]
    pub suffix: Option<String>,
    /// 1-based line of the cursor.
    pub line: u32,
    #[serde(default = "default_max_chunks")]
    pub max_chunks: usize,
    /// Minimum importance (0–100) of a snippet.
    #[serde(default)]
    pub min_score: f32,
    #[serde(default)]
    pub strategy: Strategy,
    /// Only these named sources (see [`ctxd_search::sources`]).
    #[serde(default, deserialize_with = "ctxd_search::sources::de_sources")]
    #[schemars(with = "Option<ctxd_search::sources::SourceNames>")]
    pub source: Option<ctxd_index::scope::SourceScope>,
    /// A git source's branch, tag or commit to read (default: each git source's first ref).
    #[serde(default, rename = "ref")]
    pub git_ref: Option<String>,
}

/// One snippet, in the shape IDE completion providers use.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct CodeSnippet {
    pub uri: String,
    pub line_start: u32,
    pub line_end: u32,
    pub symbol_name: Option<String>,
    pub value: String,
    /// 0–100.
    pub importance: u32,
}

/// `{"snippets": [...]}`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default, schemars::JsonSchema)]
pub struct CompletionResponse {
    pub snippets: Vec<CodeSnippet>,
}

/// Lines before the cursor the multi-line strategy searches with: enough for the statement
/// being written and its neighbours; each more line costs embedding time on every keystroke.
const MULTI_LINE_PREFIX_LINES: usize = 6;
/// Lines after the cursor it adds.
const MULTI_LINE_SUFFIX_LINES: usize = 2;

/// The query for a cursor context, or `None` when there is too little to search for.
pub fn build_query(req: &CompletionRequest) -> Option<String> {
    let prefix_lines: Vec<&str> = req.prefix.lines().collect();
    let suffix = req.suffix.as_deref().unwrap_or("");
    let text = match req.strategy {
        Strategy::CurrentLine => {
            let mut t = prefix_lines.last().copied().unwrap_or("").to_string();
            if req.prefix.ends_with('\n') {
                t.clear();
            }
            t.push_str(suffix.lines().next().unwrap_or(""));
            t
        }
        Strategy::MultiLine => {
            let from = prefix_lines.len().saturating_sub(MULTI_LINE_PREFIX_LINES);
            let mut t = prefix_lines[from..].join("\n");
            for l in suffix.lines().take(MULTI_LINE_SUFFIX_LINES) {
                t.push('\n');
                t.push_str(l);
            }
            t
        }
        Strategy::Symbol => {
            let idents: Vec<&str> = req
                .prefix
                .split(|c: char| !c.is_alphanumeric() && c != '_')
                .filter(|w| w.len() >= 3 && w.chars().next().is_some_and(|c| c.is_alphabetic() || c == '_'))
                .collect();
            let from = idents.len().saturating_sub(8);
            idents[from..].join(" ")
        }
    };
    // Enough to search for: at least one word of 3+ letters once identifiers are split.
    let words: Vec<String> = text
        .split(|c: char| !c.is_alphanumeric() && c != '_')
        .flat_map(identifier_words)
        .filter(|w| w.len() >= 3 && w.chars().any(char::is_alphabetic))
        .collect();
    if words.is_empty() {
        return None;
    }
    Some(tail(text.trim(), 2000).to_string())
}

/// The last `max` bytes of `text` at most, starting on a char boundary.
fn tail(text: &str, max: usize) -> &str {
    let mut start = text.len().saturating_sub(max);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

/// The path of `uri` relative to the index: `file://` stripped, then matched by suffix.
fn relative_path(uri: &str, indexed: &[String]) -> String {
    let path = uri.strip_prefix("file://").unwrap_or(uri);
    if let Some(p) = indexed.iter().find(|p| path == **p || path.ends_with(&format!("/{p}"))) {
        return p.to_string();
    }
    path.trim_start_matches("./").to_string()
}

/// Files whose chunk vectors are kept, and answers kept (per completer, for the latest version).
const CACHED_FILES: usize = 64;
const CACHED_ANSWERS: usize = 1024;
/// Places whose vector-search hits are kept (each ~50 hits with their text: ~50 KB).
const CACHED_PLACES: usize = 256;

/// What an answer depends on (besides the index version, which empties the cache).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct AnswerKey {
    path: String,
    /// The chunk around the cursor (its vector is the vector signal), or "" outside chunks.
    anchor: String,
    query: String,
    max_chunks: usize,
    min_score: u32,
    strategy: Strategy,
}

/// The completion caches of one index version.
pub(crate) struct CompletionCache {
    version: Option<(u64, String)>,
    /// Chunk ranges and vectors of recently asked-about files, most recently used last.
    files: VecDeque<(String, Arc<Vec<ChunkVector>>)>,
    /// Vector-search hits of a chunk's stored vector, by chunk id (a place's vector signal,
    /// whatever words are typed there).
    neighbours: Bounded<String, Vec<Hit>>,
    answers: Bounded<AnswerKey, CompletionResponse>,
}

impl Default for CompletionCache {
    fn default() -> Self {
        Self {
            version: None,
            files: VecDeque::new(),
            neighbours: Bounded::new(CACHED_PLACES),
            answers: Bounded::new(CACHED_ANSWERS),
        }
    }
}

/// Shared by a completer's clones; replaced on a model switch.
pub(crate) type Cache = Arc<tokio::sync::Mutex<CompletionCache>>;

/// The cache, locked and emptied first if the index moved on from `version`.
async fn cache_at(cache: &Cache, version: (u64, String)) -> tokio::sync::MutexGuard<'_, CompletionCache> {
    let mut c = cache.lock().await;
    if c.version.as_ref() != Some(&version) {
        *c = CompletionCache { version: Some(version), ..CompletionCache::default() };
    }
    c
}

impl CompletionCache {
    fn file(&mut self, path: &str) -> Option<Arc<Vec<ChunkVector>>> {
        let i = self.files.iter().position(|(p, _)| p == path)?;
        let entry = self.files.remove(i)?;
        let chunks = entry.1.clone();
        self.files.push_back(entry);
        Some(chunks)
    }

    fn keep_file(&mut self, path: String, chunks: Arc<Vec<ChunkVector>>) {
        if self.files.len() >= CACHED_FILES {
            self.files.pop_front();
        }
        self.files.push_back((path, chunks));
    }
}

/// A search failure the request caused (e.g. only punctuation left after analysis) is no
/// context, not an error.
fn or_no_context<T>(found: Result<T, SearchError>) -> Result<Option<T>, SearchError> {
    match found {
        Ok(f) => Ok(Some(f)),
        Err(e) if e.is_client_error() => Ok(None),
        Err(e) => Err(e),
    }
}

/// `prefix` without the identifier being typed at its end (nothing to match yet).
fn without_partial_word(prefix: &str) -> &str {
    let end = prefix.trim_end_matches(|c: char| c.is_alphanumeric() || c == '_');
    if end.len() == prefix.len() {
        prefix
    } else {
        end
    }
}

/// Answers completion-context requests with a searcher, keeping the keystroke path's caches
/// (see the module docs). Clones share the caches.
#[derive(Clone)]
pub struct Completer {
    searcher: Searcher,
    caches: PerBackend<tokio::sync::Mutex<CompletionCache>>,
}

impl Completer {
    /// A completer searching with `searcher`.
    pub fn new(searcher: Searcher) -> Self {
        Self { searcher, caches: PerBackend::default() }
    }

    /// Answers a completion-context request.
    pub async fn complete(&self, req: &CompletionRequest) -> Result<CompletionResponse, SearchError> {
        // One index and model for the whole request.
        let searcher = self.searcher.current();
        let cache = self.caches.of(searcher.retriever());
        completion_context(&searcher, &cache, req).await
    }
}

/// Answers a completion-context request with `searcher` (pinned) and the caches of its pair.
async fn completion_context(
    searcher: &Searcher,
    cache: &Cache,
    req: &CompletionRequest,
) -> Result<CompletionResponse, SearchError> {
    if req.max_chunks == 0 || req.max_chunks > 50 {
        return Err(SearchError::BadRequest("max_chunks must be between 1 and 50".into()));
    }
    if req.prefix.len() + req.suffix.as_ref().map_or(0, String::len) > 1 << 20 {
        return Err(SearchError::BadRequest("prefix and suffix must be under 1 MiB together".into()));
    }
    // Lines of code name identifiers and paths all the time: looking each up would cost more
    // than the editor can wait. The symbol strategy is the one that asks for them.
    let lean = req.strategy != Strategy::Symbol;
    let query = if lean {
        // Stable while a word is typed: the partial word and the rest of the cursor's line
        // (which loses a character to the prefix at every keystroke) are left out.
        let suffix = req.suffix.as_deref().unwrap_or("");
        let after_line = match req.strategy {
            Strategy::CurrentLine => "",
            _ => suffix.split_once('\n').map_or("", |(_, rest)| rest),
        };
        let stable = CompletionRequest {
            prefix: without_partial_word(&req.prefix).to_string(),
            suffix: Some(after_line.to_string()),
            ..req.clone()
        };
        build_query(&stable).or_else(|| build_query(req))
    } else {
        build_query(req)
    };
    let Some(query) = query else { return Ok(CompletionResponse::default()) };
    let vocab = searcher.latest_vocab().await?;
    let current = relative_path(&req.uri, &vocab.paths);
    let mut search = SearchRequest::new(query).with((req.max_chunks * 4).clamp(8, 40), Mode::Routed);
    search.current_file = Some(current.clone());
    search.source = req.source.clone();
    search.max_per_file = Some(2);
    search.lean = lean;
    // An editor cannot wait for a second forward pass over the candidates.
    search.rerank = Some(false);
    let Some(search) = or_no_context(search.check())? else { return Ok(CompletionResponse::default()) };
    if !lean {
        let Some(found) = or_no_context(searcher.search(&search).await)? else {
            return Ok(CompletionResponse::default());
        };
        return Ok(snippets(req, &current, found));
    }
    let pinned = searcher.retriever().pinned_index();
    let index = match &req.source {
        None => pinned.clone(),
        Some(scope) => Arc::new(pinned.scoped(Some(scope.clone())).await?),
    };
    // A cache holds one version of one view: another scope starts it afresh, as a new version does.
    let version = (index.version().await?, index.scope_key());
    let cached = cache_at(cache, version.clone()).await.file(&current);
    let chunks = match cached {
        Some(c) => c,
        None => {
            let c = Arc::new(index.vectors().chunk_vectors_of(&current).await?);
            cache_at(cache, version.clone()).await.keep_file(current.clone(), c.clone());
            c
        }
    };
    // The innermost indexed chunk around the cursor.
    let around = chunks
        .iter()
        .filter(|c| c.start_line <= req.line && req.line <= c.end_line)
        .min_by_key(|c| c.end_line - c.start_line);
    let key = AnswerKey {
        path: current.clone(),
        anchor: around.map(|c| c.chunk_id.clone()).unwrap_or_default(),
        query: search.query.clone(),
        max_chunks: req.max_chunks,
        min_score: req.min_score.to_bits(),
        strategy: req.strategy,
    };
    if let Some(answer) = cache_at(cache, version.clone()).await.answers.get(&key).cloned() {
        metrics::counter!(crate::metrics::COMPLETION_CACHE_HITS_TOTAL).increment(1);
        return Ok(answer);
    }
    metrics::counter!(crate::metrics::COMPLETION_CACHE_MISSES_TOTAL).increment(1);
    let neighbours: Vec<Hit>;
    let vector = match (around, searcher.retriever().embed()) {
        (Some(c), _) => {
            // The place's neighbours are searched once per version; later misses at the same
            // place (a word completed) only run the full-text search.
            let cached = cache_at(cache, version.clone()).await.neighbours.get(&c.chunk_id).cloned();
            neighbours = match cached {
                Some(h) => h,
                None => {
                    let depth = ctxd_search::routed::search_depth(search.k);
                    let h =
                        index.reads().vector_search_with(&c.vector, depth, ctxd_index::search::Probes::LEAN).await?;
                    cache_at(cache, version.clone()).await.neighbours.put(c.chunk_id.clone(), h.clone());
                    h
                }
            };
            QueryVector::Hits(&neighbours)
        }
        (None, Some(embed)) => QueryVector::Embed(embed),
        (None, None) => QueryVector::None,
    };
    let Some(found) = or_no_context(searcher.routed_search(&search, vector).await)? else {
        return Ok(CompletionResponse::default());
    };
    let answer = snippets(req, &current, found);
    cache_at(cache, version.clone()).await.answers.put(key, answer.clone());
    Ok(answer)
}

/// The snippets of a search's results: never the chunk at the cursor, no duplicate texts,
/// importance from the score with a rank decay.
fn snippets(req: &CompletionRequest, current: &str, found: SearchResponse) -> CompletionResponse {
    let top = found.results.first().map(|r| r.score).filter(|s| *s > 0.0).unwrap_or(1.0);
    let mut seen: HashSet<String> = HashSet::new();
    let mut snippets = Vec::new();
    for r in found.results {
        // Never the code around the cursor itself.
        if r.path == current && r.start_line <= req.line && req.line <= r.end_line {
            continue;
        }
        if !seen.insert(r.content.trim().to_string()) {
            continue;
        }
        let rank = snippets.len() as i32;
        let importance = ((r.score / top).clamp(0.0, 1.0) * 0.85f32.powi(rank) * 100.0).round();
        if importance < req.min_score {
            continue;
        }
        snippets.push(CodeSnippet {
            line_start: r.start_line,
            line_end: r.end_line,
            uri: r.chunk.path,
            symbol_name: r.chunk.symbol,
            value: r.chunk.content,
            importance: importance as u32,
        });
        if snippets.len() >= req.max_chunks {
            break;
        }
    }
    CompletionResponse { snippets }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(prefix: &str, strategy: Strategy) -> CompletionRequest {
        CompletionRequest {
            uri: "file:///repo/src/a.rs".into(),
            language: Some("rust".into()),
            prefix: prefix.into(),
            suffix: Some("\n}\n".into()),
            line: 3,
            max_chunks: 3,
            min_score: 0.0,
            strategy,
            source: None,
            git_ref: None,
        }
    }

    #[test]
    fn queries_from_the_cursor() {
        let prefix = "use crate::cache;\n\nfn warm(c: &mut Cache) {\n    c.evict_lru(";
        assert_eq!(build_query(&req(prefix, Strategy::CurrentLine)).unwrap(), "c.evict_lru(");
        assert!(build_query(&req(prefix, Strategy::MultiLine)).unwrap().starts_with("use crate::cache;"));
        assert_eq!(build_query(&req(prefix, Strategy::Symbol)).unwrap(), "use crate cache warm mut Cache evict_lru");
        assert_eq!(build_query(&req("  x = (", Strategy::CurrentLine)), None, "too short to search");
        assert_eq!(build_query(&req("", Strategy::MultiLine)), None);
    }

    #[test]
    fn the_word_being_typed_is_left_out() {
        assert_eq!(without_partial_word("    self.cache.evi"), "    self.cache.");
        assert_eq!(without_partial_word("x = foo("), "x = foo(");
        assert_eq!(without_partial_word("total_count"), "");
    }

    #[tokio::test]
    async fn the_cache_keeps_one_version_and_a_bounded_number_of_answers() {
        let key = |i: usize| AnswerKey {
            path: "a.rs".into(),
            anchor: format!("c{i}"),
            query: "q".into(),
            max_chunks: 3,
            min_score: 0,
            strategy: Strategy::MultiLine,
        };
        let cache: Cache = Arc::default();
        {
            let mut c = cache_at(&cache, (1, String::new())).await;
            for i in 0..CACHED_ANSWERS + 5 {
                c.answers.put(key(i), CompletionResponse::default());
            }
            assert_eq!(c.answers.len(), CACHED_ANSWERS);
            assert!(c.answers.get(&key(0)).is_none() && c.answers.get(&key(CACHED_ANSWERS + 4)).is_some());
            c.keep_file("a.rs".into(), Arc::new(Vec::new()));
            assert!(c.file("a.rs").is_some());
        }
        assert!(cache_at(&cache, (1, String::new())).await.file("a.rs").is_some(), "same version: kept");
        let mut scoped = cache_at(&cache, (1, "scope:docs".into())).await;
        assert!(scoped.file("a.rs").is_none(), "another scope never sees what was kept for all sources");
        drop(scoped);
        let mut c = cache_at(&cache, (2, "scope:docs".into())).await;
        assert!(c.answers.is_empty() && c.file("a.rs").is_none(), "a commit empties it");
    }

    #[test]
    fn uris_map_to_indexed_paths() {
        let indexed = ["src/a.rs".to_string(), "src/b.rs".to_string()];
        assert_eq!(relative_path("file:///home/me/repo/src/a.rs", &indexed), "src/a.rs");
        assert_eq!(relative_path("src/b.rs", &indexed), "src/b.rs");
        assert_eq!(relative_path("./new.rs", &indexed), "new.rs");
    }
}
