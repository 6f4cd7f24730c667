//! Rows for the unit tests of this crate: `row(i)` is chunk `c{i}` of file `f{i}.txt` with an
//! 8-dimensional vector that differs per row (model `m`).

use crate::{record::Chunk, schema::ChunkRow};

/// Chunk `c{i}`: one line of `f{i}.txt`, a distinct unit-ish vector of dimension 8.
pub(crate) fn row(i: usize) -> ChunkRow {
    let mut vector = vec![0.0f32; 8];
    vector[i % 8] = 1.0;
    vector[(i / 8) % 8] += 0.5;
    ChunkRow {
        chunk: Chunk {
            chunk_id: format!("c{i}"),
            path: format!("f{i}.txt"),
            language: "text".into(),
            symbol: None,
            kind: None,
            start_line: 1,
            end_line: 1,
            content: format!("file number {i} about topic{}", i % 5),
            content_hash: format!("h{i}"),
            token_count: 5,
            source: String::new(),
            git_ref: String::new(),
        },
        embed_key: format!("k{i}"),
        file_hash: format!("fh{i}"),
        vector,
        model: "m".into(),
        late: Vec::new(),
    }
}
