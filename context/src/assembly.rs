//! Assembly strategies: how the blocks a context holds are chosen around and laid out.
//!
//! * **balanced** (what every context was before strategies): blocks by relevance, in attention
//!   order — the most relevant first, the second most relevant last, and so on inwards.
//! * **hierarchical**: an **outline** of the most relevant files first (each definition's
//!   signature and lines, members indented, from the symbol table; at most a quarter of the
//!   budget), then the bodies that matter, grouped by file in the files' order, in line order —
//!   for understanding how a module is built before reading its parts.
//! * **sequential**: the same blocks in file and line order, files in the order a stack trace
//!   in the query lists them (Python: outermost frame first; Java, JS, Go, Rust: innermost
//!   first) and then by relevance — for following a flow, as a debugger would.
//! * **thematic**: blocks grouped by concept: the candidates' embeddings are clustered
//!   (average-link, merged while two groups are closer than the blocks' mean pairwise cosine
//!   plus one standard deviation — at least [`THEME_SIMILARITY`] — or more than
//!   [`MAX_THEMES`]), each group under a heading made of the words that set it apart from
//!   the others, groups in the order of their best block.
//! * **auto** (the default) picks by the query's intent and says so in `assembly_reason`:
//!   debugging (or a stack trace) → sequential, explaining and refactoring → hierarchical,
//!   documentation → thematic, anything else → balanced.
//!
//! Which blocks are sent is the same for every strategy but hierarchical (whose outlines take
//! part of the budget) and thematic (whose headings do); only the layout differs.

use std::collections::{HashMap, HashSet};
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::block::Block;
use crate::compress::query_terms;
use crate::draft::cosine;
use ctxd_search::error::SearchError;
use ctxd_search::route::Intent;

/// Files outlined by a hierarchical context at most.
pub const MAX_OUTLINES: usize = 5;
/// Groups of a thematic context at most.
pub const MAX_THEMES: usize = 6;
/// Two groups closer than this (mean cosine of their blocks' embeddings) are always one theme;
/// the bar is higher where the blocks are all alike (see [`cluster`]).
pub const THEME_SIMILARITY: f32 = 0.45;
/// Words in a theme heading.
const HEADING_WORDS: usize = 3;

/// How a context is laid out (`assembly` in `/v1/context`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Assembly {
    #[default]
    Auto,
    Balanced,
    Hierarchical,
    Sequential,
    Thematic,
}

impl Assembly {
    /// Every strategy.
    pub const ALL: [Assembly; 5] =
        [Assembly::Auto, Assembly::Balanced, Assembly::Hierarchical, Assembly::Sequential, Assembly::Thematic];

    pub fn as_str(self) -> &'static str {
        match self {
            Assembly::Auto => "auto",
            Assembly::Balanced => "balanced",
            Assembly::Hierarchical => "hierarchical",
            Assembly::Sequential => "sequential",
            Assembly::Thematic => "thematic",
        }
    }

    /// The strategy to use: `self`, or for `auto` the one the intent calls for, with the reason.
    pub fn resolve(self, intent: Option<Intent>, has_trace: bool) -> (Assembly, Option<String>) {
        if self != Assembly::Auto {
            return (self, None);
        }
        let (picked, why) = match intent {
            _ if has_trace => (Assembly::Sequential, "the query holds a stack trace: blocks in the trace's file order"),
            Some(Intent::Debug) => (Assembly::Sequential, "debugging: blocks in file and line order"),
            Some(Intent::Explain) => (Assembly::Hierarchical, "explaining: file outlines first, then the bodies"),
            Some(Intent::Refactor) => (Assembly::Hierarchical, "refactoring: file outlines first, then the bodies"),
            Some(Intent::Documentation) => (Assembly::Thematic, "documentation: blocks grouped by topic"),
            _ => (Assembly::Balanced, "no particular intent: blocks by relevance"),
        };
        (picked, Some(format!("auto: {why}")))
    }
}

impl FromStr for Assembly {
    type Err = SearchError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Assembly::ALL.into_iter().find(|a| a.as_str().eq_ignore_ascii_case(s.trim())).ok_or_else(|| {
            SearchError::BadRequest(format!(
                "unknown assembly '{s}' (auto, balanced, hierarchical, sequential or thematic)"
            ))
        })
    }
}

/// Attention order for blocks sorted by relevance: 0, 2, 4, … then …, 5, 3, 1.
pub fn attention_order(n: usize) -> Vec<usize> {
    let front = (0..n).step_by(2);
    let back: Vec<usize> = (1..n).step_by(2).collect();
    front.chain(back.into_iter().rev()).collect()
}

