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
        Ok(Self { prefix, except: None, include: set(include)?, exclude: set(exclude)? })
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

    /// Whether the file at `rel` (relative to the root) is indexed.
    pub fn matches(&self, rel: &str) -> bool {
        self.include.as_ref().is_none_or(|s| s.is_match(rel)) && !self.exclude.as_ref().is_some_and(|s| s.is_match(rel))
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
        let refs = Selector::owning("lib@").except("lib@worktree/");
        assert!(refs.owns("lib@main/a.rs") && !refs.owns("lib@worktree/a.rs") && !refs.owns("web/a.rs"));
    }
}
