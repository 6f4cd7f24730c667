//! Batch symbol tools: a file's (or module's, or folder's) outline in one call, and the sources
//! of many definitions in one call within a token budget — what an agent otherwise gets with a
//! `search_symbols` and a `get_symbol_source` per name.
//!
//! * [`ListSymbolsRequest`] → [`Outline`]: the target is an indexed path, a folder (every file
//!   under it, at most [`MAX_OUTLINE_FILES`]), or a module name (`pkg.mod`, `crate::a::b`,
//!   `a/b` — matched against file paths without their extension, `__init__`, `mod` and `index`
//!   files included); definitions in line order, nested ones indented, optionally only some
//!   `kinds`.
//! * [`GetSymbolsRequest`] → [`SymbolSources`]: each name's definitions (exact name, symbol or
//!   qualified name; at most [`PER_NAME`] each), their exact lines rebuilt from the indexed
//!   chunks, packed in the order asked into `budget` tokens (the index's tokenizer); a
//!   definition inside one already included is not repeated; names with no definition are
//!   listed as `missing`, sources that do not fit as `over_budget`.
//!
//! In a session, a source the session was already sent (same path, lines and text) is cited
//! instead of sent again, and the tokens count for the session's `symbols` tool.

use std::collections::{BTreeMap, HashMap};
use std::hash::{Hash, Hasher};

use ctxd_index::symbols::SymbolRow;
use serde::{Deserialize, Serialize};

use crate::assembler::Assembler;
use crate::draft::indexed_lines;
use crate::request::MAX_BUDGET;
use crate::session::{self, Tool};
use ctxd_search::error::SearchError;

/// Files an outline lists at most (a folder target).
pub const MAX_OUTLINE_FILES: usize = 50;
/// Names one `get_symbols` call takes at most.
pub const MAX_NAMES: usize = 100;
/// Definitions returned per name at most.
const PER_NAME: usize = 5;

/// The JSON of `/v1/symbols/list` (and the MCP tool `list_symbols`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListSymbolsRequest {
    /// A path, a folder or a module name.
    pub target: String,
    /// Only these kinds (`function`, `class`, `method`, …); all when empty.
    #[serde(default)]
    pub kinds: Vec<String>,
    #[serde(default)]
    pub as_of: Option<String>,
    /// Only these named sources (see [`ctxd_search::sources`]).
    #[serde(default, deserialize_with = "ctxd_search::sources::de_sources")]
    pub source: Option<ctxd_index::scope::SourceScope>,
    /// A git source's branch, tag or commit to read (default: each git source's first ref).
    #[serde(default, rename = "ref")]
    pub git_ref: Option<String>,
    #[serde(default)]
    pub session: Option<String>,
}

/// One line of an outline.
#[derive(Debug, Clone, Serialize)]
pub struct OutlineSymbol {
    pub symbol: String,
    pub kind: String,
    pub start_line: u32,
    pub end_line: u32,
    pub signature: String,
    /// The first line of its doc comment.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub doc: Option<String>,
    /// 0 for a top-level definition, 1 for a member, …
    pub depth: usize,
}

/// One file of an outline.
#[derive(Debug, Clone, Serialize)]
pub struct FileOutline {
    pub path: String,
    pub symbols: Vec<OutlineSymbol>,
}

/// The answer of `list_symbols`.
#[derive(Debug, Clone, Serialize)]
pub struct Outline {
    pub files: Vec<FileOutline>,
    /// Files matched beyond [`MAX_OUTLINE_FILES`] (not listed).
    pub more_files: usize,
    pub text: String,
    pub tokens: usize,
}

