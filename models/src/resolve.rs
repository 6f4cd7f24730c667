//! Model resolution: from a spec (a directory or a Hugging Face id) to the files on disk.
//!
//! Order, first hit wins:
//! 1. the spec is an existing directory → used as is;
//! 2. ctxd's model cache: `$CTXD_MODEL_DIR/<org>/<name>`, default `~/.cache/ctxd/models/<org>/<name>`
//!    (this is where `scripts/fetch-model.sh` installs the default model), then the models of an
//!    unpacked package, `<prefix>/share/ctxd/models/<org>/<name>` beside `<prefix>/bin/ctxd`;
//! 3. the Hugging Face cache: `$HF_HUB_CACHE` or `$HF_HOME/hub` or `~/.cache/huggingface/hub`,
//!    `models--<org>--<name>/snapshots/<rev>` with `<rev>` from `refs/main` (or any snapshot);
//! 4. a download through `hf-hub` (skipped when `HF_HUB_OFFLINE=1`).

use std::path::{Path, PathBuf};

use crate::error::ModelError;

/// The default embedding model.
pub const DEFAULT_MODEL: &str = "sentence-transformers/all-MiniLM-L6-v2";

/// The files of a resolved model ([`crate::loaded::LoadedModel`] reads them).
#[derive(Debug, Clone)]
pub struct ModelFiles {
    /// The spec the user gave (kept as the model id when it is a hub id).
    pub spec: String,
    /// Directory holding the files.
    pub dir: PathBuf,
    pub config: PathBuf,
    pub weights: PathBuf,
    pub tokenizer: PathBuf,
}

impl ModelFiles {
    fn from_dir(spec: &str, dir: &Path) -> Option<Self> {
        let files = Self {
            spec: spec.to_string(),
            dir: dir.to_path_buf(),
            config: dir.join("config.json"),
            weights: dir.join("model.safetensors"),
            tokenizer: dir.join("tokenizer.json"),
        };
        (files.config.is_file() && files.weights.is_file() && files.tokenizer.is_file()).then_some(files)
    }

    /// The model id stored in the index: the hub id, or the directory name for local models.
    pub fn model_id(&self) -> String {
        if Path::new(&self.spec).is_dir() {
            self.dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| self.spec.clone())
        } else {
            self.spec.clone()
        }
    }
}

/// The prefix of an unpacked package — `<prefix>` for an executable at `<prefix>/bin/ctxd` —
/// when the executable sits in a `bin` folder whose parent has `lib/` or `share/ctxd/`.
pub fn install_prefix() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let bin = exe.parent()?;
    let prefix = bin.parent()?;
    (bin.file_name()? == "bin" && (prefix.join("share/ctxd").is_dir() || prefix.join("lib").is_dir()))
        .then(|| prefix.to_path_buf())
}

/// ctxd's own model cache directory.
pub fn ctxd_model_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("CTXD_MODEL_DIR") {
        return PathBuf::from(dir);
    }
    dirs::cache_dir().unwrap_or_else(|| PathBuf::from(".cache")).join("ctxd").join("models")
}

fn hf_cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("HF_HUB_CACHE") {
        return PathBuf::from(dir);
    }
    if let Some(home) = std::env::var_os("HF_HOME") {
        return PathBuf::from(home).join("hub");
    }
    dirs::cache_dir().unwrap_or_else(|| PathBuf::from(".cache")).join("huggingface").join("hub")
}

fn from_hf_cache(spec: &str, cache: &Path) -> Option<ModelFiles> {
    let repo = cache.join(format!("models--{}", spec.replace('/', "--")));
    if let Ok(rev) = std::fs::read_to_string(repo.join("refs").join("main")) {
        if let Some(files) = ModelFiles::from_dir(spec, &repo.join("snapshots").join(rev.trim())) {
            return Some(files);
        }
    }
    let mut snapshots: Vec<PathBuf> =
        std::fs::read_dir(repo.join("snapshots")).ok()?.filter_map(|e| e.ok().map(|e| e.path())).collect();
    snapshots.sort();
    snapshots.iter().find_map(|dir| ModelFiles::from_dir(spec, dir))
}

fn download(spec: &str) -> Result<ModelFiles, ModelError> {
    let err = |e: hf_hub::api::sync::ApiError| ModelError::Download { spec: spec.to_string(), message: e.to_string() };
    let api = hf_hub::api::sync::Api::new().map_err(err)?;
    let repo = api.model(spec.to_string());
    let config = repo.get("config.json").map_err(err)?;
    let weights = repo.get("model.safetensors").map_err(err)?;
    let tokenizer = repo.get("tokenizer.json").map_err(err)?;
    // Optional sentence-transformers metadata (max_seq_length); absent files are fine.
    let _ = repo.get("sentence_bert_config.json");
    let dir = config.parent().map(Path::to_path_buf).unwrap_or_default();
    Ok(ModelFiles { spec: spec.to_string(), dir, config, weights, tokenizer })
}

/// Resolves `spec` to model files (see the module docs for the search order).
pub fn resolve_model(spec: &str) -> Result<ModelFiles, ModelError> {
    let as_path = Path::new(spec);
    if as_path.is_dir() {
        return ModelFiles::from_dir(spec, as_path).ok_or_else(|| ModelError::NotFound {
            spec: spec.to_string(),
            searched: as_path.display().to_string(),
            hint: "the directory needs config.json, model.safetensors and tokenizer.json".into(),
        });
    }
    let local = ctxd_model_dir().join(spec);
    if let Some(files) = ModelFiles::from_dir(spec, &local) {
        return Ok(files);
    }
    let packaged = install_prefix().map(|p| p.join("share/ctxd/models").join(spec));
    if let Some(files) = packaged.as_deref().and_then(|dir| ModelFiles::from_dir(spec, dir)) {
        return Ok(files);
    }
    let hf = hf_cache_dir();
    if let Some(files) = from_hf_cache(spec, &hf) {
        return Ok(files);
    }
    let offline = std::env::var("HF_HUB_OFFLINE").map(|v| v == "1" || v == "true").unwrap_or(false);
    if !offline && spec.contains('/') {
        match download(spec) {
            Ok(files) => return Ok(files),
            Err(e) => tracing::warn!("{e}"),
        }
    }
    Err(ModelError::NotFound {
        spec: spec.to_string(),
        searched: format!("{}, {}", local.display(), hf.display()),
        hint: "run scripts/fetch-model.sh to install the default model, or pass a model directory".into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_model_names_where_it_looked() {
        let err = resolve_model("no-such-org/no-such-model-xyz").unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("no-such-org/no-such-model-xyz"), "{msg}");
        assert!(msg.contains("fetch-model"), "{msg}");
    }

    #[test]
    fn hf_cache_layout_is_found() {
        let tmp = std::env::temp_dir().join(format!("ctxd-hf-{}", std::process::id()));
        let snap = tmp.join("models--org--m").join("snapshots").join("abc");
        std::fs::create_dir_all(&snap).unwrap();
        for f in ["config.json", "model.safetensors", "tokenizer.json"] {
            std::fs::write(snap.join(f), b"{}").unwrap();
        }
        std::fs::create_dir_all(tmp.join("models--org--m").join("refs")).unwrap();
        std::fs::write(tmp.join("models--org--m").join("refs").join("main"), "abc\n").unwrap();
        let files = from_hf_cache("org/m", &tmp).expect("found in cache");
        assert_eq!(files.dir, snap);
        assert_eq!(files.model_id(), "org/m");
        std::fs::remove_dir_all(&tmp).ok();
    }
}
