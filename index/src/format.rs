//! The on-disk format of an index: a version number in the chunks table's schema metadata
//! (`ctxd.format`), what each version means, and the rule for opening one.
//!
//! | format | written by | layout |
//! |---|---|---|
//! | 1 | every build from the first (2026-11-22) until format versions existed; a table without the key | vectorless rows as `dim` zeros (a non-null `vector`); before 2026-11-23 no `embed_key` (such a table is re-embedded once by the first writer); before 2026-11-24 no `source` (the column is added, null) |
//! | 2 | this build | the key; `vector` nullable (a row without one stores a null), `embed_key`, `source`; since 2026-12-07 `late` (added null to older tables when a writer opens them; an older build reads a table with it as it is: one more nullable column) |
//!
//! **Policy.** A build opens, searches, writes and compacts every format from [`OLDEST_FORMAT`]
//! up to its own [`FORMAT`]; it stamps its own format on the tables it creates and leaves an
//! existing table's format as it is (the table keeps the layout it was made with: the code reads
//! each layout through [`crate::schema::Vectorless`] and the column checks of
//! [`crate::store::Index`]). A table of a newer format than the build is refused with both
//! versions named, never read by guesswork; a format is only ever raised by a change that an
//! older build would read wrongly. `ctxd/tests/fixtures/index-format-1-*` are indexes written by
//! older builds (the oldest supported one among them), opened by every test run.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_schema::{Schema, SchemaRef};

use crate::error::IndexError;

/// The schema metadata key holding a chunks table's format.
pub const FORMAT_KEY: &str = "ctxd.format";
/// The format this build writes.
pub const FORMAT: u32 = 2;
/// The oldest format this build reads (a table without [`FORMAT_KEY`] is format 1).
pub const OLDEST_FORMAT: u32 = 1;

/// `schema` with this build's format in its metadata: the schema of a table to create.
pub fn stamped(schema: &SchemaRef) -> SchemaRef {
    let metadata = HashMap::from([(FORMAT_KEY.to_string(), FORMAT.to_string())]);
    Arc::new(Schema::new_with_metadata(schema.fields().clone(), metadata))
}

/// The format of the chunks table of `schema` (at `uri`, for the errors), checked against what
/// this build reads.
pub fn check(uri: &str, schema: &Schema) -> Result<u32, IndexError> {
    let found = match schema.metadata().get(FORMAT_KEY) {
        None => OLDEST_FORMAT,
        Some(text) => text.trim().parse::<u32>().map_err(|_| IndexError::Format {
            uri: uri.to_string(),
            found: text.clone(),
            oldest: OLDEST_FORMAT,
            supported: FORMAT,
        })?,
    };
    if !(OLDEST_FORMAT..=FORMAT).contains(&found) {
        return Err(IndexError::Format {
            uri: uri.to_string(),
            found: found.to_string(),
            oldest: OLDEST_FORMAT,
            supported: FORMAT,
        });
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::chunks_schema;

    #[test]
    fn a_format_newer_than_the_build_or_unreadable_is_refused_with_both_versions() {
        let plain = chunks_schema(4);
        assert_eq!(check("db", &plain).unwrap(), 1, "no key: the first format");
        assert_eq!(check("db", &stamped(&plain)).unwrap(), FORMAT);
        for bad in [(FORMAT + 1).to_string(), "0".into(), "two".into()] {
            let schema =
                Schema::new_with_metadata(plain.fields().clone(), HashMap::from([(FORMAT_KEY.into(), bad.clone())]));
            let err = check("/srv/db", &schema).unwrap_err().to_string();
            assert!(
                err.contains(&format!("format {bad}")) && err.contains(&format!("{OLDEST_FORMAT} to {FORMAT}")),
                "{err}"
            );
            assert!(err.contains("/srv/db"), "{err}");
        }
    }

    #[tokio::test]
    async fn new_tables_carry_the_format_through_writes_and_a_newer_one_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let uri = tmp.path().join("db").to_string_lossy().into_owned();
        let index = crate::store::Index::open_or_create(&uri, "m", 8).await.unwrap();
        for i in 0..3 {
            let rows = vec![crate::testing::row(i)];
            index.writes().commit(crate::writer::CommitBatch { rows, ..Default::default() }).await.unwrap();
        }
        assert_eq!(check(&uri, &index.table.schema().await.unwrap()).unwrap(), FORMAT, "kept through commits");
        let native = index.table.as_native().unwrap();
        native.replace_schema_metadata([(FORMAT_KEY.to_string(), (FORMAT + 1).to_string())]).await.unwrap();
        drop(index);
        for opened in
            [crate::store::Index::open(&uri).await.err(), crate::store::Index::open_or_create(&uri, "m", 8).await.err()]
        {
            let err = opened.expect("a newer format is refused").to_string();
            assert!(err.contains(&format!("format {}", FORMAT + 1)) && err.contains(&format!("to {FORMAT}")), "{err}");
        }
    }
}
