//! Candidates to drafts: the first steps of context assembly, before anything is packed.
//!
//! 1. **Exact duplicates** (same text, e.g. a vendored copy of a file) are dropped;
//! 2. chunks of a file whose line ranges overlap or touch are **merged** into one draft (token
//!    windows overlap by design; the merged draft keeps the best score), until no two touch;
//! 3. **near-duplicates** are dropped: a draft whose first chunk's embedding has cosine ≥ the
//!    threshold with a more relevant draft already kept.
//!
//! Also the exact file lines of a chunk ([`chunk_lines`]) and of a file rebuilt from its chunks
//! ([`indexed_lines`]), which the symbol tools and the evaluation use too.

use std::collections::{BTreeMap, HashMap, HashSet};

use ctxd_index::store::Index;

use ctxd_search::search::SearchResult;

/// A block being built from one or more chunks.
pub(crate) struct Draft {
    pub path: String,
    pub language: String,
    pub symbol: Option<String>,
    /// Line number → text (exact file lines).
    pub lines: BTreeMap<u32, String>,
    pub score: f32,
    /// The chunk ids merged into it (their vectors judge near-duplicates).
    pub ids: Vec<String>,
}

impl Draft {
    pub fn start(&self) -> u32 {
        *self.lines.keys().next().unwrap_or(&1)
    }
    pub fn end(&self) -> u32 {
        *self.lines.keys().next_back().unwrap_or(&1)
    }
}

/// The exact file lines of a chunk: its content's last `end − start + 1` lines (a piece of a
/// split definition starts with its signature, which is not part of its range).
pub(crate) fn chunk_lines(start_line: u32, end_line: u32, content: &str) -> BTreeMap<u32, String> {
    let n = (end_line.saturating_sub(start_line) + 1) as usize;
    let lines: Vec<&str> = content.lines().collect();
    let skip = lines.len().saturating_sub(n);
    lines[skip..].iter().enumerate().map(|(i, l)| (start_line + i as u32, l.to_string())).collect()
}

/// The exact file lines covered by `chunks` (each line once, from the first chunk holding it),
/// restricted to `range`: a file's text rebuilt from the index.
pub fn indexed_lines<'a>(
    chunks: impl IntoIterator<Item = &'a ctxd_index::record::Hit>,
    range: std::ops::RangeInclusive<u32>,
) -> BTreeMap<u32, String> {
    let mut lines = BTreeMap::new();
    for c in chunks.into_iter().filter(|c| c.end_line >= *range.start() && c.start_line <= *range.end()) {
        for (n, l) in chunk_lines(c.start_line, c.end_line, &c.content) {
            if range.contains(&n) {
                lines.entry(n).or_insert(l);
            }
        }
    }
    lines
}

pub(crate) fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let (mut dot, mut na, mut nb) = (0.0f32, 0.0f32, 0.0f32);
    for (x, y) in a.iter().zip(b) {
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    if na == 0.0 || nb == 0.0 {
        0.0
    } else {
        dot / (na.sqrt() * nb.sqrt())
    }
}

/// The drafts of a context's candidates, with what the steps dropped or merged.
pub(crate) struct Drafts {
    /// In relevance order.
    pub kept: Vec<Draft>,
    /// The embeddings of the drafts' first chunks (empty without vectors).
    pub vectors: HashMap<String, Vec<f32>>,
    pub exact_duplicates: usize,
    pub merged: usize,
    pub near_duplicates: usize,
}

impl Drafts {
    /// Steps 1–3 over `ordered` (candidates by relevance, with their scores), vectors read from
    /// `index`, near-duplicates at cosine ≥ `near_duplicate`.
    pub async fn of(ordered: Vec<(f32, &SearchResult)>, index: &Index, near_duplicate: f32) -> Drafts {
        // 1. Exact duplicates.
        let mut seen_text: HashSet<&str> = HashSet::new();
        let mut exact_duplicates = 0;
        let mut unique: Vec<(f32, &SearchResult)> = Vec::new();
        for (score, r) in ordered {
            if seen_text.insert(r.content.trim()) {
                unique.push((score, r));
            } else {
                exact_duplicates += 1;
            }
        }
        // 2. Merge overlapping or adjacent ranges of a file (best score kept; order by score).
        let mut drafts: Vec<Draft> = Vec::new();
        let mut merged = 0;
        for (score, r) in unique {
            let lines = chunk_lines(r.start_line, r.end_line, &r.content);
            let (s, e) = (r.start_line, r.end_line);
            if let Some(d) = drafts.iter_mut().find(|d| d.path == r.path && s <= d.end() + 1 && d.start() <= e + 1) {
                for (n, l) in lines {
                    d.lines.entry(n).or_insert(l);
                }
                d.ids.push(r.chunk_id.clone());
                if d.symbol.is_none() {
                    d.symbol = r.symbol.clone();
                }
                merged += 1;
                continue;
            }
            drafts.push(Draft {
                path: r.path.clone(),
                language: r.language.clone(),
                symbol: r.symbol.clone(),
                lines,
                score,
                ids: vec![r.chunk_id.clone()],
            });
        }
        // A merge can make two drafts touch: merge again until stable.
        loop {
            let mut changed = false;
            'outer: for i in 0..drafts.len() {
                for j in i + 1..drafts.len() {
                    let (a, b) = (&drafts[i], &drafts[j]);
                    if a.path == b.path && b.start() <= a.end() + 1 && a.start() <= b.end() + 1 {
                        let b = drafts.remove(j);
                        let a = &mut drafts[i];
                        for (n, l) in b.lines {
                            a.lines.entry(n).or_insert(l);
                        }
                        a.ids.extend(b.ids);
                        a.score = a.score.max(b.score);
                        merged += 1;
                        changed = true;
                        break 'outer;
                    }
                }
            }
            if !changed {
                break;
            }
        }
        // 3. Near-duplicates by embedding (when the index has vectors).
        let ids: Vec<String> = drafts.iter().filter_map(|d| d.ids.first().cloned()).collect();
        let vectors = index.vectors().vectors_of_chunks(&ids).await.unwrap_or_default();
        let mut near_duplicates = 0;
        let mut kept: Vec<Draft> = Vec::new();
        for d in drafts {
            let v = d.ids.first().and_then(|id| vectors.get(id));
            let dup = v.is_some_and(|v| {
                kept.iter().any(|k| {
                    k.ids.first().and_then(|id| vectors.get(id)).is_some_and(|kv| cosine(v, kv) >= near_duplicate)
                })
            });
            if dup {
                near_duplicates += 1;
            } else {
                kept.push(d);
            }
        }
        Drafts { kept, vectors, exact_duplicates, merged, near_duplicates }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ctxd_index::record::Chunk;

    #[test]
    fn split_pieces_cite_only_their_own_lines() {
        let chunk = Chunk {
            chunk_id: "c".into(),
            path: "a.rs".into(),
            start_line: 10,
            end_line: 11,
            symbol: Some("f".into()),
            kind: Some("function_part".into()),
            language: "rust".into(),
            content: "fn f() {\n    let x = 1;\n    x\n".into(),
            ..Chunk::default()
        };
        let r = SearchResult { chunk, score: 1.0 };
        let lines = chunk_lines(r.start_line, r.end_line, &r.content);
        assert_eq!(lines.keys().copied().collect::<Vec<_>>(), [10, 11]);
        assert_eq!(lines[&10], "    let x = 1;");
    }
}
