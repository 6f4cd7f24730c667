//! The model flags every embedding command takes (`--model`, `--device`, `--precision`,
//! `--backend`, `--threads`) and the runtime settings they make; a file of its own so that the
//! commands and the shared opening code name it without importing the command line.

use clap::Args;
use ctxd_choice::{BackendChoice, DeviceChoice, EndpointKind, PrecisionChoice};

/// Model selection shared by the commands that embed.
#[derive(Debug, Args, Clone, Default)]
pub struct ModelArgs {
    /// Embedding model: a Hugging Face id or a local directory (default: the index's model,
    /// else sentence-transformers/all-MiniLM-L6-v2).
    #[arg(long, env = "CTXD_MODEL")]
    pub model: Option<String>,
    /// Where the model runs: auto (the GPU when this binary has cuda and one answers, else the
    /// cpu; the default), cpu or cuda:N (cuda needs a scripts/build-cuda.sh build).
    #[arg(long, env = "CTXD_DEVICE")]
    pub device: Option<DeviceChoice>,
    /// Matmul precision: auto (bf16 where native and faster, else f32; f16 on a GPU), f32,
    /// bf16 (refused on a CPU without native bf16), f16 (cuda only).
    #[arg(long, env = "CTXD_PRECISION")]
    pub precision: Option<PrecisionChoice>,
    /// Embedding backend: auto, onednn (fast CPU path) or candle.
    #[arg(long, env = "CTXD_BACKEND")]
    pub backend: Option<BackendChoice>,
    /// Embedding worker threads (0 = one per core).
    #[arg(long, env = "CTXD_EMBED_THREADS")]
    pub threads: Option<usize>,
    /// Embed through this embedding server instead of running the model here
    /// (`http://host:port`: another `ctxd serve`, text-embeddings-inference, an OpenAI-compatible
    /// server) — `[model] endpoint`.
    #[arg(long, env = "CTXD_EMBED_ENDPOINT")]
    pub endpoint: Option<String>,
    /// The endpoint's request form: openai (POST /v1/embeddings) or tei (POST /embed).
    #[arg(long, env = "CTXD_EMBED_ENDPOINT_KIND")]
    pub endpoint_kind: Option<EndpointKind>,
    /// Put before every query in place of the model card's query prompt ("" = none) —
    /// `[model] query_prefix`.
    #[arg(long)]
    pub query_prefix: Option<String>,
    /// Put before every document in place of the model card's document prompt ("" = none) —
    /// `[model] document_prefix`.
    #[arg(long)]
    pub document_prefix: Option<String>,
    /// A cross-encoder rescoring the best candidates of routed searches and contexts instead of
    /// late interaction (a directory or Hugging Face id) — `[rerank] model`.
    #[arg(long, env = "CTXD_RERANK_MODEL")]
    pub rerank_model: Option<String>,
}

impl ModelArgs {
    /// The runtime settings from the flags over the defaults, validated.
    pub fn runtime(&self) -> anyhow::Result<ctxd_models::runtime::Runtime> {
        let mut cfg = ctxd_config::ModelConfig::default();
        self.apply(&mut cfg);
        let rt = cfg.runtime();
        let errs = rt.validate();
        if !errs.is_empty() {
            anyhow::bail!("invalid model settings: {}", errs.join("; "));
        }
        Ok(rt)
    }

    /// Applies the flags given on the command line over `cfg`.
    pub fn apply(&self, cfg: &mut ctxd_config::ModelConfig) {
        if let Some(m) = &self.model {
            cfg.name = m.clone();
        }
        if let Some(d) = self.device {
            cfg.device = d;
        }
        if let Some(p) = self.precision {
            cfg.precision = p;
        }
        if let Some(b) = self.backend {
            cfg.backend = b;
        }
        if let Some(t) = self.threads {
            cfg.threads = t;
        }
        if let Some(e) = &self.endpoint {
            cfg.endpoint = e.clone();
        }
        if let Some(k) = self.endpoint_kind {
            cfg.endpoint_kind = k;
        }
        if let Some(q) = &self.query_prefix {
            cfg.query_prefix = Some(q.clone());
        }
        if let Some(d) = &self.document_prefix {
            cfg.document_prefix = Some(d.clone());
        }
    }
}
