//! A git repository as a source, read from its object database — never from a checkout.
//!
//! `[[source]] name = "sqlglot", git = "/srv/sqlglot.git", refs = ["main", "release/*", "v2*"]`:
//! each poll resolves the ref patterns (branches, tags, or a commit; `*` globs over
//! `refs/heads/` and `refs/tags/`), and for every ref whose commit moved, walks the commit's
//! tree with gitoxide and diffs it — path → blob id — against the tree it indexed last:
//!
//! * a new or changed blob is written once into a blob-addressed **mirror**
//!   (`<mirror>/<oid[..2]>/<oid>`: a blob shared by two refs or two commits is stored once) and
//!   reported as a file under `<name>@<ref>/<path>` (`/` in a ref name becomes `~`, which git
//!   forbids in ref names, so the stored path keeps one segment per ref). From there it flows
//!   through load → chunk → embed → upsert like any file; the embed stage reuses the stored
//!   vector of every chunk whose text it has embedded before, so a second ref that shares most
//!   files costs chunking, not the model;
//! * a path gone from the tree (or a ref gone from the repository) is reported removed.
//!
//! What is skipped, each counted in `ctxd_watch_skipped_total{reason}` with a log line, the
//! rest of the source indexed: a ref pattern that matches nothing (`missing_ref`), submodules
//! (`submodule`), symlinks (`symlink`), Git LFS pointers (`lfs_pointer`), blobs over the size
//! limit (`too_large`, decided from the object header before reading), unreadable objects of
//! a damaged repository (`unreadable`), and the binary/secret names every source skips. A
//! shallow repository is indexed (its tips are complete) with a warning: history stops at the
//! shallow boundary.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use crate::error::Cause;
use crate::git_views::split;
use crate::git_views::OverlayChange;
use crate::metrics as m;
use crate::select::Selector;
use crate::{error::StageError, SourceFile};
use ctxd_index::overlay::Overlay;

/// How long a mirror blob written or reported last is kept even when no ref of this process
/// stores it (see [`GitSource::collect_garbage`]).
pub const MIRROR_GC_AGE: std::time::Duration = std::time::Duration::from_secs(3600);

/// What a blob that is a Git LFS pointer starts with.
const LFS_POINTER: &[u8] = b"version https://git-lfs.github.com/spec/";

/// Largest blob read into memory (gitoxide decodes a blob whole); larger ones are skipped.
pub const MAX_BLOB_BYTES: u64 = 256 << 20;

/// One change a poll found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GitChange {
    /// A file of a ref is new or changed (its blob is in the mirror).
    Update(SourceFile),
    /// Listed again and unchanged since the last poll (only reported by a full poll).
    Unchanged(String),
    /// A file (stored path) is gone from its ref, or its ref is gone.
    Removed(String),
}

/// A ref's resolved commit, its files, and those of them it stores itself.
#[derive(Debug, Clone, Default)]
struct RefState {
    commit: String,
    /// Every indexable file of the commit's tree: path → blob id.
    files: BTreeMap<String, String>,
    /// The files stored under the ref's own view: all of them for the base ref (or a ref
    /// stored whole), else those whose blob differs from the base's.
    stored: BTreeMap<String, String>,
    /// How the ref reads the base's other files (`None`: stored whole).
    overlay: Option<Overlay>,
}

/// A git repository source: its ref patterns, selector, mirror, and the trees last indexed.
pub struct GitSource {
    path: PathBuf,
    name: String,
    patterns: Vec<String>,
    select: Selector,
    mirror: PathBuf,
    max_bytes: u64,
    known: HashMap<String, RefState>,
    /// Refs whose commit changed in the polls since [`GitSource::take_moved`] (`None`: gone).
    moved: Vec<(String, Option<String>)>,
    /// Overlays that changed in the polls since [`GitSource::take_overlays`].
    overlays: Vec<OverlayChange>,
    /// The base ref of the last poll (see [`GitSource::base_of`]).
    base: Option<String>,
}

/// `release/1.0` → `release~1.0`: one path segment per ref.
pub fn ref_segment(r: &str) -> String {
    r.replace('/', "~")
}

/// Whether `name` matches the ref `pattern` (`*` matches any run of characters).
fn glob_match(pattern: &str, name: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == name,
        Some((head, tail)) => {
            let Some(rest) = name.strip_prefix(head) else { return false };
            if tail.is_empty() {
                return true;
            }
            (0..=rest.len()).filter(|&i| rest.is_char_boundary(i)).any(|i| glob_match(tail, &rest[i..]))
        }
    }
}

