//! What a search is asked and answers: the modes, the request (`POST /v1/search`), its
//! limits and checks, and the ranked results with how they were found. The searching itself is
//! the `Searcher`'s (module `retriever` for the plain modes, `routed` for the router), which
//! depend on this module, never the reverse.

use std::str::FromStr;

use ctxd_index::{language::Language, record::Hit};
use serde::{Deserialize, Deserializer, Serialize};

use crate::error::SearchError;
use crate::route::{Intent, Route};

/// Longest query accepted, in bytes.
pub const MAX_QUERY_BYTES: usize = 8192;
/// Largest `k` accepted.
pub const MAX_K: usize = 200;

/// Which signal ranks the results.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// The router picks the signals and their weights (see module `routed`).
    #[default]
    Routed,
    Hybrid,
    Vector,
    Bm25,
    /// Only the symbol table (identifiers in the query, else its words as names).
    Symbol,
}

impl Mode {
    /// Lowercase name (metric label).
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Routed => "routed",
            Mode::Hybrid => "hybrid",
            Mode::Vector => "vector",
            Mode::Bm25 => "bm25",
            Mode::Symbol => "symbol",
        }
    }
}

impl FromStr for Mode {
    type Err = SearchError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "routed" | "auto" => Ok(Mode::Routed),
            "hybrid" => Ok(Mode::Hybrid),
            "vector" => Ok(Mode::Vector),
            "bm25" | "fts" => Ok(Mode::Bm25),
            "symbol" | "symbols" => Ok(Mode::Symbol),
            other => Err(SearchError::BadMode(other.to_string())),
        }
    }
}

/// Which part of the index a query covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// Only `current_file`.
    File,
    /// `current_file`'s folder and below.
    Module,
    /// Everything but dependency folders (`node_modules`, `vendor`, …).
    Project,
    /// Only dependency folders.
    Dependencies,
}

fn default_k() -> usize {
    10
}

/// A search request (the body of `POST /v1/search`).
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchRequest {
    #[schemars(length(min = 1, max = MAX_QUERY_BYTES / 4), pattern(r"\S"))]
    pub query: String,
    #[serde(default = "default_k")]
    #[schemars(range(min = 1, max = MAX_K))]
    pub k: usize,
    #[serde(default)]
    pub mode: Mode,
    /// Query this snapshot (a version number or a tag) instead of the latest version.
    #[serde(default, deserialize_with = "version_or_tag")]
    #[schemars(with = "Option<VersionOrTag>")]
    pub as_of: Option<String>,
    /// The caller's current file (relative path): its chunks and its folder's are boosted.
    #[serde(default)]
    pub current_file: Option<String>,
    /// Only these named sources (a name, `"a,b"` or a list; see [`crate::sources`]); the
    /// wire narrows it to what the caller may read before the search runs.
    #[serde(default, deserialize_with = "crate::sources::de_sources")]
    #[schemars(with = "Option<crate::sources::SourceNames>")]
    pub source: Option<ctxd_index::scope::SourceScope>,
    /// A git source's branch, tag or commit to read (default: each git source's first ref).
    #[serde(default, rename = "ref")]
    pub git_ref: Option<String>,
    /// Only paths under this prefix.
    #[serde(default)]
    pub path_prefix: Option<String>,
    /// Only this language (`rust`, `python`, `markdown`, …; one of [`Language::ALL`], parsed
    /// here: another name is refused with the list).
    #[serde(default)]
    pub language: Option<Language>,
    /// `file`, `module` (both relative to `current_file`), `project` or `dependencies`.
    #[serde(default)]
    pub scope: Option<Scope>,
    /// At most this many chunks per file (routed mode; default 3).
    #[serde(default)]
    pub max_per_file: Option<usize>,
    /// Rescore the best candidates by late interaction (routed mode, see module `rerank`);
    /// on by default when the index has a model.
    #[serde(default)]
    pub rerank: Option<bool>,
    /// Routed mode without symbol-table and path lookups (vector + BM25 + boosts only): for
    /// latency-bound callers such as completion context. Not part of the JSON API.
    #[serde(skip)]
    pub lean: bool,
}

impl SearchRequest {
    /// A request for `query` with defaults (routed, k = 10, latest version).
    pub fn new(query: impl Into<String>) -> Self {
        Self {
            query: query.into(),
            k: default_k(),
            mode: Mode::default(),
            as_of: None,
            current_file: None,
            source: None,
            git_ref: None,
            path_prefix: None,
            language: None,
            scope: None,
            max_per_file: None,
            rerank: None,
            lean: false,
        }
    }

    /// Same request with `k` and `mode`.
    pub fn with(mut self, k: usize, mode: Mode) -> Self {
        self.k = k;
        self.mode = mode;
        self
    }

