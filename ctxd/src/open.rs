//! Opening what a command works on: the configuration (file, environment, flags), an existing
//! index, its model and tokenizer, and the searcher or context assembler on top of them.
//!
//! The one module the commands share; it imports no command module. Every failure names the
//! index or the model and what to run instead.

use std::path::Path;
use std::sync::Arc;

use anyhow::{bail, Result};
use ctxd_config::Config;
use ctxd_context::assembler::Assembler;
use ctxd_index::store::Index;
use ctxd_models::{resolve::DEFAULT_MODEL, service::EmbedService, service::EmbedServiceConfig, tokens::TokenCounter};
use ctxd_roles::reader::{Opening, Reopen};
use ctxd_search::searcher::Searcher;

use crate::model_args::ModelArgs;

/// The URI of an existing index at `db` (a local directory must exist).
pub fn existing_db(db: &Path) -> Result<String> {
    let uri = db.to_string_lossy().into_owned();
    if !uri.contains("://") && !db.is_dir() {
        bail!("no index at {}: run `ctxd index <PATH> --db {}` first", db.display(), db.display());
    }
    Ok(uri)
}

pub async fn open_index(db: &Path) -> Result<Index> {
    let uri = existing_db(db)?;
    // The auto-sized index cache (see `IndexConfig::index_cache_bytes`) for readers too.
    ctxd_config::IndexConfig { db: db.to_path_buf(), ..Default::default() }.apply_cache_limits();
    Ok(Index::open(&uri).await?)
}

/// Takes the writer lease of the index `cfg` names for this process, doing `what` (see
/// `ctxd_index::lease`); refused, with the holder and the lock named, while another process writes it.
pub async fn writer_lease(cfg: &Config, what: &str) -> Result<ctxd_index::lease::WriterLease> {
    let uri = cfg.index.db.to_string_lossy().into_owned();
    let ttl = std::time::Duration::from_secs(cfg.index.lease_ttl_secs);
    Ok(ctxd_index::lease::WriterLease::acquire(&uri, &ctxd_index::lease::holder_name(what), ttl).await?)
}

/// A writer that lost its lease stops at once (exit code 75): another writer may already be
/// writing, and a drain would commit after it (its writes are refused anyway: `ctxd_index`
/// confirms the lease before each one).
pub fn exit_when_lease_lost(lease: &ctxd_index::lease::WriterLease) {
    let mut lost = lease.lost();
    tokio::spawn(async move {
        if lost.wait_for(|l| l.is_some()).await.is_ok() {
            let why = lost.borrow().clone().unwrap_or_default();
            tracing::error!("{why}; exiting without draining (the next writer redoes what was in flight)");
            eprintln!(
                "ctxd: {why}; exiting without draining (the writer holding the lease now redoes what was in flight)"
            );
            std::process::exit(75);
        }
    });
}

/// Builds the config of a one-shot or daemon run from an optional file plus overrides.
pub fn build_config(file: Option<&Path>, root: Option<&Path>, db: Option<&Path>, model: &ModelArgs) -> Result<Config> {
    let mut cfg = Config::load_with_env(file)?;
    if let Some(root) = root {
        cfg.source.root = root.to_path_buf();
    }
    if let Some(db) = db {
        cfg.index.db = db.to_path_buf();
    }
    model.apply(&mut cfg.model);
    if let Some(reranker) = &model.rerank_model {
        cfg.rerank.model = reranker.clone();
    }
    cfg.validate().map_err(|e| anyhow::anyhow!("invalid configuration: {e}"))?;
    cfg.index.apply_cache_limits();
    Ok(cfg)
}

/// Opens an index read-only with a searcher using its model (or `--model`); the model is
/// loaded only when `need_model` (bm25 never embeds the query).
pub async fn open_searcher(db: &Path, model: &ModelArgs, need_model: bool) -> Result<Searcher> {
    Ok(open_read(db, model, need_model).await?.searcher)
}

/// An existing index opened for reading: its searcher, and the model it is searched with.
pub struct Opened {
    pub searcher: Searcher,
    /// What the model is loaded from: `--model`, else the spec `ctxd reembed` recorded for the
    /// index, a directory or hub id, else the model id stored in the table (the default model
    /// for a text-only index).
    pub spec: String,
    /// The model's tokenizer, when the model was loaded (it comes with the model, read once).
    pub tokens: Option<TokenCounter>,
}

impl Opened {
    /// The tokenizer of the index's model: the loaded model's, else read from its files.
    pub async fn tokenizer(&self) -> Result<TokenCounter> {
        match &self.tokens {
            Some(t) => Ok(t.clone()),
            None => tokenizer(self.spec.clone()).await,
        }
    }
}

