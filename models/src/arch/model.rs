//! One transformer for every family ([`super::Family`]) but BERT *embedders* (which keep
//! [`crate::encoder`] and the fast path): the embeddings, each family's layer, the final norm, on candle in f32, over a right-padded batch whose real
//! lengths are given (padding is masked out of every attention, and a decoder's causal mask
//! keeps real tokens from ever seeing the padding after them).
//!
//! BERT and XLM-R layers run here for cross-encoders ([`crate::cross`]), which read a pair of
//! texts with segment ids.
//!
//! Weight names are the checkpoints' own: BERT's (`encoder.layer.N.attention.self.query`…),
//! NomicBERT's original names (`encoder.layers.N.attn.Wqkv`,
//! `mlp.fc11`/`fc12`/`fc2`, `norm1`/`norm2`, `emb_ln` — what transformers also saves), ModernBERT's
//! (`layers.N.attn.Wqkv`, `mlp.Wi`/`Wo`, `attn_norm`, `mlp_norm`, `final_norm`), JinaBERT v2's
//! BERT names plus `layer_norm_q`/`layer_norm_k`, `mlp.up_gated_layer`/`down_layer`,
//! `layer_norm_1`/`layer_norm_2`, and Qwen3's (`layers.N.self_attn.q_proj`, `q_norm`…). A
//! `model.`/`bert.` prefix (a checkpoint saved with its head) is found and stripped.

use candle_core::{Device, Result, Tensor};
use candle_nn::VarBuilder;

use super::layers::{
    alibi_bias, attend, attention_bias, gated, gated_halves, rope, rotary, split_heads, Gate, Linear, Norm, Visibility,
};
use super::{Family, Shape};

struct Embeddings {
    words: Tensor,
    /// The token-type table (segment 0 for a single text, 1 for a pair's second text).
    token_type: Option<Tensor>,
    /// BERT's absolute positions, and where they start (RoBERTa: after the padding id).
    position: Option<(Tensor, usize)>,
    norm: Option<Norm>,
}

/// What every layer of one forward pass shares.
struct Context {
    bias: Tensor,
    window_bias: Option<Tensor>,
    global_rope: Option<(Tensor, Tensor)>,
    local_rope: Option<(Tensor, Tensor)>,
}

// Layers live in one Vec built once per model: boxing the larger variants would buy nothing.
#[allow(clippy::large_enum_variant)]
enum Layer {
    Bert {
        q: Linear,
        k: Linear,
        v: Linear,
        dense: Linear,
        att_norm: Norm,
        inter: Linear,
        out: Linear,
        out_norm: Norm,
        tanh: bool,
    },
    Nomic {
        qkv: Linear,
        out: Linear,
        norm1: Norm,
        up: Linear,
        gate: Linear,
        down: Linear,
        norm2: Norm,
    },
    Modern {
        attn_norm: Option<Norm>,
        qkv: Linear,
        out: Linear,
        mlp_norm: Norm,
        wi: Linear,
        wo: Linear,
        local: bool,
    },
    Jina {
        q: Linear,
        k: Linear,
        v: Linear,
        q_norm: Norm,
        k_norm: Norm,
        dense: Linear,
        out_norm: Norm,
        norm1: Norm,
        up_gated: Linear,
        down: Linear,
        norm2: Norm,
    },
    Qwen {
        in_norm: Norm,
        q: Linear,
        k: Linear,
        v: Linear,
        q_norm: Norm,
        k_norm: Norm,
        o: Linear,
        post_norm: Norm,
        gate: Linear,
        up: Linear,
        down: Linear,
    },
}

