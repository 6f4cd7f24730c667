//! Cross-encoders: a query and a document read *together* by one transformer, whose
//! sequence-classification head gives one relevance score per pair — slower than comparing two
//! vectors (one forward pass per candidate), sharper (every query token attends to every
//! document token). ctxd runs the three heads the common rerankers have:
//!
//! | `architectures` in `config.json`      | examples                                   | head |
//! |----------------------------------------|--------------------------------------------|------|
//! | `BertForSequenceClassification`        | cross-encoder/ms-marco-MiniLM-L-6-v2       | tanh pooler on [CLS], then a linear layer |
//! | `XLMRobertaForSequenceClassification`  | BAAI/bge-reranker-base, bge-reranker-v2-m3 | dense + tanh on `<s>`, then `out_proj` |
//! | `ModernBertForSequenceClassification`  | Alibaba-NLP/gte-reranker-modernbert-base   | CLS or mean pooling, dense + GELU + norm, then a linear layer |
//!
//! The score is the head's logit (its last label's, for a head with several); the same ranking as
//! sentence-transformers' `CrossEncoder.predict`, which puts a sigmoid over it.
//!
//! [`CrossEncoder`] is an [`Embedder`] whose texts are pairs ([`pair_text`]) and whose
//! "vectors" are one score each, so it runs on its own thread behind an
//! [`crate::service::EmbedService`] like any model, in the interactive lane, batched by length
//! ([`crate::service::EmbedService::score_pairs`]). Pairs are tokenized as the tokenizer's pair
//! template says (`[CLS] q [SEP] d [SEP]`, `<s> q </s></s> d </s>`), cut longest-first to the window;
//! BERT's second segment gets segment id 1, found after the first `[SEP]`.

use candle_core::{DType, Device, Tensor, D};
use candle_nn::VarBuilder;
use tokenizers::Tokenizer;

use crate::arch::layers::{padded, Linear, Norm};
use crate::arch::model::Transformer;
use crate::arch::{Family, Shape};
use crate::embedder::Embedder;
use crate::error::ModelError;
use crate::loaded::LoadedModel;

/// Separates a pair's query from its document in one text ([`pair_text`]).
pub const PAIR_SEP: char = '\u{1F}';

/// The longest pair a cross-encoder reads, in tokens.
pub const CROSS_WINDOW: usize = 512;

/// One text holding a (query, document) pair for [`CrossEncoder`].
pub fn pair_text(query: &str, document: &str) -> String {
    format!("{}{PAIR_SEP}{document}", query.replace(PAIR_SEP, " "))
}

enum Head {
    Bert { pooler: Linear, classifier: Linear },
    Roberta { dense: Linear, out: Linear },
    Modern { dense: Linear, norm: Norm, classifier: Linear, mean: bool },
}

/// A loaded cross-encoder (see the module docs).
pub struct CrossEncoder {
    model: Transformer,
    head: Head,
    tokenizer: Tokenizer,
    model_id: String,
    /// BERT's `[SEP]`: tokens after the first one are segment 1.
    sep: Option<u32>,
}

