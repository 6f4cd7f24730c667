//! Fusing the localization signals into one file ranking: a weighted sum of each signal's
//! per-file score (each in 0..=1, [`WEIGHTS`]), then personalised PageRank over the code
//! graph from the best files so far (the file that defines what they use rises), then the
//! demotion of test, doc, example and vendored files unless the text asks for them, and the
//! definitions of each file most likely to change.

use std::collections::{HashMap, HashSet};

use ctxd_index::record::Hit;

use super::request::LocatedFile;
use super::signals::{self, Scores, Signal};
use super::text::Issue;
use crate::graph::cache::Graph;
use crate::graph::{CodeGraph, Place};
use ctxd_search::route::identifier_words;

/// Weight of each scoring signal in the sum.
pub const WEIGHTS: [(Signal, f64); 9] = [
    (Signal::Paths, 1.0),
    (Signal::Frames, 0.9),
    (Signal::Symbols, 0.8),
    (Signal::Messages, 0.7),
    (Signal::Bm25, 1.0),
    (Signal::Vector, 0.7),
    (Signal::Graph, 0.5),
    (Signal::Recency, 0.15),
    (Signal::Cochange, 0.3),
];
/// Recency weighs this much more for a debugging text (a traceback or an error message).
const DEBUG_RECENCY: f64 = 2.0;
/// Files seeding the PageRank walk.
const SEEDS: usize = 10;
/// Score multiplier of a test file (when the text does not ask for tests).
const TEST_FACTOR: f64 = 0.3;
/// Score multiplier of a doc, example, benchmark or vendored file.
const DOC_FACTOR: f64 = 0.5;
/// Distinct terms of the BM25 query at most.
const BM25_TERMS: usize = 300;

/// What the signals read.
pub struct Inputs<'a> {
    pub issue: &'a Issue,
    pub bm25: &'a [Hit],
    pub vector: &'a [Hit],
    pub messages: &'a [(String, Vec<Hit>)],
    /// The view's recent commits (empty without a git history).
    pub history: &'a ctxd_index::history::History,
}

