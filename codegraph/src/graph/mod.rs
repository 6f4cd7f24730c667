//! The code graph, read side: the files, definitions and edges of one index version, with
//! every stored edge target resolved, in memory, for the graph tools and localization.
//!
//! The index stores each file's outgoing edges as written (`ctxd_index::edges::EdgeRow`: an import's
//! module spec, a call's name); they are resolved here, against the files and definitions of the
//! same version, so an edit of one file never leaves another file's edges stale:
//!
//! * **imports** → indexed files ([`resolve::resolve_import`]: Python packages and relative
//!   imports, Rust `mod`/`use`, JS/TS relative and index imports, Go packages, Java packages);
//! * **calls / references / inherits** → definitions, in this order: the enclosing scope
//!   (`self.x` / `this.x` → a member of the enclosing class), the same file, the names the file
//!   imports (following one re-export hop through a package's `__init__.py`/`index.ts`/`mod.rs`),
//!   then a name unique in the project; an edge that resolves to nothing keeps its name
//!   ([`uses`] answers name-only uses as unresolved references);
//! * **contains** come from the symbols' `parent`; **tests** are the imports and calls of test
//!   files and test functions ([`is_test_path`]).
//!
//! [`build::build`] makes a [`CodeGraph`]; [`cache::GraphCache`] keeps one per index version (built
//! in a blocking task, shared by every request of that version) with its [`def_index::DefIndex`]
//! (the definitions as words, for localization); [`uses`] answers
//! `find_references`, `callers`, `callees`, `imports`, `imported_by`; [`impact`] ranks what a
//! change touches; [`rank`] is the file-level propagation (personalised PageRank) that
//! localization and `repo_map` use; [`repo_map`] packs an aider-style map into a token budget.

pub(crate) mod build;
pub mod cache;
pub(crate) mod def_index;
pub mod impact;
pub(crate) mod rank;
pub(crate) mod repo_map;
pub(crate) mod resolve;
pub mod uses;

use std::collections::HashMap;

use ctxd_index::{edges::EdgeKind, edges::EdgeRow, symbols::SymbolRow};
use serde::Serialize;

/// One resolved edge.
#[derive(Debug, Clone)]
pub struct Edge {
    pub row: EdgeRow,
    /// The definition the edge starts in (index into [`CodeGraph::symbols`]); `None` at file level.
    pub from: Option<usize>,
    /// The definitions a name resolves to (calls, references, inherits; for imports of a name,
    /// that name's definition).
    pub to_symbols: Vec<usize>,
    /// The files an import resolves to (empty for names outside the root).
    pub to_files: Vec<usize>,
}

/// The graph of one index version.
#[derive(Debug, Default)]
pub struct CodeGraph {
    /// Every indexed file, by id (`files[i]`).
    pub files: Vec<String>,
    pub file_ids: HashMap<String, usize>,
    /// Every definition.
    pub symbols: Vec<SymbolRow>,
    /// File id of each definition.
    pub symbol_file: Vec<usize>,
    pub edges: Vec<Edge>,
    /// Definition ids by name (`name` column).
    pub by_name: HashMap<String, Vec<usize>>,
    /// Definition ids of each file, by start line.
    pub by_file: Vec<Vec<usize>>,
    /// Edge ids starting in each file.
    pub out_of_file: Vec<Vec<usize>>,
    /// Edge ids resolved to each definition.
    pub into_symbol: Vec<Vec<usize>>,
    /// Import edge ids resolved to each file.
    pub into_file: Vec<Vec<usize>>,
    /// Call/reference/inherits edge ids that resolved to nothing, by the last segment of
    /// their name (`obj.parse` → `parse`): the unresolved uses a symbol tool lists.
    pub unresolved_by_name: HashMap<String, Vec<usize>>,
    /// Whether each file is a test file.
    pub is_test: Vec<bool>,
    /// File ids by lowercase file stem (`L031` → `rules/L031.py`), for names a text uses;
    /// stems shorter than 3 and the generic ones (`__init__`, `index`, `mod`, `lib`, `main`,
    /// `utils`, `util`) left out.
    pub by_stem: HashMap<String, Vec<usize>>,
    /// `(chunks, symbols, edges)` versions this graph was built from.
    pub versions: (u64, u64, u64),
}

