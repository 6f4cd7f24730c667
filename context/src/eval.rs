//! File-level retrieval evaluation: recall@1/5/10, MRR@10, nDCG@10.
//!
//! Input is JSONL, one `{"id","query","gold":[relative paths]}` per line (the format of the
//! shared evaluation sets). Chunk results are collapsed to files in rank order (a file counts
//! at the rank of its best chunk); relevance is binary (the file is in `gold`).

use std::collections::HashSet;
use std::path::Path;

use serde::{Deserialize, Serialize};

use ctxd_search::error::SearchError;
use ctxd_search::search::{Mode, SearchRequest};
use ctxd_search::searcher::Searcher;

/// One evaluation query.
#[derive(Debug, Clone, Deserialize)]
pub struct EvalQuery {
    pub id: String,
    pub query: String,
    pub gold: Vec<String>,
}

/// Aggregated metrics of one mode.
#[derive(Debug, Clone, Serialize, Default, PartialEq)]
pub struct EvalReport {
    pub mode: String,
    pub queries: usize,
    pub recall_at_1: f64,
    pub recall_at_5: f64,
    pub recall_at_10: f64,
    pub mrr_at_10: f64,
    pub ndcg_at_10: f64,
    pub seconds: f64,
}

/// Reads a queries file; a malformed line is an error naming its line number.
pub fn read_queries(path: &Path) -> Result<Vec<EvalQuery>, SearchError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| SearchError::Queries { path: path.display().to_string(), message: e.to_string() })?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).map_err(|e| SearchError::Queries {
                path: path.display().to_string(),
                message: format!("line {}: {e}", i + 1),
            })
        })
        .collect()
}

/// Per-query metrics of a ranked file list against gold files.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct QueryScores {
    pub recall_at_1: f64,
    pub recall_at_5: f64,
    pub recall_at_10: f64,
    pub mrr_at_10: f64,
    pub ndcg_at_10: f64,
}

/// Scores one ranked list of files.
pub fn score(ranked_files: &[String], gold: &[String]) -> QueryScores {
    let gold: HashSet<&str> = gold.iter().map(String::as_str).collect();
    if gold.is_empty() {
        return QueryScores::default();
    }
    let rel: Vec<bool> = ranked_files.iter().take(10).map(|f| gold.contains(f.as_str())).collect();
    let recall = |n: usize| rel.iter().take(n).filter(|r| **r).count() as f64 / gold.len() as f64;
    let mrr = rel.iter().position(|r| *r).map(|p| 1.0 / (p as f64 + 1.0)).unwrap_or(0.0);
    let dcg: f64 = rel.iter().enumerate().filter(|(_, r)| **r).map(|(i, _)| 1.0 / ((i as f64) + 2.0).log2()).sum();
    let ideal: f64 = (0..gold.len().min(10)).map(|i| 1.0 / ((i as f64) + 2.0).log2()).sum();
    QueryScores {
        recall_at_1: recall(1),
        recall_at_5: recall(5),
        recall_at_10: recall(10),
        mrr_at_10: mrr,
        ndcg_at_10: dcg / ideal,
    }
}

/// Collapses chunk paths to unique files, keeping first-seen order.
pub fn unique_files(paths: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut seen = HashSet::new();
    paths.into_iter().filter(|p| seen.insert(p.clone())).collect()
}

