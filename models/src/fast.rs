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
//! Parallelism: one worker thread per core (configurable), each with its own oneDNN engine,
//! primitives and scratch buffers, running kernels single-threaded. A batch is split into
//! one part per worker, balanced by tokens, so a single request still uses every core and
//! no thread pool is stacked on another.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{mpsc, Arc, Mutex};

use candle_core::{DType, Device};
use tokenizers::Tokenizer;

use crate::bert::{encode_with, load_tokenizer, read_json, window};
use crate::dnnl::{self, DataType, Dnnl, Engine, PostOp, Primitive, Weights};
use crate::kernels::{self, Out};
use crate::{resolve::ModelFiles, Embedder, ModelError};

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

/// Attention is computed per text on lengths rounded up to this (bounds the number of
/// distinct matmul shapes; padded keys are masked).
const ATTN_PAD: usize = 16;
/// Token rows are rounded up to this for the dense layers (bounds distinct shapes).
const ROW_PAD: usize = 32;
/// Primitives a worker keeps (each holds JIT code); past this the cache starts over at the
/// next forward pass (never during one: a pass holds on to what it created).
const MAX_PRIMITIVES: usize = 512;

#[derive(Debug, Clone, Copy)]
struct Dims {
    hidden: usize,
    heads: usize,
    head_dim: usize,
    inter: usize,
    eps: f32,
}

struct LayerWeights {
    qkv: Arc<Vec<f32>>,
    qkv_bias: Arc<Vec<f32>>,
    attn_out: Arc<Vec<f32>>,
    attn_out_bias: Arc<Vec<f32>>,
    ln1: (Arc<Vec<f32>>, Arc<Vec<f32>>),
    inter: Arc<Vec<f32>>,
    inter_bias: Arc<Vec<f32>>,
    out: Arc<Vec<f32>>,
    out_bias: Arc<Vec<f32>>,
    ln2: (Arc<Vec<f32>>, Arc<Vec<f32>>),
}

struct Model {
    dims: Dims,
    word: Vec<f32>,
    position: Vec<f32>,
    token_type: Vec<f32>,
    emb_ln: (Vec<f32>, Vec<f32>),
    layers: Vec<LayerWeights>,
}

fn tensor(map: &HashMap<String, candle_core::Tensor>, name: &str, path: &Path) -> Result<Vec<f32>, ModelError> {
    let t = map
        .get(name)
        .or_else(|| map.get(&format!("bert.{name}")))
        .or_else(|| {
            // Old checkpoints call layer-norm parameters gamma/beta.
            let old = name.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta");
            map.get(&old).or_else(|| map.get(&format!("bert.{old}")))
        })
        .ok_or_else(|| ModelError::Config { path: path.to_path_buf(), message: format!("tensor {name} missing") })?;
    Ok(t.to_dtype(DType::F32)?.flatten_all()?.to_vec1::<f32>()?)
}

