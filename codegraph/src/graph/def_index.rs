//! A lexical index of the definitions of one graph: each function, method and class as the text
//! a developer reads when deciding where a change goes — its name, its enclosing class, the
//! parameters of its signature, the first lines of its docstring and the words of its path —
//! split into words (`parseConfigFile`, `parse_config_file` → `parse config file`) and scored
//! against a text with BM25 ([`DefIndex::score`]).
//!
//! Chunk-level BM25 ([`ctxd_index`]'s full-text index) reads bodies: a long file with many
//! mentions of a word wins. Here a definition is matched on what it is called and what it says
//! it does, so an issue saying "the progress bar is not updated" reaches `update_progress_bar`
//! even where the body never spells those words. `locate` aggregates the definitions' scores to
//! files (the best definition plus a share of the next ones, as for chunk hits) as its
//! `definitions` signal, and shows the definitions that ranked under each file.
//!
//! Built once per graph ([`super::cache`]), in memory: a posting list per word.

use std::collections::HashMap;

use ctxd_search::route::identifier_words;

use super::CodeGraph;

/// BM25 term-frequency saturation and length normalisation.
const K1: f64 = 1.2;
const B: f64 = 0.75;
/// Words in more than this share of the definitions (and more than [`MIN_DF_CUT`] of them) are
/// too common to tell any apart.
const MAX_DF_SHARE: f64 = 0.1;
const MIN_DF_CUT: f64 = 20.0;
/// Characters of a docstring read.
const DOC_CHARS: usize = 300;
/// A query word's weight at most (a word repeated through a long text counts a few times).
const MAX_QUERY_WEIGHT: f64 = 3.0;

/// Words no definition is told apart by: English function words and the keywords of code.
const STOP: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "can", "could", "do", "does", "for", "from", "has", "have",
    "if", "in", "into", "is", "it", "its", "not", "of", "on", "or", "so", "that", "the", "then", "there", "this", "to",
    "was", "we", "when", "which", "will", "with", "would", "should", "you", "def", "self", "cls", "return", "none",
    "true", "false", "class", "import", "args", "kwargs", "str", "int", "bool", "any", "optional",
];

/// Each definition's weighted words, as posting lists.
#[derive(Debug, Default)]
pub struct DefIndex {
    postings: HashMap<String, Vec<(u32, f32)>>,
    /// Weighted word count of each definition.
    len: Vec<f32>,
    avg_len: f64,
}

/// The words of a text: identifier words (camel humps and underscores split), lower case, two
/// characters or more, not all digits, not [`STOP`]; plural `-s` folded.
pub fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric() && c != '_')
        .filter(|t| !t.is_empty() && t.len() <= 60)
        .flat_map(identifier_words)
        .filter(|w| w.len() >= 2 && !w.chars().all(|c| c.is_ascii_digit()) && !STOP.contains(&w.as_str()))
        .map(fold)
}

/// `files` → `file`, `classes` → `class`, `entries` → `entry` (not `class` → `clas`,
/// `status` → `statu`).
fn fold(w: String) -> String {
    if w.len() <= 3 || !w.ends_with('s') || ["ss", "us", "is"].iter().any(|e| w.ends_with(e)) {
        return w;
    }
    if let Some(stem) = w.strip_suffix("ies") {
        return format!("{stem}y");
    }
    let cut = if w.ends_with("sses") { 2 } else { 1 };
    w[..w.len() - cut].to_string()
}

impl DefIndex {
    /// Indexes every definition of `g`.
    pub fn build(g: &CodeGraph) -> Self {
        Self::of_documents(g.symbols.iter().map(|s| {
            let mut tf: HashMap<String, f32> = HashMap::new();
            let mut add = |text: &str, w: f32| {
                for word in words(text) {
                    *tf.entry(word).or_default() += w;
                }
            };
            add(&s.name, 3.0);
            if let Some(parent) = &s.parent {
                add(parent.rsplit(['.', ':']).next().unwrap_or(parent), 1.5);
            }
            add(params(&s.signature), 1.0);
            if let Some(doc) = &s.doc {
                add(doc.get(..doc.floor_char_boundary(DOC_CHARS)).unwrap_or(doc), 1.0);
            }
            let path = s.path.strip_suffix(".py").unwrap_or(&s.path);
            add(path.rsplit('/').take(2).collect::<Vec<_>>().join(" ").as_str(), 0.5);
            tf
        }))
    }

