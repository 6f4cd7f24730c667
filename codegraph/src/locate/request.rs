//! What a localization is asked and answers: [`LocateRequest`] (the JSON of `/v1/locate`, the
//! MCP `locate` arguments, the CLI's flags) with its limits, and [`LocateAnswer`] with one
//! [`LocatedFile`] per file; the work is [`super::Locator`]'s.

use ctxd_index::scope::SourceScope;
use ctxd_search::error::SearchError;
use serde::{Deserialize, Serialize};

use super::signals::Signal;
use crate::graph::Place;
use ctxd_choice::RankerName;

/// Largest text `locate` accepts.
pub const MAX_LOCATE_BYTES: usize = 1 << 20;
/// Most files an answer lists.
pub const MAX_LOCATE_K: usize = 100;
/// Most candidates whose features an answer lists.
pub const MAX_LOCATE_FEATURES: usize = 1000;

/// A localization request (the JSON of `/v1/locate`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LocateRequest {
    /// The issue, trace or task text.
    pub text: String,
    #[serde(default = "default_k")]
    pub k: usize,
    /// Signals to leave out (see [`Signal`]).
    #[serde(default)]
    pub without: Vec<String>,
    /// Definitions listed per file.
    #[serde(default = "default_defs")]
    pub definitions: usize,
    /// Locate in this snapshot (a version number or a tag): its chunks, symbols and graph.
    #[serde(default)]
    pub as_of: Option<String>,
    /// Only these named sources (see [`ctxd_search::sources`]).
    #[serde(default, deserialize_with = "ctxd_search::sources::de_sources")]
    pub source: Option<SourceScope>,
    /// A git source's branch, tag or commit to read (default: each git source's first ref).
    #[serde(default, rename = "ref")]
    pub git_ref: Option<String>,
    /// The feature rows of this many best candidates, in the answer's `features` (what the
    /// ranking model is fitted on; 0 = none).
    #[serde(default)]
    pub features: usize,
    /// The ranking model (`fitted`, `hand`); default: the daemon's `[locate] model`.
    #[serde(default)]
    pub model: Option<RankerName>,
    /// Leave the index's query adapter out (`ctxd adapt`): the vector signal reads the base
    /// model's query vector.
    #[serde(default)]
    pub no_adapter: bool,
}

fn default_k() -> usize {
    10
}
fn default_defs() -> usize {
    3
}

impl LocateRequest {
    pub fn new(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            k: default_k(),
            without: Vec::new(),
            definitions: default_defs(),
            as_of: None,
            source: None,
            git_ref: None,
            features: 0,
            model: None,
            no_adapter: false,
        }
    }

    /// Checks the text, k and features and parses `without`, once, where the request enters
    /// (HTTP, MCP, the command line, a caller that builds one): the locator takes the
    /// [`ValidLocate`] and never checks again.
    pub fn check(self) -> Result<ValidLocate, SearchError> {
        if self.text.trim().is_empty() {
            return Err(SearchError::EmptyQuery);
        }
        if self.text.len() > MAX_LOCATE_BYTES {
            return Err(SearchError::QueryTooLong { len: self.text.len(), limit: MAX_LOCATE_BYTES });
        }
        if self.text.contains('\0') {
            return Err(SearchError::BadRequest(
                "the text holds NUL bytes (binary data?): send the issue text, a trace or a diff as UTF-8 text".into(),
            ));
        }
        if self.k == 0 || self.k > MAX_LOCATE_K {
            return Err(SearchError::BadK { got: self.k, max: MAX_LOCATE_K });
        }
        if self.features > MAX_LOCATE_FEATURES {
            return Err(SearchError::BadRequest(format!(
                "features is {}: at most {MAX_LOCATE_FEATURES} candidates' features are listed",
                self.features
            )));
        }
        let without = self.without.iter().map(|s| s.parse()).collect::<Result<_, _>>()?;
        Ok(ValidLocate { req: self, without })
    }
}

