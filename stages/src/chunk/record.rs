//! The chunk stage's records: one chunk of a file ([`Chunk`]), a file cut into chunks
//! ([`ChunkedFile`]), one part of a streamed file ([`Part`]), the stable id of a chunk, and the
//! constructor every chunking method ends in (content hash, 1-based lines, empty symbols
//! dropped).

use ctxd_index::record::Chunk;

/// A file cut into chunks.
#[derive(Debug, Clone)]
pub struct ChunkedFile {
    pub rel: String,
    pub language: &'static str,
    /// blake3 of the file; for a part of a streamed file, `partial:<hash>` (complete once the
    /// index's `streams` table records `<hash>`).
    pub file_hash: String,
    pub chunks: Vec<Chunk>,
    /// The file's definitions (the symbol table's rows); empty for streamed parts.
    pub symbols: Vec<ctxd_index::symbols::SymbolRow>,
    /// The code graph's outgoing edges of a code file ([`crate::edges`]); empty for
    /// documents, extracted text (PDF, notebooks, HTML) and streamed parts.
    pub edges: Vec<ctxd_index::edges::EdgeRow>,
    /// Set for the parts of a file too large to hold in memory (see [`crate::chunk::Chunker::stream`]).
    pub part: Option<Part>,
}

/// One part of a streamed file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    /// 0-based part number.
    pub index: u32,
    /// True for the last part; its `index + 1` is the number of parts.
    pub last: bool,
    /// blake3 of the whole file, recorded once every part is committed.
    pub file_hash: String,
}

/// Stable id of a chunk: path, line range and content.
pub fn chunk_id(path: &str, chunk: &Chunk) -> String {
    ctxd_index::record::chunk_id(path, chunk.start_line, chunk.end_line, &chunk.content_hash)
}

/// Places a file's chunks: their path, language and stable id (chunking methods make chunks
/// of text; the file they belong to is set once, here).
pub(super) fn place(rel: &str, language: &str, chunks: &mut [Chunk]) {
    for c in chunks {
        c.path = rel.to_string();
        c.language = language.to_string();
        c.chunk_id = chunk_id(rel, c);
    }
}

pub(super) fn make_chunk(
    content: String,
    start: usize,
    end: usize,
    symbol: Option<String>,
    kind: Option<&str>,
    tokens: usize,
) -> Chunk {
    let content_hash = blake3::hash(content.as_bytes()).to_hex().to_string();
    Chunk {
        symbol: symbol.filter(|s| !s.is_empty()),
        kind: kind.map(str::to_string),
        start_line: start as u32 + 1,
        end_line: end as u32 + 1,
        content,
        content_hash,
        token_count: tokens as u32,
        ..Chunk::default()
    }
}
