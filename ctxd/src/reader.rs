//! `ctxd serve --role reader`: how the binary opens the index for reading (its model from the
//! command line or the recorded spec), handed to `ctxd_roles::reader`, which waits for the
//! index and follows its commits.

use std::path::Path;
use std::sync::Arc;

use anyhow::Result;
use ctxd_roles::reader::{Opening, Reopen};

use crate::cli::ModelArgs;
use crate::open::{open_read, Opened};

/// Opens the index at `db` for serving, waiting until the writer has created it.
pub async fn open(db: &Path, model: &ModelArgs) -> Result<Opened> {
    let opening = || async {
        open_read(db, model, true).await.map_err(|e| {
            if is_missing(&e) {
                Opening::Missing
            } else {
                Opening::Failed(e.into())
            }
        })
    };
    Ok(ctxd_roles::reader::wait_for_index(db, opening).await?)
}

fn is_missing(e: &anyhow::Error) -> bool {
    e.chain()
        .any(|c| matches!(c.downcast_ref::<ctxd_index::IndexError>(), Some(ctxd_index::IndexError::Missing { .. })))
        || e.to_string().starts_with("no index at ")
}

/// Opens the active table again with the model the switch recorded (not a `--model` given for
/// the old table).
pub fn reopen(db: &Path, model: &ModelArgs) -> Reopen {
    let (db, recorded) = (db.to_path_buf(), ModelArgs { model: None, ..model.clone() });
    Arc::new(move || {
        let (db, recorded) = (db.clone(), recorded.clone());
        Box::pin(async move { open_read(&db, &recorded, true).await.map(|o| o.searcher).map_err(Into::into) })
    })
}
