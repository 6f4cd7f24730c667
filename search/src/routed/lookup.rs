//! The router's lookups: the symbol table (the definitions a query's identifiers name, as
//! chunks), the chunks of the files a query names, and symbol mode (the symbol table alone).

use std::collections::HashSet;

use ctxd_index::{record::Hit, store::Index};

use super::vocab::Vocab;
use crate::error::SearchError;
use crate::retriever::Retriever;
use crate::route::{analyze, Analysis, Route};
use crate::search::{SearchResponse, SearchResult, ValidSearch};

/// Definitions named by the query's identifiers, as chunks (exact names first).
pub(super) async fn symbol_hits(index: &Index, symbols: &[String], limit: usize) -> Result<Vec<Hit>, SearchError> {
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
    let rows = index.symbols().symbols_named_any(&names, limit * 4).await?;
    // Rank by the identifier (in query order) and spelling that matched; the last segment
    // alone counts only for identifiers with no match as written.
    let best = |r: &ctxd_index::symbols::SymbolRow| {
        variants.iter().position(|v| v.0 == r.qualified_name || v.0 == r.symbol || v.0 == r.name).unwrap_or(usize::MAX)
    };
    let exact: HashSet<usize> =
        rows.iter().filter_map(|r| variants.get(best(r))).filter(|v| v.2 == 0).map(|v| v.1).collect();
    let mut rows: Vec<_> =
        rows.into_iter().filter(|r| variants.get(best(r)).is_some_and(|v| v.2 == 0 || !exact.contains(&v.1))).collect();
    rows.sort_by_key(|r| (best(r), r.path.clone(), r.start_line));
    if rows.is_empty() {
        if let Some(s) = symbols.iter().find(|s| s.len() >= 4) {
            rows = index.symbols().symbols_named(s, true, limit).await?;
        }
    }
    rows.truncate(limit);
    let mut paths: Vec<String> = rows.iter().map(|r| r.path.clone()).collect();
    paths.sort();
    paths.dedup();
    let by_path = index.reads().chunks_of_paths(&paths).await?;
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
pub(super) async fn path_hits(index: &Index, vocab: &Vocab, a: &Analysis) -> Result<Vec<Hit>, SearchError> {
    let mut hits = Vec::new();
    for p in a.paths.iter().take(3) {
        for path in vocab.resolve(&p.path) {
            let mut chunks = index.reads().chunks_of(path).await?;
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
pub(crate) async fn symbol_search(core: &Retriever, req: &ValidSearch) -> Result<SearchResponse, SearchError> {
    let (index, version) = core.index_as_of(req.as_of.as_deref(), req.source.as_ref()).await?;
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
    let mut hits = symbol_hits(&index, &names, req.k.max(10)).await?;
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
        index: None,
        route: Some(Route::Symbol),
        intent: Some(a.intent),
        stale_ms: None,
        carried_ms: None,
    })
}
