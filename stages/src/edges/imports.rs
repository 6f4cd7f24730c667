//! Imports of the languages whose calls are not read (best effort, one form or two each):
//! C/C++ `#include "x.h"` (system `<…>` includes skipped); C# `using A.B;` (aliases and
//! `using static` too); Ruby `require 'x'`, `require_relative 'x'` → `./x`; PHP `use A\B\C;`
//! (target `A\B`, name `C`; grouped uses), `require`/`include` of a literal path
//! (`__DIR__ . '/x.php'` → `./x.php`); Bash `source x.sh` / `. x.sh` (literal paths only);
//! Kotlin `import a.b.C` / `a.b.*`; Scala `import a.b.C`, `a.b._`, `a.b.{C, D => E}`;
//! Lua `require("a.b")`; Swift `import Foundation`, `import struct Lib.Thing`.

use tree_sitter::Node;

use super::walk::{fields, line, named, text, Cx, Rules};

/// Imports only, for the languages without rules of their own.
pub(super) struct ImportsOnly;

/// The content of a string literal node (its named parts' text, or the text without quotes).
fn literal(node: Node, src: &[u8]) -> Option<String> {
    if !matches!(node.kind(), "string" | "string_literal" | "raw_string" | "word" | "encapsed_string") {
        return None;
    }
    let parts = named(node);
    if parts.iter().any(|p| p.kind().contains("expansion") || p.kind() == "variable_name") {
        return None;
    }
    let s = match parts.is_empty() {
        true => text(node, src).trim_matches(['"', '\'']).to_string(),
        false => parts.into_iter().map(|p| text(p, src)).collect(),
    };
    (!s.is_empty()).then_some(s)
}

/// Splits a qualified name at its last separator: `(scope, Some(last))`, or the whole name.
fn split_last<'s>(path: &'s str, sep: &str) -> (&'s str, Option<&'s str>) {
    match path.rsplit_once(sep) {
        Some((scope, name)) if !scope.is_empty() => (scope, Some(name)),
        _ => (path, None),
    }
}

impl ImportsOnly {
    fn php_use(node: Node, cx: &mut Cx) {
        let src = cx.src;
        let prefix = named(node).into_iter().find(|n| n.kind() == "namespace_name").map(|n| text(n, src));
        let clauses: Vec<Node> = match node.child_by_field_name("body") {
            Some(group) => named(group),
            None => named(node),
        };
        for clause in clauses.into_iter().filter(|c| c.kind() == "namespace_use_clause") {
            let Some(name) = named(clause).into_iter().find(|n| matches!(n.kind(), "qualified_name" | "name")) else {
                continue;
            };
            let full = match prefix {
                Some(p) => format!("{p}\\{}", text(name, src)),
                None => text(name, src).trim_start_matches('\\').to_string(),
            };
            let (target, last) = split_last(&full, "\\");
            cx.import(target, last, last, line(clause));
        }
    }

    fn php_require(node: Node, cx: &mut Cx) {
        let src = cx.src;
        let Some(arg) = node.named_child(0) else { return };
        let path = match arg.kind() {
            "binary_expression" => {
                let dir = arg.child_by_field_name("left").is_some_and(|l| text(l, src) == "__DIR__");
                let right = arg.child_by_field_name("right").and_then(|r| literal(r, src));
                right.filter(|_| dir).map(|r| format!(".{r}"))
            }
            _ => literal(arg, src),
        };
        if let Some(p) = path {
            cx.import(&p, None, None, line(node));
        }
    }

    /// Kotlin `import a.b.C` (target `a.b`, name `C`) and `import a.b.*` (target `a.b`).
    fn kotlin_import(node: Node, cx: &mut Cx) {
        let src = cx.src;
        let l = line(node);
        let Some(q) = named(node).into_iter().find(|n| n.kind() == "qualified_identifier") else {
            return;
        };
        let path: String = text(q, src).split_whitespace().collect();
        if text(node, src).trim_end().ends_with('*') {
            cx.import(&path, None, None, l);
        } else {
            let (target, name) = split_last(&path, ".");
            cx.import(target, name, name, l);
        }
    }

