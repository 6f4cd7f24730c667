//! Which transformer a checkpoint is, and its shape, read from `config.json`.
//!
//! ctxd runs five families. BERT (and RoBERTa-style BERTs: all-MiniLM, bge, e5, gte…) keeps its
//! own encoder ([`crate::encoder`]) and the oneDNN fast path ([`crate::fast`]); the other four
//! run on candle through [`model::Transformer`], one implementation whose per-family parts are
//! chosen from [`Shape`]:
//!
//! | family       | `config.json` says                                  | position | MLP    | norm            | attention |
//! |--------------|-----------------------------------------------------|----------|--------|-----------------|-----------|
//! | `NomicBert`  | `model_type: nomic_bert` (CodeRankEmbed, nomic-embed-text) | rotary | SwiGLU | post, LayerNorm | bidirectional |
//! | `ModernBert` | `model_type: modernbert` (gte-modernbert, granite-embedding r2) | rotary, two bases | GeGLU | pre, LayerNorm | global every n-th layer, sliding window between |
//! | `JinaBert`   | `model_type: bert` + `position_embedding_type: alibi` (jina-embeddings-v2) | ALiBi | GeGLU | post, LayerNorm; Q/K LayerNorm | bidirectional |
//! | `Qwen3`      | `model_type: qwen3` (Qwen3-Embedding)               | rotary   | SwiGLU | pre, RMSNorm; per-head Q/K RMSNorm | causal, grouped K/V heads |
//!
//! Both spellings of a config are read where a family has two: NomicBERT's original keys
//! (`n_embd`, `n_head`, `rotary_emb_base`…) and transformers' (`hidden_size`, `rope_parameters`);
//! ModernBERT's `global_rope_theta`/`global_attn_every_n_layers` and transformers 5's
//! `rope_parameters`/`layer_types`. Anything else is refused with the list of what runs
//! ([`Family::detect`]).

pub(crate) mod embedder;
pub(crate) mod gemm;
pub(crate) mod layers;
pub(crate) mod model;

use serde_json::Value;

/// Padded tokens per forward pass of [`model::Transformer`] on the CPU, whatever `[model]
/// max_batch_tokens` allows: its intermediates then stay in the caches (1,024 tokens × 3,072 f32
/// is 12 MB where 8,192 tokens made 100 MB buffers, each a fresh allocation). Measured on
/// NomicBERT at full size, 2 cores: 2.9 chunks/s at 8,192 tokens, 4.2 at 512 and 2,048, 4.4 at
/// 1,024 and 1,536.
pub const CPU_BATCH_TOKENS: usize = 1024;

/// A transformer family ctxd can run (the module docs' table).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    Bert,
    NomicBert,
    ModernBert,
    JinaBert,
    Qwen3,
}

/// The `model_type` values ctxd runs, for the error that names them.
pub const SUPPORTED: &str = "bert, roberta, xlm-roberta (BERT encoders), nomic_bert, modernbert, \
     bert with position_embedding_type alibi (JinaBERT v2), qwen3";

impl Family {
    /// The family of a parsed `config.json`; `Err` names the model type and what is supported.
    /// A config without `model_type` is taken for a BERT (as ctxd always has).
    pub fn detect(config: &Value) -> Result<Self, String> {
        let model_type = config["model_type"].as_str().unwrap_or("bert");
        let alibi = config["position_embedding_type"].as_str() == Some("alibi");
        let jina_arch = config["architectures"]
            .as_array()
            .is_some_and(|a| a.iter().any(|v| v.as_str().is_some_and(|s| s.starts_with("JinaBert"))));
        match model_type {
            "bert" if alibi || jina_arch => Ok(Self::JinaBert),
            "bert" | "roberta" | "xlm-roberta" => Ok(Self::Bert),
            "nomic_bert" => Ok(Self::NomicBert),
            "modernbert" => Ok(Self::ModernBert),
            "qwen3" => Ok(Self::Qwen3),
            other => Err(format!("model_type '{other}' is not one ctxd runs; supported: {SUPPORTED}")),
        }
    }

    /// The name used in logs and the README (`nomic_bert`, …).
    pub fn name(self) -> &'static str {
        match self {
            Self::Bert => "bert",
            Self::NomicBert => "nomic_bert",
            Self::ModernBert => "modernbert",
            Self::JinaBert => "jina_bert",
            Self::Qwen3 => "qwen3",
        }
    }

    /// Whether attention only looks back (a decoder used as an embedder).
    pub fn causal(self) -> bool {
        self == Self::Qwen3
    }
}

