//! `ctxd reembed`: the re-embedding job ([`ctxd_pipeline::reembed`]) with a progress bar.

use std::path::Path;
use std::sync::Mutex;

use anyhow::{bail, Result};
use ctxd_pipeline::reembed::{reembed, Progress, Quiet, ReembedOptions};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::cli::ModelArgs;

/// An indicatif bar on stderr: rows done of the pass, rows/s, time left.
struct Bar(Mutex<Option<ProgressBar>>);

impl Progress for Bar {
    fn start(&self, phase: &str, total: u64, done: u64) {
        let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr_with_hz(4));
        bar.set_style(
            ProgressStyle::with_template(
                "{msg:>13} [{elapsed_precise}] {wide_bar} {pos}/{len} chunks · {per_sec} · {eta} left",
            )
            .expect("progress template")
            .progress_chars("=> "),
        );
        bar.set_message(phase.to_string());
        bar.set_position(done);
        bar.reset_eta();
        if let Some(old) = self.0.lock().unwrap_or_else(|e| e.into_inner()).replace(bar) {
            old.finish();
        }
    }

    fn advance(&self, n: u64) {
        if let Some(bar) = self.0.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            bar.inc(n);
        }
    }
}

/// Runs the job on `db` with the model of `model` (required).
pub async fn run(
    db: &Path,
    model: &ModelArgs,
    block_rows: usize,
    switch: bool,
    vector_index_min_rows: usize,
    json: bool,
) -> Result<()> {
    let Some(spec) = model.model.clone() else {
        bail!("--model is required: the model to re-embed with (a Hugging Face id or a directory)");
    };
    let uri = crate::open::existing_db(db)?;
    let (service, _) = crate::open::start_model(&spec, model).await?;
    // A directory is recorded absolute, so a daemon started elsewhere loads the same files.
    let spec = match Path::new(&spec).canonicalize() {
        Ok(p) if p.is_dir() => p.to_string_lossy().into_owned(),
        _ => spec,
    };
    let mut opts = ReembedOptions { rows_per_block: block_rows, switch, ..Default::default() };
    opts.maintenance.vector_index_min_rows = vector_index_min_rows;
    let report = if json {
        reembed(&uri, service, &spec, &opts, &Quiet).await?
    } else {
        let bar = Bar(Mutex::new(None));
        let report = reembed(&uri, service, &spec, &opts, &bar).await;
        if let Some(b) = bar.0.lock().unwrap_or_else(|e| e.into_inner()).take() {
            b.finish();
        }
        report?
    };
    if json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        println!(
            "re-embedded {} of {} chunks with {} in {:.1}s ({:.1} chunks/s; {} already done, {} removed, {} catch-up rounds) into table {}",
            report.embedded,
            report.rows,
            report.to_model,
            report.seconds,
            report.rows_per_second,
            report.resumed,
            report.removed,
            report.catch_up_rounds,
            report.to_table
        );
        if report.switched {
            println!(
                "switched: queries now use {} (table {}); {} is kept for a rollback",
                report.to_model, report.to_table, report.from_table
            );
        } else {
            println!("not switched (--no-switch): run the same command again to switch");
        }
    }
    Ok(())
}
