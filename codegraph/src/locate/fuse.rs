//! Fusing the localization signals into one file ranking with the fitted model
//! ([`super::model`]): each candidate file's feature row ([`super::features`]) — the text's
//! signals (each in 0..=1), then personalised PageRank over the code graph from the best files by
//! those (the file that defines what they use rises), then the history signals — scored by the
//! model's weighted sum; and the definitions of each file most likely to change (named by the
//! text, in its frames, matching its words, holding its best chunks).

use std::collections::{HashMap, HashSet};

use ctxd_index::record::Hit;

use super::features::{CandidateFeatures, Candidates};
use super::ranker::{Feature, Ranker, Row};
use super::request::LocatedFile;
use super::signals::{self, Scores, Signal};
use super::text::Issue;
use crate::graph::cache::CachedGraph;
use crate::graph::def_index;
use crate::graph::{CodeGraph, Place};
use ctxd_search::route::identifier_words;

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

/// Ranks files (see the module docs) with `model`; `k` files with up to `defs` definitions
/// each, and the features of the first `features` candidates.
pub fn rank(
    graph: &CachedGraph,
    inputs: &Inputs<'_>,
    without: &[Signal],
    model: &Ranker,
    k: usize,
    defs: usize,
    features: usize,
) -> (Vec<LocatedFile>, Vec<CandidateFeatures>) {
    let g = &graph.code;
    let on = |s: Signal| !without.contains(&s);
    let (mut parts, mut c, by_def) = text_signals(graph, inputs, without);
    let score = |row: &Row| model.score(row);
    // A later signal's scores join the rows and the parts `why` is told from.
    let mut join = |c: &mut Candidates, s: Signal, scores: Scores| {
        if let Some(f) = Feature::of_signal(s) {
            c.set(f, &scores);
        }
        parts.push((s, scores));
    };
    if on(Signal::Graph) && !c.is_empty() {
        if let Some(scores) = graph_signal(graph, &c, model) {
            join(&mut c, Signal::Graph, scores);
        }
    }
    let h = inputs.history;
    if on(Signal::Cochange) && !h.is_empty() && !c.is_empty() {
        let scores = super::history_signals::cochange(g, h, &c.ranked(score));
        join(&mut c, Signal::Cochange, scores);
    }
    if on(Signal::Recency) && !h.is_empty() {
        let candidates: Vec<usize> = c.files().collect();
        let scores = super::history_signals::recency(g, h, candidates.into_iter());
        join(&mut c, Signal::Recency, scores);
        c.set_recency_debug();
    }
    let ranked = c.ranked(score);
    let named = ranked.iter().take(features).filter_map(|&(f, x)| c.named(f, x)).collect();
    let files = ranked
        .into_iter()
        .take(k)
        .map(|(f, score)| {
            let row = c.get(f).copied().unwrap_or([0.0; crate::locate::ranker::FEATURES]);
            LocatedFile {
                path: g.files[f].clone(),
                score: (score * 1000.0).round() / 1000.0,
                why: why(&parts, f, &row, model),
                definitions: definitions(g, f, inputs, &by_def, defs),
            }
        })
        .collect();
    (files, named)
}

/// The signals read from the text and its hits (all but those in `without`), set on the
/// candidates they make: the signals' scores, the candidates, and the definitions signal's
/// scores by definition.
fn text_signals<'a>(
    graph: &'a CachedGraph,
    inputs: &Inputs<'a>,
    without: &[Signal],
) -> (Vec<(Signal, Scores)>, Candidates<'a>, HashMap<usize, f64>) {
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
    let mut c = Candidates::new(g, issue, on(Signal::Demote));
    if on(Signal::Bm25) {
        let scores = signals::aggregate(g, inputs.bm25);
        c.set_rank(Feature::Bm25Rank, &scores);
        c.set_hit_share(inputs.bm25);
        parts.push((Signal::Bm25, scores));
    }
    if on(Signal::Vector) {
        let scores = signals::aggregate(g, inputs.vector);
        c.set_rank(Feature::VectorRank, &scores);
        parts.push((Signal::Vector, scores));
    }
    let def_query = definition_query(issue);
    let by_def = if on(Signal::Definitions) { graph.definitions.score(&def_query) } else { HashMap::new() };
    if !by_def.is_empty() {
        let scores = signals::definitions(g, &by_def);
        c.set_rank(Feature::DefinitionsRank, &scores);
        parts.push((Signal::Definitions, scores));
    }
    if on(Signal::Commits) && !inputs.history.is_empty() {
        parts.push((Signal::Commits, super::past_commits::commits(g, inputs.history, &def_query)));
    }
    for (s, scores) in &parts {
        if let Some(f) = Feature::of_signal(*s) {
            c.set(f, scores);
        }
    }
    (parts, c, by_def)
}