impl Model {
    fn load(files: &ModelFiles) -> Result<Self, ModelError> {
        let cfg = read_json(&files.config)?;
        let get = |k: &str| cfg[k].as_u64().map(|v| v as usize);
        let bad = |m: &str| ModelError::Config { path: files.config.clone(), message: m.to_string() };
        if cfg["model_type"].as_str().is_some_and(|t| t != "bert") {
            return Err(bad("the fast cpu embedder runs bert models only"));
        }
        if cfg["hidden_act"].as_str().is_some_and(|a| a != "gelu") {
            return Err(bad("the fast cpu embedder needs hidden_act = gelu"));
        }
        if cfg["position_embedding_type"].as_str().is_some_and(|p| p != "absolute") {
            return Err(bad("the fast cpu embedder needs absolute position embeddings"));
        }
        let hidden = get("hidden_size").ok_or_else(|| bad("hidden_size missing"))?;
        let heads = get("num_attention_heads").ok_or_else(|| bad("num_attention_heads missing"))?;
        let inter = get("intermediate_size").ok_or_else(|| bad("intermediate_size missing"))?;
        let layers = get("num_hidden_layers").ok_or_else(|| bad("num_hidden_layers missing"))?;
        if heads == 0 || hidden % heads != 0 {
            return Err(bad("hidden_size must be a multiple of num_attention_heads"));
        }
        let eps = cfg["layer_norm_eps"].as_f64().unwrap_or(1e-12) as f32;
        let dims = Dims { hidden, heads, head_dim: hidden / heads, inter, eps };
        let map = candle_core::safetensors::load(&files.weights, &Device::Cpu)?;
        let p = &files.weights;
        let t = |name: &str| tensor(&map, name, p);
        let scale = 1.0 / (dims.head_dim as f32).sqrt();
        let mut out_layers = Vec::with_capacity(layers);
        for i in 0..layers {
            let pre = format!("encoder.layer.{i}.");
            let w = |s: &str| t(&format!("{pre}{s}"));
            // Q, K, V stacked into one [3H, H] weight; the attention scale folded into Q.
            let mut qkv = w("attention.self.query.weight")?;
            qkv.iter_mut().for_each(|v| *v *= scale);
            qkv.extend(w("attention.self.key.weight")?);
            qkv.extend(w("attention.self.value.weight")?);
            let mut qkv_bias = w("attention.self.query.bias")?;
            qkv_bias.iter_mut().for_each(|v| *v *= scale);
            qkv_bias.extend(w("attention.self.key.bias")?);
            qkv_bias.extend(w("attention.self.value.bias")?);
            out_layers.push(LayerWeights {
                qkv: Arc::new(qkv),
                qkv_bias: Arc::new(qkv_bias),
                attn_out: Arc::new(w("attention.output.dense.weight")?),
                attn_out_bias: Arc::new(w("attention.output.dense.bias")?),
                ln1: (
                    Arc::new(w("attention.output.LayerNorm.weight")?),
                    Arc::new(w("attention.output.LayerNorm.bias")?),
                ),
                inter: Arc::new(w("intermediate.dense.weight")?),
                inter_bias: Arc::new(w("intermediate.dense.bias")?),
                out: Arc::new(w("output.dense.weight")?),
                out_bias: Arc::new(w("output.dense.bias")?),
                ln2: (Arc::new(w("output.LayerNorm.weight")?), Arc::new(w("output.LayerNorm.bias")?)),
            });
        }
        let model = Self {
            dims,
            word: t("embeddings.word_embeddings.weight")?,
            position: t("embeddings.position_embeddings.weight")?,
            token_type: t("embeddings.token_type_embeddings.weight")?,
            emb_ln: (t("embeddings.LayerNorm.weight")?, t("embeddings.LayerNorm.bias")?),
            layers: out_layers,
        };
        let expect = [
            (model.word.len() % hidden, "word embeddings"),
            (model.position.len() % hidden, "position embeddings"),
            (model.layers.iter().map(|l| l.qkv.len() - 3 * hidden * hidden).sum(), "attention weights"),
            (model.layers.iter().map(|l| l.inter.len() - inter * hidden).sum(), "intermediate weights"),
        ];
        if let Some((_, what)) = expect.iter().find(|(r, _)| *r != 0) {
            return Err(ModelError::Config { path: p.clone(), message: format!("{what} have the wrong shape") });
        }
        Ok(model)
    }
}

/// The matmuls of one layer, by operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Op {
    Qkv,
    AttnOut,
    Inter,
    Out,
    Scores,
    Context,
}

/// Per-worker layer operands in the kernels' layouts.
struct WorkerLayer {
    qkv: Weights,
    attn_out: Weights,
    inter: Weights,
    out: Weights,
}

/// One worker's engine, primitives and scratch buffers.
struct Worker {
    model: Arc<Model>,
    engine: Engine,
    dt: DataType,
    avx2: bool,
    layers: Vec<WorkerLayer>,
    prims: HashMap<(Op, usize), Primitive>,
    x: Vec<f32>,
    xb: Vec<u8>,
    qkv: Vec<u8>,
    ctx: Vec<u8>,
    h: Vec<u8>,
    scores: Vec<f32>,
    probs: Vec<u8>,
}

