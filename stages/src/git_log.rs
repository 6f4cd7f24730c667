//! A repository's recent history, read with gitoxide: which files each of the last commits of a
//! ref changed, when, by whom and why (the first line of the message).
//!
//! The walk follows first parents from the tip (the mainline: a merge counts as one commit that
//! changed what it brought in) for at most `max_commits`, and diffs each commit's tree against
//! its parent's by comparing subtree ids, so unchanged folders are never read; a folder's
//! entries are matched by name through a map (a folder of 6,000 files is one pass, not 6,000
//! scans of it). A diff is remembered by the two trees it compares ([`Diffs`]), so a ref that
//! moved by one commit costs one diff, not `max_commits` (a writer whose repository gets a
//! commit every 10 s spent half its CPU re-diffing the same 300 commits). A shallow
//! repository's walk stops at the boundary; a damaged commit ends it early with a warning.
//!
//! Two kinds of source read it: a git source, for each ref it indexes, and a folder source that
//! is a git work tree (a clone, or a linked worktree), for its checked-out `HEAD`; the folder's
//! place in the repository (`root` may be a subfolder) is stripped from the paths. The index
//! keeps the result (`ctxd_index::history`): recency and co-change for ranking, `ctxd history`.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::error::Cause;
use crate::error::StageError;

/// Commits read per ref by default.
pub const DEFAULT_COMMITS: usize = 300;
/// A commit that changes more files than this (a mass reformat, a vendored import) is listed,
/// but its files are not recorded: it says nothing about what belongs together.
pub const MAX_FILES_PER_COMMIT: usize = 100;

/// One commit and the files it changed (repository paths, or relative to the source's folder).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitFiles {
    pub id: String,
    /// Commit time, seconds since the Unix epoch.
    pub time: i64,
    pub author: String,
    /// The first line of the message.
    pub summary: String,
    pub files: Vec<String>,
}

/// Diffs [`Diffs`] keeps before it starts over.
const DIFFS_KEPT: usize = 20_000;

/// The pair of trees a commit's diff compares: its own, and its first parent's (none for a root
/// commit, or where a shallow clone's history ends — the same commit then lists every file).
type TreePair = (Option<gix::ObjectId>, Option<gix::ObjectId>);

/// The files each commit changed (repository paths), by the pair of trees its diff compares:
/// trees are named by their content, so one memo serves every repository and ref a process
/// reads. A diff that failed is not kept (it is tried again, and warned of, on the next read).
/// Bounded: past [`DIFFS_KEPT`] diffs it starts over.
#[derive(Debug, Default)]
pub struct Diffs(Mutex<HashMap<TreePair, Vec<String>>>);

impl Diffs {
    #[cfg(test)]
    fn len(&self) -> usize {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    fn get(&self, trees: &TreePair) -> Option<Vec<String>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).get(trees).cloned()
    }

    fn put(&self, trees: TreePair, files: Vec<String>) {
        let mut memo = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if memo.len() >= DIFFS_KEPT {
            memo.clear();
        }
        memo.insert(trees, files);
    }
}

/// The last `max_commits` first-parent commits from `tip` (newest first) of the repository at
/// `repo_path`, with the files each changed under `prefix` (a folder of the repository, `""`
/// for all), made relative to it. Diffs already in `diffs` are not computed again.
pub fn read(
    repo_path: &Path,
    tip: &str,
    prefix: &str,
    max_commits: usize,
    diffs: &Diffs,
) -> Result<Vec<CommitFiles>, StageError> {
    let repo = gix::open(repo_path).map_err(|e| err(repo_path, "not a readable git repository".into(), e.into()))?;
    let id =
        repo.rev_parse_single(tip).map_err(|e| err(repo_path, format!("'{tip}' names no commit"), e.into()))?.detach();
    let walk = repo
        .rev_walk([id])
        .first_parent_only()
        .all()
        .map_err(|e| err(repo_path, format!("walking the history of {tip}"), e.into()))?;
    let mut out = Vec::new();
    for info in walk.take(max_commits) {
        let commit = match info.and_then(|i| i.object()) {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!("{}: history of {tip} ends early: {e}", repo_path.display());
                break;
            }
        };
        let trees = tree_pair(&repo, &commit);
        let files = match diffs.get(&trees) {
            Some(files) => files,
            None => {
                let mut files = Vec::new();
                if let (Some(tree), parent) = trees {
                    match changed(&repo, parent, Some(tree), "", &mut files) {
                        Ok(()) => diffs.put(trees, files.clone()),
                        Err(e) => {
                            tracing::warn!(
                                "{}: commit {}: {e}; its files are not recorded",
                                repo_path.display(),
                                commit.id
                            );
                            files.clear();
                        }
                    }
                }
                files
            }
        };
        let files: Vec<String> = files
            .into_iter()
            .filter_map(|f| if prefix.is_empty() { Some(f) } else { f.strip_prefix(prefix).map(str::to_string) })
            .collect();
        let message = commit.message_raw_sloppy().to_string();
        out.push(CommitFiles {
            id: commit.id.to_string(),
            time: commit.time().map(|t| t.seconds).unwrap_or(0),
            author: commit.author().map(|a| a.name.to_string()).unwrap_or_default(),
            summary: message.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("").chars().take(200).collect(),
            files: if files.len() > MAX_FILES_PER_COMMIT { Vec::new() } else { files },
        });
    }
    Ok(out)
}

/// `commit`'s tree and its first parent's, when the repository holds them.
fn tree_pair(repo: &gix::Repository, commit: &gix::Commit<'_>) -> TreePair {
    let tree = commit.tree_id().ok().map(|t| t.detach());
    let parent = commit
        .parent_ids()
        .next()
        .and_then(|p| repo.find_commit(p).ok())
        .and_then(|p| p.tree_id().ok())
        .map(|t| t.detach());
    (tree, parent)
}

