//! Errors of reading a configuration: the file or a key file that does not read, TOML that does
//! not parse, and the one report of every problem of the values ([`ConfigErrors`]).

use std::path::PathBuf;

/// A configuration that could not be read or is not valid.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file does not read.
    #[error("reading config {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A file a key names (e.g. `server.auth_token_file`) does not read.
    #[error("config {path}: reading server.{key}")]
    KeyFile {
        path: PathBuf,
        key: &'static str,
        #[source]
        source: std::io::Error,
    },
    /// TOML that does not parse, or an override that does not apply (line and column, or the
    /// variable, in the message).
    #[error("config {path}: {message}")]
    Syntax { path: PathBuf, message: String },
    /// A value read from a file a key names is not usable (an empty token, a short secret).
    #[error("config {path}: {message}")]
    Value { path: PathBuf, message: String },
    /// A configuration with problems: every one of them.
    #[error("config {path}: {errors}")]
    Invalid { path: PathBuf, errors: ConfigErrors },
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
