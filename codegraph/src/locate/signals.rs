//! The localization signals, each a score per file with the reason it gives:
//!
//! * [`Signal::Paths`] — files the text names (by path suffix, or a unique file name);
//! * [`Signal::Frames`] — files of stack-trace frames, mapped into the index by the longest
//!   path suffix (a frame in `site-packages/pkg/x.py` is `src/pkg/x.py`), the innermost frames
//!   weighing most;
//! * [`Signal::Symbols`] — files defining the identifiers the text names (rarer names weigh
//!   more: a name defined once is a pointer, one defined forty times is not), a file whose stem
//!   is such a name, and dotted module names resolved to their file;
//! * [`Signal::Messages`] — files whose code contains an error message of the text verbatim;
//! * [`Signal::Bm25`] and [`Signal::Vector`] — chunk hits aggregated to files (the best chunk
//!   plus a share of the next ones);
//! * [`Signal::Definitions`] — definitions whose names, parameters and docstrings match the
//!   text's words ([`crate::graph::def_index`]), aggregated to files the same way;
//! * [`Signal::Graph`] — personalised PageRank from the other signals' best files;
//! * [`Signal::Recency`] and [`Signal::Cochange`] — the file's recent commits (see
//!   [`super::history`]).

use std::collections::HashMap;

use ctxd_index::record::Hit;

use super::text::Issue;
use crate::graph::CodeGraph;

/// A localization signal (the names of `--without`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Signal {
    Paths,
    Frames,
    Symbols,
    Messages,
    Bm25,
    Vector,
    /// Definitions matching the text's words (see [`crate::graph::def_index`]).
    Definitions,
    Graph,
    /// How recently a file changed (see [`super::history`]).
    Recency,
    /// Changed in the same commits as the best files (see [`super::history`]).
    Cochange,
    /// Changed by past commits whose messages read like the text (see [`super::past_commits`]).
    Commits,
    /// Not a score: the demotion of test, doc, example and vendored files.
    Demote,
}

impl Signal {
    pub const ALL: [Signal; 12] = [
        Signal::Paths,
        Signal::Frames,
        Signal::Symbols,
        Signal::Messages,
        Signal::Bm25,
        Signal::Vector,
        Signal::Definitions,
        Signal::Graph,
        Signal::Recency,
        Signal::Cochange,
        Signal::Commits,
        Signal::Demote,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Signal::Paths => "paths",
            Signal::Frames => "frames",
            Signal::Symbols => "symbols",
            Signal::Messages => "messages",
            Signal::Bm25 => "bm25",
            Signal::Vector => "vector",
            Signal::Definitions => "definitions",
            Signal::Graph => "graph",
            Signal::Recency => "recency",
            Signal::Cochange => "cochange",
            Signal::Commits => "commits",
            Signal::Demote => "demote",
        }
    }
}

impl std::str::FromStr for Signal {
    type Err = ctxd_search::error::SearchError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ctxd_search::error::by_name("signal", s, &Signal::ALL, Signal::as_str)
    }
}

/// Scores per file id, with a reason per file.
#[derive(Debug, Default, Clone)]
pub struct Scores {
    pub score: HashMap<usize, f64>,
    pub why: HashMap<usize, String>,
}

impl Scores {
    pub(crate) fn add(&mut self, file: usize, score: f64, why: impl FnOnce() -> String) {
        let e = self.score.entry(file).or_insert(0.0);
        if score > *e {
            self.why.insert(file, why());
        }
        *e = e.max(score);
    }
}

