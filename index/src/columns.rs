//! Typed access to the columns of a record batch read from a table, with errors naming the
//! column.

use arrow_array::{Array, FixedSizeListArray, Float32Array, RecordBatch, StringArray};

use crate::error::IndexError;

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

/// The rows of `batch` that `show` maps to a path (all of them when it has no `path` column),
/// with `path` (and `source`, its first segment) rewritten where `show` gave another path.
pub(crate) fn show_rows(
    batch: &RecordBatch,
    show: impl for<'p> Fn(&'p str) -> Option<std::borrow::Cow<'p, str>>,
) -> Result<RecordBatch, IndexError> {
    let Some(paths) = batch.column_by_name("path").and_then(|c| c.as_any().downcast_ref::<StringArray>()) else {
        return Ok(batch.clone());
    };
    let shown: Vec<Option<std::borrow::Cow<'_, str>>> = paths.iter().map(|p| p.and_then(&show)).collect();
    let rewritten = match shown.iter().any(|p| matches!(p, Some(std::borrow::Cow::Owned(_)))) {
        false => batch.clone(),
        true => {
            let schema = batch.schema();
            let mut columns = batch.columns().to_vec();
            let new_paths: StringArray = shown.iter().map(|p| p.as_deref()).collect();
            if let Ok(i) = schema.index_of(crate::schema::SOURCE) {
                let sources: StringArray =
                    shown.iter().map(|p| p.as_deref().map(crate::record::source_of_path)).collect();
                columns[i] = std::sync::Arc::new(sources);
            }
            columns[schema.index_of("path")?] = std::sync::Arc::new(new_paths);
            RecordBatch::try_new(schema, columns)?
        }
    };
    if shown.iter().all(Option::is_some) {
        return Ok(rewritten);
    }
    let mask: arrow_array::BooleanArray = shown.iter().map(|p| Some(p.is_some())).collect();
    Ok(arrow_select::filter::filter_record_batch(&rewritten, &mask)?)
}
