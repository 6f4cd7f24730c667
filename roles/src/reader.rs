//! The reading side of `ctxd serve --role reader`: a stateless process that serves queries
//! from an index another process writes (local or `s3://`), following its commits.
//!
//! * **Opening.** The reader waits for the index to exist (the writer creates it on its first
//!   start), then opens it like `ctxd search --db` does: the active table, and its model (the
//!   spec `ctxd reembed` recorded, else the model id in the table; `--model` overrides).
//! * **Following.** Every `[server] reader_poll_ms` it reads the latest version of the active
//!   table. A newer one is opened as a pinned view (`Snapshots::at`: the chunks table checked out
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

use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use ctxd_index::metrics as m;
use ctxd_index::store::Index;
use ctxd_search::searcher::Searcher;
use futures::future::BoxFuture;

use crate::error::{Injected, RoleError};

/// What opening an index for reading gave: the index is not there yet (the writer creates it on
/// its first start), or another failure.
#[derive(Debug)]
pub enum Opening {
    Missing,
    Failed(Injected),
}

/// Opens the index at `db` with `open` (the binary's: the active table and its model), waiting
/// (and saying so every 10 s) until the writer has created it.
pub async fn wait_for_index<T, F, Fut>(db: &Path, open: F) -> Result<T, RoleError>
where
    F: Fn() -> Fut,
    Fut: Future<Output = Result<T, Opening>>,
{
    let started = std::time::Instant::now();
    let mut said = Duration::ZERO;
    loop {
        match open().await {
            Ok(opened) => return Ok(opened),
            Err(Opening::Missing) => {
                if started.elapsed() >= said {
                    tracing::info!(db = %db.display(), "reader: no index yet; waiting for the writer to create it");
                    eprintln!("ctxd: waiting for the writer to create the index at {}", db.display());
                    said += Duration::from_secs(10);
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(Opening::Failed(e)) => return Err(RoleError::Open(e)),
        }
    }
}

/// Opens the active table again with the model a re-embedding recorded (the binary's), giving a
/// searcher on it.
pub type Reopen = Arc<dyn Fn() -> BoxFuture<'static, Result<Searcher, Injected>> + Send + Sync>;

/// Follows the commits of the index at `db` into `searcher` every `every`, until `stop`;
/// `reopen` loads the new table and model when a re-embedding switched them.
pub async fn follow(
    db: &Path,
    searcher: Searcher,
    every: Duration,
    mut stop: tokio::sync::oneshot::Receiver<()>,
    reopen: Reopen,
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
        match step(&uri, &searcher, &mut probe, served, &reopen).await {
            Ok(Some(version)) => served = version,
            Ok(None) => {}
            Err(e) => {
                metrics::counter!(m::READER_ERRORS_TOTAL).increment(1);
                tracing::warn!(db = %uri, "reader: checking for a new version failed (still serving version {served}): {e}");
                probe = None;
            }
        }
    }
}

/// One check: switches `searcher` to a newer version (or a new active table) and returns its
/// version; `None` when the served one is the latest.
pub async fn step(
    uri: &str,
    searcher: &Searcher,
    probe: &mut Option<Index>,
    served: u64,
    reopen: &Reopen,
) -> Result<Option<u64>, RoleError> {
    let active = ctxd_index::active::current_table(uri).await?;
    if active != searcher.current().index().table_name() {
        tracing::info!(table = %active, "reader: the active table changed (a re-embedding switched models); loading it");
        let opened = reopen().await.map_err(RoleError::Open)?;
        let index = opened.index();
        searcher.switch(index.clone(), opened.current().retriever().embed().cloned());
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
    let (latest, committed) = probe.snapshots().version_committed().await?;
    if latest == served {
        metrics::gauge!(m::READER_LAG_SECONDS).set(0.0);
        return Ok(None);
    }
    let view = probe.snapshots().at(latest).await?;
    searcher.switch(Arc::new(view), searcher.current().retriever().embed().cloned());
    let lag = (chrono::Utc::now() - committed).num_milliseconds().max(0) as f64 / 1000.0;
    metrics::gauge!(m::READER_LAG_SECONDS).set(lag);
    metrics::gauge!(m::READER_VERSION).set(latest as f64);
    metrics::counter!(m::READER_SWITCHES_TOTAL).increment(1);
    tracing::debug!(version = latest, lag_s = lag, "reader: serving a new version");
    Ok(Some(latest))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ctxd_index::{record::Chunk, schema::ChunkRow, writer::CommitBatch};

    /// Chunk `c{i}` of file `f{i}.txt` with a distinct 8-dimensional vector (model `m`).
    fn row(i: usize) -> ChunkRow {
        let mut vector = vec![0.0f32; 8];
        vector[i % 8] = 1.0;
        ChunkRow {
            chunk: Chunk {
                chunk_id: format!("c{i}"),
                path: format!("f{i}.txt"),
                language: "text".into(),
                start_line: 1,
                end_line: 1,
                content: format!("file number {i}"),
                content_hash: format!("h{i}"),
                token_count: 3,
                ..Chunk::default()
            },
            embed_key: format!("k{i}"),
            file_hash: format!("fh{i}"),
            vector,
            model: "m".into(),
            late: Vec::new(),
        }
    }

    fn never() -> Reopen {
        Arc::new(|| Box::pin(async { Err::<Searcher, Injected>("no model switch in this test".into()) }))
    }

    #[tokio::test]
    async fn a_reader_moves_to_each_committed_version_and_stays_when_there_is_none() {
        let dir = tempfile::tempdir().unwrap();
        let uri = dir.path().join("db").to_string_lossy().into_owned();
        let writer = Index::open_or_create(&uri, "m", 8).await.unwrap();
        writer.writes().commit(CommitBatch { rows: vec![row(1)], ..Default::default() }).await.unwrap();
        let searcher = Searcher::new(Arc::new(Index::open(&uri).await.unwrap()), None);
        let served = searcher.index().version().await.unwrap();
        let mut probe = None;
        assert_eq!(step(&uri, &searcher, &mut probe, served, &never()).await.unwrap(), None, "nothing new");

        writer.writes().commit(CommitBatch { rows: vec![row(2)], ..Default::default() }).await.unwrap();
        let latest = writer.version().await.unwrap();
        assert!(latest > served);
        let moved = step(&uri, &searcher, &mut probe, served, &never()).await.unwrap();
        assert_eq!(moved, Some(latest), "the reader serves the version the writer committed");
        assert_eq!(searcher.index().version().await.unwrap(), latest);
        assert_eq!(searcher.index().reads().stats().await.unwrap().rows, 2, "the new rows are read");
        assert_eq!(step(&uri, &searcher, &mut probe, latest, &never()).await.unwrap(), None);
    }

    #[tokio::test]
    async fn waiting_for_the_index_ends_when_it_opens_and_a_failure_is_said() {
        let dir = tempfile::tempdir().unwrap();
        let tries = std::sync::atomic::AtomicUsize::new(0);
        let opened = wait_for_index(dir.path(), || async {
            match tries.fetch_add(1, std::sync::atomic::Ordering::SeqCst) {
                0 | 1 => Err(Opening::Missing),
                n => Ok(n),
            }
        })
        .await
        .unwrap();
        assert_eq!(opened, 2, "missing twice, then opened");
        let failed = wait_for_index(dir.path(), || async { Err::<(), _>(Opening::Failed("disk on fire".into())) })
            .await
            .unwrap_err();
        assert!(matches!(failed, RoleError::Open(_)) && failed.to_string().contains("disk on fire"), "{failed}");
    }
}
