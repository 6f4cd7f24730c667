//! `ctxd locate` and `ctxd graph …`: localization and the code graph's tools against an
//! existing index, printed for a person or as JSON.

use std::io::Read;
use std::path::Path;

use anyhow::{Context, Result};
use ctxd_codegraph::graph::cache::GraphCache;
use ctxd_codegraph::graph::impact::{impact, parse_diff, Change, ImpactAnswer};
use ctxd_codegraph::graph::uses::{self, FileAnswer, SymbolAnswer};
use ctxd_codegraph::locate::LocateRequest;
use ctxd_codegraph::tools::GraphTools;

use crate::cli::{FileArgs, GraphAction, SymbolArgs};
use crate::model_args::ModelArgs;
use crate::open::{open_index, open_searcher};

/// Reads `text`, or stdin when it is `-`.
pub fn text_arg(text: &str) -> Result<String> {
    if text != "-" {
        return Ok(text.to_string());
    }
    let mut buf = Vec::new();
    std::io::stdin().take(ctxd_codegraph::locate::MAX_LOCATE_BYTES as u64 + 1).read_to_end(&mut buf)?;
    String::from_utf8(buf).context("reading the text from stdin: it is not UTF-8 text")
}

/// `ctxd locate`: the answer to `req` over the index at `db`, as text or JSON.
pub async fn locate(req: LocateRequest, db: &Path, model: &ModelArgs, json: bool) -> Result<()> {
    let req = req.check()?;
    let need_model = !req.without().contains(&ctxd_codegraph::locate::Signal::Vector);
    let searcher = open_searcher(db, model, need_model).await?;
    let answer = GraphTools::new(searcher.retriever().clone()).locate(&req).await?;
    if json {
        println!("{}", serde_json::to_string(&answer)?);
        return Ok(());
    }
    if answer.files.is_empty() {
        println!("no files");
    }
    for (i, f) in answer.files.iter().enumerate() {
        println!("{:>2}. {}  (score {:.3})", i + 1, f.path, f.score);
        for w in f.why.iter().take(3) {
            println!("      {w}");
        }
        for d in &f.definitions {
            println!("      → {}:{}-{} {}", d.path, d.start_line, d.end_line, d.symbol.as_deref().unwrap_or(""));
        }
    }
    eprintln!("{} ms ({})", answer.took_ms, answer.timings.describe());
    Ok(())
}

/// `ctxd history`: a file's recorded commits and co-changed files.
pub async fn history(
    path: &str,
    db: &Path,
    limit: usize,
    source: Option<ctxd_index::scope::SourceScope>,
    json: bool,
) -> Result<()> {
    anyhow::ensure!((1..=300).contains(&limit), "--limit must be between 1 and 300 (got {limit})");
    let searcher = open_searcher(db, &ModelArgs::default(), false).await?;
    let tools = GraphTools::new(searcher.retriever().clone());
    let answer = tools.history(path, limit, source.as_ref()).await?;
    if json {
        println!("{}", serde_json::to_string(&answer)?);
        return Ok(());
    }
    for f in &answer.files {
        println!("{}", f.path);
        for c in &f.commits {
            println!(
                "  {} {} {:<16} {}",
                &c.commit[..c.commit.len().min(10)],
                &c.date[..c.date.len().min(10)],
                c.author,
                c.summary
            );
        }
        if !f.cochanged.is_empty() {
            let with: Vec<String> = f.cochanged.iter().take(5).map(|(p, n)| format!("{p} ({n})")).collect();
            println!("  changes with: {}", with.join(", "));
        }
    }
    Ok(())
}

fn print_symbol_answer(a: &SymbolAnswer, json: bool) -> Result<()> {
    if json {
        println!("{}", serde_json::to_string(a)?);
        return Ok(());
    }
    for d in &a.definitions {
        println!("{}:{}-{}  {}", d.path, d.start_line, d.end_line, d.signature.as_deref().unwrap_or(""));
    }
    if a.uses.is_empty() {
        println!("  no resolved uses");
    }
    for u in a.uses.iter().chain(&a.unresolved) {
        let resolved = if u.targets.is_empty() { "  (unresolved)" } else { "" };
        let inside = u.in_symbol.as_deref().map(|s| format!(" in {s}")).unwrap_or_default();
        println!("  {}:{}  {} {}{inside}{resolved}", u.path, u.line, u.kind, u.name);
    }
    Ok(())
}

fn print_file_answer(a: &FileAnswer, json: bool) -> Result<()> {
    if json {
        println!("{}", serde_json::to_string(a)?);
        return Ok(());
    }
    if a.files.is_empty() {
        println!("no indexed files");
    }
    for f in &a.files {
        let lines: Vec<String> = f.lines.iter().map(u32::to_string).collect();
        let names = if f.names.is_empty() { String::new() } else { format!("  ({})", f.names.join(", ")) };
        println!("{}  line {}{names}", f.path, lines.join(", "));
    }
    Ok(())
}

/// The code graph of the index at `db` (latest version).
async fn graph_of(db: &Path) -> Result<std::sync::Arc<ctxd_codegraph::graph::cache::CachedGraph>> {
    Ok(GraphCache::default().get(&open_index(db).await?).await?)
}

