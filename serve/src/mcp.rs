//! The Model Context Protocol server: ctxd's retrieval as tools for coding agents.
//!
//! JSON-RPC 2.0 messages, one per line on stdio (`ctxd mcp --db DIR`), or one per `POST /mcp`
//! on the HTTP API (the "streamable HTTP" transport answering with `application/json`).
//! Methods: `initialize`, `ping`, `tools/list`, `tools/call`; notifications are accepted and
//! not answered. Tools (each description states its approximate token cost, so an agent can
//! plan its context window):
//!
//! | tool | arguments | returns |
//! |---|---|---|
//! | `search` | `query`, `k`≤50, `mode`, `path_prefix`, `language` | ranked chunks cited `path:start-end` |
//! | `get_context` | `query`, `budget`≤32000, `format` | a deduplicated context packed into the budget |
//! | `search_symbols` | `name`, `prefix`, `kind`, `limit`≤100 | definitions: kind, qualified name, place, signature |
//! | `get_symbol_source` | `name`, `path` | the definition's source lines from the index |
//! | `get_repo_overview` | `max_tokens`≤8000 | languages, top folders, key types, under a token cap |
//! | `check_index` | `refresh` | index version and age; files changed, new or gone since the last commit |
//! | `locate`, `find_references`, `callers`, `callees`, `imports`, `imported_by`, `impact`, `repo_map`, `history` | see [`crate::graph_tools`] | files for an issue; the code graph |
//!
//! Tool failures (unknown symbol, bad arguments) are tool results with `isError: true`, as
//! the protocol asks; only malformed JSON-RPC gets a JSON-RPC error. Nothing here reads files
//! from disk: sources come from the index, which only ever holds files under the configured
//! roots (symlinks are not followed when scanning).

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::{json, Value};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWrite, AsyncWriteExt};

use ctxd_codegraph::tools::{GraphTool, GraphTools};
use ctxd_context::assembler::Assembler;
use ctxd_context::draft::indexed_lines;
use ctxd_context::request::ContextRequest;
use ctxd_context::Format;
use ctxd_index::scope::SourceScope;
use ctxd_search::search::{Mode, SearchRequest};

use crate::mcp_catalog::tools;
use ctxd_choice::ToolPreset;

/// Protocol versions this server speaks (newest first).
pub const PROTOCOL_VERSIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// The staleness check behind `check_index`: given `refresh`, reports (and optionally
/// re-indexes) what changed in the sources since the last commit. Supplied by the binary,
/// which knows the source roots and the ingest pipeline.
pub type CheckIndex = Arc<dyn Fn(bool) -> BoxFuture<'static, Result<Value, CheckFailed>> + Send + Sync>;

/// Why `check_index` failed: the checker's error with its causes.
pub type CheckFailed = Box<dyn std::error::Error + Send + Sync>;

/// The MCP request handler (transport-independent).
#[derive(Clone)]
pub struct McpServer {
    assembler: Arc<Assembler>,
    check: Option<CheckIndex>,
    graph: GraphTools,
    /// The transport's own session (a stdio process is one): `get_context` calls without a
    /// `session` argument belong to it.
    session: Option<String>,
    /// The configured source names (`source` arguments are checked against them).
    access: ctxd_search::sources::LiveAccess,
    /// The sources the caller's token may read (`None`: all; stdio is the local user).
    allowed: Option<SourceScope>,
    /// The tools listed and answered (`--tools`, `[server] mcp_tools`, `?tools=`).
    preset: ToolPreset,
}

/// When to call which tool: the `initialize` answer's instructions, one line per offered tool.
const WHEN: &[(&str, &str)] = &[
    ("get_context", "get_context for a question about the code (cited blocks within a token budget)"),
    ("locate", "locate first for an issue, a bug report or a stack trace: the files to change, with why"),
    ("search", "search for ranked places matching words, a symbol or an error message"),
    ("search_symbols", "search_symbols / get_symbol_source to find and read a definition by name"),
    ("get_repo_overview", "get_repo_overview to orient in an unknown codebase"),
    ("find_references", "find_references / callers before changing a definition's behaviour"),
    ("impact", "impact on a diff: what a change reaches and which tests to run"),
    ("check_index", "check_index when results look stale"),
];

