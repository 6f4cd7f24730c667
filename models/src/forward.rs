//! The forward pass alone, in sequences per second, and the embedding service end to end: what
//! `ctxd bench --forward` and the `ctxd-forward` binary (the small build a GPU check carries,
//! `scripts/gpu-check.sh`) measure, to hold against PyTorch on the same machine.
//!
//! The sequences are real tokens at a fixed length (default 256, all-MiniLM-L6-v2's window): a
//! long English and code paragraph tokenized and cut to the length, so every row of a batch is
//! full and no padding is measured. Each cell runs one warm-up batch, then batches until
//! `min_seconds` have passed (at least two), and reports sequences per second over the timed
//! batches. With reference vectors (texts and vectors computed once elsewhere, e.g.
//! `models/tests/fixtures/reference.json` from sentence-transformers on a CPU) each precision
//! also embeds those texts and reports the lowest and the mean cosine; with a JSON-lines file of
//! texts it embeds them through [`EmbedService`] in its bulk lane, as the indexer does
//! (tokenizing, length-sorted batches capped by tokens, forward, pooling): texts per second.
//!
//! Precisions default by device: `f16,f32` on a GPU; `f32` on the CPU, plus `bf16` where the
//! CPU has native bf16. A precision the device refuses gets a row saying why, not a failure.
//! Vectors holding NaN or infinity are counted (`non_finite`) and left out of the cosine, so a
//! broken precision shows as broken, not as a missing figure. With `profile`, the largest batch
//! runs a few more passes with the candle encoder's [`StageClock`](crate::encoder::StageClock)
//! on: milliseconds per pass in each stage (embedders without a clock leave it empty).

use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::Serialize;

use crate::embedder::Embedder;
use crate::error::ModelError;
use crate::loaded::LoadedModel;
use crate::runtime::{Picked, Runtime};
use crate::service::{EmbedService, EmbedServiceConfig};
use ctxd_choice::{DeviceChoice, PrecisionChoice};

/// What to measure.
#[derive(Debug, Clone)]
pub struct ForwardSpec {
    /// Batch sizes of the forward cells.
    pub batches: Vec<usize>,
    /// Tokens per sequence (at most the model's window).
    pub seq_len: usize,
    /// Precisions; empty = the device's usual ones.
    pub precisions: Vec<PrecisionChoice>,
    /// Seconds each cell runs at least, after one warm-up batch.
    pub min_seconds: f64,
    /// `{"texts": [...], "vectors": [[...], ...]}` to compare each precision's vectors with.
    pub reference: Option<PathBuf>,
    /// JSON lines, one text each, embedded end to end per precision.
    pub texts: Option<PathBuf>,
    /// Time each stage of the largest batch's forward pass (device synchronised per stage).
    pub profile: bool,
}

impl Default for ForwardSpec {
    fn default() -> Self {
        Self {
            batches: vec![32, 128, 512],
            seq_len: 256,
            precisions: Vec::new(),
            min_seconds: 2.0,
            reference: None,
            texts: None,
            profile: false,
        }
    }
}

