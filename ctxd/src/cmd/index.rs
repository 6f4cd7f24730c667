//! `ctxd index`: one pass of the pipeline over a folder or bucket, then a summary. While it works,
//! its progress (files done of those found, chunks, rates, time left:
//! [`ctxd_pipeline::progress`]) is shown on stderr — a live line on a terminal, a log line every
//! 5 s otherwise (`CTXD_PROGRESS_MS`); stdout keeps only the summary (`--json` unchanged).

use std::io::IsTerminal;
use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use ctxd_pipeline::pipeline::Pipeline;
use ctxd_pipeline::progress::ProgressHandle;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::model_args::ModelArgs;
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
    let shown = show_progress(running.progress());
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

/// A run's progress on stderr until [`Shown::finish`].
struct Shown {
    task: tokio::task::JoinHandle<()>,
    bar: Option<ProgressBar>,
}

impl Shown {
    fn finish(self) {
        self.task.abort();
        if let Some(bar) = self.bar {
            bar.finish_and_clear();
        }
    }
}

/// On a terminal, a live line (spinner until the total is known, then a bar) redrawn 4 times a
/// second; otherwise a log line every 5 s (`CTXD_PROGRESS_MS` sets another interval; none for a
/// run that ends sooner).
fn show_progress(progress: ProgressHandle) -> Shown {
    if !std::io::stderr().is_terminal() {
        let every = std::env::var("CTXD_PROGRESS_MS").ok().and_then(|v| v.parse().ok()).unwrap_or(5000).max(50);
        let task = tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(every)).await;
                tracing::info!("indexing: {}", progress.read().describe());
            }
        });
        return Shown { task, bar: None };
    }
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr_with_hz(4));
    bar.set_style(ProgressStyle::with_template("{spinner} [{elapsed_precise}] {wide_msg}").expect("progress template"));
    let shown = bar.clone();
    let task = tokio::spawn(async move {
        let mut counted = false;
        loop {
            let p = progress.read();
            if p.scan_done && !counted {
                counted = true;
                bar.set_style(
                    ProgressStyle::with_template("[{elapsed_precise}] {bar:30} {wide_msg}")
                        .expect("progress template")
                        .progress_chars("=> "),
                );
            }
            bar.set_length(p.files_seen);
            bar.set_position(p.files_done);
            bar.set_message(p.describe());
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    });
    Shown { task, bar: Some(shown) }
}
