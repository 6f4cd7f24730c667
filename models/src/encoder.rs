//! The BERT encoder ctxd runs on candle — on a GPU, and on the CPU where oneDNN does not load —
//! written for the shapes an embedder sees (many sequences of one length band) rather than taken
//! from `candle-transformers`' `BertModel`, for two reasons measured on an H200:
//!
//! * **f16 gave NaN.** `BertModel` builds its attention bias as `(1 - mask) * f32::MIN` in the
//!   model's dtype; in f16 `f32::MIN` is `-inf` and `0 * -inf` is NaN, so every vector of an f16
//!   forward pass was NaN. Here the GPU's softmax skips padded keys outright, and elsewhere the
//!   bias is `-10000` on padding only (what BERT was trained with; `exp` of it is 0 in every
//!   precision); a batch without padding adds no bias at all.
//! * **It was slow.** Its `Linear` broadcasts the weight over the batch (a batched GEMM of
//!   `batch` small products), Q, K and V are three GEMMs and three copies, and its softmax is
//!   five passes over the `batch × heads × len × len` scores. Here every dense layer is one 2-D
//!   GEMM over all tokens, Q/K/V one GEMM with the `1/√d` scale folded into Q's weights, and
//!   what lies between the GEMMs is [`crate::encoder_kernels`]: fused CUDA kernels on a GPU
//!   (bias with the head-major copy, with GELU, with residual and layer norm; a masked
//!   softmax), candle's operations elsewhere. On the H200, f16 at batch 512: `BertModel` 1,753
//!   sequences/s, this encoder on candle's kernels 5,755, with the fused kernels 25,284
//!   (BENCHMARKS.md, "Embedding: how the figures got there").
//!
//! The arithmetic is BERT's (post-norm layers, absolute positions, erf or tanh GELU): the
//! reference tests (`models/tests/reference.rs`) hold it to sentence-transformers' vectors.
//! [`StageClock`] times each stage (synchronising the device after each) for `--profile`.

use std::time::{Duration, Instant};

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;

use crate::encoder_kernels::{self as ops, Activation, Heads};
use crate::error::ModelError;

/// A BERT configuration's fields the encoder reads (`config.json`).
#[derive(Debug, Clone, serde::Deserialize)]
pub struct EncoderConfig {
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub intermediate_size: usize,
    #[serde(default = "default_act")]
    pub hidden_act: String,
    #[serde(default = "default_eps")]
    pub layer_norm_eps: f64,
    #[serde(default = "default_positions")]
    pub position_embedding_type: String,
    pub model_type: Option<String>,
}

fn default_act() -> String {
    "gelu".into()
}
fn default_eps() -> f64 {
    1e-12
}
fn default_positions() -> String {
    "absolute".into()
}

/// A dense layer: `x · Wᵀ` as one 2-D GEMM over all tokens; its bias is added by the operation
/// that reads the product.
struct Dense {
    weight: Tensor,
    bias: Tensor,
}

impl Dense {
    fn load(vb: &VarBuilder, out: usize, inp: usize, dtype: DType) -> candle_core::Result<Self> {
        let weight = vb.get((out, inp), "weight")?.to_dtype(dtype)?;
        let bias = vb.get(out, "bias")?.to_dtype(dtype)?;
        Ok(Self { weight, bias })
    }

    fn gemm(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        x.matmul(&self.weight.t()?)
    }
}

/// Layer-norm parameters.
struct Norm {
    gamma: Tensor,
    beta: Tensor,
    eps: f32,
}

impl Norm {
    fn load(vb: &VarBuilder, size: usize, eps: f64, dtype: DType) -> candle_core::Result<Self> {
        let gamma = vb.get(size, "weight")?.to_dtype(dtype)?;
        let beta = vb.get(size, "bias")?.to_dtype(dtype)?;
        Ok(Self { gamma, beta, eps: eps as f32 })
    }

    /// `LayerNorm(a + bias + res)`.
    fn apply(&self, a: &Tensor, bias: &Tensor, res: &Tensor) -> candle_core::Result<Tensor> {
        ops::bias_residual_norm(a, bias, res, &self.gamma, &self.beta, self.eps)
    }
}

/// One encoder layer.
struct Layer {
    /// Q, K and V stacked (`3·hidden × hidden`), Q's rows and bias scaled by `1/√head_dim`.
    qkv: Dense,
    attn_out: Dense,
    attn_norm: Norm,
    inter: Dense,
    out: Dense,
    out_norm: Norm,
}

