//! `ctxd bench --forward`: the flags of [`ctxd_models::forward`]'s measurement (the model's
//! forward pass alone in sequences per second per batch size and precision, cosine to reference
//! vectors, texts/s through the embedding service) on the device the model settings pick
//! (`--device cuda:0`, `cpu`, `auto`), printed as a table or JSON (`scripts/gpu-check.sh` reads
//! it; the `ctxd-forward` binary takes the same flags).

use std::path::PathBuf;

use anyhow::Result;
use ctxd_models::forward::ForwardSpec;
use ctxd_models::resolve::DEFAULT_MODEL;

/// The flags of `ctxd bench --forward`.
#[derive(Debug, Clone, clap::Args)]
pub struct ForwardArgs {
    /// Measure the forward pass alone (sequences/s per batch size and precision) instead of
    /// the chunking/embedding/indexing figures.
    #[arg(long)]
    pub forward: bool,
    /// With --forward: the batch sizes.
    #[arg(long, value_delimiter = ',', default_value = "32,128,512")]
    pub batches: Vec<usize>,
    /// With --forward: tokens per sequence (at most the model's window).
    #[arg(long, default_value_t = 256)]
    pub seq_len: usize,
    /// With --forward: the precisions (default: f16,f32 on a GPU; f32, and bf16 where native, on
    /// the CPU).
    #[arg(long, value_delimiter = ',')]
    pub precisions: Vec<ctxd_choice::PrecisionChoice>,
    /// With --forward: seconds each cell runs at least (after one warm-up batch).
    #[arg(long, default_value_t = 2.0)]
    pub min_seconds: f64,
    /// With --forward: a JSON file `{"texts": [...], "vectors": [[...], ...]}` to compare each
    /// precision's vectors with (cosine).
    #[arg(long)]
    pub reference: Option<PathBuf>,
    /// With --forward: a JSON-lines file of texts (e.g. the chunk texts `ctxd bench --export`
    /// writes) to embed end to end per precision, through the embedding service the indexer
    /// uses (tokenizing, length-sorted batches capped by tokens, forward, pooling): texts/s.
    #[arg(long)]
    pub texts: Option<PathBuf>,
    /// With --forward: also time each stage of the largest batch's forward pass on the candle
    /// encoder (the device synchronised after each stage): where the time goes.
    #[arg(long)]
    pub profile: bool,
    /// With --forward: print the figures as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs the forward benchmark of the model `spec` (default: the default model) with the
/// runtime settings `base` (their precision replaced per row) and prints its table (or JSON).
pub fn run(args: &ForwardArgs, spec: Option<&str>, base: ctxd_models::runtime::Runtime) -> Result<()> {
    let spec = spec.unwrap_or(DEFAULT_MODEL);
    let forward = ForwardSpec {
        batches: args.batches.clone(),
        seq_len: args.seq_len,
        precisions: args.precisions.clone(),
        min_seconds: args.min_seconds,
        reference: args.reference.clone(),
        texts: args.texts.clone(),
        profile: args.profile,
    };
    let report = ctxd_models::forward::run(&forward, spec, &base, &mut |line| eprintln!("bench: {line}"))?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.table());
    }
    Ok(())
}
