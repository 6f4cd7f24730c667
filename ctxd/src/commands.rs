//! `index`, `search`, `eval` and `config`: the one-shot commands.

use std::path::Path;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use ctxd_index::Index;
use ctxd_models::{EmbedService, EmbedServiceConfig, TokenCounter, DEFAULT_MODEL};
use ctxd_pipeline::{Config, Engine};
use ctxd_serve::context::{Assembler, ContextRequest};
use ctxd_serve::eval::{evaluate, evaluate_context, read_queries};
use ctxd_serve::{Mode, SearchRequest, Searcher};

use crate::cli::{Cli, Command, ConfigAction, ModelArgs, SnapshotAction};

/// Dispatches a parsed command line.
pub async fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Index { path, db, config, no_embed, model, json } => {
            index(&path, &db, config.as_deref(), no_embed, &model, json).await
        }
        Command::Search { query, db, k, mode, as_of, no_rerank, model, json } => {
            search(&query, &db, k, &mode, as_of, !no_rerank, &model, json).await
        }
        Command::Context {
            query,
            db,
            budget,
            reserve,
            format,
            candidates,
            max_per_file,
            mode,
            current_file,
            as_of,
            model,
            json,
        } => {
            let mut req = ContextRequest::new(query, budget);
            req.reserve = reserve;
            req.format = format.parse()?;
            req.candidates = candidates;
            req.max_per_file = max_per_file;
            req.mode = mode.parse()?;
            req.current_file = current_file;
            req.as_of = as_of;
            assemble_context(&req, &db, &model, json).await
        }
        Command::Snapshots { db, json } => snapshots(&db, json).await,
        Command::Reembed { db, block_rows, no_switch, vector_index_min_rows, json, model } => {
            crate::reembed::run(&db, &model, block_rows, !no_switch, vector_index_min_rows, json).await
        }
        Command::Compact { db, retain_secs, vector_index_min_rows, json } => {
            let index = open_index(&db).await?;
            let opts = ctxd_index::MaintenanceOptions {
                retain: std::time::Duration::from_secs(retain_secs),
                single_writer: true,
                vector_index_min_rows,
            };
            let r = index.maintain(&opts).await?;
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
        Command::Snapshot { action: SnapshotAction::Tag { name, version, db } } => {
            let index = open_index(&db).await?;
            let v = index.tag(&name, version).await?;
            println!("tagged version {v} of {} as '{name}'", db.display());
            Ok(())
        }
        Command::Snapshot { action: SnapshotAction::Untag { name, db } } => {
            open_index(&db).await?.untag(&name).await?;
            println!("removed tag '{name}' from {}", db.display());
            Ok(())
        }
        Command::Mcp { db, root, config, model } => crate::mcp::run(db, root, config, model).await,
        Command::Symbols { name, db, prefix, limit, json } => symbols(&name, &db, prefix, limit, json).await,
        Command::Serve { config, watch, db, listen, flight_listen, model } => {
            crate::serve::serve(config, watch, db, listen, flight_listen, model).await
        }
        Command::Eval { db, queries, k, mode, context_budgets, model, json } => {
            eval(&db, &queries, k, &mode, &context_budgets, &model, json).await
        }
        Command::Config { action: ConfigAction::Validate { file } } => {
            Config::load_with_env(Some(&file))?;
            println!("{}: ok", file.display());
            Ok(())
        }
        Command::Bench { integrity, max_files, model, .. } if !integrity.is_empty() => {
            crate::bench::integrity(&integrity, max_files, &model)
        }
        Command::Bench { corpus, embed_chunks, skip_e2e, export, model, .. } => {
            crate::bench::run(&corpus, embed_chunks, skip_e2e, export.as_deref(), &model).await
        }
    }
}

/// Opens an existing index (read side).
/// The URI of an existing index at `db` (a local directory must exist).
pub fn existing_db(db: &Path) -> Result<String> {
    let uri = db.to_string_lossy().into_owned();
    if !uri.contains("://") && !db.is_dir() {
        bail!("no index at {}: run `ctxd index <PATH> --db {}` first", db.display(), db.display());
    }
    Ok(uri)
}

async fn open_index(db: &Path) -> Result<Index> {
    let uri = existing_db(db)?;
    // The auto-sized index cache (see `IndexConfig::index_cache_bytes`) for readers too.
    ctxd_pipeline::config::IndexConfig { db: db.to_path_buf(), ..Default::default() }.apply_cache_limits();
    Ok(Index::open(&uri).await?)
}

