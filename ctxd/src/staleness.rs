//! The `check_index` tool of MCP (stdio `ctxd mcp` and the daemon's `POST /mcp`): which files
//! of the root changed since the index's last commit, and an optional one-shot refresh.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use anyhow::Result;
use ctxd_config::Config;
use ctxd_index::store::Index;
use ctxd_pipeline::pipeline::Pipeline;
use ctxd_search::searcher::Searcher;
use ctxd_serve::mcp::CheckIndex;
use ctxd_stages::watch::Scanner;
use serde_json::{json, Value};

/// Changed files listed at most (the counts are always complete).
const MAX_LISTED: usize = 50;

/// Files of `root` changed since the index's last commit: (modified, added, removed).
pub(crate) async fn stale_files(
    index: &Index,
    root: &Path,
    db: &Path,
) -> Result<(Vec<String>, Vec<String>, Vec<String>, Value)> {
    let snaps = index.snapshots().list().await?;
    let last = snaps.last();
    let committed: Option<SystemTime> = last
        .and_then(|s| chrono::DateTime::parse_from_rfc3339(&s.timestamp).ok())
        .map(|t| SystemTime::UNIX_EPOCH + Duration::from_millis(t.timestamp_millis().max(0) as u64));
    let indexed = index.reads().file_hashes().await?;
    let scanner = Scanner::new(root.to_path_buf(), vec![db.to_path_buf()]);
    let on_disk = tokio::task::spawn_blocking(move || {
        let mut files = Vec::new();
        scanner.scan(|f| {
            let mtime = std::fs::metadata(&f.abs).and_then(|m| m.modified()).ok();
            files.push((f.rel, mtime));
            true
        });
        files
    })
    .await?;
    let mut modified = Vec::new();
    let mut added = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for (rel, mtime) in on_disk {
        if indexed.contains_key(&rel) {
            if let (Some(m), Some(c)) = (mtime, committed) {
                if m > c {
                    modified.push(rel.clone());
                }
            }
        } else {
            added.push(rel.clone());
        }
        seen.insert(rel);
    }
    let mut removed: Vec<String> = indexed.keys().filter(|p| !seen.contains(*p)).cloned().collect();
    modified.sort();
    added.sort();
    removed.sort();
    let head = json!({
        "version": last.map(|s| s.version), "last_commit": last.map(|s| s.timestamp.clone()),
        "files_indexed": indexed.len(), "chunks": last.map(|s| s.rows),
    });
    Ok((modified, added, removed, head))
}

fn listed(v: &[String]) -> Value {
    json!(v.iter().take(MAX_LISTED).collect::<Vec<_>>())
}

/// The `check_index` tool. `refresh` re-indexes the root once (one-shot pipeline) when
/// `cfg` is given; a daemon passes `None` (its watcher is already indexing every change).
pub fn checker(searcher: Searcher, root: PathBuf, db: PathBuf, refresh_with: Option<Config>) -> CheckIndex {
    Arc::new(move |refresh: bool| {
        // The latest index each time (a daemon may have switched models since).
        let (index, root, db, cfg) = (searcher.index(), root.clone(), db.clone(), refresh_with.clone());
        Box::pin(async move {
            let run = async {
                let (modified, added, removed, head) = stale_files(&index, &root, &db).await?;
                let stale = modified.len() + added.len() + removed.len();
                let mut report = json!({
                    "index": head, "root": root.display().to_string(), "stale": stale > 0,
                    "modified": modified.len(), "added": added.len(), "removed": removed.len(),
                    "modified_files": listed(&modified), "added_files": listed(&added), "removed_files": listed(&removed),
                });
                if refresh && stale > 0 {
                    match cfg {
                        // Refused while a daemon writes the index (it keeps it fresh itself).
                        Some(cfg) => match crate::open::writer_lease(&cfg, "ctxd mcp (check_index refresh)").await {
                            Ok(lease) => {
                                let pipeline = Pipeline::open(cfg).await?;
                                let (_kill, shutdown) = tokio::sync::watch::channel(false);
                                let summary = pipeline.run(false, shutdown)?.join().await?;
                                lease.release().await;
                                report["refreshed"] = serde_json::to_value(&summary)?;
                            }
                            Err(e) => report["refreshed"] = json!(format!("not refreshed: {e:#}")),
                        },
                        None => {
                            report["refreshed"] = json!("the daemon watching this root indexes changes as they happen")
                        }
                    }
                }
                anyhow::Ok(report)
            };
            run.await.map_err(Into::into)
        })
    })
}
