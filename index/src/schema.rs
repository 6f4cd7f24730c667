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
//! | vector | fixed_size_list<float32, dim>? | unit-length embedding; null in a row without one (model `none`: a full-text-only row) — in tables created before the column was nullable, `dim` zeros ([`Vectorless`]) |
//! | model | utf8 | embedding model id |
//! | indexed_at | timestamp[us, UTC] | when the row was written |
//! | source | utf8? | the named source (`[[source]]`) the file belongs to; null for an index of one unnamed source (and in tables written before sources had names) |
//! | late | binary? | the chunk's token states for late-interaction rescoring, compressed by the model's codec (`ctxd_models::late`); null when the model has none or the row has no vector, and in tables written before the column (added null when a writer opens them) |

use std::sync::Arc;

use arrow_array::{
    builder::{FixedSizeListBuilder, Float32Builder},
    ArrayRef, BinaryArray, RecordBatch, StringArray, TimestampMicrosecondArray, UInt32Array,
};
use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};

use crate::record::Chunk;
use crate::NO_MODEL;

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
    /// The chunk's late-interaction codes (`ctxd_models::late`); empty: none, stored as null.
    pub late: Vec<u8>,
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

/// The column holding a row's late-interaction codes (see the module docs): opaque bytes of the
/// model's codec, null for none. Last (after [`SOURCE`]), so a table written before it existed
/// gains it as a metadata-only column ([`crate::store::Index::open_or_create`]).
pub const LATE: &str = "late";

/// How a table stores the vector of a row that has none (model [`NO_MODEL`]: a full-text-only
/// row, e.g. every row of `ctxd index --no-embed`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Vectorless {
    /// A null `vector`: nothing on disk (LanceDB stores only the validity). Tables created by
    /// [`chunks_schema`].
    Null,
    /// `dim` zeros: tables created before `vector` was nullable (their schema says non-null).
    /// A 1 GB log indexed without embeddings wrote 2.8 GB of them.
    Zeros,
}

impl Vectorless {
    /// How the table of `schema` stores vectorless rows (its `vector` field's nullability).
    pub fn of(schema: &Schema) -> Self {
        match schema.field_with_name("vector") {
            Ok(field) if field.is_nullable() => Self::Null,
            _ => Self::Zeros,
        }
    }

    /// The chunks schema of a table storing vectorless rows this way (`vector`'s nullability).
    pub fn schema(self, dim: usize) -> SchemaRef {
        chunks_fields(dim, self == Vectorless::Null)
    }
}

/// A side table's schema of columns that are all required: `(name, type)` in order.
pub(crate) fn required_columns(columns: &[(&str, DataType)]) -> SchemaRef {
    Arc::new(Schema::new(columns.iter().map(|(name, ty)| Field::new(*name, ty.clone(), false)).collect::<Vec<_>>()))
}

/// Schema of a new chunks table for vectors of `dim` dimensions.
pub fn chunks_schema(dim: usize) -> SchemaRef {
    Vectorless::Null.schema(dim)
}

fn chunks_fields(dim: usize, nullable_vector: bool) -> SchemaRef {
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
            nullable_vector,
        ),
        Field::new("model", DataType::Utf8, false),
        Field::new("indexed_at", DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())), false),
        Field::new(SOURCE, DataType::Utf8, true),
        Field::new(LATE, DataType::Binary, true),
    ]))
}

/// Appends one row's vector to `list`: `Some` must have the list's `dim` values; `None` (a row
/// without a vector) is stored as `vectorless` says.
pub fn push_vector(
    list: &mut FixedSizeListBuilder<Float32Builder>,
    vector: Option<&[f32]>,
    vectorless: Vectorless,
) -> Result<(), usize> {
    let dim = list.value_length() as usize;
    match vector {
        Some(v) if v.len() != dim => return Err(v.len()),
        Some(v) => list.values().append_slice(v),
        // A null list still spans `dim` child slots in memory; LanceDB does not write them.
        None => list.values().append_value_n(0.0, dim),
    }
    list.append(vector.is_some() || vectorless == Vectorless::Zeros);
    Ok(())
}

/// Builds one record batch from rows for a table storing vectorless rows as `vectorless` says.
/// Every row's vector must have `dim` values, except a row of model [`NO_MODEL`], whose vector
/// is not read (and whose `late` is stored null, as an empty one is). With `named` (a pipeline
/// of named sources), a row without a `source` takes its path's first segment
/// ([`crate::record::source_of_path`]).
pub fn rows_to_batch(
    rows: &[ChunkRow],
    dim: usize,
    named: bool,
    vectorless: Vectorless,
) -> Result<RecordBatch, arrow_schema::ArrowError> {
    let schema = vectorless.schema(dim);
    let s = |f: fn(&ChunkRow) -> &str| -> ArrayRef { Arc::new(StringArray::from_iter_values(rows.iter().map(f))) };
    let o = |f: fn(&ChunkRow) -> Option<&str>| -> ArrayRef { Arc::new(rows.iter().map(f).collect::<StringArray>()) };
    let u = |f: fn(&ChunkRow) -> u32| -> ArrayRef { Arc::new(UInt32Array::from_iter_values(rows.iter().map(f))) };
    let mut vectors =
        FixedSizeListBuilder::with_capacity(Float32Builder::with_capacity(rows.len() * dim), dim as i32, rows.len());
    for row in rows {
        let vector = (row.model != NO_MODEL).then_some(row.vector.as_slice());
        push_vector(&mut vectors, vector, vectorless).map_err(|len| {
            arrow_schema::ArrowError::InvalidArgumentError(format!(
                "chunk {} of {} has a vector of length {len}, expected {dim}",
                row.chunk_id, row.path
            ))
        })?;
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
            Arc::new(
                rows.iter()
                    .map(|r| (!r.late.is_empty() && r.model != NO_MODEL).then_some(r.late.as_slice()))
                    .collect::<BinaryArray>(),
            ),
        ],
    )
}
