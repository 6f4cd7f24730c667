//! The loaded model: a resolved model's small files, each read and parsed once.
//!
//! Loading a model needs `config.json` (the encoder's shape), the token window (optional:
//! `max_seq_length` in `sentence_bert_config.json`, where sentence-transformers kept it up to
//! 5.x, else `model_max_length` in `tokenizer_config.json`, where 6.x keeps it) and
//! `tokenizer.json`. [`LoadedModel::load`] reads each of them exactly
//! once; the candle embedder (`bert`, on the CPU and on a GPU), the fast CPU embedder (`fast`)
//! and the token counter (`tokens`) all take what they need from the one value. The weights are not part of it: each backend maps or reads `model.safetensors`
//! into its own layout.

use std::path::Path;
use std::sync::Arc;

use tokenizers::Tokenizer;

use crate::arch::Family;
use crate::card::ModelCard;
use crate::error::ModelError;
use crate::resolve::{resolve_model, ModelFiles};
use crate::tokens::{with_window, TokenCounter};

/// Default window when the model names none (see [`window`]).
const DEFAULT_MAX_SEQ_LEN: usize = 256;

/// A resolved model with its configuration and tokenizer loaded (see the module docs). Cheap to
/// clone (shared).
#[derive(Clone)]
pub struct LoadedModel {
    files: ModelFiles,
    /// `config.json`, parsed.
    config: Arc<serde_json::Value>,
    /// The token window: sentence-transformers' `max_seq_length`, capped by the position table.
    max_seq_len: usize,
    /// The tokenizer (no truncation, no padding) and its counting fast path.
    tokens: TokenCounter,
    /// The transformer family `config.json` names.
    family: Family,
    /// Pooling and prompts from the model card (and the config's prefixes).
    card: ModelCard,
    /// Appended to the model id when the config's document prefix replaces the card's
    /// (`+doc-<hash>`): documents embedded with another prefix are other vectors.
    id_suffix: String,
}

fn read_json(path: &Path) -> Result<serde_json::Value, ModelError> {
    let text = std::fs::read_to_string(path).map_err(|source| ModelError::Io { path: path.to_path_buf(), source })?;
    serde_json::from_str(&text).map_err(|e| ModelError::Config { path: path.to_path_buf(), message: e.to_string() })
}

/// The largest `model_max_length` taken as a window: transformers writes 10^30 for "no limit".
const WINDOW_SANITY: u64 = 1 << 20;

/// The token window a sentence-transformers folder names: `max_seq_length` in
/// `sentence_bert_config.json` (every release up to 5.x); where that file has none (6.x writes
/// the file without it), the tokenizer's `model_max_length` in `tokenizer_config.json`, unless
/// that is transformers' "no limit" value. `None` for a folder without `sentence_bert_config.json`
/// (not a sentence-transformers model: its tokenizer's limit is no embedding window).
fn window(dir: &Path) -> Result<Option<usize>, ModelError> {
    let st_config = dir.join("sentence_bert_config.json");
    if !st_config.is_file() {
        return Ok(None);
    }
    let sane = |v: &serde_json::Value| v.as_u64().filter(|&n| n > 0 && n <= WINDOW_SANITY);
    let window = match sane(&read_json(&st_config)?["max_seq_length"]) {
        Some(n) => Some(n),
        None => {
            let tokenizer_config = dir.join("tokenizer_config.json");
            if tokenizer_config.is_file() {
                sane(&read_json(&tokenizer_config)?["model_max_length"])
            } else {
                None
            }
        }
    };
    Ok(window.map(|n| n as usize))
}

impl LoadedModel {
    /// Resolves `spec` ([`resolve_model`]) and loads it.
    pub fn resolve(spec: &str) -> Result<Self, ModelError> {
        Self::load(resolve_model(spec)?)
    }

    /// Reads the configuration and the tokenizer of resolved model files.
    pub fn load(files: ModelFiles) -> Result<Self, ModelError> {
        let config = read_json(&files.config)?;
        let family =
            Family::detect(&config).map_err(|message| ModelError::Config { path: files.config.clone(), message })?;
        let max_pos =
            config["max_position_embeddings"].as_u64().or_else(|| config["n_positions"].as_u64()).unwrap_or(512)
                as usize;
        let max_seq_len = window(&files.dir)?.unwrap_or(DEFAULT_MAX_SEQ_LEN).min(max_pos);
        let tokens = TokenCounter::from_model(&files)?.with_model_window(max_seq_len);
        let card = ModelCard::read(&files.dir, family)?;
        Ok(Self { files, config: Arc::new(config), max_seq_len, tokens, family, card, id_suffix: String::new() })
    }

    /// The transformer family ([`Family::detect`]).
    pub fn family(&self) -> Family {
        self.family
    }

    /// Pooling and prompts ([`ModelCard`]).
    pub fn card(&self) -> &ModelCard {
        &self.card
    }

    /// The model with the config's `query_prefix` / `document_prefix` in place of its card's
    /// prompts, where set ([`ModelCard::with_prefixes`]).
    pub fn with_prefixes(mut self, query: Option<&str>, document: Option<&str>) -> Self {
        let card = self.card.clone().with_prefixes(query, document);
        if card.document_prompt != self.card.document_prompt {
            let prompt = card.document_prompt.as_deref().unwrap_or("");
            self.id_suffix = format!("+doc-{}", &blake3::hash(prompt.as_bytes()).to_hex()[..8]);
        }
        self.card = card;
        self
    }