/// Opens the index at `db` and, when `need_model`, loads its model (see [`Opened::spec`]).
pub async fn open_read(db: &Path, model: &ModelArgs, need_model: bool) -> Result<Opened> {
    let index = open_index(db).await?;
    let spec = match &model.model {
        Some(spec) => spec.clone(),
        None => index_model_spec(&index).await?,
    };
    if !need_model {
        return Ok(Opened { searcher: Searcher::new(Arc::new(index), None), spec, tokens: None });
    }
    let (service, tokens) = start_model(&spec, model).await?;
    if service.dim() != index.dim() {
        bail!(
            "model {} has dimension {} but the index at {} has {}",
            service.model_id(),
            service.dim(),
            db.display(),
            index.dim()
        );
    }
    let reranker = start_reranker(model.rerank_model.as_deref().unwrap_or(""), model.runtime()?).await?;
    let searcher = Searcher::new(Arc::new(index), Some(service)).with_reranker(reranker);
    Ok(Opened { searcher, spec, tokens: Some(tokens) })
}

/// The cross-encoder `spec` names ([`ctxd_models::cross`]) loaded on a blocking thread and
/// started on its own model thread, on the device `runtime` resolves to; `None` for `""`.
pub async fn start_reranker(spec: &str, runtime: ctxd_models::runtime::Runtime) -> Result<Option<EmbedService>> {
    if spec.is_empty() {
        return Ok(None);
    }
    let owned = spec.to_string();
    let started = tokio::task::spawn_blocking(move || ctxd_models::start_reranker(&owned, &runtime))
        .await
        .map_err(|e| anyhow::anyhow!("reranker loading thread failed: {e}"))?;
    Ok(Some(started.map_err(|e| anyhow::anyhow!("loading the cross-encoder {spec} ([rerank] model): {e}"))?))
}

/// Loads the model `spec` with the runtime `model` asks for (device, precision, backend,
/// threads) on a blocking thread, and starts its service.
pub async fn start_model(spec: &str, model: &ModelArgs) -> Result<(EmbedService, TokenCounter)> {
    let runtime = model.runtime()?;
    let spec = spec.to_string();
    let started =
        tokio::task::spawn_blocking(move || ctxd_models::start(&spec, EmbedServiceConfig::default(), &runtime))
            .await
            .map_err(|e| anyhow::anyhow!("model loading thread failed: {e}"))??;
    Ok(started)
}

/// The model spec an index was embedded with (the default for an index without one).
pub(crate) async fn index_model_spec(index: &ctxd_index::store::Index) -> Result<String> {
    let id = index.model_id();
    if id.is_empty() || id == ctxd_index::NO_MODEL {
        return Ok(DEFAULT_MODEL.to_string());
    }
    let active = ctxd_index::active::current(index.uri()).await?;
    Ok(match active {
        Some(a) if a.model_id == id && a.table_name == index.table_name() && !a.model_spec.is_empty() => a.model_spec,
        _ => id.to_string(),
    })
}

/// The tokenizer of the model `spec` (context budgets count in it).
pub async fn tokenizer(spec: String) -> Result<TokenCounter> {
    let (tokens, _, _) = tokio::task::spawn_blocking(move || ctxd_models::tokenizer_only(&spec))
        .await
        .expect("tokenizer loading thread panicked")?;
    Ok(tokens)
}

/// A context assembler on an existing index: its searcher (the model loaded when
/// `need_model`) and the tokenizer of the index's model (or `--model`), which budgets count in.
pub async fn open_assembler(db: &Path, model: &ModelArgs, need_model: bool) -> Result<Assembler> {
    let opened = open_read(db, model, need_model).await?;
    let tokens = opened.tokenizer().await?;
    Ok(Assembler::new(opened.searcher, tokens))
}

/// Resolves on Ctrl-C or SIGTERM.
pub async fn termination() {
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("installing the SIGTERM handler");
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// `ctxd serve --role reader`: the index at `db` opened for serving (handed to
/// `ctxd_roles::reader`, which waits until the writer has created it).
pub async fn open_for_reader(db: &Path, model: &ModelArgs) -> Result<Opened> {
    let opening = || async {
        open_read(db, model, true).await.map_err(|e| {
            if is_missing(&e) {
                Opening::Missing
            } else {
                Opening::Failed(e.into())
            }
        })
    };
    Ok(ctxd_roles::reader::wait_for_index(db, opening).await?)
}

fn is_missing(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        matches!(c.downcast_ref::<ctxd_index::error::IndexError>(), Some(ctxd_index::error::IndexError::Missing { .. }))
    }) || e.to_string().starts_with("no index at ")
}

/// Opens the active table again with the model the switch recorded (not a `--model` given for
/// the old table).
pub fn reopen_for_reader(db: &Path, model: &ModelArgs) -> Reopen {
    let (db, recorded) = (db.to_path_buf(), ModelArgs { model: None, ..model.clone() });
    Arc::new(move || {
        let (db, recorded) = (db.clone(), recorded.clone());
        Box::pin(async move { open_read(&db, &recorded, true).await.map(|o| o.searcher).map_err(Into::into) })
    })
}
