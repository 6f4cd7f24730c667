//! The pipeline: model, index and incremental state, ready to run its stages or answer queries.
//!
//! [`Pipeline::open`] fails on a bad root before anything else, follows the model a `ctxd
//! reembed` switched the index to, resolves and loads the model (on its own thread; only the
//! tokenizer for a full-text-only source), opens or creates the index (migrating a table an
//! older ctxd wrote, see [`crate::reembed::migrate`]) and reads the incremental state from it. The
//! stages it runs is wired in the `daemon` module.

use std::sync::Arc;

use ctxd_index::store::Index;
use ctxd_models::{service::EmbedService, service::EmbedServiceConfig, tokens::TokenCounter};
use ctxd_stages::state::FileState;

use crate::error::PipelineError;
use crate::reembed::{migrate, JobModel};
use crate::trigger::Triggers;
use ctxd_config::Config;

/// Model, index and state, ready to run its stages or answer queries.
pub struct Pipeline {
    pub(crate) cfg: Config,
    pub(crate) index: Arc<Index>,
    /// `None` for a full-text-only source (`source.embed = false`): the weights are not loaded.
    pub(crate) service: Option<EmbedService>,
    pub(crate) counter: TokenCounter,
    pub(crate) state: FileState,
    /// Git sources' pokes and the failed-commit signal (the daemon's, kept across generations).
    pub(crate) triggers: Triggers,
    /// A sharded build's shard (`crate::build`): where its batches go, and which share it is;
    /// `None` for every other run.
    pub(crate) shard: Option<(Arc<ctxd_index::build_shard::ShardBuild>, crate::reembed::Shard)>,
}

impl Pipeline {
    /// Loads the model and opens (or creates) the index named by `cfg`.
    pub async fn open(cfg: Config) -> Result<Self, PipelineError> {
        // Fail on a bad root before loading the model or creating the index directory.
        for src in cfg.sources().iter().filter(|s| !s.is_object_store() && s.git.is_none()) {
            crate::source::check_root(&src.root)?;
        }
        let service_cfg = EmbedServiceConfig {
            max_batch_tokens: cfg.model.max_batch_tokens,
            max_batch_texts: cfg.model.max_batch_texts,
            bulk_share_percent: cfg.model.indexing_share_percent,
            bulk_share_waiting_percent: cfg.model.indexing_share_waiting_percent,
            ..Default::default()
        };
        let db = cfg.index.db.to_string_lossy().into_owned();
        if !db.contains("://") {
            std::fs::create_dir_all(&cfg.index.db)
                .map_err(|source| PipelineError::CreateDb { path: cfg.index.db.clone(), source })?;
        }
        let mut cfg = cfg;
        // After `ctxd reembed` switched the index to another model, that model is the one to load.
        let active = ctxd_index::active::current(&db).await?;
        if let Some(active) = &active {
            let spec = &active.model_spec;
            if !spec.is_empty() && cfg.model.name != *spec && cfg.model.name != active.model_id {
                tracing::warn!(
                    configured = %cfg.model.name, active = %active.model_id,
                    "the index was switched to another model by `ctxd reembed`; using it (update [model] name)"
                );
                cfg.model.name = active.model_spec.clone();
            }
        }
        let name = cfg.model.name.clone();
        let runtime = cfg.model.runtime();
        let embed = cfg.source.embed;
        let (service, counter, model_id, dim) = tokio::task::spawn_blocking(move || {
            if embed {
                let (service, counter) = ctxd_models::start(&name, service_cfg, &runtime)?;
                let (id, dim) = (service.model_id().to_string(), service.dim());
                Ok::<_, ctxd_models::error::ModelError>((Some(service), counter, id, dim))
            } else {
                // Full-text only: the tokenizer counts chunk tokens; no weights, no model thread.
                let (counter, id, dim) = ctxd_models::tokenizer_only(&name)?;
                Ok((None, counter, id, dim))
            }
        })
        .await
        .expect("model loading thread panicked")?;
        match &service {
            Some(s) => tracing::info!(model = %model_id, backend = %s.backend(), "embedding model ready"),
            None => tracing::info!(model = %model_id, "full-text only: tokenizer loaded, embedding model not loaded"),
        }
        let table = active.map_or_else(|| ctxd_index::CHUNKS_TABLE.to_string(), |a| a.table_name);
        let mut index = Index::open_or_create_table(&db, &table, &model_id, dim).await?;
        if !index.embed_keyed() {
            // Written by an older ctxd: re-embedded once into a keyed table (logged), then used.
            let model = JobModel { id: model_id.clone(), dim, service: service.clone() };
            // No model spec recorded: whatever built the index stays configured (as for seq 0).
            migrate(&db, model, "").await?;
            index = Index::open_or_create(&db, &model_id, dim).await?;
        }
        let index = Arc::new(index);
        // Publishes the row and version gauges before the first commit (the sink refreshes them after each one).
        index.reads().stats().await?;
        index.maintenance().layout().await?;
        let mut hashes = index.reads().file_hashes().await?;
        // An index written before the code graph existed: chunk its files with definitions again
        // (their vectors are reused), which writes their edges.
        let missing = index.symbols().paths_missing_graph().await?;
        if !missing.is_empty() {
            tracing::info!(files = missing.len(), "building the code graph of files indexed before it existed");
            for path in &missing {
                if let Some(h) = hashes.get_mut(path) {
                    *h = format!("graph-backfill:{h}");
                }
            }
        }
        let state = FileState::new(hashes);
        Ok(Self { cfg, index, service, counter, state, triggers: Triggers::default(), shard: None })
    }

    /// The same pipeline with the daemon's `triggers` (webhook pokes reach its git sources; a
    /// new pipeline after a model switch or a reload keeps them).
    pub fn with_triggers(mut self, triggers: Triggers) -> Self {
        self.triggers = triggers;
        self
    }

    /// The index.
    pub fn index(&self) -> Arc<Index> {
        self.index.clone()
    }

    /// The embedding service (queries use it too); `None` for a full-text-only source.
    pub fn embedder(&self) -> Option<EmbedService> {
        self.service.clone()
    }

    /// The tokenizer's counter (context budgets are counted with it).
    pub fn token_counter(&self) -> TokenCounter {
        self.counter.clone()
    }

    /// The configuration in force.
    pub fn config(&self) -> &Config {
        &self.cfg
    }
}
