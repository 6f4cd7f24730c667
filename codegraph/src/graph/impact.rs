//! `impact`: what a change is likely to affect. A change is a list of paths (whole files) or a
//! unified diff (the definitions whose lines its hunks touch, old and new side); from those
//! definitions the walk goes backward along resolved edges — callers, referencers, subclasses,
//! importers — up to [`DEPTH`] hops, each hop worth [`DECAY`] of the last, and ranks the
//! definitions and tests reached. Tests are the definitions and files reached in test files.
//! With git history, the files that change in the same commits are listed too (`cochanged`,
//! filled by [`crate::locate::Locator::cochanged`]).

use std::collections::HashMap;

use ctxd_index::edges::EdgeKind;
use serde::Serialize;

use super::{CodeGraph, Place};
use ctxd_search::error::SearchError;

/// Hops followed backward from the changed definitions.
const DEPTH: usize = 3;
/// Weight of each further hop.
const DECAY: f64 = 0.5;
/// Diff lines read at most (a larger diff is refused with a clear error).
pub const MAX_DIFF_LINES: usize = 200_000;

/// One changed file and its changed line ranges (empty: the whole file).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub path: String,
    pub lines: Vec<(u32, u32)>,
}

/// Parses a unified diff into changed files and line ranges (both sides of each hunk, so a
/// deletion still names the definition it was in). Binary and deleted files count whole.
pub fn parse_diff(diff: &str) -> Result<Vec<Change>, SearchError> {
    if diff.lines().nth(MAX_DIFF_LINES).is_some() {
        return Err(SearchError::BadRequest(format!(
            "the diff has more than {MAX_DIFF_LINES} lines: pass the changed paths instead (`paths`)"
        )));
    }
    let mut out: Vec<Change> = Vec::new();
    let mut old_path: Option<String> = None;
    for line in diff.lines() {
        if let Some(p) = line.strip_prefix("--- ") {
            old_path = clean_path(p);
        } else if let Some(p) = line.strip_prefix("+++ ") {
            let path = clean_path(p).or(old_path.take());
            if let Some(path) = path {
                out.push(Change { path, lines: Vec::new() });
            }
        } else if let Some(rest) = line.strip_prefix("Binary files ") {
            // Binary files a/x and b/x differ
            let path = rest.split(" and ").nth(1).and_then(|s| clean_path(s.trim_end_matches(" differ")));
            if let Some(path) = path {
                out.push(Change { path, lines: Vec::new() });
            }
        } else if let Some(h) = line.strip_prefix("@@ ") {
            let Some(current) = out.last_mut() else { continue };
            for side in h.split_whitespace().take(2) {
                let spec = side.trim_start_matches(['-', '+']);
                let mut it = spec.split(',');
                let start: u32 = it.next().and_then(|s| s.parse().ok()).unwrap_or(0);
                let len: u32 = it.next().and_then(|s| s.parse().ok()).unwrap_or(1);
                if start > 0 {
                    current.lines.push((start, start + len.saturating_sub(1)));
                }
            }
        }
    }
    if out.is_empty() {
        return Err(SearchError::BadRequest(
            "no changed file found in the diff: give a unified diff (`git diff`) or `paths`".into(),
        ));
    }
    Ok(out)
}

fn clean_path(p: &str) -> Option<String> {
    let p = p.split('\t').next().unwrap_or(p).trim();
    if p == "/dev/null" || p.is_empty() {
        return None;
    }
    let p = p.strip_prefix("a/").or_else(|| p.strip_prefix("b/")).unwrap_or(p);
    Some(p.to_string())
}

/// A definition or file reached, with its score and how.
#[derive(Debug, Clone, Serialize)]
pub struct Affected {
    #[serde(flatten)]
    pub place: Place,
    pub score: f64,
    /// Hops from the change.
    pub depth: usize,
    /// The kind of the last edge walked (`calls`, `references`, `inherits`, `imports`).
    pub via: &'static str,
}

/// What a change affects.
#[derive(Debug, Clone, Serialize)]
pub struct ImpactAnswer {
    /// The definitions the change touches (whole files: their top-level definitions).
    pub changed: Vec<Place>,
    /// Non-test definitions affected, best first.
    pub affected: Vec<Affected>,
    /// Tests likely to exercise the change, best first.
    pub tests: Vec<Affected>,
    /// Changed paths that are not in the index.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unknown_paths: Vec<String>,
    /// Files that the git history says change together with the changed ones (most shared
    /// commits first): what a reviewer also opens, whether or not the graph links them. Empty
    /// without recorded history.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cochanged: Vec<CoChanged>,
}

/// A file that changed in the same commits as a changed file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CoChanged {
    pub path: String,
    /// Commits it shares with `with`.
    pub commits: usize,
    /// The changed file it shares them with.
    pub with: String,
}

