//! `repo_map`: an aider-style map of the repository packed into a token budget — the most
//! relevant files (ranked by localization for a query, else by the graph's centrality), each
//! with the signatures of its most referenced definitions, in file and line order.
//!
//! Tokens are estimated as one per four bytes of text (the map is a table of contents: the
//! estimate only decides where to stop; the answer reports the estimate it used).

use serde::Serialize;

use super::CodeGraph;

/// Signatures listed per file at most.
const PER_FILE: usize = 12;

/// Estimated tokens of a text.
pub fn estimate_tokens(text: &str) -> usize {
    text.len().div_ceil(4)
}

/// One file of the map.
#[derive(Debug, Clone, Serialize)]
pub struct MapFile {
    pub path: String,
    pub score: f64,
    /// `(start_line, end_line, symbol, signature)` of the definitions shown, by line.
    pub definitions: Vec<MapDef>,
}

/// One definition line of the map.
#[derive(Debug, Clone, Serialize)]
pub struct MapDef {
    pub symbol: String,
    pub start_line: u32,
    pub end_line: u32,
    pub signature: String,
    /// Resolved uses of it in the index.
    pub references: usize,
}

/// The map.
#[derive(Debug, Clone, Serialize)]
pub struct RepoMap {
    pub files: Vec<MapFile>,
    /// The map as text (what an agent pastes into its prompt).
    pub text: String,
    pub tokens: usize,
    pub budget: usize,
    /// `locate` when a query ranked the files, `centrality` otherwise.
    pub ranked_by: &'static str,
}

/// Packs the files of `ranking` (file id, score; best first) into `budget` tokens.
pub fn repo_map(g: &CodeGraph, ranking: &[(usize, f64)], budget: usize, ranked_by: &'static str) -> RepoMap {
    let mut files = Vec::new();
    let mut text = String::new();
    let mut tokens = 0;
    for &(f, score) in ranking {
        let mut defs: Vec<usize> = g.by_file[f].clone();
        defs.sort_by_key(|&i| (std::cmp::Reverse(g.into_symbol[i].len()), g.symbols[i].parent.is_some(), i));
        defs.truncate(PER_FILE);
        defs.sort_by_key(|&i| g.symbols[i].start_line);
        let mut block = format!("{}:\n", g.files[f]);
        let header = estimate_tokens(&block);
        if tokens + header > budget {
            break;
        }
        let mut shown = Vec::new();
        let mut used = header;
        for i in defs {
            let s = &g.symbols[i];
            let indent = if s.parent.is_some() { "    " } else { "  " };
            let line = format!("{indent}{}: {}\n", s.start_line, s.signature);
            let t = estimate_tokens(&line);
            if tokens + used + t > budget {
                break;
            }
            used += t;
            block.push_str(&line);
            shown.push(MapDef {
                symbol: s.symbol.clone(),
                start_line: s.start_line,
                end_line: s.end_line,
                signature: s.signature.clone(),
                references: g.into_symbol[i].len(),
            });
        }
        tokens += used;
        text.push_str(&block);
        files.push(MapFile { path: g.files[f].clone(), score, definitions: shown });
    }
    // Per-line estimates round up, so the whole text's is never more than what was counted.
    let tokens = estimate_tokens(&text);
    RepoMap { files, text, tokens, budget, ranked_by }
}

/// The graph's files by centrality, best first (files with no definitions last).
pub fn central_files(g: &CodeGraph, centrality: &[f64]) -> Vec<(usize, f64)> {
    let mut out: Vec<(usize, f64)> =
        (0..g.files.len()).map(|f| (f, centrality.get(f).copied().unwrap_or(0.0))).collect();
    out.sort_by(|a, b| {
        let key = |f: usize| (g.by_file[f].is_empty(), g.is_test[f]);
        key(a.0).cmp(&key(b.0)).then(b.1.total_cmp(&a.1))
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::build::build;
    use ctxd_index::symbols::SymbolRow;

    #[test]
    fn the_map_stays_within_its_budget() {
        let syms: Vec<SymbolRow> = (0..40)
            .map(|i| SymbolRow {
                symbol_id: i.to_string(),
                name: format!("f{i}"),
                qualified_name: format!("f{i}"),
                symbol: format!("f{i}"),
                kind: "function".into(),
                language: "python".into(),
                path: format!("m{}.py", i % 4),
                start_line: i + 1,
                end_line: i + 1,
                signature: format!("def f{i}(a, b, c):"),
                parent: None,
                doc: None,
            })
            .collect();
        let g = build(vec![], syms, vec![], (1, 1, 1));
        let ranking: Vec<(usize, f64)> = (0..4).map(|f| (f, 1.0 - f as f64 / 10.0)).collect();
        for budget in [10, 50, 200, 10_000] {
            let m = repo_map(&g, &ranking, budget, "centrality");
            assert!(m.tokens <= budget, "{budget}: {}", m.tokens);
            assert_eq!(m.tokens, estimate_tokens(&m.text), "the reported tokens are the text's");
        }
        let big = repo_map(&g, &ranking, 10_000, "centrality");
        assert_eq!(big.files.len(), 4);
        assert_eq!(big.files[0].definitions.len(), 10);
        assert!(big.text.starts_with("m0.py:\n  1: def f0(a, b, c):\n"), "{}", big.text);
    }
}