async fn snapshots(db: &Path, json: bool) -> Result<()> {
    let snaps = open_index(db).await?.snapshots().await?;
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

async fn symbols(name: &str, db: &Path, prefix: bool, limit: usize, json: bool) -> Result<()> {
    let index = open_index(db).await?;
    let rows = index.symbols_named(name, prefix, limit.max(1)).await?;
    if json {
        let out: Vec<serde_json::Value> = rows
            .iter()
            .map(|r| {
                serde_json::json!({
                    "name": r.name, "qualified_name": r.qualified_name, "symbol": r.symbol, "kind": r.kind,
                    "language": r.language, "path": r.path, "start_line": r.start_line, "end_line": r.end_line,
                    "signature": r.signature, "parent": r.parent, "doc": r.doc,
                })
            })
            .collect();
        println!("{}", serde_json::json!({ "symbols": out }));
    } else if rows.is_empty() {
        println!("no symbol {}{name}", if prefix { "starting with " } else { "named " });
    } else {
        for r in rows {
            println!("{}:{}-{}  {} {}  {}", r.path, r.start_line, r.end_line, r.kind, r.qualified_name, r.signature);
        }
    }
    Ok(())
}

/// Builds the config of a one-shot or daemon run from an optional file plus overrides.
pub fn build_config(file: Option<&Path>, root: Option<&Path>, db: Option<&Path>, model: &ModelArgs) -> Result<Config> {
    let mut cfg = Config::load_with_env(file)?;
    if let Some(root) = root {
        cfg.source.root = root.to_path_buf();
    }
    if let Some(db) = db {
        cfg.index.db = db.to_path_buf();
    }
    model.apply(&mut cfg.model);
    cfg.validate().map_err(|e| anyhow::anyhow!("invalid configuration: {e}"))?;
    cfg.index.apply_cache_limits();
    Ok(cfg)
}

async fn index(
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
        crate::serve::termination().await;
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

/// Opens an index read-only with a searcher using its model (or `--model`); the model is
/// loaded only when `need_model` (bm25 never embeds the query).
pub async fn open_searcher(db: &Path, model: &ModelArgs, need_model: bool) -> Result<Searcher> {
    if !need_model {
        return Ok(Searcher::new(Arc::new(open_index(db).await?), None));
    }
    Ok(searcher_and_spec(db, model, true).await?.0)
}

/// [`open_searcher`], and what the model is loaded from (`--model`, else the index's model:
/// the spec `ctxd reembed` recorded for it, a directory or hub id, else the model id stored
/// in the table, the default model for a text-only index).
async fn searcher_and_spec(db: &Path, model: &ModelArgs, need_model: bool) -> Result<(Searcher, String)> {
    let index = open_index(db).await?;
    let spec = match &model.model {
        Some(spec) => spec.clone(),
        None => index_model_spec(&index).await?,
    };
    if !need_model {
        return Ok((Searcher::new(Arc::new(index), None), spec));
    }
    let (service, _) = start_model(&spec, model).await?;
    if service.dim() != index.dim() {
        bail!(
            "model {} has dimension {} but the index at {} has {}",
            service.model_id(),
            service.dim(),
            db.display(),
            index.dim()
        );
    }
    Ok((Searcher::new(Arc::new(index), Some(service)), spec))
}

/// Loads the model `spec` with the runtime `model` asks for (device, precision, backend,
/// threads) on a blocking thread, and starts its service.
pub(crate) async fn start_model(spec: &str, model: &ModelArgs) -> Result<(EmbedService, TokenCounter)> {
    let runtime = model.runtime()?;
    let spec = spec.to_string();
    let started =
        tokio::task::spawn_blocking(move || ctxd_models::start(&spec, EmbedServiceConfig::default(), &runtime))
            .await
            .map_err(|e| anyhow::anyhow!("model loading thread failed: {e}"))??;
    Ok(started)
}

async fn index_model_spec(index: &ctxd_index::Index) -> Result<String> {
    let id = index.model_id();
    if id.is_empty() || id == ctxd_index::NO_MODEL {
        return Ok(DEFAULT_MODEL.to_string());
    }
    let active = ctxd_index::active::current(index.uri()).await?;
    Ok(match active {
        Some(a) if a.model_id == id && a.table_name == index.table_name() && !a.model_spec.is_empty() => a.model_spec,
        _ => id.to_string(),
    })
}

/// The tokenizer of the model `spec` (context budgets count in it).
async fn tokenizer(spec: String) -> Result<TokenCounter> {
    let (tokens, _, _) = tokio::task::spawn_blocking(move || ctxd_models::tokenizer_only(&spec))
        .await
        .expect("tokenizer loading thread panicked")?;
    Ok(tokens)
}

/// A context assembler on an existing index: its searcher (the model loaded when
/// `need_model`) and the tokenizer of the index's model (or `--model`), which budgets count in.
pub async fn open_assembler(db: &Path, model: &ModelArgs, need_model: bool) -> Result<Assembler> {
    let (searcher, spec) = searcher_and_spec(db, model, need_model).await?;
    Ok(Assembler::new(searcher, tokenizer(spec).await?))
}

async fn assemble_context(req: &ContextRequest, db: &Path, model: &ModelArgs, json: bool) -> Result<()> {
    Assembler::validate(req)?;
    let assembler = open_assembler(db, model, !matches!(req.mode, Mode::Bm25 | Mode::Symbol)).await?;
    let resp = assembler.assemble(req, |_| {}).await?;
    if json {
        println!("{}", serde_json::to_string(&resp)?);
    } else {
        print!("{}", resp.context);
        eprintln!(
            "{} blocks, {} of {} tokens ({:.0}%), {} candidates, dedup {:.0}%, route {}, intent {}",
            resp.blocks.len(),
            resp.tokens_used,
            resp.budget - resp.reserve,
            resp.utilization * 100.0,
            resp.candidates,
            resp.dedup_rate * 100.0,
            resp.route.map_or("-", |r| r.as_str()),
            resp.intent.map_or("-", |i| i.as_str())
        );
    }
    Ok(())
}

async fn search(
    query: &str,
    db: &Path,
    k: usize,
    mode: &str,
    as_of: Option<String>,
    rerank: bool,
    model: &ModelArgs,
    json: bool,
) -> Result<()> {
    let mode: Mode = mode.parse()?;
    let mut req = SearchRequest::new(query).with(k, mode);
    req.as_of = as_of;
    req.rerank = Some(rerank);
    Searcher::validate(&req)?;
    let searcher = open_searcher(db, model, !matches!(mode, Mode::Bm25 | Mode::Symbol)).await?;
    let resp = searcher.search(&req).await?;
    if json {
        println!("{}", serde_json::to_string(&resp)?);
        return Ok(());
    }
    if resp.results.is_empty() {
        println!("no results");
    }
    for (i, r) in resp.results.iter().enumerate() {
        let sym = r.symbol.as_deref().map(|s| format!("  {s}")).unwrap_or_default();
        println!("{:>2}. {}:{}-{}{}  (score {:.4})", i + 1, r.path, r.start_line, r.end_line, sym, r.score);
        for line in r.content.lines().take(3) {
            println!("      {line}");
        }
    }
    Ok(())
}

async fn eval(
    db: &Path,
    queries: &Path,
    k: usize,
    mode: &str,
    context_budgets: &[usize],
    model: &ModelArgs,
    json: bool,
) -> Result<()> {
    // (mode, late-interaction rescoring)
    let modes: Vec<(Mode, bool)> = match mode {
        "all" => vec![
            (Mode::Bm25, true),
            (Mode::Vector, true),
            (Mode::Symbol, true),
            (Mode::Hybrid, true),
            (Mode::Routed, false),
            (Mode::Routed, true),
        ],
        "none" => Vec::new(),
        "routed-no-rerank" => vec![(Mode::Routed, false)],
        m => vec![(m.parse()?, true)],
    };
    let qs = read_queries(queries)?;
    if qs.is_empty() {
        bail!("no queries in {}", queries.display());
    }
    let need_model = !context_budgets.is_empty() || modes.iter().any(|(m, _)| !matches!(m, Mode::Bm25 | Mode::Symbol));
    let (searcher, spec) = searcher_and_spec(db, model, need_model).await?;
    let mut reports = Vec::new();
    for (m, rerank) in modes {
        reports.push(evaluate(&searcher, &qs, m, k, rerank).await?);
    }
    let mut context_reports = Vec::new();
    if !context_budgets.is_empty() {
        let tokens = tokenizer(spec).await?;
        let assembler = Assembler::new(searcher.clone(), tokens.clone());
        context_reports = evaluate_context(&assembler, &tokens, &qs, context_budgets, &[1, 3, 5]).await?;
    }
    if json {
        println!(
            "{}",
            serde_json::to_string(
                &serde_json::json!({ "queries": qs.len(), "k": k, "reports": reports, "context": context_reports })
            )?
        );
    } else {
        println!("{} queries from {}", qs.len(), queries.display());
        println!(
            "{:<8} {:>9} {:>9} {:>10} {:>8} {:>9} {:>8}",
            "mode", "recall@1", "recall@5", "recall@10", "MRR@10", "nDCG@10", "seconds"
        );
        for r in &reports {
            println!(
                "{:<8} {:>9.4} {:>9.4} {:>10.4} {:>8.4} {:>9.4} {:>8.1}",
                r.mode, r.recall_at_1, r.recall_at_5, r.recall_at_10, r.mrr_at_10, r.ndcg_at_10, r.seconds
            );
        }
        if !context_reports.is_empty() {
            println!("{:<16} {:>12} {:>12} {:>8}", "context", "gold recall", "mean tokens", "seconds");
            for r in &context_reports {
                println!("{:<16} {:>12.4} {:>12.1} {:>8.1}", r.method, r.gold_recall, r.mean_tokens, r.seconds);
            }
        }
    }
    Ok(())
}