/// What failed while measuring.
#[derive(Debug, thiserror::Error)]
pub enum ForwardError {
    #[error("reading {what} {path}: {source}")]
    Read {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Format { path: PathBuf, message: String },
    #[error("{0}")]
    Invalid(String),
    #[error("loading model {spec}: {source}")]
    Load {
        spec: String,
        #[source]
        source: ModelError,
    },
    #[error("{what}: {source}")]
    Model {
        what: &'static str,
        #[source]
        source: ModelError,
    },
    #[error("starting a runtime for the embedding service: {0}")]
    Runtime(#[source] std::io::Error),
}

/// One precision's figures.
#[derive(Debug, Serialize)]
pub struct ForwardRow {
    pub device: String,
    pub backend: String,
    pub precision: String,
    /// Why this device and precision ([`Picked::reason`]); empty when refused.
    pub reason: String,
    /// `(batch, sequences/s)` per batch size.
    pub seq_per_s: Vec<(usize, f64)>,
    /// Lowest and mean cosine to the reference vectors (finite vectors only).
    pub cosine_min: Option<f64>,
    pub cosine_mean: Option<f64>,
    /// Vectors holding NaN or infinity: of the reference texts' and of one forward batch's.
    pub non_finite: usize,
    /// With `profile`: `(stage, milliseconds per pass)` at the largest batch.
    pub stages: Vec<(String, f64)>,
    /// Texts per second embedded end to end.
    pub texts_per_s: Option<f64>,
    /// Why this precision did not run.
    pub refused: Option<String>,
}

/// The figures of one run, one row per precision.
#[derive(Debug, Serialize)]
pub struct ForwardReport {
    pub model: String,
    pub seq_len: usize,
    pub batches: Vec<usize>,
    pub rows: Vec<ForwardRow>,
}

#[derive(serde::Deserialize)]
struct Reference {
    texts: Vec<String>,
    vectors: Vec<Vec<f32>>,
}

/// Measures the model `model` with the runtime settings `base` (their precision replaced per
/// row); `on_load` hears each precision's start-up line ([`Picked::summary`]) as it loads.
pub fn run(
    spec: &ForwardSpec,
    model: &str,
    base: &Runtime,
    on_load: &mut dyn FnMut(&str),
) -> Result<ForwardReport, ForwardError> {
    let loaded = LoadedModel::resolve(model).map_err(|source| ForwardError::Load { spec: model.into(), source })?;
    if !(2..=loaded.max_seq_len()).contains(&spec.seq_len) {
        return Err(ForwardError::Invalid(format!(
            "--seq-len {} is outside 2..={} (the model's window)",
            spec.seq_len,
            loaded.max_seq_len()
        )));
    }
    if spec.batches.is_empty() || spec.batches.contains(&0) {
        return Err(ForwardError::Invalid("--batches needs sizes above 0".into()));
    }
    let reference = spec.reference.as_deref().map(read_reference).transpose()?;
    let texts = spec.texts.as_deref().map(read_texts).transpose()?;
    let mut rows = Vec::new();
    for precision in precisions(spec, base) {
        let rt = Runtime { precision, ..base.clone() };
        let started = Instant::now();
        let row = match rt.load(&loaded) {
            Ok(picked) => {
                on_load(&format!("{} (loaded in {:.1}s)", picked.summary(), started.elapsed().as_secs_f64()));
                measure(picked, spec, reference.as_ref(), texts.as_deref())?
            }
            Err(e) => ForwardRow {
                device: rt.device.to_string(),
                backend: rt.backend.to_string(),
                precision: precision.to_string(),
                reason: String::new(),
                seq_per_s: Vec::new(),
                cosine_min: None,
                cosine_mean: None,
                non_finite: 0,
                stages: Vec::new(),
                texts_per_s: None,
                refused: Some(e.to_string()),
            },
        };
        rows.push(row);
    }
    Ok(ForwardReport { model: loaded.model_id(), seq_len: spec.seq_len, batches: spec.batches.clone(), rows })
}

/// The precisions to measure: the spec's, else the device's usual ones.
fn precisions(spec: &ForwardSpec, base: &Runtime) -> Vec<PrecisionChoice> {
    if !spec.precisions.is_empty() {
        return spec.precisions.clone();
    }
    let gpu = match base.device {
        DeviceChoice::Cuda(_) => true,
        DeviceChoice::Auto => crate::runtime::cuda_answers(),
        DeviceChoice::Cpu => false,
    };
    if gpu {
        return vec![PrecisionChoice::F16, PrecisionChoice::F32];
    }
    let native_bf16 = crate::dnnl::Dnnl::load().map(|d| d.native_bf16()).unwrap_or(false);
    let mut out = vec![PrecisionChoice::F32];
    if native_bf16 {
        out.push(PrecisionChoice::Bf16);
    }
    out
}

fn read(what: &'static str, path: &Path) -> Result<String, ForwardError> {
    std::fs::read_to_string(path).map_err(|source| ForwardError::Read { what, path: path.into(), source })
}

fn read_reference(path: &Path) -> Result<Reference, ForwardError> {
    let format = |message: String| ForwardError::Format { path: path.into(), message };
    let r: Reference = serde_json::from_str(&read("reference vectors", path)?)
        .map_err(|e| format(format!("expected {{\"texts\": [...], \"vectors\": [[...]]}}: {e}")))?;
    if r.texts.len() != r.vectors.len() || r.texts.is_empty() {
        return Err(format(format!("{} texts but {} vectors", r.texts.len(), r.vectors.len())));
    }
    Ok(r)
}

fn read_texts(path: &Path) -> Result<Vec<String>, ForwardError> {
    let format = |message: String| ForwardError::Format { path: path.into(), message };
    let texts = read("texts", path)?
        .lines()
        .filter(|l| !l.trim().is_empty())
        .enumerate()
        .map(|(i, l)| serde_json::from_str(l).map_err(|e| format(format!("line {}: not a JSON string: {e}", i + 1))))
        .collect::<Result<Vec<String>, _>>()?;
    if texts.is_empty() {
        return Err(format("holds no texts".into()));
    }
    Ok(texts)
}

/// Full rows of `len` real tokens: a paragraph tokenized (the tokenizer adds [CLS] … [SEP] and
/// truncates to the window), cut to `len` with its closing token kept.
fn sequence(embedder: &dyn Embedder, len: usize) -> Result<Vec<u32>, ForwardError> {
    let paragraph = "The daemon watches a repository, chunks every file by its definitions and embeds each \
        chunk; fn search(index: &Index, query: &str) -> Vec<Hit> { index.hybrid(query).take(10).collect() } \
        Ranked, cited, token-budgeted context comes back in milliseconds, always fresh. ";
    let text = paragraph.repeat(1 + 4 * len / paragraph.len().max(1) + 8);
    let mut ids = embedder
        .encode(&[text])
        .map_err(|source| ForwardError::Model { what: "tokenizing", source })?
        .pop()
        .unwrap_or_default();
    if ids.len() < len {
        return Err(ForwardError::Invalid(format!(
            "the tokenizer gave {} tokens, fewer than --seq-len {len}",
            ids.len()
        )));
    }
    let last = ids[ids.len() - 1];
    ids.truncate(len);
    ids[len - 1] = last;
    Ok(ids)
}

/// Embeds `texts` through the embedding service, in its bulk lane as the indexer does, after a
/// warm-up; texts per second.
fn service_throughput(embedder: Box<dyn Embedder>, texts: &[String]) -> Result<f64, ForwardError> {
    let model = |what| move |source| ForwardError::Model { what, source };
    let service = EmbedService::spawn(embedder, EmbedServiceConfig::default());
    let rt = tokio::runtime::Builder::new_current_thread().build().map_err(ForwardError::Runtime)?;
    rt.block_on(service.embed_bulk(texts.iter().take(64).cloned().collect())).map_err(model("warm-up texts"))?;
    let started = Instant::now();
    let vectors = rt.block_on(service.embed_bulk(texts.to_vec())).map_err(model("embedding the texts"))?;
    let secs = started.elapsed().as_secs_f64();
    if vectors.len() != texts.len() {
        return Err(ForwardError::Invalid(format!("{} vectors for {} texts", vectors.len(), texts.len())));
    }
    Ok(texts.len() as f64 / secs)
}

fn measure(
    mut picked: Picked,
    spec: &ForwardSpec,
    reference: Option<&Reference>,
    texts: Option<&[String]>,
) -> Result<ForwardRow, ForwardError> {
    let forward = |source| ForwardError::Model { what: "forward pass", source };
    let row = sequence(picked.embedder.as_ref(), spec.seq_len)?;
    let finite = |v: &Vec<f32>| v.iter().all(|x| x.is_finite());
    let mut seq_per_s = Vec::new();
    let mut non_finite = 0;
    for &batch in &spec.batches {
        let ids = vec![row.clone(); batch];
        let first = picked.embedder.forward(&ids).map_err(forward)?;
        if batch == spec.batches[0] {
            non_finite += first.iter().filter(|v| !finite(v)).count();
        }
        let (started, mut runs) = (Instant::now(), 0usize);
        while runs < 2 || started.elapsed().as_secs_f64() < spec.min_seconds {
            let out = picked.embedder.forward(&ids).map_err(forward)?;
            if out.len() != batch {
                return Err(ForwardError::Invalid(format!(
                    "the model returned {} vectors for {batch} sequences",
                    out.len()
                )));
            }
            runs += 1;
        }
        seq_per_s.push((batch, (runs * batch) as f64 / started.elapsed().as_secs_f64()));
    }
    let mut stages = Vec::new();
    if spec.profile {
        let batch = spec.batches.iter().copied().max().unwrap_or(1);
        let ids = vec![row.clone(); batch];
        if let Some(clock) = picked.embedder.stage_clock() {
            clock.enable();
        }
        for _ in 0..3 {
            picked.embedder.forward(&ids).map_err(forward)?;
        }
        if let Some(clock) = picked.embedder.stage_clock() {
            clock.disable();
            stages = clock.per_pass_ms();
        }
    }
    let (mut cosine_min, mut cosine_mean) = (None, None);
    if let Some(r) = reference {
        let got =
            picked.embedder.embed(&r.texts).map_err(|source| ForwardError::Model { what: "reference", source })?;
        non_finite += got.iter().filter(|v| !finite(v)).count();
        let cos: Vec<f64> = got.iter().zip(&r.vectors).filter(|(a, _)| finite(a)).map(|(a, b)| cosine(a, b)).collect();
        cosine_min = cos.iter().copied().reduce(f64::min);
        cosine_mean = (!cos.is_empty()).then(|| cos.iter().sum::<f64>() / cos.len() as f64);
    }
    let texts_per_s = texts.map(|t| service_throughput(picked.embedder, t)).transpose()?;
    Ok(ForwardRow {
        device: picked.device,
        backend: picked.backend.to_string(),
        precision: picked.precision,
        reason: picked.reason,
        seq_per_s,
        cosine_min,
        cosine_mean,
        non_finite,
        stages,
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

impl ForwardReport {
    /// The figures as a Markdown table, one row per precision.
    pub fn table(&self) -> String {
        let batches = &self.batches;
        let heads: Vec<String> = batches.iter().map(|b| format!("batch {b}")).collect();
        let mut out = format!("ctxd forward pass: {}, {} tokens per sequence, sequences/s\n", self.model, self.seq_len);
        out += &format!(
            "| device | backend | precision | {} | cosine to reference (min / mean) | texts/s end to end |\n",
            heads.join(" | ")
        );
        out += &format!("|---|---|---|{}---|---:|\n", "---:|".repeat(batches.len()));
        for r in &self.rows {
            if let Some(why) = &r.refused {
                out += &format!("| {} | {} | {} | refused: {why} |\n", r.device, r.backend, r.precision);
                continue;
            }
            let cells: Vec<String> = r.seq_per_s.iter().map(|(_, s)| format!("{s:.0}")).collect();
            let mut cos = match (r.cosine_min, r.cosine_mean) {
                (Some(min), Some(mean)) => format!("{min:.6} / {mean:.6}"),
                _ => "-".into(),
            };
            if r.non_finite > 0 {
                cos += &format!(" ({} vectors NaN/inf)", r.non_finite);
            }
            let e2e = r.texts_per_s.map_or("-".into(), |t| format!("{t:.0}"));
            out += &format!(
                "| {} | {} | {} | {} | {cos} | {e2e} |\n",
                r.device,
                r.backend,
                r.precision,
                cells.join(" | ")
            );
        }
        for r in self.rows.iter().filter(|r| r.refused.is_none() && !r.stages.is_empty()) {
            let total: f64 = r.stages.iter().map(|(_, ms)| ms).sum();
            let batch = self.batches.iter().max().copied().unwrap_or(0);
            out += &format!(
                "\n{} {} {}: {total:.2} ms per pass at batch {batch}, by stage\n",
                r.device, r.backend, r.precision
            );
            out += "| stage | ms per pass | share |\n|---|---:|---:|\n";
            for (stage, ms) in &r.stages {
                out += &format!("| {stage} | {ms:.2} | {:.1}% |\n", 100.0 * ms / total.max(1e-12));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::{cosine, ForwardReport, ForwardRow};

    #[test]
    fn cosine_of_equal_and_opposite_vectors() {
        assert!((cosine(&[1.0, 2.0], &[2.0, 4.0]) - 1.0).abs() < 1e-12);
        assert!((cosine(&[1.0, 0.0], &[-1.0, 0.0]) + 1.0).abs() < 1e-12);
        assert_eq!(cosine(&[0.0, 0.0], &[1.0, 0.0]), 0.0);
    }

    #[test]
    fn the_table_has_a_cell_per_batch_and_says_why_a_row_was_refused() {
        let row = |precision: &str, refused: Option<&str>| ForwardRow {
            device: "cpu".into(),
            backend: "onednn".into(),
            precision: precision.into(),
            reason: String::new(),
            seq_per_s: if refused.is_some() { vec![] } else { vec![(32, 31.4), (128, 32.6)] },
            cosine_min: Some(0.9999991),
            cosine_mean: Some(1.0),
            non_finite: if precision == "bf16" { 3 } else { 0 },
            stages: vec![("gemm".into(), 3.0), ("softmax".into(), 1.0)],
            texts_per_s: None,
            refused: refused.map(str::to_string),
        };
        let report = ForwardReport {
            model: "m".into(),
            seq_len: 256,
            batches: vec![32, 128],
            rows: vec![
                row("f32", None),
                row("f16", Some("precision 'f16' runs on cuda devices only")),
                row("bf16", None),
            ],
        };
        let table = report.table();
        assert!(table.contains("0.999999 / 1.000000 (3 vectors NaN/inf) |"), "{table}");
        assert!(table.contains("cpu onednn f32: 4.00 ms per pass at batch 128, by stage"), "{table}");
        assert!(table.contains("| gemm | 3.00 | 75.0% |"), "{table}");
        assert!(!table.contains("cpu onednn f16: 4.00"), "a refused row has no stages: {table}");
        assert!(table.contains("| batch 32 | batch 128 |"), "{table}");
        assert!(table.contains("| cpu | onednn | f32 | 31 | 33 | 0.999999 / 1.000000 | - |"), "{table}");
        assert!(table.contains("| f16 | refused: precision 'f16' runs on cuda devices only |"), "{table}");
        // A column per batch asked for, even when no precision ran.
        let all_refused = ForwardReport { rows: report.rows.into_iter().skip(1).take(1).collect(), ..report };
        assert!(all_refused.table().contains("| precision | batch 32 | batch 128 |"), "{}", all_refused.table());
    }
}
