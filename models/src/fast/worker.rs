//! One worker of the fast path: the BERT encoder's forward pass on a batch of texts without
//! padding, with its own oneDNN engine, primitives and scratch buffers.
//!
//! The tokens of all texts are concatenated into one `[tokens, hidden]` matrix; the dense layers
//! run on it as single large matmuls with fused epilogues (bias, GELU, the residual add). Only
//! attention is per text, padded to a multiple of [`ATTN_PAD`] positions with the padded keys
//! masked out of the softmax, so padding changes nothing. Layer norms, softmax and pooling are
//! [`crate::kernels`]' loops, in f32.

use std::collections::HashMap;
use std::sync::Arc;

use super::weights::EncoderWeights;
use crate::dnnl::{self, DataType, Dnnl, Engine, PostOp, Primitive, Weights};
use crate::embedder::PassOutput;
use crate::error::ModelError;
use crate::kernels::{self, Out};

/// Attention is computed per text on lengths rounded up to this (bounds the number of
/// distinct matmul shapes; padded keys are masked).
const ATTN_PAD: usize = 16;
/// Token rows are rounded up to this for the dense layers (bounds distinct shapes).
const ROW_PAD: usize = 32;
/// Primitives a worker keeps (each holds JIT code); past this the cache starts over at the
/// next forward pass (never during one: a pass holds on to what it created).
const MAX_PRIMITIVES: usize = 512;

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
pub(super) struct Worker {
    model: Arc<EncoderWeights>,
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
    assert_eq!(buf.as_ptr() as usize % 4, 0);
    // SAFETY: Vec<u8> buffers here are only reinterpreted at even lengths; u16 needs 2-byte
    // alignment, which allocations of the global allocator always have (asserted above).
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
    pub(super) fn new(model: Arc<EncoderWeights>, dnnl: &Dnnl, dt: DataType) -> Result<Self, ModelError> {
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

    /// Embeds token id sequences (each non-empty, within the position table): per sequence
    /// what `output` asks — its pooled vector, its token embeddings
    /// ([`crate::embedder::Embedder::forward_tokens`]), or both, the vector first.
    pub(super) fn forward(&mut self, seqs: &[Vec<u32>], output: PassOutput) -> Result<Vec<Vec<f32>>, ModelError> {
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
            let states = &self.x[start * h..(start + seq.len()) * h];
            let mut v = Vec::new();
            if output != PassOutput::Tokens {
                v.resize(h, 0.0);
                let rows = self.model.dims.pooling.rows(seq.len());
                kernels::mean_pool_normalize(self.avx2, &states[rows.start * h..rows.end * h], h, &mut v);
            }
            if output != PassOutput::Pooled {
                v.extend(crate::embedder::unit_token_rows(states, h));
            }
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