fn grow(buf: &mut Vec<u8>, bytes: usize) {
    if buf.len() < bytes {
        buf.resize(bytes, 0);
    }
}

fn as_u16(buf: &mut [u8]) -> &mut [u16] {
    // SAFETY: Vec<u8> buffers here are only reinterpreted at even lengths; u16 needs 2-byte
    // alignment, which allocations of the global allocator always have.
    assert_eq!(buf.as_ptr() as usize % 4, 0);
    unsafe { std::slice::from_raw_parts_mut(buf.as_mut_ptr().cast(), buf.len() / 2) }
}

fn as_f32(buf: &mut [u8]) -> &mut [f32] {
    assert_eq!(buf.as_ptr() as usize % 4, 0);
    // SAFETY: checked alignment; any bit pattern is a valid f32.
    unsafe { std::slice::from_raw_parts_mut(buf.as_mut_ptr().cast(), buf.len() / 4) }
}

fn out_of<'a>(dt: DataType, buf: &'a mut [u8]) -> Out<'a> {
    match dt {
        DataType::Bf16 => Out::Bf16(as_u16(buf)),
        DataType::F32 => Out::F32(as_f32(buf)),
    }
}

impl Worker {
    fn new(model: Arc<Model>, dnnl: &Dnnl, dt: DataType) -> Result<Self, ModelError> {
        let engine = dnnl.engine()?;
        let h = model.dims.hidden;
        let i = model.dims.inter;
        let layers = model
            .layers
            .iter()
            .map(|l| {
                Ok(WorkerLayer {
                    qkv: Weights::from_linear(dnnl, l.qkv.clone(), 3 * h, h)?,
                    attn_out: Weights::from_linear(dnnl, l.attn_out.clone(), h, h)?,
                    inter: Weights::from_linear(dnnl, l.inter.clone(), i, h)?,
                    out: Weights::from_linear(dnnl, l.out.clone(), h, i)?,
                })
            })
            .collect::<Result<Vec<_>, ModelError>>()?;
        Ok(Self {
            model,
            engine,
            dt,
            avx2: kernels::has_avx2(),
            layers,
            prims: HashMap::new(),
            x: Vec::new(),
            xb: Vec::new(),
            qkv: Vec::new(),
            ctx: Vec::new(),
            h: Vec::new(),
            scores: Vec::new(),
            probs: Vec::new(),
        })
    }

    /// The primitive for `op` at size `n` (token rows for dense layers, padded length for
    /// attention), created on first use.
    fn prim(&mut self, op: Op, n: usize) -> Result<&Primitive, ModelError> {
        if !self.prims.contains_key(&(op, n)) {
            let d = self.model.dims;
            let dnnl = self.engine.dnnl().clone();
            let dt = self.dt;
            let (m, h, i, nh, hd) = (n as i64, d.hidden as i64, d.inter as i64, d.heads as i64, d.head_dim as i64);
            let bias = |width: i64| dnnl.dense(&[1, width], DataType::F32);
            let prim = match op {
                Op::Qkv => self.engine.matmul(
                    dnnl.dense(&[m, h], dt)?,
                    dnnl.any(&[h, 3 * h], dt)?,
                    Some(bias(3 * h)?),
                    dnnl.dense(&[m, 3 * h], dt)?,
                    PostOp::None,
                )?,
                Op::AttnOut => self.engine.matmul(
                    dnnl.dense(&[m, h], dt)?,
                    dnnl.any(&[h, h], dt)?,
                    Some(bias(h)?),
                    dnnl.dense(&[m, h], DataType::F32)?,
                    PostOp::Sum,
                )?,
                Op::Inter => self.engine.matmul(
                    dnnl.dense(&[m, h], dt)?,
                    dnnl.any(&[h, i], dt)?,
                    Some(bias(i)?),
                    dnnl.dense(&[m, i], dt)?,
                    PostOp::Gelu,
                )?,
                Op::Out => self.engine.matmul(
                    dnnl.dense(&[m, i], dt)?,
                    dnnl.any(&[i, h], dt)?,
                    Some(bias(h)?),
                    dnnl.dense(&[m, h], DataType::F32)?,
                    PostOp::Sum,
                )?,
                // Q [heads, L, hd] and Kᵀ [heads, hd, L] read in place from the QKV rows.
                Op::Scores => self.engine.matmul(
                    dnnl.md(&[nh, m, hd], &[hd, 3 * h, 1], dt)?,
                    dnnl.md(&[nh, hd, m], &[hd, 1, 3 * h], dt)?,
                    None,
                    dnnl.dense(&[nh, m, m], DataType::F32)?,
                    PostOp::None,
                )?,
                // probs [heads, L, L] × V [heads, L, hd] → context rows [L, H] (heads side by side).
                Op::Context => self.engine.matmul(
                    dnnl.dense(&[nh, m, m], dt)?,
                    dnnl.md(&[nh, m, hd], &[hd, 3 * h, 1], dt)?,
                    None,
                    dnnl.md(&[nh, m, hd], &[hd, h, 1], dt)?,
                    PostOp::None,
                )?,
            };
            self.prims.insert((op, n), prim);
        }
        Ok(&self.prims[&(op, n)])
    }