impl Layer {
    fn load(vb: VarBuilder, c: &EncoderConfig, dtype: DType) -> candle_core::Result<Self> {
        let (h, heads) = (c.hidden_size, c.num_attention_heads);
        let scale = 1.0 / ((h / heads) as f64).sqrt();
        let att = vb.pp("attention");
        let part = |name: &str| Dense::load(&att.pp("self").pp(name), h, h, vb.dtype());
        let (q, k, v) = (part("query")?, part("key")?, part("value")?);
        let qkv = Dense {
            weight: Tensor::cat(&[(q.weight * scale)?, k.weight, v.weight], 0)?.to_dtype(dtype)?,
            bias: Tensor::cat(&[(q.bias * scale)?, k.bias, v.bias], 0)?.to_dtype(dtype)?,
        };
        Ok(Self {
            qkv,
            attn_out: Dense::load(&att.pp("output").pp("dense"), h, h, dtype)?,
            attn_norm: Norm::load(&att.pp("output").pp("LayerNorm"), h, c.layer_norm_eps, dtype)?,
            inter: Dense::load(&vb.pp("intermediate").pp("dense"), c.intermediate_size, h, dtype)?,
            out: Dense::load(&vb.pp("output").pp("dense"), h, c.intermediate_size, dtype)?,
            out_norm: Norm::load(&vb.pp("output").pp("LayerNorm"), h, c.layer_norm_eps, dtype)?,
        })
    }
}

/// Token, position and token-type embeddings.
struct Embeddings {
    words: Tensor,
    positions: Tensor,
    /// Token type 0's row (ctxd embeds single segments).
    segment: Tensor,
    norm: Norm,
}

/// A BERT encoder on one candle device, in one dtype.
pub struct Encoder {
    embeddings: Embeddings,
    layers: Vec<Layer>,
    act: Activation,
    heads: usize,
    hidden: usize,
    clock: StageClock,
}

impl Encoder {
    /// Builds the encoder from a BERT checkpoint's tensors (with or without a `bert.` or
    /// `<model_type>.` prefix) read through `vb` in f32 (so Q's scale is applied before
    /// rounding), kept in `dtype`.
    pub fn load(vb: VarBuilder, config: &EncoderConfig, dtype: DType) -> Result<Self, ModelError> {
        if config.position_embedding_type != "absolute" {
            return Err(ModelError::Backend(format!(
                "position_embedding_type {:?} is not supported by the candle BERT encoder (absolute)",
                config.position_embedding_type
            )));
        }
        if config.num_attention_heads == 0 || !config.hidden_size.is_multiple_of(config.num_attention_heads) {
            return Err(ModelError::Backend(format!(
                "hidden_size {} is not a multiple of num_attention_heads {}",
                config.hidden_size, config.num_attention_heads
            )));
        }
        let act = Activation::parse(&config.hidden_act).ok_or_else(|| {
            ModelError::Backend(format!(
                "hidden_act {:?} is not supported by the candle BERT encoder (gelu, gelu_new, \
                 gelu_pytorch_tanh, gelu_fast, relu)",
                config.hidden_act
            ))
        })?;
        let root = ["", "bert", config.model_type.as_deref().unwrap_or("bert")]
            .into_iter()
            .map(|p| if p.is_empty() { vb.clone() } else { vb.pp(p) })
            .find(|v| v.contains_tensor("embeddings.word_embeddings.weight"))
            .unwrap_or_else(|| vb.clone());
        let h = config.hidden_size;
        let e = root.pp("embeddings");
        let get = |name: &str| e.get_unchecked(&format!("{name}.weight"))?.to_dtype(dtype);
        let embeddings = Embeddings {
            words: get("word_embeddings")?,
            positions: get("position_embeddings")?,
            segment: get("token_type_embeddings")?.get(0)?,
            norm: Norm::load(&e.pp("LayerNorm"), h, config.layer_norm_eps, dtype)?,
        };
        let layers = (0..config.num_hidden_layers)
            .map(|i| Layer::load(root.pp(format!("encoder.layer.{i}")), config, dtype))
            .collect::<candle_core::Result<Vec<_>>>()?;
        let device = vb.device().clone();
        ops::keep_freed_memory(&device);
        Ok(Self {
            embeddings,
            layers,
            act,
            heads: config.num_attention_heads,
            hidden: h,
            clock: StageClock::new(device),
        })
    }

