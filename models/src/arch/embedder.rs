//! [`ArchEmbedder`]: the [`crate::embedder::Embedder`] of the non-BERT families — tokenize, run
//! [`Transformer`] over a right-padded batch, pool each sequence as its model card says
//! ([`crate::card::Pooling`]) and scale to unit length. Token states (for late-interaction
//! rescoring) come from the encoder families; a decoder's causal states are not offered
//! ([`crate::embedder::Embedder::has_token_states`] is false for Qwen3).

use candle_core::{DType, Device};
use candle_nn::VarBuilder;
use tokenizers::Tokenizer;

use super::layers::padded;
use super::model::Transformer;
use super::Shape;
use crate::card::Pooling;
use crate::error::ModelError;
use crate::loaded::LoadedModel;
use crate::{embedder::Embedder, tokens};

/// A loaded NomicBERT / ModernBERT / JinaBERT / Qwen3 embedder.
pub struct ArchEmbedder {
    model: Transformer,
    tokenizer: Tokenizer,
    model_id: String,
    pooling: Pooling,
}

impl ArchEmbedder {
    /// Loads `loaded` (a non-BERT family) onto `device` in f32; with `dnnl` (the CPU), its dense
    /// layers run on oneDNN ([`super::gemm`]).
    pub fn load(loaded: &LoadedModel, device: Device, dnnl: Option<&crate::dnnl::Dnnl>) -> Result<Self, ModelError> {
        let shape = Shape::read(loaded.config()).map_err(|e| loaded.config_error(e))?;
        let weights = std::slice::from_ref(&loaded.files().weights);
        // SAFETY: the safetensors file is memory-mapped read-only; ctxd never writes model files.
        let vb = unsafe { VarBuilder::from_mmaped_safetensors(weights, DType::F32, &device)? };
        let mut model = Transformer::load(vb, &shape).map_err(|e| {
            ModelError::Backend(format!(
                "loading the {} weights of {}: {e} (is model.safetensors the checkpoint config.json describes?)",
                shape.family.name(),
                loaded.files().weights.display()
            ))
        })?;
        if let Some(dnnl) = dnnl {
            model.use_onednn(dnnl)?;
        }
        Ok(Self { model, tokenizer: loaded.tokenizer()?, model_id: loaded.model_id(), pooling: loaded.card().pooling })
    }

    fn run(&mut self, ids: &[Vec<u32>], tokens: bool) -> Result<Vec<Vec<f32>>, ModelError> {
        let (input, lens) = padded(ids, self.model.device())?;
        let hidden = self.model.forward(&input, &lens, None)?.to_dtype(DType::F32)?.to_vec3::<f32>()?;
        let width = self.model.shape().hidden;
        Ok(hidden
            .into_iter()
            .zip(&lens)
            .map(|(states, &len)| {
                let real = states[..len].concat();
                if tokens {
                    crate::embedder::unit_token_rows(&real, width)
                } else {
                    self.pooling.pool(&real, width)
                }
            })
            .collect())
    }
}

impl Embedder for ArchEmbedder {
    fn model_id(&self) -> &str {
        &self.model_id
    }

    fn dim(&self) -> usize {
        self.model.shape().hidden
    }

    fn encode(&self, texts: &[String]) -> Result<Vec<Vec<u32>>, ModelError> {
        tokens::encode(&self.tokenizer, texts)
    }

    fn forward(&mut self, ids: &[Vec<u32>]) -> Result<Vec<Vec<f32>>, ModelError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        self.run(ids, false)
    }

    fn forward_tokens(&mut self, ids: &[Vec<u32>]) -> Result<Vec<Vec<f32>>, ModelError> {
        if !self.has_token_states() {
            return Err(ModelError::Backend(format!("model {} (a decoder) has no token embeddings", self.model_id)));
        }
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        self.run(ids, true)
    }

    fn has_token_states(&self) -> bool {
        !self.model.shape().family.causal()
    }
}
