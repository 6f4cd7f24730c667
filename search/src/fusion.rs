//! Fusion of ranked lists into one: reciprocal-rank fusion (hybrid mode) and the weighted sum
//! of min-max normalised scores (routed mode), both summing per chunk with [`combine`].

use std::collections::HashMap;

use ctxd_index::record::Hit;

/// The RRF constant (Cormack et al. 2009).
const RRF_K: f32 = 60.0;

/// Reciprocal-rank fusion of ranked lists; ties keep the first list's order.
pub fn rrf(lists: &[Vec<Hit>], k: usize) -> Vec<Hit> {
    let mut fused = combine(
        lists
            .iter()
            .flat_map(|list| list.iter().enumerate().map(|(rank, hit)| (1.0 / (RRF_K + rank as f32 + 1.0), hit))),
    );
    fused.truncate(k);
    fused
}

/// Weighted fusion of min-max normalised scores (CombSUM): within each list the best hit
/// scores 1 and the last 0, so a list's confidence gaps count, not only its order. Lists
/// without meaningful scores (symbol and path lookups) are scored by rank.
pub fn weighted(lists: &[(f32, Vec<Hit>)]) -> Vec<Hit> {
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

/// Sums the `(contribution, hit)` pairs per chunk and ranks the chunks by their sums (the sum
/// becomes the score); ties keep first-seen order. The core of every fusion.
fn combine<'a>(contributions: impl IntoIterator<Item = (f32, &'a Hit)>) -> Vec<Hit> {
    let mut scores: HashMap<&str, (f32, usize, &Hit)> = HashMap::new();
    for (add, hit) in contributions {
        let order = scores.len();
        scores.entry(hit.chunk_id.as_str()).and_modify(|e| e.0 += add).or_insert((add, order, hit));
    }
    let mut fused: Vec<(f32, usize, &Hit)> = scores.into_values().collect();
    fused.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    fused
        .into_iter()
        .map(|(s, _, h)| {
            let mut h = h.clone();
            h.score = s;
            h
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A bare hit with this chunk id.
    fn hit(id: &str) -> Hit {
        let chunk = ctxd_index::record::Chunk {
            chunk_id: id.into(),
            path: format!("{id}.rs"),
            language: "rust".into(),
            start_line: 1,
            end_line: 2,
            ..Default::default()
        };
        Hit { chunk, score: 0.0 }
    }

    #[test]
    fn rrf_rewards_agreement() {
        let a = vec![hit("x"), hit("y"), hit("z")];
        let b = vec![hit("y"), hit("w")];
        let fused = rrf(&[a, b], 3);
        assert_eq!(fused[0].chunk_id, "y");
        assert_eq!(fused.len(), 3);
        assert!(fused[0].score > fused[1].score);
    }

    #[test]
    fn weights_decide_between_disagreeing_signals() {
        let a = vec![hit("x"), hit("y")];
        let b = vec![hit("y"), hit("x")];
        assert_eq!(weighted(&[(1.0, a.clone()), (0.5, b.clone())])[0].chunk_id, "x");
        assert_eq!(weighted(&[(0.5, a), (1.0, b)])[0].chunk_id, "y");
    }
}
