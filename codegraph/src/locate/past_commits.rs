//! The `commits` signal of localization: the files changed by the view's past commits whose
//! messages read like the text.
//!
//! A project's history says in its own words where kinds of change went: "Speed up FlateDecode
//! image decoding" changed `filters.py`, "Fix alias handling in L031" changed `rules/L031.py`.
//! An issue about slow compressed images shares words with the first commit, not necessarily with
//! the code it should reach (the code says `decode`, `zlib`, `predictor`). This is the
//! "similar fixed reports" evidence of bug-localization work (BugLocator), read from what the
//! index already records: each commit's first message line and the files it changed
//! (`ctxd_index::history`, the last `[index] history_commits` commits of the view).
//!
//! The summaries are indexed with the definitions' BM25 ([`DefIndex::of_texts`]: identifier
//! words, plurals folded, a word in over a tenth of the commits and over 20 of them ignored) and
//! scored with the same weighted query words as the definitions signal (title twice). A file
//! scores its best commit plus half of its next two (a file that several matching commits changed
//! is likelier than one matched once), divided by the best file's, so the signal is in 0..=1 like
//! the others. A commit that changed over 100 files was recorded without files (a mass reformat
//! says nothing) and a file the graph does not index is skipped. Without history (a plain folder)
//! it is silent.
//!
//! Its `why` names the best commit: `a1b2c3d: Speed up FlateDecode image decoding`.

use std::collections::{BTreeMap, HashMap};

use ctxd_index::history::History;

use super::signals::Scores;
use crate::graph::def_index::DefIndex;
use crate::graph::CodeGraph;

/// Share of a file's second and third best commits added to its best.
const NEXT_SHARE: f64 = 0.5;

/// The `commits` signal's scores for the weighted `query` words (see the module docs).
pub fn commits(g: &CodeGraph, h: &History, query: &HashMap<String, f64>) -> Scores {
    let mut out = Scores::default();
    if h.is_empty() || query.is_empty() {
        return out;
    }
    // Each commit of the view once (its key groups one view's files), in a fixed order.
    let mut summaries: BTreeMap<&str, (&str, &str)> = BTreeMap::new();
    for rows in h.by_path.values() {
        for r in rows {
            let key = h.by_commit.get_key_value(&History::commit_key(&r.path, &r.commit));
            if let Some((key, _)) = key {
                summaries.entry(key.as_str()).or_insert((r.commit.as_str(), r.summary.as_str()));
            }
        }
    }
    let keys: Vec<&str> = summaries.keys().copied().collect();
    let index = DefIndex::of_texts(summaries.values().map(|(_, s)| *s));
    let mut per_file: HashMap<usize, Vec<(f64, usize)>> = HashMap::new();
    for (c, x) in index.score(query) {
        for path in h.by_commit.get(keys[c]).into_iter().flatten() {
            if let Some(f) = g.file(path) {
                per_file.entry(f).or_default().push((x, c));
            }
        }
    }
    let mut scored: Vec<(usize, f64, usize)> = per_file
        .into_iter()
        .map(|(f, mut v)| {
            v.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
            let next: f64 = v.iter().skip(1).take(2).map(|(x, _)| x).sum();
            (f, v[0].0 + NEXT_SHARE * next, v[0].1)
        })
        .collect();
    let max = scored.iter().map(|s| s.1).fold(0.0, f64::max);
    if max <= 0.0 {
        return out;
    }
    scored.sort_by_key(|s| s.0);
    for (f, x, c) in scored {
        let (id, summary) = summaries[keys[c]];
        out.add(f, x / max, || format!("{}: {summary}", &id[..id.len().min(7)]));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::commits;
    use crate::graph::def_index::query;
    use ctxd_index::history::{FileCommit, History};

    fn history(rows: &[(&str, &str, &str)]) -> History {
        let mut h = History::default();
        for (i, (path, commit, summary)) in rows.iter().enumerate() {
            h.push(FileCommit {
                path: path.to_string(),
                commit: commit.to_string(),
                time: i as i64,
                author: "a".into(),
                summary: summary.to_string(),
            });
        }
        h
    }

    #[test]
    fn files_of_commits_worded_like_the_text_score_and_say_which_commit() {
        let h = history(&[
            ("pdf/filters.py", "c1aaaaaaaa", "Speed up decoding of compressed images"),
            ("pdf/filters.py", "c2bbbbbbbb", "Handle broken image streams"),
            ("pdf/reader.py", "c3cccccccc", "Read the trailer of broken files"),
            ("pdf/writer.py", "c4dddddddd", "Write compressed object streams"),
            ("pdf/gone.py", "c1aaaaaaaa", "Speed up decoding of compressed images"),
        ]);
        let g = crate::graph::build::build(
            ["pdf/filters.py", "pdf/reader.py", "pdf/writer.py", "pdf/misc.py"].iter().map(|p| p.to_string()).collect(),
            Vec::new(),
            Vec::new(),
            (0, 0, 0),
        );
        let id = |p: &str| g.file(p).unwrap();
        let s = commits(&g, &h, &query("Reading large compressed images is slow", "decoding takes minutes"));
        assert_eq!(s.score[&id("pdf/filters.py")], 1.0, "{:?}", s.score);
        assert!(s.score[&id("pdf/writer.py")] < 0.5, "one shared word: {:?}", s.score);
        assert!(!s.score.contains_key(&id("pdf/reader.py")) && !s.score.contains_key(&id("pdf/misc.py")));
        assert_eq!(s.why[&id("pdf/filters.py")], "c1aaaaa: Speed up decoding of compressed images");
        assert!(commits(&g, &History::default(), &query("compressed images", "")).score.is_empty());
    }
}
