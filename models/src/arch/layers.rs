//! The pieces [`super::model::Transformer`] is built from, on candle: a dense layer over all
//! tokens, LayerNorm (with or without a bias) and RMSNorm, rotary tables, ALiBi slopes, the
//! additive attention bias (padding, causal, sliding window) and multi-head attention with
//! grouped K/V heads.
//!
//! Masked positions get [`MASKED`], a large finite number rather than `-inf`: a query whose
//! keys are all masked (padding inside a sliding window) then softmaxes to a uniform row
//! instead of NaN, and padded rows never reach a pooled vector.

use std::sync::Mutex;

use candle_core::{DType, Device, Result, Tensor, D};
use candle_nn::VarBuilder;

use super::gemm::DnnlLinear;
use crate::dnnl::Dnnl;
use crate::error::ModelError;

/// The bias of a key a query must not see.
pub const MASKED: f32 = -1e30;

/// A dense layer `x · Wᵀ + b`, applied to `(…, in)` as one 2-D GEMM: candle's, or oneDNN's
/// once [`Linear::use_onednn`] gave it one ([`super::gemm`]).
pub struct Linear {
    /// `(out, in)`; empty once oneDNN holds the weights.
    weight: Tensor,
    bias: Option<Tensor>,
    out: usize,
    onednn: Option<Mutex<DnnlLinear>>,
}

impl Linear {
    /// Loads `<vb>.weight` `(out, in)` and, when `bias`, `<vb>.bias`.
    pub fn load(vb: VarBuilder, out: usize, inp: usize, bias: bool) -> Result<Self> {
        let weight = vb.get((out, inp), "weight")?;
        let bias = if bias { Some(vb.get(out, "bias")?) } else { None };
        Ok(Self { weight, bias, out, onednn: None })
    }

    /// Runs the GEMM on oneDNN from now on (CPU weights only); candle's copy of the weights is
    /// let go.
    pub fn use_onednn(&mut self, dnnl: &Dnnl) -> std::result::Result<(), ModelError> {
        self.onednn = Some(Mutex::new(DnnlLinear::new(dnnl, &self.weight, self.bias.as_ref())?));
        self.weight = Tensor::zeros(0, DType::F32, self.weight.device())?;
        Ok(())
    }

    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let dims = x.dims().to_vec();
        let inp = *dims.last().expect("a dense layer's input has a last dimension");
        let rows = x.elem_count() / inp;
        let mut out = dims;
        *out.last_mut().expect("non-empty") = self.out;
        if let Some(fast) = &self.onednn {
            let mut fast = fast.lock().unwrap_or_else(|e| e.into_inner());
            let x = x.contiguous()?;
            // The input read in place from candle's buffer; the output becomes a tensor as it is.
            let (storage, layout) = x.storage_and_layout();
            let y = match &*storage {
                candle_core::Storage::Cpu(candle_core::CpuStorage::F32(values)) => {
                    let start = layout.start_offset();
                    fast.forward(&values[start..start + rows * inp], rows)
                }
                _ => return Err(candle_core::Error::Msg("oneDNN dense layers take f32 CPU tensors".into())),
            }
            .map_err(candle_core::Error::wrap)?;
            drop(storage);
            return Tensor::from_vec(y, out, x.device());
        }
        let y = x.reshape((rows, inp))?.matmul(&self.weight.t()?)?;
        let y = match &self.bias {
            Some(b) => y.broadcast_add(b)?,
            None => y,
        };
        y.reshape(out)
    }
}

/// A normalisation layer over the last dimension.
pub enum Norm {
    Layer { gamma: Tensor, beta: Tensor, eps: f32 },
    Rms { gamma: Tensor, eps: f32 },
}

impl Norm {
    /// LayerNorm `<vb>.weight` (and `<vb>.bias`, zeros when `bias` is false).
    pub fn layer(vb: VarBuilder, dim: usize, eps: f64, bias: bool) -> Result<Self> {
        let gamma = vb.get(dim, "weight")?;
        let beta = if bias { vb.get(dim, "bias")? } else { Tensor::zeros(dim, DType::F32, vb.device())? };
        Ok(Self::Layer { gamma, beta, eps: eps as f32 })
    }