/// The JSON of `/v1/symbols/get` (and the MCP tool `get_symbols`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GetSymbolsRequest {
    pub names: Vec<String>,
    #[serde(default = "default_budget")]
    pub budget: usize,
    #[serde(default)]
    pub as_of: Option<String>,
    /// Only these named sources (see [`ctxd_search::sources`]).
    #[serde(default, deserialize_with = "ctxd_search::sources::de_sources")]
    pub source: Option<ctxd_index::scope::SourceScope>,
    /// A git source's branch, tag or commit to read (default: each git source's first ref).
    #[serde(default, rename = "ref")]
    pub git_ref: Option<String>,
    #[serde(default)]
    pub session: Option<String>,
}

fn default_budget() -> usize {
    4000
}

/// One definition's source.
#[derive(Debug, Clone, Serialize)]
pub struct SymbolSource {
    /// The name asked for.
    pub name: String,
    pub qualified_name: String,
    pub kind: String,
    pub path: String,
    pub start_line: u32,
    pub end_line: u32,
    pub source: String,
    pub tokens: usize,
}

/// The answer of `get_symbols`.
#[derive(Debug, Clone, Serialize)]
pub struct SymbolSources {
    pub symbols: Vec<SymbolSource>,
    /// Names with no definition in the index.
    pub missing: Vec<String>,
    /// `path:start-end` of definitions that did not fit the budget.
    pub over_budget: Vec<String>,
    /// `path:start-end` of definitions the session was already sent.
    pub already_sent: Vec<String>,
    pub tokens_used: usize,
    pub budget: usize,
    pub text: String,
}

fn bad(msg: String) -> SearchError {
    SearchError::BadRequest(msg)
}

/// The indexed files `target` names: the path itself, the files under a folder, or a module's files.
pub fn resolve_target(target: &str, files: &[String]) -> Vec<String> {
    let t = target.trim().trim_start_matches("./").trim_end_matches('/');
    if t.is_empty() {
        return Vec::new();
    }
    if let Some(f) = files.iter().find(|f| *f == t) {
        return vec![f.clone()];
    }
    let folder = format!("{t}/");
    let under: Vec<String> = files.iter().filter(|f| f.starts_with(&folder)).cloned().collect();
    if !under.is_empty() {
        return under;
    }
    let module = t.trim_start_matches("crate::").replace("::", "/").replace('.', "/");
    let stem = |f: &str| f.rsplit_once('.').map_or(f, |(s, _)| s).to_string();
    let matches = |s: &str, m: &str| s == m || s.ends_with(&format!("/{m}"));
    files
        .iter()
        .filter(|f| {
            let s = stem(f);
            matches(&s, &module) || ["__init__", "mod", "index"].iter().any(|i| matches(&s, &format!("{module}/{i}")))
        })
        .cloned()
        .collect()
}

/// Nesting depth of each row (by its parent chain within the file).
fn depths(rows: &[SymbolRow]) -> Vec<usize> {
    let by_symbol: HashMap<&str, &SymbolRow> = rows.iter().map(|r| (r.symbol.as_str(), r)).collect();
    rows.iter()
        .map(|r| {
            let (mut d, mut p) = (0, r.parent.as_deref());
            while let Some(name) = p {
                d += 1;
                p = by_symbol.get(name).and_then(|q| q.parent.as_deref());
                if d > 32 {
                    break;
                }
            }
            d
        })
        .collect()
}

fn source_key(s: &SymbolSource) -> String {
    let mut h = std::hash::DefaultHasher::new();
    s.source.hash(&mut h);
    format!("sym:{}:{}-{}:{:016x}", s.path, s.start_line, s.end_line, h.finish())
}