/// What `ctxd graph impact` starts from: the whole files `paths`, then the definitions the hunks
/// of the diff file `diff` touch (`-`: the diff on stdin).
fn changes_of(paths: Vec<String>, diff: Option<&Path>) -> Result<Vec<Change>> {
    let mut changes: Vec<Change> = paths.into_iter().map(|path| Change { path, lines: Vec::new() }).collect();
    if let Some(d) = diff {
        let text = if d.as_os_str() == "-" {
            text_arg("-")?
        } else {
            let bytes = std::fs::read(d).with_context(|| format!("reading the diff {}", d.display()))?;
            String::from_utf8(bytes).with_context(|| format!("the diff {} is not UTF-8 text", d.display()))?
        };
        changes.extend(parse_diff(&text)?);
    }
    Ok(changes)
}

/// Prints `ctxd graph impact`'s answer `a`, as text or JSON.
fn print_impact(a: &ImpactAnswer, json: bool) -> Result<()> {
    if json {
        println!("{}", serde_json::to_string(a)?);
        return Ok(());
    }
    println!("changed: {} definitions", a.changed.len());
    for (title, list) in [("affected", &a.affected), ("tests", &a.tests)] {
        println!("{title}:");
        for x in list {
            let sym = x.place.symbol.as_deref().unwrap_or("(file)");
            println!("  {}:{}  {sym}  ({:.3}, {} via {})", x.place.path, x.place.start_line, x.score, x.depth, x.via);
        }
    }
    for p in &a.unknown_paths {
        println!("not in the index: {p}");
    }
    if !a.cochanged.is_empty() {
        println!("changed in the same commits:");
        for c in &a.cochanged {
            println!("  {}  ({} commits with {})", c.path, c.commits, c.with);
        }
    }
    Ok(())
}

/// `ctxd graph …`: one code-graph tool's answer over the index at its `--db`.
pub async fn graph(action: GraphAction) -> Result<()> {
    match action {
        GraphAction::References(SymbolArgs { symbol, db, limit, json }) => {
            let g = graph_of(&db).await?;
            print_symbol_answer(&uses::references(&g.code, &symbol, &[], limit)?, json)
        }
        GraphAction::Callers(SymbolArgs { symbol, db, limit, json }) => {
            let g = graph_of(&db).await?;
            print_symbol_answer(&uses::callers(&g.code, &symbol, limit)?, json)
        }
        GraphAction::Callees(SymbolArgs { symbol, db, limit, json }) => {
            let g = graph_of(&db).await?;
            print_symbol_answer(&uses::callees(&g.code, &symbol, limit)?, json)
        }
        GraphAction::Imports(FileArgs { path, db, json }) => {
            let g = graph_of(&db).await?;
            print_file_answer(&uses::imports(&g.code, &path)?, json)
        }
        GraphAction::ImportedBy(FileArgs { path, db, json }) => {
            let g = graph_of(&db).await?;
            print_file_answer(&uses::imported_by(&g.code, &path)?, json)
        }
        GraphAction::Impact { paths, diff, db, limit, json } => {
            let changes = changes_of(paths, diff.as_deref())?;
            anyhow::ensure!(!changes.is_empty(), "nothing changed: give paths or --diff FILE");
            let index = open_index(&db).await?;
            let g = GraphCache::default().get(&index).await?;
            let mut a = impact(&g.code, &changes, limit);
            let changed: Vec<String> = changes.into_iter().map(|c| c.path).collect();
            let history = index.history().file_history().await?;
            a.cochanged =
                ctxd_codegraph::locate::cochanged_with(&history, &changed, limit, |p| g.code.file(p).is_some());
            print_impact(&a, json)
        }
        GraphAction::RepoMap { query, budget, db, model, json } => {
            let started = std::time::Instant::now();
            let searcher = open_searcher(&db, &model, query.is_some()).await?;
            let map =
                GraphTools::new(searcher.retriever().clone()).repo_map(query.as_deref(), budget, None, None).await?;
            let ms = started.elapsed().as_millis();
            if json {
                println!("{}", serde_json::to_string(&map)?);
            } else {
                print!("{}", map.text);
                eprintln!(
                    "{} files, ~{} of {} tokens, ranked by {} ({ms} ms)",
                    map.files.len(),
                    map.tokens,
                    map.budget,
                    map.ranked_by
                );
            }
            Ok(())
        }
        GraphAction::Stats { db, json } => {
            let g = graph_of(&db).await?;
            let counts: Vec<(String, usize)> =
                g.code.edge_counts().into_iter().map(|(k, n)| (k.as_str().to_string(), n)).collect();
            let resolved = g.code.edges.iter().filter(|e| !e.to_symbols.is_empty() || !e.to_files.is_empty()).count();
            let v = serde_json::json!({
                "files": g.code.files.len(), "definitions": g.code.symbols.len(), "edges": g.code.edges.len(),
                "resolved_edges": resolved, "by_kind": counts.iter().cloned().collect::<std::collections::BTreeMap<_, _>>(),
                "build_ms": g.build_ms,
            });
            if json {
                println!("{v}");
            } else {
                println!("{}", serde_json::to_string_pretty(&v)?);
            }
            Ok(())
        }
    }
}