    /// Checks the query and k, once, where the request enters (the HTTP, MCP and Flight
    /// handlers, the command line, a caller that builds one): every layer below takes the
    /// [`ValidSearch`] and never checks again.
    pub fn check(self) -> Result<ValidSearch, SearchError> {
        if self.query.trim().is_empty() {
            return Err(SearchError::EmptyQuery);
        }
        if self.query.len() > MAX_QUERY_BYTES {
            return Err(SearchError::QueryTooLong { len: self.query.len(), limit: MAX_QUERY_BYTES });
        }
        if self.k == 0 || self.k > MAX_K {
            return Err(SearchError::BadK { got: self.k, max: MAX_K });
        }
        Ok(ValidSearch(self))
    }
}

/// A [`SearchRequest`] whose query and k passed [`SearchRequest::check`]: what the searcher
/// and the layers under it take. It reads as the request (`Deref`) and cannot be changed in
/// place: a caller that needs another request builds it and checks it.
#[derive(Debug, Clone)]
pub struct ValidSearch(SearchRequest);

impl std::ops::Deref for ValidSearch {
    type Target = SearchRequest;

    fn deref(&self) -> &SearchRequest {
        &self.0
    }
}

/// `as_of` as a request carries it: a version number or a tag.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum VersionOrTag {
    Version(u64),
    Tag(String),
}

/// Reads `as_of` ([`VersionOrTag`]) as text.
fn version_or_tag<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Ok(Option::<VersionOrTag>::deserialize(d)?.map(|v| match v {
        VersionOrTag::Version(n) => n.to_string(),
        VersionOrTag::Tag(s) => s,
    }))
}

/// One result: a chunk and its score, the index's [`Hit`] (serialised flat, as the wire
/// formats have always had it).
pub type SearchResult = Hit;

/// The answer: `{"results": [...]}` (plus `"version"` for an `as_of` query: the snapshot
/// searched).
#[derive(Debug, Clone, Serialize, Deserialize, Default, schemars::JsonSchema)]
pub struct SearchResponse {
    pub results: Vec<SearchResult>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<u64>,
    /// How the query was answered: a router route (`path`, `symbol`, `error`, `module`,
    /// `hybrid`) in routed mode, else the forced mode (`vector`, `bm25`, `hybrid`, `symbol`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route: Option<Route>,
    /// The intent the router read from the query (routed and symbol modes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intent: Option<Intent>,
    /// Set only on an answer the answer cache served from a superseded index version while the
    /// process was busy: how many milliseconds ago that version stopped being the latest (at
    /// most `[server] stale_answer_ms`; see [`crate::answers`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stale_ms: Option<u64>,
    /// Set only on an answer the answer cache carried to the latest index version because the
    /// commits since it was computed changed none of the files it answers with: how many
    /// milliseconds ago the version it was computed at (`index.version`) stopped being the
    /// latest. Its results are those files' chunks at the latest version; a file changed since
    /// might rank among them now, so the question is computed again in the background (see
    /// [`crate::answers`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub carried_ms: Option<u64>,
    /// The index version read, its commit time and the files changed since
    /// ([`ctxd_index::stamp`]); set by [`crate::searcher::Searcher::search`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<ctxd_index::stamp::IndexStamp>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_validated() {
        let bad = |q: &str, k| SearchRequest::new(q).with(k, Mode::Hybrid).check().unwrap_err();
        assert!(matches!(bad("  ", 10), SearchError::EmptyQuery));
        assert!(matches!(bad("x", 0), SearchError::BadK { .. }));
        assert!(matches!(bad(&"x".repeat(MAX_QUERY_BYTES + 1), 10), SearchError::QueryTooLong { .. }));
        assert!("nope".parse::<Mode>().is_err());
        assert_eq!("BM25".parse::<Mode>().unwrap(), Mode::Bm25);
    }

    #[test]
    fn answers_name_route_and_intent_as_before() {
        let resp = SearchResponse {
            results: Vec::new(),
            version: None,
            route: Some(Route::Symbol),
            intent: Some(Intent::FindDefinition),
            stale_ms: None,
            carried_ms: None,
            index: None,
        };
        let json = serde_json::to_value(&resp).unwrap();
        assert_eq!(json, serde_json::json!({"results": [], "route": "symbol", "intent": "find-definition"}));
        let back: SearchResponse = serde_json::from_value(json).unwrap();
        assert_eq!((back.route, back.intent), (Some(Route::Symbol), Some(Intent::FindDefinition)));
        for r in Route::ALL {
            assert_eq!(serde_json::to_value(r).unwrap(), r.as_str());
            assert_eq!(r.as_str().parse::<Route>().unwrap(), r);
        }
        for i in Intent::ALL {
            assert_eq!(serde_json::to_value(i).unwrap(), i.as_str());
            assert_eq!(i.as_str().to_uppercase().parse::<Intent>().unwrap(), i);
        }
        let err = "nowhere".parse::<Route>().unwrap_err().to_string();
        assert_eq!(err, "unknown route 'nowhere': use path, symbol, error, module, hybrid, vector or bm25");
        let err = "x".parse::<Intent>().unwrap_err().to_string();
        assert_eq!(
            err,
            "unknown intent 'x': use explain, implement, debug, refactor, find-definition, documentation or general"
        );
    }
}
