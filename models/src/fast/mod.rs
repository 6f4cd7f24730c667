//! The fast CPU embedder: a BERT encoder forward pass without padding, on oneDNN matmuls.
//!
//! Why not candle's `BertModel` on the CPU: candle's f32 matmul uses AVX2 kernels and runs
//! every element-wise op as its own pass over a padded `[batch, longest, hidden]` tensor; on a
//! 2-core Zen 4 that reaches ~0.5× sentence-transformers on PyTorch. This module computes the
//! same function (checked against sentence-transformers' vectors in `tests/reference.rs`) with
//! three changes:
//!
//! 1. **No padding.** The tokens of all texts in a batch are concatenated into one
//!    `[tokens, hidden]` matrix; the dense layers (≈95% of the FLOPs) run on it as single large
//!    matmuls. Only attention is per text, padded to a multiple of 16 positions with the padded
//!    keys masked out of the softmax, so padding changes nothing.
//! 2. **oneDNN matmuls with fused epilogues**: bias, GELU and the residual add run inside the
//!    matmul kernel ([`crate::dnnl::PostOp`]); weights are reordered once into the kernel's
//!    preferred blocked layout.
//! 3. **bf16 where the CPU has it** ([`Precision::Bf16`]): matmul inputs are rounded to bf16,
//!    products are accumulated in f32, and the residual stream, layer norms, softmax and
//!    pooling stay in f32. On CPUs with AVX512-BF16 or AMX this doubles to triples matmul
//!    throughput; vectors stay within cosine 0.999 of f32 (measured by the benchmark and the
//!    reference test). [`Precision::F32`] runs the same code with f32 matmuls.
//!
//! `weights` reads the encoder's tensors, `worker` runs the forward pass; this module owns
//! the public [`FastBert`], its worker threads and how a batch is shared between them.
//!
//! Parallelism: one worker thread per core (configurable), each with its own oneDNN engine,
//! primitives and scratch buffers, running kernels single-threaded. A batch is split into
//! one part per worker, balanced by tokens, so a single request still uses every core and
//! no thread pool is stacked on another.

mod weights;
mod worker;

use std::sync::{mpsc, Arc, Mutex};

use tokenizers::Tokenizer;

use crate::dnnl::{DataType, Dnnl};
use crate::embedder::{Embedder, PassOutput};
use crate::{error::ModelError, loaded::LoadedModel};
use weights::EncoderWeights;
use worker::Worker;

/// Matmul precision of the fast CPU path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precision {
    /// f32 everywhere.
    F32,
    /// bf16 matmul inputs with f32 accumulation; everything else f32.
    Bf16,
}

impl Precision {
    fn dt(self) -> DataType {
        match self {
            Precision::F32 => DataType::F32,
            Precision::Bf16 => DataType::Bf16,
        }
    }

    /// Name used in config and logs.
    pub fn name(self) -> &'static str {
        match self {
            Precision::F32 => "f32",
            Precision::Bf16 => "bf16",
        }
    }
}

type Reply = mpsc::Sender<(usize, Result<Vec<Vec<f32>>, ModelError>)>;

struct Job {
    part: usize,
    seqs: Vec<Vec<u32>>,
    reply: Reply,
    /// What to return per sequence.
    output: PassOutput,
}

/// The fast CPU embedder (see the module docs).
pub struct FastBert {
    tokenizer: Tokenizer,
    model_id: String,
    dim: usize,
    workers: usize,
    precision: Precision,
    jobs: mpsc::Sender<Job>,
    /// Where oneDNN was loaded from and its version, for logs.
    pub backend: String,
    reason: String,
    isa: &'static str,
}

/// The precision to run with and why: `requested` when given (bf16 only where the CPU runs
/// it natively: oneDNN has no bf16 matmul for plain AVX2, and emulated bf16 would be slower
/// than f32), else bf16 where it is native and faster than f32 ([`Dnnl::auto_bf16`]).
fn choose_precision(dnnl: &Dnnl, requested: Option<Precision>) -> Result<(Precision, String), ModelError> {
    match requested {
        Some(Precision::Bf16) if !dnnl.native_bf16() => Err(ModelError::Bf16Unsupported { reason: dnnl.bf16_reason() }),
        Some(p) => Ok((p, format!("{} as configured ({})", p.name(), dnnl.bf16_reason()))),
        None => match dnnl.auto_bf16() {
            (true, why) => Ok((Precision::Bf16, format!("auto picked bf16: {why}"))),
            (false, why) => Ok((Precision::F32, format!("auto picked f32: {why}"))),
        },
    }
}