/// The shape of a checkpoint, whichever spelling its config uses.
#[derive(Debug, Clone, PartialEq)]
pub struct Shape {
    pub family: Family,
    pub vocab: usize,
    pub hidden: usize,
    pub layers: usize,
    pub heads: usize,
    /// Key/value heads (fewer than `heads` with grouped-query attention).
    pub kv_heads: usize,
    pub head_dim: usize,
    pub intermediate: usize,
    pub eps: f64,
    /// Rotary base of full-attention layers (rotary families).
    pub rope_theta: f64,
    /// Rotary base of sliding-window layers (ModernBERT).
    pub local_rope_theta: f64,
    /// Per layer: `Some(half window)` for a sliding-window layer (ModernBERT), `None` for full.
    pub windows: Vec<Option<usize>>,
    /// Whether projections carry biases (ModernBERT's `attention_bias`/`mlp_bias`, Qwen3's
    /// `attention_bias`).
    pub attention_bias: bool,
    pub mlp_bias: bool,
    /// Whether ModernBERT's norms have a bias.
    pub norm_bias: bool,
    /// The position table's length (the model's longest input).
    pub max_positions: usize,
    /// Where BERT's absolute positions start: 0, or RoBERTa's `pad_token_id + 1`.
    pub position_offset: usize,
    /// Whether BERT's GELU is the tanh approximation (`gelu_new`, `gelu_pytorch_tanh`).
    pub gelu_tanh: bool,
}

fn num(config: &Value, keys: &[&str]) -> Option<f64> {
    keys.iter().find_map(|k| config[*k].as_f64())
}

fn size(config: &Value, keys: &[&str]) -> Result<usize, String> {
    num(config, keys).map(|v| v as usize).filter(|v| *v > 0).ok_or_else(|| format!("{} missing", keys.join(" / ")))
}

/// A rope base from transformers 5's `rope_parameters` (flat, or keyed by layer type).
fn rope_base(config: &Value, layer_type: &str) -> Option<f64> {
    let p = &config["rope_parameters"];
    p[layer_type]["rope_theta"].as_f64().or_else(|| p["rope_theta"].as_f64())
}

