//! File-level propagation over the code graph: personalised PageRank from seed files along
//! resolved edges, in both directions (a file is relevant when it defines what a relevant file
//! uses, and — less — when it uses what a relevant file defines).
//!
//! Edges weigh by kind (a call or inheritance says more than an import; a reference least);
//! the walk follows an edge forward (user → definer) with weight 1 and backward with
//! [`BACKWARD`]; edges out of and into test files count [`TEST_EDGE`] so a test suite that
//! imports everything does not become the graph's hub. Without seeds the same walk is the
//! graph's centrality (aider's repo map ranks by it).

use ctxd_index::edges::EdgeKind;

use super::CodeGraph;

/// Weight of walking an edge backward (definer → user) relative to forward.
const BACKWARD: f64 = 0.4;
/// Weight of an edge that starts in a test file.
const TEST_EDGE: f64 = 0.25;
/// Probability of jumping back to the seeds at each step.
const RESTART: f64 = 0.3;
/// Iterations of the power method (converged well below ranking resolution by then).
const ITERATIONS: usize = 30;

fn kind_weight(kind: EdgeKind) -> f64 {
    match kind {
        EdgeKind::Imports => 0.6,
        EdgeKind::Calls => 1.0,
        EdgeKind::Inherits => 1.5,
        EdgeKind::References => 0.5,
    }
}

/// The weighted file graph: for each file, its (neighbour, weight) list.
pub struct FileGraph {
    adj: Vec<Vec<(usize, f64)>>,
}

impl FileGraph {
    /// Collapses the resolved edges of `g` to files (self-loops dropped, parallel edges summed
    /// with diminishing weight: a file that calls another ten times is not ten times closer).
    pub fn new(g: &CodeGraph) -> Self {
        let n = g.files.len();
        let mut pair: std::collections::HashMap<(usize, usize), f64> = std::collections::HashMap::new();
        for e in &g.edges {
            let src = g.file_ids[&e.row.path];
            let w = kind_weight(e.row.kind) * if g.is_test[src] { TEST_EDGE } else { 1.0 };
            let targets = e.to_files.iter().copied().chain(e.to_symbols.iter().map(|&s| g.symbol_file[s]));
            let mut seen: Vec<usize> = targets.filter(|&t| t != src).collect();
            seen.sort();
            seen.dedup();
            let share = w / seen.len().max(1) as f64;
            for t in seen {
                *pair.entry((src, t)).or_default() += share;
            }
        }
        let mut adj = vec![Vec::new(); n];
        for ((s, t), w) in pair {
            let w = (1.0 + w).ln();
            adj[s].push((t, w));
            adj[t].push((s, w * BACKWARD));
        }
        for list in &mut adj {
            let total: f64 = list.iter().map(|(_, w)| w).sum();
            if total > 0.0 {
                for (_, w) in list.iter_mut() {
                    *w /= total;
                }
            }
            list.sort_by_key(|(t, _)| *t);
        }
        FileGraph { adj }
    }

    /// Personalised PageRank from `seeds` (file id, weight); with no seeds, uniform (the
    /// graph's centrality). Scores sum to 1.
    pub fn pagerank(&self, seeds: &[(usize, f64)]) -> Vec<f64> {
        let n = self.adj.len();
        if n == 0 {
            return Vec::new();
        }
        let mut restart = vec![0.0; n];
        let total: f64 = seeds.iter().map(|(_, w)| w.max(0.0)).sum();
        if total > 0.0 {
            for &(f, w) in seeds {
                restart[f] += w.max(0.0) / total;
            }
        } else {
            restart.iter_mut().for_each(|r| *r = 1.0 / n as f64);
        }
        let mut rank = restart.clone();
        for _ in 0..ITERATIONS {
            let mut next: Vec<f64> = restart.iter().map(|r| r * RESTART).collect();
            let mut dangling = 0.0;
            for (f, list) in self.adj.iter().enumerate() {
                if list.is_empty() {
                    dangling += rank[f];
                    continue;
                }
                for &(t, w) in list {
                    next[t] += (1.0 - RESTART) * rank[f] * w;
                }
            }
            for (x, r) in next.iter_mut().zip(&restart) {
                *x += (1.0 - RESTART) * dangling * r;
            }
            rank = next;
        }
        rank
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::build::build;
    use ctxd_index::edges::EdgeRow;

    #[test]
    fn seeds_spread_to_what_they_use() {
        let def = crate::graph::build::test_def;
        let call = |p: &str, from: &str, t: &str| EdgeRow::new(p, "python", Some(from), EdgeKind::Calls, t, None, 2);
        let g = build(
            vec!["a.py".into(), "b.py".into(), "c.py".into(), "d.py".into()],
            vec![def("a.py", "fa"), def("b.py", "fb"), def("c.py", "fc"), def("d.py", "fd")],
            vec![call("a.py", "fa", "fb"), call("b.py", "fb", "fc")],
            (1, 1, 1),
        );
        let fg = FileGraph::new(&g);
        let r = fg.pagerank(&[(g.file("a.py").unwrap(), 1.0)]);
        let (a, b, c, d) = (r[0], r[1], r[2], r[3]);
        assert!(a > c && b > c && c > d, "the seed and what it uses first: {r:?}");
        assert!((r.iter().sum::<f64>() - 1.0).abs() < 1e-6);
        assert_eq!(d, 0.0, "an unconnected file gets nothing from a seed");
    }
}
