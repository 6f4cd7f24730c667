//! Named sources: several folders or bucket prefixes in one index (`[[source]]`).
//!
//! ```toml
//! [[source]]
//! name = "api"                 # letters, digits, `.`, `_`, `-`; unique
//! root = "../api"              # a folder or an s3:// prefix
//! include = ["src/**", "*.md"] # globs relative to the root (default: everything)
//! exclude = ["**/fixtures/**"]
//!
//! [[source]]
//! name = "docs"
//! root = "s3://team-docs/handbook"
//! ```
//!
//! A git source names a repository instead of a root (`git = "/srv/repo.git"`, `refs = ["main",
//! "release/*"]`; see `ctxd_stages::git`): its files are stored under `<name>@<ref>/<path>`, and
//! queries read its first ref unless they ask for another (`ref`). The ref `worktree` of a git
//! source that is a clone names its work tree as it is on disk (uncommitted edits and all),
//! watched like a folder and stored under `<name>@worktree/`; a folder source is always read
//! as it is on disk, so `ref = "worktree"` reads it too.
//!
//! Every file of a named source is stored under `<name>/<path>` (so one path in two sources
//! never collides, in any table) with `source = <name>`; queries narrow to some sources with
//! `source` (see `ctxd_index::scope`). A configuration with one `[source]` table and no `name`
//! keeps its paths as they always were. The keys that tune the whole pipeline
//! (`debounce_ms`, `max_file_bytes`, `stream_threshold_bytes`, `stream_block_bytes`, `embed`)
//! may be written in any entry but must agree between entries.

use std::path::{Path, PathBuf};

use ctxd_index::record::WORKTREE;

/// One source of files: an entry of `[[source]]`, or the single `[source]` (empty `name`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamedSource {
    /// Empty for the one unnamed `[source]`.
    pub name: String,
    /// A local directory or an `s3://bucket/prefix`.
    pub root: PathBuf,
    /// Globs (relative to the root) of the files to index; empty: every file.
    pub include: Vec<String>,
    /// Globs (relative to the root) of files never indexed.
    pub exclude: Vec<String>,
    /// For an `s3://` root: the local mirror (default under the cache).
    pub mirror_dir: Option<PathBuf>,
    /// For an `s3://` root: seconds between two listings; for a git source, between two polls
    /// of its refs.
    pub poll_interval_secs: u64,
    /// For an `s3://` root: the SQS queue of the bucket's event notifications (see
    /// [`crate::settings::SourceConfig::sqs_queue`]).
    pub sqs_queue: Option<String>,
    /// With `sqs_queue`: seconds between two reconciling listings.
    pub reconcile_interval_secs: u64,
    /// A git source: the repository (a clone or a bare repository) read from its object
    /// database; `root` is unused then.
    pub git: Option<PathBuf>,
    /// A git source's refs: branches, tags or commits, `*` globs over branch and tag names. The
    /// first names the default view (no glob).
    pub refs: Vec<String>,
}

impl NamedSource {
    /// True when the root is an `s3://` prefix.
    pub fn is_object_store(&self) -> bool {
        ctxd_stages::object::ObjectUri::is_object_uri(&self.root.to_string_lossy())
    }

    /// The mirror directory of an `s3://` root, or of a git source's blobs (by default under
    /// the cache, `ctxd/git/<name>`).
    pub fn mirror(&self) -> PathBuf {
        match (&self.git, &self.mirror_dir) {
            (Some(_), Some(dir)) => dir.clone(),
            (Some(_), None) => mirror_of(Path::new(""), None).with_file_name("git").join(&self.name),
            (None, _) => mirror_of(&self.root, self.mirror_dir.as_ref()),
        }
    }

    /// A git source's default view: its first ref (`HEAD` when none is written).
    pub fn default_ref(&self) -> &str {
        self.refs.first().map_or("HEAD", String::as_str)
    }

    /// The refs read from the object database: `refs` without [`WORKTREE`](ctxd_index::record::WORKTREE).
    pub fn object_refs(&self) -> Vec<String> {
        self.refs.iter().filter(|r| *r != WORKTREE).cloned().collect()
    }

    /// A git source's work tree, when its refs list [`WORKTREE`](ctxd_index::record::WORKTREE): the repository's folder.
    pub fn worktree(&self) -> Option<&Path> {
        self.git.as_deref().filter(|_| self.refs.iter().any(|r| r == WORKTREE))
    }

    /// What the source's relative paths are stored under: `<name>/`, or nothing when unnamed.
    pub fn prefix(&self) -> String {
        if self.name.is_empty() {
            String::new()
        } else {
            format!("{}/", self.name)
        }
    }
}

/// The mirror directory of an `s3://` root: `mirror_dir` when set, else under the cache.
pub(crate) fn mirror_of(root: &std::path::Path, mirror_dir: Option<&PathBuf>) -> PathBuf {
    if let Some(dir) = mirror_dir {
        return dir.clone();
    }
    let uri = ctxd_stages::object::ObjectUri::parse(&root.to_string_lossy());
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    let mut dir = cache.join("ctxd").join("objects");
    if let Some(u) = uri {
        dir.push(u.bucket);
        if !u.prefix.is_empty() {
            dir.push(u.prefix);
        }
    }
    dir
}

/// Why `name` cannot name a source, if it cannot: it becomes the first segment of every path
/// of the source, so it is a plain word.
pub fn name_problem(name: &str) -> Option<String> {
    let ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    if name.is_empty() || name.len() > 64 {
        return Some("must be 1 to 64 characters".into());
    }
    if !name.chars().all(ok) || name.starts_with('.') {
        return Some(format!(
            "'{name}' may hold only letters, digits, '.', '_' and '-' (and not start with '.'): it becomes the first \
             folder of the source's paths"
        ));
    }
    None
}

/// Why a glob of `include`/`exclude` is not one, if it is not.
pub fn glob_problem(glob: &str) -> Option<String> {
    globset::Glob::new(glob).err().map(|e| format!("'{glob}' is not a glob: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_plain_words_and_globs_are_checked() {
        assert!(name_problem("api").is_none() && name_problem("my_api-2.x").is_none());
        for bad in ["", "a/b", ".hidden", "a b", "é", "x%"] {
            assert!(name_problem(bad).is_some(), "{bad}");
        }
        assert!(glob_problem("src/**/*.rs").is_none());
        assert!(glob_problem("src/[").is_some());
    }

    #[test]
    fn one_unnamed_source_without_entries() {
        let cfg = crate::Config::default();
        let sources = cfg.sources();
        assert_eq!(sources.len(), 1);
        assert_eq!((sources[0].name.as_str(), sources[0].prefix()), ("", String::new()));
        assert!(!cfg.has_named_sources());
    }
}
