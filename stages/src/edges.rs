//! The code graph's edges, read from a file's tree-sitter tree: what the file imports, and
//! what each of its definitions calls, references and inherits from ([`ctxd_index::edges::EdgeRow`],
//! targets as written; the query side resolves them).
//!
//! * **Imports** for every language with a grammar: one edge per imported module or name,
//!   relative specs kept as written (`..util`, `./x`, `super::x`, `mod:foo`).
//! * **Calls, References, Inherits** for Python, Rust, JavaScript/TypeScript/TSX, Go and Java
//!   (one module each, their docs say which forms): calls of plain names and member chains,
//!   constructors; types, decorators/annotations, `CamelCase` names and module attributes
//!   read; bases, implemented interfaces and traits, embedded Go types. Names bound inside the
//!   definition (parameters, assignments, loop variables) and builtins are never targets;
//!   edges are deduplicated per (from, kind, target, name), the first line kept.
//!
//! `from_symbol` is the innermost enclosing definition named exactly as the chunker names its
//! chunks (the same [`crate::chunk::lang::def_info`] and the same walk: the top level, then the
//! members of each container), `None` at file level. The symbols table lists every member
//! (`chunk::members`), even of a container small enough to stay one chunk; [`fit_to_symbols`]
//! moves an edge whose definition has no row (a nameless one) to the innermost that has.
//!
//! A file that fails to parse yields what tree-sitter recovers; at most
//! [`walk::MAX_EDGES`] edges are kept per file (the rest are counted in a debug line).
//! The shared walk is in `walk.rs`; the languages in `python.rs`, `rust.rs`,
//! `javascript.rs`, `go.rs`, `java.rs`; the imports of the others in `imports.rs`.

mod go;
mod imports;
mod java;
mod javascript;
mod python;
mod rust;
mod walk;

#[cfg(test)]
mod fixture;

use std::collections::HashSet;

use ctxd_index::{edges::EdgeRow, symbols::SymbolRow};

use crate::chunk::grammar;

/// The rules of a language with a grammar.
fn rules(language: &str) -> Option<&'static dyn walk::Rules> {
    Some(match language {
        "python" => &python::Python,
        "rust" => &rust::Rust,
        "javascript" | "typescript" | "tsx" => &javascript::JavaScript,
        "go" => &go::Go,
        "java" => &java::Java,
        _ if grammar(language).is_some() => &imports::ImportsOnly,
        _ => return None,
    })
}

/// The outgoing edges of the file at `path` (relative, as indexed) written in `language`.
/// Empty for languages without a grammar.
#[cfg(test)]
pub fn extract(path: &str, language: &str, source: &str) -> Vec<EdgeRow> {
    let Some(rules) = rules(language) else { return Vec::new() };
    match crate::chunk::lang::parse(language, source) {
        Some(tree) => walk::run(path, language, source, &tree, rules),
        None => Vec::new(),
    }
}

/// [`extract`] over a tree already parsed from `source` with `language`'s grammar (the
/// chunker's), so a file is parsed once.
pub(crate) fn extract_parsed(path: &str, language: &str, source: &str, tree: &tree_sitter::Tree) -> Vec<EdgeRow> {
    match rules(language) {
        Some(rules) => walk::run(path, language, source, tree, rules),
        None => Vec::new(),
    }
}

/// The innermost of `symbol` and its parents (`A.b.c` → `A.b` → `A`) in `known`.
fn enclosing<'s>(symbol: &'s str, known: &HashSet<&str>) -> Option<&'s str> {
    let mut s = symbol;
    loop {
        if known.contains(s) {
            return Some(s);
        }
        let cut = match (s.rfind("::"), s.rfind('.')) {
            (Some(a), Some(b)) => a.max(b),
            (a, b) => a.or(b)?,
        };
        s = &s[..cut];
    }
}