    /// RMSNorm `<vb>.weight`.
    pub fn rms(vb: VarBuilder, dim: usize, eps: f64) -> Result<Self> {
        Ok(Self::Rms { gamma: vb.get(dim, "weight")?, eps: eps as f32 })
    }

    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let x = x.contiguous()?;
        match self {
            Self::Layer { gamma, beta, eps } => candle_nn::ops::layer_norm(&x, gamma, beta, *eps),
            Self::Rms { gamma, eps } => candle_nn::ops::rms_norm(&x, gamma, *eps),
        }
    }
}

/// Rotary tables for `len` positions: `(cos, sin)`, each `(len, head_dim / 2)`, for the
/// rotate-half layout (GPT-NeoX's, which all of ctxd's rotary families use).
pub fn rotary(len: usize, head_dim: usize, theta: f64, device: &Device) -> Result<(Tensor, Tensor)> {
    let half = head_dim / 2;
    let inv: Vec<f32> = (0..half).map(|i| (1.0 / theta.powf(2.0 * i as f64 / head_dim as f64)) as f32).collect();
    let mut angles = Vec::with_capacity(len * half);
    for p in 0..len {
        angles.extend(inv.iter().map(|f| p as f32 * f));
    }
    let angles = Tensor::from_vec(angles, (len, half), device)?;
    Ok((angles.cos()?, angles.sin()?))
}

/// Applies rotary tables to `(batch, heads, len, head_dim)`.
pub fn rope(x: &Tensor, table: &(Tensor, Tensor)) -> Result<Tensor> {
    candle_nn::rotary_emb::rope(&x.contiguous()?, &table.0, &table.1)
}

/// ALiBi's head slopes (Press et al.; the closest power of two, then every other slope of the
/// next one, for other head counts).
pub fn alibi_slopes(heads: usize) -> Vec<f64> {
    fn pow2(n: usize) -> Vec<f64> {
        let start = 2f64.powf(-(2f64.powf(-((n as f64).log2() - 3.0))));
        (0..n).map(|i| start * start.powi(i as i32)).collect()
    }
    if heads.is_power_of_two() {
        return pow2(heads);
    }
    let closest = 1usize << (usize::BITS - 1 - heads.leading_zeros());
    let mut slopes = pow2(closest);
    slopes.extend(alibi_slopes(2 * closest).into_iter().step_by(2).take(heads - closest));
    slopes
}

/// The symmetric ALiBi bias `-slope · |i - j|`, `(1, heads, len, len)`.
pub fn alibi_bias(heads: usize, len: usize, device: &Device) -> Result<Tensor> {
    let mut data = Vec::with_capacity(heads * len * len);
    for slope in alibi_slopes(heads) {
        for i in 0..len {
            data.extend((0..len).map(|j| (-slope * (i as f64 - j as f64).abs()) as f32));
        }
    }
    Tensor::from_vec(data, (1, heads, len, len), device)
}

/// Which keys a query sees besides the padding rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Visibility {
    /// Every real token.
    All,
    /// Keys at or before the query (a decoder).
    Causal,
    /// Keys within `half` positions either side (ModernBERT's local layers).
    Window(usize),
}

/// The additive attention bias `(batch, 1, len, len)`: 0 where query `i` of sequence `b` may
/// see key `j` (a real token, and allowed by `visibility`), [`MASKED`] elsewhere.
pub fn attention_bias(lens: &[usize], len: usize, visibility: Visibility, device: &Device) -> Result<Tensor> {
    let mut data = Vec::with_capacity(lens.len() * len * len);
    for &real in lens {
        for i in 0..len {
            data.extend((0..len).map(|j| {
                let seen = j < real
                    && match visibility {
                        Visibility::All => true,
                        Visibility::Causal => j <= i,
                        Visibility::Window(half) => i.abs_diff(j) <= half,
                    };
                if seen {
                    0.0
                } else {
                    MASKED
                }
            }));
        }
    }
    Tensor::from_vec(data, (lens.len(), 1, len, len), device)
}

