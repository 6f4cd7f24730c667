//! `ctxd search`, `ctxd context` and `ctxd symbols`: one query against an existing index,
//! printed for a person or as JSON.

use std::path::Path;

use anyhow::Result;
use ctxd_context::request::ContextRequest;
use ctxd_context::symbols::{GetSymbolsRequest, ListSymbolsRequest};
use ctxd_search::search::{Mode, SearchRequest};

use crate::model_args::ModelArgs;
use crate::open::{open_assembler, open_index, open_searcher};
use crate::session_file::SessionFile;

/// `ctxd search`: `req` answered over the index at `db`, as JSON or lines.
pub async fn search(req: SearchRequest, db: &Path, model: &ModelArgs, json: bool) -> Result<()> {
    let req = req.check()?;
    let mode = req.mode;
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

pub async fn context(req: ContextRequest, db: &Path, model: &ModelArgs, json: bool) -> Result<()> {
    let req = &req.check()?;
    let assembler = open_assembler(db, model, !matches!(req.mode, Mode::Bm25 | Mode::Symbol)).await?;
    let session = SessionFile::load(assembler.sessions(), db, req.session.as_deref())?;
    let resp = assembler.assemble(req, |_| {}).await?;
    session.save(assembler.sessions())?;
    if json {
        println!("{}", serde_json::to_string(&resp)?);
    } else {
        print!("{}", resp.context);
        eprintln!(
            "{} blocks, {} of {} tokens ({:.0}%), {} candidates, dedup {:.0}%, route {}, intent {}, assembly {}{}",
            resp.blocks.len(),
            resp.tokens_used,
            resp.budget - resp.reserve,
            resp.utilization * 100.0,
            resp.candidates,
            resp.dedup_rate * 100.0,
            resp.route.map_or("-", |r| r.as_str()),
            resp.intent.map_or("-", |r| r.as_str()),
            resp.assembly.as_str(),
            resp.assembly_reason.as_deref().map(|r| format!(" ({r})")).unwrap_or_default()
        );
    }
    Ok(())
}

pub async fn symbols(name: &str, db: &Path, prefix: bool, limit: usize, json: bool) -> Result<()> {
    let index = open_index(db).await?;
    let rows = index.symbols().symbols_named(name, prefix, limit.max(1)).await?;
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

/// `ctxd list-symbols`: the outline as text (or JSON).
pub async fn list_symbols(req: &ListSymbolsRequest, db: &Path, json: bool) -> Result<()> {
    let assembler = open_assembler(db, &ModelArgs::default(), false).await?;
    let out = assembler.list_symbols(req).await?;
    if json {
        println!("{}", serde_json::to_string(&out)?);
    } else {
        print!("{}", out.text);
    }
    Ok(())
}

/// `ctxd get-symbols`: the sources within the budget (in a session when asked).
pub async fn get_symbols(req: &GetSymbolsRequest, db: &Path, json: bool) -> Result<()> {
    let assembler = open_assembler(db, &ModelArgs::default(), false).await?;
    let session = SessionFile::load(assembler.sessions(), db, req.session.as_deref())?;
    let out = assembler.get_symbols(req).await?;
    session.save(assembler.sessions())?;
    if json {
        println!("{}", serde_json::to_string(&out)?);
    } else {
        print!("{}", out.text);
        if !out.missing.is_empty() {
            eprintln!("no definition named: {}", out.missing.join(", "));
        }
        if !out.over_budget.is_empty() {
            eprintln!("over the budget of {} tokens: {}", out.budget, out.over_budget.join(", "));
        }
    }
    Ok(())
}
