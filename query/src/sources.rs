//! `source` on a request: which named sources to read, and the access check that narrows it.
//!
//! Every query surface (search, context, completion, locate, symbols, the graph tools; HTTP,
//! MCP, Flight, the CLI) takes `source`: one name (`"api"`), a comma-separated list
//! (`"api,docs"`) or a JSON list (`["api", "docs"]`); absent, every source the caller may read.
//! The wire resolves it once per request with [`Access::resolve`] — against the sources the
//! index has and the sources the caller's token may read — and the request carries the result;
//! the [`Retriever`](crate::Retriever) then reads through a view of the index narrowed to it
//! (`ctxd_index::scope`), so no signal, lookup or graph walk can see another source's rows.

use ctxd_index::SourceScope;
use serde::{Deserialize, Deserializer};

use crate::error::SearchError;

/// Deserializes `source` (a name, comma-separated names, or a list of names) into a scope.
pub fn de_sources<'de, D: Deserializer<'de>>(d: D) -> Result<Option<SourceScope>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
    }
    Ok(match Option::<OneOrMany>::deserialize(d)? {
        None => None,
        Some(OneOrMany::One(s)) => parse_list(&s),
        Some(OneOrMany::Many(v)) => parse_list(&v.join(",")),
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

/// What a server knows about sources: the configured names (empty for an index of one
/// unnamed source). Which sources a caller may read comes from its token (serve's `auth`).
#[derive(Debug, Clone, Default)]
pub struct Access {
    /// The configured source names.
    pub known: Vec<String>,
}

impl Access {
    /// The scope a request reads: `requested` (checked against the known names) narrowed to
    /// what `allowed` (the caller's token) may read. `Ok(None)`: every source.
    pub fn resolve(
        &self,
        requested: Option<&SourceScope>,
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
        }
        match (requested, allowed) {
            (None, None) => Ok(None),
            (Some(r), None) => Ok(Some(r.clone())),
            (None, Some(a)) => Ok(Some(a.clone())),
            (Some(r), Some(a)) => {
                if let Some(denied) = r.names().iter().find(|n| !a.contains(n)) {
                    return Err(SearchError::Forbidden(format!(
                        "this token may not read source '{denied}' (it may read: {a})"
                    )));
                }
                Ok(Some(r.clone()))
            }
        }
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
        let access = Access { known: vec!["api".into(), "docs".into(), "web".into()] };
        let s = |t: &str| parse_list(t).unwrap();
        assert_eq!(access.resolve(None, None).unwrap(), None);
        assert_eq!(access.resolve(Some(&s("api")), None).unwrap(), Some(s("api")));
        assert!(matches!(access.resolve(Some(&s("nope")), None), Err(SearchError::BadSource(_))));
        let token = s("api,docs");
        assert_eq!(access.resolve(None, Some(&token)).unwrap(), Some(token.clone()));
        assert_eq!(access.resolve(Some(&s("docs")), Some(&token)).unwrap(), Some(s("docs")));
        let denied = access.resolve(Some(&s("web")), Some(&token)).unwrap_err();
        assert!(matches!(denied, SearchError::Forbidden(_)) && denied.to_string().contains("'web'"), "{denied}");
        let unnamed = Access::default();
        assert!(matches!(unnamed.resolve(Some(&s("api")), None), Err(SearchError::BadSource(_))));
    }
}