    /// Where the files are.
    pub fn files(&self) -> &ModelFiles {
        &self.files
    }

    /// The model id stored in the index ([`ModelFiles::model_id`]).
    pub fn model_id(&self) -> String {
        format!("{}{}", self.files.model_id(), self.id_suffix)
    }

    /// The parsed `config.json`.
    pub fn config(&self) -> &serde_json::Value {
        &self.config
    }

    /// An error about `config.json`.
    pub(crate) fn config_error(&self, message: impl Into<String>) -> ModelError {
        ModelError::Config { path: self.files.config.clone(), message: message.into() }
    }

    /// The embedding dimension (`hidden_size` in `config.json`).
    pub fn dim(&self) -> Result<usize, ModelError> {
        match self.config["hidden_size"].as_u64() {
            Some(d) if d > 0 => Ok(d as usize),
            _ => Err(self.config_error("hidden_size missing")),
        }
    }

    /// The token window (embedders truncate their inputs to it).
    pub fn max_seq_len(&self) -> usize {
        self.max_seq_len
    }

    /// A token counter with the model's tokenizer (shares it; cheap).
    pub fn token_counter(&self) -> TokenCounter {
        self.tokens.clone()
    }

    /// The tokenizer as the embedders use it: truncated to [`LoadedModel::max_seq_len`], no
    /// padding.
    pub fn tokenizer(&self) -> Result<Tokenizer, ModelError> {
        with_window(self.tokens.tokenizer().clone(), Some(self.max_seq_len), &self.files.tokenizer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model_dir(name: &str, config: &str, sentence_bert: Option<&str>) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("ctxd-loaded-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("config.json"), config).unwrap();
        std::fs::write(dir.join("model.safetensors"), b"").unwrap();
        let tokenizer = r#"{"version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
            "normalizer": null, "pre_tokenizer": {"type": "Whitespace"}, "post_processor": null, "decoder": null,
            "model": {"type": "WordLevel", "vocab": {"a": 0, "b": 1, "[UNK]": 2}, "unk_token": "[UNK]"}}"#;
        std::fs::write(dir.join("tokenizer.json"), tokenizer).unwrap();
        if let Some(st) = sentence_bert {
            std::fs::write(dir.join("sentence_bert_config.json"), st).unwrap();
        }
        dir
    }

    #[test]
    fn window_dim_and_tokenizer_come_from_one_load() {
        let dir = model_dir(
            "ok",
            r#"{"hidden_size": 8, "max_position_embeddings": 128}"#,
            Some(r#"{"max_seq_length": 512}"#),
        );
        let model = LoadedModel::resolve(dir.to_str().unwrap()).unwrap();
        assert_eq!(model.dim().unwrap(), 8);
        assert_eq!(model.max_seq_len(), 128, "the window is capped by the position table");
        assert_eq!(model.token_counter().count("a b a c"), 4);
        let tokenizer = model.tokenizer().unwrap();
        assert_eq!(tokenizer.get_truncation().map(|t| t.max_length), Some(128));
        assert!(tokenizer.get_padding().is_none());
        assert!(model.token_counter().tokenizer().get_truncation().is_none(), "counting never truncates");
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn the_window_sentence_transformers_6_writes() {
        let config = r#"{"hidden_size": 8, "max_position_embeddings": 512}"#;
        let v6 = r#"{"transformer_task": "feature-extraction", "module_output_name": "token_embeddings"}"#;
        let dir = model_dir("v6", config, Some(v6));
        std::fs::write(dir.join("tokenizer_config.json"), r#"{"model_max_length": 200}"#).unwrap();
        assert_eq!(LoadedModel::resolve(dir.to_str().unwrap()).unwrap().max_seq_len(), 200);
        // 5.x's `max_seq_length` wins over the tokenizer's (MiniLM: 256 and 512).
        std::fs::write(dir.join("sentence_bert_config.json"), r#"{"max_seq_length": 128}"#).unwrap();
        assert_eq!(LoadedModel::resolve(dir.to_str().unwrap()).unwrap().max_seq_len(), 128);
        // transformers' "no limit" is no window.
        std::fs::write(dir.join("sentence_bert_config.json"), v6).unwrap();
        std::fs::write(dir.join("tokenizer_config.json"), r#"{"model_max_length": 1000000000000000019884624838656}"#)
            .unwrap();
        assert_eq!(LoadedModel::resolve(dir.to_str().unwrap()).unwrap().max_seq_len(), DEFAULT_MAX_SEQ_LEN);
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn default_window_and_missing_hidden_size() {
        let dir = model_dir("nodim", r#"{"max_position_embeddings": 512}"#, None);
        // Not a sentence-transformers folder: the tokenizer's limit is not the window.
        std::fs::write(dir.join("tokenizer_config.json"), r#"{"model_max_length": 100}"#).unwrap();
        let model = LoadedModel::resolve(dir.to_str().unwrap()).unwrap();
        assert_eq!(model.max_seq_len(), DEFAULT_MAX_SEQ_LEN);
        let err = model.dim().unwrap_err().to_string();
        assert!(err.contains("hidden_size missing") && err.contains("config.json"), "{err}");
        std::fs::remove_dir_all(&dir).ok();
    }
}