    /// Scala `import a.b.C`, `a.b._` and `a.b.{C, D => E}` (one edge per selected name).
    fn scala_import(node: Node, cx: &mut Cx) {
        let src = cx.src;
        let l = line(node);
        let path: Vec<&str> = fields(node, "path").into_iter().filter(|p| p.is_named()).map(|p| text(p, src)).collect();
        let target = path.join(".");
        match named(node).into_iter().find(|n| matches!(n.kind(), "namespace_wildcard" | "namespace_selectors")) {
            Some(w) if w.kind() == "namespace_wildcard" => cx.import(&target, None, None, l),
            Some(sel) => {
                for s in named(sel) {
                    let name = match s.kind() {
                        "identifier" => Some(s),
                        _ => s.child_by_field_name("name"),
                    };
                    if let Some(n) = name.map(|n| text(n, src)) {
                        cx.import(&target, Some(n), Some(n), line(s));
                    }
                }
            }
            None => {
                let (target, name) = split_last(&target, ".");
                cx.import(target, name, name, l);
            }
        }
    }

    /// Swift `import Foundation` and `import struct Lib.Thing` (target `Lib`, name `Thing`).
    fn swift_import(node: Node, cx: &mut Cx) {
        let src = cx.src;
        let l = line(node);
        let Some(id) = named(node).into_iter().find(|n| n.kind() == "identifier") else { return };
        let path: Vec<&str> = named(id).into_iter().map(|p| text(p, src)).collect();
        let mut c = node.walk();
        let kinds = ["typealias", "struct", "class", "enum", "protocol", "let", "var", "func"];
        let of_kind = node.children(&mut c).any(|k| !k.is_named() && kinds.contains(&k.kind()));
        match path.split_last() {
            Some((last, scope)) if of_kind && !scope.is_empty() => {
                cx.import(&scope.join("."), Some(last), Some(last), l)
            }
            _ => cx.import(&path.join("."), None, None, l),
        }
    }
}

