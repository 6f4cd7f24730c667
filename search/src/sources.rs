//! `source` on a request: which named sources to read, and the access check that narrows it.
//!
//! Every query surface (search, context, completion, locate, symbols, the graph tools; HTTP,
//! MCP, Flight, the CLI) takes `source`: one name (`"api"`), a comma-separated list
//! (`"api,docs"`) or a JSON list (`["api", "docs"]`); absent, every source the caller may read.
//! The wire resolves it once per request with [`Access::resolve`] — against the sources the
//! index has and the sources the caller's token may read — and the request carries the result;
//! the [`Retriever`](crate::Retriever) then reads through a view of the index narrowed to it
//! (`ctxd_index::scope`), so no signal, lookup or graph walk can see another source's rows.

use ctxd_index::{record::WORKTREE, scope::SourceScope};
use serde::{Deserialize, Deserializer};

use crate::error::SearchError;

/// `source` as a request carries it: a name, comma-separated names (`"api, docs"`), or a list
/// of names. [`de_sources`] reads it; its JSON Schema is the one `GET /openapi.json` gives.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum SourceNames {
    One(String),
    Many(Vec<String>),
}

/// Deserializes `source` ([`SourceNames`]) into a scope.
pub fn de_sources<'de, D: Deserializer<'de>>(d: D) -> Result<Option<SourceScope>, D::Error> {
    Ok(match Option::<SourceNames>::deserialize(d)? {
        None => None,
        Some(SourceNames::One(s)) => parse_list(&s),
        Some(SourceNames::Many(v)) => parse_list(&v.join(",")),
    })
}

/// `"api, docs"` → the scope of both; `None` for an empty text.
pub fn parse_list(text: &str) -> Option<SourceScope> {
    let names: Vec<&str> = text.split(',').map(str::trim).filter(|s| !s.is_empty()).collect();
    (!names.is_empty()).then(|| SourceScope::new(names))
}

/// `source` of a tool's JSON arguments (MCP, the graph tools): absent or null → `None`.
pub fn from_args(args: &serde_json::Value) -> Result<Option<SourceScope>, SearchError> {
    match args.get("source") {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(v) => de_sources(v.clone()).map_err(|_| {
            SearchError::BadSource("argument 'source' must be a source name, \"a,b\" or a list of names".into())
        }),
    }
}

/// `ref` of a tool's JSON arguments: absent or null → `None`.
pub fn ref_from_args(args: &serde_json::Value) -> Result<Option<String>, SearchError> {
    match args.get("ref") {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(serde_json::Value::String(r)) if !r.trim().is_empty() => Ok(Some(r.trim().to_string())),
        Some(_) => Err(SearchError::BadSource("argument 'ref' must be a branch, tag or commit name".into())),
    }
}

/// What a server knows about sources: the configured names (empty for an index of one
/// unnamed source). Which sources a caller may read comes from its token (serve's `auth`).
#[derive(Debug, Clone, Default)]
pub struct Access {
    /// The configured source names.
    pub known: Vec<String>,
    /// `(name, default ref)` of the git sources among them.
    pub git: Vec<(String, String)>,
    /// The git sources that watch their clone's work tree (ref [`WORKTREE`]).
    pub worktrees: Vec<String>,
}

/// The [`Access`] a server answers with now: one value shared by its HTTP, MCP and Flight
/// surfaces, replaced whole when the daemon reloads its sources (`SIGHUP`).
#[derive(Debug, Clone, Default)]
pub struct LiveAccess(std::sync::Arc<std::sync::RwLock<std::sync::Arc<Access>>>);

impl LiveAccess {
    pub fn new(access: Access) -> Self {
        Self(std::sync::Arc::new(std::sync::RwLock::new(std::sync::Arc::new(access))))
    }

