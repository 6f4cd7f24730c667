//! The chunk stage's records: one chunk of a file ([`Chunk`]), a file cut into chunks
//! ([`ChunkedFile`]), one part of a streamed file ([`Part`]), the stable id of a chunk, and the
//! constructor every chunking method ends in (content hash, 1-based lines, empty symbols
//! dropped).

/// One chunk of a file.
#[derive(Debug, Clone, PartialEq)]
pub struct Chunk {
    pub symbol: Option<String>,
    pub kind: Option<String>,
    /// 1-based, inclusive.
    pub start_line: u32,
    /// 1-based, inclusive.
    pub end_line: u32,
    pub content: String,
    pub content_hash: String,
    pub token_count: u32,
}

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
    pub symbols: Vec<ctxd_index::SymbolRow>,
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
    let mut h = blake3::Hasher::new();
    h.update(path.as_bytes());
    h.update(&[0]);
    h.update(&chunk.start_line.to_le_bytes());
    h.update(&chunk.end_line.to_le_bytes());
    h.update(chunk.content_hash.as_bytes());
    h.finalize().to_hex()[..32].to_string()
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
    }
}