/// Token id sequences as one right-padded `(batch, longest)` tensor (padding id 0, masked out by
/// [`attention_bias`]), and their real lengths.
pub fn padded(ids: &[Vec<u32>], device: &Device) -> Result<(Tensor, Vec<usize>)> {
    let lens: Vec<usize> = ids.iter().map(Vec::len).collect();
    let n = lens.iter().copied().max().unwrap_or(0).max(1);
    let mut flat = Vec::with_capacity(ids.len() * n);
    for row in ids {
        flat.extend_from_slice(row);
        flat.extend(std::iter::repeat_n(0u32, n - row.len()));
    }
    Ok((Tensor::from_vec(flat, (ids.len(), n), device)?, lens))
}

/// Splits `(batch, len, heads · dim)` into `(batch, heads, len, dim)`.
pub fn split_heads(x: &Tensor, heads: usize, dim: usize) -> Result<Tensor> {
    let (b, n, _) = x.dims3()?;
    x.reshape((b, n, heads, dim))?.transpose(1, 2)?.contiguous()
}

/// Scaled dot-product attention of `q (b, H, n, d)` over `k, v (b, Hkv, n, d)` with an
/// additive `bias` broadcast to `(b, H, n, n)`; returns `(b, n, H · d)`.
pub fn attend(q: &Tensor, k: &Tensor, v: &Tensor, bias: &Tensor) -> Result<Tensor> {
    let (b, heads, n, d) = q.dims4()?;
    let kv_heads = k.dim(1)?;
    let (k, v) = if kv_heads == heads {
        (k.clone(), v.clone())
    } else {
        let rep = heads / kv_heads;
        let grow = |t: &Tensor| t.unsqueeze(2)?.expand((b, kv_heads, rep, n, d))?.reshape((b, heads, n, d));
        (grow(k)?, grow(v)?)
    };
    let scale = 1.0 / (d as f64).sqrt();
    let scores = (q.matmul(&k.t()?.contiguous()?)? * scale)?.broadcast_add(bias)?;
    let probs = candle_nn::ops::softmax_last_dim(&scores)?;
    probs.matmul(&v.contiguous()?)?.transpose(1, 2)?.reshape((b, n, heads * d))
}

/// The activation of a gated MLP's gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// SwiGLU's (NomicBERT, Qwen3).
    Silu,
    /// GeGLU's, the exact GELU (ModernBERT, JinaBERT).
    GeluErf,
}

impl Gate {
    fn apply(self, v: f32) -> f32 {
        match self {
            Self::Silu => v / (1.0 + (-v).exp()),
            Self::GeluErf => 0.5 * v * (1.0 + candle_core::cpu::erf::erf_f32(v * std::f32::consts::FRAC_1_SQRT_2)),
        }
    }

    fn on(self, t: &Tensor) -> Result<Tensor> {
        match self {
            Self::Silu => t.silu(),
            Self::GeluErf => t.gelu_erf(),
        }
    }
}

/// `f` over the f32 values of a contiguous CPU tensor, read in place.
fn with_values<R>(t: &Tensor, f: impl FnOnce(&[f32]) -> R) -> Result<R> {
    let (storage, layout) = t.storage_and_layout();
    match &*storage {
        candle_core::Storage::Cpu(candle_core::CpuStorage::F32(v)) if layout.is_contiguous() => {
            let start = layout.start_offset();
            Ok(f(&v[start..start + t.elem_count()]))
        }
        _ => candle_core::bail!("expected a contiguous f32 CPU tensor"),
    }
}