impl GitSource {
    /// The repository at `path` (a clone or a bare repository), indexed as source `name`.
    pub fn open(
        path: &Path,
        name: &str,
        patterns: Vec<String>,
        select: Selector,
        mirror: PathBuf,
        max_bytes: u64,
    ) -> Result<Self, StageError> {
        let repo = open_repo(path)?;
        if repo.is_shallow().unwrap_or(false) {
            tracing::warn!(
                "{}: a shallow repository: its refs are indexed, but history stops at the shallow boundary",
                path.display()
            );
        }
        std::fs::create_dir_all(&mirror).map_err(|source| StageError::Read { path: mirror.clone(), source })?;
        Ok(Self {
            path: path.to_path_buf(),
            name: name.to_string(),
            patterns,
            select,
            mirror,
            max_bytes: max_bytes.min(MAX_BLOB_BYTES),
            known: HashMap::new(),
            moved: Vec::new(),
            overlays: Vec::new(),
            base: None,
        })
    }

    /// The source's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The repository's path.
    pub fn repository(&self) -> &Path {
        &self.path
    }

    /// Which files of the repository the source indexes.
    pub fn selector(&self) -> &Selector {
        &self.select
    }

    /// The refs that moved (with their new commit) or went away (`None`) since the last call.
    pub fn take_moved(&mut self) -> Vec<(String, Option<String>)> {
        std::mem::take(&mut self.moved)
    }

    /// Forgets which files the refs' views hold (their commits and trees stay known): the next
    /// `poll(true)` reports every file again, as after a restart, and every ref counts as moved
    /// (its history is recorded again). For a batch the sink could not commit: the files the
    /// index lacks are found again (the load stage skips the others by their content hash).
    pub fn forget_stored(&mut self) {
        for (r, state) in self.known.iter_mut() {
            state.stored.clear();
            self.moved.push((r.clone(), Some(state.commit.clone())));
        }
    }

    /// The overlays that changed since the last call, in order.
    pub fn take_overlays(&mut self) -> Vec<OverlayChange> {
        std::mem::take(&mut self.overlays)
    }

    /// Deletes the mirror's blobs that no ref stores now (files of commits the refs moved past,
    /// of refs gone); returns how many. Run it when nothing the source emitted is in flight (a
    /// pending file would find its blob gone: counted as vanished, and the next poll's
    /// reconciliation writes it again). Blocking.
    pub fn collect_garbage(&self) -> usize {
        self.collect_garbage_older_than(MIRROR_GC_AGE)
    }

    /// [`GitSource::collect_garbage`] of the blobs last written or reported more than `age`
    /// ago only: another process on the same mirror (a daemon and a `ctxd index` of the same
    /// source name, two generations during a model switch) may have just reported the others.
    pub fn collect_garbage_older_than(&self, age: std::time::Duration) -> usize {
        let live: std::collections::HashSet<&str> =
            self.known.values().flat_map(|s| s.stored.values().map(String::as_str)).collect();
        let fresh = |p: &Path| {
            std::fs::metadata(p).and_then(|m| m.modified()).map_or(true, |t| t.elapsed().map_or(true, |e| e < age))
        };
        let mut removed = 0;
        let Ok(dirs) = std::fs::read_dir(&self.mirror) else { return 0 };
        for dir in dirs.flatten().filter(|d| d.file_type().is_ok_and(|t| t.is_dir())) {
            let Ok(blobs) = std::fs::read_dir(dir.path()) else { continue };
            for blob in blobs.flatten() {
                let name = blob.file_name();
                let name = name.to_string_lossy();
                // Hex object ids only (a temporary `.oid.tmp` is another poll's write in progress).
                if name.len() < 40 || !name.bytes().all(|b| b.is_ascii_hexdigit()) || live.contains(name.as_ref()) {
                    continue;
                }
                if fresh(&blob.path()) {
                    continue;
                }
                if std::fs::remove_file(blob.path()).is_ok() {
                    removed += 1;
                }
            }
        }
        if removed > 0 {
            metrics::counter!(m::GIT_MIRROR_REMOVED_TOTAL).increment(removed as u64);
            tracing::debug!(source = %self.name, removed, "dropped mirror blobs no ref holds");
        }
        removed
    }

