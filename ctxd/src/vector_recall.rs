//! `ctxd bench --vector-recall DB`: the vector index of a database measured against exact
//! search, for each way of visiting it ([`Probes`]: IVF partitions, a refine step), so that the
//! settings searches use are chosen by measured recall rather than by default.
//!
//! The queries are the stored vectors of chunks spread over the index (every n-th chunk id,
//! sorted), each searched as a routed search does (the [`search_depth`] best of a question for
//! 10 results, with the hit columns read): a chunk's own row is left out of both lists, so it
//! does not count as found. For each setting it prints recall@10 (of the exact 10 nearest, the
//! share in the setting's first 10) and recall@50, with the latency of one search (p50, p95;
//! one at a time), and the exact search's latency. The index must have its vector index (`ctxd
//! compact` builds it once the table has `--vector-index-min-rows` embedded rows).

use std::path::Path;
use std::time::Instant;

use anyhow::{bail, Result};
use ctxd_index::record::Hit;
use ctxd_index::search::Probes;
use ctxd_index::store::Index;
use ctxd_search::routed::search_depth;

/// The settings measured: partitions visited (Lance's adaptive default first) × refine step.
const SETTINGS: [Probes; 10] = [
    Probes { nprobes: None, refine: None },
    Probes { nprobes: None, refine: Some(2) },
    Probes { nprobes: Some(5), refine: None },
    Probes { nprobes: Some(10), refine: None },
    Probes { nprobes: Some(20), refine: None },
    Probes { nprobes: Some(40), refine: None },
    Probes { nprobes: Some(5), refine: Some(2) },
    Probes { nprobes: Some(10), refine: Some(2) },
    Probes { nprobes: Some(20), refine: Some(2) },
    Probes { nprobes: Some(40), refine: Some(2) },
];

/// One setting's figures.
struct Measured {
    recall_10: f64,
    recall_50: f64,
    millis: Vec<f64>,
}

/// Measures the vector index of the database at `db` with `queries` stored vectors as queries.
pub async fn run(db: &Path, queries: usize) -> Result<()> {
    let index = Index::open(&db.to_string_lossy()).await?;
    if !index.maintenance().has_vector_index().await? {
        bail!(
            "{} has no vector index to measure: build it with `ctxd compact --db {} --vector-index-min-rows 1`",
            db.display(),
            db.display()
        );
    }
    let mut ids: Vec<String> = index.reads().chunk_ids().await?.into_iter().collect();
    ids.sort();
    let rows = ids.len();
    let step = (rows / queries.max(1)).max(1);
    let picked: Vec<String> = ids.into_iter().step_by(step).take(queries).collect();
    let vectors = index.vectors().vectors_of_chunks(&picked).await?;
    let asked: Vec<(&String, &Vec<f32>)> = picked.iter().filter_map(|id| Some((id, vectors.get(id)?))).collect();
    if asked.is_empty() {
        bail!("{} holds no embedded chunks to search with", db.display());
    }
    let depth = search_depth(10);
    let mut exact = Vec::with_capacity(asked.len());
    let mut exact_ms = Vec::with_capacity(asked.len());
    for (id, v) in &asked {
        let started = Instant::now();
        let hits = index.reads().exact_vector_search(v, depth + 1).await?;
        exact_ms.push(started.elapsed().as_secs_f64() * 1000.0);
        exact.push(others(&hits, id, depth));
    }
    println!(
        "vector-recall: {} ({rows} chunks), {} queries (stored vectors, their own rows left out), {depth} results each",
        db.display(),
        asked.len()
    );
    println!("{:<26} {:>10} {:>10} {:>9} {:>9}", "setting", "recall@10", "recall@50", "p50 ms", "p95 ms");
    println!("{:<26} {:>10} {:>10} {:>9.1} {:>9.1}", "exact", "1", "1", pct(&mut exact_ms, 50), pct(&mut exact_ms, 95));
    for probes in SETTINGS {
        let mut m = Measured { recall_10: 0.0, recall_50: 0.0, millis: Vec::with_capacity(asked.len()) };
        for ((id, v), truth) in asked.iter().zip(&exact) {
            let started = Instant::now();
            let hits = index.reads().vector_search_with(v, depth + 1, probes).await?;
            m.millis.push(started.elapsed().as_secs_f64() * 1000.0);
            let found = others(&hits, id, depth);
            m.recall_10 += recall(&found, truth, 10);
            m.recall_50 += recall(&found, truth, depth);
        }
        let n = asked.len() as f64;
        println!(
            "{:<26} {:>10.4} {:>10.4} {:>9.1} {:>9.1}",
            label(probes),
            m.recall_10 / n,
            m.recall_50 / n,
            pct(&mut m.millis, 50),
            pct(&mut m.millis, 95)
        );
    }
    Ok(())
}

/// The ids of `hits` other than `own`, at most `k`.
fn others(hits: &[Hit], own: &str, k: usize) -> Vec<String> {
    hits.iter().filter(|h| h.chunk_id != own).take(k).map(|h| h.chunk_id.clone()).collect()
}

/// Of the first `k` of `truth`, the share among the first `k` of `found` (1 when `truth` is empty).
fn recall(found: &[String], truth: &[String], k: usize) -> f64 {
    let truth = &truth[..k.min(truth.len())];
    if truth.is_empty() {
        return 1.0;
    }
    let found = &found[..k.min(found.len())];
    truth.iter().filter(|t| found.contains(t)).count() as f64 / truth.len() as f64
}

/// The `p`th percentile of `ms` (sorted in place).
fn pct(ms: &mut [f64], p: usize) -> f64 {
    ms.sort_by(f64::total_cmp);
    ms.get((ms.len().saturating_sub(1) * p) / 100).copied().unwrap_or(0.0)
}

/// A setting as printed: `nprobes=auto refine=none`.
fn label(p: Probes) -> String {
    let nprobes = p.nprobes.map_or("auto".to_string(), |n| n.to_string());
    let refine = p.refine.map_or("none".to_string(), |r| r.to_string());
    format!("nprobes={nprobes} refine={refine}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recall_counts_the_true_neighbours_found_among_the_first_k() {
        let ids = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(recall(&ids(&["a", "b", "c"]), &ids(&["a", "c", "d"]), 3), 2.0 / 3.0);
        assert_eq!(recall(&ids(&["b", "a"]), &ids(&["a", "b", "c"]), 1), 0.0, "only the first k of each");
        assert_eq!(recall(&ids(&[]), &ids(&[]), 10), 1.0);
        assert_eq!(label(Probes { nprobes: Some(20), refine: None }), "nprobes=20 refine=none");
        assert_eq!(pct(&mut [3.0, 1.0, 2.0], 50), 2.0);
    }
}