fn text_result(text: String, structured: Option<Value>) -> Value {
    let mut r = json!({ "content": [{ "type": "text", "text": text }], "isError": false });
    if let Some(s) = structured {
        r["structuredContent"] = s;
    }
    r
}

/// `text` after a one-line note when the answer's index (`index`, an
/// [`ctxd_index::stamp::IndexStamp`]) misses files changed since its version.
fn noted(text: String, index: Option<&Value>) -> String {
    let stamp = index.and_then(|v| serde_json::from_value::<ctxd_index::stamp::IndexStamp>(v.clone()).ok());
    match stamp.and_then(|s| s.stale_note()) {
        Some(note) => format!("{note}\n\n{text}"),
        None => text,
    }
}

fn tool_error(message: String) -> Value {
    json!({ "content": [{ "type": "text", "text": message }], "isError": true })
}

/// The JSON-RPC answer to a message that is not JSON.
pub fn parse_error(e: impl std::fmt::Display) -> Value {
    rpc_error(Value::Null, -32700, format!("parse error: {e}"))
}

fn rpc_error(id: Value, code: i64, message: impl Into<String>) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "error": { "code": code, "message": message.into() } })
}

fn arg_str<'a>(args: &'a Value, name: &str) -> Result<&'a str, String> {
    args.get(name)
        .and_then(Value::as_str)
        .filter(|s| !s.trim().is_empty())
        .ok_or_else(|| format!("argument '{name}' (a non-empty string) is required"))
}

fn arg_usize(args: &Value, name: &str, default: usize, min: usize, max: usize) -> Result<usize, String> {
    match args.get(name) {
        None | Some(Value::Null) => Ok(default),
        Some(v) => match v.as_u64() {
            Some(n) if (min as u64..=max as u64).contains(&n) => Ok(n as usize),
            _ => Err(format!("argument '{name}' must be an integer between {min} and {max}")),
        },
    }
}

/// The folder an overview files `path` under: its first two directory levels (`src/index/`),
/// `./` for files at the root.
fn top_folder(path: &str) -> String {
    match path.rsplit_once('/') {
        Some((dir, _)) => dir.split('/').take(2).collect::<Vec<_>>().join("/") + "/",
        None => "./".to_string(),
    }
}

/// Rough token estimate for caps (4 bytes a token, the usual figure for code and English).
fn approx_tokens(s: &str) -> usize {
    s.len().div_ceil(4)
}

impl McpServer {
    pub fn new(assembler: Arc<Assembler>, check: Option<CheckIndex>) -> Self {
        let graph = GraphTools::with_locator(assembler.locator().clone());
        Self {
            assembler,
            check,
            graph,
            session: None,
            access: Default::default(),
            allowed: None,
            preset: ToolPreset::All,
        }
    }

    /// The same server offering only `preset`'s tools.
    pub fn with_tools(mut self, preset: ToolPreset) -> Self {
        self.preset = preset;
        self
    }

    /// The same server offering only the tools both its preset and `asked` allow (a client's
    /// `?tools=` narrows what the operator configured, never widens it).
    pub fn narrowed_to(mut self, asked: &ToolPreset) -> Self {
        let offered = crate::mcp_catalog::preset_tools(&self.preset);
        let names = offered.iter().filter_map(|t| t["name"].as_str()).filter(|n| asked.allows(n));
        self.preset = ToolPreset::Named(names.map(String::from).collect());
        self
    }

    /// The tools offered.
    pub fn preset(&self) -> &ToolPreset {
        &self.preset
    }

    /// The same server checking `source` arguments against the configured source names.
    pub fn with_access(mut self, access: ctxd_search::sources::LiveAccess) -> Self {
        self.access = access;
        self
    }

