//! `ctxd bench --forward`: the model's forward pass alone, in sequences per second, at a fixed
//! sequence length (default 256 tokens, all-MiniLM-L6-v2's window) for a few batch sizes and
//! precisions, on the device the model settings pick (`--device cuda:0`, `cpu`, `auto`) — the
//! figure to hold against PyTorch's forward on the same machine (`scripts/gpu-check.sh`).
//!
//! The sequences are real tokens: a long English and code paragraph tokenized and cut to the
//! length, so every row of a batch is full and no padding is measured. Each cell runs one
//! warm-up batch, then batches until `--min-seconds` have passed (at least two), and reports
//! sequences per second over the timed batches. With `--reference FILE` (texts and vectors
//! computed once elsewhere, e.g. `models/tests/fixtures/reference.json` from
//! sentence-transformers on a CPU) each precision also embeds those texts end to end and reports
//! the lowest and the mean cosine to the reference vectors.
//!
//! Precisions default by device: `f16,f32` on a GPU; `f32` on the CPU, plus `bf16` where the
//! CPU has native bf16. A precision the device refuses gets a row saying why, not a failure.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result};
use ctxd_models::loaded::LoadedModel;
use ctxd_models::runtime::Picked;
use ctxd_models::service::{EmbedService, EmbedServiceConfig};
use ctxd_models::{resolve::DEFAULT_MODEL, Embedder};
use serde::Serialize;

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
    pub precisions: Vec<String>,
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
    /// With --forward: print the figures as JSON.
    #[arg(long)]
    pub json: bool,
}

/// One precision's figures.
#[derive(Debug, Serialize)]
struct Row {
    device: String,
    backend: String,
    precision: String,
    /// `(batch, sequences/s)` per batch size.
    seq_per_s: Vec<(usize, f64)>,
    /// Lowest and mean cosine to the reference vectors.
    cosine_min: Option<f64>,
    cosine_mean: Option<f64>,
    /// Texts per second embedded end to end (`--texts`).
    texts_per_s: Option<f64>,
    /// Why this precision did not run.
    refused: Option<String>,
}

#[derive(serde::Deserialize)]
struct Reference {
    texts: Vec<String>,
    vectors: Vec<Vec<f32>>,
}

/// Runs the forward benchmark of the model `spec` (default: the default model) with the
/// runtime settings `base` (their precision replaced per row) and prints its table (or JSON).
pub fn run(args: &ForwardArgs, spec: Option<&str>, base: ctxd_models::runtime::Runtime) -> Result<()> {
    let spec = spec.unwrap_or(DEFAULT_MODEL);
    let loaded = LoadedModel::resolve(spec).with_context(|| format!("loading model {spec}"))?;
    anyhow::ensure!(
        (2..=loaded.max_seq_len()).contains(&args.seq_len),
        "--seq-len {} is outside 2..={} (the model's window)",
        args.seq_len,
        loaded.max_seq_len()
    );
    anyhow::ensure!(!args.batches.is_empty() && !args.batches.contains(&0), "--batches needs sizes above 0");
    let reference = args.reference.as_deref().map(read_reference).transpose()?;
    let texts = args.texts.as_deref().map(read_texts).transpose()?;
    let mut rows = Vec::new();
    for precision in precisions(args, &base) {
        let rt = ctxd_models::runtime::Runtime { precision: precision.clone(), ..base.clone() };
        let started = Instant::now();
        let row = match rt.load(&loaded) {
            Ok(picked) => {
                eprintln!(
                    "bench: {} loaded in {:.1}s ({})",
                    picked.desc,
                    started.elapsed().as_secs_f64(),
                    picked.reason
                );
                measure(picked, args, reference.as_ref(), texts.as_deref())?
            }
            Err(e) => Row {
                device: rt.device.clone(),
                backend: rt.backend.clone(),
                precision,
                seq_per_s: Vec::new(),
                cosine_min: None,
                cosine_mean: None,
                texts_per_s: None,
                refused: Some(e.to_string()),
            },
        };
        rows.push(row);
    }
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "model": loaded.model_id(), "seq_len": args.seq_len, "rows": rows,
            }))?
        );
    } else {
        print_table(&loaded.model_id(), args, &rows);
    }
    Ok(())
}

/// The precisions to measure: the flag's, else the device's usual ones.
fn precisions(args: &ForwardArgs, base: &ctxd_models::runtime::Runtime) -> Vec<String> {
    if !args.precisions.is_empty() {
        return args.precisions.clone();
    }
    if base.device.starts_with("cuda") || (base.device == "auto" && ctxd_models::runtime::cuda_answers()) {
        return vec!["f16".into(), "f32".into()];
    }
    let native_bf16 = ctxd_models::dnnl::Dnnl::load().map(|d| d.native_bf16()).unwrap_or(false);
    let mut out = vec!["f32".to_string()];
    if native_bf16 {
        out.push("bf16".into());
    }
    out
}

fn read_reference(path: &Path) -> Result<Reference> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading reference vectors {}", path.display()))?;
    let r: Reference = serde_json::from_str(&text)
        .with_context(|| format!("{}: expected {{\"texts\": [...], \"vectors\": [[...]]}}", path.display()))?;
    anyhow::ensure!(
        r.texts.len() == r.vectors.len() && !r.texts.is_empty(),
        "{}: {} texts but {} vectors",
        path.display(),
        r.texts.len(),
        r.vectors.len()
    );
    Ok(r)
}

