//! The code-graph tools and localization as one surface for the wire: HTTP (`POST /v1/locate`,
//! `POST /v1/graph/<tool>`) and MCP (a tool each) both call [`GraphTools::call`] with the
//! tool and its JSON arguments (every tool also takes `as_of`: a snapshot's version or tag, and `source`: see [`ctxd_search::sources`]) and send back its JSON answer, so the two can never differ.
//!
//! | tool | arguments | answer |
//! |---|---|---|
//! | `locate` | `text` (≤ 1 MB), `k`, `without` | `{"files":[{path,score,why,definitions}],…}` |
//! | `find_references` | `symbol`, `limit`, `kinds` | `{"definitions","uses","unresolved"}` |
//! | `callers` / `callees` | `symbol`, `limit` | the same |
//! | `imports` / `imported_by` | `path` | `{"path","files":[{path,lines,names,test}]}` |
//! | `impact` | `paths` and/or `diff`, `limit` | `{"changed","affected","tests"}` |
//! | `repo_map` | `query`?, `budget` | `{"files","text","tokens","budget","ranked_by"}` |
//! | `history` | `path`, `limit` | `{"files":[{path,source,ref,commits,cochanged}]}` (see [`crate::locate::history_signals`]) |

use serde_json::Value;

use crate::graph::cache::GraphCache;
use crate::graph::impact::{impact, parse_diff, Change};
use crate::graph::repo_map::{central_files, repo_map, RepoMap};
use crate::graph::uses;
use crate::locate::request::{LocateRequest, MAX_LOCATE_K};
use crate::locate::Locator;
use ctxd_index::scope::SourceScope;
use ctxd_search::error::SearchError;
use ctxd_search::retriever::Retriever;

/// The tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GraphTool {
    Locate,
    FindReferences,
    Callers,
    Callees,
    Imports,
    ImportedBy,
    Impact,
    RepoMap,
    History,
}

impl GraphTool {
    pub const ALL: [GraphTool; 9] = [
        GraphTool::Locate,
        GraphTool::FindReferences,
        GraphTool::Callers,
        GraphTool::Callees,
        GraphTool::Imports,
        GraphTool::ImportedBy,
        GraphTool::Impact,
        GraphTool::RepoMap,
        GraphTool::History,
    ];

    /// The tool's name (MCP tool name; the HTTP route is `/v1/graph/<name>`, `/v1/locate`).
    pub fn name(self) -> &'static str {
        match self {
            GraphTool::Locate => "locate",
            GraphTool::FindReferences => "find_references",
            GraphTool::Callers => "callers",
            GraphTool::Callees => "callees",
            GraphTool::Imports => "imports",
            GraphTool::ImportedBy => "imported_by",
            GraphTool::Impact => "impact",
            GraphTool::RepoMap => "repo_map",
            GraphTool::History => "history",
        }
    }

    /// The tool `name` names.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.name() == name)
    }
}

/// Largest request body of the tools that take long texts (`locate`'s text, `impact`'s diff):
/// the text limit plus room for JSON escaping.
pub const MAX_TOOL_BODY_BYTES: usize = 3 * crate::locate::request::MAX_LOCATE_BYTES;

fn str_arg<'a>(args: &'a Value, name: &str) -> Result<&'a str, SearchError> {
    args.get(name)
        .and_then(Value::as_str)
        .filter(|s| !s.trim().is_empty())
        .ok_or_else(|| SearchError::BadRequest(format!("argument '{name}' (a non-empty string) is required")))
}

fn usize_arg(args: &Value, name: &str, default: usize, max: usize) -> Result<usize, SearchError> {
    match args.get(name) {
        None | Some(Value::Null) => Ok(default),
        Some(v) => match v.as_u64() {
            Some(n) if (1..=max as u64).contains(&n) => Ok(n as usize),
            _ => Err(SearchError::BadRequest(format!("argument '{name}' must be an integer between 1 and {max}"))),
        },
    }
}

fn strings_arg(args: &Value, name: &str) -> Result<Vec<String>, SearchError> {
    match args.get(name) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(a)) => a
            .iter()
            .map(|v| v.as_str().map(str::to_string))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| SearchError::BadRequest(format!("argument '{name}' must be a list of strings"))),
        Some(_) => Err(SearchError::BadRequest(format!("argument '{name}' must be a list of strings"))),
    }
}

fn known_args(args: &Value, allowed: &[&str]) -> Result<(), SearchError> {
    let Some(obj) = args.as_object() else {
        return Err(SearchError::BadRequest("arguments must be a JSON object".into()));
    };
    match obj.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(k) => Err(SearchError::BadRequest(format!("unknown argument '{k}' (accepted: {})", allowed.join(", ")))),
        None => Ok(()),
    }
}

/// One tool call's arguments with the snapshot (`as_of`) and the sources (`source`) it reads.
#[derive(Clone, Copy)]
struct ToolCall<'a> {
    args: &'a Value,
    as_of: Option<&'a str>,
    source: Option<&'a SourceScope>,
}