impl Shape {
    /// Reads the shape of a config of a known family ([`Family::detect`]).
    pub fn read(config: &Value) -> Result<Self, String> {
        let family = Family::detect(config)?;
        let hidden = size(config, &["hidden_size", "n_embd"])?;
        let heads = size(config, &["num_attention_heads", "n_head"])?;
        let layers = size(config, &["num_hidden_layers", "n_layer"])?;
        let kv_heads = num(config, &["num_key_value_heads"]).map_or(heads, |v| v as usize);
        let head_dim = num(config, &["head_dim"]).map_or(hidden / heads, |v| v as usize);
        let intermediate = size(config, &["intermediate_size", "n_inner"])?;
        let eps = num(config, &["layer_norm_eps", "layer_norm_epsilon", "norm_eps", "rms_norm_eps"]).unwrap_or(1e-12);
        let max_positions = num(config, &["max_position_embeddings", "n_positions"]).map_or(512, |v| v as usize);
        let (rope_theta, local_rope_theta) = match family {
            Family::ModernBert => (
                num(config, &["global_rope_theta"])
                    .or_else(|| rope_base(config, "full_attention"))
                    .unwrap_or(160_000.0),
                num(config, &["local_rope_theta"])
                    .or_else(|| rope_base(config, "sliding_attention"))
                    .unwrap_or(10_000.0),
            ),
            _ => {
                let theta = num(config, &["rotary_emb_base", "rope_theta"])
                    .or_else(|| rope_base(config, "full_attention"))
                    .unwrap_or(if family == Family::Qwen3 { 1_000_000.0 } else { 10_000.0 });
                (theta, theta)
            }
        };
        let windows = if family == Family::ModernBert {
            let half = num(config, &["local_attention"]).map_or(64, |v| v as usize / 2);
            let every = num(config, &["global_attn_every_n_layers"]).map_or(3, |v| (v as usize).max(1));
            match config["layer_types"].as_array() {
                Some(types) if types.len() == layers => {
                    types.iter().map(|t| (t.as_str() == Some("sliding_attention")).then_some(half)).collect()
                }
                _ => (0..layers).map(|i| (i % every != 0).then_some(half)).collect(),
            }
        } else {
            vec![None; layers]
        };
        if family == Family::NomicBert {
            let fraction = num(config, &["rotary_emb_fraction"]).unwrap_or(1.0);
            if (fraction - 1.0).abs() > 1e-9 || config["rotary_emb_interleaved"].as_bool() == Some(true) {
                return Err("NomicBERT with a partial or interleaved rotary embedding is not supported".into());
            }
            if config["prenorm"].as_bool() == Some(true) {
                return Err("NomicBERT with prenorm is not supported".into());
            }
        }
        if hidden % heads != 0 && num(config, &["head_dim"]).is_none() {
            return Err(format!("hidden_size {hidden} is not a multiple of the {heads} attention heads"));
        }
        Ok(Self {
            family,
            vocab: size(config, &["vocab_size"])?,
            hidden,
            layers,
            heads,
            kv_heads,
            head_dim,
            intermediate,
            eps,
            rope_theta,
            local_rope_theta,
            windows,
            attention_bias: config["attention_bias"].as_bool().unwrap_or(false)
                || config["qkv_proj_bias"].as_bool().unwrap_or(false),
            mlp_bias: config["mlp_bias"].as_bool().unwrap_or(false),
            norm_bias: config["norm_bias"].as_bool().unwrap_or(false),
            max_positions,
            position_offset: match config["model_type"].as_str() {
                Some("roberta" | "xlm-roberta") => num(config, &["pad_token_id"]).map_or(2, |p| p as usize + 1),
                _ => 0,
            },
            gelu_tanh: matches!(config["hidden_act"].as_str(), Some("gelu_new" | "gelu_pytorch_tanh" | "gelu_fast")),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn families_come_from_the_config_and_unknown_ones_are_named() {
        assert_eq!(Family::detect(&json!({"model_type": "bert"})).unwrap(), Family::Bert);
        assert_eq!(Family::detect(&json!({})).unwrap(), Family::Bert);
        let jina = json!({"model_type": "bert", "position_embedding_type": "alibi"});
        assert_eq!(Family::detect(&jina).unwrap(), Family::JinaBert);
        assert_eq!(Family::detect(&json!({"model_type": "qwen3"})).unwrap(), Family::Qwen3);
        let err = Family::detect(&json!({"model_type": "t5"})).unwrap_err();
        assert!(err.contains("'t5'") && err.contains("modernbert") && err.contains("qwen3"), "{err}");
    }

    #[test]
    fn both_spellings_of_a_config_read_the_same() {
        let original = json!({"model_type": "nomic_bert", "n_embd": 64, "n_head": 4, "n_layer": 2, "n_inner": 128,
            "n_positions": 512, "rotary_emb_base": 1000, "layer_norm_epsilon": 1e-12, "vocab_size": 1200});
        let hf = json!({"model_type": "nomic_bert", "hidden_size": 64, "num_attention_heads": 4,
            "num_hidden_layers": 2, "intermediate_size": 128, "max_position_embeddings": 512,
            "rope_parameters": {"rope_theta": 1000.0}, "layer_norm_eps": 1e-12, "vocab_size": 1200});
        assert_eq!(Shape::read(&original).unwrap(), Shape::read(&hf).unwrap());
        // ModernBERT: transformers 4's keys and transformers 5's layer types agree.
        let v4 = json!({"model_type": "modernbert", "hidden_size": 64, "num_attention_heads": 4,
            "num_hidden_layers": 3, "intermediate_size": 96, "vocab_size": 10, "global_rope_theta": 160000.0,
            "local_rope_theta": 10000.0, "global_attn_every_n_layers": 3, "local_attention": 8});
        let v5 = json!({"model_type": "modernbert", "hidden_size": 64, "num_attention_heads": 4,
            "num_hidden_layers": 3, "intermediate_size": 96, "vocab_size": 10, "local_attention": 8,
            "layer_types": ["full_attention", "sliding_attention", "sliding_attention"],
            "rope_parameters": {"full_attention": {"rope_theta": 160000.0}, "sliding_attention": {"rope_theta": 10000.0}}});
        let (a, b) = (Shape::read(&v4).unwrap(), Shape::read(&v5).unwrap());
        assert_eq!(a, b);
        assert_eq!(a.windows, vec![None, Some(4), Some(4)]);
    }
}
