//! Typed access to the columns of a record batch read from a table, with errors naming the
//! column.

use arrow_array::{Array, FixedSizeListArray, Float32Array, RecordBatch, StringArray};

use crate::IndexError;

/// Column `name` of `batch` as an array of type `T`, or a clear error naming it.
pub fn typed_col<'a, T: Array + 'static>(batch: &'a RecordBatch, name: &str, uri: &str) -> Result<&'a T, IndexError> {
    batch
        .column_by_name(name)
        .and_then(|c| c.as_any().downcast_ref::<T>())
        .ok_or_else(|| IndexError::Column { uri: uri.to_string(), column: name.into() })
}

/// String column `name` of `batch`.
pub(crate) fn str_col<'a>(batch: &'a RecordBatch, name: &str, uri: &str) -> Result<&'a StringArray, IndexError> {
    typed_col(batch, name, uri)
}

/// Row `i` of a `vector` column.
pub(crate) fn vector_at(vectors: &FixedSizeListArray, i: usize, uri: &str) -> Result<Vec<f32>, IndexError> {
    let row = vectors.value(i);
    let floats = row
        .as_any()
        .downcast_ref::<Float32Array>()
        .ok_or_else(|| IndexError::Column { uri: uri.to_string(), column: "vector".into() })?;
    Ok(floats.values().to_vec())
}

/// The rows of `batch` whose `path` passes `keep` (all of them when it has no `path` column).
pub(crate) fn keep_rows(batch: &RecordBatch, keep: impl Fn(&str) -> bool) -> Result<RecordBatch, IndexError> {
    let Some(paths) = batch.column_by_name("path").and_then(|c| c.as_any().downcast_ref::<StringArray>()) else {
        return Ok(batch.clone());
    };
    let mask: arrow_array::BooleanArray = paths.iter().map(|p| Some(p.is_some_and(&keep))).collect();
    if mask.true_count() == batch.num_rows() {
        return Ok(batch.clone());
    }
    Ok(arrow_select::filter::filter_record_batch(batch, &mask)?)
}
