//! A BERT-family sentence embedder on candle: mean pooling over the attention mask, then L2
//! normalisation — the same computation as sentence-transformers' `Pooling(mean) + Normalize`.

use std::path::Path;

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use tokenizers::{Tokenizer, TruncationParams};

use crate::{resolve::ModelFiles, Embedder, ModelError};

/// Default window when the model ships no `sentence_bert_config.json`.
const DEFAULT_MAX_SEQ_LEN: usize = 256;

/// A loaded BERT sentence-embedding model.
pub struct BertEmbedder {
    model: BertModel,
    tokenizer: Tokenizer,
    device: Device,
    model_id: String,
    dim: usize,
    max_seq_len: usize,
}

pub(crate) fn read_json(path: &Path) -> Result<serde_json::Value, ModelError> {
    let text = std::fs::read_to_string(path).map_err(|source| ModelError::Io { path: path.to_path_buf(), source })?;
    serde_json::from_str(&text).map_err(|e| ModelError::Config { path: path.to_path_buf(), message: e.to_string() })
}

/// Loads the model's tokenizer with truncation to `max_len` tokens and no padding.
pub fn load_tokenizer(path: &Path, max_len: Option<usize>) -> Result<Tokenizer, ModelError> {
    let mut tokenizer = Tokenizer::from_file(path)
        .map_err(|e| ModelError::Tokenizer { path: path.to_path_buf(), message: e.to_string() })?;
    tokenizer.with_padding(None);
    let trunc = max_len.map(|max_length| TruncationParams { max_length, ..Default::default() });
    tokenizer
        .with_truncation(trunc)
        .map_err(|e| ModelError::Tokenizer { path: path.to_path_buf(), message: e.to_string() })?;
    Ok(tokenizer)
}

/// The model's token window (sentence-transformers' `max_seq_length`, capped by the position
/// table) and its parsed `config.json`.
pub(crate) fn window(files: &ModelFiles) -> Result<(usize, serde_json::Value), ModelError> {
    let config_json = read_json(&files.config)?;
    let max_pos = config_json["max_position_embeddings"].as_u64().unwrap_or(512) as usize;
    let st_config = files.dir.join("sentence_bert_config.json");
    let max_seq_len =
        if st_config.is_file() { read_json(&st_config)?["max_seq_length"].as_u64().map(|v| v as usize) } else { None }
            .unwrap_or(DEFAULT_MAX_SEQ_LEN)
            .min(max_pos);
    Ok((max_seq_len, config_json))
}

/// Tokenizes `texts` in parallel (the tokenizer's thread pool); an empty encoding becomes one
/// padding token so every text has at least one position.
pub(crate) fn encode_with(tokenizer: &Tokenizer, texts: &[String]) -> Result<Vec<Vec<u32>>, ModelError> {
    let encodings = tokenizer.encode_batch(texts.to_vec(), true).map_err(|e| ModelError::Encode(e.to_string()))?;
    Ok(encodings.into_iter().map(|e| if e.get_ids().is_empty() { vec![0] } else { e.get_ids().to_vec() }).collect())
}

impl BertEmbedder {
    /// Loads a model from resolved files onto `device` in f32.
    pub fn load(files: &ModelFiles, device: Device) -> Result<Self, ModelError> {
        Self::load_as(files, device, DType::F32)
    }

    /// Loads a model onto `device` with weights and activations in `dtype` (pooling and
    /// normalisation always run in f32).
    pub fn load_as(files: &ModelFiles, device: Device, dtype: DType) -> Result<Self, ModelError> {
        let (max_seq_len, config_json) = window(files)?;
        let config: Config = serde_json::from_value(config_json.clone())
            .map_err(|e| ModelError::Config { path: files.config.clone(), message: e.to_string() })?;
        let dim = config_json["hidden_size"].as_u64().unwrap_or(0) as usize;
        let tokenizer = load_tokenizer(&files.tokenizer, Some(max_seq_len))?;
        // SAFETY: the safetensors file is memory-mapped read-only; ctxd never writes model files.
        let vb = unsafe { VarBuilder::from_mmaped_safetensors(std::slice::from_ref(&files.weights), dtype, &device)? };
        let model = BertModel::load(vb, &config)?;
        Ok(Self { model, tokenizer, device, model_id: files.model_id(), dim, max_seq_len })
    }

    /// The token window (inputs are truncated to it).
    pub fn max_seq_len(&self) -> usize {
        self.max_seq_len
    }

    fn run(&self, ids: &[Vec<u32>], tokens: bool) -> Result<Vec<Vec<f32>>, ModelError> {
        let batch = ids.len();
        let max_len = ids.iter().map(Vec::len).max().unwrap_or(0).max(1);
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
        let token_type_ids = input_ids.zeros_like()?;
        let hidden = self.model.forward(&input_ids, &token_type_ids, Some(&mask))?.to_dtype(DType::F32)?;
        if tokens {
            let states = hidden.to_vec3::<f32>()?;
            return Ok(ids
                .iter()
                .zip(states)
                .map(|(row, state)| crate::unit_token_rows(&state[..row.len()].concat(), self.dim))
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
}