    /// Indexes short texts (one document each, every word weighing 1, in [`words`]' form):
    /// what `locate` matches commit summaries with.
    pub fn of_texts<'t>(texts: impl IntoIterator<Item = &'t str>) -> Self {
        Self::of_documents(texts.into_iter().map(|text| {
            let mut tf: HashMap<String, f32> = HashMap::new();
            for word in words(text) {
                *tf.entry(word).or_default() += 1.0;
            }
            tf
        }))
    }

    /// Indexes documents given as weighted words, numbered in order.
    fn of_documents(docs: impl Iterator<Item = HashMap<String, f32>>) -> Self {
        let mut postings: HashMap<String, Vec<(u32, f32)>> = HashMap::new();
        let mut len = Vec::new();
        for (d, tf) in docs.enumerate() {
            len.push(tf.values().sum());
            for (word, x) in tf {
                postings.entry(word).or_default().push((d as u32, x));
            }
        }
        let avg_len = len.iter().map(|&x| x as f64).sum::<f64>() / len.len().max(1) as f64;
        Self { postings, len, avg_len }
    }

    /// Definitions indexed.
    pub fn len(&self) -> usize {
        self.len.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len.is_empty()
    }

    /// BM25 score of each definition matching any of the weighted query words (title words
    /// count twice: see [`query`]).
    pub fn score(&self, query: &HashMap<String, f64>) -> HashMap<usize, f64> {
        let n = self.len.len() as f64;
        let mut out: HashMap<usize, f64> = HashMap::new();
        for (word, &qw) in query {
            let Some(list) = self.postings.get(word) else { continue };
            let df = list.len() as f64;
            if df > (MAX_DF_SHARE * n).max(MIN_DF_CUT) {
                continue;
            }
            let idf = ((n - df + 0.5) / (df + 0.5) + 1.0).ln();
            for &(d, tf) in list {
                let tf = tf as f64;
                let norm = K1 * (1.0 - B + B * self.len[d as usize] as f64 / self.avg_len.max(1e-9));
                *out.entry(d as usize).or_default() += qw * idf * tf * (K1 + 1.0) / (tf + norm);
            }
        }
        out
    }
}

/// The query words of a text with their weights: the title's count twice, the rest once, each at
/// most [`MAX_QUERY_WEIGHT`].
pub fn query(title: &str, body: &str) -> HashMap<String, f64> {
    let mut q: HashMap<String, f64> = HashMap::new();
    for (text, w) in [(title, 2.0), (body, 1.0)] {
        for word in words(text) {
            let x = q.entry(word).or_default();
            *x = (*x + w).min(MAX_QUERY_WEIGHT);
        }
    }
    q
}

/// The parameter list of a signature (`def f(a, b=1) -> X:` → `a, b=1`): its names say what a
/// definition works on; the keyword and the return annotation are left out.
fn params(signature: &str) -> &str {
    match (signature.find('('), signature.rfind(')')) {
        (Some(a), Some(b)) if a < b => &signature[a + 1..b],
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::{query, words, DefIndex};
    use crate::graph::build::{build, test_def};

    fn def(name: &str, path: &str) -> ctxd_index::symbols::SymbolRow {
        test_def(path, name)
    }

    #[test]
    fn words_split_identifiers_fold_plurals_and_drop_function_words() {
        let w: Vec<String> = words("The parseConfigFiles of update_progress_bar: classes, status 404").collect();
        assert_eq!(w, ["parse", "config", "file", "update", "progress", "bar", "class", "status"]);
    }

    #[test]
    fn a_definition_named_like_the_text_scores_highest() {
        let files = vec!["pkg/ui.py".to_string(), "pkg/io.py".into(), "pkg/misc.py".into()];
        let mut syms =
            vec![def("update_progress_bar", "pkg/ui.py"), def("read_file", "pkg/io.py"), def("helper", "pkg/misc.py")];
        syms[2].doc = Some("Progress of nothing in particular.".into());
        let g = build(files, syms, vec![], (1, 1, 1));
        let idx = DefIndex::build(&g);
        assert_eq!(idx.len(), 3);
        let scores = idx.score(&query("Progress bar not updated", "when reading a big file the bar stays at 0"));
        let best = scores.iter().max_by(|a, b| a.1.total_cmp(b.1)).unwrap();
        assert_eq!(g.symbols[*best.0].name, "update_progress_bar");
        let misc = g.by_file[g.file("pkg/misc.py").unwrap()][0];
        assert!(scores.contains_key(&misc), "the docstring's word counts");
        assert!(scores[&misc] < 0.5 * best.1);
    }
}
