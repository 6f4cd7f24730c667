//! Which files of a source are indexed, and under which path: a source's `include`/`exclude`
//! globs and its name.
//!
//! A [`Selector`] is applied by the folder scan, the event watcher ([`crate::watch`]) and the
//! object listing ([`crate::object`]) to a path relative to the source's root: a file is taken
//! when it matches an `include` glob (or there are none) and no `exclude` glob. Globs use
//! `globset` syntax (`src/**/*.rs`, `*.md` — `*` does not cross `/`, `**` does) and match the
//! whole relative path. A named source's files are then stored under `<name>/<path>`
//! ([`Selector::qualify`]), so two sources never share a path.

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};

use crate::error::StageError;

/// A source's include/exclude globs and the prefix of its stored paths.
#[derive(Debug, Clone, Default)]
pub struct Selector {
    prefix: String,
    /// Stored paths under `prefix` that another origin of the source owns.
    except: Option<String>,
    include: Option<GlobSet>,
    exclude: Option<GlobSet>,
    /// `(I, N)`: only the files of shard `I` of `N` (a sharded build's shard).
    share: Option<(u32, u32)>,
}

fn set(globs: &[String]) -> Result<Option<GlobSet>, StageError> {
    if globs.is_empty() {
        return Ok(None);
    }
    let mut b = GlobSetBuilder::new();
    for g in globs {
        let glob = GlobBuilder::new(g).literal_separator(true).build().map_err(|e| StageError::Config {
            message: format!("'{g}' is not a glob ({e}); fix the source's include/exclude"),
        })?;
        b.add(glob);
    }
    b.build().map(Some).map_err(|e| StageError::Config { message: format!("include/exclude globs: {e}") })
}

impl Selector {
    /// Files of a source named `name` (empty: unnamed, paths kept as they are), taken by
    /// `include` (empty: all) minus `exclude`.
    pub fn new(name: &str, include: &[String], exclude: &[String]) -> Result<Self, StageError> {
        let prefix = if name.is_empty() { String::new() } else { format!("{name}/") };
        Ok(Self { prefix, except: None, include: set(include)?, exclude: set(exclude)?, share: None })
    }

    /// A selector that only tells which stored paths are a source's: those starting with
    /// `prefix` (a git source owns `<name>@…`).
    pub fn owning(prefix: &str) -> Self {
        Self { prefix: prefix.to_string(), ..Self::default() }
    }

    /// The same selector, but stored paths under `prefix` are not its own (a git source's refs
    /// leave `<name>@worktree/` to the work tree's scan).
    pub fn except(mut self, prefix: &str) -> Self {
        self.except = Some(prefix.to_string());
        self
    }

    /// The same selector taking only the files of shard `shard` of `of`: those whose stored path
    /// hashes to it (blake3, so every shard of a build agrees without talking to the others).
    pub fn with_share(mut self, shard: u32, of: u32) -> Self {
        self.share = Some((shard, of));
        self
    }

    /// Whether the file at `rel` is in this selector's share (always, without one).
    pub fn in_share(&self, rel: &str) -> bool {
        let Some((shard, of)) = self.share else { return true };
        let hash = blake3::hash(self.qualify(rel).as_bytes());
        let first = u64::from_le_bytes(hash.as_bytes()[..8].try_into().expect("8 bytes"));
        first % u64::from(of) == u64::from(shard)
    }

    /// Whether the file at `rel` (relative to the root) is indexed (here: in the share too).
    pub fn matches(&self, rel: &str) -> bool {
        self.include.as_ref().is_none_or(|s| s.is_match(rel))
            && !self.exclude.as_ref().is_some_and(|s| s.is_match(rel))
            && self.in_share(rel)
    }

    /// The stored path of `rel`: `<name>/<rel>` for a named source.
    pub fn qualify(&self, rel: &str) -> String {
        format!("{}{rel}", self.prefix)
    }

    /// The prefix of every stored path of the source (`<name>/`, or empty when unnamed).
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// Whether a stored path belongs to this source.
    pub fn owns(&self, stored: &str) -> bool {
        stored.starts_with(&self.prefix) && !self.except.as_ref().is_some_and(|e| stored.starts_with(e.as_str()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn include_then_exclude_then_the_name_in_front() {
        let s = Selector::new("api", &["src/**".into(), "*.md".into()], &["**/fixtures/**".into()]).unwrap();
        assert!(s.matches("src/a/b.rs") && s.matches("README.md"));
        assert!(!s.matches("docs/guide.md"), "`*` does not cross `/`");
        assert!(!s.matches("src/fixtures/x.rs") && !s.matches("build.rs"));
        assert_eq!(s.qualify("src/a.rs"), "api/src/a.rs");
        assert!(s.owns("api/src/a.rs") && !s.owns("apix/a.rs") && !s.owns("web/a.rs"));
        let all = Selector::new("", &[], &[]).unwrap();
        assert!(all.matches("anything/at/all.txt"));
        assert_eq!(all.qualify("a.rs"), "a.rs");
        assert!(Selector::new("x", &["[".into()], &[]).is_err());
        // Shards split the files, each file to exactly one, about evenly.
        let files: Vec<String> = (0..400).map(|i| format!("src/m{i}.py")).collect();
        let shares: Vec<Selector> = (0..4).map(|i| s.clone().with_share(i, 4)).collect();
        let mut per = [0; 4];
        for f in &files {
            let owners: Vec<usize> = (0..4).filter(|i| shares[*i].in_share(f)).collect();
            assert_eq!(owners.len(), 1, "{f}: {owners:?}");
            per[owners[0]] += 1;
        }
        assert!(per.iter().all(|n| (70..=130).contains(n)), "{per:?}");
        assert!(!shares[0].matches("build.rs"), "the globs still apply");
        let refs = Selector::owning("lib@").except("lib@worktree/");
        assert!(refs.owns("lib@main/a.rs") && !refs.owns("lib@worktree/a.rs") && !refs.owns("web/a.rs"));
    }
}
