//! Building a [`CodeGraph`] from one version's files, definitions and stored edges: imports
//! resolved to files, names resolved to definitions (scope, file, imports with one re-export
//! hop, unique project name; see the module docs of [`crate::graph`]).

use std::collections::HashMap;

use ctxd_index::{edges::EdgeKind, edges::EdgeRow, symbols::SymbolRow};

use super::resolve::{resolve_import, FileSet};
use super::{is_test_path, CodeGraph, Edge};

/// Separator between a definition's parent and its name in chunk symbols of `language`.
fn member_sep(language: &str) -> &'static str {
    if matches!(language, "rust" | "cpp" | "php") {
        "::"
    } else {
        "."
    }
}

/// Splits a name as written into (head, last): `os.path.join` → (`os.path`, `join`),
/// `Foo::new` → (`Foo`, `new`), `helper` → (None, `helper`).
fn split_name(target: &str) -> (Option<&str>, &str) {
    let cut = target.rfind("::").map(|i| (i, 2)).or_else(|| target.rfind('.').map(|i| (i, 1)));
    match cut {
        Some((i, w)) if i > 0 => (Some(&target[..i]), &target[i + w..]),
        _ => (None, target.trim_start_matches(['.', ':'])),
    }
}

/// Builds the graph of `files` (every indexed path), `symbols` and `edges` of one version.
pub fn build(files: Vec<String>, symbols: Vec<SymbolRow>, edges: Vec<EdgeRow>, versions: (u64, u64, u64)) -> CodeGraph {
    let mut g = CodeGraph { versions, ..CodeGraph::default() };
    let mut all: Vec<String> = files;
    all.extend(symbols.iter().map(|s| s.path.clone()));
    all.extend(edges.iter().map(|e| e.path.clone()));
    all.sort();
    all.dedup();
    g.file_ids = all.iter().enumerate().map(|(i, p)| (p.clone(), i)).collect();
    g.is_test = all.iter().map(|p| is_test_path(p)).collect();
    for (f, p) in all.iter().enumerate() {
        let stem = p.rsplit('/').next().unwrap_or(p).split('.').next().unwrap_or("").to_ascii_lowercase();
        if stem.len() >= 3 && !matches!(stem.as_str(), "__init__" | "index" | "mod" | "lib" | "main" | "utils" | "util")
        {
            g.by_stem.entry(stem).or_default().push(f);
        }
    }
    g.by_file = vec![Vec::new(); all.len()];
    g.out_of_file = vec![Vec::new(); all.len()];
    g.into_file = vec![Vec::new(); all.len()];
    g.files = all;
    g.symbol_file = symbols.iter().map(|s| g.file_ids[&s.path]).collect();
    for (i, s) in symbols.iter().enumerate() {
        g.by_name.entry(s.name.clone()).or_default().push(i);
        g.by_file[g.symbol_file[i]].push(i);
    }
    g.symbols = symbols;
    for list in &mut g.by_file {
        list.sort_by_key(|&i| (g.symbols[i].start_line, i));
    }
    g.into_symbol = vec![Vec::new(); g.symbols.len()];
    let set = FileSet::new(g.files.iter().cloned());
    // (file, chunk symbol) → definition.
    let mut by_symbol: HashMap<(usize, &str), usize> = HashMap::new();
    for (i, s) in g.symbols.iter().enumerate() {
        by_symbol.entry((g.symbol_file[i], s.symbol.as_str())).or_insert(i);
    }
    // Imports first: names resolve through them.
    let mut resolved: Vec<Edge> = Vec::with_capacity(edges.len());
    for row in edges {
        let file = g.file_ids[&row.path];
        let from = row.from_symbol.as_deref().and_then(|s| by_symbol.get(&(file, s)).copied());
        let to_files = match row.kind {
            EdgeKind::Imports => resolve_import(&set, &row.language, &row.path, &row.target, row.name.as_deref())
                .iter()
                .filter_map(|p| g.file_ids.get(p).copied())
                .collect(),
            _ => Vec::new(),
        };
        resolved.push(Edge { row, from, to_symbols: Vec::new(), to_files });
    }
    // The names each file imports: name → files it comes from; module aliases: name → files.
    let mut imported: Vec<HashMap<String, Vec<usize>>> = vec![HashMap::new(); g.files.len()];
    for e in resolved.iter().filter(|e| e.row.kind == EdgeKind::Imports) {
        let file = g.file_ids[&e.row.path];
        let key = match e.row.name.as_deref() {
            Some(n) => n,
            // `import a.b.c` binds `a.b.c` (and `c` for Rust/Go/JS-style module names).
            None => e.row.target.rsplit(['.', '/', ':']).next().unwrap_or(&e.row.target),
        };
        imported[file].entry(key.to_string()).or_default().extend(e.to_files.iter().copied());
        if e.row.name.is_none() {
            imported[file].entry(e.row.target.clone()).or_default().extend(e.to_files.iter().copied());
        }
    }
    let targets: Vec<Vec<usize>> = resolved
        .iter()
        .map(|e| {
            let file = g.file_ids[&e.row.path];
            match e.row.kind {
                EdgeKind::Imports => match e.row.name.as_deref() {
                    Some(n) => name_in_files(&g, &imported, n, &e.to_files, true),
                    None => Vec::new(),
                },
                _ => resolve_name(&g, &imported, e, file),
            }
        })
        .collect();
    for (e, t) in resolved.iter_mut().zip(targets) {
        e.to_symbols = t;
    }
    for (id, e) in resolved.iter().enumerate() {
        if e.to_symbols.is_empty() && e.row.kind != EdgeKind::Imports {
            let last = e.row.target.rsplit(['.', ':']).next().unwrap_or(&e.row.target);
            g.unresolved_by_name.entry(last.to_string()).or_default().push(id);
        }
        g.out_of_file[g.file_ids[&e.row.path]].push(id);
        for &s in &e.to_symbols {
            g.into_symbol[s].push(id);
        }
        for &f in &e.to_files {
            g.into_file[f].push(id);
        }
    }
    g.edges = resolved;
    g
}