impl CrossEncoder {
    /// Loads a sequence-classification checkpoint onto `device` in f32; with `dnnl` (the CPU),
    /// its dense layers run on oneDNN ([`crate::arch::gemm`]).
    pub fn load(loaded: &LoadedModel, device: Device, dnnl: Option<&crate::dnnl::Dnnl>) -> Result<Self, ModelError> {
        let config = loaded.config();
        let arch = config["architectures"][0].as_str().unwrap_or("");
        let shape = Shape::read(config).map_err(|e| loaded.config_error(e))?;
        let weights = std::slice::from_ref(&loaded.files().weights);
        // SAFETY: the safetensors file is memory-mapped read-only; ctxd never writes model files.
        let vb = unsafe { VarBuilder::from_mmaped_safetensors(weights, DType::F32, &device)? };
        let h = shape.hidden;
        let labels = |vb: &VarBuilder| vb.get_unchecked("weight").and_then(|w| w.dim(0));
        let load_head = || -> candle_core::Result<Head> {
            Ok(match (shape.family, arch) {
                (Family::Bert, "BertForSequenceClassification") => {
                    let n = labels(&vb.pp("classifier"))?;
                    Head::Bert {
                        pooler: Linear::load(vb.pp("bert.pooler.dense"), h, h, true)?,
                        classifier: Linear::load(vb.pp("classifier"), n, h, true)?,
                    }
                }
                (Family::Bert, "XLMRobertaForSequenceClassification" | "RobertaForSequenceClassification") => {
                    let c = vb.pp("classifier");
                    let n = labels(&c.pp("out_proj"))?;
                    Head::Roberta {
                        dense: Linear::load(c.pp("dense"), h, h, true)?,
                        out: Linear::load(c.pp("out_proj"), n, h, true)?,
                    }
                }
                (Family::ModernBert, "ModernBertForSequenceClassification") => {
                    let n = labels(&vb.pp("classifier"))?;
                    let bias = config["classifier_bias"].as_bool().unwrap_or(false);
                    Head::Modern {
                        dense: Linear::load(vb.pp("head.dense"), h, h, bias)?,
                        norm: Norm::layer(vb.pp("head.norm"), h, shape.eps, shape.norm_bias)?,
                        classifier: Linear::load(vb.pp("classifier"), n, h, true)?,
                        mean: config["classifier_pooling"].as_str() == Some("mean"),
                    }
                }
                _ => candle_core::bail!(
                    "architecture '{arch}' is not a cross-encoder ctxd runs: BertForSequenceClassification, \
                     XLMRobertaForSequenceClassification or ModernBertForSequenceClassification"
                ),
            })
        };
        let failed = |e: candle_core::Error| {
            ModelError::Backend(format!("loading the cross-encoder {}: {e}", loaded.model_id()))
        };
        let head = load_head().map_err(failed)?;
        let mut model = Transformer::load(vb, &shape).map_err(failed)?;
        if let Some(dnnl) = dnnl {
            model.use_onednn(dnnl)?;
        }
        let window = CROSS_WINDOW.min(shape.max_positions.saturating_sub(shape.position_offset)).max(8);
        let tokenizer = crate::tokens::with_window(
            loaded.token_counter().tokenizer().clone(),
            Some(window),
            &loaded.files().tokenizer,
        )?;
        let types = config["type_vocab_size"].as_u64().unwrap_or(2) >= 2 && matches!(head, Head::Bert { .. });
        let sep = if types { tokenizer.token_to_id("[SEP]") } else { None };
        Ok(Self { model, head, tokenizer, model_id: loaded.model_id(), sep })
    }

    fn scores(&self, ids: &[Vec<u32>]) -> candle_core::Result<Vec<f32>> {
        let device = self.model.device();
        let (input, lens) = padded(ids, device)?;
        let n = input.dim(1)?;
        // BERT's segment ids: 1 after the first [SEP], 0 before it and on padding.
        let types = match self.sep {
            Some(sep) => {
                let types: Vec<u32> = ids
                    .iter()
                    .flat_map(|row| {
                        let first_sep = row.iter().position(|&t| t == sep).unwrap_or(usize::MAX);
                        (0..n).map(move |i| u32::from(i > first_sep && i < row.len()))
                    })
                    .collect();
                Some(Tensor::from_vec(types, (ids.len(), n), device)?)
            }
            None => None,
        };
        let hidden = self.model.forward(&input, &lens, types.as_ref())?;
        let first = hidden.narrow(1, 0, 1)?.squeeze(1)?;
        let logits = match &self.head {
            Head::Bert { pooler, classifier } => classifier.forward(&pooler.forward(&first)?.tanh()?)?,
            Head::Roberta { dense, out } => out.forward(&dense.forward(&first)?.tanh()?)?,
            Head::Modern { dense, norm, classifier, mean } => {
                let pooled = if *mean {
                    let mask: Vec<f32> =
                        lens.iter().flat_map(|&l| (0..n).map(move |i| f32::from(u8::from(i < l)))).collect();
                    let mask = Tensor::from_vec(mask, (ids.len(), n, 1), device)?;
                    hidden.broadcast_mul(&mask)?.sum(1)?.broadcast_div(&mask.sum(1)?)?
                } else {
                    first
                };
                classifier.forward(&norm.forward(&dense.forward(&pooled)?.gelu_erf()?)?)?
            }
        };
        let last = logits.dim(D::Minus1)? - 1;
        logits.narrow(D::Minus1, last, 1)?.squeeze(1)?.to_vec1::<f32>()
    }
}

impl Embedder for CrossEncoder {
    fn model_id(&self) -> &str {
        &self.model_id
    }

    /// One score per pair.
    fn dim(&self) -> usize {
        1
    }

    fn encode(&self, texts: &[String]) -> Result<Vec<Vec<u32>>, ModelError> {
        let pairs: Vec<(String, String)> = texts
            .iter()
            .map(|t| match t.split_once(PAIR_SEP) {
                Some((q, d)) => (q.to_string(), d.to_string()),
                None => (t.clone(), String::new()),
            })
            .collect();
        let encodings = self.tokenizer.encode_batch(pairs, true).map_err(|e| ModelError::Encode(e.to_string()))?;
        Ok(encodings.into_iter().map(|e| e.get_ids().to_vec()).collect())
    }

    fn forward(&mut self, ids: &[Vec<u32>]) -> Result<Vec<Vec<f32>>, ModelError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        Ok(self.scores(ids)?.into_iter().map(|s| vec![s]).collect())
    }

    fn has_token_states(&self) -> bool {
        false
    }
}