impl Layer {
    /// Layer `n` of a checkpoint of `shape`'s family, from its weights `vb`.
    fn load(vb: VarBuilder, shape: &Shape, n: usize) -> Result<Self> {
        let s = shape;
        let (h, i, eps) = (s.hidden, s.intermediate, s.eps);
        let (q_dim, kv_dim) = (s.heads * s.head_dim, s.kv_heads * s.head_dim);
        Ok(match s.family {
            Family::Bert => {
                let a = vb.pp("attention");
                Layer::Bert {
                    q: Linear::load(a.pp("self.query"), h, h, true)?,
                    k: Linear::load(a.pp("self.key"), h, h, true)?,
                    v: Linear::load(a.pp("self.value"), h, h, true)?,
                    dense: Linear::load(a.pp("output.dense"), h, h, true)?,
                    att_norm: Norm::layer(a.pp("output.LayerNorm"), h, eps, true)?,
                    inter: Linear::load(vb.pp("intermediate.dense"), i, h, true)?,
                    out: Linear::load(vb.pp("output.dense"), h, i, true)?,
                    out_norm: Norm::layer(vb.pp("output.LayerNorm"), h, eps, true)?,
                    tanh: s.gelu_tanh,
                }
            }
            Family::NomicBert => Layer::Nomic {
                qkv: Linear::load(vb.pp("attn.Wqkv"), 3 * h, h, s.attention_bias)?,
                out: Linear::load(vb.pp("attn.out_proj"), h, h, false)?,
                norm1: Norm::layer(vb.pp("norm1"), h, eps, true)?,
                up: Linear::load(vb.pp("mlp.fc11"), i, h, false)?,
                gate: Linear::load(vb.pp("mlp.fc12"), i, h, false)?,
                down: Linear::load(vb.pp("mlp.fc2"), h, i, false)?,
                norm2: Norm::layer(vb.pp("norm2"), h, eps, true)?,
            },
            Family::ModernBert => Layer::Modern {
                attn_norm: if n == 0 { None } else { Some(Norm::layer(vb.pp("attn_norm"), h, eps, s.norm_bias)?) },
                qkv: Linear::load(vb.pp("attn.Wqkv"), 3 * h, h, s.attention_bias)?,
                out: Linear::load(vb.pp("attn.Wo"), h, h, s.attention_bias)?,
                mlp_norm: Norm::layer(vb.pp("mlp_norm"), h, eps, s.norm_bias)?,
                wi: Linear::load(vb.pp("mlp.Wi"), 2 * i, h, s.mlp_bias)?,
                wo: Linear::load(vb.pp("mlp.Wo"), h, i, s.mlp_bias)?,
                local: s.windows[n].is_some(),
            },
            Family::JinaBert => {
                let a = vb.pp("attention");
                Layer::Jina {
                    q: Linear::load(a.pp("self.query"), h, h, true)?,
                    k: Linear::load(a.pp("self.key"), h, h, true)?,
                    v: Linear::load(a.pp("self.value"), h, h, true)?,
                    q_norm: Norm::layer(a.pp("self.layer_norm_q"), h, eps, true)?,
                    k_norm: Norm::layer(a.pp("self.layer_norm_k"), h, eps, true)?,
                    dense: Linear::load(a.pp("output.dense"), h, h, true)?,
                    out_norm: Norm::layer(a.pp("output.LayerNorm"), h, eps, true)?,
                    norm1: Norm::layer(vb.pp("layer_norm_1"), h, eps, true)?,
                    up_gated: Linear::load(vb.pp("mlp.up_gated_layer"), 2 * i, h, false)?,
                    down: Linear::load(vb.pp("mlp.down_layer"), h, i, true)?,
                    norm2: Norm::layer(vb.pp("layer_norm_2"), h, eps, true)?,
                }
            }
            Family::Qwen3 => Layer::Qwen {
                in_norm: Norm::rms(vb.pp("input_layernorm"), h, eps)?,
                q: Linear::load(vb.pp("self_attn.q_proj"), q_dim, h, s.attention_bias)?,
                k: Linear::load(vb.pp("self_attn.k_proj"), kv_dim, h, s.attention_bias)?,
                v: Linear::load(vb.pp("self_attn.v_proj"), kv_dim, h, s.attention_bias)?,
                q_norm: Norm::rms(vb.pp("self_attn.q_norm"), s.head_dim, eps)?,
                k_norm: Norm::rms(vb.pp("self_attn.k_norm"), s.head_dim, eps)?,
                o: Linear::load(vb.pp("self_attn.o_proj"), h, q_dim, s.attention_bias)?,
                post_norm: Norm::rms(vb.pp("post_attention_layernorm"), h, eps)?,
                gate: Linear::load(vb.pp("mlp.gate_proj"), i, h, false)?,
                up: Linear::load(vb.pp("mlp.up_proj"), i, h, false)?,
                down: Linear::load(vb.pp("mlp.down_proj"), h, i, false)?,
            },
        })
    }