/// Moves every edge to the innermost enclosing definition that is in `symbols` (the file's
/// symbol table), file level when none is; edges that become equal are merged (the first
/// line kept).
pub fn fit_to_symbols(edges: Vec<EdgeRow>, symbols: &[SymbolRow]) -> Vec<EdgeRow> {
    let known: HashSet<&str> = symbols.iter().map(|s| s.symbol.as_str()).collect();
    let mut seen = HashSet::new();
    let mut out = Vec::with_capacity(edges.len());
    for e in edges {
        let from = e.from_symbol.as_deref().and_then(|s| enclosing(s, &known)).map(str::to_string);
        if !seen.insert((from.clone(), e.kind, e.target.clone(), e.name.clone())) {
            continue;
        }
        out.push(match from == e.from_symbol {
            true => e,
            false => EdgeRow::new(&e.path, &e.language, from.as_deref(), e.kind, &e.target, e.name.as_deref(), e.line),
        });
    }
    out
}

#[cfg(test)]
pub(crate) mod testing {
    use ctxd_index::{edges::EdgeKind, edges::EdgeRow};

    /// (from, target, name) of the edges of one kind, in order.
    pub fn edges(e: &[EdgeRow], kind: EdgeKind) -> Vec<(Option<String>, String, Option<String>)> {
        e.iter().filter(|e| e.kind == kind).map(|e| (e.from_symbol.clone(), e.target.clone(), e.name.clone())).collect()
    }

    /// Expected (from, target, name) triples, written with `&str`s.
    pub fn triples(v: &[(Option<&str>, &str, Option<&str>)]) -> Vec<(Option<String>, String, Option<String>)> {
        v.iter().map(|(f, t, n)| (f.map(String::from), t.to_string(), n.map(String::from))).collect()
    }
}

#[cfg(test)]
mod tests {
    use ctxd_index::edges::EdgeKind;

    use super::*;
    use crate::chunk::testing::chunker;
    use crate::load::LoadedFile;

    fn loaded(rel: &str, language: &'static str, text: &str) -> LoadedFile {
        LoadedFile {
            rel: rel.into(),
            language,
            text: text.into(),
            file_hash: String::new(),
            lossy: false,
            sections: None,
            stream: None,
        }
    }

    const SOURCES: &[(&str, &str, &str)] = &[
        (
            "pkg/store.py",
            "python",
            "import os\n\nclass Store(Base):\n    def get(self, k):\n        return self.load(k)\n\n    \
             def load(self, k):\n        return os.path.join(k)\n\n@cached\ndef top():\n    return Store().get(1)\n",
        ),
        (
            "src/p.rs",
            "rust",
            "use std::fmt;\nmod inner {\n    pub fn f() -> Point { super::g() }\n}\nstruct Point;\n\
             impl fmt::Display for Point {\n    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result { helper(self) }\n}\n\
             trait T: Clone {\n    fn t(&self) { u() }\n}\n",
        ),
        (
            "web/c.ts",
            "typescript",
            "import {B} from './b';\nexport class C extends B {\n  m(): Q { return this.n(); }\n  n = () => go();\n}\n\
             const f = (x: R) => C.make(x);\ninterface I { z(): S }\n",
        ),
        (
            "cmd/main.go",
            "go",
            "package main\nimport \"fmt\"\ntype S struct { Base }\nfunc (s *S) Run() { s.Stop(); fmt.Println(1) }\n\
             func main() { New().Run() }\n",
        ),
        (
            "com/a/A.java",
            "java",
            "import com.b.B;\nclass A extends B {\n  void m() { n(); }\n  class Inner {\n    void k() { new A(); }\n  }\n}\n",
        ),
    ];