/// The argument `as_of`: a snapshot's version (a number or a string) or tag; `None` for the latest.
fn as_of_arg(args: &Value) -> Result<Option<String>, SearchError> {
    match args.get("as_of") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(Value::Number(n)) => Ok(Some(n.to_string())),
        Some(_) => Err(SearchError::BadRequest("argument 'as_of' must be a version number or a tag".into())),
    }
}

/// The changes `impact` is asked about: the arguments `paths` and the files of `diff`.
fn changes_arg(args: &Value) -> Result<Vec<Change>, SearchError> {
    let mut changes: Vec<Change> =
        strings_arg(args, "paths")?.into_iter().map(|path| Change { path, lines: Vec::new() }).collect();
    if let Some(diff) = args.get("diff").and_then(Value::as_str).filter(|d| !d.trim().is_empty()) {
        if diff.contains('\0') {
            return Err(SearchError::BadRequest(
                "the diff holds NUL bytes: send a text diff (`git diff`, binary files are listed by name)".into(),
            ));
        }
        changes.extend(parse_diff(diff)?);
    }
    if changes.is_empty() {
        return Err(SearchError::BadRequest("nothing changed: give `paths` or a unified `diff`".into()));
    }
    Ok(changes)
}

/// A tool's answer as JSON.
fn to_json(answer: impl serde::Serialize) -> Result<Value, SearchError> {
    serde_json::to_value(answer).map_err(|e| SearchError::BadRequest(e.to_string()))
}

/// Answers the tools over one index (following model switches through the retriever).
#[derive(Clone)]
pub struct GraphTools {
    locator: Locator,
}

impl GraphTools {
    pub fn new(retriever: Retriever) -> Self {
        Self::with_locator(Locator::new(retriever, GraphCache::default()))
    }

    /// Tools over `locator`'s index and graph cache (share one with `context`'s assembler).
    pub fn with_locator(locator: Locator) -> Self {
        Self { locator }
    }

    /// The graph of the latest index version, or of the snapshot `as_of` names, over the
    /// sources of `source` (all when `None`).
    pub async fn graph(
        &self,
        as_of: Option<&str>,
        source: Option<&SourceScope>,
    ) -> Result<std::sync::Arc<crate::graph::cache::CachedGraph>, SearchError> {
        self.locator.graph(as_of, source).await
    }

    /// A file's recorded history (see [`crate::locate::history_signals`]).
    pub async fn history(
        &self,
        path: &str,
        limit: usize,
        source: Option<&SourceScope>,
    ) -> Result<crate::locate::history_signals::HistoryAnswer, SearchError> {
        self.locator.history(path, limit, source).await
    }

    /// Localization (see [`crate::locate`]).
    pub async fn locate(
        &self,
        req: &crate::locate::request::ValidLocate,
    ) -> Result<crate::locate::request::LocateAnswer, SearchError> {
        self.locator.locate(req).await
    }

    /// The repository map for `query` (files ranked by localization), else by centrality.
    pub async fn repo_map(
        &self,
        query: Option<&str>,
        budget: usize,
        as_of: Option<&str>,
        source: Option<&SourceScope>,
    ) -> Result<RepoMap, SearchError> {
        match query {
            Some(q) => {
                let mut req = LocateRequest::new(q);
                req.k = MAX_LOCATE_K;
                req.definitions = 0;
                req.as_of = as_of.map(str::to_string);
                req.source = source.cloned();
                let answer = self.locator.locate(&req.check()?).await?;
                let g = self.graph(as_of, source).await?;
                let ranking: Vec<(usize, f64)> =
                    answer.files.iter().filter_map(|f| Some((g.code.file(&f.path)?, f.score))).collect();
                Ok(repo_map(&g.code, &ranking, budget, "locate"))
            }
            None => {
                let g = self.graph(as_of, source).await?;
                Ok(repo_map(&g.code, &central_files(&g.code, &g.centrality), budget, "centrality"))
            }
        }
    }

    /// Runs `tool` with `args` (a JSON object) over the sources of `source` (the scope the
    /// wire resolved from the arguments' `source` and the caller's token; see
    /// [`ctxd_search::sources`]) and returns its JSON answer.
    pub async fn call(
        &self,
        tool: GraphTool,
        args: &Value,
        source: Option<&SourceScope>,
    ) -> Result<Value, SearchError> {
        let as_of = as_of_arg(args)?;
        let call = ToolCall { args, as_of: as_of.as_deref(), source };
        match tool {
            GraphTool::Locate => self.call_locate(&call).await,
            GraphTool::FindReferences | GraphTool::Callers | GraphTool::Callees => {
                self.call_symbol_tool(tool, &call).await
            }
            GraphTool::Imports | GraphTool::ImportedBy => self.call_import_tool(tool, &call).await,
            GraphTool::Impact => self.call_impact(&call).await,
            GraphTool::History => self.call_history(&call).await,
            GraphTool::RepoMap => self.call_repo_map(&call).await,
        }
    }

