//! `ctxd index --shard I/N` and `ctxd index --commit`: a sharded first build. Each shard runs
//! the pipeline over its share of the sources into uncommitted fragments
//! (`ctxd_pipeline`'s `build` module); the commit publishes them ([`ctxd_index::build_shard`]),
//! as the writer (it takes the lease), then builds the full-text index and runs one maintenance
//! pass (compaction, the vector index once there are enough rows) as a `ctxd index` run would.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use ctxd_config::Config;
use ctxd_pipeline::pipeline::Pipeline;
use ctxd_pipeline::reembed::Shard;

use crate::open::termination;

/// Runs shard `shard` of the build of `cfg`'s index and records it.
pub async fn shard(cfg: Config, shard: Shard, json: bool) -> Result<()> {
    let started = Instant::now();
    let db = cfg.index.db.clone();
    let pipeline = Pipeline::open_shard(cfg, shard)
        .await
        .with_context(|| format!("opening index {} as shard {shard}", db.display()))?;
    let (kill, shutdown) = tokio::sync::watch::channel(false);
    let running = pipeline.run(false, shutdown)?;
    // Ctrl-C / SIGTERM stop the shard: what it wrote is not recorded (run it again).
    let stopped = Arc::new(AtomicBool::new(false));
    let stop = stopped.clone();
    tokio::spawn(async move {
        termination().await;
        tracing::info!("stopping shard {shard}: nothing is recorded");
        stop.store(true, Ordering::SeqCst);
        let _ = kill.send(true);
    });
    let shown = crate::cmd::progress::show(running.progress());
    let summary = running.join().await;
    shown.finish();
    let summary = summary?;
    if stopped.load(Ordering::SeqCst) {
        bail!("shard {shard} was stopped before its share was done; nothing was recorded: run it again");
    }
    let written = pipeline.record_shard().await?;
    let seconds = started.elapsed().as_secs_f64();
    if json {
        let out = serde_json::json!({
            "shard": shard.to_string(), "seconds": seconds, "files_seen": summary.files_seen,
            "files_indexed": summary.files_indexed, "files_skipped": summary.files_skipped,
            "files_failed": summary.files_failed, "chunks_embedded": summary.chunks_embedded, "written": written,
        });
        println!("{out}");
    } else {
        println!(
            "shard {shard} of {} in {seconds:.1}s: {} files of its share indexed ({} skipped, {} failed); {} chunks, {} \
             definitions, {} edges in {} uncommitted fragment(s); {} objects recorded; publish with `ctxd index --commit`",
            db.display(),
            summary.files_indexed,
            summary.files_skipped,
            summary.files_failed,
            written.chunks,
            written.symbols,
            written.edges,
            written.fragments,
            written.objects,
        );
    }
    Ok(())
}

/// Publishes the newest run of shards of `cfg`'s index, as its writer, then builds its indexes.
pub async fn commit(cfg: Config, json: bool) -> Result<()> {
    let started = Instant::now();
    let uri = crate::open::existing_db(&cfg.index.db)?;
    let lease = crate::open::writer_lease(&cfg, "ctxd index --commit").await?;
    crate::open::exit_when_lease_lost(&lease);
    let done = async {
        let index = ctxd_index::store::Index::open(&uri).await?;
        let published = ctxd_index::build_shard::publish(&index).await?;
        let publish_seconds = started.elapsed().as_secs_f64();
        index.maintenance().build_fts().await?;
        let opts = ctxd_index::maintenance::MaintenanceOptions { single_writer: false, ..cfg.index.maintenance() };
        let upkeep = index.maintenance().maintain(&opts).await?;
        anyhow::Ok((published, publish_seconds, upkeep, index.version().await?))
    };
    let result = done.await;
    lease.release().await;
    let (published, publish_seconds, upkeep, version) = result?;
    let seconds = started.elapsed().as_secs_f64();
    if json {
        let out = serde_json::json!({
            "published": published, "publish_seconds": publish_seconds, "seconds": seconds,
            "vector_index_built": upkeep.vector_index_built, "version": version,
        });
        println!("{out}");
    } else if published.shards == 0 {
        println!("nothing was staged: {uri} holds a published build already (indexes checked in {seconds:.1}s)");
    } else {
        println!(
            "published {} shards into {uri} in {publish_seconds:.1}s ({} chunks, {} definitions, {} edges in {} \
             fragments; {} objects recorded for the writer); indexes built in {:.1}s; version {version}",
            published.shards,
            published.chunks,
            published.symbols,
            published.edges,
            published.fragments,
            published.objects,
            seconds - publish_seconds,
        );
    }
    Ok(())
}