    /// The view of ref `r`: `<name>@<ref>`.
    pub fn view(&self, r: &str) -> String {
        format!("{}@{}", self.name, ref_segment(r))
    }

    /// The base ref among `refs` (resolved, sorted by name): the one it was while it still
    /// resolves (a new branch matching a glob never moves it), else the first pattern's (a
    /// glob's first match), else the next pattern's. Stored whole; the other refs read its
    /// files through overlays ([`ctxd_index::overlay`]).
    fn base_of(&self, refs: &[(String, String)]) -> Option<String> {
        if let Some(b) = self.base.as_ref().filter(|b| refs.iter().any(|(r, _)| r == *b)) {
            return Some(b.clone());
        }
        self.patterns.iter().find_map(|p| refs.iter().find(|(r, _)| glob_match(p, r)).map(|(r, _)| r.clone()))
    }

    /// The stored path of `path` in ref `r`: `<name>@<ref>/<path>`.
    pub fn stored(&self, r: &str, path: &str) -> String {
        format!("{}@{}/{path}", self.name, ref_segment(r))
    }

    /// The refs the patterns name now, with their commits (sorted by ref name; patterns that
    /// match nothing are logged and counted).
    pub fn resolve_refs(&self) -> Result<Vec<(String, String)>, StageError> {
        let repo = open_repo(&self.path)?;
        let err = |e: Cause| StageError::Git { path: self.path.clone(), what: "listing its refs".into(), source: e };
        let mut names: Vec<(String, String)> = Vec::new();
        let platform = repo.references().map_err(|e| err(e.into()))?;
        for r in platform.all().map_err(|e| err(e.into()))? {
            let Ok(mut r) = r else { continue };
            let full = r.name().as_bstr().to_string();
            let short = match full.strip_prefix("refs/heads/").or_else(|| full.strip_prefix("refs/tags/")) {
                Some(s) => s.to_string(),
                None => continue,
            };
            if let Ok(id) = r.peel_to_id() {
                names.push((short, id.to_string()));
            }
        }
        let mut out: BTreeMap<String, String> = BTreeMap::new();
        for pattern in &self.patterns {
            let before = out.len();
            if pattern.contains('*') {
                for (n, _) in names.iter().filter(|(n, _)| glob_match(pattern, n)) {
                    if let Some(c) = commit_of(&repo, n) {
                        out.insert(n.clone(), c);
                    }
                }
            } else if let Some(c) = commit_of(&repo, pattern) {
                out.insert(pattern.clone(), c);
            }
            if out.len() == before && !out.contains_key(pattern) {
                tracing::warn!("{}: ref '{pattern}' names no branch, tag or commit; skipped", self.path.display());
                metrics::counter!(m::WATCH_SKIPPED_TOTAL, "reason" => "missing_ref").increment(1);
            }
        }
        Ok(out.into_iter().collect())
    }