/// Files matching a path as written: exact, else by the longest suffix of whole components
/// (at least the file name; a bare file name only when unique).
pub fn match_path(g: &CodeGraph, written: &str) -> Vec<(usize, usize)> {
    let written = written.replace('\\', "/");
    let parts: Vec<&str> = written.split('/').filter(|p| !p.is_empty() && *p != ".").collect();
    let Some(name) = parts.last() else { return Vec::new() };
    if let Some(f) = g.file(parts.join("/").as_str()) {
        return vec![(f, parts.len())];
    }
    let mut best: Vec<(usize, usize)> = Vec::new();
    for (f, path) in g.files.iter().enumerate() {
        if !path.ends_with(name) {
            continue;
        }
        let have: Vec<&str> = path.split('/').collect();
        let common = have.iter().rev().zip(parts.iter().rev()).take_while(|(a, b)| a == b).count();
        if common == 0 {
            continue;
        }
        match best.first() {
            Some(&(_, c)) if c > common => {}
            Some(&(_, c)) if c == common => best.push((f, common)),
            _ => best = vec![(f, common)],
        }
    }
    if best.len() > 1 && best[0].1 == 1 {
        return Vec::new(); // a bare name that several files share
    }
    best
}

/// Files the text names.
pub fn paths(g: &CodeGraph, issue: &Issue) -> Scores {
    let mut s = Scores::default();
    for p in &issue.paths {
        for (f, _) in match_path(g, p) {
            s.add(f, 1.0, || format!("named: {p}"));
        }
    }
    s
}

/// Files of stack-trace frames: the innermost in-index frame 1.0, each outer one 0.8× the next.
pub fn frames(g: &CodeGraph, issue: &Issue) -> Scores {
    let mut s = Scores::default();
    let mut w = 1.0;
    for fr in issue.frames.iter().rev() {
        let found = match_path(g, &fr.file);
        if found.is_empty() {
            continue;
        }
        for (f, _) in found {
            let line = fr.line.map(|l| format!(":{l}")).unwrap_or_default();
            let func = fr.function.as_deref().map(|x| format!(" in {x}")).unwrap_or_default();
            s.add(f, w, || format!("traceback frame {}{line}{func}", g.files[f]));
        }
        w *= 0.8;
    }
    s
}

/// Files defining the identifiers the text names, files named like them, and dotted module names.
pub fn symbols(g: &CodeGraph, issue: &Issue) -> Scores {
    let mut s = Scores::default();
    let stems = &g.by_stem;
    for (ident, weight) in &issue.identifiers {
        let defs = g.lookup(ident);
        let non_test: Vec<usize> = defs.iter().copied().filter(|&d| !g.is_test[g.symbol_file[d]]).collect();
        let use_defs = if non_test.is_empty() { &defs } else { &non_test };
        let mut files: Vec<usize> = use_defs.iter().map(|&d| g.symbol_file[d]).collect();
        files.sort();
        files.dedup();
        if !files.is_empty() && files.len() <= 12 {
            // Specificity: one defining file → full weight; more → less.
            let spec = 1.0 / (files.len() as f64).sqrt();
            let dotted = ident.contains('.') || ident.contains("::");
            let w = weight * spec * if dotted { 1.2 } else { 1.0 };
            for f in files {
                let d = use_defs.iter().copied().find(|&d| g.symbol_file[d] == f).unwrap_or(use_defs[0]);
                s.add(f, w, || {
                    format!("defines {} ({}:{})", g.symbols[d].symbol, g.symbols[d].path, g.symbols[d].start_line)
                });
            }
        }
        let last = ident.rsplit(['.', ':']).next().unwrap_or(ident).to_ascii_lowercase();
        if let Some(files) = stems.get(&last).filter(|f| f.len() <= 3) {
            for &f in files {
                s.add(f, weight * 0.9, || format!("file named {ident}"));
            }
        }
        // A dotted module name (`pkg.sub.mod`) → its file.
        if ident.contains('.') && !ident.contains(' ') {
            let as_path = format!("{}.py", ident.replace('.', "/"));
            for (f, common) in match_path(g, &as_path) {
                if common >= 2 {
                    s.add(f, *weight, || format!("module {ident}"));
                }
            }
        }
    }
    // Code-like words of the text (`RF02`, `dialect_tsql`) naming a file.
    for (word, weight) in &issue.file_words {
        if let Some(files) = stems.get(&word.to_ascii_lowercase()).filter(|f| f.len() <= 3) {
            for &f in files {
                s.add(f, weight * 0.9, || format!("file named {word}"));
            }
        }
    }
    s
}