    /// The same server answering a caller whose token reads only `sources` (`None`: all).
    pub fn for_caller(mut self, sources: Option<SourceScope>) -> Self {
        self.allowed = sources;
        self
    }

    /// The same server with a session of its own (the stdio transport: one process, one agent).
    pub fn with_session(mut self, session: impl Into<String>) -> Self {
        self.session = Some(session.into());
        self
    }

    /// Answers a JSON-RPC message or batch (an array of messages, answered by an array of
    /// the replies); `None` when nothing calls for an answer (notifications).
    pub async fn handle_message(&self, msg: Value) -> Option<Value> {
        let Value::Array(batch) = msg else { return self.handle(msg).await };
        let mut out = Vec::new();
        for m in batch {
            out.extend(self.handle(m).await);
        }
        (!out.is_empty()).then_some(Value::Array(out))
    }

    /// Answers one JSON-RPC message; `None` for notifications (and responses).
    pub async fn handle(&self, msg: Value) -> Option<Value> {
        let Some(method) = msg.get("method").and_then(Value::as_str) else {
            // A response from the client, or garbage with an id.
            return msg
                .get("id")
                .filter(|_| msg.get("result").is_none() && msg.get("error").is_none())
                .map(|id| rpc_error(id.clone(), -32600, "invalid request: no method"));
        };
        let id = msg.get("id").cloned()?; // notifications get no answer
        let params = msg.get("params").cloned().unwrap_or(Value::Null);
        let result = match method {
            "initialize" => {
                let asked = params.get("protocolVersion").and_then(Value::as_str).unwrap_or(PROTOCOL_VERSIONS[0]);
                let version = PROTOCOL_VERSIONS.iter().find(|v| **v == asked).unwrap_or(&PROTOCOL_VERSIONS[0]);
                json!({
                    "protocolVersion": version,
                    "capabilities": { "tools": { "listChanged": false } },
                    "serverInfo": { "name": "ctxd", "version": env!("CARGO_PKG_VERSION") },
                    "instructions": self.instructions(),
                })
            }
            "ping" => json!({}),
            "tools/list" => json!({ "tools": crate::mcp_catalog::preset_tools(&self.preset) }),
            "tools/call" => {
                let name = params.get("name").and_then(Value::as_str).unwrap_or_default();
                let args = params.get("arguments").cloned().unwrap_or_else(|| json!({}));
                if !self.preset.allows(name) {
                    let known = tools().iter().any(|t| t["name"] == name);
                    let why = if known { "is not offered by this server" } else { "is unknown" };
                    return Some(rpc_error(
                        id,
                        -32602,
                        format!(
                            "tool '{name}' {why} (tools: {}); start the server with --tools all, or name it in --tools \
                             / [server] mcp_tools",
                            self.preset
                        ),
                    ));
                }
                match self.call(name, &args).await {
                    Ok(r) => r,
                    Err(CallError::Unknown) => return Some(rpc_error(id, -32602, format!("unknown tool '{name}'"))),
                    Err(CallError::Failed(m)) => tool_error(m),
                }
            }
            other => return Some(rpc_error(id, -32601, format!("method not found: {other}"))),
        };
        Some(json!({ "jsonrpc": "2.0", "id": id, "result": result }))
    }

    /// One line per offered tool saying when to call it.
    fn instructions(&self) -> String {
        let lines: Vec<&str> = WHEN.iter().filter(|(t, _)| self.preset.allows(t)).map(|(_, when)| *when).collect();
        format!("ctxd indexes this codebase. Use {}.", lines.join("; "))
    }

