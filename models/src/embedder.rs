//! [`Embedder`]: the seam between ctxd and a model — a batch of texts in, unit-length vectors
//! out (and, for late interaction, each token's unit vector) — with its implementation for a
//! boxed embedder, and the token-row helpers every implementation and the rescoring share:
//! [`unit_token_rows`] (what [`Embedder::forward_tokens`] returns for one sequence),
//! [`scale_to_unit`], and the MaxSim score of two such row sets ([`max_sim`], [`max_sim_by`]).
//!
//! Implementations: [`crate::bert::BertEmbedder`] (candle), [`crate::fast::FastBert`] (oneDNN),
//! [`crate::arch::embedder::ArchEmbedder`] (other architectures), [`crate::remote::RemoteEmbedder`]
//! (an embedding server); [`crate::service::EmbedService`] runs one on its own thread.

use crate::encoder;
use crate::error::ModelError;

/// What a forward pass returns per sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PassOutput {
    /// The pooled unit vector ([`Embedder::forward`]).
    Pooled,
    /// The token embeddings ([`Embedder::forward_tokens`]).
    Tokens,
    /// Both from one pass ([`Embedder::forward_both`]): the pooled vector, then the token rows.
    Both,
}

/// Something that turns a batch of texts into unit-length vectors.
///
/// Implementations are synchronous and may be slow; [`crate::service::EmbedService`] runs them off the async
/// runtime.
/// The `model_id`, `dim` and `encode` of an [`Embedder`] impl whose type holds its model's id,
/// width and tokenizer in fields of those names (`model_id`, `dim`, `tokenizer`): the candle BERT
/// path, the fast CPU path and the endpoint client answer these three the same way.
macro_rules! identity_from_fields {
    () => {
        fn model_id(&self) -> &str {
            &self.model_id
        }

        fn dim(&self) -> usize {
            self.dim
        }

        fn encode(&self, texts: &[String]) -> Result<Vec<Vec<u32>>, $crate::error::ModelError> {
            $crate::tokens::encode(&self.tokenizer, texts)
        }
    };
}
pub(crate) use identity_from_fields;

pub trait Embedder: Send + 'static {
    /// Stable identifier of the model (stored with every vector in the index).
    fn model_id(&self) -> &str;
    /// Vector dimension.
    fn dim(&self) -> usize;
    /// Tokenizes `texts` (truncated to the model's window, at least one token each).
    fn encode(&self, texts: &[String]) -> Result<Vec<Vec<u32>>, ModelError>;
    /// Embeds token id sequences; returns one unit vector of length [`Embedder::dim`] per
    /// sequence, in order.
    fn forward(&mut self, ids: &[Vec<u32>]) -> Result<Vec<Vec<f32>>, ModelError>;
    /// Token embeddings: for each sequence, every token's final hidden state scaled to unit
    /// length, the first and last ([CLS] and [SEP]) left out when there is anything between
    /// them, as one row-major `tokens × dim` matrix. Embedders without them refuse.
    fn forward_tokens(&mut self, ids: &[Vec<u32>]) -> Result<Vec<Vec<f32>>, ModelError> {
        let _ = ids;
        Err(ModelError::Backend(format!("model {} has no token embeddings", self.model_id())))
    }
    /// [`Embedder::forward`] and [`Embedder::forward_tokens`] of the same sequences: per
    /// sequence its pooled vector followed by its token rows. Two passes by default; the fast
    /// CPU path computes both in one.
    fn forward_both(&mut self, ids: &[Vec<u32>]) -> Result<Vec<Vec<f32>>, ModelError> {
        let pooled = self.forward(ids)?;
        let tokens = self.forward_tokens(ids)?;
        if pooled.len() != ids.len() || tokens.len() != ids.len() {
            return Err(ModelError::Count { expected: ids.len(), got: pooled.len().min(tokens.len()) });
        }
        Ok(pooled
            .into_iter()
            .zip(tokens)
            .map(|(mut v, t)| {
                v.extend(t);
                v
            })
            .collect())
    }
    /// Positions a forward pass over sequences of these lengths computes (tokens plus
    /// padding); padded batches by default.
    fn padded_tokens(&self, lens: &[usize]) -> usize {
        lens.len() * lens.iter().copied().max().unwrap_or(0)
    }
    /// Whether [`Embedder::forward_tokens`] can answer (an embedding server cannot): late-interaction
    /// rescoring is skipped where not.
    fn has_token_states(&self) -> bool {
        true
    }
    /// Whether the embedder takes texts rather than token ids (an embedding server,
    /// [`crate::remote::RemoteEmbedder`]): the service then hands it each batch's texts.
    fn takes_texts(&self) -> bool {
        false
    }
    /// Embeds texts as they are (embedders that [`Embedder::takes_texts`]); the default
    /// tokenizes and runs [`Embedder::forward`].
    fn forward_texts(&mut self, texts: &[String]) -> Result<Vec<Vec<f32>>, ModelError> {
        let ids = self.encode(texts)?;
        self.forward(&ids)
    }
    /// The per-stage clock of embedders that have one (the candle [`encoder::Encoder`]), for
    /// `--profile`.
    fn stage_clock(&mut self) -> Option<&mut encoder::StageClock> {
        None
    }
    /// Tokenizes and embeds `texts` in one call.
    fn embed(&mut self, texts: &[String]) -> Result<Vec<Vec<f32>>, ModelError> {
        let ids = self.encode(texts)?;
        let vectors = self.forward(&ids)?;
        if vectors.len() != texts.len() {
            return Err(ModelError::Count { expected: texts.len(), got: vectors.len() });
        }
        Ok(vectors)
    }
}