/// The graph signal: personalised PageRank from the `model.seeds` best candidates, scaled by
/// the best file that is not a seed; `None` when no such file is reached.
fn graph_signal(graph: &CachedGraph, c: &Candidates<'_>, model: &Ranker) -> Option<Scores> {
    let mut seeds = c.ranked(|row: &Row| model.score(row));
    seeds.truncate(model.seeds);
    // The walk restarts at the seeds in proportion to their scores, which must be positive.
    let seeds: Vec<(usize, f64)> = seeds.into_iter().map(|(f, x)| (f, x.max(1e-3))).collect();
    let pr = graph.files.pagerank(&seeds);
    // Scaled by the best file that is not a seed (the seeds keep most of the walk's mass
    // by restarting there): the file the best ones lean on most gets the full weight.
    let is_seed = |f: usize| seeds.iter().any(|(s, _)| *s == f);
    let max = pr.iter().enumerate().filter(|(f, _)| !is_seed(*f)).map(|(_, x)| *x).fold(0.0, f64::max);
    if max <= 0.0 {
        return None;
    }
    let mut scores = Scores::default();
    for (f, &x) in pr.iter().enumerate() {
        if x > 0.0 {
            scores.score.insert(f, (x / max).min(1.0));
            scores.why.insert(f, "near the best files (imports, calls, references)".into());
        }
    }
    Some(scores)
}

/// Why file `f` (feature row `row`) ranks where it does: the signals the model weighs, by
/// weighted score, then its demotions.
fn why(parts: &[(Signal, Scores)], f: usize, row: &Row, model: &Ranker) -> Vec<String> {
    let mut why: Vec<(f64, String)> = parts
        .iter()
        .filter_map(|(s, sc)| {
            let x = *sc.score.get(&f)?;
            let reason = sc.why.get(&f).cloned().unwrap_or_default();
            let w = Feature::of_signal(*s).map_or(0.0, |ft| model.weight(ft));
            // A signal the model does not weigh is no reason.
            (w != 0.0).then(|| (w * x, format!("{}: {reason}", s.as_str())))
        })
        .collect();
    why.sort_by(|a, b| b.0.total_cmp(&a.0));
    for (flag, what) in [(Feature::Test, "test file"), (Feature::Doc, "doc, example or vendored file")] {
        if row[flag as usize] > 0.0 {
            let factor = model.log_factors[flag as usize].exp();
            let how = if factor != 1.0 { format!("×{factor:.2}") } else { format!("{:+.2}", model.weight(flag)) };
            why.push((0.0, format!("demoted {how}: {what}")));
        }
    }
    why.into_iter().map(|(_, w)| w).collect()
}

fn normalised(mut s: Scores) -> Scores {
    let max = s.score.values().copied().fold(0.0, f64::max);
    if max > 1.0 {
        s.score.values_mut().for_each(|x| *x /= max);
    }
    s
}

/// The words the definitions signal matches: the title's, then the prose's and the identifiers'.
fn definition_query(issue: &Issue) -> HashMap<String, f64> {
    let idents: Vec<&str> = issue.identifiers.iter().map(|(i, _)| i.as_str()).collect();
    def_index::query(&issue.title, &format!("{}\n{}", issue.prose, idents.join(" ")))
}

