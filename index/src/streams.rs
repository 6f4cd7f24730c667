//! The `streams` table: which streamed files are complete, and at which content hash.
//!
//! A file too large to hold in memory is committed in parts as it is read
//! (`ctxd_stages::chunk::Chunker::stream`). Its chunk rows carry `file_hash =
//! "partial:<hash>"` from the first part on and are never rewritten: rewriting the hash on
//! every row of a multi-gigabyte file at the end would write the file's rows a second time and
//! send all of them through the full-text index again. Instead, once every part is committed
//! and the rows of the file's previous version are deleted, one row `(path, file_hash)` is
//! written here. [`crate::reader::Reads::file_hashes`] reads `partial:<hash>` rows as complete exactly
//! when this table holds `<hash>` for their path; otherwise the file counts as not indexed
//! and is streamed again (a crash mid-file never leaves half a file looking whole).
//!
//! | column | type | meaning |
//! |---|---|---|
//! | path | utf8 | file path relative to the root |
//! | file_hash | utf8 | blake3 of the complete file |

use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema, SchemaRef};

/// Name of the streams table.
pub const STREAMS_TABLE: &str = "streams";

/// Prefix of the `file_hash` of chunk rows of a streamed file.
pub const PARTIAL_PREFIX: &str = "partial:";

/// Schema of the streams table.
pub fn streams_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("path", DataType::Utf8, false),
        Field::new("file_hash", DataType::Utf8, false),
    ]))
}

/// One completed streamed file as a record batch.
pub fn stream_batch(path: &str, hash: &str) -> RecordBatch {
    let cols: Vec<ArrayRef> = vec![Arc::new(StringArray::from(vec![path])), Arc::new(StringArray::from(vec![hash]))];
    RecordBatch::try_new(streams_schema(), cols).expect("streams batch matches its schema")
}

/// The hash a chunk row's `file_hash` stands for: `partial:<h>` is `<h>` when `complete`
/// (the streams table's hash for the path) is `<h>`; anything else is returned as is.
pub fn resolve<'a>(row_hash: &'a str, complete: Option<&str>) -> &'a str {
    match row_hash.strip_prefix(PARTIAL_PREFIX) {
        Some(h) if complete == Some(h) => h,
        _ => row_hash,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partial_rows_resolve_only_against_their_own_hash() {
        assert_eq!(resolve("partial:abc", Some("abc")), "abc");
        assert_eq!(resolve("partial:abc", Some("def")), "partial:abc");
        assert_eq!(resolve("partial:abc", None), "partial:abc");
        assert_eq!(resolve("abc", Some("zzz")), "abc");
    }
}
