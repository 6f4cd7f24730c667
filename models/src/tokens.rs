//! The model's tokenizer: reading `tokenizer.json`, encoding texts for the embedders, and
//! token counting (no truncation, no special tokens).
//!
//! The chunker counts the tokens of every line it packs into windows, so counting speed is
//! chunking speed (on a streamed 1 GB log it was the largest cost of ctxd's own code). For BERT
//! WordPiece tokenizers (BertNormalizer with lowercasing, BertPreTokenizer, WordPiece — the
//! default model's) ASCII text is counted by a direct implementation of the same algorithm:
//! drop control characters, lowercase, split on whitespace and punctuation (each punctuation
//! character one token), greedy longest-match WordPiece against the vocabulary (`[UNK]` for a
//! word that does not decompose or exceeds the word-length cap). It gives exactly the
//! tokenizer's count (tested against it on real code and prose, `models/tests/reference.rs`)
//! at a fraction of the cost. Non-ASCII text and other tokenizer types go through `tokenizers`.

use std::collections::HashSet;
use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;

use rustc_hash::FxBuildHasher;
use tokenizers::{Tokenizer, TruncationParams};

use crate::{error::ModelError, resolve::ModelFiles};

/// Counts tokens the way the embedding model sees them. Cheap to clone.
#[derive(Clone)]
pub struct TokenCounter {
    tokenizer: Arc<Tokenizer>,
    fast: Option<Arc<AsciiWordPiece>>,
    /// The model's token window (0: not known): what the chunker's budget must fit.
    window: usize,
}

/// Vocabulary pieces as bytes, looked up with FxHash (a multiply per 8 bytes, where the std
/// SipHash runs rounds per 8 bytes), with the longest piece's length so no longer candidate is
/// tried.
struct Pieces {
    set: HashSet<Box<[u8]>, FxBuildHasher>,
    max_len: usize,
}

impl Pieces {
    fn new<'a>(pieces: impl Iterator<Item = &'a str>) -> Self {
        let set: HashSet<Box<[u8]>, FxBuildHasher> =
            pieces.filter(|p| !p.is_empty()).map(|p| Box::from(p.as_bytes())).collect();
        let max_len = set.iter().map(|p| p.len()).max().unwrap_or(0);
        Self { set, max_len }
    }

    /// Length of the longest piece that `word` starts with (0: none), trying the longest first.
    fn longest_prefix(&self, word: &[u8]) -> usize {
        (1..=word.len().min(self.max_len)).rev().find(|&end| self.set.contains(&word[..end])).unwrap_or(0)
    }
}

/// WordPiece counting for ASCII input (see the module docs).
struct AsciiWordPiece {
    /// Pieces that may start a word.
    starts: Pieces,
    /// Pieces that may continue a word, without their `##` prefix.
    continues: Pieces,
    max_word_chars: usize,
    /// Added tokens (`[CLS]`, …), matched by the real tokenizer in the raw text before
    /// normalisation: text containing one takes the exact path.
    specials: Vec<String>,
    /// The distinct first bytes of `specials`: text without any of them holds none.
    special_firsts: Vec<u8>,
}

