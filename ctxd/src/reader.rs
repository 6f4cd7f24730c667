//! The reading side of `ctxd serve --role reader`: a stateless process that serves queries
//! from an index another process writes (local or `s3://`), following its commits.
//!
//! * **Opening.** The reader waits for the index to exist (the writer creates it on its first
//!   start), then opens it like `ctxd search --db` does: the active table, and its model (the
//!   spec `ctxd reembed` recorded, else the model id in the table; `--model` overrides).
//! * **Following.** Every `[server] reader_poll_ms` it reads the latest version of the active
//!   table. A newer one is opened as a pinned view (`Index::at`: the chunks table checked out
//!   at that version, the symbols and edges tables as they were when it was committed) and
//!   swapped in with [`Searcher::switch`]: requests in flight finish on the version they
//!   started with, the next ones see the new one, and no request ever reads a version that is
//!   still being written (a LanceDB version exists only once its manifest is committed).
//!   `ctxd_index_reader_lag_seconds` is the time from that commit to the switch.
//! * **Model switches.** When `ctxd reembed` switched the active table, the reader loads the
//!   recorded model and the new table and swaps both at once.
//! * **Failures** (the bucket unreachable, a version cleaned up between check and open) are
//!   logged and counted (`ctxd_index_reader_errors_total`); the reader keeps serving the last
//!   version it opened and tries again at the next tick.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use ctxd_index::metrics as m;
use ctxd_index::Index;
use ctxd_serve::Searcher;

use crate::cli::ModelArgs;
use crate::open::{open_read, Opened};

/// Opens the index at `db` for serving, waiting (and saying so every 10 s) until the writer has
/// created it.
pub async fn open(db: &Path, model: &ModelArgs) -> Result<Opened> {
    let started = std::time::Instant::now();
    let mut said = Duration::ZERO;
    loop {
        match open_read(db, model, true).await {
            Ok(opened) => return Ok(opened),
            Err(e) if is_missing(&e) => {
                if started.elapsed() >= said {
                    tracing::info!(db = %db.display(), "reader: no index yet; waiting for the writer to create it");
                    eprintln!("ctxd: waiting for the writer to create the index at {}", db.display());
                    said += Duration::from_secs(10);
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(e) => return Err(e),
        }
    }
}

fn is_missing(e: &anyhow::Error) -> bool {
    e.chain().any(|c| matches!(c.downcast_ref::<ctxd_index::IndexError>(), Some(ctxd_index::IndexError::Missing { .. })))
        || e.to_string().starts_with("no index at ")
}

/// Follows the commits of the index at `db` into `searcher` every `every`, until `stop`.
pub async fn follow(
    db: PathBuf,
    model: ModelArgs,
    searcher: Searcher,
    every: Duration,
    mut stop: tokio::sync::oneshot::Receiver<()>,
) {
    let uri = db.to_string_lossy().into_owned();
    let mut probe: Option<Index> = None;
    let mut served = searcher.index().version().await.unwrap_or(0);
    metrics::gauge!(m::READER_VERSION).set(served as f64);
    metrics::gauge!(m::READER_LAG_SECONDS).set(0.0);
    loop {
        tokio::select! {
            _ = &mut stop => return,
            _ = tokio::time::sleep(every) => {}
        }
        match step(&uri, &db, &model, &searcher, &mut probe, served).await {
            Ok(Some(version)) => served = version,
            Ok(None) => {}
            Err(e) => {
                metrics::counter!(m::READER_ERRORS_TOTAL).increment(1);
                tracing::warn!(db = %uri, "reader: checking for a new version failed (still serving version {served}): {e:#}");
                probe = None;
            }
        }
    }
}

/// One check: switches to a newer version (or a new active table) and returns its version.
async fn step(
    uri: &str,
    db: &Path,
    model: &ModelArgs,
    searcher: &Searcher,
    probe: &mut Option<Index>,
    served: u64,
) -> Result<Option<u64>> {
    let active = ctxd_index::active::current_table(uri).await?;
    if active != searcher.current().index().table_name() {
        tracing::info!(table = %active, "reader: the active table changed (a re-embedding switched models); loading it");
        // The model the switch recorded, not a --model given for the old table.
        let recorded = ModelArgs { model: None, ..model.clone() };
        let opened = open_read(db, &recorded, true).await?;
        let index = opened.searcher.index();
        searcher.switch(index.clone(), opened.searcher.current().retriever().embed().cloned());
        *probe = None;
        let version = index.version().await?;
        metrics::counter!(ctxd_pipeline::metrics::MODEL_SWITCHES_TOTAL).increment(1);
        metrics::gauge!(m::READER_VERSION).set(version as f64);
        return Ok(Some(version));
    }
    if probe.as_ref().is_none_or(|p| p.table_name() != active) {
        *probe = Some(Index::open(uri).await?);
    }
    let probe = probe.as_ref().expect("opened above");
    probe.refresh().await?;
    let (latest, committed) = probe.version_committed().await?;
    if latest == served {
        metrics::gauge!(m::READER_LAG_SECONDS).set(0.0);
        return Ok(None);
    }
    let view = probe.at(latest).await?;
    searcher.switch(Arc::new(view), searcher.current().retriever().embed().cloned());
    let lag = (chrono::Utc::now() - committed).num_milliseconds().max(0) as f64 / 1000.0;
    metrics::gauge!(m::READER_LAG_SECONDS).set(lag);
    metrics::gauge!(m::READER_VERSION).set(latest as f64);
    metrics::counter!(m::READER_SWITCHES_TOTAL).increment(1);
    tracing::debug!(version = latest, lag_s = lag, "reader: serving a new version");
    Ok(Some(latest))
}