/// A [`LocateRequest`] that passed [`LocateRequest::check`], with its `without` parsed into
/// signals. It reads as the request (`Deref`) and cannot be changed in place.
#[derive(Debug, Clone)]
pub struct ValidLocate {
    req: LocateRequest,
    without: Vec<Signal>,
}

impl ValidLocate {
    /// The signals the request switches off.
    pub fn without(&self) -> &[Signal] {
        &self.without
    }
}

impl std::ops::Deref for ValidLocate {
    type Target = LocateRequest;

    fn deref(&self) -> &LocateRequest {
        &self.req
    }
}

/// One file of the answer.
#[derive(Debug, Clone, Serialize)]
pub struct LocatedFile {
    pub path: String,
    pub score: f64,
    /// The signals that put it there, strongest first (`signal: reason`).
    pub why: Vec<String>,
    /// The definitions in it most likely to change.
    pub definitions: Vec<Place>,
}

/// The answer.
#[derive(Debug, Clone, Serialize)]
pub struct LocateAnswer {
    pub files: Vec<LocatedFile>,
    /// The best candidates' feature rows, when asked for (`features`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub features: Vec<super::features::CandidateFeatures>,
    /// Signals that contributed (after `without`).
    pub signals: Vec<Signal>,
    /// The ranking model that scored the files.
    pub model: RankerName,
    /// Whether the vector signal's query went through the index's query adapter (fitted on its
    /// git history: `ctxd adapt`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub adapted: bool,
    /// Where the time went.
    pub timings: LocateTimings,
    /// Milliseconds spent.
    pub took_ms: u64,
    /// The index version read, its commit time and the files changed since
    /// ([`ctxd_index::stamp`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub index: Option<ctxd_index::stamp::IndexStamp>,
}

/// Milliseconds per step of a localization (the answer's `timings`): what dominates.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct LocateTimings {
    /// Opening the version and its code graph (built on a version's first request, then cached).
    pub graph_ms: u64,
    /// Embedding the text for the vector signal.
    pub embed_ms: u64,
    /// BM25 and vector retrieval, side by side.
    pub retrieve_ms: u64,
    /// One BM25 search per error message of the text.
    pub messages_ms: u64,
    /// Reading the git history (cached per version).
    pub history_ms: u64,
    /// Signals, feature rows, the model and the graph walk.
    pub rank_ms: u64,
}

impl LocateTimings {
    /// `graph 12 ms, embedding 30 ms, …; most: embedding`.
    pub fn describe(&self) -> String {
        let parts = [
            ("graph", self.graph_ms),
            ("embedding", self.embed_ms),
            ("retrieval", self.retrieve_ms),
            ("messages", self.messages_ms),
            ("history", self.history_ms),
            ("ranking", self.rank_ms),
        ];
        let most = parts.iter().max_by_key(|(_, ms)| *ms).map_or("-", |(n, _)| *n);
        let list: Vec<String> = parts.iter().map(|(n, ms)| format!("{n} {ms} ms")).collect();
        format!("{}; most: {most}", list.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_is_checked_once_into_its_valid_form() {
        let mut req = LocateRequest::new("the reporter drops tri-state values");
        req.without = vec!["vector".into(), "bm25".into()];
        let valid = req.clone().check().unwrap();
        assert_eq!(valid.without(), [Signal::Vector, Signal::Bm25]);
        assert_eq!(valid.text, req.text, "it reads as the request");
        let refuse = |edit: fn(&mut LocateRequest)| {
            let mut r = req.clone();
            edit(&mut r);
            r.check().unwrap_err()
        };
        assert!(matches!(refuse(|r| r.text = " \n".into()), SearchError::EmptyQuery));
        assert!(matches!(refuse(|r| r.k = 0), SearchError::BadK { .. }));
        assert!(matches!(refuse(|r| r.text = "a\0b".into()), SearchError::BadRequest(_)));
        assert!(matches!(refuse(|r| r.features = MAX_LOCATE_FEATURES + 1), SearchError::BadRequest(_)));
        assert!(refuse(|r| r.without = vec!["telepathy".into()]).to_string().contains("telepathy"));
    }
}
