//! The graph tools' answers: `find_references` (a symbol → every use), `callers` / `callees`,
//! `imports` / `imported_by` (a file). Each cites places (path and lines) and is answered from
//! the in-memory [`CodeGraph`] of the version asked (no index I/O after the graph is built).

use std::collections::BTreeSet;

use ctxd_index::edges::EdgeKind;
use serde::Serialize;

use super::{CodeGraph, Place};
use ctxd_search::error::SearchError;

/// One use of a definition, or one edge out of a definition or file.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Use {
    /// Where the use is: the file and line of the site.
    pub path: String,
    pub line: u32,
    /// The definition the site is in (`None` at file level).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub in_symbol: Option<String>,
    /// `imports`, `calls`, `references`, `inherits`.
    pub kind: &'static str,
    /// The name as written at the site.
    pub name: String,
    /// What it resolves to (absent when it resolves to nothing inside the index).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub targets: Vec<Place>,
    /// Whether the site is in a test file.
    pub test: bool,
}

/// The answer of a symbol tool.
#[derive(Debug, Clone, Serialize)]
pub struct SymbolAnswer {
    /// The definitions the symbol named.
    pub definitions: Vec<Place>,
    pub uses: Vec<Use>,
    /// Uses of the bare name that resolved to no definition (a dynamic call, an ambiguous name).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unresolved: Vec<Use>,
}

/// The answer of a file tool.
#[derive(Debug, Clone, Serialize)]
pub struct FileAnswer {
    pub path: String,
    pub files: Vec<FileLink>,
}

/// A file linked to the asked one, with the lines of the import sites.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FileLink {
    pub path: String,
    /// Lines of the import statements (in the importing file).
    pub lines: Vec<u32>,
    /// Names imported (empty: the whole module).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub names: Vec<String>,
    pub test: bool,
}

fn use_of(g: &CodeGraph, e: usize) -> Use {
    let edge = &g.edges[e];
    let file = g.file_ids[&edge.row.path];
    Use {
        path: edge.row.path.clone(),
        line: edge.row.line,
        in_symbol: edge.row.from_symbol.clone(),
        kind: edge.row.kind.as_str(),
        name: match &edge.row.name {
            Some(n) => format!("{} ({})", n, edge.row.target),
            None => edge.row.target.clone(),
        },
        targets: edge.to_symbols.iter().map(|&s| Place::of_symbol(g, s)).collect(),
        test: g.is_test[file],
    }
}

fn definitions(g: &CodeGraph, symbol: &str) -> Result<Vec<usize>, SearchError> {
    let symbol = symbol.trim();
    if symbol.is_empty() {
        return Err(SearchError::BadRequest("symbol is empty: name a definition (`parse`, `Class.method`)".into()));
    }
    let defs = g.lookup(symbol);
    if defs.is_empty() {
        return Err(SearchError::BadRequest(format!(
            "no definition named '{symbol}' in the index: check the spelling, or search with `ctxd search --mode symbol`"
        )));
    }
    Ok(defs)
}

fn sorted(mut uses: Vec<Use>) -> Vec<Use> {
    uses.sort_by(|a, b| (a.test, &a.path, a.line).cmp(&(b.test, &b.path, b.line)));
    uses.dedup_by(|a, b| a.path == b.path && a.line == b.line && a.name == b.name);
    uses
}

/// Every use of the definitions `symbol` names (calls, references, inherits, imports of the
/// name), non-test files first; name-only uses of its bare name that resolved to nothing.
pub fn references(g: &CodeGraph, symbol: &str, kinds: &[EdgeKind], limit: usize) -> Result<SymbolAnswer, SearchError> {
    let defs = definitions(g, symbol)?;
    let uses: Vec<Use> = defs
        .iter()
        .flat_map(|&d| g.into_symbol[d].iter().copied())
        .filter(|&e| kinds.is_empty() || kinds.contains(&g.edges[e].row.kind))
        .map(|e| use_of(g, e))
        .collect();
    let name = g.symbols[defs[0]].name.as_str();
    let unresolved: Vec<Use> = g
        .unresolved_by_name
        .get(name)
        .into_iter()
        .flatten()
        .copied()
        .filter(|&e| kinds.is_empty() || kinds.contains(&g.edges[e].row.kind))
        .map(|e| use_of(g, e))
        .collect();
    let mut uses = sorted(uses);
    uses.truncate(limit);
    let mut unresolved = sorted(unresolved);
    unresolved.truncate(limit.saturating_sub(uses.len()));
    Ok(SymbolAnswer { definitions: defs.iter().map(|&d| Place::of_symbol(g, d)).collect(), uses, unresolved })
}

/// Who calls the definitions `symbol` names.
pub fn callers(g: &CodeGraph, symbol: &str, limit: usize) -> Result<SymbolAnswer, SearchError> {
    references(g, symbol, &[EdgeKind::Calls], limit)
}

/// What the definitions `symbol` names call (and, nested in them, their members call).
pub fn callees(g: &CodeGraph, symbol: &str, limit: usize) -> Result<SymbolAnswer, SearchError> {
    let defs = definitions(g, symbol)?;
    let mut uses = Vec::new();
    for &d in &defs {
        let s = &g.symbols[d];
        let file = g.symbol_file[d];
        for &e in &g.out_of_file[file] {
            let edge = &g.edges[e];
            let inside = edge.row.line >= s.start_line && edge.row.line <= s.end_line;
            if edge.row.kind == EdgeKind::Calls && inside {
                uses.push(use_of(g, e));
            }
        }
    }
    let mut uses = sorted(uses);
    uses.truncate(limit);
    Ok(SymbolAnswer { definitions: defs.iter().map(|&d| Place::of_symbol(g, d)).collect(), uses, unresolved: vec![] })
}