    /// The layer's dense layers.
    fn linears(&mut self) -> Vec<&mut Linear> {
        match self {
            Layer::Bert { q, k, v, dense, inter, out, .. } => vec![q, k, v, dense, inter, out],
            Layer::Nomic { qkv, out, up, gate, down, .. } => vec![qkv, out, up, gate, down],
            Layer::Modern { qkv, out, wi, wo, .. } => vec![qkv, out, wi, wo],
            Layer::Jina { q, k, v, dense, up_gated, down, .. } => vec![q, k, v, dense, up_gated, down],
            Layer::Qwen { q, k, v, o, gate, up, down, .. } => vec![q, k, v, o, gate, up, down],
        }
    }
}

/// A loaded non-BERT transformer (see the module docs).
pub struct Transformer {
    shape: Shape,
    embed: Embeddings,
    layers: Vec<Layer>,
    final_norm: Option<Norm>,
    device: Device,
}

/// The checkpoint's prefix, if its tensors sit under one (`model.`, `bert.`).
fn strip_prefix<'a>(vb: VarBuilder<'a>, first: &str) -> VarBuilder<'a> {
    for prefix in ["model", "bert", "roberta"] {
        if !vb.contains_tensor(first) && vb.contains_tensor(&format!("{prefix}.{first}")) {
            return vb.pp(prefix);
        }
    }
    vb
}

/// The embeddings of a checkpoint of `shape`'s family, its final norm (if it has one), and
/// where its layers' weights are.
fn load_embeddings<'a>(vb: VarBuilder<'a>, shape: &Shape) -> Result<(Embeddings, Option<Norm>, VarBuilder<'a>)> {
    let s = shape;
    let (h, eps) = (s.hidden, s.eps);
    Ok(match s.family {
        Family::Bert => {
            let vb = strip_prefix(vb, "embeddings.word_embeddings.weight");
            let e = vb.pp("embeddings");
            let embed = Embeddings {
                words: e.get((s.vocab, h), "word_embeddings.weight")?,
                token_type: e.get_unchecked("token_type_embeddings.weight").ok(),
                position: Some((e.get_unchecked("position_embeddings.weight")?, s.position_offset)),
                norm: Some(Norm::layer(e.pp("LayerNorm"), h, eps, true)?),
            };
            (embed, None, vb.pp("encoder.layer"))
        }
        Family::NomicBert | Family::JinaBert => {
            let vb = strip_prefix(vb, "embeddings.word_embeddings.weight");
            let e = vb.pp("embeddings");
            let norm = if s.family == Family::NomicBert { vb.pp("emb_ln") } else { e.pp("LayerNorm") };
            let embed = Embeddings {
                words: e.get((s.vocab, h), "word_embeddings.weight")?,
                token_type: e.get_unchecked("token_type_embeddings.weight").ok(),
                position: None,
                norm: Some(Norm::layer(norm, h, eps, true)?),
            };
            let layers = if s.family == Family::NomicBert { "encoder.layers" } else { "encoder.layer" };
            (embed, None, vb.pp(layers))
        }
        Family::ModernBert => {
            let vb = strip_prefix(vb, "embeddings.tok_embeddings.weight");
            let embed = Embeddings {
                words: vb.get((s.vocab, h), "embeddings.tok_embeddings.weight")?,
                token_type: None,
                position: None,
                norm: Some(Norm::layer(vb.pp("embeddings.norm"), h, eps, s.norm_bias)?),
            };
            (embed, Some(Norm::layer(vb.pp("final_norm"), h, eps, s.norm_bias)?), vb.pp("layers"))
        }
        Family::Qwen3 => {
            let vb = strip_prefix(vb, "embed_tokens.weight");
            let words = vb.get((s.vocab, h), "embed_tokens.weight")?;
            let embed = Embeddings { words, token_type: None, position: None, norm: None };
            (embed, Some(Norm::rms(vb.pp("norm"), h, eps)?), vb.pp("layers"))
        }
    })
}

