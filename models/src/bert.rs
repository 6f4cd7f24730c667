//! A BERT-family sentence embedder on candle ([`Encoder`]): mean pooling over the attention mask,
//! then L2 normalisation — the same computation as sentence-transformers' `Pooling(mean) +
//! Normalize` — or the CLS / last-token pooling the model card asks for ([`crate::card`]).

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use tokenizers::Tokenizer;

use crate::card::Pooling;
use crate::encoder::{Encoder, EncoderConfig, StageClock};
use crate::{embedder::Embedder, error::ModelError, loaded::LoadedModel};

/// A loaded BERT sentence-embedding model.
pub struct BertEmbedder {
    model: Encoder,
    tokenizer: Tokenizer,
    device: Device,
    model_id: String,
    dim: usize,
    max_seq_len: usize,
    pooling: Pooling,
}

impl BertEmbedder {
    /// Loads a model's weights onto `device` in f32.
    pub fn load(loaded: &LoadedModel, device: Device) -> Result<Self, ModelError> {
        Self::load_as(loaded, device, DType::F32)
    }

    /// Loads a model onto `device` with weights and activations in `dtype` (pooling and
    /// normalisation always run in f32).
    pub fn load_as(loaded: &LoadedModel, device: Device, dtype: DType) -> Result<Self, ModelError> {
        let config: EncoderConfig =
            serde_json::from_value(loaded.config().clone()).map_err(|e| loaded.config_error(e.to_string()))?;
        let dim = loaded.config()["hidden_size"].as_u64().unwrap_or(0) as usize;
        let tokenizer = loaded.tokenizer()?;
        let weights = std::slice::from_ref(&loaded.files().weights);
        // SAFETY: the safetensors file is memory-mapped read-only; ctxd never writes model files.
        let vb = unsafe { VarBuilder::from_mmaped_safetensors(weights, DType::F32, &device)? };
        let model = Encoder::load(vb, &config, dtype)?;
        let (model_id, max_seq_len, pooling) = (loaded.model_id(), loaded.max_seq_len(), loaded.card().pooling);
        Ok(Self { model, tokenizer, device, model_id, dim, max_seq_len, pooling })
    }

    /// The token window (inputs are truncated to it).
    pub fn max_seq_len(&self) -> usize {
        self.max_seq_len
    }

    fn run(&mut self, ids: &[Vec<u32>], tokens: bool) -> Result<Vec<Vec<f32>>, ModelError> {
        let batch = ids.len();
        let max_len = ids.iter().map(Vec::len).max().unwrap_or(0).max(1);
        // On a GPU, batches are padded to a multiple of 8 tokens (masked like any padding): the
        // encoder's kernels then move 16 bytes at a time.
        let max_len = if self.device.is_cuda() {
            max_len.next_multiple_of(8).min(self.max_seq_len.max(max_len))
        } else {
            max_len
        };
        let mut flat_ids = Vec::with_capacity(batch * max_len);
        let mut flat_mask = Vec::with_capacity(batch * max_len);
        for row in ids {
            flat_ids.extend_from_slice(row);
            flat_ids.extend(std::iter::repeat_n(0u32, max_len - row.len()));
            flat_mask.extend(std::iter::repeat_n(1u32, row.len()));
            flat_mask.extend(std::iter::repeat_n(0u32, max_len - row.len()));
        }
        let input_ids = Tensor::from_vec(flat_ids, (batch, max_len), &self.device)?;
        let mask = Tensor::from_vec(flat_mask, (batch, max_len), &self.device)?;
        let lens: Vec<usize> = ids.iter().map(Vec::len).collect();
        let hidden = self.model.forward(&input_ids, &lens)?.to_dtype(DType::F32)?;
        if tokens || self.pooling != Pooling::Mean {
            let states = hidden.to_vec3::<f32>()?;
            return Ok(ids
                .iter()
                .zip(states)
                .map(|(row, state)| {
                    let real = state[..row.len()].concat();
                    if tokens {
                        crate::embedder::unit_token_rows(&real, self.dim)
                    } else {
                        self.pooling.pool(&real, self.dim)
                    }
                })
                .collect());
        }
        // Mean pooling over real tokens only.
        let mask_f = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
        let summed = hidden.broadcast_mul(&mask_f)?.sum(1)?;
        let counts = mask_f.sum(1)?.clamp(1e-9f32, f32::MAX)?;
        let mean = summed.broadcast_div(&counts)?;
        // L2 normalisation (sentence-transformers' Normalize clamps the norm at 1e-12).
        let norm = mean.sqr()?.sum_keepdim(1)?.sqrt()?.clamp(1e-12f32, f32::MAX)?;
        let normed = mean.broadcast_div(&norm)?;
        Ok(normed.to_vec2::<f32>()?)
    }
}

impl Embedder for BertEmbedder {
    crate::embedder::identity_from_fields!();

    fn forward(&mut self, ids: &[Vec<u32>]) -> Result<Vec<Vec<f32>>, ModelError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        self.run(ids, false)
    }

    fn forward_tokens(&mut self, ids: &[Vec<u32>]) -> Result<Vec<Vec<f32>>, ModelError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        self.run(ids, true)
    }

    fn stage_clock(&mut self) -> Option<&mut StageClock> {
        Some(self.model.clock())
    }
}