impl AsciiWordPiece {
    /// Builds the fast path when `tokenizer.json` is exactly the supported BERT pipeline.
    fn from_json(json: &serde_json::Value) -> Option<Self> {
        let norm = &json["normalizer"];
        let supported = norm["type"] == "BertNormalizer"
            && norm["lowercase"] == true
            && norm["clean_text"] == true
            && json["pre_tokenizer"]["type"] == "BertPreTokenizer"
            && json["model"]["type"] == "WordPiece";
        if !supported {
            return None;
        }
        let model = &json["model"];
        let prefix = model["continuing_subword_prefix"].as_str().unwrap_or("##");
        let max_word_chars = model["max_input_chars_per_word"].as_u64().unwrap_or(100) as usize;
        let vocab = model["vocab"].as_object()?;
        // Each piece starts a word, or (with the prefix, when there is one) continues one.
        let (mut starts, mut continues) = (Vec::new(), Vec::new());
        for piece in vocab.keys() {
            match piece.strip_prefix(prefix).filter(|_| !prefix.is_empty()) {
                Some(rest) => continues.push(rest),
                None => starts.push(piece.as_str()),
            }
        }
        let (starts, continues) = (Pieces::new(starts.into_iter()), Pieces::new(continues.into_iter()));
        let mut specials = Vec::new();
        for t in json["added_tokens"].as_array().into_iter().flatten() {
            if t["normalized"] != false {
                return None; // matched after normalisation: not modelled here
            }
            specials.extend(t["content"].as_str().filter(|s| !s.is_empty()).map(str::to_string));
        }
        let mut special_firsts: Vec<u8> = specials.iter().map(|s| s.as_bytes()[0]).collect();
        special_firsts.sort_unstable();
        special_firsts.dedup();
        Some(Self { starts, continues, max_word_chars, specials, special_firsts })
    }

    /// Whether `text` contains an added token (the exact tokenizer must count it).
    fn has_special(&self, text: &str) -> bool {
        let bytes = text.as_bytes();
        self.special_firsts.iter().any(|b| bytes.contains(b)) && self.specials.iter().any(|s| text.contains(s.as_str()))
    }

    /// Tokens of one lowercased word.
    fn word(&self, w: &[u8]) -> usize {
        if w.len() > self.max_word_chars {
            return 1;
        }
        let mut count = 0;
        let mut start = 0;
        while start < w.len() {
            let pieces = if start == 0 { &self.starts } else { &self.continues };
            let len = pieces.longest_prefix(&w[start..]);
            if len == 0 {
                return 1; // the whole word is [UNK]
            }
            count += 1;
            start += len;
        }
        count
    }

    /// Tokens of ASCII `text` (no special tokens in it: see [`Self::has_special`]).
    fn count(&self, text: &str) -> usize {
        let mut total = 0;
        let mut word: Vec<u8> = Vec::with_capacity(32);
        for b in text.bytes() {
            match b {
                b'\t' | b'\n' | b'\r' | b' ' => {
                    if !word.is_empty() {
                        total += self.word(&word);
                        word.clear();
                    }
                }
                // Control characters are removed by the normaliser (they do not split words).
                0..=0x1f | 0x7f => {}
                _ if b.is_ascii_punctuation() => {
                    if !word.is_empty() {
                        total += self.word(&word);
                        word.clear();
                    }
                    total += 1;
                }
                _ => word.push(b.to_ascii_lowercase()),
            }
        }
        if !word.is_empty() {
            total += self.word(&word);
        }
        total
    }
}

/// `tokenizer` with truncation to `max_len` tokens (none for `None`) and no padding.
pub(crate) fn with_window(
    mut tokenizer: Tokenizer,
    max_len: Option<usize>,
    path: &Path,
) -> Result<Tokenizer, ModelError> {
    tokenizer.with_padding(None);
    let trunc = max_len.map(|max_length| TruncationParams { max_length, ..Default::default() });
    tokenizer
        .with_truncation(trunc)
        .map_err(|e| ModelError::Tokenizer { path: path.to_path_buf(), message: e.to_string() })?;
    Ok(tokenizer)
}

/// Tokenizes `texts` in parallel (the tokenizer's thread pool); an empty encoding becomes one
/// padding token so every text has at least one position.
pub(crate) fn encode(tokenizer: &Tokenizer, texts: &[String]) -> Result<Vec<Vec<u32>>, ModelError> {
    let encodings = tokenizer.encode_batch(texts.to_vec(), true).map_err(|e| ModelError::Encode(e.to_string()))?;
    Ok(encodings.into_iter().map(|e| if e.get_ids().is_empty() { vec![0] } else { e.get_ids().to_vec() }).collect())
}