    /// Resolves the refs and reports what changed since the last poll (`all`: every file of
    /// every ref, unchanged ones as [`GitChange::Unchanged`], for reconciliation). Blocking:
    /// run it on a blocking thread.
    pub fn poll(&mut self, all: bool) -> Result<Vec<GitChange>, StageError> {
        let refs = self.resolve_refs()?;
        let repo = open_repo(&self.path)?;
        let mut changes = Vec::new();
        let live: Vec<&String> = refs.iter().map(|(r, _)| r).collect();
        let gone: Vec<String> = self.known.keys().filter(|r| !live.contains(r)).cloned().collect();
        let moved = !gone.is_empty() || refs.iter().any(|(r, c)| self.known.get(r).is_none_or(|s| s.commit != *c));
        if !moved && !all {
            return Ok(changes);
        }
        // Every ref's tree (read again only for a ref that moved), then what each stores: the
        // base everything, the others what differs from the base.
        let base = self.base_of(&refs);
        self.base = base.clone();
        let mut trees: Vec<(String, String, BTreeMap<String, String>)> = Vec::new();
        for (r, commit) in &refs {
            let files = match self.known.get(r) {
                Some(s) if s.commit == *commit => s.files.clone(),
                _ => self.tree_files(&repo, commit)?,
            };
            trees.push((r.clone(), commit.clone(), files));
        }
        // Refs that are gone go last: their rows are the embedding cache of what replaces them.
        let mut gone_changes = Vec::new();
        for r in gone {
            let state = self.known.remove(&r).unwrap_or_default();
            self.moved.push((r.clone(), None));
            gone_changes.extend(state.stored.keys().map(|p| GitChange::Removed(self.stored(&r, p))));
            if state.overlay.is_some() {
                let view = self.view(&r);
                let base_paths = Default::default();
                self.overlays.push(OverlayChange { view, before: state.overlay, after: None, base_paths });
            }
        }
        let base_files = trees.iter().find(|t| Some(&t.0) == base.as_ref()).map(|t| t.2.clone()).unwrap_or_default();
        let base_view = base.as_deref().map(|b| self.view(b));
        for (r, commit, files) in trees {
            let is_base = base.as_deref() == Some(r.as_str());
            let (stored, overlay) = split(&files, base_view.as_deref().filter(|_| !is_base).map(|v| (v, &base_files)));
            let previous = self.known.remove(&r).unwrap_or_default();
            for (path, blob) in &stored {
                if previous.stored.get(path) == Some(blob) {
                    if all {
                        changes.push(GitChange::Unchanged(self.stored(&r, path)));
                    }
                    continue;
                }
                match self.materialize(&repo, blob) {
                    Ok(Some(abs)) => changes.push(GitChange::Update(SourceFile { rel: self.stored(&r, path), abs })),
                    Ok(None) => {}
                    Err(e) => {
                        tracing::warn!("{}: {path} (blob {blob}) in {r}: {e}; skipped", self.path.display());
                        metrics::counter!(m::WATCH_SKIPPED_TOTAL, "reason" => "unreadable").increment(1);
                    }
                }
            }
            for path in previous.stored.keys().filter(|p| !stored.contains_key(*p)) {
                changes.push(GitChange::Removed(self.stored(&r, path)));
            }
            if previous.commit != commit {
                self.moved.push((r.clone(), Some(commit.clone())));
            }
            if previous.overlay != overlay || all {
                // A ref stored whole from now on hides the base's files while its own are on their way.
                let base_paths = match (&previous.overlay, &overlay) {
                    (Some(_), None) => base_files.keys().cloned().collect(),
                    _ => Default::default(),
                };
                self.overlays.push(OverlayChange {
                    view: self.view(&r),
                    before: previous.overlay.clone(),
                    after: overlay.clone(),
                    base_paths,
                });
            }
            self.known.insert(r, RefState { commit, files, stored, overlay });
        }
        changes.extend(gone_changes);
        Ok(changes)
    }

    /// `path → blob id` of the indexable files of `commit`'s tree (submodules, symlinks,
    /// excluded paths and skipped names left out, counted).
    fn tree_files(&self, repo: &gix::Repository, commit: &str) -> Result<BTreeMap<String, String>, StageError> {
        let err = |e: Cause| StageError::Git {
            path: self.path.clone(),
            what: format!("reading the tree of commit {commit}"),
            source: e,
        };
        let id = gix::ObjectId::from_hex(commit.as_bytes()).map_err(|e| err(e.into()))?;
        let tree = repo
            .find_object(id)
            .map_err(|e| err(e.into()))?
            .peel_to_commit()
            .map_err(|e| err(e.into()))?
            .tree()
            .map_err(|e| err(e.into()))?;
        let entries = tree.traverse().breadthfirst.files().map_err(|e| err(e.into()))?;
        let mut out = BTreeMap::new();
        for e in entries {
            let path = e.filepath.to_string();
            let skip = |reason: &'static str| {
                metrics::counter!(m::WATCH_SKIPPED_TOTAL, "reason" => reason).increment(1);
            };
            if e.mode.is_commit() {
                tracing::info!(
                    "{}: {path} is a submodule; skipped (index its repository as a source of its own)",
                    self.path.display()
                );
                skip("submodule");
                continue;
            }
            if e.mode.is_link() {
                skip("symlink");
                continue;
            }
            if !e.mode.is_blob() {
                continue;
            }
            if !self.select.matches(&path) {
                skip("excluded");
                continue;
            }
            if let Some(reason) = crate::skip::classify_name(Path::new(&path)) {
                skip(reason.label());
                continue;
            }
            out.insert(path, e.oid.to_string());
        }
        Ok(out)
    }

    /// The mirror file of `blob`, written when missing; `None` (counted) for a blob that is
    /// not indexed (too large, an LFS pointer).
    fn materialize(&self, repo: &gix::Repository, blob: &str) -> Result<Option<PathBuf>, Cause> {
        let id = gix::ObjectId::from_hex(blob.as_bytes())?;
        let dir = self.mirror.join(&blob[..2]);
        let file = dir.join(blob);
        let size = repo.find_header(id)?.size();
        if size > self.max_bytes {
            tracing::warn!(
                "{}: blob {blob} is {size} bytes, over the {} byte limit; skipped",
                self.path.display(),
                self.max_bytes
            );
            metrics::counter!(m::WATCH_SKIPPED_TOTAL, "reason" => "too_large").increment(1);
            return Ok(None);
        }
        if !file.is_file() {
            let data = repo.find_blob(id)?.detach().data;
            if data.starts_with(LFS_POINTER) {
                tracing::info!("{}: blob {blob} is a Git LFS pointer; skipped", self.path.display());
                metrics::counter!(m::WATCH_SKIPPED_TOTAL, "reason" => "lfs_pointer").increment(1);
                return Ok(None);
            }
            std::fs::create_dir_all(&dir)?;
            let tmp = dir.join(format!(".{blob}.tmp"));
            std::fs::write(&tmp, &data)?;
            std::fs::rename(&tmp, &file)?;
        } else if std::fs::read(&file).is_ok_and(|d| d.starts_with(LFS_POINTER)) {
            metrics::counter!(m::WATCH_SKIPPED_TOTAL, "reason" => "lfs_pointer").increment(1);
            return Ok(None);
        } else {
            // Reported again: the mirror's cleanup (of any process sharing it) leaves it alone a while.
            let _ = std::fs::File::options()
                .write(true)
                .open(&file)
                .and_then(|f| f.set_modified(std::time::SystemTime::now()));
        }
        Ok(Some(file))
    }
}