    async fn call(&self, name: &str, args: &Value) -> Result<Value, CallError> {
        let started = std::time::Instant::now();
        let scope = ctxd_search::sources::from_args(args).and_then(|requested| {
            let git_ref = ctxd_search::sources::ref_from_args(args)?;
            self.access.get().resolve(requested.as_ref(), git_ref.as_deref(), self.allowed.as_ref())
        });
        let scope = match scope {
            Ok(s) => s,
            Err(e) => return Err(CallError::Failed(e.to_string())),
        };
        let out = match name {
            "search" => self.search(args, scope).await,
            "get_context" => self.context(args, scope).await,
            "search_symbols" => self.symbols(args, scope).await,
            "get_symbol_source" => self.symbol_source(args, scope).await,
            "get_repo_overview" => self.overview(args, scope).await,
            "check_index" if self.allowed.is_some() => {
                Err("check_index needs a token that reads every source".to_string())
            }
            "check_index" => match &self.check {
                Some(check) => {
                    let refresh = args.get("refresh").and_then(Value::as_bool).unwrap_or(false);
                    check(refresh)
                        .await
                        .map(|v| {
                            let text = serde_json::to_string_pretty(&v).unwrap_or_default();
                            text_result(text, Some(v))
                        })
                        .map_err(|e| ctxd_index::error::with_causes(&*e))
                }
                None => Err("check_index needs the source root (start ctxd mcp with --root or --config)".into()),
            },
            other if crate::symbol_tools::is_symbol_tool(other) => {
                crate::symbol_tools::call(&self.assembler, other, args.clone(), self.session.as_deref(), scope.as_ref())
                    .await
                    .map(|(text, v)| text_result(text, Some(v)))
                    .map_err(|e| e.to_string())
            }
            other => match GraphTool::from_name(other) {
                Some(tool) => self
                    .graph
                    .call(tool, args, scope.as_ref())
                    .await
                    .map(|v| {
                        let text = noted(serde_json::to_string_pretty(&v).unwrap_or_default(), v.get("index"));
                        text_result(text, Some(v))
                    })
                    .map_err(|e| e.to_string()),
                None => return Err(CallError::Unknown),
            },
        };
        let status = if out.is_ok() { "ok" } else { "error" };
        metrics::histogram!(crate::metrics::QUERY_DURATION_SECONDS, "endpoint" => "mcp", "mode" => tool_label(name))
            .record(started.elapsed().as_secs_f64());
        metrics::counter!(crate::metrics::QUERY_REQUESTS_TOTAL, "endpoint" => "mcp", "mode" => tool_label(name), "status" => status)
            .increment(1);
        out.map_err(CallError::Failed)
    }

    async fn search(&self, args: &Value, source: Option<SourceScope>) -> Result<Value, String> {
        let query = arg_str(args, "query")?;
        let k = arg_usize(args, "k", 10, 1, 50)?;
        let mode = match args.get("mode").and_then(Value::as_str) {
            None => Mode::default(),
            Some(m) => serde_json::from_value(json!(m)).map_err(|_| format!("unknown mode '{m}'"))?,
        };
        let mut req = SearchRequest::new(query).with(k, mode);
        req.source = source;
        req.path_prefix = args.get("path_prefix").and_then(Value::as_str).map(str::to_string);
        req.language = args
            .get("language")
            .and_then(Value::as_str)
            .map(str::parse::<ctxd_index::language::Language>)
            .transpose()
            .map_err(|e| e.to_string())?;
        let req = req.check().map_err(|e| e.to_string())?;
        let resp = self.assembler.searcher().search(&req).await.map_err(|e| e.to_string())?;
        let mut text = String::new();
        for (i, r) in resp.results.iter().enumerate() {
            let sym = r.symbol.as_deref().map(|s| format!(" {s}")).unwrap_or_default();
            text.push_str(&format!(
                "{}. {}:{}-{}{} (score {:.3})\n```{}\n{}\n```\n",
                i + 1,
                r.path,
                r.start_line,
                r.end_line,
                sym,
                r.score,
                r.language,
                r.content.trim_end()
            ));
        }
        if text.is_empty() {
            text = format!("no results for '{query}'");
        }
        let v = serde_json::to_value(&resp).unwrap_or_default();
        Ok(text_result(noted(text, v.get("index")), Some(v)))
    }

