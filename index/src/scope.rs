//! Which named sources a read sees: a [`SourceScope`] narrows every read of an
//! [`Index`](crate::store::Index) view ([`crate::scoped`]).
//!
//! An index of named sources (`[[source]]` in the configuration) stores each file under a path
//! that starts with its source's name (`api/src/main.rs`, `manual/guide.md`), in all three tables
//! (chunks, symbols, edges). A scope is a set of source names; `Index::scoped` gives a view
//! of the same tables (`scoped.rs`) whose every read — vector and full-text search, a file's chunks, symbol
//! lookups, the code graph's edges, scans for Arrow Flight, row counts — keeps only rows whose
//! path starts with one of the names followed by `/`.
//!
//! The filter is pushed into LanceDB (`path LIKE 'name/%'`, so a search of one small source
//! among large ones still finds its `k` best rows) and checked again exactly on the rows that
//! come back ([`SourceScope::allows`]): `_` is a wildcard in `LIKE`, so `my_api/%` also
//! matches `my-api/…`, and a scope is an access boundary (per-source tokens), not a hint.
//!
//! A view without a scope reads everything, as an index of one unnamed source always does.

use crate::sql::sql_str;

/// A set of source names (sorted, without duplicates).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SourceScope {
    names: Vec<String>,
}

impl SourceScope {
    /// The scope of `names` (order and duplicates do not matter). An empty set allows nothing.
    pub fn new<S: Into<String>>(names: impl IntoIterator<Item = S>) -> Self {
        let mut names: Vec<String> = names.into_iter().map(Into::into).collect();
        names.sort();
        names.dedup();
        Self { names }
    }

    /// The names, sorted.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// Whether `path` belongs to one of the sources: `name/…`, or for a git source's view
    /// `name@ref/…` (a name without `@` takes every ref of a git source).
    pub fn allows(&self, path: &str) -> bool {
        self.names.iter().any(|n| {
            path.strip_prefix(n.as_str()).is_some_and(|rest| {
                rest.starts_with('/') || (!n.contains('@') && rest.starts_with('@') && rest.contains('/'))
            })
        })
    }

    /// Whether source `name` is in the scope.
    pub fn contains(&self, name: &str) -> bool {
        self.names.binary_search_by(|n| n.as_str().cmp(name)).is_ok()
    }

    /// The scope narrowed to the names also in `other` (a token's sources ∩ a request's).
    pub fn intersect(&self, other: &SourceScope) -> SourceScope {
        SourceScope { names: self.names.iter().filter(|n| other.contains(n)).cloned().collect() }
    }

    /// The LanceDB filter: rows whose `path` starts with a name and `/` (a superset: see the
    /// module docs; `FALSE` for an empty scope).
    pub fn filter(&self) -> String {
        if self.names.is_empty() {
            return "FALSE".into();
        }
        let mut parts: Vec<String> = Vec::new();
        for n in &self.names {
            let n = n.replace('%', "");
            parts.push(format!("path LIKE {}", sql_str(&format!("{n}/%"))));
            if !n.contains('@') {
                parts.push(format!("path LIKE {}", sql_str(&format!("{n}@%"))));
            }
        }
        format!("({})", parts.join(" OR "))
    }

    /// A short text naming the scope, for cache keys (`""` never names a scope).
    pub fn key(&self) -> String {
        self.names.join("\u{1f}")
    }
}

impl std::fmt::Display for SourceScope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.names.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scope_allows_its_sources_paths_exactly() {
        let s = SourceScope::new(["my_api", "docs", "docs"]);
        assert_eq!(s.names(), ["docs", "my_api"]);
        assert!(s.allows("my_api/src/a.rs") && s.allows("docs/x.md"));
        assert!(!s.allows("my-api/src/a.rs"), "LIKE's `_` must not leak another source");
        assert!(!s.allows("docsite/x.md") && !s.allows("docs") && !s.allows("other/docs/x.md"));
        assert_eq!(
            s.filter(),
            "(path LIKE 'docs/%' OR path LIKE 'docs@%' OR path LIKE 'my_api/%' OR path LIKE 'my_api@%')"
        );
        let git = SourceScope::new(["lib@main"]);
        assert!(git.allows("lib@main/a.py") && !git.allows("lib@v2/a.py") && !git.allows("lib/a.py"));
        assert!(s.allows("docs@v2/a.md"), "a name alone takes every ref of a git source");
        assert_eq!(git.filter(), "(path LIKE 'lib@main/%')");
        assert_eq!(SourceScope::new(Vec::<String>::new()).filter(), "FALSE");
        let t = SourceScope::new(["docs", "web"]);
        assert_eq!(s.intersect(&t).names(), ["docs"]);
        assert!(s.contains("docs") && !s.contains("web"));
    }
}
