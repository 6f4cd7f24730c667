//! `ctxd ls-files [PATH] [--config FILE] [--explain]`: the files a source indexes, or with
//! `--explain` every file under it with the rule that skips it ([`ctxd_stages::explain`]: the
//! index folder, hidden, the `.gitignore` file, line and pattern, a secret or binary name, the
//! source's globs, too large, binary content). Object-storage sources are listed by the daemon,
//! not here.

use std::path::Path;

use anyhow::{bail, Result};
use ctxd_stages::explain;
use ctxd_stages::load::LoadConfig;
use ctxd_stages::select::Selector;
use ctxd_stages::watch::Scanner;

use crate::model_args::ModelArgs;
use crate::open::build_config;

/// Prints the files of each folder source of the config (or of `path` alone).
pub async fn ls_files(path: Option<&Path>, config: Option<&Path>, explained: bool, json: bool) -> Result<()> {
    let root = match (path, config) {
        (Some(p), None) => Some(p.to_path_buf()),
        (None, None) => Some(std::env::current_dir()?),
        (_, Some(_)) => None,
    };
    let cfg = build_config(config, root.as_deref(), None, &ModelArgs::default())?;
    let load = LoadConfig {
        max_file_bytes: cfg.source.max_file_bytes,
        stream_threshold_bytes: cfg.source.stream_threshold_bytes,
    };
    let excludes = vec![cfg.index.db.clone()];
    // With a config, PATH narrows the listing to a folder or file under a source.
    let under = path.filter(|_| config.is_some()).map(std::path::absolute).transpose()?;
    let mut rows = Vec::new();
    for src in cfg.sources() {
        if src.is_object_store() {
            eprintln!("ls-files: {} is object storage; its listing is the daemon's (skipped)", src.root.display());
            continue;
        }
        if !src.root.is_dir() {
            bail!("{} is not a readable directory: fix the source's root", src.root.display());
        }
        let scanner = Scanner::new(&src.root, excludes.clone()).with_selector(Selector::new(
            &src.name,
            &src.include,
            &src.exclude,
        )?);
        let inside = under.as_ref().filter(|u| u.starts_with(scanner.root()) || u.starts_with(&src.root)).cloned();
        if under.is_some() && inside.is_none() {
            continue;
        }
        let (scan, cfg_load) = (scanner.clone(), load.clone());
        let found = tokio::task::spawn_blocking(move || explain(&scan, &cfg_load, inside.as_deref())).await?;
        for (rel, verdict) in found {
            rows.push((scanner.selector().qualify(&rel), verdict));
        }
    }
    let indexed = rows.iter().filter(|(_, v)| v.indexed()).count();
    if json {
        let list: Vec<_> = rows
            .iter()
            .filter(|(_, v)| explained || v.indexed())
            .map(|(p, v)| serde_json::json!({"path": p, "indexed": v.indexed(), "why": v.describe()}))
            .collect();
        println!("{}", serde_json::json!({ "files": list, "indexed": indexed, "seen": rows.len() }));
    } else {
        for (p, v) in &rows {
            match (explained, v.indexed()) {
                (false, true) => println!("{p}"),
                (false, false) => {}
                (true, _) => println!("{p}\t{}", v.describe()),
            }
        }
    }
    eprintln!("ls-files: {} files seen, {indexed} indexed, {} skipped", rows.len(), rows.len() - indexed);
    Ok(())
}
