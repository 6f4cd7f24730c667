//! Errors of the runtime and the daemon wiring, and the one-report error of a configuration.

use std::path::PathBuf;

/// Errors that stop the pipeline from starting (item-level errors never stop it).
#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    #[error("config {path}: {message}")]
    Config { path: PathBuf, message: String },
    /// A configuration with problems: every one of them.
    #[error("config {path}: {errors}")]
    Invalid { path: PathBuf, errors: ConfigErrors },
    #[error("source root {path} is not a readable directory: {message}")]
    Root { path: PathBuf, message: String },
    #[error("re-embedding {db}: {message}")]
    Reembed { db: String, message: String },
    #[error(transparent)]
    Model(#[from] ctxd_models::ModelError),
    #[error(transparent)]
    Index(#[from] ctxd_index::IndexError),
    #[error(transparent)]
    Stage(#[from] ctxd_stages::StageError),
}

/// One problem of a configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// Where the key was set (`line 3`, the environment variable that set it, `here` when the
    /// file's line is not found); `None` for a check of the values (its message names the keys).
    pub place: Option<String>,
    /// The key's path, e.g. `pipeline.load.capacity` (inside an array of tables the array's
    /// path: `aggregate.sources.url`).
    pub key: String,
    /// What is wrong.
    pub message: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.place {
            Some(place) => write!(f, "{place}: {}: {}", self.key, self.message),
            None => f.write_str(&self.message),
        }
    }
}

/// Every problem of a configuration, in one error (shown `; `-separated).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ConfigErrors(pub Vec<Problem>);

impl std::fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, p) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{p}")?;
        }
        Ok(())
    }
}