impl Transformer {
    /// Loads the weights of a checkpoint of `shape`'s family.
    pub fn load(vb: VarBuilder, shape: &Shape) -> Result<Self> {
        let (embed, final_norm, layer_vb) = load_embeddings(vb, shape)?;
        let layers = (0..shape.layers).map(|n| Layer::load(layer_vb.pp(n), shape, n)).collect::<Result<Vec<_>>>()?;
        Ok(Self { shape: shape.clone(), embed, layers, final_norm, device: layer_vb.device().clone() })
    }

    /// The shape it was loaded with.
    pub fn shape(&self) -> &Shape {
        &self.shape
    }

    /// The last hidden states `(batch, len, hidden)` of `ids` `(batch, len)`, right-padded;
    /// `lens` are the real lengths, `types` the segment of each token (all 0 when `None`).
    pub fn forward(&self, ids: &Tensor, lens: &[usize], types: Option<&Tensor>) -> Result<Tensor> {
        let s = &self.shape;
        let (b, n) = ids.dims2()?;
        let lookup =
            |table: &Tensor, idx: &Tensor| table.index_select(&idx.flatten_all()?, 0)?.reshape((b, n, s.hidden));
        let mut x = lookup(&self.embed.words, ids)?;
        match (&self.embed.token_type, types) {
            (Some(table), Some(types)) => x = (x + lookup(table, types)?)?,
            (Some(table), None) => x = x.broadcast_add(&table.get(0)?)?,
            (None, _) => {}
        }
        if let Some((table, offset)) = &self.embed.position {
            let positions = Tensor::arange(*offset as u32, (offset + n) as u32, &self.device)?;
            x = x.broadcast_add(&table.index_select(&positions, 0)?.unsqueeze(0)?)?;
        }
        if let Some(norm) = &self.embed.norm {
            x = norm.forward(&x)?;
        }
        let visibility = if s.family.causal() { Visibility::Causal } else { Visibility::All };
        let mut bias = attention_bias(lens, n, visibility, &self.device)?;
        if s.family == Family::JinaBert {
            bias = bias.broadcast_add(&alibi_bias(s.heads, n, &self.device)?)?;
        }
        let rotary_family = matches!(s.family, Family::NomicBert | Family::ModernBert | Family::Qwen3);
        let half = s.windows.iter().flatten().next().copied();
        let ctx = Context {
            bias,
            window_bias: half.map(|w| attention_bias(lens, n, Visibility::Window(w), &self.device)).transpose()?,
            global_rope: rotary_family.then(|| rotary(n, s.head_dim, s.rope_theta, &self.device)).transpose()?,
            local_rope: half.map(|_| rotary(n, s.head_dim, s.local_rope_theta, &self.device)).transpose()?,
        };
        for layer in &self.layers {
            x = self.layer(layer, &x, &ctx)?;
        }
        match &self.final_norm {
            Some(norm) => norm.forward(&x),
            None => Ok(x),
        }
    }