impl CodeGraph {
    /// The id of an indexed path.
    pub fn file(&self, path: &str) -> Option<usize> {
        self.file_ids.get(path).copied()
    }

    /// Definitions matching `name`: its own name, its symbol (`Class.method`, `Type::new`) or
    /// its qualified name (`pkg.mod.Class`); best (exact qualified/symbol match) first.
    pub fn lookup(&self, name: &str) -> Vec<usize> {
        let name = name.trim().trim_end_matches("()");
        let last = name.rsplit(['.', ':']).next().unwrap_or(name);
        let mut out: Vec<usize> = self
            .by_name
            .get(last)
            .into_iter()
            .flatten()
            .copied()
            .filter(|&i| {
                let s = &self.symbols[i];
                last == name
                    || s.symbol == name
                    || s.qualified_name == name
                    || s.qualified_name.ends_with(&format!(".{name}"))
                    || s.qualified_name.ends_with(&format!("::{name}"))
                    || s.symbol.ends_with(&format!(".{name}"))
                    || s.symbol.ends_with(&format!("::{name}"))
            })
            .collect();
        out.sort_by_key(|&i| (self.is_test[self.symbol_file[i]], self.symbols[i].parent.is_some(), i));
        out
    }

    /// The innermost definition of file `file` that spans `line`.
    pub fn symbol_at(&self, file: usize, line: u32) -> Option<usize> {
        self.by_file[file]
            .iter()
            .copied()
            .filter(|&i| self.symbols[i].start_line <= line && line <= self.symbols[i].end_line)
            .min_by_key(|&i| self.symbols[i].end_line - self.symbols[i].start_line)
    }

    /// Number of edges of each kind (for status lines and benchmarks).
    pub fn edge_counts(&self) -> Vec<(EdgeKind, usize)> {
        EdgeKind::ALL.iter().map(|k| (*k, self.edges.iter().filter(|e| e.row.kind == *k).count())).collect()
    }
}

/// A place in the index an answer cites.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Place {
    pub path: String,
    pub start_line: u32,
    pub end_line: u32,
    /// The definition there, as the chunks name it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub symbol: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The definition's first code line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
}

impl Place {
    /// The place of definition `i`.
    pub fn of_symbol(g: &CodeGraph, i: usize) -> Self {
        let s = &g.symbols[i];
        Place {
            path: s.path.clone(),
            start_line: s.start_line,
            end_line: s.end_line,
            symbol: Some(s.symbol.clone()),
            kind: Some(s.kind.clone()),
            signature: Some(s.signature.clone()),
        }
    }
}

/// Whether a path is a test file: under a `test`/`tests`/`testing`/`__tests__`/`spec` folder,
/// or named `test_*`, `*_test.*`, `*_tests.*`, `*.test.*`, `*.spec.*`, `conftest.py`,
/// `*Test.java`/`*Tests.java`.
pub fn is_test_path(path: &str) -> bool {
    let lower = path.to_ascii_lowercase();
    let mut parts = lower.split('/');
    let file = parts.next_back().unwrap_or("");
    if lower
        .split('/')
        .rev()
        .skip(1)
        .any(|d| matches!(d, "test" | "tests" | "testing" | "__tests__" | "spec" | "specs"))
    {
        return true;
    }
    let stem = file.split('.').next().unwrap_or(file);
    let orig_stem = path.rsplit('/').next().unwrap_or(path).split('.').next().unwrap_or("");
    file.starts_with("test_")
        || stem.ends_with("_test")
        || stem.ends_with("_tests")
        || file.contains(".test.")
        || file.contains(".spec.")
        || file == "conftest.py"
        || ((orig_stem.ends_with("Test") || orig_stem.ends_with("Tests")) && file.ends_with(".java"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_paths() {
        for p in
            ["tests/test_a.py", "pkg/tests/util.py", "a_test.go", "src/x.test.ts", "conftest.py", "src/FooTest.java"]
        {
            assert!(is_test_path(p), "{p}");
        }
        for p in ["src/testing_utils_not.py", "pkg/contest.py", "src/attest.rs", "latest/x.py"] {
            assert!(!is_test_path(p), "{p}");
        }
    }
}