    /// `locate`: localization of the argument `text`.
    async fn call_locate(&self, call: &ToolCall<'_>) -> Result<Value, SearchError> {
        let ToolCall { args, as_of, source } = *call;
        let accepted =
            ["text", "k", "without", "definitions", "features", "model", "no_adapter", "as_of", "source", "ref"];
        known_args(args, &accepted)?;
        let mut req = LocateRequest::new(str_arg(args, "text")?);
        req.k = usize_arg(args, "k", 10, MAX_LOCATE_K)?;
        req.features = usize_arg(args, "features", 0, crate::locate::request::MAX_LOCATE_FEATURES)?;
        req.without = strings_arg(args, "without")?;
        req.definitions = usize_arg(args, "definitions", 3, 20)?;
        req.model = match args.get("model") {
            None | Some(Value::Null) => None,
            Some(Value::String(m)) => Some(m.parse().map_err(|e| SearchError::BadRequest(format!("{e}")))?),
            Some(_) => return Err(SearchError::BadRequest("argument 'model' must be a string".into())),
        };
        req.no_adapter = match args.get("no_adapter") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(_) => return Err(SearchError::BadRequest("argument 'no_adapter' must be true or false".into())),
        };
        req.as_of = as_of.map(str::to_string);
        req.source = source.cloned();
        to_json(self.locator.locate(&req.check()?).await?)
    }

    /// `find_references`, `callers`, `callees`: the uses of the argument `symbol`.
    async fn call_symbol_tool(&self, tool: GraphTool, call: &ToolCall<'_>) -> Result<Value, SearchError> {
        let ToolCall { args, as_of, source } = *call;
        known_args(args, &["symbol", "limit", "kinds", "as_of", "source", "ref"])?;
        let symbol = str_arg(args, "symbol")?;
        let limit = usize_arg(args, "limit", 50, 1000)?;
        let g = self.graph(as_of, source).await?;
        let answer = match tool {
            GraphTool::Callers => uses::callers(&g.code, symbol, limit)?,
            GraphTool::Callees => uses::callees(&g.code, symbol, limit)?,
            _ => {
                let kinds = strings_arg(args, "kinds")?
                    .iter()
                    .map(|k| {
                        k.parse()
                            .map_err(|e: ctxd_index::edges::UnknownEdgeKind| SearchError::BadRequest(e.to_string()))
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                uses::references(&g.code, symbol, &kinds, limit)?
            }
        };
        to_json(answer)
    }

    /// `imports`, `imported_by`: the import edges of the argument `path`.
    async fn call_import_tool(&self, tool: GraphTool, call: &ToolCall<'_>) -> Result<Value, SearchError> {
        let ToolCall { args, as_of, source } = *call;
        known_args(args, &["path", "as_of", "source", "ref"])?;
        let path = str_arg(args, "path")?;
        let g = self.graph(as_of, source).await?;
        let answer = match tool {
            GraphTool::Imports => uses::imports(&g.code, path)?,
            _ => uses::imported_by(&g.code, path)?,
        };
        to_json(answer)
    }

    /// `impact`: what the changed `paths` and `diff` affect.
    async fn call_impact(&self, call: &ToolCall<'_>) -> Result<Value, SearchError> {
        let ToolCall { args, as_of, source } = *call;
        known_args(args, &["paths", "diff", "limit", "as_of", "source", "ref"])?;
        let changes = changes_arg(args)?;
        let limit = usize_arg(args, "limit", 20, 500)?;
        let g = self.graph(as_of, source).await?;
        let mut answer = impact(&g.code, &changes, limit);
        let paths: Vec<String> = changes.into_iter().map(|c| c.path).collect();
        answer.cochanged = self.locator.cochanged(&g.code, &paths, limit, source).await?;
        to_json(answer)
    }

    /// `history`: the recorded history of the argument `path`.
    async fn call_history(&self, call: &ToolCall<'_>) -> Result<Value, SearchError> {
        let ToolCall { args, source, .. } = *call;
        known_args(args, &["path", "limit", "as_of", "source", "ref"])?;
        let path = str_arg(args, "path")?;
        let limit = usize_arg(args, "limit", 10, 300)?;
        to_json(self.locator.history(path, limit, source).await?)
    }

    /// `repo_map`: the repository map for the argument `query`, within `budget`.
    async fn call_repo_map(&self, call: &ToolCall<'_>) -> Result<Value, SearchError> {
        let ToolCall { args, as_of, source } = *call;
        known_args(args, &["query", "budget", "as_of", "source", "ref"])?;
        let budget = usize_arg(args, "budget", 1024, 64_000)?;
        let query = args.get("query").and_then(Value::as_str).filter(|q| !q.trim().is_empty());
        to_json(self.repo_map(query, budget, as_of, source).await?)
    }
}