impl Assembler {
    /// A file's, folder's or module's outline (see the module docs).
    pub async fn list_symbols(&self, req: &ListSymbolsRequest) -> Result<Outline, SearchError> {
        if let Some(id) = &req.session {
            session::validate_id(id)?;
        }
        let (index, _) =
            self.searcher().retriever().current().index_as_of(req.as_of.as_deref(), req.source.as_ref()).await?;
        let files: Vec<String> = index.reads().files().await?.into_iter().map(|(p, _, _)| p).collect();
        let mut paths = resolve_target(&req.target, &files);
        if paths.is_empty() {
            return Err(bad(format!(
                "no indexed file, folder or module matches '{}': give a path relative to the indexed root \
                 (src/a.rs), a folder (src/), or a module (pkg.mod, crate::a::b)",
                req.target.chars().take(200).collect::<String>()
            )));
        }
        paths.sort();
        let more_files = paths.len().saturating_sub(MAX_OUTLINE_FILES);
        paths.truncate(MAX_OUTLINE_FILES);
        let mut by_path: BTreeMap<String, Vec<SymbolRow>> = paths.iter().map(|p| (p.clone(), Vec::new())).collect();
        for row in index.symbols().symbols_in_paths(&paths).await? {
            if req.kinds.is_empty() || req.kinds.iter().any(|k| k.eq_ignore_ascii_case(&row.kind)) {
                by_path.entry(row.path.clone()).or_default().push(row);
            }
        }
        let mut out = Vec::new();
        let mut text = String::new();
        for (path, mut rows) in by_path {
            rows.sort_by_key(|r| (r.start_line, std::cmp::Reverse(r.end_line)));
            let depth = depths(&rows);
            text.push_str(&format!("{path}:\n"));
            let symbols: Vec<OutlineSymbol> = rows
                .into_iter()
                .zip(depth)
                .map(|(r, depth)| {
                    let doc = r.doc.as_deref().and_then(|d| d.lines().map(str::trim).find(|l| !l.is_empty()));
                    let doc = doc.map(|d| d.chars().take(160).collect::<String>());
                    let indent = "  ".repeat(depth + 1);
                    let sig = crate::compress::one_line(&r.signature);
                    text.push_str(&format!("{indent}{}-{} {sig}", r.start_line, r.end_line));
                    if let Some(d) = &doc {
                        text.push_str(&format!("  # {d}"));
                    }
                    text.push('\n');
                    OutlineSymbol {
                        symbol: r.symbol,
                        kind: r.kind,
                        start_line: r.start_line,
                        end_line: r.end_line,
                        signature: sig,
                        doc,
                        depth,
                    }
                })
                .collect();
            out.push(FileOutline { path, symbols });
        }
        if more_files > 0 {
            text.push_str(&format!("(+{more_files} more files: name a narrower folder)\n"));
        }
        let tokens = self.tokens().count(&text);
        if let Some(id) = &req.session {
            self.sessions().record(id, Tool::Symbols, &[], tokens, 0);
        }
        Ok(Outline { files: out, more_files, text, tokens })
    }