fn file_id(g: &CodeGraph, path: &str) -> Result<usize, SearchError> {
    let path = path.trim().trim_start_matches("./");
    g.file(path).ok_or_else(|| {
        SearchError::BadRequest(format!(
            "no indexed file '{path}': give the path relative to the indexed root (see `ctxd files`)"
        ))
    })
}

fn links(g: &CodeGraph, pairs: impl Iterator<Item = (usize, usize)>) -> Vec<FileLink> {
    // (other file, edge)
    let mut by_file: std::collections::BTreeMap<usize, (BTreeSet<u32>, BTreeSet<String>)> = Default::default();
    for (other, e) in pairs {
        let entry = by_file.entry(other).or_default();
        entry.0.insert(g.edges[e].row.line);
        if let Some(n) = &g.edges[e].row.name {
            entry.1.insert(n.clone());
        }
    }
    let mut out: Vec<FileLink> = by_file
        .into_iter()
        .map(|(f, (lines, names))| FileLink {
            path: g.files[f].clone(),
            lines: lines.into_iter().collect(),
            names: names.into_iter().collect(),
            test: g.is_test[f],
        })
        .collect();
    out.sort_by(|a, b| (a.test, &a.path).cmp(&(b.test, &b.path)));
    out
}

/// The indexed files `path` imports (imports of modules outside the root are left out).
pub fn imports(g: &CodeGraph, path: &str) -> Result<FileAnswer, SearchError> {
    let f = file_id(g, path)?;
    let pairs = g.out_of_file[f]
        .iter()
        .filter(|&&e| g.edges[e].row.kind == EdgeKind::Imports)
        .flat_map(|&e| g.edges[e].to_files.iter().map(move |&t| (t, e)))
        .filter(|&(t, _)| t != f);
    Ok(FileAnswer { path: g.files[f].clone(), files: links(g, pairs) })
}

/// The indexed files that import `path`.
pub fn imported_by(g: &CodeGraph, path: &str) -> Result<FileAnswer, SearchError> {
    let f = file_id(g, path)?;
    let pairs = g.into_file[f].iter().map(|&e| (g.file_ids[&g.edges[e].row.path], e)).filter(|&(s, _)| s != f);
    Ok(FileAnswer { path: g.files[f].clone(), files: links(g, pairs) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::build::build;
    use ctxd_index::{edges::EdgeRow, symbols::SymbolRow};

    fn sym(path: &str, symbol: &str, lines: (u32, u32)) -> SymbolRow {
        let (parent, name) = match symbol.rsplit_once('.') {
            Some((p, n)) => (Some(p.to_string()), n.to_string()),
            None => (None, symbol.to_string()),
        };
        SymbolRow {
            symbol_id: symbol.into(),
            name,
            qualified_name: symbol.into(),
            symbol: symbol.into(),
            kind: "function".into(),
            language: "python".into(),
            path: path.into(),
            start_line: lines.0,
            end_line: lines.1,
            signature: String::new(),
            parent,
            doc: None,
        }
    }

    #[test]
    fn references_callers_callees_and_imports() {
        let e =
            |p: &str, from: Option<&str>, k, t: &str, n: Option<&str>, l| EdgeRow::new(p, "python", from, k, t, n, l);
        let g = build(
            vec!["a.py".into(), "b.py".into(), "test_b.py".into()],
            vec![sym("a.py", "parse", (1, 5)), sym("b.py", "run", (3, 9)), sym("test_b.py", "test_run", (2, 4))],
            vec![
                e("b.py", None, EdgeKind::Imports, "a", Some("parse"), 1),
                e("b.py", Some("run"), EdgeKind::Calls, "parse", None, 4),
                e("test_b.py", None, EdgeKind::Imports, "b", Some("run"), 1),
                e("test_b.py", Some("test_run"), EdgeKind::Calls, "run", None, 3),
                e("test_b.py", Some("test_run"), EdgeKind::Calls, "mystery.parse", None, 4),
            ],
            (1, 1, 1),
        );
        let r = references(&g, "parse", &[], 50).unwrap();
        // `mystery.parse`: an unknown receiver, but `parse` is defined once in the project.
        assert_eq!(
            r.uses.iter().map(|u| (u.path.as_str(), u.line, u.test)).collect::<Vec<_>>(),
            vec![("b.py", 1, false), ("b.py", 4, false), ("test_b.py", 4, true)]
        );
        assert!(r.unresolved.is_empty());
        let c = callers(&g, "run", 50).unwrap();
        assert_eq!(c.uses.len(), 1);
        assert!(c.uses[0].test);
        let out = callees(&g, "run", 50).unwrap();
        assert_eq!(out.uses[0].targets[0].path, "a.py");
        assert_eq!(imports(&g, "b.py").unwrap().files[0].path, "a.py");
        let by = imported_by(&g, "b.py").unwrap();
        assert_eq!(by.files.iter().map(|f| f.path.as_str()).collect::<Vec<_>>(), vec!["test_b.py"]);
        assert!(references(&g, "nothing_here", &[], 5).unwrap_err().to_string().contains("no definition"));
        assert!(imports(&g, "zzz.py").unwrap_err().to_string().contains("no indexed file"));
    }
}