    async fn context(&self, args: &Value, source: Option<SourceScope>) -> Result<Value, String> {
        let query = arg_str(args, "query")?;
        let mut req = ContextRequest::new(query, arg_usize(args, "budget", 4000, 64, 32000)?);
        req.source = source;
        req.format = match args.get("format").and_then(Value::as_str) {
            None => Format::Markdown,
            Some(f) => serde_json::from_value(json!(f)).map_err(|_| format!("unknown format '{f}'"))?,
        };
        req.session = args.get("session").and_then(Value::as_str).map(str::to_string).or_else(|| self.session.clone());
        req.as_of = args.get("as_of").and_then(Value::as_str).map(str::to_string);
        req.skeletons = args.get("skeletons").and_then(Value::as_bool).unwrap_or(true);
        if let Some(a) = args.get("assembly") {
            let a = a.as_str().ok_or("assembly must be a string")?;
            req.assembly = a.parse().map_err(|e: ctxd_search::error::SearchError| e.to_string())?;
        }
        if let Some(types) = args.get("doc_types") {
            req.doc_types = serde_json::from_value(types.clone())
                .map_err(|_| "doc_types must be a list of code, docs, config, tests".to_string())?;
        }
        let req = req.check().map_err(|e| e.to_string())?;
        let resp = self.assembler.assemble(&req, |_| {}).await.map_err(|e| e.to_string())?;
        let summary = json!({
            "tokens_used": resp.tokens_used, "budget": resp.budget, "blocks": resp.blocks.len(),
            "citations": resp.blocks.iter().map(|b| b.citation()).collect::<Vec<_>>(),
            "already_sent": resp.already_sent, "session": resp.session,
            "route": resp.route, "intent": resp.intent,
            "assembly": resp.assembly, "assembly_reason": resp.assembly_reason, "themes": resp.themes,
            "index": resp.index,
        });
        let text = if resp.blocks.is_empty() && resp.already_sent.is_empty() {
            format!("nothing relevant to '{query}' in the index")
        } else {
            resp.context
        };
        Ok(text_result(noted(text, summary.get("index")), Some(summary)))
    }

    async fn symbols(&self, args: &Value, source: Option<SourceScope>) -> Result<Value, String> {
        let name = arg_str(args, "name")?;
        let prefix = args.get("prefix").and_then(Value::as_bool).unwrap_or(false);
        let limit = arg_usize(args, "limit", 20, 1, 100)?;
        let kind = args.get("kind").and_then(Value::as_str);
        let index = self.assembler.searcher().index().scoped(source).await.map_err(|e| e.to_string())?;
        let fetch = if kind.is_some() { limit * 5 } else { limit };
        let rows = index.symbols().symbols_named(name, prefix, fetch).await.map_err(|e| e.to_string())?;
        let rows: Vec<_> = rows.into_iter().filter(|r| kind.is_none_or(|k| r.kind == k)).take(limit).collect();
        if rows.is_empty() {
            return Ok(text_result(
                format!("no symbol {}'{name}'", if prefix { "starting with " } else { "named " }),
                None,
            ));
        }
        let text = rows
            .iter()
            .map(|r| {
                format!(
                    "{} {} — {}:{}-{} — {}",
                    r.kind, r.qualified_name, r.path, r.start_line, r.end_line, r.signature
                )
            })
            .collect::<Vec<_>>()
            .join("\n");
        let structured = rows
            .iter()
            .map(|r| {
                json!({"name": r.name, "qualified_name": r.qualified_name, "kind": r.kind, "language": r.language,
                       "path": r.path, "start_line": r.start_line, "end_line": r.end_line, "signature": r.signature,
                       "parent": r.parent, "doc": r.doc})
            })
            .collect::<Vec<_>>();
        Ok(text_result(text, Some(json!({ "symbols": structured }))))
    }

