//! `ctxd reembed`: the re-embedding job ([`ctxd_pipeline::reembed`]) with a progress bar, on
//! one machine or distributed (`--shard I/N` on many, then `--commit`: [`ctxd_pipeline::reembed`]).

use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use anyhow::{bail, Result};
use ctxd_index::error::IndexError;
use ctxd_pipeline::error::PipelineError;
use ctxd_pipeline::reembed::{
    reembed, reembed_shard, Progress, Quiet, ReembedOptions, ReembedReport, Shard, ShardReport,
};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::model_args::ModelArgs;

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

/// Which part of a job this run does.
pub enum Step {
    /// The whole job on this machine.
    Whole,
    /// One shard of a distributed job (uncommitted fragments).
    Shard(Shard),
    /// The distributed job's commit (and catch-up, switch).
    Commit,
}

/// Runs `step` of the job on `db` with the model of `model` (required).
pub async fn run(
    db: &Path,
    model: &ModelArgs,
    step: Step,
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
    let commit_shards = matches!(step, Step::Commit);
    let mut opts = ReembedOptions { rows_per_block: block_rows, switch, commit_shards, ..Default::default() };
    opts.maintenance.vector_index_min_rows = vector_index_min_rows;
    let bar = Bar(Mutex::new(None));
    let progress: &dyn Progress = if json { &Quiet } else { &bar };
    let mut attempt = 1;
    let result = loop {
        let service = service.clone();
        let result = match step {
            Step::Whole | Step::Commit => reembed(&uri, service, &spec, &opts, progress).await.map(Done::Job),
            Step::Shard(shard) => reembed_shard(&uri, service, shard, &opts, progress).await.map(Done::Shard),
        };
        match result {
            Err(e) if attempt < STEP_TRIES && storage_failure(&e) => {
                tracing::warn!(
                    "re-embedding failed in the store (try {attempt} of {STEP_TRIES}), running it again: {e}"
                );
                tokio::time::sleep(Duration::from_secs(1 << attempt)).await;
                attempt += 1;
            }
            result => break result,
        }
    };
    if let Some(b) = bar.0.lock().unwrap_or_else(|e| e.into_inner()).take() {
        b.finish();
    }
    match result? {
        Done::Shard(r) if json => println!("{}", serde_json::to_string(&r)?),
        Done::Job(r) if json => println!("{}", serde_json::to_string(&r)?),
        Done::Shard(r) => print_shard(&r),
        Done::Job(r) => print_job(&r),
    }
    Ok(())
}

/// Runs of a step when the store fails under it. Every step may be run again (the job resumes,
/// a shard recorded twice keeps its newest row, a commit never publishes a fragment twice), so a
/// reset, a timeout or a lost answer from the bucket costs a retry here rather than a failed
/// Job pod (`benches/faults.py s3-reembed`: a third of the conditional PUTs reset took a commit
/// four runs).
const STEP_TRIES: u32 = 4;

/// Whether `e` is the store's (Lance and the bucket under it), not the job's own refusal (a
/// missing shard, a model that does not fit).
fn storage_failure(e: &PipelineError) -> bool {
    matches!(e, PipelineError::Index(IndexError::Lance { .. }))
}

enum Done {
    Job(ReembedReport),
    Shard(ShardReport),
}

fn print_shard(r: &ShardReport) {
    println!(
        "shard {}: embedded {} of its {} chunks with {} in {:.1}s ({:.1} chunks/s; {} already done) into {} uncommitted \
         fragment(s) of table {} (source version {}; read {} of its rows, {:.1} MB)",
        r.shard,
        r.embedded,
        r.rows,
        r.to_model,
        r.seconds,
        r.rows_per_second,
        r.resumed,
        r.fragments,
        r.to_table,
        r.source_version,
        r.share_rows,
        r.share_bytes as f64 / 1e6
    );
    println!(
        "not visible yet: when every shard has finished, run `ctxd reembed --commit` with the same --db and --model"
    );
}

fn print_job(report: &ReembedReport) {
    if report.shards > 0 {
        println!(
            "published {} rows of {} shards in one commit to table {}",
            report.staged_rows, report.shards, report.to_table
        );
    }
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
    } else if report.shards > 0 {
        println!("not switched (--no-switch): run `ctxd reembed` with the same --db and --model to switch");
    } else {
        println!("not switched (--no-switch): run the same command again to switch");
    }
}