    /// Many definitions' sources within a budget (see the module docs).
    pub async fn get_symbols(&self, req: &GetSymbolsRequest) -> Result<SymbolSources, SearchError> {
        if req.names.is_empty() || req.names.len() > MAX_NAMES {
            return Err(bad(format!("names: give 1 to {MAX_NAMES} names (got {})", req.names.len())));
        }
        if let Some(n) = req.names.iter().find(|n| n.trim().is_empty() || n.len() > 300) {
            return Err(bad(format!(
                "names: '{}' is not a definition name (empty or over 300 bytes)",
                n.chars().take(40).collect::<String>()
            )));
        }
        if req.budget == 0 || req.budget > MAX_BUDGET {
            return Err(bad(format!("budget must be between 1 and {MAX_BUDGET} tokens")));
        }
        if let Some(id) = &req.session {
            session::validate_id(id)?;
        }
        let (index, _) =
            self.searcher().retriever().current().index_as_of(req.as_of.as_deref(), req.source.as_ref()).await?;
        let names: Vec<String> = req.names.iter().map(|n| n.trim().to_string()).collect();
        let rows = index.symbols().symbols_named_any(&names, names.len() * PER_NAME * 4).await?;
        let mut paths: Vec<String> = rows.iter().map(|r| r.path.clone()).collect();
        paths.sort();
        paths.dedup();
        let chunks = index.reads().chunks_of_paths(&paths).await?;
        let mut found: Vec<SymbolSource> = Vec::new();
        let mut missing = Vec::new();
        for name in &names {
            let mut mine: Vec<&SymbolRow> =
                rows.iter().filter(|r| r.name == *name || r.symbol == *name || r.qualified_name == *name).collect();
            mine.sort_by(|a, b| (&a.path, a.start_line).cmp(&(&b.path, b.start_line)));
            if mine.is_empty() {
                missing.push(name.clone());
            }
            for r in mine.into_iter().take(PER_NAME) {
                let inside =
                    |s: &SymbolSource| s.path == r.path && s.start_line <= r.start_line && r.end_line <= s.end_line;
                if found.iter().any(inside) {
                    continue;
                }
                let lines =
                    chunks.get(&r.path).map(|c| indexed_lines(c, r.start_line..=r.end_line)).unwrap_or_default();
                if lines.is_empty() {
                    continue;
                }
                found.push(SymbolSource {
                    name: name.clone(),
                    qualified_name: r.qualified_name.clone(),
                    kind: r.kind.clone(),
                    path: r.path.clone(),
                    start_line: r.start_line,
                    end_line: r.end_line,
                    source: lines.values().cloned().collect::<Vec<_>>().join("\n"),
                    tokens: 0,
                });
            }
        }
        let keys: Vec<String> = found.iter().map(source_key).collect();
        let sent = match &req.session {
            Some(id) => self.sessions().already_sent(id, &keys.iter().map(String::as_str).collect::<Vec<_>>()),
            None => HashMap::new(),
        };
        let (mut symbols, mut over_budget, mut already_sent, mut newly) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let mut text = String::new();
        let mut used = 0;
        for (mut s, key) in found.into_iter().zip(keys) {
            let cite = format!("{}:{}-{}", s.path, s.start_line, s.end_line);
            if sent.contains_key(&key) {
                already_sent.push(cite);
                continue;
            }
            let block = format!("### {} {} — {cite}\n```\n{}\n```\n", s.kind, s.qualified_name, s.source);
            s.tokens = self.tokens().count(&block);
            if used + s.tokens > req.budget {
                over_budget.push(cite);
                continue;
            }
            used += s.tokens;
            text.push_str(&block);
            newly.push((key, cite));
            symbols.push(s);
        }
        if !already_sent.is_empty() {
            let line = format!("already sent: {}\n", already_sent.join(", "));
            used += self.tokens().count(&line);
            text.push_str(&line);
        }
        if let Some(id) = &req.session {
            self.sessions().record(id, Tool::Symbols, &newly, used, already_sent.len());
        }
        Ok(SymbolSources { symbols, missing, over_budget, already_sent, tokens_used: used, budget: req.budget, text })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_resolve_to_paths_folders_and_modules() {
        let files: Vec<String> =
            ["src/pkg/__init__.py", "src/pkg/core.py", "src/pkg/sub/x.py", "crates/a/src/b/mod.rs", "web/ui/index.ts"]
                .map(String::from)
                .to_vec();
        assert_eq!(resolve_target("src/pkg/core.py", &files), ["src/pkg/core.py"]);
        assert_eq!(resolve_target("src/pkg/sub/", &files), ["src/pkg/sub/x.py"]);
        assert_eq!(resolve_target("pkg.core", &files), ["src/pkg/core.py"]);
        assert_eq!(resolve_target("pkg", &files), ["src/pkg/__init__.py"]);
        assert_eq!(resolve_target("crate::b", &files), ["crates/a/src/b/mod.rs"]);
        assert_eq!(resolve_target("ui", &files), ["web/ui/index.ts"]);
        assert!(resolve_target("nothing.here", &files).is_empty());
        assert!(resolve_target("  ", &files).is_empty());
        assert!(resolve_target("../etc/passwd", &files).is_empty());
    }
}