/// Files whose chunks contain a message of the text verbatim (`hits` per message, from BM25).
pub fn messages(g: &CodeGraph, found: &[(String, Vec<Hit>)]) -> Scores {
    let mut s = Scores::default();
    for (msg, hits) in found {
        let lower = msg.to_lowercase();
        for h in hits {
            if h.content.to_lowercase().contains(&lower) {
                if let Some(f) = g.file(&h.path) {
                    s.add(f, 1.0, || format!("contains the message \"{}\" (line {})", short(msg), h.start_line));
                }
            }
        }
    }
    s
}

fn short(s: &str) -> String {
    if s.chars().count() > 60 {
        format!("{}…", s.chars().take(60).collect::<String>())
    } else {
        s.to_string()
    }
}

/// Chunk hits aggregated to files ([`best_plus_shares`]), each told by its best chunk's lines.
pub fn aggregate(g: &CodeGraph, hits: &[Hit]) -> Scores {
    let scored = hits.iter().filter_map(|h| Some((g.file(&h.path)?, h.score as f64, h)));
    let mut s = Scores::default();
    for (f, score, best) in best_plus_shares(scored) {
        s.add(f, score, || format!("lines {}-{}", best.start_line, best.end_line));
    }
    s
}

/// Definitions' scores (`by_def`, from [`crate::graph::def_index::DefIndex::score`]) aggregated
/// to files ([`best_plus_shares`]; ties by definition id), each told by its best definition.
pub fn definitions(g: &CodeGraph, by_def: &HashMap<usize, f64>) -> Scores {
    let mut ids: Vec<usize> = by_def.keys().copied().collect();
    ids.sort_unstable();
    let mut s = Scores::default();
    for (f, score, d) in best_plus_shares(ids.into_iter().map(|d| (g.symbol_file[d], by_def[&d], d))) {
        let sym = &g.symbols[d];
        s.add(f, score, || format!("{} {} (line {}) matches the text's words", sym.kind, sym.symbol, sym.start_line));
    }
    s
}

/// Scored items `(file, score, item)` aggregated to files: the best item's score plus 0.3 and 0.1
/// of the next two (ties in input order), normalised by the best file; each file with its best item.
fn best_plus_shares<T>(items: impl Iterator<Item = (usize, f64, T)>) -> Vec<(usize, f64, T)> {
    let mut per: HashMap<usize, Vec<(f64, T)>> = HashMap::new();
    for (f, x, item) in items {
        per.entry(f).or_default().push((x, item));
    }
    let mut raw: Vec<(usize, f64, T)> = Vec::new();
    for (f, mut list) in per {
        list.sort_by(|a, b| b.0.total_cmp(&a.0));
        let score = list.iter().zip([1.0, 0.3, 0.1]).map(|((x, _), w)| x * w).sum::<f64>();
        raw.push((f, score, list.swap_remove(0).1));
    }
    let max = raw.iter().map(|r| r.1).fold(0.0, f64::max);
    if max <= 0.0 {
        return Vec::new();
    }
    raw.into_iter().map(|(f, score, item)| (f, score / max, item)).collect()
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use crate::graph::build::{build, test_def};

    #[test]
    fn definitions_add_up_per_file_normalised_by_the_best_file() {
        let files = vec!["a.py".to_string(), "b.py".into()];
        let syms = vec![test_def("a.py", "one"), test_def("a.py", "two"), test_def("b.py", "three")];
        let g = build(files, syms, vec![], (1, 1, 1));
        let by_def: HashMap<usize, f64> = [(0, 2.0), (1, 1.0), (2, 2.0)].into();
        let s = super::definitions(&g, &by_def);
        let (a, b) = (g.file("a.py").unwrap(), g.file("b.py").unwrap());
        assert_eq!(s.score[&a], 1.0, "best 2.0 plus 0.3 of 1.0: the best file");
        assert!((s.score[&b] - 2.0 / 2.3).abs() < 1e-12, "{:?}", s.score);
        assert!(s.why[&a].contains("function one (line 1)"), "{:?}", s.why);
    }
}
