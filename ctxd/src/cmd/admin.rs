//! The index's upkeep commands: `ctxd snapshots`, `ctxd snapshot tag|untag`, `ctxd compact`,
//! and `ctxd config validate`.

use std::path::Path;

use anyhow::Result;

use crate::open::open_index;

pub async fn snapshots(db: &Path, json: bool) -> Result<()> {
    let snaps = open_index(db).await?.snapshots().list().await?;
    if json {
        println!("{}", serde_json::json!({ "snapshots": snaps }));
        return Ok(());
    }
    println!("{:>8}  {:<24}  {:>10}  tags", "version", "time (UTC)", "rows");
    for s in snaps {
        println!("{:>8}  {:<24}  {:>10}  {}", s.version, s.timestamp, s.rows, s.tags.join(", "));
    }
    Ok(())
}

/// `ctxd snapshot tag NAME [--version V]`: names a version so cleanup keeps it.
pub async fn tag(db: &Path, name: &str, version: Option<u64>) -> Result<()> {
    let index = open_index(db).await?;
    let v = index.snapshots().tag(name, version).await?;
    println!("tagged version {v} of {} as '{name}'", db.display());
    Ok(())
}

/// `ctxd snapshot untag NAME`.
pub async fn untag(db: &Path, name: &str) -> Result<()> {
    open_index(db).await?.snapshots().untag(name).await?;
    println!("removed tag '{name}' from {}", db.display());
    Ok(())
}

/// `ctxd compact`: compaction, old-version cleanup and index upkeep, once, as the only writer.
pub async fn compact(db: &Path, retain_secs: u64, vector_index_min_rows: usize, json: bool) -> Result<()> {
    let index = open_index(db).await?;
    let opts = ctxd_index::maintenance::MaintenanceOptions {
        retain: std::time::Duration::from_secs(retain_secs),
        single_writer: true,
        vector_index_min_rows,
    };
    let r = index.maintenance().maintain(&opts).await?;
    if json {
        println!("{}", serde_json::to_string(&r)?);
    } else {
        println!(
            "versions {} -> {} ({} removed, {} bytes), fragments {} -> {}, vector index {}, \
             full-text segments merged {}",
            r.versions_before,
            r.versions_after,
            r.versions_removed,
            r.bytes_removed,
            r.fragments_before,
            r.fragments_after,
            if r.vector_index_built { "built" } else { "unchanged" },
            r.fts_segments_merged
        );
    }
    Ok(())
}

/// `ctxd config validate FILE`: the file, the environment overrides and every check.
pub fn validate_config(file: &Path) -> Result<()> {
    ctxd_config::Config::load_with_env(Some(file))?;
    println!("{}: ok", file.display());
    Ok(())
}