impl FastBert {
    /// Loads the model and starts `workers` threads (0 = one per core). `precision` `None`
    /// picks bf16 where the CPU runs it natively, else f32. Fails when oneDNN is not available
    /// or the model is not a plain BERT encoder.
    pub fn load(loaded: &LoadedModel, precision: Option<Precision>, workers: usize) -> Result<Self, ModelError> {
        let dnnl = Dnnl::load()?;
        let (precision, reason) = choose_precision(&dnnl, precision)?;
        let tokenizer = loaded.tokenizer()?;
        let model = Arc::new(EncoderWeights::load(loaded)?);
        if model.position.len() / model.dims.hidden < loaded.max_seq_len() {
            return Err(loaded.config_error("max_position_embeddings is smaller than the sequence window"));
        }
        let workers =
            if workers == 0 { std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1) } else { workers };
        let (jobs, rx) = mpsc::channel::<Job>();
        let rx = Arc::new(Mutex::new(rx));
        let (ready_tx, ready_rx) = mpsc::channel();
        for n in 0..workers {
            let (rx, model, dnnl, ready) = (rx.clone(), model.clone(), dnnl.clone(), ready_tx.clone());
            std::thread::Builder::new()
                .name(format!("ctxd-embed-{n}"))
                .spawn(move || {
                    dnnl.single_threaded();
                    let mut worker = match Worker::new(model, &dnnl, precision.dt()) {
                        Ok(w) => w,
                        Err(e) => {
                            let _ = ready.send(Err(e));
                            return;
                        }
                    };
                    // Warm-up: creates the primitives and reorders the weights for a typical shape.
                    let warm = worker.forward(&[vec![101; 40], vec![101; 7]], PassOutput::Pooled).map(|_| ());
                    let failed = warm.is_err();
                    let _ = ready.send(warm);
                    if failed {
                        return;
                    }
                    loop {
                        let job = match rx.lock() {
                            Ok(rx) => rx.recv(),
                            Err(_) => return,
                        };
                        let Ok(job) = job else { return };
                        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                            worker.forward(&job.seqs, job.output)
                        }))
                        .unwrap_or_else(|_| Err(ModelError::Backend("embedding worker panicked".into())));
                        let _ = job.reply.send((job.part, result));
                    }
                })
                .map_err(|e| ModelError::Backend(format!("spawning embedding worker: {e}")))?;
        }
        drop(ready_tx);
        for _ in 0..workers {
            ready_rx.recv().map_err(|_| ModelError::Backend("embedding worker died during start-up".into()))??;
        }
        let backend = format!("onednn {} ({}), {} workers, {}", dnnl.version, dnnl.path, workers, precision.name());
        let isa = dnnl.isa_name();
        Ok(Self {
            tokenizer,
            model_id: loaded.model_id(),
            dim: model.dims.hidden,
            workers,
            precision,
            jobs,
            backend,
            reason,
            isa,
        })
    }

    /// Why this precision: configured, or what `auto` found on the CPU (for the log line).
    pub fn precision_reason(&self) -> &str {
        &self.reason
    }

    /// The instruction set oneDNN runs here (`avx2`, `avx512_core_bf16`, …).
    pub fn isa(&self) -> &'static str {
        self.isa
    }

    /// The matmul precision in use.
    pub fn precision(&self) -> Precision {
        self.precision
    }
}

/// Splits `lens` (in order) into at most `parts` contiguous ranges of about equal token sums.
pub fn split_balanced(lens: &[usize], parts: usize) -> Vec<std::ops::Range<usize>> {
    let total: usize = lens.iter().sum();
    let parts = parts.clamp(1, lens.len().max(1));
    let target = total.div_ceil(parts).max(1);
    let mut out = Vec::with_capacity(parts);
    let (mut start, mut acc) = (0, 0);
    for (i, &l) in lens.iter().enumerate() {
        acc += l;
        if acc >= target && out.len() + 1 < parts {
            out.push(start..i + 1);
            start = i + 1;
            acc = 0;
        }
    }
    if start < lens.len() {
        out.push(start..lens.len());
    }
    out
}

impl Embedder for FastBert {
    crate::embedder::identity_from_fields!();

    fn forward(&mut self, ids: &[Vec<u32>]) -> Result<Vec<Vec<f32>>, ModelError> {
        self.run(ids, PassOutput::Pooled)
    }

    fn forward_tokens(&mut self, ids: &[Vec<u32>]) -> Result<Vec<Vec<f32>>, ModelError> {
        self.run(ids, PassOutput::Tokens)
    }

    fn forward_both(&mut self, ids: &[Vec<u32>]) -> Result<Vec<Vec<f32>>, ModelError> {
        self.run(ids, PassOutput::Both)
    }

    fn padded_tokens(&self, lens: &[usize]) -> usize {
        lens.iter().sum()
    }
}

impl FastBert {
    /// Splits `ids` over the workers and gathers their outputs in order.
    fn run(&mut self, ids: &[Vec<u32>], output: PassOutput) -> Result<Vec<Vec<f32>>, ModelError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let lens: Vec<usize> = ids.iter().map(Vec::len).collect();
        let ranges = split_balanced(&lens, self.workers);
        let (reply, results) = mpsc::channel();
        for (part, r) in ranges.iter().enumerate() {
            let job = Job { part, seqs: ids[r.clone()].to_vec(), output, reply: reply.clone() };
            self.jobs.send(job).map_err(|_| ModelError::ServiceClosed)?;
        }
        drop(reply);
        let mut parts: Vec<Option<Vec<Vec<f32>>>> = vec![None; ranges.len()];
        for _ in 0..ranges.len() {
            let (part, result) = results.recv().map_err(|_| ModelError::ServiceClosed)?;
            parts[part] = Some(result?);
        }
        Ok(parts.into_iter().flatten().flatten().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::split_balanced;

    #[test]
    fn split_balances_tokens_and_keeps_order() {
        let lens = [100, 10, 10, 10, 60, 10];
        let parts = split_balanced(&lens, 2);
        assert_eq!(parts, vec![0..1, 1..6]);
        assert_eq!(split_balanced(&[5], 4), vec![0..1]);
        assert_eq!(split_balanced(&[1, 1, 1, 1], 2), vec![0..2, 2..4]);
        assert!(split_balanced(&[], 2).is_empty());
    }
}