    async fn symbol_source(&self, args: &Value, source: Option<SourceScope>) -> Result<Value, String> {
        let name = arg_str(args, "name")?;
        let path = args.get("path").and_then(Value::as_str);
        let index = self.assembler.searcher().index().scoped(source).await.map_err(|e| e.to_string())?;
        let rows = index.symbols().symbols_named(name, false, 50).await.map_err(|e| e.to_string())?;
        let Some(sym) = rows.iter().find(|r| path.is_none_or(|p| r.path == p)) else {
            return Err(match path {
                Some(p) => format!("no symbol named '{name}' in {p}"),
                None => format!("no symbol named '{name}' (try search_symbols with prefix=true)"),
            });
        };
        let chunks = index.reads().chunks_of(&sym.path).await.map_err(|e| e.to_string())?;
        let lines = indexed_lines(&chunks, sym.start_line..=sym.end_line);
        if lines.is_empty() {
            return Err(format!("the source of '{name}' ({}:{}) is not in the index", sym.path, sym.start_line));
        }
        let body = lines.values().cloned().collect::<Vec<_>>().join("\n");
        let others = rows.len() - 1;
        let more = if others > 0 && path.is_none() {
            format!("\n({others} other definition(s) share this name: pass `path` to choose)")
        } else {
            String::new()
        };
        let text = format!(
            "{} {} — {}:{}-{}\n```{}\n{}\n```{more}",
            sym.kind, sym.qualified_name, sym.path, sym.start_line, sym.end_line, sym.language, body
        );
        let structured = json!({"path": sym.path, "start_line": sym.start_line, "end_line": sym.end_line,
                                "kind": sym.kind, "qualified_name": sym.qualified_name, "source": body});
        Ok(text_result(text, Some(structured)))
    }

    async fn overview(&self, args: &Value, source: Option<SourceScope>) -> Result<Value, String> {
        let cap = arg_usize(args, "max_tokens", 1500, 100, 8000)?;
        let index = self.assembler.searcher().index().scoped(source).await.map_err(|e| e.to_string())?;
        let files = index.reads().files().await.map_err(|e| e.to_string())?;
        let mut langs: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
        let mut folders: BTreeMap<String, (usize, usize)> = BTreeMap::new();
        for (path, lang, chunks) in &files {
            let e = langs.entry(lang.as_str()).or_default();
            e.0 += 1;
            e.1 += chunks;
            let f = folders.entry(top_folder(path)).or_default();
            f.0 += 1;
            f.1 += chunks;
        }
        let mut langs: Vec<_> = langs.into_iter().collect();
        langs.sort_by_key(|b| std::cmp::Reverse(b.1 .1));
        let mut folders: Vec<_> = folders.into_iter().collect();
        folders.sort_by(|a, b| b.1 .1.cmp(&a.1 .1).then(a.0.cmp(&b.0)));
        let kinds = ["module", "struct", "class", "trait", "interface", "enum", "type"];
        let mut key = index.symbols().top_level_symbols(&kinds, 2000).await.map_err(|e| e.to_string())?;
        // Types of the biggest folders first, documented ones before the rest.
        let rank: BTreeMap<&str, usize> = folders.iter().enumerate().map(|(i, f)| (f.0.as_str(), i)).collect();
        let folder_rank = |p: &str| rank.get(top_folder(p).as_str()).copied().unwrap_or(usize::MAX);
        key.sort_by_key(|s| (folder_rank(&s.path), s.doc.is_none(), s.path.clone(), s.start_line));
        let total_chunks: usize = files.iter().map(|f| f.2).sum();
        let mut text = format!("# Index overview\n{} files, {} chunks\n\n## Languages\n", files.len(), total_chunks);
        for (l, (f, c)) in &langs {
            text.push_str(&format!("- {l}: {f} files, {c} chunks\n"));
        }
        text.push_str("\n## Top folders\n");
        for (f, (n, c)) in folders.iter().take(15) {
            text.push_str(&format!("- {f} ({n} files, {c} chunks)\n"));
        }
        text.push_str("\n## Key types and modules\n");
        let mut listed = 0;
        for s in &key {
            let doc = s.doc.as_deref().map(|d| format!(" — {}", d.lines().next().unwrap_or(""))).unwrap_or_default();
            let line = format!("- {} {} ({}:{}){doc}\n", s.kind, s.qualified_name, s.path, s.start_line);
            if approx_tokens(&text) + approx_tokens(&line) > cap {
                break;
            }
            text.push_str(&line);
            listed += 1;
        }
        if approx_tokens(&text) > cap {
            let mut cut = cap * 4;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            text.truncate(cut);
        }
        let structured = json!({
            "files": files.len(), "chunks": total_chunks,
            "languages": langs.iter().map(|(l, (f, c))| json!({"language": l, "files": f, "chunks": c})).collect::<Vec<_>>(),
            "key_symbols_listed": listed, "approx_tokens": approx_tokens(&text),
        });
        Ok(text_result(text, Some(structured)))
    }
}