/// Lays out `chosen` (in relevance order; hierarchical outlines among them) for `assembly`.
/// `trace_files` are the files a stack trace in the query names, outermost first; `themes` the
/// theme of each chosen block (thematic only).
pub fn arrange(assembly: Assembly, mut chosen: Vec<Block>, trace_files: &[String], themes: &[usize]) -> Vec<Block> {
    match assembly {
        Assembly::Auto | Assembly::Balanced => {
            let order = attention_order(chosen.len());
            let mut slots: Vec<Option<Block>> = chosen.into_iter().map(Some).collect();
            order.into_iter().filter_map(|i| slots[i].take()).collect()
        }
        Assembly::Hierarchical => {
            let (mut outlines, bodies): (Vec<Block>, Vec<Block>) = chosen.into_iter().partition(|b| b.outline);
            outlines.extend(by_file(bodies, &[]));
            outlines
        }
        Assembly::Sequential => by_file(chosen, trace_files),
        Assembly::Thematic => {
            for (b, &t) in chosen.iter_mut().zip(themes) {
                b.theme = Some(t);
            }
            // Stable: relevance order inside a theme, themes in the order of their best block
            // (theme numbers are given in that order).
            chosen.sort_by_key(|b| b.theme);
            chosen
        }
    }
}

/// Blocks grouped by file — files first in `first` order (matched by path suffix), then by
/// their best block — and in line order within a file.
fn by_file(blocks: Vec<Block>, first: &[String]) -> Vec<Block> {
    // A suffix match at a `/` boundary (`/srv/app/a.py` names `a.py`, not `/srv/myapp.py`).
    let at_boundary =
        |long: &str, short: &str| long.strip_suffix(short).is_some_and(|head| head.is_empty() || head.ends_with('/'));
    let named = |path: &str| {
        first
            .iter()
            .map(|f| f.trim_start_matches("./"))
            .position(|f| at_boundary(f, path) || at_boundary(path, f))
            .unwrap_or(usize::MAX)
    };
    let mut rank: HashMap<String, (usize, usize)> = HashMap::new();
    for (i, b) in blocks.iter().enumerate() {
        rank.entry(b.path.clone()).or_insert((named(&b.path), i));
    }
    let mut out = blocks;
    out.sort_by_key(|b| (rank[&b.path], b.start_line, b.outline as u8 ^ 1));
    out
}

/// Themes of blocks from their embeddings (`None`: no vector — a block joins the theme of
/// another block of its file, or the first theme): average-link clustering, groups merged
/// while closer than the pairs' mean + one standard deviation (at least [`THEME_SIMILARITY`])
/// or more than [`MAX_THEMES`]. Theme numbers follow
/// the order of each theme's first (most relevant) block.
pub fn cluster(vectors: &[Option<&[f32]>], paths: &[&str]) -> Vec<usize> {
    let with: Vec<usize> = (0..vectors.len()).filter(|&i| vectors[i].is_some()).collect();
    let m = with.len();
    // sums[a][b]: the sum of cosines between the blocks of groups a and b (average link =
    // sum / (|a| |b|)); a merge adds the rows.
    let mut sums = vec![vec![0.0f32; m]; m];
    for a in 0..m {
        for b in a + 1..m {
            let c = cosine(vectors[with[a]].unwrap_or(&[]), vectors[with[b]].unwrap_or(&[]));
            sums[a][b] = c;
            sums[b][a] = c;
        }
    }
    // Blocks of one repository are all somewhat alike: a theme is a group much closer than
    // the blocks are on average (mean + one standard deviation of the pairs, at least
    // THEME_SIMILARITY).
    let pairs: Vec<f32> = (0..m).flat_map(|a| (a + 1..m).map(move |b| (a, b))).map(|(a, b)| sums[a][b]).collect();
    let threshold = if pairs.is_empty() {
        THEME_SIMILARITY
    } else {
        let mean = pairs.iter().sum::<f32>() / pairs.len() as f32;
        let var = pairs.iter().map(|p| (p - mean) * (p - mean)).sum::<f32>() / pairs.len() as f32;
        (mean + var.sqrt()).max(THEME_SIMILARITY)
    };
    let mut members: Vec<Vec<usize>> = with.iter().map(|&i| vec![i]).collect();
    let mut alive: Vec<bool> = vec![true; m];
    let mut count = m;
    while count > 1 {
        let mut best = (f32::MIN, 0, 0);
        for a in (0..m).filter(|&a| alive[a]) {
            for b in (a + 1..m).filter(|&b| alive[b]) {
                let s = sums[a][b] / (members[a].len() * members[b].len()) as f32;
                if s > best.0 {
                    best = (s, a, b);
                }
            }
        }
        if best.0 < threshold && count <= MAX_THEMES {
            break;
        }
        let (_, a, b) = best;
        let row_b = sums[b].clone();
        for (k, add) in row_b.into_iter().enumerate() {
            sums[a][k] += add;
            sums[k][a] = sums[a][k];
        }
        let moved = std::mem::take(&mut members[b]);
        members[a].extend(moved);
        alive[b] = false;
        count -= 1;
    }
    let mut groups: Vec<Vec<usize>> = members.into_iter().filter(|g| !g.is_empty()).collect();
    for g in &mut groups {
        g.sort();
    }
    groups.sort_by_key(|g| g[0]);
    let mut theme = vec![usize::MAX; vectors.len()];
    for (t, g) in groups.iter().enumerate() {
        for &i in g {
            theme[i] = t;
        }
    }
    for i in 0..theme.len() {
        if theme[i] == usize::MAX {
            theme[i] = (0..theme.len())
                .find(|&j| j != i && paths[j] == paths[i] && theme[j] != usize::MAX)
                .map_or(0, |j| theme[j]);
        }
    }
    theme
}

