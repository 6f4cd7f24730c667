//! `ctxd index`: one pass of the pipeline over a folder or bucket, then a summary.

use std::path::Path;

use anyhow::{bail, Context, Result};
use ctxd_pipeline::engine::Engine;

use crate::cli::ModelArgs;
use crate::open::{build_config, termination};

pub async fn run(
    path: Option<&Path>,
    db: Option<&Path>,
    config: Option<&Path>,
    no_embed: bool,
    model: &ModelArgs,
    json: bool,
) -> Result<()> {
    if config.is_none() && (path.is_none() || db.is_none()) {
        bail!("nothing to index: pass PATH and --db <DIR>, or --config <FILE> naming its sources and [index] db");
    }
    let mut cfg = build_config(config, path, db, model)?;
    if path.is_some() && cfg.has_named_sources() {
        bail!("the config names its sources ([[source]]): drop PATH, or index a folder without the config");
    }
    if no_embed {
        cfg.source.embed = false;
    }
    let db = cfg.index.db.clone();
    let what: Vec<String> = cfg
        .sources()
        .iter()
        .map(|s| {
            if s.name.is_empty() {
                s.root.display().to_string()
            } else {
                format!("{} ({})", s.name, s.root.display())
            }
        })
        .collect();
    let lease = crate::open::writer_lease(&cfg, "ctxd index").await?;
    let engine = Engine::open(cfg).await.with_context(|| format!("opening index {}", db.display()))?;
    let (kill, shutdown) = tokio::sync::watch::channel(false);
    let running = engine.run(false, shutdown)?;
    // Ctrl-C / SIGTERM stop the scan; what is in flight is still committed.
    tokio::spawn(async move {
        termination().await;
        tracing::info!("stopping: draining in-flight files");
        let _ = kill.send(true);
    });
    let summary = running.join().await;
    lease.release().await;
    let summary = summary?;
    if json {
        println!("{}", serde_json::to_string(&summary)?);
    } else {
        println!(
            "indexed {} in {:.1}s: {} files seen, {} indexed, {} unchanged, {} removed, {} skipped, {} failed; {} chunks written in {} commits; index has {} chunks at version {}",
            what.join(", "),
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
