//! What a model's card says about using it, read from the sentence-transformers files beside the
//! weights: how token states become one vector (**pooling**: CLS, mean or last token; from
//! `modules.json` → the Pooling module's `config.json`, usually `1_Pooling/config.json`, in either
//! form the library has written: `"pooling_mode": "mean"` since 6.0, `"pooling_mode_mean_tokens":
//! true` before), and the **prompts** put before queries and documents (`config_sentence_transformers.json` →
//! `prompts`: `query`, and `document` or `passage`). `[model] query_prefix` / `document_prefix`
//! in the config override the card's prompts ([`ModelCard::with_prefixes`]).
//!
//! A model without a Pooling module pools by its family's convention: the last token for a
//! decoder (Qwen3), the mean otherwise (JinaBERT's `emb_pooler: mean` included). ctxd always scales the pooled
//! vector to unit length (the index ranks by cosine), whether or not the card has a `Normalize`
//! module; the ranking is the same either way.
//!
//! Prompts are text: [`ModelCard::query_text`] and [`ModelCard::document_text`] put them before
//! a query or a chunk's text before tokenizing, as sentence-transformers does (its
//! `include_prompt: false`, which pools without the prompt's tokens, is not followed: the
//! prompt's tokens are pooled with the rest, said once in the log).

use std::ops::Range;
use std::path::Path;

use serde_json::Value;

use crate::arch::Family;
use crate::error::ModelError;

/// How a sequence's token states become one vector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pooling {
    /// The first token's state ([CLS]).
    Cls,
    /// The mean over real tokens.
    Mean,
    /// The last real token's state (decoders).
    LastToken,
}

impl Pooling {
    /// The rows of a `len`-token sequence this pooling averages.
    pub fn rows(self, len: usize) -> Range<usize> {
        match self {
            Self::Cls => 0..len.min(1),
            Self::Mean => 0..len,
            Self::LastToken => len.saturating_sub(1)..len,
        }
    }

    /// Pools `hidden` (`len × width`, row-major, real tokens only) into one unit vector.
    pub fn pool(self, hidden: &[f32], width: usize) -> Vec<f32> {
        let len = hidden.len() / width.max(1);
        let rows = self.rows(len);
        let mut out = vec![0.0f32; width];
        for row in hidden[rows.start * width..rows.end * width].chunks_exact(width.max(1)) {
            out.iter_mut().zip(row).for_each(|(o, v)| *o += v);
        }
        crate::embedder::scale_to_unit(&mut out);
        out
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Cls => "cls",
            Self::Mean => "mean",
            Self::LastToken => "last token",
        }
    }
}

/// A model card's pooling and prompts (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelCard {
    pub pooling: Pooling,
    /// Put before every query's text.
    pub query_prompt: Option<String>,
    /// Put before every document's (chunk's) text.
    pub document_prompt: Option<String>,
    /// Where the pooling came from, for the log line.
    pub pooling_from: String,
}

fn read(path: &Path) -> Result<Option<Value>, ModelError> {
    if !path.is_file() {
        return Ok(None);
    }
    let text = std::fs::read_to_string(path).map_err(|source| ModelError::Io { path: path.to_path_buf(), source })?;
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| ModelError::Config { path: path.to_path_buf(), message: e.to_string() })
}

/// The Pooling module's config path from `modules.json` (`1_Pooling/config.json` by default).
fn pooling_config(dir: &Path) -> Result<std::path::PathBuf, ModelError> {
    let modules = read(&dir.join("modules.json"))?;
    let path = modules
        .as_ref()
        .and_then(Value::as_array)
        .and_then(|m| m.iter().find(|m| m["type"].as_str().is_some_and(|t| t.ends_with("Pooling"))))
        .and_then(|m| m["path"].as_str())
        .unwrap_or("1_Pooling");
    Ok(dir.join(path).join("config.json"))
}

/// The up-to-5.x flags of a Pooling config and the mode each turns on (sentence-transformers'
/// own table).
const POOLING_FLAGS: [(&str, &str); 6] = [
    ("pooling_mode_cls_token", "cls"),
    ("pooling_mode_max_tokens", "max"),
    ("pooling_mode_mean_tokens", "mean"),
    ("pooling_mode_mean_sqrt_len_tokens", "mean_sqrt_len_tokens"),
    ("pooling_mode_weightedmean_tokens", "weightedmean"),
    ("pooling_mode_lasttoken", "lasttoken"),
];