enum CallError {
    Unknown,
    Failed(String),
}

fn tool_label(name: &str) -> &'static str {
    match name {
        "search" => "search",
        "get_context" => "get_context",
        "search_symbols" => "search_symbols",
        "get_symbol_source" => "get_symbol_source",
        "get_repo_overview" => "get_repo_overview",
        "check_index" => "check_index",
        other => GraphTool::from_name(other).map_or("unknown", GraphTool::name),
    }
}

/// Serves MCP over a line-delimited JSON-RPC stream (stdio) until the input ends.
pub async fn serve_lines<R, W>(server: McpServer, input: R, mut output: W) -> std::io::Result<()>
where
    R: AsyncBufRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut lines = input.lines();
    while let Some(line) = lines.next_line().await? {
        if line.trim().is_empty() {
            continue;
        }
        let reply = match serde_json::from_str::<Value>(&line) {
            Ok(msg) => server.handle_message(msg).await,
            Err(e) => Some(parse_error(e)),
        };
        if let Some(reply) = reply {
            let mut text = serde_json::to_string(&reply).unwrap_or_default();
            text.push('\n');
            output.write_all(text.as_bytes()).await?;
            output.flush().await?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tools_state_their_token_cost_and_require_their_arguments() {
        let names: Vec<String> = tools().iter().map(|t| t["name"].as_str().unwrap().to_string()).collect();
        assert_eq!(names, ctxd_choice::MCP_TOOLS);
        // The graph tools come last, in their own order.
        assert!(names.ends_with(&GraphTool::ALL.map(|t| t.name().to_string())), "{names:?}");
        for t in tools() {
            assert!(t["description"].as_str().unwrap().contains("Cost:"), "{t}");
            assert_eq!(t["inputSchema"]["type"], "object");
        }
        assert!(arg_str(&json!({"query": "  "}), "query").is_err());
        assert!(arg_usize(&json!({"k": 0}), "k", 10, 1, 50).is_err());
        assert_eq!(arg_usize(&json!({}), "k", 10, 1, 50), Ok(10));
        assert_eq!(top_folder("src/index/store/a.rs"), "src/index/");
        assert_eq!(top_folder("src/a.rs"), "src/");
        assert_eq!(top_folder("README.md"), "./");
    }

    #[test]
    fn an_answer_from_a_stale_index_says_so_in_its_first_line() {
        let stale = json!({"version": 9, "committed_at": "2026-11-27T02:00:00.000Z", "changed_since": 2});
        let text = noted("1. src/a.rs:1-3".into(), Some(&stale));
        let (first, rest) = text.split_once("\n\n").unwrap();
        assert!(first.starts_with("note: 2 files changed since this index version (9,"), "{text}");
        assert_eq!(rest, "1. src/a.rs:1-3");
        let fresh = json!({"version": 9, "committed_at": "2026-11-27T02:00:00.000Z", "changed_since": 0});
        assert_eq!(noted("x".into(), Some(&fresh)), "x");
        assert_eq!(noted("x".into(), None), "x");
    }
}