impl Rules for ImportsOnly {
    fn visit(&self, node: Node, cx: &mut Cx) -> bool {
        let src = cx.src;
        let l = line(node);
        match node.kind() {
            // C, C++
            "preproc_include" => {
                if let Some(p) = node.child_by_field_name("path").filter(|p| p.kind() == "string_literal") {
                    if let Some(path) = literal(p, src) {
                        cx.import(&path, None, None, l);
                    }
                }
                false
            }
            // C#
            "using_directive" => {
                let alias = node.child_by_field_name("name").map(|n| n.id());
                let path = named(node)
                    .into_iter()
                    .find(|n| Some(n.id()) != alias && matches!(n.kind(), "qualified_name" | "identifier"));
                if let Some(p) = path {
                    cx.import(&text(p, src).split_whitespace().collect::<String>(), None, None, l);
                }
                false
            }
            // Ruby
            "call" if cx.language() == "ruby" => {
                let method = node.child_by_field_name("method").map(|m| text(m, src));
                let arg = node.child_by_field_name("arguments").and_then(|a| a.named_child(0));
                if let (Some(m @ ("require" | "require_relative" | "load")), Some(path)) =
                    (method, arg.and_then(|a| literal(a, src)))
                {
                    let rel = m == "require_relative" && !path.starts_with('.');
                    cx.import(&if rel { format!("./{path}") } else { path }, None, None, l);
                }
                true
            }
            // PHP
            "namespace_use_declaration" => {
                Self::php_use(node, cx);
                false
            }
            "require_expression" | "require_once_expression" | "include_expression" | "include_once_expression" => {
                Self::php_require(node, cx);
                false
            }
            // Bash
            "command" if cx.language() == "bash" => {
                let name = node.child_by_field_name("name").map(|n| text(n, src));
                if matches!(name, Some("source" | ".")) {
                    if let Some(path) = fields(node, "argument").first().and_then(|a| literal(*a, src)) {
                        cx.import(&path, None, None, l);
                    }
                }
                true
            }
            // Kotlin
            "import" if cx.language() == "kotlin" => {
                Self::kotlin_import(node, cx);
                false
            }
            // Scala
            "import_declaration" if cx.language() == "scala" => {
                Self::scala_import(node, cx);
                false
            }
            // Lua
            "function_call" if cx.language() == "lua" => {
                let name = node.child_by_field_name("name").map(|n| text(n, src));
                let arg = node.child_by_field_name("arguments").and_then(|a| a.named_child(0));
                if let (Some("require"), Some(path)) = (name, arg.and_then(|a| literal(a, src))) {
                    cx.import(&path, None, None, l);
                }
                true
            }
            // Swift
            "import_declaration" if cx.language() == "swift" => {
                Self::swift_import(node, cx);
                false
            }
            "comment" | "line_comment" | "block_comment" => false,
            _ => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use ctxd_index::edges::EdgeKind;

    use super::super::{extract, testing::edges};

    /// (target, name) of each import edge of `src`.
    fn imports(path: &str, language: &str, src: &str) -> Vec<(String, Option<String>)> {
        edges(&extract(path, language, src), EdgeKind::Imports).into_iter().map(|(_, t, n)| (t, n)).collect()
    }

    fn want(v: &[(&str, Option<&str>)]) -> Vec<(String, Option<String>)> {
        v.iter().map(|(t, n)| (t.to_string(), n.map(String::from))).collect()
    }

    #[test]
    fn c_and_cpp_local_includes() {
        let src = "#include \"x.h\"\n#include <stdio.h>\n#ifdef A\n#include \"dir/y.hpp\"\n#endif\n";
        assert_eq!(imports("a.c", "c", src), want(&[("x.h", None), ("dir/y.hpp", None)]));
        assert_eq!(imports("a.cpp", "cpp", "#include <vector>\n#include \"z.hpp\"\n"), want(&[("z.hpp", None)]));
    }

    #[test]
    fn csharp_usings() {
        let src = "using System.Text;\nusing Alias = A.B.C;\nusing static System.Math;\n";
        assert_eq!(
            imports("a.cs", "csharp", src),
            want(&[("System.Text", None), ("A.B.C", None), ("System.Math", None)])
        );
    }

    #[test]
    fn ruby_requires() {
        let src = "require 'json'\nrequire_relative 'lib/x'\nputs 'hi'\n";
        assert_eq!(imports("a.rb", "ruby", src), want(&[("json", None), ("./lib/x", None)]));
    }

    #[test]
    fn php_uses_and_requires() {
        let src = "<?php\nuse App\\Models\\User;\nuse App\\Models\\{Post, Comment as C};\nrequire_once 'x.php';\n\
                   include __DIR__ . '/y.php';\n";
        let got = imports("a.php", "php", src);
        let expected = want(&[
            ("App\\Models", Some("User")),
            ("App\\Models", Some("Post")),
            ("App\\Models", Some("Comment")),
            ("x.php", None),
            ("./y.php", None),
        ]);
        assert_eq!(got, expected);
    }

    #[test]
    fn bash_sources() {
        let src = "source ./lib.sh\n. \"$DIR/other.sh\"\n. common.sh\necho hi\n";
        assert_eq!(imports("a.sh", "bash", src), want(&[("./lib.sh", None), ("common.sh", None)]));
    }

    #[test]
    fn kotlin_and_scala_imports() {
        let kt = "import a.b.C\nimport a.b.*\nimport a.b.D as E\n";
        assert_eq!(imports("a.kt", "kotlin", kt), want(&[("a.b", Some("C")), ("a.b", None), ("a.b", Some("D"))]));
        let scala = "import a.b.C\nimport a.b._\nimport a.b.{D, E => F}\n";
        let expected = want(&[("a.b", Some("C")), ("a.b", None), ("a.b", Some("D")), ("a.b", Some("E"))]);
        assert_eq!(imports("a.scala", "scala", scala), expected);
    }

    #[test]
    fn lua_and_swift_imports() {
        let lua = "local x = require(\"a.b\")\nlocal y = require \"c\"\nprint(x)\n";
        assert_eq!(imports("a.lua", "lua", lua), want(&[("a.b", None), ("c", None)]));
        let swift = "import Foundation\nimport struct Lib.Thing\n";
        assert_eq!(imports("a.swift", "swift", swift), want(&[("Foundation", None), ("Lib", Some("Thing"))]));
    }
}