    /// The access in force now.
    pub fn get(&self) -> std::sync::Arc<Access> {
        self.0.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Replaces it (for every clone).
    pub fn set(&self, access: Access) {
        *self.0.write().unwrap_or_else(|p| p.into_inner()) = std::sync::Arc::new(access);
    }
}

impl Access {
    /// The scope a request reads: `requested` (checked against the known names) at `git_ref`
    /// (git sources only; each git source's default ref without one), narrowed to what
    /// `allowed` (the caller's token) may read. `Ok(None)`: every source.
    pub fn resolve(
        &self,
        requested: Option<&SourceScope>,
        git_ref: Option<&str>,
        allowed: Option<&SourceScope>,
    ) -> Result<Option<SourceScope>, SearchError> {
        if let Some(req) = requested {
            if self.known.is_empty() {
                return Err(SearchError::BadSource(format!(
                    "source {req} was asked for, but this index has no named sources (one [source] without a name); \
                     drop `source`"
                )));
            }
            if let Some(unknown) = req.names().iter().find(|n| !self.known.contains(n)) {
                return Err(SearchError::BadSource(format!(
                    "unknown source '{unknown}'; this index has: {}",
                    self.known.join(", ")
                )));
            }
            if let Some(a) = allowed {
                if let Some(denied) = req.names().iter().find(|n| !a.contains(n)) {
                    return Err(SearchError::Forbidden(format!(
                        "this token may not read source '{denied}' (it may read: {a})"
                    )));
                }
            }
        }
        let is_git = |n: &str| self.git.iter().find(|(g, _)| g == n).map(|(_, d)| d.as_str());
        let on_disk = git_ref == Some(WORKTREE);
        if self.git.is_empty() {
            if git_ref.is_some() && !on_disk {
                return Err(SearchError::BadSource(
                    "`ref` reads a git source at a branch, tag or commit, but this index has no git source".into(),
                ));
            }
            return Ok(requested.or(allowed).cloned());
        }
        // Sources as named, then each git source at its ref (a view of its own: `name@ref`).
        let names: Vec<String> = match (requested, allowed) {
            (Some(r), _) => r.names().to_vec(),
            (None, Some(a)) => a.names().to_vec(),
            (None, None) => self.known.clone(),
        };
        let folder = requested.and_then(|q| q.names().iter().find(|n| is_git(n).is_none()));
        if let (Some(r), Some(folder), false) = (git_ref, folder, on_disk) {
            return Err(SearchError::BadSource(format!("source '{folder}' is not a git source: it has no ref '{r}'")));
        }
        let watched = |n: &String| self.worktrees.contains(n);
        if let (true, Some(q)) = (on_disk, requested) {
            if let Some(n) = q.names().iter().find(|n| is_git(n).is_some() && !watched(n)) {
                return Err(SearchError::BadSource(format!(
                    "git source '{n}' does not watch a work tree: add \"{WORKTREE}\" to its refs (its `git` must be a \
                     clone), or ask for one of its refs"
                )));
            }
        }
        let mut out = Vec::new();
        for n in names {
            match (is_git(&n), git_ref) {
                // A folder is read as it is on disk; a git source only if it watches its work tree.
                (Some(_), Some(WORKTREE)) if !watched(&n) => {}
                (Some(default), r) => out.push(format!("{n}@{}", r.unwrap_or(default).replace('/', "~"))),
                (None, Some(WORKTREE)) | (None, None) => out.push(n),
                (None, Some(_)) => {}
            }
        }
        Ok(Some(SourceScope::new(out)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    struct R {
        #[serde(default, deserialize_with = "de_sources")]
        source: Option<SourceScope>,
    }

    #[test]
    fn one_name_a_list_or_commas() {
        let one: R = serde_json::from_str(r#"{"source":"api"}"#).unwrap();
        assert_eq!(one.source.unwrap().names(), ["api"]);
        let many: R = serde_json::from_str(r#"{"source":["web","api"]}"#).unwrap();
        assert_eq!(many.source.unwrap().names(), ["api", "web"]);
        let commas: R = serde_json::from_str(r#"{"source":"api, web,"}"#).unwrap();
        assert_eq!(commas.source.unwrap().names(), ["api", "web"]);
        let none: R = serde_json::from_str(r#"{}"#).unwrap();
        assert!(none.source.is_none());
        assert!(serde_json::from_str::<R>(r#"{"source":5}"#).is_err());
    }

    #[test]
    fn requests_are_checked_against_known_sources_and_narrowed_by_tokens() {
        let access = Access { known: vec!["api".into(), "docs".into(), "web".into()], ..Access::default() };
        let s = |t: &str| parse_list(t).unwrap();
        assert_eq!(access.resolve(None, None, None).unwrap(), None);
        assert_eq!(access.resolve(Some(&s("api")), None, None).unwrap(), Some(s("api")));
        assert!(matches!(access.resolve(Some(&s("nope")), None, None), Err(SearchError::BadSource(_))));
        let token = s("api,docs");
        assert_eq!(access.resolve(None, None, Some(&token)).unwrap(), Some(token.clone()));
        assert_eq!(access.resolve(Some(&s("docs")), None, Some(&token)).unwrap(), Some(s("docs")));
        let denied = access.resolve(Some(&s("web")), None, Some(&token)).unwrap_err();
        assert!(matches!(denied, SearchError::Forbidden(_)) && denied.to_string().contains("'web'"), "{denied}");
        let unnamed = Access::default();
        assert!(matches!(unnamed.resolve(Some(&s("api")), None, None), Err(SearchError::BadSource(_))));
        assert!(matches!(access.resolve(None, Some("main"), None), Err(SearchError::BadSource(_))));
    }

    #[test]
    fn git_sources_are_read_at_their_default_ref_or_the_one_asked_for() {
        let git = vec![("lib".to_string(), "main".to_string()), ("app".to_string(), "worktree".to_string())];
        let access =
            Access { known: vec!["docs".into(), "lib".into(), "app".into()], git, worktrees: vec!["app".into()] };
        let s = |t: &str| parse_list(t).unwrap();
        assert_eq!(access.resolve(None, None, None).unwrap(), Some(s("app@worktree,docs,lib@main")));
        assert_eq!(access.resolve(Some(&s("lib")), Some("release/1.0"), None).unwrap(), Some(s("lib@release~1.0")));
        assert_eq!(access.resolve(None, Some("v2"), None).unwrap(), Some(s("app@v2,lib@v2")), "folders have no refs");
        // On disk: folders as they are, git sources through their work tree (if they watch one).
        assert_eq!(access.resolve(None, Some("worktree"), None).unwrap(), Some(s("app@worktree,docs")));
        assert_eq!(access.resolve(Some(&s("docs")), Some("worktree"), None).unwrap(), Some(s("docs")));
        let unwatched = access.resolve(Some(&s("lib")), Some("worktree"), None).unwrap_err();
        assert!(unwatched.to_string().contains("does not watch a work tree"), "{unwatched}");
        assert_eq!(Access::default().resolve(None, Some("worktree"), None).unwrap(), None, "one folder: on disk");
        assert!(matches!(access.resolve(Some(&s("docs")), Some("v2"), None), Err(SearchError::BadSource(_))));
        assert_eq!(access.resolve(None, None, Some(&s("lib"))).unwrap(), Some(s("lib@main")));
        assert!(matches!(access.resolve(Some(&s("docs")), None, Some(&s("lib"))), Err(SearchError::Forbidden(_))));
    }
}