/// The pooling a Pooling module's config names, in either form sentence-transformers writes:
/// `pooling_mode` (a name, or a list of names: 6.x) or the `pooling_mode_*` flags (up to 5.x).
/// Exactly one mode must be set, and one ctxd runs: max pooling, the square-root mean, the
/// weighted mean and concatenated poolings are refused by name.
fn pooling_of(config: &Value) -> Result<Pooling, String> {
    let modes: Vec<String> = match &config["pooling_mode"] {
        Value::String(name) => vec![name.clone()],
        Value::Array(names) => names.iter().map(|n| n.as_str().map_or_else(|| n.to_string(), str::to_string)).collect(),
        Value::Null => POOLING_FLAGS
            .iter()
            .filter(|(flag, _)| config[*flag].as_bool() == Some(true))
            .map(|(_, mode)| mode.to_string())
            .collect(),
        other => return Err(format!("pooling_mode {other} is neither a name nor a list of names")),
    };
    match &modes[..] {
        [mode] => match mode.as_str() {
            "cls" => Ok(Pooling::Cls),
            "mean" => Ok(Pooling::Mean),
            "lasttoken" => Ok(Pooling::LastToken),
            other => Err(format!("pooling mode {other:?} is not one ctxd runs (cls, mean or lasttoken)")),
        },
        [] => Err("no pooling mode is set (ctxd runs cls, mean or lasttoken)".into()),
        several => Err(format!("pooling modes {several:?} are concatenated; ctxd runs one of cls, mean or lasttoken")),
    }
}

impl ModelCard {
    /// Reads the card of the model in `dir` of `family`.
    pub fn read(dir: &Path, family: Family) -> Result<Self, ModelError> {
        let path = pooling_config(dir)?;
        let (pooling, pooling_from) = match read(&path)? {
            Some(p) => {
                let pooling = pooling_of(&p).map_err(|message| ModelError::Config { path: path.clone(), message })?;
                (pooling, path.strip_prefix(dir).unwrap_or(&path).display().to_string())
            }
            None if family.causal() => (Pooling::LastToken, format!("{} default", family.name())),
            None => (Pooling::Mean, format!("{} default", family.name())),
        };
        let st = read(&dir.join("config_sentence_transformers.json"))?.unwrap_or(Value::Null);
        let prompt = |keys: &[&str]| {
            keys.iter().find_map(|k| st["prompts"][*k].as_str()).filter(|p| !p.is_empty()).map(str::to_string)
        };
        Ok(Self {
            pooling,
            query_prompt: prompt(&["query"]),
            document_prompt: prompt(&["document", "passage"]),
            pooling_from,
        })
    }

    /// The card with the config's prefixes in place of its prompts, where set.
    pub fn with_prefixes(mut self, query: Option<&str>, document: Option<&str>) -> Self {
        if let Some(q) = query {
            self.query_prompt = Some(q.to_string()).filter(|q| !q.is_empty());
        }
        if let Some(d) = document {
            self.document_prompt = Some(d.to_string()).filter(|d| !d.is_empty());
        }
        self
    }

    /// A query's text as the model reads it.
    pub fn query_text(&self, query: &str) -> String {
        format!("{}{query}", self.query_prompt.as_deref().unwrap_or(""))
    }

    /// A document's text as the model reads it.
    pub fn document_text(&self, text: &str) -> String {
        format!("{}{text}", self.document_prompt.as_deref().unwrap_or(""))
    }