/// Ranks what `changes` affect (at most `limit` definitions and `limit` tests).
pub fn impact(g: &CodeGraph, changes: &[Change], limit: usize) -> ImpactAnswer {
    let mut seeds: Vec<usize> = Vec::new();
    let mut seed_files: Vec<usize> = Vec::new();
    let mut unknown = Vec::new();
    for c in changes {
        let Some(f) = g.file(&c.path) else {
            unknown.push(c.path.clone());
            continue;
        };
        seed_files.push(f);
        if c.lines.is_empty() {
            seeds.extend(g.by_file[f].iter().copied().filter(|&i| g.symbols[i].parent.is_none()));
        } else {
            for &(a, b) in &c.lines {
                let mut inner: Vec<usize> = g.by_file[f]
                    .iter()
                    .copied()
                    .filter(|&i| g.symbols[i].start_line <= b && a <= g.symbols[i].end_line)
                    .collect();
                // Innermost definitions only (a changed method, not its whole class).
                let all = inner.clone();
                inner.retain(|&i| {
                    !all.iter().any(|&j| {
                        j != i
                            && g.symbols[i].start_line <= g.symbols[j].start_line
                            && g.symbols[j].end_line <= g.symbols[i].end_line
                    })
                });
                seeds.extend(inner);
            }
        }
    }
    seeds.sort();
    seeds.dedup();
    // Backward walk: (definition or file-level site) scores.
    let mut def_score: HashMap<usize, (f64, usize, &'static str)> = HashMap::new();
    let mut file_score: HashMap<usize, (f64, usize, &'static str)> = HashMap::new();
    let mut frontier: Vec<(Option<usize>, usize, f64)> =
        seeds.iter().map(|&s| (Some(s), g.symbol_file[s], 1.0)).collect();
    frontier.extend(seed_files.iter().map(|&f| (None, f, 1.0)));
    for depth in 1..=DEPTH {
        let mut next = Vec::new();
        for (def, file, w) in frontier {
            let incoming: &Vec<usize> = match def {
                Some(d) => &g.into_symbol[d],
                None => &g.into_file[file],
            };
            for &e in incoming {
                let edge = &g.edges[e];
                let src = g.file_ids[&edge.row.path];
                let kw = match edge.row.kind {
                    EdgeKind::Calls | EdgeKind::Inherits => 1.0,
                    EdgeKind::References => 0.6,
                    EdgeKind::Imports => 0.4,
                };
                let score = w * DECAY.powi(depth as i32 - 1) * kw;
                let via = edge.row.kind.as_str();
                let site = edge.from.or_else(|| g.symbol_at(src, edge.row.line));
                let slot = match site {
                    Some(s) if seeds.binary_search(&s).is_err() => def_score.entry(s).or_insert((0.0, depth, via)),
                    Some(_) => continue,
                    None => file_score.entry(src).or_insert((0.0, depth, via)),
                };
                slot.0 += score;
                next.push((site, src, score));
            }
        }
        next.sort_by(|a, b| b.2.total_cmp(&a.2));
        next.truncate(5_000);
        frontier = next;
    }
    let mut affected = Vec::new();
    let mut tests = Vec::new();
    for (d, (score, depth, via)) in def_score {
        let item = Affected { place: Place::of_symbol(g, d), score, depth, via };
        if g.is_test[g.symbol_file[d]] {
            tests.push(item);
        } else {
            affected.push(item);
        }
    }
    for (f, (score, depth, via)) in file_score {
        let place =
            Place { path: g.files[f].clone(), start_line: 1, end_line: 1, symbol: None, kind: None, signature: None };
        let item = Affected { place, score, depth, via };
        if g.is_test[f] {
            tests.push(item);
        } else if !seed_files.contains(&f) {
            affected.push(item);
        }
    }
    for list in [&mut affected, &mut tests] {
        list.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| a.place.path.cmp(&b.place.path)));
        list.truncate(limit);
    }
    ImpactAnswer {
        changed: seeds.iter().map(|&s| Place::of_symbol(g, s)).collect(),
        affected,
        tests,
        unknown_paths: unknown,
        cochanged: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diffs_name_files_and_both_sides_of_hunks() {
        let diff =
            "diff --git a/src/a.py b/src/a.py\n--- a/src/a.py\n+++ b/src/a.py\n@@ -10,3 +10,4 @@ def f():\n-x\n+y\n\
                    diff --git a/gone.py b/gone.py\n--- a/gone.py\n+++ /dev/null\n@@ -1,5 +0,0 @@\n\
                    Binary files a/logo.png and b/logo.png differ\n";
        let c = parse_diff(diff).unwrap();
        assert_eq!(c[0], Change { path: "src/a.py".into(), lines: vec![(10, 12), (10, 13)] });
        assert_eq!(c[1].path, "gone.py");
        assert_eq!(c[2], Change { path: "logo.png".into(), lines: vec![] });
        assert!(parse_diff("hello").unwrap_err().to_string().contains("no changed file"));
        let huge = "+x\n".repeat(MAX_DIFF_LINES + 1);
        assert!(parse_diff(&huge).unwrap_err().to_string().contains("pass the changed paths"));
    }
}
