//! The upsert stage: batches of embedded files and removals → one LanceDB commit each.
//!
//! A batch is deduplicated by path (the last state of a file wins), written with
//! [`Writes::commit`] (new chunks and the deletion of stale ones in a single version), retried
//! with back-off on failure, and only then recorded in the shared [`FileState`]. A batch that
//! cannot be committed leaves the index exactly as it was: nothing already indexed is lost.
//! A sharded build's shard writes each batch as uncommitted fragments instead
//! ([`Publish::Stage`], `ctxd_index::build_shard`).

pub mod stage;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use ctxd_index::build_shard::ShardBuild;
use ctxd_index::{store::Index, writer::CommitBatch, writer::CommitStats};

use crate::chunk::Part;
use crate::embed::EmbeddedFile;
use crate::metrics as m;
use crate::{error::StageError, state::FileState, FileWork};

/// Commit attempts before a batch is given up (and counted as an error).
const ATTEMPTS: u32 = 3;

/// (path, hash) of a streamed file → (parts committed, part count once the last part is seen).
type PartCounts = HashMap<(String, String), (u32, Option<u32>)>;

/// Where the upsert stage puts each batch.
#[derive(Clone)]
pub enum Publish {
    /// One commit per batch.
    Commit,
    /// Uncommitted fragments of a sharded build's shard, published by its commit later.
    Stage(Arc<ShardBuild>),
}

/// Writes batches to the index.
#[derive(Clone)]
pub struct Upsert {
    index: Arc<Index>,
    publish: Publish,
    state: FileState,
    /// Streamed files: (path, hash) → (parts committed so far, part count once the last is seen).
    parts: Arc<std::sync::Mutex<PartCounts>>,
}

impl Upsert {
    /// An upsert stage writing to `index` and recording commits in `state`.
    pub fn new(index: Arc<Index>, state: FileState) -> Self {
        Self { index, publish: Publish::Commit, state, parts: Arc::default() }
    }

    /// The same stage writing each batch as a sharded build's shard (`build`) instead.
    pub fn staging(mut self, build: Arc<ShardBuild>) -> Self {
        self.publish = Publish::Stage(build);
        self
    }

    /// Records committed parts of streamed files; returns `(path, hash)` of the files whose
    /// every part is now committed (a last part may be committed before a middle one).
    fn parts_done(&self, parts: &[(String, Part)]) -> Vec<(String, String)> {
        let mut seen = self.parts.lock().unwrap_or_else(|e| e.into_inner());
        let mut done = Vec::new();
        for (path, p) in parts {
            let key = (path.clone(), p.file_hash.clone());
            let entry = seen.entry(key.clone()).or_default();
            entry.0 += 1;
            if p.last {
                entry.1 = Some(p.index + 1);
            }
            if entry.1.is_some_and(|total| entry.0 >= total) {
                seen.remove(&key);
                done.push(key);
            }
        }
        done
    }

    /// Records a committed file (`Some(hash)`) or removal (`None`) in the state.
    fn record(&self, path: &str, hash: Option<&str>) {
        match hash {
            Some(h) => {
                self.state.set(path, h);
                metrics::counter!(m::UPSERT_FILES_TOTAL).increment(1);
            }
            None => {
                self.state.remove(path);
                metrics::counter!(m::UPSERT_REMOVED_TOTAL).increment(1);
            }
        }
    }

    /// Commits `items` as one LanceDB version.
    pub async fn commit(&self, items: Vec<FileWork<EmbeddedFile>>) -> Result<CommitStats, StageError> {
        let mut last: HashMap<String, FileWork<EmbeddedFile>> = HashMap::new();
        let mut parts: Vec<(String, Part)> = Vec::new();
        let mut batch = CommitBatch::default();
        for item in items {
            match item {
                // Parts of a streamed file are appended as they come (never deduplicated).
                FileWork::Update(EmbeddedFile { rel, rows, part: Some(p), .. }) => {
                    if p.index == 0 {
                        batch.stream_starts.push((rel.clone(), p.file_hash.clone()));
                    }
                    batch.rows.extend(rows);
                    parts.push((rel, p));
                }
                item => {
                    let path = item.rel_path(|f| &f.rel).to_string();
                    last.insert(path, item);
                }
            }
        }
        let files = last.len() + parts.len();
        let mut committed: Vec<(String, Option<String>)> = Vec::new();
        for (path, item) in last {
            match item {
                FileWork::Update(f) => {
                    if self.state.get(&path).is_some() {
                        batch.replace_paths.push(path.clone());
                    }
                    batch.symbols.extend(f.symbols);
                    batch.edges.extend(f.edges);
                    batch.rows.extend(f.rows);
                    committed.push((path, Some(f.file_hash)));
                }
                FileWork::Remove(_) => {
                    batch.delete_paths.push(path.clone());
                    committed.push((path, None));
                }
            }
        }
        let mut attempt = 0;
        let stats = loop {
            attempt += 1;
            let written = match &self.publish {
                Publish::Commit => self.index.writes().commit(batch.clone()).await,
                Publish::Stage(build) => build.write(&batch).await,
            };
            match written {
                Ok(stats) => break stats,
                Err(source) if attempt >= ATTEMPTS => return Err(StageError::Commit { files, source }),
                Err(e) => {
                    metrics::counter!(m::UPSERT_RETRIES_TOTAL).increment(1);
                    tracing::warn!("commit of {files} files failed (attempt {attempt}): {e}");
                    tokio::time::sleep(Duration::from_millis(200 * 2u64.pow(attempt))).await;
                }
            }
        };
        for (path, hash) in committed {
            self.record(&path, hash.as_deref());
        }
        // Streamed files whose every part is in: drop the previous version's rows, mark the
        // new rows complete, and only then record the file as indexed.
        for (path, hash) in self.parts_done(&parts) {
            let finished = match &self.publish {
                Publish::Commit => self.index.writes().finish_stream(&path, &hash).await,
                Publish::Stage(build) => build.finish_stream(&path, &hash).await,
            };
            if let Err(source) = finished {
                return Err(StageError::Commit { files: 1, source });
            }
            self.record(&path, Some(&hash));
        }
        Ok(stats)
    }
}
