//! The Arrow schema of the `chunks` table and the row type the pipeline writes.
//!
//! | column | type | meaning |
//! |---|---|---|
//! | chunk_id | utf8 | blake3 of path, line range and content hash: stable while the chunk is unchanged |
//! | path | utf8 | path relative to the indexed root, `/`-separated |
//! | language | utf8 | `rust`, `python`, `markdown`, `text`, … |
//! | symbol | utf8? | name of the function/class/impl the chunk holds, when known |
//! | kind | utf8? | `function`, `class`, `impl`, `module`, `text`, … |
//! | start_line, end_line | uint32 | 1-based inclusive line range |
//! | content | utf8 | the chunk's text (full-text indexed) |
//! | content_hash | utf8 | blake3 of `content` |
//! | embed_key | utf8 | the vector cache's key: blake3 of the model id and the exact text embedded (`ctxd_models::embed_key`) |
//! | file_hash | utf8 | blake3 of the whole file's bytes (the incremental state) |
//! | token_count | uint32 | tokens of `content` by the model's tokenizer |
//! | vector | fixed_size_list<float32, dim> | unit-length embedding |
//! | model | utf8 | embedding model id |
//! | indexed_at | timestamp[us, UTC] | when the row was written |
//! | source | utf8? | the named source (`[[source]]`) the file belongs to; null for an index of one unnamed source (and in tables written before sources had names) |

use std::sync::Arc;

use arrow_array::{
    builder::{FixedSizeListBuilder, Float32Builder},
    ArrayRef, RecordBatch, StringArray, TimestampMicrosecondArray, UInt32Array,
};
use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};

use crate::record::Chunk;

/// The column that keys vectors. Tables written before it existed lack it: their vectors were
/// cached by content alone, so a writer re-embeds such a table once before using it
/// ([`crate::store::Index::embed_keyed`]).
pub const EMBED_KEY: &str = "embed_key";

/// One chunk as stored in the index: the [`Chunk`] plus what only storage holds.
#[derive(Debug, Clone, PartialEq)]
pub struct ChunkRow {
    pub chunk: Chunk,
    /// Key of the vector: the model and the text it embedded (see the module docs).
    pub embed_key: String,
    /// blake3 of the whole file's bytes (the incremental state).
    pub file_hash: String,
    pub vector: Vec<f32>,
    pub model: String,
}

impl std::ops::Deref for ChunkRow {
    type Target = Chunk;
    fn deref(&self) -> &Chunk {
        &self.chunk
    }
}

/// The column naming a row's source (see the module docs). Last, so a table written before it
/// existed gains it as a metadata-only column ([`crate::store::Index::open_or_create`]).
pub const SOURCE: &str = "source";

/// Schema of the chunks table for vectors of `dim` dimensions.
pub fn chunks_schema(dim: usize) -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("chunk_id", DataType::Utf8, false),
        Field::new("path", DataType::Utf8, false),
        Field::new("language", DataType::Utf8, false),
        Field::new("symbol", DataType::Utf8, true),
        Field::new("kind", DataType::Utf8, true),
        Field::new("start_line", DataType::UInt32, false),
        Field::new("end_line", DataType::UInt32, false),
        Field::new("content", DataType::Utf8, false),
        Field::new("content_hash", DataType::Utf8, false),
        Field::new(EMBED_KEY, DataType::Utf8, false),
        Field::new("file_hash", DataType::Utf8, false),
        Field::new("token_count", DataType::UInt32, false),
        Field::new(
            "vector",
            DataType::FixedSizeList(Arc::new(Field::new("item", DataType::Float32, true)), dim as i32),
            false,
        ),
        Field::new("model", DataType::Utf8, false),
        Field::new("indexed_at", DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())), false),
        Field::new(SOURCE, DataType::Utf8, true),
    ]))
}

/// Builds one record batch from rows. Every row's vector must have `dim` values. With `named`
/// (a pipeline of named sources), a row without a `source` takes its path's first segment
/// ([`crate::record::source_of_path`]).
pub fn rows_to_batch(rows: &[ChunkRow], dim: usize, named: bool) -> Result<RecordBatch, arrow_schema::ArrowError> {
    let schema = chunks_schema(dim);
    let s = |f: fn(&ChunkRow) -> &str| -> ArrayRef { Arc::new(StringArray::from_iter_values(rows.iter().map(f))) };
    let o = |f: fn(&ChunkRow) -> Option<&str>| -> ArrayRef { Arc::new(rows.iter().map(f).collect::<StringArray>()) };
    let u = |f: fn(&ChunkRow) -> u32| -> ArrayRef { Arc::new(UInt32Array::from_iter_values(rows.iter().map(f))) };
    let mut vectors =
        FixedSizeListBuilder::with_capacity(Float32Builder::with_capacity(rows.len() * dim), dim as i32, rows.len());
    for row in rows {
        if row.vector.len() != dim {
            return Err(arrow_schema::ArrowError::InvalidArgumentError(format!(
                "chunk {} of {} has a vector of length {}, expected {dim}",
                row.chunk_id,
                row.path,
                row.vector.len()
            )));
        }
        vectors.values().append_slice(&row.vector);
        vectors.append(true);
    }
    let now = chrono::Utc::now().timestamp_micros();
    let indexed_at =
        TimestampMicrosecondArray::from_iter_values(std::iter::repeat_n(now, rows.len())).with_timezone("UTC");
    RecordBatch::try_new(
        schema,
        vec![
            s(|r| &r.chunk_id),
            s(|r| &r.path),
            s(|r| &r.language),
            o(|r| r.symbol.as_deref()),
            o(|r| r.kind.as_deref()),
            u(|r| r.start_line),
            u(|r| r.end_line),
            s(|r| &r.content),
            s(|r| &r.content_hash),
            s(|r| &r.embed_key),
            s(|r| &r.file_hash),
            u(|r| r.token_count),
            Arc::new(vectors.finish()),
            s(|r| &r.model),
            Arc::new(indexed_at),
            Arc::new(
                rows.iter()
                    .map(|r| match (r.source.as_str(), named) {
                        ("", true) => Some(crate::record::source_of_path(&r.path)),
                        ("", false) => None,
                        (s, _) => Some(s),
                    })
                    .collect::<StringArray>(),
            ),
        ],
    )
}