/// The names each file imports: name → the files it comes from.
type Imported = [HashMap<String, Vec<usize>>];

/// The top-level definitions named `name` in `files`; with `reexport`, when none, those the
/// files import under that name (a package's `__init__.py` re-exporting a submodule's class).
fn name_in_files(g: &CodeGraph, imported: &Imported, name: &str, files: &[usize], reexport: bool) -> Vec<usize> {
    let top_named =
        |f: usize| g.by_file[f].iter().copied().filter(|&i| g.symbols[i].name == name && g.symbols[i].parent.is_none());
    let mut out: Vec<usize> = files.iter().flat_map(|&f| top_named(f)).collect();
    if out.is_empty() && reexport {
        for &f in files {
            if let Some(from) = imported[f].get(name) {
                out.extend(from.iter().flat_map(|&f2| top_named(f2)));
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// The members named `name` of the definitions `owners` (`Owner.name`, `Owner::name`).
fn members(g: &CodeGraph, owners: &[usize], name: &str) -> Vec<usize> {
    let mut out = Vec::new();
    for &o in owners {
        let owner = &g.symbols[o];
        let want = format!("{}{}{name}", owner.symbol, member_sep(&owner.language));
        out.extend(g.by_file[g.symbol_file[o]].iter().copied().filter(|&i| g.symbols[i].symbol == want));
    }
    out
}

/// Resolves a call/reference/inherits edge's name (see the module docs for the order).
fn resolve_name(g: &CodeGraph, all_imported: &Imported, e: &Edge, file: usize) -> Vec<usize> {
    let imported = &all_imported[file];
    let in_files = |name: &str, files: &[usize], reexport: bool| name_in_files(g, all_imported, name, files, reexport);
    let target = e.row.target.as_str();
    let (head, last) = split_name(target);
    if last.is_empty() {
        return Vec::new();
    }
    // The enclosing scope: self.x / this.x / cls.x / Self::x → a member of the enclosing type.
    if let Some(h) = head {
        if matches!(h, "self" | "this" | "cls" | "Self" | "super") {
            let owner = e.from.and_then(|f| enclosing_type(g, f));
            let found = owner.map(|o| members(g, &[o], last)).unwrap_or_default();
            if !found.is_empty() || h != "super" {
                return found;
            }
        }
    }
    // A nested definition of the enclosing one, then the same file (top level).
    if head.is_none() {
        if let Some(f) = e.from {
            let nested = members(g, &[f], last);
            if !nested.is_empty() {
                return nested;
            }
        }
        let same = in_files(last, &[file], false);
        if !same.is_empty() {
            return same;
        }
        if let Some(files) = imported.get(last) {
            let found = in_files(last, files, true);
            if !found.is_empty() {
                return found;
            }
        }
    } else if let Some(h) = head {
        // `module.name` through an imported module, `Type.member` / `Type::member` through a
        // type defined here or imported.
        let h_last = h.rsplit(['.', ':']).find(|s| !s.is_empty()).unwrap_or(h);
        if let Some(files) = imported.get(h).or_else(|| imported.get(h_last)) {
            let found = in_files(last, files, true);
            if !found.is_empty() {
                return found;
            }
            let types = in_files(h_last, files, true);
            let found = members(g, &types, last);
            if !found.is_empty() {
                return found;
            }
        }
        let types = in_files(h_last, &[file], false);
        let found = members(g, &types, last);
        if !found.is_empty() {
            return found;
        }
        let types = unique(g, h_last);
        let found = members(g, &types, last);
        if !found.is_empty() {
            return found;
        }
        if matches!(h, "self" | "this" | "cls" | "Self") {
            return Vec::new();
        }
    }
    unique(g, last)
}

/// The definitions named `name` when exactly one non-test definition (top-level or member)
/// has that name in the project.
fn unique(g: &CodeGraph, name: &str) -> Vec<usize> {
    let all: Vec<usize> =
        g.by_name.get(name).into_iter().flatten().copied().filter(|&i| !g.is_test[g.symbol_file[i]]).collect();
    if all.len() == 1 {
        all
    } else {
        Vec::new()
    }
}

/// The type a definition belongs to: itself when it is a type, else its parent in its file.
fn enclosing_type(g: &CodeGraph, def: usize) -> Option<usize> {
    let s = &g.symbols[def];
    let parent = s.parent.as_deref()?;
    g.by_file[g.symbol_file[def]].iter().copied().find(|&i| g.symbols[i].symbol == parent)
}

/// A function `name` at lines 1–3 of `path`, for the tests that build a graph by hand.
#[cfg(test)]
pub(crate) fn test_def(path: &str, name: &str) -> SymbolRow {
    SymbolRow {
        symbol_id: format!("{path}#{name}"),
        name: name.into(),
        qualified_name: name.into(),
        symbol: name.into(),
        kind: "function".into(),
        language: "python".into(),
        path: path.into(),
        start_line: 1,
        end_line: 3,
        signature: format!("def {name}()"),
        parent: None,
        doc: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn sym(path: &str, symbol: &str, kind: &str, lines: (u32, u32)) -> SymbolRow {
        let (parent, name) = match symbol.rsplit_once('.') {
            Some((p, n)) => (Some(p.to_string()), n.to_string()),
            None => (None, symbol.to_string()),
        };
        SymbolRow {
            symbol_id: format!("{path}#{symbol}"),
            name,
            qualified_name: symbol.into(),
            symbol: symbol.into(),
            kind: kind.into(),
            language: "python".into(),
            path: path.into(),
            start_line: lines.0,
            end_line: lines.1,
            signature: format!("def {symbol}"),
            parent,
            doc: None,
        }
    }

    fn edge(path: &str, from: Option<&str>, kind: EdgeKind, target: &str, name: Option<&str>, line: u32) -> EdgeRow {
        EdgeRow::new(path, "python", from, kind, target, name, line)
    }

    #[test]
    fn names_resolve_by_scope_file_imports_and_uniqueness() {
        let files =
            vec!["pkg/__init__.py".into(), "pkg/util.py".into(), "pkg/app.py".into(), "tests/test_app.py".into()];
        let symbols = vec![
            sym("pkg/util.py", "helper", "function", (1, 3)),
            sym("pkg/util.py", "Base", "class", (5, 9)),
            sym("pkg/app.py", "App", "class", (3, 20)),
            sym("pkg/app.py", "App.run", "method", (4, 10)),
            sym("pkg/app.py", "App.stop", "method", (11, 20)),
            sym("pkg/app.py", "helper", "function", (22, 24)),
            sym("tests/test_app.py", "test_run", "function", (3, 6)),
        ];
        let edges = vec![
            edge("pkg/__init__.py", None, EdgeKind::Imports, ".util", Some("Base"), 1),
            edge("pkg/app.py", None, EdgeKind::Imports, "pkg", Some("Base"), 1),
            edge("pkg/app.py", Some("App"), EdgeKind::Inherits, "Base", None, 3),
            edge("pkg/app.py", Some("App.run"), EdgeKind::Calls, "self.stop", None, 5),
            edge("pkg/app.py", Some("App.run"), EdgeKind::Calls, "helper", None, 6),
            edge("pkg/app.py", Some("App.run"), EdgeKind::Calls, "nowhere", None, 7),
            edge("tests/test_app.py", None, EdgeKind::Imports, "pkg.app", Some("App"), 1),
            edge("tests/test_app.py", Some("test_run"), EdgeKind::Calls, "App.run", None, 4),
        ];
        let g = build(files, symbols, edges, (1, 1, 1));
        let sym_of = |e: &Edge| e.to_symbols.iter().map(|&i| g.symbols[i].symbol.clone()).collect::<Vec<_>>();
        let path_of = |e: &Edge| e.to_symbols.iter().map(|&i| g.symbols[i].path.clone()).collect::<Vec<_>>();
        let by_line =
            |path: &str, line: u32| g.edges.iter().find(|e| e.row.path == path && e.row.line == line).unwrap();
        // Inherits through a package re-export (pkg/__init__.py imports Base from .util).
        let inh = g.edges.iter().find(|e| e.row.kind == EdgeKind::Inherits).unwrap();
        assert_eq!((sym_of(inh), path_of(inh)), (vec!["Base".to_string()], vec!["pkg/util.py".to_string()]));
        assert_eq!(sym_of(by_line("pkg/app.py", 5)), vec!["App.stop"], "self.x → member of the enclosing class");
        assert_eq!(path_of(by_line("pkg/app.py", 6)), vec!["pkg/app.py"], "same file before the unique name");
        assert!(by_line("pkg/app.py", 7).to_symbols.is_empty(), "unresolved names stay names");
        assert_eq!(sym_of(by_line("tests/test_app.py", 4)), vec!["App.run"], "Type.member through an import");
        let app = g.file("pkg/app.py").unwrap();
        assert!(g.into_file[app].iter().any(|&e| g.edges[e].row.path == "tests/test_app.py"));
        assert!(g.is_test[g.file("tests/test_app.py").unwrap()]);
        assert_eq!(g.lookup("App.run").len(), 1);
        assert_eq!(g.lookup("helper").len(), 2);
        assert_eq!(g.symbol_at(app, 6).map(|i| g.symbols[i].symbol.clone()).as_deref(), Some("App.run"));
    }
}