/// The definitions of file `f` most likely to change: named by the text, holding traceback
/// frames, matching its words (`by_def`, the definitions signal's scores), or holding its best
/// BM25/vector chunks.
fn definitions(g: &CodeGraph, f: usize, inputs: &Inputs<'_>, by_def: &HashMap<usize, f64>, n: usize) -> Vec<Place> {
    if n == 0 {
        return Vec::new();
    }
    let mut score: HashMap<usize, f64> = HashMap::new();
    let best = g.by_file[f].iter().filter_map(|d| by_def.get(d)).copied().fold(0.0, f64::max);
    if best > 0.0 {
        for &d in &g.by_file[f] {
            if let Some(x) = by_def.get(&d) {
                *score.entry(d).or_default() += x / best;
            }
        }
    }
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

#[cfg(test)]
mod tests {
    use super::{rank, Inputs};
    use crate::graph::build::test_def as def;
    use crate::graph::cache::CachedGraph;
    use crate::graph::rank::FileGraph;
    use crate::locate::ranker::Ranker;
    use crate::locate::signals::Signal;

    /// Three files: the text names `pkg/util.py` by path, `parse_config` (defined in
    /// `pkg/core.py`) and `check_helper` (defined in a test only).
    fn graph() -> CachedGraph {
        let files = vec!["pkg/core.py".to_string(), "pkg/util.py".into(), "tests/test_core.py".into()];
        let symbols = vec![
            def("pkg/core.py", "parse_config"),
            def("pkg/util.py", "other"),
            def("tests/test_core.py", "check_helper"),
        ];
        let code = crate::graph::build::build(files, symbols, Vec::new(), (1, 1, 1));
        let files = FileGraph::new(&code);
        let definitions = crate::graph::def_index::DefIndex::build(&code);
        CachedGraph { centrality: vec![0.0; code.files.len()], code, files, definitions, build_ms: 0 }
    }

    fn model(weights: &str) -> Ranker {
        Ranker::parse(&format!(r#"{{"fitted": "test", "seeds": 3, "weights": {{{weights}}}}}"#), "test").unwrap()
    }

    fn order(m: &Ranker, without: &[Signal]) -> (Vec<String>, Vec<super::CandidateFeatures>) {
        let g = graph();
        let issue = crate::locate::text::read("`parse_config` crashes when pkg/util.py calls `check_helper`");
        let history = ctxd_index::history::History::default();
        let inputs = Inputs { issue: &issue, bm25: &[], vector: &[], messages: &[], history: &history };
        let (files, features) = rank(&g, &inputs, without, m, 10, 1, 10);
        (files.into_iter().map(|f| f.path).collect(), features)
    }

    #[test]
    fn the_model_orders_the_candidates_and_another_parameter_file_reorders_them() {
        let by_path = model(r#""paths": 1.0, "symbols": 0.5, "test": -1.0"#);
        let (files, features) = order(&by_path, &[]);
        assert_eq!(files, ["pkg/util.py", "pkg/core.py", "tests/test_core.py"]);
        // The rows behind it: util is named by path, core defines the name, the test is flagged.
        let row = |p: &str| features.iter().find(|c| c.path == p).unwrap().features.clone();
        assert_eq!(row("pkg/util.py").get("paths"), Some(&1.0));
        assert_eq!(row("pkg/core.py").get("symbols"), Some(&1.0));
        assert_eq!(row("tests/test_core.py").get("test"), Some(&1.0));
        assert!((features[0].score - 1.0 - 0.5 * row("pkg/util.py").get("symbols").unwrap_or(&0.0)).abs() < 1e-9);

        let by_symbol = model(r#""paths": 0.2, "symbols": 1.0, "test": -1.0"#);
        assert_eq!(order(&by_symbol, &[]).0[0], "pkg/core.py", "a changed parameter file changes the order");
        // Without the demotion the test file's flag is zero and it ties with the definition.
        let (_, features) = order(&by_symbol, &[Signal::Demote]);
        assert!(features.iter().all(|c| !c.features.contains_key("test")), "{features:?}");
    }

    #[test]
    fn definitions_matching_the_words_rank_their_file_and_are_listed_under_it() {
        let g = graph();
        // No backticks, no path: only the definitions' words reach `parse_config`.
        let issue =
            crate::locate::text::read("Parsing the config crashes\n\nthe parser of configs fails on empty input");
        let history = ctxd_index::history::History::default();
        let inputs = Inputs { issue: &issue, bm25: &[], vector: &[], messages: &[], history: &history };
        let m = model(r#""definitions": 1.0, "definitions_rank": 0.5"#);
        let (files, features) = rank(&g, &inputs, &[], &m, 10, 1, 10);
        assert_eq!(files[0].path, "pkg/core.py", "{files:?}");
        assert_eq!(files[0].definitions[0].symbol.as_deref(), Some("parse_config"));
        assert!(files[0].why[0].starts_with("definitions: function parse_config"), "{:?}", files[0].why);
        assert_eq!(features[0].features.get("definitions_rank"), Some(&1.0));
        let (_, features) = rank(&g, &inputs, &[Signal::Definitions], &m, 10, 1, 10);
        assert!(features.iter().all(|c| !c.features.contains_key("definitions")), "{features:?}");
    }

    #[test]
    fn past_commits_worded_like_the_text_join_the_rows_unless_left_out() {
        let g = graph();
        let issue = crate::locate::text::read("Utility crashes on empty input\n\nthe utility helpers fail");
        let mut history = ctxd_index::history::History::default();
        history.push(ctxd_index::history::FileCommit {
            path: "pkg/util.py".into(),
            commit: "c1aaaaaaaa".into(),
            time: 1,
            author: "a".into(),
            summary: "Make the utility helpers accept empty input".into(),
        });
        let inputs = Inputs { issue: &issue, bm25: &[], vector: &[], messages: &[], history: &history };
        let m = model(r#""commits": 1.0"#);
        let (files, features) = rank(&g, &inputs, &[], &m, 10, 1, 10);
        assert_eq!(files[0].path, "pkg/util.py", "{files:?}");
        assert!(files[0].why[0].starts_with("commits: c1aaaaa: Make the utility"), "{:?}", files[0].why);
        assert_eq!(features[0].features.get("commits"), Some(&1.0));
        let (_, features) = rank(&g, &inputs, &[Signal::Commits], &m, 10, 1, 10);
        assert!(features.iter().all(|c| !c.features.contains_key("commits")), "{features:?}");
    }

    #[test]
    fn without_a_signal_its_feature_is_zero() {
        let by_path = model(r#""paths": 1.0, "symbols": 0.5"#);
        let (files, features) = order(&by_path, &[Signal::Paths]);
        assert_eq!(files[0], "pkg/core.py");
        assert!(features.iter().all(|c| !c.features.contains_key("paths")), "{features:?}");
    }
}