    /// Runs a dense layer: `dst (∘)= src × W + b`.
    fn dense(&mut self, op: Op, layer: usize, rows: usize, src: *const u8, dst: *mut u8) -> Result<(), ModelError> {
        self.prim(op, rows)?;
        let prim = &self.prims[&(op, rows)];
        let l = &mut self.layers[layer];
        let m = &self.model.layers[layer];
        let (w, b) = match op {
            Op::Qkv => (&mut l.qkv, &m.qkv_bias),
            Op::AttnOut => (&mut l.attn_out, &m.attn_out_bias),
            Op::Inter => (&mut l.inter, &m.inter_bias),
            Op::Out => (&mut l.out, &m.out_bias),
            Op::Scores | Op::Context => unreachable!("attention has no weights"),
        };
        let wp = w.for_primitive(&self.engine, prim)?;
        // SAFETY: buffers were grown to the primitive's sizes by `forward`.
        unsafe {
            self.engine.execute(
                prim,
                &[
                    (dnnl::ARG_SRC, src.cast()),
                    (dnnl::ARG_WEIGHTS, wp),
                    (dnnl::ARG_BIAS, b.as_ptr().cast()),
                    (dnnl::ARG_DST, dst.cast_const().cast()),
                ],
            )
        }
    }

    /// Embeds token id sequences (each non-empty, within the position table): one pooled
    /// vector per sequence, or with `tokens` its token embeddings
    /// ([`crate::Embedder::forward_tokens`]).
    fn forward(&mut self, seqs: &[Vec<u32>], tokens_out: bool) -> Result<Vec<Vec<f32>>, ModelError> {
        let d = self.model.dims;
        let (h, inter, nh) = (d.hidden, d.inter, d.heads);
        let es = self.dt.size();
        if self.prims.len() >= MAX_PRIMITIVES {
            self.prims.clear();
        }
        let tokens: usize = seqs.iter().map(Vec::len).sum();
        let rows = tokens.div_ceil(ROW_PAD) * ROW_PAD;
        let longest = seqs.iter().map(Vec::len).max().unwrap_or(0).div_ceil(ATTN_PAD) * ATTN_PAD;
        // Attention of the last text may read up to ATTN_PAD-1 rows past the last token.
        let slack = rows + ATTN_PAD;
        self.x.clear();
        self.x.resize(rows * h, 0.0);
        grow(&mut self.xb, rows * h * es);
        grow(&mut self.qkv, slack * 3 * h * es);
        grow(&mut self.ctx, slack * h * es);
        grow(&mut self.h, rows * inter * es);
        self.scores.resize(nh * longest * longest, 0.0);
        grow(&mut self.probs, nh * longest * longest * es);
        // Rows past the last token must hold finite values: they feed matmuls whose results
        // are masked or discarded.
        self.xb[tokens * h * es..rows * h * es].fill(0);
        self.qkv[rows * 3 * h * es..slack * 3 * h * es].fill(0);

        // Embeddings: word + position + token type 0, then layer norm.
        let m = self.model.clone();
        let mut row = 0;
        for seq in seqs {
            for (pos, &id) in seq.iter().enumerate() {
                let x = &mut self.x[row * h..(row + 1) * h];
                let word = &m.word[id as usize * h..(id as usize + 1) * h];
                x.copy_from_slice(word);
                kernels::add_assign(self.avx2, x, &m.position[pos * h..(pos + 1) * h]);
                kernels::add_assign(self.avx2, x, &m.token_type[..h]);
                row += 1;
            }
        }
        {
            let mut copy = out_of(self.dt, &mut self.xb[..tokens * h * es]);
            kernels::layer_norm(self.avx2, &mut self.x[..tokens * h], h, &m.emb_ln.0, &m.emb_ln.1, d.eps, &mut copy);
        }

        for layer in 0..m.layers.len() {
            let lw = &m.layers[layer];
            let (xb, qkv) = (self.xb.as_ptr(), self.qkv.as_mut_ptr());
            self.dense(Op::Qkv, layer, rows, xb, qkv)?;
            self.attention(seqs)?;
            let (ctx, x) = (self.ctx.as_ptr(), self.x.as_mut_ptr().cast::<u8>());
            self.dense(Op::AttnOut, layer, rows, ctx, x)?;
            {
                let mut copy = out_of(self.dt, &mut self.xb[..tokens * h * es]);
                kernels::layer_norm(self.avx2, &mut self.x[..tokens * h], h, &lw.ln1.0, &lw.ln1.1, d.eps, &mut copy);
            }
            let (xb, hb) = (self.xb.as_ptr(), self.h.as_mut_ptr());
            self.dense(Op::Inter, layer, rows, xb, hb)?;
            let (hb, x) = (self.h.as_ptr(), self.x.as_mut_ptr().cast::<u8>());
            self.dense(Op::Out, layer, rows, hb, x)?;
            let mut copy = out_of(self.dt, &mut self.xb[..tokens * h * es]);
            kernels::layer_norm(self.avx2, &mut self.x[..tokens * h], h, &lw.ln2.0, &lw.ln2.1, d.eps, &mut copy);
        }

        let mut out = Vec::with_capacity(seqs.len());
        let mut start = 0;
        for seq in seqs {
            if tokens_out {
                out.push(crate::unit_token_rows(&self.x[start * h..(start + seq.len()) * h], h));
                start += seq.len();
                continue;
            }
            let mut v = vec![0.0f32; h];
            kernels::mean_pool_normalize(self.avx2, &self.x[start * h..(start + seq.len()) * h], h, &mut v);
            out.push(v);
            start += seq.len();
        }
        Ok(out)
    }