fn open_repo(path: &Path) -> Result<gix::Repository, StageError> {
    gix::open(path).map_err(|e| StageError::Git {
        path: path.to_path_buf(),
        what: "not a readable git repository; check `git` points at a clone or a bare repository".into(),
        source: e.into(),
    })
}

/// The commit `spec` (a branch, tag or commit id) names, if any.
fn commit_of(repo: &gix::Repository, spec: &str) -> Option<String> {
    let id = repo.rev_parse_single(spec).ok()?;
    let commit = id.object().ok()?.peel_to_commit().ok()?;
    Some(commit.id.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ref_globs_and_segments() {
        assert!(glob_match("release/*", "release/1.0") && glob_match("v2*", "v2.1.0") && glob_match("main", "main"));
        assert!(!glob_match("release/*", "main") && !glob_match("v2*", "v1.9") && !glob_match("main", "mainline"));
        assert!(glob_match("*-rc*", "v1-rc2"));
        assert_eq!(ref_segment("release/1.0"), "release~1.0");
    }

    #[test]
    fn the_mirror_keeps_only_the_blobs_a_ref_stores() {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("repo");
        let git = |args: &[&str]| {
            let out = std::process::Command::new("git").arg("-C").arg(&repo).args(args).output().unwrap();
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        };
        std::fs::create_dir_all(&repo).unwrap();
        git(&["init", "-q", "-b", "main"]);
        git(&["config", "user.email", "t@example.com"]);
        git(&["config", "user.name", "t"]);
        std::fs::write(repo.join("a.py"), "x = 1\n").unwrap();
        git(&["add", "-A"]);
        git(&["commit", "-q", "-m", "one"]);
        let mirror = dir.path().join("mirror");
        let select = Selector::new("p", &[], &[]).unwrap();
        let mut src = GitSource::open(&repo, "p", vec!["main".into()], select, mirror.clone(), 1 << 20).unwrap();
        assert_eq!(src.poll(true).unwrap().len(), 1);
        std::fs::write(repo.join("a.py"), "x = 2\n").unwrap();
        git(&["commit", "-q", "-am", "two"]);
        assert!(matches!(src.poll(false).unwrap()[..], [GitChange::Update(_)]));
        let count = |d: &Path| walk(d);
        assert_eq!(count(&mirror), 2, "both versions mirrored");
        assert_eq!(src.collect_garbage(), 0, "written just now: kept a while (another process may need it)");
        assert_eq!(
            src.collect_garbage_older_than(std::time::Duration::ZERO),
            1,
            "the first version is no ref's any more"
        );
        assert_eq!(count(&mirror), 1);
    }

    fn walk(d: &Path) -> usize {
        std::fs::read_dir(d).unwrap().flatten().map(|e| if e.path().is_dir() { walk(&e.path()) } else { 1 }).sum()
    }
}
