//! `ctxd adapt`: fits the index's query adapter on its recorded git history now, judges it on the
//! newest commits and stores it, kept or not ([`ctxd_pipeline::adapt`]); a one-shot
//! `ctxd index` does the same at its end when `[index] adapt` is on and the history changed (a
//! daemon does it in its background: `ctxd_pipeline::adapt_job`).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use ctxd_pipeline::adapt::{adapt, due, AdaptOutcome, Pace};

use crate::model_args::ModelArgs;
use crate::open::{open_index, open_searcher};

/// `ctxd adapt`'s arguments.
#[derive(Debug, clap::Args)]
pub struct AdaptArgs {
    #[arg(long)]
    db: PathBuf,
    #[command(flatten)]
    model: ModelArgs,
    /// Print `{"history_commits","files","selection":{...},"history_version","embed_ms",…}`.
    #[arg(long)]
    json: bool,
    /// The control, for measurement only: fit on the commits with their changed files
    /// shuffled among them (seed N) and store that fit as the adapter whatever its judgement
    /// (`ctxd adapt` without it restores the real one).
    #[arg(long, value_name = "SEED")]
    shuffled: Option<u64>,
}

/// `ctxd adapt --db DIR [--json] [--shuffled SEED]`.
pub async fn run(args: &AdaptArgs) -> Result<()> {
    let outcome = fit(&args.db, &args.model, args.shuffled).await?;
    if args.json {
        println!("{}", serde_json::to_string(&outcome)?);
    } else {
        println!("{}", describe(&outcome));
    }
    Ok(())
}

/// Fits the adapter of the index at `db` with its model (on shuffled pairs with `shuffled`).
async fn fit(db: &Path, model: &ModelArgs, shuffled: Option<u64>) -> Result<AdaptOutcome> {
    let searcher = open_searcher(db, model, true).await?;
    let pinned = searcher.retriever().current();
    let (index, _) = pinned.index_as_of(None, None).await?;
    let embed = pinned.embed().context("the query adapter needs the index's model, which did not load")?;
    let fitted = adapt(&index, embed, &mut Pace::unpaced(), shuffled).await;
    let outcome = fitted.with_context(|| format!("fitting the query adapter of {}", db.display()))?;
    outcome.context("an unpaced fit has no stop signal, yet it stopped")
}

/// After `ctxd index`: fits the adapter when the index's history is due one
/// ([`ctxd_pipeline::adapt::due`], the daemon's rule too).
pub async fn after_index(db: &Path, model: &ModelArgs) -> Result<()> {
    let index = open_index(db).await?;
    let version = index.history().history_version().await?;
    if version == 0 || !due(&index, version).await? {
        return Ok(());
    }
    let outcome = fit(db, model, None).await?;
    tracing::info!("{}", describe(&outcome));
    Ok(())
}

/// One line: what was fitted on, and whether it is used.
fn describe(o: &AdaptOutcome) -> String {
    let s = &o.selection;
    if o.history_version == 0 {
        return "query adapter: the index has no git history (a git source, or a folder that is a git clone, records it)"
            .into();
    }
    let what = format!(
        "{} of {} commits usable over {} files; the newest {} held out: MRR@10 {:.3} base",
        s.commits, o.history_commits, o.files, s.held_out, s.base_mrr
    );
    if let Some(seed) = o.shuffled {
        return format!(
            "query adapter in use: the shuffled control (seed {seed}): {what}; run `ctxd adapt` to restore"
        );
    }
    match s.fit {
        Some(fit) => {
            format!("query adapter in use ({fit:?}): {what}, {:.3} adapted; fitted in {} ms", s.adapted_mrr, s.fit_ms)
        }
        None if s.held_out == 0 => format!("query adapter not used: too few commits ({what})"),
        None => format!("query adapter not used: no fit beat the base model ({what}, best {:.3})", s.adapted_mrr),
    }
}