/// A gated MLP's middle, `plain ⊙ gate(act)` per element, from rows of `2 × width` values
/// (`act_first`: the activated half first, as ModernBERT's `Wi` lays them out; else second, as
/// JinaBERT's) or from two tensors of rows of `width` ([`gated`]). On the CPU one pass on every
/// core, where candle's element-wise operations take one core and a tensor each; elsewhere
/// candle's.
fn gated_rows<'a>(
    rows: usize,
    width: usize,
    gate: Gate,
    row: impl Fn(usize) -> (&'a [f32], &'a [f32]) + Sync,
) -> Vec<f32> {
    let mut out = vec![0.0f32; rows * width];
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(rows.max(1));
    let per = rows.div_ceil(threads.max(1)).max(1);
    std::thread::scope(|scope| {
        for (n, chunk) in out.chunks_mut(per * width.max(1)).enumerate() {
            let row = &row;
            scope.spawn(move || {
                for (i, dst) in chunk.chunks_exact_mut(width).enumerate() {
                    let (plain, act) = row(n * per + i);
                    for ((d, p), a) in dst.iter_mut().zip(plain).zip(act) {
                        *d = p * gate.apply(*a);
                    }
                }
            });
        }
    });
    out
}

/// `plain ⊙ gate(act)`, both `(…, width)` (SwiGLU: `up ⊙ silu(gate)`).
pub fn gated(plain: &Tensor, act: &Tensor, gate: Gate) -> Result<Tensor> {
    if !plain.device().is_cpu() || plain.dtype() != DType::F32 {
        return plain * gate.on(act)?;
    }
    let (plain, act) = (plain.contiguous()?, act.contiguous()?);
    let width = plain.dim(D::Minus1)?;
    let rows = plain.elem_count() / width.max(1);
    let out = with_values(&plain, |p| {
        with_values(&act, |a| {
            gated_rows(rows, width, gate, |r| (&p[r * width..(r + 1) * width], &a[r * width..(r + 1) * width]))
        })
    })??;
    Tensor::from_vec(out, plain.shape(), plain.device())
}

/// A gated MLP's middle from one projection of `2 × width` per row: `gate(first) ⊙ second` when
/// `act_first` (ModernBERT's `Wi`), else `first ⊙ gate(second)` (JinaBERT's `up_gated_layer`).
pub fn gated_halves(x: &Tensor, gate: Gate, act_first: bool) -> Result<Tensor> {
    let width = x.dim(D::Minus1)? / 2;
    let (first, second) = (x.narrow(D::Minus1, 0, width)?, x.narrow(D::Minus1, width, width)?);
    if !x.device().is_cpu() || x.dtype() != DType::F32 {
        return if act_first { gate.on(&first)? * second } else { first * gate.on(&second)? };
    }
    let x = x.contiguous()?;
    let rows = x.elem_count() / (2 * width).max(1);
    let mut shape = x.dims().to_vec();
    *shape.last_mut().expect("a last dimension") = width;
    let out = with_values(&x, |v| {
        gated_rows(rows, width, gate, |r| {
            let (a, b) = v[r * 2 * width..(r + 1) * 2 * width].split_at(width);
            if act_first {
                (b, a)
            } else {
                (a, b)
            }
        })
    })?;
    Tensor::from_vec(out, shape, x.device())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alibi_slopes_follow_the_paper() {
        let s = alibi_slopes(8);
        assert!((s[0] - 0.5).abs() < 1e-12 && (s[7] - 1.0 / 256.0).abs() < 1e-12, "{s:?}");
        // 12 heads: the 8 slopes of 8 heads, then slopes 0, 2, 4, 6 of 16 heads.
        let s12 = alibi_slopes(12);
        assert_eq!(s12.len(), 12);
        assert!((s12[8] - alibi_slopes(16)[0]).abs() < 1e-12);
    }

    #[test]
    fn the_bias_masks_padding_the_future_and_far_keys() {
        let dev = Device::Cpu;
        let at = |v: Visibility, i: usize, j: usize| {
            attention_bias(&[3], 4, v, &dev).unwrap().squeeze(0).unwrap().squeeze(0).unwrap().to_vec2::<f32>().unwrap()
                [i][j]
        };
        assert_eq!(at(Visibility::All, 0, 2), 0.0);
        assert_eq!(at(Visibility::All, 0, 3), MASKED, "padding is never seen");
        assert_eq!(at(Visibility::Causal, 1, 2), MASKED);
        assert_eq!(at(Visibility::Causal, 2, 1), 0.0);
        assert_eq!(at(Visibility::Window(1), 0, 2), MASKED);
        assert_eq!(at(Visibility::Window(1), 1, 2), 0.0);
    }
}
