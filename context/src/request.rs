//! What a context request asks and what it answers: [`ContextRequest`] (the body of
//! `POST /v1/context`, the MCP `get_context` arguments, the CLI's `context` flags), its
//! defaults and bounds, and [`ContextResponse`]; the work is [`crate::assembler`]'s.

use ctxd_index::language::Language;
use ctxd_search::error::SearchError;
use ctxd_search::route::{Intent, Route};
use ctxd_search::search::{Mode, Scope};
use serde::{Deserialize, Serialize};

use crate::assembly::Assembly;
use crate::block::{Block, Format};
use crate::doc_type::DocType;

/// In a session's follow-ups, candidates scoring below this share of the best candidate are
/// sent as skeletons only.
pub const SESSION_FLOOR: f32 = 0.7;
/// In a session's follow-ups, new blocks of a file the session has seen come whole only above
/// this share of the best candidate (skeletons otherwise: the file is known, its other parts
/// are a `get_symbols` away).
pub const SEEN_FILE_FLOOR: f32 = 0.9;

/// Largest budget accepted, in tokens.
pub const MAX_BUDGET: usize = 1_000_000;

fn default_candidates() -> usize {
    60
}
fn default_per_file() -> usize {
    3
}
fn default_near_dup() -> f32 {
    0.9
}

/// The body of `POST /v1/context`.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ContextRequest {
    #[schemars(length(min = 1, max = ctxd_search::search::MAX_QUERY_BYTES / 4), pattern(r"\S"))]
    pub query: String,
    /// Tokens available for the context.
    #[schemars(range(min = 1, max = MAX_BUDGET))]
    pub budget: usize,
    /// Tokens of the budget kept free (for the question, the answer, …).
    #[serde(default)]
    pub reserve: usize,
    #[serde(default)]
    pub format: Format,
    /// Candidates retrieved before deduplication and packing.
    #[serde(default = "default_candidates")]
    #[schemars(range(min = 1, max = ctxd_search::search::MAX_K))]
    pub candidates: usize,
    /// Blocks per file at most.
    #[serde(default = "default_per_file")]
    pub max_per_file: usize,
    /// Cosine similarity at or above which a less relevant block is dropped.
    #[serde(default = "default_near_dup")]
    pub near_duplicate: f32,
    #[serde(default)]
    pub mode: Mode,
    #[serde(default)]
    pub as_of: Option<String>,
    #[serde(default)]
    pub current_file: Option<String>,
    #[serde(default)]
    pub path_prefix: Option<String>,
    /// Only these named sources (see [`ctxd_search::sources`]).
    #[serde(default, deserialize_with = "ctxd_search::sources::de_sources")]
    #[schemars(with = "Option<ctxd_search::sources::SourceNames>")]
    pub source: Option<ctxd_index::scope::SourceScope>,
    /// A git source's branch, tag or commit to read (default: each git source's first ref).
    #[serde(default, rename = "ref")]
    pub git_ref: Option<String>,
    #[serde(default)]
    pub language: Option<Language>,
    #[serde(default)]
    pub scope: Option<Scope>,
    /// The caller's session: what it was already sent is cited in one line, not repeated.
    #[serde(default)]
    pub session: Option<String>,
    /// Candidates that do not fit whole are sent as signature skeletons in the room left
    /// (`false`: dropped, as before).
    #[serde(default = "yes")]
    pub skeletons: bool,
    /// How the blocks are laid out; `auto` (the default) picks by the query's intent.
    #[serde(default)]
    pub assembly: Assembly,
    /// Only chunks of files of these types (`code`, `docs`, `config`, `tests`); all when empty.
    #[serde(default)]
    pub doc_types: Vec<DocType>,
}

fn yes() -> bool {
    true
}

impl ContextRequest {
    /// A request with defaults.
    pub fn new(query: impl Into<String>, budget: usize) -> Self {
        Self {
            query: query.into(),
            budget,
            reserve: 0,
            format: Format::default(),
            candidates: default_candidates(),
            max_per_file: default_per_file(),
            near_duplicate: default_near_dup(),
            mode: Mode::default(),
            as_of: None,
            current_file: None,
            path_prefix: None,
            source: None,
            git_ref: None,
            language: None,
            scope: None,
            session: None,
            skeletons: true,
            assembly: Assembly::default(),
            doc_types: Vec::new(),
        }
    }

    /// Checks the budget, reserve, candidates and session id, once, where the request enters
    /// (HTTP, MCP, the command line, the aggregator): the assembler takes the [`ValidContext`]
    /// and never checks again. (The query is the search's to check: it is checked as the
    /// candidates' search request is built.)
    pub fn check(self) -> Result<ValidContext, SearchError> {
        if self.budget == 0 || self.budget > MAX_BUDGET {
            return Err(SearchError::BadRequest(format!("budget must be between 1 and {MAX_BUDGET} tokens")));
        }
        if self.reserve >= self.budget {
            return Err(SearchError::BadRequest(format!(
                "reserve ({}) must be below the budget ({})",
                self.reserve, self.budget
            )));
        }
        if self.candidates == 0 || self.candidates > ctxd_search::search::MAX_K {
            return Err(SearchError::BadK { got: self.candidates, max: ctxd_search::search::MAX_K });
        }
        if let Some(id) = &self.session {
            crate::session::validate_id(id)?;
        }
        Ok(ValidContext(self))
    }
}

/// A [`ContextRequest`] that passed [`ContextRequest::check`]: what the assembler takes. It
/// reads as the request (`Deref`) and cannot be changed in place.
#[derive(Debug, Clone)]
pub struct ValidContext(ContextRequest);

impl std::ops::Deref for ValidContext {
    type Target = ContextRequest;

    fn deref(&self) -> &ContextRequest {
        &self.0
    }
}

/// The assembled context.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct ContextResponse {
    /// In attention order (most relevant first and last).
    pub blocks: Vec<Block>,
    pub tokens_used: usize,
    pub budget: usize,
    pub reserve: usize,
    /// `tokens_used / (budget − reserve)`.
    pub utilization: f64,
    /// Candidates retrieved.
    pub candidates: usize,
    /// Share of candidates dropped as exact or near duplicates (merged overlaps not counted).
    pub dedup_rate: f64,
    pub exact_duplicates: usize,
    pub near_duplicates: usize,
    /// Candidates merged into a neighbouring block of the same file.
    pub merged: usize,
    pub route: Option<Route>,
    pub intent: Option<Intent>,
    /// The session the answer was given in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// Candidates the session was already sent, cited (`path:start-end`) instead of repeated.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub already_sent: Vec<String>,
    /// The files localization ranked first for an issue-like query (their chunks were lifted).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub located: Vec<String>,
    /// The assembly used (for `auto`, the one it picked).
    pub assembly: Assembly,
    /// Why `auto` picked it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assembly_reason: Option<String>,
    /// Thematic assembly: each theme's heading (blocks carry their theme's index).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub themes: Vec<String>,
    /// The blocks rendered in `format`, concatenated.
    pub context: String,
    /// The index version read, its commit time and the files changed since
    /// ([`ctxd_index::stamp`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<ctxd_index::stamp::IndexStamp>,
}