/// Words that are syntax, not a topic.
const NOT_TOPICS: &[&str] = &[
    "def",
    "return",
    "self",
    "class",
    "import",
    "from",
    "none",
    "true",
    "false",
    "null",
    "let",
    "mut",
    "pub",
    "impl",
    "struct",
    "enum",
    "use",
    "const",
    "var",
    "function",
    "async",
    "await",
    "static",
    "void",
    "int",
    "str",
    "string",
    "bool",
    "new",
    "this",
    "else",
    "elif",
    "lines",
    "raise",
    "except",
    "try",
    "not",
    "and",
    "for",
    "the",
    "with",
    "type",
    "public",
    "private",
    "package",
    "func",
    "crate",
    "super",
    "while",
    "break",
    "continue",
    "lambda",
    "yield",
    "args",
    "kwargs",
    "param",
    "params",
    "returns",
    "value",
    "values",
    "list",
    "dict",
    "len",
    "isinstance",
];

/// The topic words of `text`: the words a highlight looks for ([`query_terms`]) that are all
/// letters and not syntax.
fn topic_words(text: &str) -> HashSet<String> {
    query_terms(text)
        .into_iter()
        .filter(|w| w.chars().all(|c| c.is_alphabetic()) && !NOT_TOPICS.contains(&w.as_str()))
        .collect()
}