/// Full rows of `len` real tokens: a paragraph tokenized (the tokenizer adds [CLS] … [SEP] and
/// truncates to the window), cut to `len` with its closing token kept.
fn sequence(embedder: &dyn Embedder, len: usize) -> Result<Vec<u32>> {
    let paragraph = "The daemon watches a repository, chunks every file by its definitions and embeds each \
        chunk; fn search(index: &Index, query: &str) -> Vec<Hit> { index.hybrid(query).take(10).collect() } \
        Ranked, cited, token-budgeted context comes back in milliseconds, always fresh. ";
    let text = paragraph.repeat(1 + 4 * len / paragraph.len().max(1) + 8);
    let mut ids = embedder.encode(&[text])?.pop().unwrap_or_default();
    anyhow::ensure!(ids.len() >= len, "the tokenizer gave {} tokens, fewer than --seq-len {len}", ids.len());
    let last = *ids.last().expect("at least one token");
    ids.truncate(len);
    ids[len - 1] = last;
    Ok(ids)
}

fn read_texts(path: &Path) -> Result<Vec<String>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading texts {}", path.display()))?;
    let texts = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .enumerate()
        .map(|(i, l)| {
            serde_json::from_str(l).with_context(|| format!("{} line {}: not a JSON string", path.display(), i + 1))
        })
        .collect::<Result<Vec<String>>>()?;
    anyhow::ensure!(!texts.is_empty(), "{} holds no texts", path.display());
    Ok(texts)
}

/// Embeds `texts` through the embedding service, in its bulk lane as the indexer does, after a warm-up;
/// texts per second.
fn service_throughput(embedder: Box<dyn Embedder>, texts: &[String]) -> Result<f64> {
    let service = EmbedService::spawn(embedder, EmbedServiceConfig::default());
    let rt = tokio::runtime::Builder::new_current_thread().build().context("starting a runtime")?;
    rt.block_on(service.embed_bulk(texts.iter().take(64).cloned().collect())).context("warm-up texts")?;
    let started = Instant::now();
    let vectors = rt.block_on(service.embed_bulk(texts.to_vec()))?;
    let secs = started.elapsed().as_secs_f64();
    anyhow::ensure!(vectors.len() == texts.len(), "{} vectors for {} texts", vectors.len(), texts.len());
    Ok(texts.len() as f64 / secs)
}

fn measure(
    mut picked: Picked,
    args: &ForwardArgs,
    reference: Option<&Reference>,
    texts: Option<&[String]>,
) -> Result<Row> {
    let row = sequence(picked.embedder.as_ref(), args.seq_len)?;
    let mut seq_per_s = Vec::new();
    for &batch in &args.batches {
        let ids = vec![row.clone(); batch];
        picked.embedder.forward(&ids).context("warm-up batch")?;
        let (started, mut runs) = (Instant::now(), 0usize);
        while runs < 2 || started.elapsed().as_secs_f64() < args.min_seconds {
            let out = picked.embedder.forward(&ids)?;
            anyhow::ensure!(out.len() == batch, "the model returned {} vectors for {batch} sequences", out.len());
            runs += 1;
        }
        seq_per_s.push((batch, (runs * batch) as f64 / started.elapsed().as_secs_f64()));
    }
    let (mut cosine_min, mut cosine_mean) = (None, None);
    if let Some(r) = reference {
        let got = picked.embedder.embed(&r.texts)?;
        let cos: Vec<f64> = got.iter().zip(&r.vectors).map(|(a, b)| cosine(a, b)).collect();
        cosine_min = cos.iter().copied().reduce(f64::min);
        cosine_mean = Some(cos.iter().sum::<f64>() / cos.len() as f64);
    }
    let texts_per_s = texts.map(|t| service_throughput(picked.embedder, t)).transpose()?;
    Ok(Row {
        device: picked.device,
        backend: picked.backend.to_string(),
        precision: picked.precision,
        seq_per_s,
        cosine_min,
        cosine_mean,
        texts_per_s,
        refused: None,
    })
}

fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a.iter().zip(b).map(|(x, y)| f64::from(*x) * f64::from(*y)).sum();
    let na: f64 = a.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
    let nb: f64 = b.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
    dot / (na * nb).max(1e-12)
}

fn print_table(model: &str, args: &ForwardArgs, rows: &[Row]) {
    println!("ctxd forward pass: {model}, {} tokens per sequence, sequences/s", args.seq_len);
    let batches: Vec<String> = args.batches.iter().map(|b| format!("batch {b}")).collect();
    println!(
        "| device | backend | precision | {} | cosine to reference (min / mean) | texts/s end to end |",
        batches.join(" | ")
    );
    println!("|---|---|---|{}---|---:|", "---:|".repeat(args.batches.len()));
    for r in rows {
        if let Some(why) = &r.refused {
            println!("| {} | {} | {} | refused: {why} |", r.device, r.backend, r.precision);
            continue;
        }
        let cells: Vec<String> = r.seq_per_s.iter().map(|(_, s)| format!("{s:.0}")).collect();
        let cos = match (r.cosine_min, r.cosine_mean) {
            (Some(min), Some(mean)) => format!("{min:.6} / {mean:.6}"),
            _ => "-".into(),
        };
        let e2e = r.texts_per_s.map_or("-".into(), |t| format!("{t:.0}"));
        println!("| {} | {} | {} | {} | {cos} | {e2e} |", r.device, r.backend, r.precision, cells.join(" | "));
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn cosine_of_equal_and_opposite_vectors() {
        assert!((super::cosine(&[1.0, 2.0], &[2.0, 4.0]) - 1.0).abs() < 1e-12);
        assert!((super::cosine(&[1.0, 0.0], &[-1.0, 0.0]) + 1.0).abs() < 1e-12);
        assert_eq!(super::cosine(&[0.0, 0.0], &[1.0, 0.0]), 0.0);
    }
}