    /// One line for the log: pooling and prompts.
    pub fn describe(&self) -> String {
        let show = |p: &Option<String>| p.as_deref().map_or("none".to_string(), |p| format!("{p:?}"));
        format!(
            "pooling {} ({}), query prompt {}, document prompt {}",
            self.pooling.name(),
            self.pooling_from,
            show(&self.query_prompt),
            show(&self.document_prompt)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pooling_picks_rows_and_scales_to_unit() {
        let hidden = [1.0, 0.0, 0.0, 3.0, 4.0, 0.0];
        assert_eq!(Pooling::Cls.pool(&hidden, 2), vec![1.0, 0.0]);
        assert_eq!(Pooling::LastToken.pool(&hidden, 2), vec![1.0, 0.0]);
        let mean = Pooling::Mean.pool(&hidden, 2);
        assert!((mean[0] - 5.0 / 34f32.sqrt()).abs() < 1e-6 && (mean[1] - 3.0 / 34f32.sqrt()).abs() < 1e-6);
        assert_eq!(Pooling::LastToken.rows(0), 0..0);
    }

    #[test]
    fn both_pooling_forms_sentence_transformers_writes() {
        let of = |json: &str| pooling_of(&serde_json::from_str(json).unwrap());
        // 6.x: one name (or a list of one), beside `embedding_dimension`.
        let v6 = r#"{"embedding_dimension": 384, "pooling_mode": "mean", "include_prompt": true}"#;
        assert_eq!(of(v6), Ok(Pooling::Mean));
        assert_eq!(of(r#"{"pooling_mode": ["cls"]}"#), Ok(Pooling::Cls));
        assert_eq!(of(r#"{"pooling_mode": "lasttoken"}"#), Ok(Pooling::LastToken));
        // Up to 5.x: flags, beside `word_embedding_dimension`.
        let v5 =
            r#"{"word_embedding_dimension": 384, "pooling_mode_cls_token": false, "pooling_mode_mean_tokens": true}"#;
        assert_eq!(of(v5), Ok(Pooling::Mean));
        let max = of(r#"{"pooling_mode": "max"}"#).unwrap_err();
        assert!(max.contains("\"max\"") && max.contains("cls, mean or lasttoken"), "{max}");
        let two = of(r#"{"pooling_mode": ["cls", "mean"]}"#).unwrap_err();
        assert!(two.contains("concatenated"), "{two}");
        let flags = of(r#"{"pooling_mode_mean_tokens": true, "pooling_mode_max_tokens": true}"#).unwrap_err();
        assert!(flags.contains("concatenated") && flags.contains("\"max\""), "{flags}");
        let weighted = of(r#"{"pooling_mode_weightedmean_tokens": true}"#).unwrap_err();
        assert!(weighted.contains("\"weightedmean\""), "{weighted}");
        assert!(of(r#"{"pooling_mode_mean_tokens": false}"#).unwrap_err().contains("no pooling mode"));
        assert!(of(r#"{"pooling_mode": 3}"#).unwrap_err().contains("neither a name"));
    }

    #[test]
    fn the_card_and_the_config_prefixes() {
        let dir = std::env::temp_dir().join(format!("ctxd-card-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("pool")).unwrap();
        std::fs::write(
            dir.join("modules.json"),
            r#"[{"type": "sentence_transformers.models.Pooling", "path": "pool"}]"#,
        )
        .unwrap();
        std::fs::write(dir.join("pool/config.json"), r#"{"pooling_mode_cls_token": true}"#).unwrap();
        std::fs::write(
            dir.join("config_sentence_transformers.json"),
            r#"{"prompts": {"query": "q: ", "passage": "p: "}}"#,
        )
        .unwrap();
        let card = ModelCard::read(&dir, Family::ModernBert).unwrap();
        assert_eq!(card.pooling, Pooling::Cls);
        assert_eq!((card.query_text("x"), card.document_text("y")), ("q: x".into(), "p: y".into()));
        let card = card.with_prefixes(Some(""), Some("doc: "));
        assert_eq!((card.query_text("x"), card.document_text("y")), ("x".into(), "doc: y".into()));
        std::fs::write(dir.join("pool/config.json"), r#"{"pooling_mode_max_tokens": true}"#).unwrap();
        let err = ModelCard::read(&dir, Family::Bert).unwrap_err().to_string();
        assert!(err.contains("pool/config.json") && err.contains("lasttoken"), "{err}");
        std::fs::remove_dir_all(&dir).ok();
        let bare = std::env::temp_dir().join("ctxd-card-none");
        let card = ModelCard::read(&bare, Family::Qwen3).unwrap();
        assert_eq!((card.pooling, card.query_prompt), (Pooling::LastToken, None));
    }
}
