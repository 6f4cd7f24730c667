//! The five stages of the ctxd pipeline: `watch → load → chunk → embed → upsert`.
//!
//! Each module holds one stage's logic as plain types and functions; the pipeline that runs them
//! in `ctxd-pipeline` wires them with bounded channels, workers, metrics and drain. Items
//! flow as [`FileWork`]: either the new state of one file or the fact that it is gone.
//!
//! * [`watch`] — the initial scan (honouring `.gitignore`, skipping binaries and secrets) and
//!   debounced `notify` events; [`skip`] — which names are never indexed (binaries, secrets).
//! * [`object`] — an `s3://` prefix as a source: listing + ETag/size diff on an interval,
//!   changed objects streamed into a local mirror; [`object_events`] — its changes read from the
//!   bucket's event notifications in an SQS queue instead.
//! * [`git`] — a git repository read from its object database: refs resolved, trees diffed,
//!   blobs mirrored once by id, files under `<name>@<ref>/`; [`git_views`] — what each ref stores
//!   beside its base ref (the rest read through an overlay).
//! * [`select`] — a source's include/exclude globs and the `<name>/` its paths are stored under.
//! * [`load`] — reads a file, skips unchanged ones by content hash, decodes UTF-8 (lossy with
//!   a counted warning) and UTF-16, rejects binaries and oversized files with a counted reason;
//!   text out of PDF, notebooks and HTML (a format per file).
//! * [`chunk`] — tree-sitter chunks on definition boundaries for 17 grammars (Rust, Python,
//!   JavaScript, TypeScript/TSX, Go, Java, C, C++, C#, Ruby, PHP, Bash, Kotlin, Scala, Lua,
//!   Swift; a language per file under `chunk/lang/`); sections of documents (Markdown/reST
//!   headings, JSON/YAML/TOML keys); token windows with overlap for everything else; the
//!   definitions of a file's chunks, for the index's symbol table.
//! * [`formats`] — the old path of the format functions, re-exported from `load` and `chunk`.
//! * [`embed`] — turns chunks into vectors through the model service, batching by tokens.
//! * [`upsert`] — groups files into commits and applies them to the LanceDB index.

pub mod chunk;
pub mod counters;
pub(crate) mod edges;
pub mod embed;
pub mod error;
pub(crate) mod explain;
pub mod git;
pub mod git_log;
pub(crate) mod git_views;
pub mod lang;
pub mod load;
pub mod metrics;
pub mod object;
pub(crate) mod object_events;
pub mod select;
pub(crate) mod skip;
pub mod stage;
pub mod state;
pub mod upsert;
pub mod watch;

pub use explain::explain;
pub use git_views::OverlayChange;
pub use object_events::{EventQueue, Received};

use std::path::PathBuf;

/// One unit of work flowing through the pipeline: a file's new content, or its removal.
#[derive(Debug, Clone)]
pub enum FileWork<T> {
    /// The file exists with this (partially processed) content.
    Update(T),
    /// The file with this relative path is gone.
    Remove(String),
}

impl<T> FileWork<T> {
    /// Relative path of the file this work is about.
    pub fn rel_path<'a>(&'a self, f: impl Fn(&'a T) -> &'a str) -> &'a str {
        match self {
            FileWork::Update(t) => f(t),
            FileWork::Remove(p) => p,
        }
    }
}

/// A file the watcher found: its path relative to the root (`/`-separated) and on disk.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SourceFile {
    pub rel: String,
    pub abs: PathBuf,
}
