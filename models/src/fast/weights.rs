//! The fast path's weights: a BERT encoder's tensors read from `model.safetensors` into f32
//! vectors, checked against `config.json`. Q, K and V of each layer are stacked into one
//! `[3H, H]` weight with the attention scale folded into Q, so one matmul computes all three.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use candle_core::{DType, Device};

use crate::{error::ModelError, loaded::LoadedModel};

/// The encoder's shape (from `config.json`).
#[derive(Debug, Clone, Copy)]
pub(super) struct Dims {
    pub(super) hidden: usize,
    pub(super) heads: usize,
    pub(super) head_dim: usize,
    pub(super) inter: usize,
    pub(super) eps: f32,
    /// The model card's pooling.
    pub(super) pooling: crate::card::Pooling,
}

/// One encoder layer's weights (PyTorch `Linear` layout, `[out, in]`) and layer norms.
pub(super) struct LayerWeights {
    pub(super) qkv: Arc<Vec<f32>>,
    pub(super) qkv_bias: Arc<Vec<f32>>,
    pub(super) attn_out: Arc<Vec<f32>>,
    pub(super) attn_out_bias: Arc<Vec<f32>>,
    pub(super) ln1: (Arc<Vec<f32>>, Arc<Vec<f32>>),
    pub(super) inter: Arc<Vec<f32>>,
    pub(super) inter_bias: Arc<Vec<f32>>,
    pub(super) out: Arc<Vec<f32>>,
    pub(super) out_bias: Arc<Vec<f32>>,
    pub(super) ln2: (Arc<Vec<f32>>, Arc<Vec<f32>>),
}

/// The whole encoder: embeddings and layers.
pub(super) struct EncoderWeights {
    pub(super) dims: Dims,
    pub(super) word: Vec<f32>,
    pub(super) position: Vec<f32>,
    pub(super) token_type: Vec<f32>,
    pub(super) emb_ln: (Vec<f32>, Vec<f32>),
    pub(super) layers: Vec<LayerWeights>,
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

impl EncoderWeights {
    /// Reads the weights of `loaded` (a plain BERT encoder with GELU and absolute positions).
    pub(super) fn load(loaded: &LoadedModel) -> Result<Self, ModelError> {
        let cfg = loaded.config();
        let get = |k: &str| cfg[k].as_u64().map(|v| v as usize);
        let bad = |m: &str| loaded.config_error(m);
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
        let dims = Dims { hidden, heads, head_dim: hidden / heads, inter, eps, pooling: loaded.card().pooling };
        let p = &loaded.files().weights;
        let map = candle_core::safetensors::load(p, &Device::Cpu)?;
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
