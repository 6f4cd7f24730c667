//! The candidate files of a localization and their feature rows ([`Feature`]): the signals'
//! scores as [`super::fuse`] computes them, the derived features (each retrieval signal's file
//! rank, BM25's hit share, recency on a debugging text), and what is known of a file before any
//! text is read (test or doc file the text does not ask for, `__init__.py`, depth, size).
//!
//! A row is what the fitted model scores and what `locate` with `features` returns per candidate,
//! so the fitting script (`benches/fit_locate.py`) learns from exactly the numbers the daemon
//! ranks by.

use std::collections::HashMap;

use ctxd_index::record::Hit;
use serde::Serialize;

use super::ranker::{Feature, Row, FEATURES};
use super::signals::Scores;
use super::text::Issue;
use crate::graph::CodeGraph;

/// BM25 chunk hits of one file that count towards [`Feature::Bm25Hits`].
const HITS_COUNTED: usize = 10;

/// Candidate files of one text over one graph, each with its row.
pub struct Candidates<'a> {
    g: &'a CodeGraph,
    issue: &'a Issue,
    /// Whether the test/doc flags are set (`--without demote` leaves them zero).
    demote: bool,
    rows: HashMap<usize, Row>,
}

/// One candidate's features by name (the `features` of a `locate` answer).
#[derive(Debug, Clone, Serialize)]
pub struct CandidateFeatures {
    pub path: String,
    pub score: f64,
    pub features: std::collections::BTreeMap<&'static str, f64>,
}

impl<'a> Candidates<'a> {
    /// No candidates yet, for `issue` over `g`; `demote` sets the test/doc flags.
    pub fn new(g: &'a CodeGraph, issue: &'a Issue, demote: bool) -> Self {
        Self { g, issue, demote, rows: HashMap::new() }
    }

    /// The row of file `f`, made with its text-independent features on first use.
    fn row(&mut self, f: usize) -> &mut Row {
        let (g, issue, demote) = (self.g, self.issue, self.demote);
        self.rows.entry(f).or_insert_with(|| file_row(g, issue, demote, f))
    }

    /// Sets `feature` from a signal's scores, for every file they score.
    pub fn set(&mut self, feature: Feature, scores: &Scores) {
        for (&f, &x) in &scores.score {
            self.row(f)[feature as usize] = x;
        }
    }

    /// Sets `feature` to 1/(1 + rank) of each file by `scores` (ties by file id).
    pub fn set_rank(&mut self, feature: Feature, scores: &Scores) {
        let mut order: Vec<(usize, f64)> = scores.score.iter().map(|(&f, &x)| (f, x)).collect();
        order.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        for (rank, (f, _)) in order.into_iter().enumerate() {
            self.row(f)[feature as usize] = 1.0 / (1.0 + rank as f64);
        }
    }

    /// [`Feature::Bm25Hits`]: the share of the first chunk hits that fall in each file.
    pub fn set_hit_share(&mut self, hits: &[Hit]) {
        let counted = hits.len().min(HITS_COUNTED * 5);
        if counted == 0 {
            return;
        }
        let mut per: HashMap<usize, usize> = HashMap::new();
        for h in &hits[..counted] {
            if let Some(f) = self.g.file(&h.path) {
                *per.entry(f).or_default() += 1;
            }
        }
        for (f, n) in per {
            self.row(f)[Feature::Bm25Hits as usize] = n.min(HITS_COUNTED) as f64 / HITS_COUNTED as f64;
        }
    }

    /// Each candidate with its score under `score`, best first (ties by file id).
    pub fn ranked(&self, score: impl Fn(&Row) -> f64) -> Vec<(usize, f64)> {
        let mut out: Vec<(usize, f64)> = self.rows.iter().map(|(&f, r)| (f, score(r))).collect();
        out.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        out
    }

    pub fn get(&self, f: usize) -> Option<&Row> {
        self.rows.get(&f)
    }

    pub fn files(&self) -> impl Iterator<Item = usize> + '_ {
        self.rows.keys().copied()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Sets [`Feature::RecencyDebug`] from the recency feature where the text is a debugging text
    /// (a traceback or an error message).
    pub fn set_recency_debug(&mut self) {
        if !self.issue.frames.is_empty() || !self.issue.messages.is_empty() {
            for row in self.rows.values_mut() {
                row[Feature::RecencyDebug as usize] = row[Feature::Recency as usize];
            }
        }
    }

    /// The named features of file `f` (for the answer's `features`).
    pub fn named(&self, f: usize, score: f64) -> Option<CandidateFeatures> {
        let row = self.rows.get(&f)?;
        Some(CandidateFeatures {
            path: self.g.files[f].clone(),
            score,
            features: Feature::ALL
                .iter()
                .map(|ft| (ft.as_str(), row[*ft as usize]))
                .filter(|(_, x)| *x != 0.0)
                .collect(),
        })
    }
}

/// Whether a path is documentation, an example, a benchmark or vendored code.
pub fn is_doc_or_vendored(path: &str) -> bool {
    let lower = path.to_ascii_lowercase();
    let ext = lower.rsplit_once('.').map_or("", |(_, e)| e);
    matches!(ext, "md" | "rst" | "txt" | "adoc" | "html")
        || lower.split('/').rev().skip(1).any(|d| {
            matches!(
                d,
                "doc"
                    | "docs"
                    | "example"
                    | "examples"
                    | "benchmarks"
                    | "bench"
                    | "vendor"
                    | "vendored"
                    | "third_party"
                    | "node_modules"
                    | "site-packages"
                    | "_vendor"
            )
        })
}

/// The features of file `f` known before the signals: test/doc flags (when `demote` and the
/// text does not ask for them), `__init__.py`, depth, size.
fn file_row(g: &CodeGraph, issue: &Issue, demote: bool, f: usize) -> Row {
    let mut row = [0.0; FEATURES];
    let path = &g.files[f];
    if demote {
        if g.is_test[f] && !issue.wants_tests {
            row[Feature::Test as usize] = 1.0;
        } else if is_doc_or_vendored(path) && !issue.wants_docs {
            row[Feature::Doc as usize] = 1.0;
        }
    }
    if path.rsplit('/').next() == Some("__init__.py") {
        row[Feature::Init as usize] = 1.0;
    }
    row[Feature::Depth as usize] = path.matches('/').count() as f64 / 10.0;
    row[Feature::Size as usize] = (1.0 + g.by_file[f].len() as f64).ln() / 5.0;
    row
}
