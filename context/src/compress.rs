//! Compression that keeps meaning: **skeletons** for candidates that no longer fit the budget
//! whole, and **highlights** in the blocks that do (the blocks made of skeletons and outlines
//! are `skeletons.rs`'s).
//!
//! A skeleton is what an outline shows of the definitions a block covers, from the symbol table:
//! each definition's signature line, the first line of its doc comment, and the signatures of
//! its members (methods of a class, functions of an `impl`), indented — a few dozen tokens where
//! the body took hundreds. The agent sees that the file and the definition exist and what they
//! take and return, and can ask for the body (`get_symbols`) if it needs it.
//!
//! Highlights are the line ranges of a block that hold a word of the query (identifier parts
//! included, `parse_table` → `parse`, `table`; common English words left out), so a reader (or
//! a client that folds the rest) finds the lines that matched.

use std::collections::{BTreeMap, HashSet};

use ctxd_index::symbols::SymbolRow;
use ctxd_search::route::identifier_words;

use crate::block::Block;

/// Highlight ranges per block at most.
const MAX_HIGHLIGHTS: usize = 20;
/// Members listed under a definition in a skeleton at most.
const MAX_MEMBERS: usize = 24;
/// Lines of a file outline at most (the rest counted in its last line); fewer when several
/// files share the room (about 12 tokens a line).
pub(crate) const MAX_OUTLINE_LINES: usize = 60;
pub(crate) const MIN_OUTLINE_LINES: usize = 8;

const STOPWORDS: &[&str] = &[
    "the", "and", "for", "with", "that", "this", "from", "into", "what", "when", "where", "which", "how", "why",
    "does", "not", "are", "was", "were", "has", "have", "had", "can", "could", "should", "would", "will", "but", "all",
    "any", "get", "set", "use", "used", "using", "its", "it's", "there", "their", "then", "than", "them", "they",
    "you", "your", "our", "out", "about", "some", "one", "two", "also", "only", "just", "like", "more", "most",
    "other", "such", "each",
];

/// The words of a query a highlight looks for: lowercased, ≥ 3 characters, identifiers split
/// into their parts too, stopwords left out.
pub fn query_terms(query: &str) -> Vec<String> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for raw in query.split(|c: char| !c.is_alphanumeric() && c != '_') {
        let mut words = vec![raw.to_lowercase()];
        words.extend(identifier_words(raw).into_iter().map(|w| w.to_lowercase()));
        for w in words {
            if w.len() >= 3
                && !STOPWORDS.contains(&w.as_str())
                && !w.chars().all(|c| c.is_ascii_digit())
                && seen.insert(w.clone())
            {
                out.push(w);
            }
        }
    }
    out
}

/// Line ranges `[start, end]` of `lines` (line number → text) holding any of `terms`, adjacent
/// lines merged; empty when no term is given or every line matches (nothing to point at).
pub fn highlights(lines: &BTreeMap<u32, String>, terms: &[String]) -> Vec<[u32; 2]> {
    if terms.is_empty() {
        return Vec::new();
    }
    let mut out: Vec<[u32; 2]> = Vec::new();
    let mut hit = 0;
    for (&n, text) in lines {
        let lower = text.to_lowercase();
        if !terms.iter().any(|t| lower.contains(t.as_str())) {
            continue;
        }
        hit += 1;
        match out.last_mut() {
            Some(r) if r[1] + 1 == n => r[1] = n,
            _ => out.push([n, n]),
        }
    }
    if hit == lines.len() {
        return Vec::new();
    }
    out.truncate(MAX_HIGHLIGHTS);
    out
}

pub(crate) fn comment(language: &str) -> &'static str {
    match language {
        "python" | "ruby" | "bash" | "toml" | "yaml" | "r" => "#",
        "sql" | "lua" | "haskell" => "--",
        _ => "//",
    }
}

/// The skeleton of lines `start..=end` of a file from its definitions `rows`: the definitions
/// that overlap the range and are not inside another overlapping one, each with its doc line and
/// members. `(text, first line, last line, symbol)`; `None` when no definition overlaps.
pub fn skeleton(rows: &[&SymbolRow], start: u32, end: u32) -> Option<(String, u32, u32, Option<String>)> {
    let overlaps = |r: &SymbolRow| r.start_line <= end && start <= r.end_line;
    let within: Vec<&SymbolRow> = rows.iter().copied().filter(|r| overlaps(r)).collect();
    let names: HashSet<&str> = within.iter().map(|r| r.symbol.as_str()).collect();
    let mut tops: Vec<&SymbolRow> =
        within.iter().copied().filter(|r| r.parent.as_deref().is_none_or(|p| !names.contains(p))).collect();
    if tops.is_empty() {
        return None;
    }
    tops.sort_by_key(|r| (r.start_line, std::cmp::Reverse(r.end_line)));
    let mut text = String::new();
    for top in &tops {
        let c = comment(&top.language);
        push_def(&mut text, top, "", c);
        let mut members: Vec<&&SymbolRow> =
            rows.iter().filter(|r| r.parent.as_deref() == Some(top.symbol.as_str())).collect();
        members.sort_by_key(|r| r.start_line);
        let more = members.len().saturating_sub(MAX_MEMBERS);
        for m in members.into_iter().take(MAX_MEMBERS) {
            push_def(&mut text, m, "    ", c);
        }
        if more > 0 {
            text.push_str(&format!("    {c} … {more} more members\n"));
        }
    }
    let first = tops.iter().map(|r| r.start_line).min().unwrap_or(start);
    let last = tops.iter().map(|r| r.end_line).max().unwrap_or(end);
    let symbol = (tops.len() == 1).then(|| tops[0].symbol.clone());
    Some((text, first, last, symbol))
}

