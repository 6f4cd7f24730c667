//! `ctxd index`: one pass of the pipeline over a folder or bucket, then a summary.

use std::path::Path;

use anyhow::{Context, Result};
use ctxd_pipeline::Engine;

use crate::cli::ModelArgs;
use crate::open::{build_config, termination};

pub async fn run(
    path: &Path,
    db: &Path,
    config: Option<&Path>,
    no_embed: bool,
    model: &ModelArgs,
    json: bool,
) -> Result<()> {
    let mut cfg = build_config(config, Some(path), Some(db), model)?;
    if no_embed {
        cfg.source.embed = false;
    }
    let engine = Engine::open(cfg).await.with_context(|| format!("opening index {}", db.display()))?;
    let (kill, shutdown) = tokio::sync::watch::channel(false);
    let running = engine.run(false, shutdown)?;
    // Ctrl-C / SIGTERM stop the scan; what is in flight is still committed.
    tokio::spawn(async move {
        termination().await;
        tracing::info!("stopping: draining in-flight files");
        let _ = kill.send(true);
    });
    let summary = running.join().await?;
    if json {
        println!("{}", serde_json::to_string(&summary)?);
    } else {
        println!(
            "indexed {} in {:.1}s: {} files seen, {} indexed, {} unchanged, {} removed, {} skipped, {} failed; {} chunks written in {} commits; index has {} chunks at version {}",
            path.display(),
            summary.seconds,
            summary.files_seen,
            summary.files_indexed,
            summary.files_unchanged,
            summary.files_removed,
            summary.files_skipped,
            summary.files_failed,
            summary.chunks_written,
            summary.commits,
            summary.index_rows,
            summary.index_version
        );
    }
    Ok(())
}
