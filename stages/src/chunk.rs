//! The chunk stage: a file's text → chunks with exact line ranges, symbols and token counts.
//!
//! **Code** (Rust, Python, JavaScript, TypeScript, TSX, Go, Java, C, C++, C#, Ruby, PHP, Bash,
//! Kotlin, Scala, Lua, Swift) is parsed with tree-sitter. The top
//! level is walked in order: every definition (function, method, class, struct, enum, trait,
//! impl, interface, type, module) becomes a chunk together with the comments, doc comments,
//! attributes and decorators directly above it; everything between definitions (imports,
//! module headers, statements) becomes `module` chunks. A definition larger than the token
//! budget is opened up when it is a container (impl, class, trait, module, interface): its
//! header, each member (with a qualified symbol such as `Type::method` or `Class.method`) and
//! its tail become chunks; otherwise it is split between the statements of its body (or the
//! arms of a `match`, the cases of a `switch`: the first multi-line list of named children
//! under its `body`), every piece after the first prefixed with the definition's signature so
//! it still reads as part of that function (its line range cites only its own lines); a single
//! statement larger than a piece is cut between lines. Small whole definitions (under
//! `min_tokens`) are merged with adjacent sibling definitions into `definitions` chunks of up to
//! `merge_tokens`, their symbols joined by `, `; the symbol table is built before merging, so
//! every definition keeps its own row. A file that fails to parse falls back to windows.
//!
//! **Documents** are first split into sections (Markdown and reST headings, JSON/YAML keys, TOML
//! tables, found by [`sections`]; pages, cells and headings of the PDF, notebook and HTML text
//! that [`crate::load`] extracted), each labelled with its citation path as the chunk symbol; CSV is cut into row
//! windows that repeat the header. **Everything else** is cut into token windows with overlap on
//! line boundaries. A single line longer than the budget is cut into pieces that keep its line
//! number. Pieces of an oversized definition have kind `<kind>_part`.
//!
//! Token counts come from the embedding model's tokenizer (any `Fn(&str) -> usize` in tests).
//!
//! Where it lives: [`Chunker`] and its token windows in `chunker.rs`; what a whole file becomes
//! (method per language, merging of small definitions) in `file.rs`; code cut on definitions in
//! `code.rs`, with the definitions of each language under `lang/`; the document sections in
//! [`sections`]; the symbol table in [`symbols`]; files too large for memory in `stream.rs`; the
//! records in `record.rs`.

mod chunker;
mod code;
mod file;
pub(crate) mod lang;
pub(crate) mod members;
mod record;
pub(crate) mod sections;
pub mod stage;
mod stream;
pub(crate) mod symbols;

pub use chunker::{ChunkConfig, Chunker, TokenCountFn};
pub use lang::grammar;
pub use record::{chunk_id, ChunkedFile, Part};
pub use stream::PartBudget;

/// The chunkers of the unit tests: tokens are whitespace-separated words.
#[cfg(test)]
pub(crate) mod testing {
    use std::sync::Arc;

    use super::{ChunkConfig, Chunker, TokenCountFn};

    pub fn words() -> TokenCountFn {
        Arc::new(|s: &str| s.split_whitespace().count())
    }

    pub fn chunker(max: usize) -> Chunker {
        Chunker::new(words(), ChunkConfig { max_tokens: max, overlap_tokens: 4, min_tokens: 0, merge_tokens: 0 })
    }
}