    fn layer(&self, layer: &Layer, x: &Tensor, ctx: &Context) -> Result<Tensor> {
        let s = &self.shape;
        let (heads, d) = (s.heads, s.head_dim);
        let rope_global = || ctx.global_rope.as_ref().expect("rotary families have tables");
        match layer {
            Layer::Bert { q, k, v, dense, att_norm, inter, out, out_norm, tanh } => {
                let split = |t: &Linear| split_heads(&t.forward(x)?, heads, d);
                let ctx_out = attend(&split(q)?, &split(k)?, &split(v)?, &ctx.bias)?;
                let a = att_norm.forward(&(dense.forward(&ctx_out)? + x)?)?;
                let i = inter.forward(&a)?;
                let i = if *tanh { i.gelu()? } else { i.gelu_erf()? };
                out_norm.forward(&(out.forward(&i)? + a)?)
            }
            Layer::Nomic { qkv, out, norm1, up, gate, down, norm2 } => {
                let (q, k, v) = thirds(&qkv.forward(x)?)?;
                let (q, k) = (
                    rope(&split_heads(&q, heads, d)?, rope_global())?,
                    rope(&split_heads(&k, heads, d)?, rope_global())?,
                );
                let a = out.forward(&attend(&q, &k, &split_heads(&v, heads, d)?, &ctx.bias)?)?;
                let x = norm1.forward(&(x + a)?)?;
                let m = down.forward(&gated(&up.forward(&x)?, &gate.forward(&x)?, Gate::Silu)?)?;
                norm2.forward(&(x + m)?)
            }
            Layer::Modern { attn_norm, qkv, out, mlp_norm, wi, wo, local } => {
                let a_in = match attn_norm {
                    Some(norm) => norm.forward(x)?,
                    None => x.clone(),
                };
                let (q, k, v) = thirds(&qkv.forward(&a_in)?)?;
                let (table, bias) = if *local {
                    (
                        ctx.local_rope.as_ref().expect("local layers have tables"),
                        ctx.window_bias.as_ref().expect("and a bias"),
                    )
                } else {
                    (rope_global(), &ctx.bias)
                };
                let (q, k) = (rope(&split_heads(&q, heads, d)?, table)?, rope(&split_heads(&k, heads, d)?, table)?);
                let x = (x + out.forward(&attend(&q, &k, &split_heads(&v, heads, d)?, bias)?)?)?;
                let middle = gated_halves(&wi.forward(&mlp_norm.forward(&x)?)?, Gate::GeluErf, true)?;
                x + wo.forward(&middle)?
            }
            Layer::Jina { q, k, v, q_norm, k_norm, dense, out_norm, norm1, up_gated, down, norm2 } => {
                let qh = split_heads(&q_norm.forward(&q.forward(x)?)?, heads, d)?;
                let kh = split_heads(&k_norm.forward(&k.forward(x)?)?, heads, d)?;
                let ctx_out = attend(&qh, &kh, &split_heads(&v.forward(x)?, heads, d)?, &ctx.bias)?;
                let a = out_norm.forward(&(dense.forward(&ctx_out)? + x)?)?;
                let r = norm1.forward(&(x + a)?)?;
                let middle = gated_halves(&up_gated.forward(&r)?, Gate::GeluErf, false)?;
                norm2.forward(&(&r + down.forward(&middle)?)?)
            }
            Layer::Qwen { in_norm, q, k, v, q_norm, k_norm, o, post_norm, gate, up, down } => {
                let h = in_norm.forward(x)?;
                let (b, n, _) = h.dims3()?;
                let per_head = |t: Tensor, count: usize, norm: &Norm| -> Result<Tensor> {
                    norm.forward(&t.reshape((b, n, count, d))?)?.transpose(1, 2)?.contiguous()
                };
                let qh = rope(&per_head(q.forward(&h)?, heads, q_norm)?, rope_global())?;
                let kh = rope(&per_head(k.forward(&h)?, s.kv_heads, k_norm)?, rope_global())?;
                let vh = split_heads(&v.forward(&h)?, s.kv_heads, d)?;
                let x = (x + o.forward(&attend(&qh, &kh, &vh, &ctx.bias)?)?)?;
                let h = post_norm.forward(&x)?;
                x + down.forward(&gated(&up.forward(&h)?, &gate.forward(&h)?, Gate::Silu)?)?
            }
        }
    }

    /// Hands every dense layer's GEMM to oneDNN ([`super::gemm`]); CPU weights only.
    pub fn use_onednn(&mut self, dnnl: &crate::dnnl::Dnnl) -> std::result::Result<(), crate::error::ModelError> {
        for layer in &mut self.layers {
            for linear in layer.linears() {
                linear.use_onednn(dnnl)?;
            }
        }
        Ok(())
    }

    /// The device the weights are on.
    pub fn device(&self) -> &Device {
        &self.device
    }
}

/// A fused Q/K/V projection's output split into its three equal parts.
fn thirds(qkv: &Tensor) -> Result<(Tensor, Tensor, Tensor)> {
    let width = qkv.dim(candle_core::D::Minus1)? / 3;
    let part = |i: usize| qkv.narrow(candle_core::D::Minus1, i * width, width);
    Ok((part(0)?, part(1)?, part(2)?))
}
