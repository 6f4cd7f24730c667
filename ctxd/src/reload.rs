//! `SIGHUP` for `ctxd serve`: what is read again (the configuration file with the command-line
//! overrides the daemon started with). What is applied, and how, is `ctxd_roles::reload`'s.

use std::path::PathBuf;

use anyhow::Result;
use ctxd_config::Config;

use crate::model_args::ModelArgs;

/// What `ctxd serve` re-reads on `SIGHUP`: the file and the command-line overrides.
#[derive(Clone)]
pub struct ReloadSpec {
    pub file: PathBuf,
    pub watch: Option<PathBuf>,
    pub db: Option<PathBuf>,
    pub model: ModelArgs,
}

impl ReloadSpec {
    /// The configuration file read again, validated.
    pub fn read(&self) -> Result<Config> {
        crate::open::build_config(Some(&self.file), self.watch.as_deref(), self.db.as_deref(), &self.model)
    }
}
