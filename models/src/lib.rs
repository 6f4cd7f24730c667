//! Embedding models for ctxd, on [candle].
//!
//! This crate owns everything about turning text into vectors:
//!
//! * [`resolve`] finds a model's files: an explicit local directory, ctxd's own model cache
//!   (`$CTXD_MODEL_DIR` or `~/.cache/ctxd/models/<org>/<name>`), the Hugging Face cache
//!   (`$HF_HOME/hub`), and finally a real download through `hf-hub` unless `HF_HUB_OFFLINE=1`.
//! * [`loaded`] reads a resolved model's configuration and tokenizer once into a
//!   [`LoadedModel`], which every backend and the token counter take their parts from.
//! * [`bert`] runs a BERT-family sentence-embedding model (default
//!   `sentence-transformers/all-MiniLM-L6-v2`) with mean pooling over the attention mask and L2
//!   normalisation, exactly as sentence-transformers does, on candle through [`encoder`] (ctxd's
//!   own BERT encoder: one GEMM per dense layer, fused kernels, an attention bias that f16 holds).
//! * [`tokens`] holds the model's tokenizer: encoding for the embedders, and counting tokens
//!   (used by the chunker for budgets).
//! * [`fast`] is the fast CPU path for BERT encoders: no padding, oneDNN matmuls with fused
//!   epilogues ([`dnnl`], loaded at run time), bf16 where the CPU has it, one worker per core;
//!   [`kernels`] holds its element-wise loops.
//! * [`runtime`] picks the backend from the config (`device`, `precision`, `backend`,
//!   `threads`; the `ctxd-choice` crate holds their closed sets as enums, parsed once where read): the fast CPU path when oneDNN is present, candle otherwise and on CUDA;
//!   [`gpu`] says whether a GPU can run it (driver and CUDA libraries opened at run time, so a
//!   CUDA build starts without them).
//! * [`forward`] measures the forward pass alone and the embedding service end to end
//!   (`ctxd bench --forward`, and the `ctxd-forward` binary a GPU check carries).
//! * [`service`] runs an [`embedder::Embedder`] on its own OS thread behind a bounded channel, so async
//!   code never blocks on matrix multiplications; batches are sorted by length and capped by
//!   padded tokens so padding waste stays small.
//!
//! Besides one pooled vector per text, the BERT embedders return **token embeddings** (one
//! unit vector per token, [`embedder::Embedder::forward_tokens`]): retrieval uses them to rescore its best
//! candidates by late interaction (each query token's best match in the candidate, averaged —
//! ColBERT's MaxSim, here with the sentence model's own token states).
//!
//! The [`embedder::Embedder`] trait is the seam other crates use; unit tests of other stages may plug a
//! fake implementation, end-to-end tests always use [`bert::BertEmbedder`].

pub mod adapter;
pub(crate) mod arch;
pub(crate) mod bert;
pub(crate) mod card;
pub(crate) mod cpu;
pub mod cross;
pub mod dnnl;
pub mod embedder;
pub(crate) mod encoder;
pub(crate) mod encoder_kernels;
pub mod error;
pub(crate) mod fast;
pub mod forward;
pub(crate) mod gpu;
pub(crate) mod kernels;
pub mod late;
pub mod loaded;
pub mod metrics;
pub(crate) mod query_cache;
pub mod remote;
pub mod resolve;
pub mod runtime;
pub mod service;
pub mod tokens;

pub use arch::Family;
pub use bert::BertEmbedder;
pub use card::Pooling;
pub use fast::{FastBert, Precision};
pub use gpu::CUDA_BUILT;

use error::ModelError;
use loaded::LoadedModel;
use runtime::Runtime;
use service::{EmbedService, EmbedServiceConfig};
use tokens::TokenCounter;

/// Loads the cross-encoder `spec` (a directory or hub id: [`cross`]) and starts its service on
/// the device `runtime` resolves to.
pub fn start_reranker(spec: &str, runtime: &Runtime) -> Result<EmbedService, ModelError> {
    runtime.spawn_reranker(&LoadedModel::resolve(spec)?)
}

