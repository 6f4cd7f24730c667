//! Token counting with a model's real tokenizer (no truncation, no special tokens).

use std::sync::Arc;

use tokenizers::Tokenizer;

use crate::{bert::load_tokenizer, resolve::ModelFiles, ModelError};

/// Counts tokens the way the embedding model sees them. Cheap to clone.
#[derive(Clone)]
pub struct TokenCounter {
    tokenizer: Arc<Tokenizer>,
}

impl TokenCounter {
    /// Loads the tokenizer of a resolved model.
    pub fn from_model(files: &ModelFiles) -> Result<Self, ModelError> {
        Ok(Self { tokenizer: Arc::new(load_tokenizer(&files.tokenizer, None)?) })
    }

    /// Number of tokens in `text`, without special tokens.
    pub fn count(&self, text: &str) -> usize {
        match self.tokenizer.encode_fast(text, false) {
            Ok(enc) => enc.get_ids().len(),
            // A tokenizer failure must not lose the text: fall back to a byte estimate.
            Err(_) => text.len() / 4 + 1,
        }
    }
}
