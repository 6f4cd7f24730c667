//! `ctxd eval`: file-level retrieval figures (recall, MRR, nDCG) of every search mode on a
//! query set, and optionally of context assembly at token budgets.

use std::path::Path;

use anyhow::{bail, Result};
use ctxd_context::assembler::Assembler;
use ctxd_context::eval::{evaluate, evaluate_context, read_queries};
use ctxd_context::Assembly;
use ctxd_search::search::Mode;

use crate::model_args::ModelArgs;
use crate::open::open_read;

/// The context-assembly part of an evaluation: budgets and the strategies run at each.
pub struct ContextEval<'a> {
    pub budgets: &'a [usize],
    pub assemblies: &'a [String],
}

pub async fn run(
    db: &Path,
    queries: &Path,
    k: usize,
    mode: &str,
    context: ContextEval<'_>,
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
    let assemblies: Vec<Assembly> = context.assemblies.iter().map(|a| a.parse()).collect::<Result<_, _>>()?;
    let context_budgets = context.budgets;
    let qs = read_queries(queries)?;
    if qs.is_empty() {
        bail!("no queries in {}", queries.display());
    }
    let need_model = !context_budgets.is_empty() || modes.iter().any(|(m, _)| !matches!(m, Mode::Bm25 | Mode::Symbol));
    let opened = open_read(db, model, need_model).await?;
    let searcher = opened.searcher.clone();
    let mut reports = Vec::new();
    for (m, rerank) in modes {
        reports.push(evaluate(&searcher, &qs, m, k, rerank).await?);
    }
    let mut context_reports = Vec::new();
    if !context_budgets.is_empty() {
        let tokens = opened.tokenizer().await?;
        let assembler = Assembler::new(searcher.clone(), tokens.clone());
        context_reports = evaluate_context(&assembler, &tokens, &qs, context_budgets, &assemblies, &[1, 3, 5]).await?;
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
            println!("{:<20} {:>12} {:>12} {:>8}", "context", "gold recall", "mean tokens", "seconds");
            for r in &context_reports {
                println!("{:<20} {:>12.4} {:>12.1} {:>8.1}", r.method, r.gold_recall, r.mean_tokens, r.seconds);
            }
        }
    }
    Ok(())
}
