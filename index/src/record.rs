//! The chunk record: one piece of one file, from the chunker to the answer of a query.
//!
//! [`Chunk`] is declared once and used everywhere a chunk travels: the chunk stage makes it,
//! the embed stage wraps it into a stored [`ChunkRow`](crate::schema::ChunkRow) (plus vector, model,
//! cache key and file hash), searches return it as a [`Hit`] (plus a score), and the query
//! crate answers with those hits and packs them into context blocks. The wire formats (HTTP,
//! MCP, Arrow Flight) serialise a hit as the flat object they always had:
//! `{"chunk_id", "path", "start_line", "end_line", "symbol", "kind", "language", "content",
//! "score"}` (plus `"source"` in an index of named sources); the content hash and token count
//! stay inside the process.

use std::ops::{Deref, DerefMut};

use serde::{Deserialize, Serialize};

/// One chunk of a file.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Chunk {
    /// Stable id: path, line range and content ([`chunk_id`]); empty (and not serialised) for
    /// a context block that joins several chunks.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub chunk_id: String,
    /// Path relative to the indexed root, `/`-separated; in an index of named sources it
    /// starts with the source's name (`api/src/main.rs`), so two sources never share a path.
    pub path: String,
    /// The named source the file belongs to (`[[source]] name`); empty (and not serialised)
    /// for an index of one unnamed source.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub source: String,
    /// For a git source, the ref the file was read from (`main`, `v2.0`); empty otherwise.
    #[serde(default, rename = "ref", skip_serializing_if = "String::is_empty")]
    pub git_ref: String,
    /// 1-based, inclusive.
    pub start_line: u32,
    /// 1-based, inclusive.
    pub end_line: u32,
    /// Name of the function/class/section the chunk holds, when known.
    pub symbol: Option<String>,
    /// `function`, `class`, `section`, … ([`crate::symbols::is_definition`] says which are definitions).
    pub kind: Option<String>,
    /// `rust`, `python`, `markdown`, `text`, …
    pub language: String,
    pub content: String,
    /// blake3 of `content`.
    #[serde(skip)]
    pub content_hash: String,
    /// Tokens of `content` by the model's tokenizer.
    #[serde(skip)]
    pub token_count: u32,
}

impl Chunk {
    /// `path:start-end`.
    pub fn citation(&self) -> String {
        format!("{}:{}-{}", self.path, self.start_line, self.end_line)
    }

    /// Sets `source` and `git_ref` from a stored segment (`name` or `name@ref`, see [`split_source`]).
    pub fn set_source(&mut self, segment: &str) {
        let (name, git_ref) = split_source(segment);
        (self.source, self.git_ref) = (name.to_string(), git_ref);
    }
}

/// The named source of a path written by a pipeline of named sources: its first segment
/// (`name`, or `name@ref` for a git source's file; see [`split_source`]).
pub fn source_of_path(path: &str) -> &str {
    path.split_once('/').map_or("", |(s, _)| s)
}

/// The ref that reads a source as it is on disk (`name@worktree/…`): a git source's work tree,
/// or a folder source, always read that way.
pub const WORKTREE: &str = "worktree";

/// `name@ref` (a git source's stored segment, `/` in the ref written `~`) → `(name, ref)`;
/// `name` → `(name, "")`.
pub fn split_source(segment: &str) -> (&str, String) {
    match segment.split_once('@') {
        Some((name, r)) => (name, r.replace('~', "/")),
        None => (segment, String::new()),
    }
}

/// Stable id of a chunk: path (which starts with the source's name in an index of named
/// sources), line range and content hash.
pub fn chunk_id(path: &str, start_line: u32, end_line: u32, content_hash: &str) -> String {
    let mut h = blake3::Hasher::new();
    h.update(path.as_bytes());
    h.update(&[0]);
    h.update(&start_line.to_le_bytes());
    h.update(&end_line.to_le_bytes());
    h.update(content_hash.as_bytes());
    h.finalize().to_hex()[..32].to_string()
}

/// A chunk a search found, with its score: similarity for vector hits (1 − cosine distance),
/// BM25 for full-text hits, the fused or rescored value after routing.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Hit {
    #[serde(flatten)]
    pub chunk: Chunk,
    pub score: f32,
}

impl Deref for Hit {
    type Target = Chunk;
    fn deref(&self) -> &Chunk {
        &self.chunk
    }
}

impl DerefMut for Hit {
    fn deref_mut(&mut self) -> &mut Chunk {
        &mut self.chunk
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hit_is_one_flat_json_object_without_the_internal_fields() {
        let chunk = Chunk {
            chunk_id: "c1".into(),
            path: "src/a.rs".into(),
            start_line: 3,
            end_line: 9,
            symbol: Some("f".into()),
            kind: Some("function".into()),
            language: "rust".into(),
            content: "fn f() {}".into(),
            content_hash: "h".into(),
            token_count: 4,
            source: String::new(),
            git_ref: String::new(),
        };
        let hit = Hit { chunk, score: 0.5 };
        let v = serde_json::to_value(&hit).unwrap();
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        let mut want = ["chunk_id", "path", "start_line", "end_line", "symbol", "kind", "language", "content", "score"];
        want.sort();
        let mut got = keys.clone();
        got.sort();
        assert_eq!(got, want);
        assert_eq!(hit.citation(), "src/a.rs:3-9");
        let back: Hit = serde_json::from_value(v).unwrap();
        assert_eq!((back.path.as_str(), back.score, back.token_count), ("src/a.rs", 0.5, 0));
    }
}