impl TokenCounter {
    /// Loads the tokenizer of a resolved model, reading `tokenizer.json` once (the
    /// [`crate::loaded::LoadedModel`] of a model holds one).
    pub fn from_model(files: &ModelFiles) -> Result<Self, ModelError> {
        let path = &files.tokenizer;
        let bad = |message: String| ModelError::Tokenizer { path: path.to_path_buf(), message };
        let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
        let tokenizer = Tokenizer::from_str(&text).map_err(|e| bad(e.to_string()))?;
        let tokenizer = Arc::new(with_window(tokenizer, None, path)?);
        let fast = serde_json::from_str::<serde_json::Value>(&text)
            .ok()
            .and_then(|json| AsciiWordPiece::from_json(&json))
            .map(Arc::new);
        Ok(Self { tokenizer, fast, window: 0 })
    }

    /// The counter of a model whose inputs are truncated to `window` tokens.
    pub fn with_model_window(mut self, window: usize) -> Self {
        self.window = window;
        self
    }

    /// The model's token window (0: not known).
    pub fn window(&self) -> usize {
        self.window
    }

    /// The tokenizer itself (no truncation, no padding).
    pub(crate) fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    /// Number of tokens in `text`, without special tokens.
    pub fn count(&self, text: &str) -> usize {
        if let Some(fast) = &self.fast {
            if text.is_ascii() && !fast.has_special(text) {
                return fast.count(text);
            }
        }
        self.exact(text)
    }

    /// The count from the `tokenizers` pipeline itself.
    pub fn exact(&self, text: &str) -> usize {
        match self.tokenizer.encode_fast(text, false) {
            Ok(enc) => enc.get_ids().len(),
            // A tokenizer failure must not lose the text: fall back to a byte estimate.
            Err(_) => text.len() / 4 + 1,
        }
    }

    /// Whether ASCII text is counted by the direct WordPiece path.
    pub fn has_fast_path(&self) -> bool {
        self.fast.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::{AsciiWordPiece, Pieces};

    #[test]
    fn greedy_longest_match_with_unknown_words() {
        let json = serde_json::json!({
            "normalizer": {"type": "BertNormalizer", "lowercase": true, "clean_text": true},
            "pre_tokenizer": {"type": "BertPreTokenizer"},
            "model": {"type": "WordPiece", "continuing_subword_prefix": "##", "max_input_chars_per_word": 8,
                      "vocab": {"un": 0, "##able": 1, "unable": 2, "play": 3, "##ing": 4, "##s": 5, "[UNK]": 6}},
            "added_tokens": [{"content": "[UNK]", "normalized": false}]
        });
        let wp = AsciiWordPiece::from_json(&json).unwrap();
        assert_eq!(wp.count("Unable"), 1, "longest match first");
        assert_eq!(wp.count("playings"), 3);
        assert_eq!(wp.count("plays, play!"), 5, "punctuation splits and counts");
        assert_eq!(wp.count("xyz"), 1, "undecomposable word is one [UNK]");
        assert_eq!(wp.count("playingsss"), 1, "over the word-length cap: [UNK]");
        assert_eq!(wp.count("pl\u{1}ay"), 1, "control characters vanish without splitting");
        assert!(wp.has_special("a [UNK] b") && !wp.has_special("a [UN K] b") && !wp.has_special("plain"));
        let other = serde_json::json!({"normalizer": {"type": "NFC"}, "model": {"type": "BPE"}});
        assert!(AsciiWordPiece::from_json(&other).is_none());
    }

    #[test]
    fn the_longest_piece_a_word_starts_with() {
        let pieces = Pieces::new(["a", "ab", "abcd", "b", "##", ""].into_iter());
        assert_eq!(pieces.longest_prefix(b"abcde"), 4);
        assert_eq!(pieces.longest_prefix(b"abc"), 2, "a prefix of a piece is not a piece");
        assert_eq!(pieces.longest_prefix(b"ba"), 1);
        assert_eq!(pieces.longest_prefix(b"c"), 0);
        assert_eq!(pieces.longest_prefix(b""), 0, "the empty piece never matches");
        assert_eq!(pieces.longest_prefix(b"##x"), 2);
    }
}
