//! `ctxd bench --fit-late FILE`: fits a model's late-interaction codec ([`ctxd_models::late`]) on
//! the token states of a corpus's chunks, writes it, and prints how closely its codes reproduce
//! the model's MaxSim on chunks it was not fitted on.
//!
//! A fitted codec is measured by naming its file in `CTXD_LATE_CODEC` for `ctxd index` and
//! `ctxd eval`; fit only on repositories in `../shared/eval/training/repos.txt`, never on an
//! evaluation set (BENCHMARKS.md has the trials and their commands). The chunks are spread over the corpus (every n-th), embedded exactly as
//! indexing embeds them ([`ctxd_stages::embed::embedding_text`]); nine in ten are fitted on, the
//! tenth held out: each held-out chunk's first tokens (up to 12) play a query against the next
//! held-out chunks, and the exact and coded MaxSim are compared.

use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result};
use ctxd_models::embedder::max_sim;
use ctxd_models::late::LateCodec;
use ctxd_models::resolve::DEFAULT_MODEL;
use ctxd_models::service::TokenStates;
use ctxd_stages::embed::embedding_text;

use crate::model_args::ModelArgs;
use crate::open::start_model;

/// Texts per request to the model thread.
const BATCH: usize = 32;
/// Token rows the fit keeps at most (each `dim` floats: ~300 MB at 384 dimensions).
const MAX_ROWS: usize = 200_000;

/// Fits a codec of `dims` directions on at most `chunks` chunks of `corpus` and writes it to `out`.
pub async fn run(corpus: &Path, chunks: usize, dims: usize, out: &Path, model: &ModelArgs) -> Result<()> {
    if !corpus.is_dir() {
        anyhow::bail!("corpus {} is not a directory", corpus.display());
    }
    let spec = model.model.clone().unwrap_or_else(|| DEFAULT_MODEL.to_string());
    let (service, counter) = start_model(&spec, model).await?;
    let all = crate::bench::chunk_corpus(corpus, counter).chunks;
    let step = (all.len() / chunks.max(1)).max(1);
    let texts: Vec<String> =
        all.iter().step_by(step).take(chunks).map(|(p, c)| embedding_text(p, c, service.model_id()).0).collect();
    if texts.len() < 20 {
        anyhow::bail!("{} holds {} chunks; a fit needs at least 20", corpus.display(), texts.len());
    }
    let started = Instant::now();
    let mut states = Vec::with_capacity(texts.len());
    for batch in texts.chunks(BATCH) {
        let batch = service.embed_documents_with_tokens(batch.to_vec()).await;
        states.extend(batch.context("embedding the corpus's token states")?);
    }
    let dim = service.dim();
    let (fit, held): (Vec<_>, Vec<_>) = states.into_iter().enumerate().partition(|(i, _)| i % 10 != 9);
    let mut rows: Vec<f32> = fit.iter().flat_map(|(_, s)| s.tokens.iter().copied()).collect();
    let mut ids: Vec<u32> = fit.iter().flat_map(|(_, s)| s.ids.iter().copied()).collect();
    rows.truncate(MAX_ROWS * dim);
    ids.truncate(MAX_ROWS);
    let embedded = started.elapsed().as_secs_f64();
    let codec = tokio::task::spawn_blocking(move || LateCodec::fit(&rows, &ids, dim, dims)).await??;
    std::fs::write(out, codec.to_bytes()).with_context(|| format!("writing {}", out.display()))?;
    println!(
        "fit-late: model {}, {} chunks of {} ({} fitted on, {} held out), {} anchors, {} directions of {dim}; \
         embedded in {embedded:.1}s, fitted in {:.1}s; codec {:08x} written to {}",
        service.model_id(),
        texts.len(),
        corpus.display(),
        fit.len(),
        held.len(),
        codec.anchors(),
        dims,
        started.elapsed().as_secs_f64() - embedded,
        codec.tag(),
        out.display()
    );
    let held: Vec<_> = held.into_iter().map(|(_, s)| s).collect();
    report_fidelity(&codec, &held, dim);
    Ok(())
}

/// Prints the exact and coded MaxSim's agreement on held-out chunks (see the module docs): mean
/// and largest absolute difference, and the bytes a token takes.
fn report_fidelity(codec: &LateCodec, held: &[TokenStates], dim: usize) {
    let (mut sum, mut worst, mut pairs, mut tokens, mut bytes) = (0f64, 0f32, 0usize, 0usize, 0usize);
    for (i, query) in held.iter().enumerate() {
        let query = &query.tokens[..query.tokens.len().min(12 * dim)];
        let mut prepared = codec.query(query);
        for doc in held.iter().skip(i + 1).take(8) {
            let code = codec.encode(&doc.tokens, &doc.ids);
            let exact = max_sim(query, &doc.tokens, dim);
            let coded = codec.max_sim(&mut prepared, &code).unwrap_or(f32::NAN);
            let diff = (exact - coded).abs();
            sum += f64::from(diff);
            worst = worst.max(diff);
            pairs += 1;
            tokens += doc.ids.len();
            bytes += code.len();
        }
    }
    if pairs == 0 {
        return;
    }
    println!(
        "fit-late: held-out MaxSim, {pairs} pairs: mean |exact - coded| {:.4}, largest {worst:.4}; {:.1} bytes a token \
         ({:.0} a chunk of these)",
        sum / pairs as f64,
        bytes as f64 / tokens.max(1) as f64,
        bytes as f64 / pairs as f64
    );
}