/// The text the model sees for a chunk: a short header (path and symbol) and the content.
/// The one definition: the indexer, re-embedding jobs, rescoring and the vector cache's key
/// ([`embed_key`]) all go through it, so a stored vector is always the model's vector of
/// exactly this text.
pub fn chunk_text(path: &str, symbol: Option<&str>, content: &str) -> String {
    // A git source's view (`lib@main/src/a.py`) reads as the source's path (`lib/src/a.py`):
    // the same file on two refs is the same text, so its vector is computed once.
    let unref;
    let path = match path.split_once('/') {
        Some((segment, rest)) if segment.contains('@') => {
            unref = format!("{}/{rest}", segment.split('@').next().unwrap_or(segment));
            unref.as_str()
        }
        _ => path,
    };
    match symbol {
        Some(sym) => format!("{path} {sym}\n{content}"),
        None => format!("{path}\n{content}"),
    }
}

/// The vector cache's key for `text` embedded by `model_id`: blake3 of both (hex). Equal keys
/// mean equal vectors — the same chunk text under the same model, whichever file, branch or
/// commit it came from; a moved file or another model gets another key.
pub fn embed_key(model_id: &str, text: &str) -> String {
    let mut h = blake3::Hasher::new();
    h.update(model_id.as_bytes());
    h.update(&[0]);
    h.update(text.as_bytes());
    h.finalize().to_hex().to_string()
}

/// [`chunk_text`] and its [`embed_key`] under `model_id`: what the indexer and a re-embedding
/// job store for a chunk.
pub fn keyed_chunk_text(model_id: &str, path: &str, symbol: Option<&str>, content: &str) -> (String, String) {
    let text = chunk_text(path, symbol, content);
    let key = embed_key(model_id, &text);
    (text, key)
}

/// Resolves `spec` and reads its tokenizer, id and embedding dimension without loading the
/// weights: for full-text-only indexing, which counts tokens but never embeds.
pub fn tokenizer_only(spec: &str) -> Result<(TokenCounter, String, usize), ModelError> {
    let model = LoadedModel::resolve(spec)?;
    Ok((model.token_counter(), model.model_id(), model.dim()?))
}

/// Resolves `spec`, loads the model as `runtime` asks (see [`runtime`]) and starts its service
/// thread; also returns a token counter with the same tokenizer. Blocking (reads the weights,
/// warms the model up). [`EmbedService::backend`] says what was picked. A caller that already
/// holds the [`LoadedModel`] uses [`Runtime::spawn`] and [`LoadedModel::token_counter`] instead.
pub fn start(
    spec: &str,
    cfg: EmbedServiceConfig,
    runtime: &Runtime,
) -> Result<(EmbedService, TokenCounter), ModelError> {
    let model =
        LoadedModel::resolve(spec)?.with_prefixes(runtime.query_prefix.as_deref(), runtime.document_prefix.as_deref());
    Ok((runtime.spawn(&model, cfg)?, model.token_counter()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_git_view_reads_as_its_source_path() {
        let main = keyed_chunk_text("m", "lib@main/src/a.py", Some("f"), "def f(): pass");
        let tag = keyed_chunk_text("m", "lib@v2/src/a.py", Some("f"), "def f(): pass");
        assert_eq!(main, tag, "one vector for the same file on two refs");
        assert!(main.0.starts_with("lib/src/a.py f\n"));
        assert_eq!(chunk_text("src/a.py", None, "x"), "src/a.py\nx");
        assert_eq!(chunk_text("a.rs", Some("f"), "fn f() {}"), "a.rs f\nfn f() {}");
    }

    #[test]
    fn embed_key_covers_the_model_and_the_whole_text() {
        let text = chunk_text("a.rs", Some("f"), "fn f() {}");
        assert_eq!(embed_key("m", &text), embed_key("m", &text));
        assert_ne!(embed_key("m", &text), embed_key("other", &text));
        assert_ne!(embed_key("m", &text), embed_key("m", &chunk_text("b.rs", Some("f"), "fn f() {}")));
        // The separator keeps (model, text) pairs apart.
        assert_ne!(embed_key("ab", "c"), embed_key("a", "bc"));
    }
}