/// The BM25 text of an issue: title, identifiers (and their words), prose — distinct terms,
/// at most [`BM25_TERMS`], title first.
pub fn bm25_text(issue: &Issue) -> String {
    let mut seen = HashSet::new();
    let mut out: Vec<String> = Vec::new();
    let mut push = |w: &str| {
        let w = w.trim_matches(|c: char| !c.is_alphanumeric() && c != '_');
        if w.len() < 2 || w.len() > 60 || out.len() >= BM25_TERMS {
            return;
        }
        if seen.insert(w.to_lowercase()) {
            out.push(w.to_string());
        }
    };
    let words = |s: &str| s.split(|c: char| !c.is_alphanumeric() && c != '_').map(str::to_string).collect::<Vec<_>>();
    for w in words(&issue.title) {
        push(&w);
    }
    for (ident, _) in &issue.identifiers {
        for part in ident.split(['.', ':']) {
            push(part);
            for w in identifier_words(part) {
                push(&w);
            }
        }
    }
    for w in words(&issue.prose) {
        push(&w);
    }
    out.join(" ")
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

/// Ranks files (see the module docs); `k` files with up to `defs` definitions each.
pub fn rank(graph: &Graph, inputs: &Inputs<'_>, without: &[Signal], k: usize, defs: usize) -> Vec<LocatedFile> {
    let g = &graph.code;
    let on = |s: Signal| !without.contains(&s);
    let issue = inputs.issue;
    let mut parts: Vec<(Signal, Scores)> = Vec::new();
    if on(Signal::Paths) {
        parts.push((Signal::Paths, signals::paths(g, issue)));
    }
    if on(Signal::Frames) {
        parts.push((Signal::Frames, signals::frames(g, issue)));
    }
    if on(Signal::Symbols) {
        parts.push((Signal::Symbols, normalised(signals::symbols(g, issue))));
    }
    if on(Signal::Messages) {
        parts.push((Signal::Messages, signals::messages(g, inputs.messages)));
    }
    if on(Signal::Bm25) {
        parts.push((Signal::Bm25, signals::aggregate(g, inputs.bm25)));
    }
    if on(Signal::Vector) {
        parts.push((Signal::Vector, signals::aggregate(g, inputs.vector)));
    }
    let debugging = !issue.frames.is_empty() || !issue.messages.is_empty();
    let weight = |s: Signal| {
        let w = WEIGHTS.iter().find(|(x, _)| *x == s).map_or(0.0, |(_, w)| *w);
        if s == Signal::Recency && debugging {
            w * DEBUG_RECENCY
        } else {
            w
        }
    };
    let demote = |f: usize| -> f64 {
        if !on(Signal::Demote) {
            return 1.0;
        }
        if g.is_test[f] && !issue.wants_tests {
            TEST_FACTOR
        } else if is_doc_or_vendored(&g.files[f]) && !issue.wants_docs {
            DOC_FACTOR
        } else {
            1.0
        }
    };
    let mut total: HashMap<usize, f64> = HashMap::new();
    for (s, scores) in &parts {
        for (&f, &x) in &scores.score {
            *total.entry(f).or_default() += weight(*s) * x;
        }
    }
    // The files so far, demoted, best first (ties by file id, so runs repeat).
    let best_of = |total: &HashMap<usize, f64>| -> Vec<(usize, f64)> {
        let mut best: Vec<(usize, f64)> = total.iter().map(|(&f, &x)| (f, x * demote(f))).collect();
        best.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        best
    };
    // A later signal's scores join the sum and the parts `why` is told from.
    let mut join = |total: &mut HashMap<usize, f64>, s: Signal, scores: Scores| {
        for (&f, &x) in &scores.score {
            *total.entry(f).or_default() += weight(s) * x;
        }
        parts.push((s, scores));
    };
    if on(Signal::Graph) && !total.is_empty() {
        let mut seeds = best_of(&total);
        seeds.truncate(SEEDS);
        let pr = graph.files.pagerank(&seeds);
        // Scaled by the best file that is not a seed (the seeds keep most of the walk's mass
        // by restarting there): the file the best ones lean on most gets the full weight.
        let is_seed = |f: usize| seeds.iter().any(|(s, _)| *s == f);
        let max = pr.iter().enumerate().filter(|(f, _)| !is_seed(*f)).map(|(_, x)| *x).fold(0.0, f64::max);
        if max > 0.0 {
            let mut scores = Scores::default();
            for (f, &x) in pr.iter().enumerate() {
                if x > 0.0 {
                    scores.score.insert(f, (x / max).min(1.0));
                    scores.why.insert(f, "near the best files (imports, calls, references)".into());
                }
            }
            join(&mut total, Signal::Graph, scores);
        }
    }
    let h = inputs.history;
    if on(Signal::Cochange) && !h.is_empty() && !total.is_empty() {
        let scores = super::history_signals::cochange(g, h, &best_of(&total));
        join(&mut total, Signal::Cochange, scores);
    }
    if on(Signal::Recency) && !h.is_empty() {
        let candidates: Vec<usize> = total.keys().copied().collect();
        let scores = super::history_signals::recency(g, h, candidates.into_iter());
        join(&mut total, Signal::Recency, scores);
    }
    let mut ranked = best_of(&total);
    ranked.truncate(k);
    ranked
        .into_iter()
        .map(|(f, score)| {
            let mut why: Vec<(f64, String)> = parts
                .iter()
                .filter_map(|(s, sc)| {
                    let x = *sc.score.get(&f)?;
                    let reason = sc.why.get(&f).cloned().unwrap_or_default();
                    Some((weight(*s) * x, format!("{}: {reason}", s.as_str())))
                })
                .collect();
            why.sort_by(|a, b| b.0.total_cmp(&a.0));
            if demote(f) < 1.0 {
                why.push((0.0, format!("demoted ×{}: test, doc or vendored file", demote(f))));
            }
            LocatedFile {
                path: g.files[f].clone(),
                score: (score * 1000.0).round() / 1000.0,
                why: why.into_iter().map(|(_, w)| w).collect(),
                definitions: definitions(g, f, inputs, defs),
            }
        })
        .collect()
}

fn normalised(mut s: Scores) -> Scores {
    let max = s.score.values().copied().fold(0.0, f64::max);
    if max > 1.0 {
        s.score.values_mut().for_each(|x| *x /= max);
    }
    s
}

/// The definitions of file `f` most likely to change: named by the text, holding traceback
/// frames, or holding its best BM25/vector chunks.
fn definitions(g: &CodeGraph, f: usize, inputs: &Inputs<'_>, n: usize) -> Vec<Place> {
    if n == 0 {
        return Vec::new();
    }
    let mut score: HashMap<usize, f64> = HashMap::new();
    let path = &g.files[f];
    for (ident, w) in &inputs.issue.identifiers {
        let last = ident.rsplit(['.', ':']).next().unwrap_or(ident);
        for &d in &g.by_file[f] {
            if g.symbols[d].name == last || g.symbols[d].symbol == *ident {
                *score.entry(d).or_default() += 2.0 * w;
            }
        }
    }
    for fr in &inputs.issue.frames {
        if let (Some(line), true) = (fr.line, fr.file.ends_with(path.rsplit('/').next().unwrap_or(path))) {
            if let Some(d) = g.symbol_at(f, line) {
                *score.entry(d).or_default() += 2.0;
            }
        }
    }
    for (hits, w) in [(inputs.bm25, 1.0), (inputs.vector, 0.7)] {
        for (rank, h) in hits.iter().filter(|h| h.path == *path).take(5).enumerate() {
            if let Some(d) = g.symbol_at(f, (h.start_line + h.end_line) / 2) {
                *score.entry(d).or_default() += w / (1.0 + rank as f64);
            }
        }
    }
    let mut best: Vec<(usize, f64)> = score.into_iter().collect();
    best.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    best.into_iter().take(n).map(|(d, _)| Place::of_symbol(g, d)).collect()
}