/// A heading per theme: the words found in most of its blocks and fewest of the others' (a
/// word of a block's symbol or path counts half a point more: names say what code is about).
pub fn headings(blocks: &[Block], themes: &[usize]) -> Vec<String> {
    let n = themes.iter().copied().max().map_or(0, |m| m + 1);
    let names: Vec<HashSet<String>> = blocks
        .iter()
        .map(|b| {
            let path = b.path.rsplit_once('.').map_or(b.path.as_str(), |(p, _)| p);
            topic_words(&format!("{} {path}", b.symbol.as_deref().unwrap_or("")))
        })
        .collect();
    let words: Vec<HashSet<String>> =
        blocks.iter().zip(&names).map(|(b, n)| topic_words(&b.content).union(n).cloned().collect()).collect();
    (0..n)
        .map(|t| {
            let inside = themes.iter().filter(|&&x| x == t).count();
            let outside = blocks.len() - inside;
            // word → (blocks inside, blocks outside, named inside)
            let mut df: HashMap<&str, (usize, usize, bool)> = HashMap::new();
            for (i, ws) in words.iter().enumerate() {
                for w in ws {
                    let e = df.entry(w.as_str()).or_default();
                    if themes[i] == t {
                        e.0 += 1;
                        e.2 |= names[i].contains(w);
                    } else {
                        e.1 += 1;
                    }
                }
            }
            let mut scored: Vec<(f32, &str)> = df
                .into_iter()
                .filter(|(_, (din, _, _))| *din > 0)
                .map(|(w, (din, dout, named))| {
                    let s = din as f32 / inside.max(1) as f32 - dout as f32 / outside.max(1) as f32
                        + if named { 0.5 } else { 0.0 };
                    (s, w)
                })
                .collect();
            scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(b.1)));
            let picked: Vec<&str> = scored.into_iter().take(HEADING_WORDS).map(|(_, w)| w).collect();
            if picked.is_empty() {
                format!("theme {}", t + 1)
            } else {
                picked.join(", ")
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ctxd_index::{record::Chunk, record::Hit};

    fn block(path: &str, start: u32, content: &str) -> Block {
        let chunk = Chunk {
            path: path.into(),
            start_line: start,
            end_line: start + 2,
            content: content.into(),
            language: "python".into(),
            ..Chunk::default()
        };
        Block::new(Hit { chunk, score: 1.0 }, 0)
    }

    #[test]
    fn attention_order_puts_the_best_at_both_ends() {
        assert_eq!(attention_order(5), [0, 2, 4, 3, 1]);
        assert_eq!(attention_order(4), [0, 2, 3, 1]);
        assert_eq!(attention_order(1), [0]);
        assert!(attention_order(0).is_empty());
    }
    #[test]
    fn auto_picks_by_intent_and_says_so() {
        assert_eq!(Assembly::Auto.resolve(Some(Intent::Debug), false).0, Assembly::Sequential);
        assert_eq!(Assembly::Auto.resolve(Some(Intent::General), true).0, Assembly::Sequential);
        assert_eq!(Assembly::Auto.resolve(Some(Intent::Explain), false).0, Assembly::Hierarchical);
        assert_eq!(Assembly::Auto.resolve(Some(Intent::Documentation), false).0, Assembly::Thematic);
        let (a, why) = Assembly::Auto.resolve(None, false);
        assert_eq!(a, Assembly::Balanced);
        assert!(why.unwrap().starts_with("auto: "));
        assert_eq!(Assembly::Thematic.resolve(Some(Intent::Debug), true), (Assembly::Thematic, None));
        assert_eq!("Sequential".parse::<Assembly>().unwrap(), Assembly::Sequential);
        let err = "strategy".parse::<Assembly>().unwrap_err().to_string();
        assert!(err.contains("'strategy'") && err.contains("hierarchical"), "{err}");
    }

    #[test]
    fn sequential_follows_the_trace_then_relevance_in_line_order() {
        let chosen = vec![
            block("b.py", 40, "x"),
            block("a.py", 30, "y"),
            block("b.py", 10, "z"),
            block("c.py", 5, "w"),
            block("pc.py", 1, "not the trace's c.py"),
        ];
        let trace = vec!["/srv/app/c.py".to_string(), "/srv/app/a.py".to_string()];
        let order: Vec<String> = arrange(Assembly::Sequential, chosen, &trace, &[])
            .iter()
            .map(|b| format!("{}:{}", b.path, b.start_line))
            .collect();
        assert_eq!(order, ["c.py:5", "a.py:30", "b.py:10", "b.py:40", "pc.py:1"]);
    }

    #[test]
    fn hierarchical_puts_outlines_first() {
        let mut outline = block("b.py", 1, "def f():  # lines 1-3");
        outline.outline = true;
        let chosen = vec![block("a.py", 30, "y"), block("b.py", 10, "z"), outline, block("a.py", 3, "v")];
        let order: Vec<(String, bool)> =
            arrange(Assembly::Hierarchical, chosen, &[], &[]).iter().map(|b| (b.path.clone(), b.outline)).collect();
        assert_eq!(order[0], ("b.py".to_string(), true));
        assert_eq!(order[1..].iter().map(|o| o.0.as_str()).collect::<Vec<_>>(), ["a.py", "a.py", "b.py"]);
    }

    #[test]
    fn themes_group_close_vectors_and_name_them() {
        let v = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.9, 0.1, 0.0], [0.1, 0.95, 0.0]];
        let vectors: Vec<Option<&[f32]>> =
            vec![Some(&v[0][..]), Some(&v[1][..]), Some(&v[2][..]), Some(&v[3][..]), None];
        let paths = ["tax.py", "mail.py", "rate.py", "smtp.py", "smtp.py"];
        let themes = cluster(&vectors, &paths);
        assert_eq!(themes, [0, 1, 0, 1, 1]);
        let blocks = vec![
            block("tax.py", 1, "def tax_rate(country): return RATES[country]"),
            block("mail.py", 1, "def send_mail(to): smtp.send(to)"),
            block("rate.py", 1, "def invoice_tax(total, country): return total * tax_rate(country)"),
            block("smtp.py", 1, "def connect_smtp(host): return smtp.connect(host)"),
            block("smtp.py", 9, "def close_smtp(conn): conn.close()"),
        ];
        let h = headings(&blocks, &themes);
        assert_eq!(h.len(), 2);
        assert!(h[0].contains("tax") && h[1].contains("smtp"), "{h:?}");
        let laid: Vec<Option<usize>> =
            arrange(Assembly::Thematic, blocks, &[], &themes).iter().map(|b| b.theme).collect();
        assert_eq!(laid, [Some(0), Some(0), Some(1), Some(1), Some(1)]);
    }
}
