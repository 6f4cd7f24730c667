//! IDE completion context: a few snippets from elsewhere in the project that help complete the
//! code at the cursor (`POST /v1/completion-context`).
//!
//! The query is built from the cursor's surroundings by `strategy`:
//!
//! * `current_line` — the line being typed (the prefix's last line);
//! * `multi_line` (default) — the last 12 lines of the prefix and the first 3 of the suffix;
//! * `symbol` — the identifiers nearest the cursor (the prefix's last 8), looked up in the
//!   symbol table first.
//!
//! It runs the routed search with the cursor's file as `current_file` (its other chunks are
//! boosted), never returns the chunk the cursor is in, drops duplicate texts, keeps
//! `max_chunks` snippets whose importance reaches `min_score`, and returns an empty list — not
//! an error — when the index is not ready or the cursor context holds too little to search for.
//! `importance` is 0–100: the score relative to the best result, decayed by 15% per rank.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use crate::route::identifier_words;
use crate::search::{Mode, SearchRequest, Searcher};
use crate::SearchError;

/// How the query is built from the cursor context.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
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
#[derive(Debug, Clone, Deserialize)]
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
}

/// One snippet, in the shape IDE completion providers use.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
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
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
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

/// Answers a completion-context request.
pub async fn completion_context(
    searcher: &Searcher,
    req: &CompletionRequest,
) -> Result<CompletionResponse, SearchError> {
    if req.max_chunks == 0 || req.max_chunks > 50 {
        return Err(SearchError::BadRequest("max_chunks must be between 1 and 50".into()));
    }
    if req.prefix.len() + req.suffix.as_ref().map_or(0, String::len) > 1 << 20 {
        return Err(SearchError::BadRequest("prefix and suffix must be under 1 MiB together".into()));
    }
    let Some(query) = build_query(req) else { return Ok(CompletionResponse::default()) };
    let vocab = searcher.latest_vocab().await?;
    let current = relative_path(&req.uri, &vocab.paths);
    let mode = Mode::Routed;
    let mut search = SearchRequest::new(query).with((req.max_chunks * 4).clamp(8, 40), mode);
    search.current_file = Some(current.clone());
    search.max_per_file = Some(2);
    // Lines of code name identifiers and paths all the time: looking each up would cost more
    // than the editor can wait. The symbol strategy is the one that asks for them.
    search.lean = req.strategy != Strategy::Symbol;
    let found = match searcher.search(&search).await {
        Ok(f) => f,
        // A query the search cannot take (e.g. only punctuation after analysis) is no context.
        Err(e) if e.is_client_error() => return Ok(CompletionResponse::default()),
        Err(e) => return Err(e),
    };
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
            uri: r.path,
            line_start: r.start_line,
            line_end: r.end_line,
            symbol_name: r.symbol,
            value: r.content,
            importance: importance as u32,
        });
        if snippets.len() >= req.max_chunks {
            break;
        }
    }
    Ok(CompletionResponse { snippets })
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
    fn uris_map_to_indexed_paths() {
        let indexed = ["src/a.rs".to_string(), "src/b.rs".to_string()];
        assert_eq!(relative_path("file:///home/me/repo/src/a.rs", &indexed), "src/a.rs");
        assert_eq!(relative_path("src/b.rs", &indexed), "src/b.rs");
        assert_eq!(relative_path("./new.rs", &indexed), "new.rs");
    }
}