/// A signature on one line: whitespace (line breaks of a long parameter list) collapsed, at
/// most 240 characters.
pub fn one_line(signature: &str) -> String {
    let flat = signature.split_whitespace().collect::<Vec<_>>().join(" ").replace("( ", "(").replace(" )", ")");
    match flat.char_indices().nth(240) {
        Some((i, _)) => format!("{}…", &flat[..i]),
        None => flat,
    }
}

/// The session key of a skeleton block: its place and text (one sent once is not sent again in
/// the session; the whole block stays new).
pub fn skeleton_key(block: &Block) -> String {
    summary_key("skel", &block.path, block.start_line, block.end_line, &block.content)
}

/// A session key for a summary (`skel`, `outline`) of `path` lines `start..=end` with `text`.
pub fn summary_key(kind: &str, path: &str, start: u32, end: u32, text: &str) -> String {
    use std::hash::{Hash, Hasher};
    let mut h = std::hash::DefaultHasher::new();
    text.hash(&mut h);
    format!("{kind}:{path}:{start}-{end}:{:016x}", h.finish())
}

fn push_def(text: &mut String, r: &SymbolRow, indent: &str, comment: &str) {
    let sig = one_line(&r.signature);
    text.push_str(&format!("{indent}{sig}  {comment} lines {}-{}\n", r.start_line, r.end_line));
    if let Some(doc) = r.doc.as_deref().and_then(|d| d.lines().map(str::trim).find(|l| !l.is_empty())) {
        let doc: String = doc.chars().take(160).collect();
        text.push_str(&format!("{indent}    {comment} {doc}\n"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(symbol: &str, parent: Option<&str>, lines: (u32, u32), sig: &str, doc: Option<&str>) -> SymbolRow {
        SymbolRow {
            symbol: symbol.into(),
            name: symbol.rsplit('.').next().unwrap().into(),
            parent: parent.map(str::to_string),
            start_line: lines.0,
            end_line: lines.1,
            signature: sig.into(),
            doc: doc.map(str::to_string),
            language: "python".into(),
            kind: "function".into(),
            ..SymbolRow::default()
        }
    }

    #[test]
    fn a_skeleton_keeps_signatures_docs_and_members() {
        let rows = [
            row("Engine", None, (10, 60), "class Engine:", Some("Runs jobs.\nMore.")),
            row("Engine.run", Some("Engine"), (12, 30), "def run(self, n):", None),
            row("Engine.stop", Some("Engine"), (32, 60), "def stop(self):", Some("Stops it.")),
            row("helper", None, (70, 80), "def helper(x):", None),
        ];
        let refs: Vec<&SymbolRow> = rows.iter().collect();
        let (text, first, last, symbol) = skeleton(&refs, 20, 40).unwrap();
        assert_eq!((first, last, symbol.as_deref()), (10, 60, Some("Engine")));
        assert_eq!(
            text,
            "class Engine:  # lines 10-60\n    # Runs jobs.\n    def run(self, n):  # lines 12-30\n    def stop(self):  # lines 32-60\n        # Stops it.\n"
        );
        assert!(skeleton(&refs, 61, 69).is_none(), "no definition there");
        assert_eq!(one_line("def f(\n    a: int,\n    b: str,\n) -> None:"), "def f(a: int, b: str,) -> None:");
    }

    #[test]
    fn highlights_point_at_the_matching_lines() {
        let terms = query_terms("How does parse_table handle the Tax rate?");
        assert!(terms.contains(&"parse".to_string()) && terms.contains(&"table".to_string()));
        assert!(!terms.contains(&"the".to_string()) && !terms.contains(&"how".to_string()));
        let lines: BTreeMap<u32, String> =
            [(5, "def parse_table(x):"), (6, "    y = 1"), (7, "    rate = tax(x)"), (8, "    return y")]
                .into_iter()
                .map(|(n, t)| (n, t.to_string()))
                .collect();
        assert_eq!(highlights(&lines, &terms), [[5, 5], [7, 7]]);
        assert!(highlights(&lines, &[]).is_empty());
        assert!(highlights(&lines, &["y".into(), "x".into(), "e".into()]).is_empty(), "every line matches");
    }
}