    /// Whatever the budget (every container opened, or every container one chunk), each
    /// `from_symbol` is a row of the file's symbol table, members included.
    #[test]
    fn every_from_symbol_is_a_chunk_symbol() {
        for (path, lang, src) in SOURCES {
            let raw = extract(path, lang, src);
            assert!(raw.iter().any(|e| e.kind != EdgeKind::Imports && e.from_symbol.is_some()), "{lang}: {raw:#?}");
            for budget in [4, 10_000] {
                let file = chunker(budget).chunk_file(&loaded(path, lang, src));
                let symbols: HashSet<&str> = file.symbols.iter().map(|s| s.symbol.as_str()).collect();
                let edges = if budget == 4 { &raw } else { &file.edges };
                for e in edges {
                    if let Some(from) = &e.from_symbol {
                        assert!(symbols.contains(from.as_str()), "{lang} budget {budget}: {from} not in {symbols:?}");
                    }
                }
                assert!(!file.edges.is_empty() && file.edges.iter().all(|e| e.path == *path && e.language == *lang));
            }
        }
        let (path, lang, src) = SOURCES[0];
        let whole = chunker(10_000).chunk_file(&loaded(path, lang, src));
        let calls = testing::edges(&whole.edges, EdgeKind::Calls);
        assert!(calls.contains(&(Some("Store.get".into()), "self.load".into(), None)), "{calls:?}");
        assert!(calls.contains(&(Some("top".into()), "Store".into(), None)), "{calls:?}");
        let raw = extract(path, lang, src);
        assert!(testing::edges(&raw, EdgeKind::Calls).contains(&(Some("Store.get".into()), "self.load".into(), None)));
    }

    #[test]
    fn fitting_merges_edges_that_become_equal() {
        let row =
            |from: Option<&str>, line| EdgeRow::new("a.py", "python", from, EdgeKind::Calls, "helper", None, line);
        let edges = vec![row(Some("C.a"), 3), row(Some("C.b"), 7), row(Some("f.inner"), 9), row(Some("D.x"), 12)];
        let symbols: Vec<SymbolRow> = crate::chunk::symbols::extract(
            "a.py",
            "python",
            &chunker(10_000).chunk("python", "class C:\n    pass\n\ndef f():\n    pass\n"),
        );
        let fitted = fit_to_symbols(edges, &symbols);
        let got: Vec<_> = fitted.iter().map(|e| (e.from_symbol.as_deref(), e.line)).collect();
        assert_eq!(got, [(Some("C"), 3), (Some("f"), 9), (None, 12)]);
        assert_eq!(fitted[0].edge_id, row(Some("C"), 3).edge_id, "ids are recomputed");
    }

    #[test]
    fn broken_and_hostile_input_never_panics() {
        let deep = format!("x = {}1{}\n", "(".repeat(3000), ")".repeat(3000));
        let garbage = "\u{0}\u{1}fn class def {{{ ]] import from ;;; \"unterminated\n\u{FEFF}é";
        for lang in ["rust", "python", "javascript", "typescript", "tsx", "go", "java", "c", "cpp", "csharp", "ruby"]
            .into_iter()
            .chain(["php", "bash", "kotlin", "scala", "lua", "swift", "markdown", "text"])
        {
            for src in [garbage, deep.as_str(), "", "\n\n"] {
                let _ = extract("x", lang, src);
            }
        }
        // What tree-sitter recovers of a broken file still yields its edges.
        let broken = "import os\nfrom .a import b\n\ndef f(:\n    return os.getcwd(\n\ndef g():\n    return helper()\n";
        let e = extract("m.py", "python", broken);
        assert_eq!(testing::edges(&e, EdgeKind::Imports).len(), 2, "{e:#?}");
        assert!(e.iter().any(|e| e.kind == EdgeKind::Calls && e.target == "helper"), "{e:#?}");
        assert!(extract("notes.md", "markdown", "# import os").is_empty());
    }

    #[test]
    fn edges_are_capped_per_file() {
        let src: String = (0..walk::MAX_EDGES + 50).map(|i| format!("f{i}()\n")).collect();
        let e = extract("big.py", "python", &src);
        assert_eq!(e.len(), walk::MAX_EDGES);
        assert_eq!(e.last().map(|e| e.target.as_str()), Some(format!("f{}", walk::MAX_EDGES - 1).as_str()));
        assert!(e.iter().all(|e| e.from_symbol.is_none() && e.kind == EdgeKind::Calls));
    }
}