    /// The per-stage clock (off until [`StageClock::enable`]).
    pub fn clock(&mut self) -> &mut StageClock {
        &mut self.clock
    }

    /// Final hidden states `(batch, len, hidden)` in the encoder's dtype for `ids`
    /// `(batch, len)`, where `lens[i]` tokens of row `i` are real and the rest padding.
    pub fn forward(&mut self, ids: &Tensor, lens: &[usize]) -> Result<Tensor, ModelError> {
        let (batch, len) = ids.dims2()?;
        let (hidden, heads) = (self.hidden, self.heads);
        let h = Heads { batch, len, heads, head_dim: hidden / heads };
        self.clock.start();
        let e = &self.embeddings;
        let words = e.words.index_select(&ids.flatten_all()?, 0)?;
        let positions = e.positions.narrow(0, 0, len)?;
        let mut x = e.norm.apply(&words, &e.segment, &positions)?;
        self.clock.lap("embeddings")?;
        for layer in &self.layers {
            let qkv = layer.qkv.gemm(&x)?;
            self.clock.lap("qkv gemm")?;
            let qkv = ops::qkv_heads(&qkv, &layer.qkv.bias, h)?;
            let (q, k, v) = (qkv.get(0)?, qkv.get(1)?, qkv.get(2)?);
            self.clock.lap("qkv bias + heads")?;
            let scores = q.matmul(&k.t()?)?;
            self.clock.lap("scores q·kᵀ")?;
            let probs = ops::masked_softmax(&scores, lens, h)?;
            self.clock.lap("masked softmax")?;
            let ctx = probs.matmul(&v)?;
            self.clock.lap("context p·v")?;
            let ctx = ops::heads_to_tokens(&ctx, h)?;
            self.clock.lap("heads to tokens")?;
            let attn = layer.attn_out.gemm(&ctx)?;
            self.clock.lap("attention out gemm")?;
            x = layer.attn_norm.apply(&attn, &layer.attn_out.bias, &x)?;
            self.clock.lap("bias + residual + layer norm")?;
            let inter = layer.inter.gemm(&x)?;
            self.clock.lap("intermediate gemm")?;
            let inter = ops::bias_act(&inter, &layer.inter.bias, self.act)?;
            self.clock.lap("bias + gelu")?;
            let out = layer.out.gemm(&inter)?;
            self.clock.lap("output gemm")?;
            x = layer.out_norm.apply(&out, &layer.out.bias, &x)?;
            self.clock.lap("bias + residual + layer norm")?;
        }
        self.clock.finish();
        Ok(x.reshape((batch, len, hidden))?)
    }
}

/// Time per stage of the encoder's forward passes, for `--profile`: when on, the device is
/// synchronised after each stage (so a stage's time is its kernels', not its launch's) — which
/// itself costs a little, so figures taken with it on are not throughput figures.
#[derive(Debug)]
pub struct StageClock {
    device: Device,
    on: bool,
    last: Option<Instant>,
    /// `(stage, total time)` in first-seen order.
    stages: Vec<(&'static str, Duration)>,
    passes: usize,
}

impl StageClock {
    fn new(device: Device) -> Self {
        Self { device, on: false, last: None, stages: Vec::new(), passes: 0 }
    }

    /// Starts timing (and clears what was timed).
    pub fn enable(&mut self) {
        self.on = true;
        self.stages.clear();
        self.passes = 0;
    }

    /// Stops timing; the figures stay readable.
    pub fn disable(&mut self) {
        self.on = false;
    }

    /// Milliseconds per forward pass in each stage, in the order the stages run.
    pub fn per_pass_ms(&self) -> Vec<(String, f64)> {
        let passes = self.passes.max(1) as f64;
        self.stages.iter().map(|(s, d)| (s.to_string(), d.as_secs_f64() * 1e3 / passes)).collect()
    }

    fn start(&mut self) {
        if self.on {
            self.last = Some(Instant::now());
        }
    }

    fn lap(&mut self, stage: &'static str) -> candle_core::Result<()> {
        let Some(last) = self.last.filter(|_| self.on) else { return Ok(()) };
        self.device.synchronize()?;
        let now = Instant::now();
        match self.stages.iter_mut().find(|(s, _)| *s == stage) {
            Some((_, d)) => *d += now - last,
            None => self.stages.push((stage, now - last)),
        }
        self.last = Some(now);
        Ok(())
    }

    fn finish(&mut self) {
        if self.on {
            self.passes += 1;
        }
    }
}