/// The git work tree `folder` belongs to, if any: `(repository, folder's path in it with a
/// trailing '/', or "" at the top)`.
pub fn work_tree_of(folder: &Path) -> Option<(PathBuf, String)> {
    let repo = gix::discover(folder).ok()?;
    let top = repo.workdir()?.canonicalize().ok()?;
    let folder = folder.canonicalize().ok()?;
    let rel = folder.strip_prefix(&top).ok()?.to_string_lossy().into_owned();
    Some((top, if rel.is_empty() { rel } else { format!("{rel}/") }))
}

/// The commit `HEAD` of the repository (or work tree) at `repo` points at.
pub fn head_commit(repo: &Path) -> Option<String> {
    let repo = gix::open(repo).ok()?;
    Some(repo.head_id().ok()?.detach().to_string())
}

/// Appends to `out` the blob paths (under `base`) that differ between trees `old` and `new`.
fn changed(
    repo: &gix::Repository,
    old: Option<gix::ObjectId>,
    new: Option<gix::ObjectId>,
    base: &str,
    out: &mut Vec<String>,
) -> Result<(), Cause> {
    if old == new {
        return Ok(());
    }
    let entries = |id: Option<gix::ObjectId>| -> Result<Vec<(String, bool, gix::ObjectId)>, Cause> {
        let Some(id) = id else { return Ok(Vec::new()) };
        let tree = repo.find_tree(id)?;
        let decoded = tree.decode()?;
        Ok(decoded
            .entries
            .iter()
            .filter(|e| e.mode.is_tree() || e.mode.is_blob())
            .map(|e| (e.filename.to_string(), e.mode.is_tree(), e.oid.to_owned()))
            .collect())
    };
    let (a, b) = (entries(old)?, entries(new)?);
    let before: HashMap<(&str, bool), gix::ObjectId> = a.iter().map(|(n, t, id)| ((n.as_str(), *t), *id)).collect();
    let after: HashSet<(&str, bool)> = b.iter().map(|(n, t, _)| (n.as_str(), *t)).collect();
    for (name, tree, id) in &b {
        let before = before.get(&(name.as_str(), *tree)).copied();
        if before == Some(*id) {
            continue;
        }
        let path = format!("{base}{name}");
        if *tree {
            changed(repo, before, Some(*id), &format!("{path}/"), out)?;
        } else {
            out.push(path);
        }
    }
    for (name, tree, id) in &a {
        if !after.contains(&(name.as_str(), *tree)) {
            let path = format!("{base}{name}");
            if *tree {
                changed(repo, Some(*id), None, &format!("{path}/"), out)?;
            } else {
                out.push(path);
            }
        }
    }
    Ok(())
}

fn err(path: &Path, what: String, source: Cause) -> StageError {
    StageError::Git { path: path.to_path_buf(), what, source }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn git(dir: &Path, args: &[&str]) {
        let ok = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(["-c", "user.name=T", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"])
            .args(args)
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "git {args:?}");
    }

    #[test]
    fn commits_newest_first_with_the_files_each_changed() {
        if Command::new("git").arg("--version").output().is_err() {
            eprintln!("skipped: no git command to build the test repository with");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path();
        git(r, &["init", "-q", "-b", "main"]);
        std::fs::create_dir_all(r.join("pkg/sub")).unwrap();
        std::fs::write(r.join("pkg/a.py"), "a = 1\n").unwrap();
        std::fs::write(r.join("pkg/sub/b.py"), "b = 1\n").unwrap();
        std::fs::write(r.join("top.md"), "# top\n").unwrap();
        git(r, &["add", "-A"]);
        git(r, &["commit", "-q", "-m", "first\n\nbody"]);
        std::fs::write(r.join("pkg/sub/b.py"), "b = 2\n").unwrap();
        std::fs::write(r.join("pkg/a.py"), "a = 2\n").unwrap();
        git(r, &["commit", "-q", "-am", "Fix b and a"]);
        std::fs::remove_file(r.join("top.md")).unwrap();
        git(r, &["commit", "-q", "-am", "drop top"]);

        let diffs = Diffs::default();
        let all = read(r, "HEAD", "", 10, &diffs).unwrap();
        assert_eq!(diffs.len(), 3, "each commit's diff remembered");
        assert_eq!(read(r, "HEAD", "", 10, &diffs).unwrap(), all, "read again from the memo: the same");
        let summaries: Vec<&str> = all.iter().map(|c| c.summary.as_str()).collect();
        assert_eq!(summaries, ["drop top", "Fix b and a", "first"]);
        assert_eq!(all[0].files, ["top.md"]);
        let mut fixed = all[1].files.clone();
        fixed.sort();
        assert_eq!(fixed, ["pkg/a.py", "pkg/sub/b.py"]);
        assert_eq!(all[2].files.len(), 3, "the root commit adds every file");
        assert_eq!(all[1].author, "T");
        assert!(all[0].time >= all[2].time && all[2].time > 0);
        assert_eq!(read(r, "HEAD", "", 2, &diffs).unwrap().len(), 2);
        let sub = read(r, "HEAD", "pkg/", 10, &diffs).unwrap();
        assert_eq!(sub[1].files.iter().filter(|f| *f == "sub/b.py").count(), 1);
        assert!(sub[0].files.is_empty(), "top.md is outside pkg/");
        assert_eq!(work_tree_of(&r.join("pkg")).unwrap().1, "pkg/");
        assert!(read(r, "no-such-ref", "", 5, &diffs).unwrap_err().to_string().contains("no-such-ref"));
    }
}