/// A boxed embedder is an embedder (what [`crate::runtime::Runtime::load`] picked, whichever it is).
impl<E: Embedder + ?Sized> Embedder for Box<E> {
    fn model_id(&self) -> &str {
        (**self).model_id()
    }
    fn dim(&self) -> usize {
        (**self).dim()
    }
    fn encode(&self, texts: &[String]) -> Result<Vec<Vec<u32>>, ModelError> {
        (**self).encode(texts)
    }
    fn forward(&mut self, ids: &[Vec<u32>]) -> Result<Vec<Vec<f32>>, ModelError> {
        (**self).forward(ids)
    }
    fn forward_tokens(&mut self, ids: &[Vec<u32>]) -> Result<Vec<Vec<f32>>, ModelError> {
        (**self).forward_tokens(ids)
    }
    fn forward_both(&mut self, ids: &[Vec<u32>]) -> Result<Vec<Vec<f32>>, ModelError> {
        (**self).forward_both(ids)
    }
    fn padded_tokens(&self, lens: &[usize]) -> usize {
        (**self).padded_tokens(lens)
    }
    fn stage_clock(&mut self) -> Option<&mut encoder::StageClock> {
        (**self).stage_clock()
    }
    fn takes_texts(&self) -> bool {
        (**self).takes_texts()
    }
    fn has_token_states(&self) -> bool {
        (**self).has_token_states()
    }
    fn forward_texts(&mut self, texts: &[String]) -> Result<Vec<Vec<f32>>, ModelError> {
        (**self).forward_texts(texts)
    }
    fn embed(&mut self, texts: &[String]) -> Result<Vec<Vec<f32>>, ModelError> {
        (**self).embed(texts)
    }
}

/// The rows of `hidden` (`tokens × width`, one sequence) without the first and last token when
/// there is anything between them, each scaled to unit length: [`Embedder::forward_tokens`]'s
/// output for one sequence.
pub fn unit_token_rows(hidden: &[f32], width: usize) -> Vec<f32> {
    let rows = hidden.len() / width.max(1);
    let inner = if rows > 2 { &hidden[width..(rows - 1) * width] } else { hidden };
    let mut out = inner.to_vec();
    out.chunks_exact_mut(width.max(1)).for_each(scale_to_unit);
    out
}

/// The token ids whose rows [`unit_token_rows`] keeps: without the first and last when there is
/// anything between them.
pub fn inner_ids(ids: &[u32]) -> &[u32] {
    if ids.len() > 2 {
        &ids[1..ids.len() - 1]
    } else {
        ids
    }
}

/// ASCII punctuation, each character apart, as [`punctuation_ids`] tokenizes it.
const PUNCTUATION: &str = "! \" # $ % & ' ( ) * + , - . / : ; < = > ? @ [ \\ ] ^ _ ` { | } ~";

/// The token ids `embedder` gives the characters of [`PUNCTUATION`] (the ends a tokenizer adds
/// left out, [`inner_ids`]), sorted; none when it cannot tokenize.
pub fn punctuation_ids<E: Embedder>(embedder: &E) -> Vec<u32> {
    let Ok(seqs) = embedder.encode(&[PUNCTUATION.to_string()]) else { return Vec::new() };
    let mut ids: Vec<u32> = seqs.first().map(|s| inner_ids(s).to_vec()).unwrap_or_default();
    ids.sort_unstable();
    ids.dedup();
    ids
}

/// `row` scaled to unit length in place (a zero row stays zero).
pub fn scale_to_unit(row: &mut [f32]) {
    let norm = row.iter().map(|v| v * v).sum::<f32>().sqrt().max(1e-12);
    row.iter_mut().for_each(|v| *v /= norm);
}

/// Late-interaction score of a query against a document, both as [`unit_token_rows`]: the
/// mean over query tokens of the best cosine with any document token (ColBERT's MaxSim,
/// averaged so scores compare across queries of different lengths). 0 when either is empty.
pub fn max_sim(query: &[f32], doc: &[f32], width: usize) -> f32 {
    if doc.is_empty() || width == 0 {
        return 0.0;
    }
    max_sim_by(query, width, |q| {
        doc.chunks_exact(width).map(|d| q.iter().zip(d).map(|(a, b)| a * b).sum::<f32>()).fold(f32::MIN, f32::max)
    })
}

/// [`max_sim`] with the document kept in another form: `best` gives a query token's best
/// cosine with any document token. The mean over the query's tokens (0 for an empty query).
pub fn max_sim_by(query: &[f32], width: usize, best: impl Fn(&[f32]) -> f32) -> f32 {
    if query.is_empty() || width == 0 {
        return 0.0;
    }
    let rows = query.chunks_exact(width);
    let n = rows.len();
    rows.map(best).sum::<f32>() / n as f32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_rows_drop_the_ends_and_are_unit_length() {
        // Four 2-d tokens: [CLS], two words, [SEP].
        let rows = unit_token_rows(&[9.0, 9.0, 3.0, 4.0, 0.0, 2.0, 9.0, 9.0], 2);
        assert_eq!(rows, vec![0.6, 0.8, 0.0, 1.0]);
        // Nothing between the ends: kept as they are, normalised.
        assert_eq!(unit_token_rows(&[0.0, 5.0], 2), vec![0.0, 1.0]);
    }

    #[test]
    fn max_sim_averages_each_query_tokens_best_match() {
        let query = [1.0, 0.0, 0.0, 1.0];
        // The first query token matches exactly, the second at best with cosine 0.6.
        let doc = [1.0, 0.0, 0.8, 0.6, -1.0, 0.0];
        assert!((max_sim(&query, &doc, 2) - 0.8).abs() < 1e-6);
        assert_eq!(max_sim(&[], &doc, 2), 0.0);
    }
}