    /// Self-attention of every text over its own tokens: QKV rows → context rows.
    fn attention(&mut self, seqs: &[Vec<u32>]) -> Result<(), ModelError> {
        let d = self.model.dims;
        let (h, nh) = (d.hidden, d.heads);
        let es = self.dt.size();
        let mut start = 0;
        for seq in seqs {
            let len = seq.len();
            let lp = len.div_ceil(ATTN_PAD) * ATTN_PAD;
            self.prim(Op::Scores, lp)?;
            self.prim(Op::Context, lp)?;
            let q = self.qkv[start * 3 * h * es..].as_ptr();
            let k = self.qkv[(start * 3 * h + h) * es..].as_ptr();
            let v = self.qkv[(start * 3 * h + 2 * h) * es..].as_ptr();
            let scores = self.scores.as_mut_ptr();
            // SAFETY: the QKV buffer has `slack` rows, so `lp` rows from `start` are in bounds;
            // the score buffer holds `heads × longest²` f32.
            unsafe {
                self.engine.execute(
                    &self.prims[&(Op::Scores, lp)],
                    &[
                        (dnnl::ARG_SRC, q.cast()),
                        (dnnl::ARG_WEIGHTS, k.cast()),
                        (dnnl::ARG_DST, scores.cast_const().cast()),
                    ],
                )?;
            }
            {
                let n = nh * lp * lp;
                let mut probs = out_of(self.dt, &mut self.probs[..n * es]);
                for head in 0..nh {
                    let s = &mut self.scores[head * lp * lp..(head + 1) * lp * lp];
                    let mut p = match &mut probs {
                        Out::F32(p) => Out::F32(&mut p[head * lp * lp..(head + 1) * lp * lp]),
                        Out::Bf16(p) => Out::Bf16(&mut p[head * lp * lp..(head + 1) * lp * lp]),
                    };
                    kernels::softmax(self.avx2, s, lp, lp, len, &mut p);
                }
            }
            let ctx = self.ctx[start * h * es..].as_mut_ptr();
            // SAFETY: as above; the context buffer has `slack` rows. Rows past `len` written
            // here belong to the next text and are overwritten when it is processed.
            unsafe {
                self.engine.execute(
                    &self.prims[&(Op::Context, lp)],
                    &[
                        (dnnl::ARG_SRC, self.probs.as_ptr().cast()),
                        (dnnl::ARG_WEIGHTS, v.cast()),
                        (dnnl::ARG_DST, ctx.cast_const().cast()),
                    ],
                )?;
            }
            start += len;
        }
        Ok(())
    }
}