/// Runs every query in `mode` and averages the scores. `rerank` false turns routed mode's
/// late-interaction rescoring off (reported as mode `routed-no-rerank`).
pub async fn evaluate(
    searcher: &Searcher,
    queries: &[EvalQuery],
    mode: Mode,
    k: usize,
    rerank: bool,
) -> Result<EvalReport, SearchError> {
    let started = std::time::Instant::now();
    // Embed all queries up front, in batches, on the model thread.
    let vectors: Vec<Option<Vec<f32>>> = if matches!(mode, Mode::Bm25 | Mode::Symbol)
        || (matches!(mode, Mode::Hybrid | Mode::Routed) && !searcher.has_model())
    {
        vec![None; queries.len()]
    } else {
        let mut out = Vec::with_capacity(queries.len());
        for chunk in queries.chunks(64) {
            let v = searcher.embed_queries(chunk.iter().map(|q| q.query.clone()).collect()).await?;
            out.extend(v.into_iter().map(Some));
        }
        out
    };
    // Enough chunks to fill k distinct files in most cases.
    let depth = (k * 5).clamp(10, ctxd_search::search::MAX_K);
    let mut total = QueryScores::default();
    for (q, v) in queries.iter().zip(&vectors) {
        if q.query.trim().is_empty() {
            continue;
        }
        let mut req = SearchRequest::new(q.query.clone()).with(depth, mode);
        req.rerank = Some(rerank);
        let res = searcher.search_with_vector(&req.check()?, v.as_deref()).await?;
        let files = unique_files(res.results.into_iter().map(|r| r.chunk.path));
        let s = score(&files, &q.gold);
        total.recall_at_1 += s.recall_at_1;
        total.recall_at_5 += s.recall_at_5;
        total.recall_at_10 += s.recall_at_10;
        total.mrr_at_10 += s.mrr_at_10;
        total.ndcg_at_10 += s.ndcg_at_10;
    }
    let n = queries.len().max(1) as f64;
    Ok(EvalReport {
        mode: if mode == Mode::Routed && !rerank { "routed-no-rerank".into() } else { mode.as_str().to_string() },
        queries: queries.len(),
        recall_at_1: total.recall_at_1 / n,
        recall_at_5: total.recall_at_5 / n,
        recall_at_10: total.recall_at_10 / n,
        mrr_at_10: total.mrr_at_10 / n,
        ndcg_at_10: total.ndcg_at_10 / n,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// Context assembly against the naive baseline, averaged over queries.
#[derive(Debug, Clone, Serialize, Default, PartialEq)]
pub struct ContextEvalReport {
    /// `assembled@<budget>` (auto assembly, skeletons), `<assembly>@<budget>` (another
    /// strategy), `whole-blocks@<budget>` (balanced, no skeletons: the assembly before
    /// strategies and skeletons) or `top<k>-files`.
    pub method: String,
    pub queries: usize,
    /// Share of gold files with at least one block (or the whole file) in the context.
    pub gold_recall: f64,
    /// Mean tokens handed to the LLM.
    pub mean_tokens: f64,
    pub seconds: f64,
}

/// Gold-file recall and tokens of assembled contexts at each budget, and of the baseline
/// "the top-k files, whole" for each k (files ranked by the same routed search).
pub async fn evaluate_context(
    assembler: &crate::assembler::Assembler,
    tokens: &ctxd_models::tokens::TokenCounter,
    queries: &[EvalQuery],
    budgets: &[usize],
    assemblies: &[crate::assembly::Assembly],
    baseline_ks: &[usize],
) -> Result<Vec<ContextEvalReport>, SearchError> {
    use crate::assembly::Assembly;
    use std::collections::HashMap;
    let searcher = assembler.searcher();
    let recall = |files: &HashSet<String>, gold: &[String]| {
        if gold.is_empty() {
            0.0
        } else {
            gold.iter().filter(|g| files.contains(*g)).count() as f64 / gold.len() as f64
        }
    };
    let mut out = Vec::new();
    // Each strategy with skeletons, then balanced whole blocks (the assembly before both).
    let mut runs: Vec<(Assembly, bool, String)> = assemblies
        .iter()
        .map(|&a| (a, true, if a == Assembly::Auto { "assembled".to_string() } else { a.as_str().to_string() }))
        .collect();
    runs.push((Assembly::Balanced, false, "whole-blocks".into()));
    for (&budget, (assembly, skeletons, label)) in budgets.iter().flat_map(|b| runs.iter().map(move |r| (b, r))) {
        let started = std::time::Instant::now();
        let (mut r, mut t) = (0.0, 0.0);
        for q in queries {
            let mut req = crate::request::ContextRequest::new(q.query.clone(), budget);
            req.skeletons = *skeletons;
            req.assembly = *assembly;
            let resp = assembler.assemble(&req.check()?, |_| {}).await?;
            let files: HashSet<String> = resp.blocks.iter().map(|b| b.path.clone()).collect();
            r += recall(&files, &q.gold);
            t += resp.tokens_used as f64;
        }
        let n = queries.len().max(1) as f64;
        out.push(ContextEvalReport {
            method: format!("{label}@{budget}"),
            queries: queries.len(),
            gold_recall: r / n,
            mean_tokens: t / n,
            seconds: started.elapsed().as_secs_f64(),
        });
    }
    // Whole files, rebuilt from their chunks (exact lines), token counts cached per file.
    let started = std::time::Instant::now();
    let max_k = baseline_ks.iter().copied().max().unwrap_or(0);
    let mut file_tokens: HashMap<String, usize> = HashMap::new();
    let mut sums = vec![(0.0, 0.0); baseline_ks.len()];
    for q in queries {
        let req =
            SearchRequest::new(q.query.clone()).with((max_k * 5).clamp(10, ctxd_search::search::MAX_K), Mode::Routed);
        let res = searcher.search(&req.check()?).await?;
        let files = unique_files(res.results.into_iter().map(|r| r.chunk.path));
        for (i, &k) in baseline_ks.iter().enumerate() {
            let top: Vec<&String> = files.iter().take(k).collect();
            let mut used = 0;
            for f in &top {
                if !file_tokens.contains_key(*f) {
                    let chunks = searcher.index().reads().chunks_of(f).await?;
                    let lines = crate::draft::indexed_lines(&chunks, 0..=u32::MAX);
                    let text = lines.into_values().collect::<Vec<_>>().join("\n");
                    file_tokens.insert((*f).clone(), tokens.count(&text));
                }
                used += file_tokens[*f];
            }
            let set: HashSet<String> = top.into_iter().cloned().collect();
            sums[i].0 += recall(&set, &q.gold);
            sums[i].1 += used as f64;
        }
    }
    let n = queries.len().max(1) as f64;
    for (i, &k) in baseline_ks.iter().enumerate() {
        out.push(ContextEvalReport {
            method: format!("top{k}-files"),
            queries: queries.len(),
            gold_recall: sums[i].0 / n,
            mean_tokens: sums[i].1 / n,
            seconds: started.elapsed().as_secs_f64(),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn metrics_of_known_rankings() {
        let perfect = score(&s(&["a", "b"]), &s(&["a"]));
        assert_eq!(
            perfect,
            QueryScores { recall_at_1: 1.0, recall_at_5: 1.0, recall_at_10: 1.0, mrr_at_10: 1.0, ndcg_at_10: 1.0 }
        );
        let third = score(&s(&["x", "y", "a"]), &s(&["a"]));
        assert_eq!(third.recall_at_1, 0.0);
        assert_eq!(third.recall_at_5, 1.0);
        assert!((third.mrr_at_10 - 1.0 / 3.0).abs() < 1e-9);
        assert!((third.ndcg_at_10 - 0.5).abs() < 1e-9);
        let miss = score(&s(&["x"]), &s(&["a"]));
        assert_eq!(miss.mrr_at_10, 0.0);
        let half = score(&s(&["a", "x"]), &s(&["a", "b"]));
        assert_eq!(half.recall_at_10, 0.5);
    }

    #[test]
    fn files_are_deduplicated_in_order() {
        assert_eq!(unique_files(s(&["a", "b", "a", "c", "b"])), s(&["a", "b", "c"]));
    }

    #[test]
    fn malformed_query_lines_are_reported_with_line_numbers() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("q.jsonl");
        std::fs::write(&p, "{\"id\":\"1\",\"query\":\"a\",\"gold\":[\"x\"]}\n{not json}\n").unwrap();
        let err = read_queries(&p).unwrap_err().to_string();
        assert!(err.contains("line 2"), "{err}");
    }
}
