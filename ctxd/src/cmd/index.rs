//! `ctxd index`: one pass of the pipeline over a folder or bucket, then a summary. While it works,
//! its progress (files done of those found, chunks, rates, time left:
//! [`ctxd_pipeline::progress`]) is shown on stderr — a live line on a terminal, a log line every
//! 5 s otherwise (`CTXD_PROGRESS_MS`); stdout keeps only the summary (`--json` unchanged).

use std::path::Path;

use anyhow::{bail, Context, Result};
use ctxd_pipeline::pipeline::Pipeline;

use crate::model_args::ModelArgs;
use crate::open::{build_config, termination};

/// What `ctxd index` reads and writes, and how it reports.
pub struct Run<'a> {
    pub path: Option<&'a Path>,
    pub db: Option<&'a Path>,
    pub config: Option<&'a Path>,
    pub no_embed: bool,
    pub json: bool,
}

/// Which part of a sharded first build this run is (none: the whole build, or an update).
#[derive(Debug, Clone, clap::Args)]
pub struct BuildStep {
    /// Sharded first build: index only shard I of N (0-based; a file's shard is the hash of its
    /// stored path) into uncommitted fragments, recorded for `--commit`. Run I = 0..N-1 anywhere,
    /// in parallel, on an empty index; a shard that died is simply run again.
    #[arg(long, value_name = "I/N", conflicts_with = "commit")]
    pub shard: Option<ctxd_pipeline::reembed::Shard>,
    /// Sharded first build: publish every shard's fragments in one commit per table, then build
    /// the indexes (refused, naming them, while shards have not recorded their share).
    #[arg(long)]
    pub commit: bool,
}

pub async fn run(run: Run<'_>, model: &ModelArgs, step: BuildStep) -> Result<()> {
    let Run { path, db, config, no_embed, json } = run;
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
    match (step.shard, step.commit) {
        (Some(shard), _) => return crate::cmd::build::shard(cfg, shard, json).await,
        (None, true) => return crate::cmd::build::commit(cfg, json).await,
        (None, false) => {}
    }
    let db = cfg.index.db.clone();
    let adapt = cfg.index.adapt && cfg.source.embed;
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
    crate::open::exit_when_lease_lost(&lease);
    let pipeline = Pipeline::open(cfg).await.with_context(|| format!("opening index {}", db.display()))?;
    let (kill, shutdown) = tokio::sync::watch::channel(false);
    let running = pipeline.run(false, shutdown)?;
    // Ctrl-C / SIGTERM stop the scan; what is in flight is still committed.
    tokio::spawn(async move {
        termination().await;
        tracing::info!("stopping: draining in-flight files");
        let _ = kill.send(true);
    });
    let shown = crate::cmd::progress::show(running.progress());
    let summary = running.join().await;
    shown.finish();
    // The query adapter, fitted on the history this run recorded (while the lease is held).
    let adapted = match (&summary, adapt) {
        (Ok(_), true) => crate::cmd::adapt::after_index(&db, model).await,
        _ => Ok(()),
    };
    lease.release().await;
    let summary = summary?;
    adapted?;
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