type Reply = mpsc::Sender<(usize, Result<Vec<Vec<f32>>, ModelError>)>;

struct Job {
    part: usize,
    seqs: Vec<Vec<u32>>,
    reply: Reply,
    /// Token embeddings instead of pooled vectors.
    tokens: bool,
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
    pub fn load(files: &ModelFiles, precision: Option<Precision>, workers: usize) -> Result<Self, ModelError> {
        let dnnl = Dnnl::load()?;
        let (precision, reason) = choose_precision(&dnnl, precision)?;
        let (max_seq_len, _) = window(files)?;
        let tokenizer = load_tokenizer(&files.tokenizer, Some(max_seq_len))?;
        let model = Arc::new(Model::load(files)?);
        if model.position.len() / model.dims.hidden < max_seq_len {
            return Err(ModelError::Config {
                path: files.config.clone(),
                message: "max_position_embeddings is smaller than the sequence window".into(),
            });
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
                    let warm = worker.forward(&[vec![101; 40], vec![101; 7]], false).map(|_| ());
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
                            worker.forward(&job.seqs, job.tokens)
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
            model_id: files.model_id(),
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
    fn model_id(&self) -> &str {
        &self.model_id
    }

    fn dim(&self) -> usize {
        self.dim
    }

    fn encode(&self, texts: &[String]) -> Result<Vec<Vec<u32>>, ModelError> {
        encode_with(&self.tokenizer, texts)
    }

    fn forward(&mut self, ids: &[Vec<u32>]) -> Result<Vec<Vec<f32>>, ModelError> {
        self.run(ids, false)
    }

    fn forward_tokens(&mut self, ids: &[Vec<u32>]) -> Result<Vec<Vec<f32>>, ModelError> {
        self.run(ids, true)
    }

    fn padded_tokens(&self, lens: &[usize]) -> usize {
        lens.iter().sum()
    }
}

impl FastBert {
    /// Splits `ids` over the workers and gathers their outputs in order.
    fn run(&mut self, ids: &[Vec<u32>], tokens: bool) -> Result<Vec<Vec<f32>>, ModelError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let lens: Vec<usize> = ids.iter().map(Vec::len).collect();
        let ranges = split_balanced(&lens, self.workers);
        let (reply, results) = mpsc::channel();
        for (part, r) in ranges.iter().enumerate() {
            let job = Job { part, seqs: ids[r.clone()].to_vec(), tokens, reply: reply.clone() };
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
