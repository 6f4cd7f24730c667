//! Rust edges. **Imports**: every leaf of a `use` tree (`use crate::a::{b, c::D}` → target
//! `crate::a` name `b`, target `crate::a::c` name `D`; `use a::*` / `use a::{self}` → target `a`
//! without a name; `use foo;` → target `foo`), `mod foo;` → target `mod:foo`, `extern crate x`.
//! **Calls**: `f()`, paths `Foo::new()` / `crate::a::f()` (generic arguments dropped), method
//! calls `self.m()` → `self.m`, `x.m()` → `x.m`, otherwise the method name; user macros
//! (`my_macro!` → `my_macro`, standard ones skipped) and the calls written inside any macro's
//! arguments (`assert_eq!(area(c), 1.0)` → `area`). **References**: type names (signatures,
//! fields, struct literals, generics), `CamelCase` values and paths (`Color::Red` → `Color`),
//! paths on imported modules. **Inherits**: `impl Trait for Type` (from the impl, named like
//! the chunker names it: the type) and a trait's supertraits.

use std::collections::HashSet;
use std::sync::OnceLock;

use tree_sitter::Node;

use super::walk::{self, bind_name, line, listed, named, text, Cx, Rules};

/// The Rust rules.
pub(super) struct Rust;

const BUILTINS: &[&str] = &[
    "Self",
    "self",
    "Some",
    "None",
    "Ok",
    "Err",
    "Box",
    "Vec",
    "String",
    "Option",
    "Result",
    "Default",
    "Clone",
    "Copy",
    "Debug",
    "Send",
    "Sync",
    "Sized",
    "Unpin",
    "From",
    "Into",
    "TryFrom",
    "TryInto",
    "Iterator",
    "IntoIterator",
    "ToString",
    "AsRef",
    "AsMut",
    "PartialEq",
    "Eq",
    "PartialOrd",
    "Ord",
    "Hash",
    "Fn",
    "FnMut",
    "FnOnce",
    "Drop",
    "ToOwned",
    "std",
    "core",
    "alloc",
    "str",
    "bool",
    "char",
    "u8",
    "u16",
    "u32",
    "u64",
    "u128",
    "usize",
    "i8",
    "i16",
    "i32",
    "i64",
    "i128",
    "isize",
    "f32",
    "f64",
    "drop",
];

/// Macros of the standard library and the usual logging crates: not calls of project code.
const STD_MACROS: &[&str] = &[
    "println",
    "print",
    "eprintln",
    "eprint",
    "format",
    "format_args",
    "write",
    "writeln",
    "vec",
    "assert",
    "assert_eq",
    "assert_ne",
    "debug_assert",
    "debug_assert_eq",
    "debug_assert_ne",
    "panic",
    "todo",
    "unimplemented",
    "unreachable",
    "matches",
    "dbg",
    "concat",
    "stringify",
    "include_str",
    "include_bytes",
    "include",
    "env",
    "option_env",
    "cfg",
    "line",
    "file",
    "column",
    "module_path",
    "thread_local",
    "macro_rules",
    "compile_error",
    "trace",
    "debug",
    "info",
    "warn",
    "error",
    "json",
    "select",
    "join",
    "pin",
];

/// The segments of a path as written, generic arguments and a leading `::` dropped
/// (`Vec::<u8>::new` → `Vec`, `new`).
fn path_segs(path: &str) -> Vec<&str> {
    let mut depth = 0usize;
    let mut segs = Vec::new();
    let mut start = None;
    for (i, c) in path.char_indices() {
        match c {
            '<' => depth += 1,
            '>' => depth = depth.saturating_sub(1),
            _ if depth == 0 && (c.is_alphanumeric() || c == '_') => {
                start.get_or_insert(i);
                continue;
            }
            _ => {}
        }
        if let Some(s) = start.take() {
            segs.push(&path[s..i]);
        }
    }
    if let Some(s) = start {
        segs.push(&path[s..]);
    }
    segs
}

/// A trait or type as written, without generic arguments (`fmt::Display`, `Iterator`).
fn type_path(node: Node, src: &[u8]) -> Option<String> {
    let node = if node.kind() == "generic_type" { node.child_by_field_name("type")? } else { node };
    matches!(node.kind(), "type_identifier" | "scoped_type_identifier").then(|| path_segs(text(node, src)).join("::"))
}

/// One leaf of a `use` tree under `prefix`; `alias` is the name it binds when renamed.
fn use_leaf(node: Node, prefix: &str, alias: Option<&str>, cx: &mut Cx) {
    let src = cx.src;
    let join = |a: &str, b: &str| match (a.is_empty(), b.is_empty()) {
        (true, _) => b.to_string(),
        (_, true) => a.to_string(),
        _ => format!("{a}::{b}"),
    };
    let l = line(node);
    match node.kind() {
        "scoped_identifier" => {
            let path = node.child_by_field_name("path").map_or(String::new(), |p| path_segs(text(p, src)).join("::"));
            let name = node.child_by_field_name("name").map_or("", |n| text(n, src));
            cx.import(&join(prefix, &path), Some(name), Some(alias.unwrap_or(name)), l);
        }
        "self" if !prefix.is_empty() => {
            let last = prefix.rsplit("::").next().unwrap_or(prefix);
            cx.import(prefix, None, Some(alias.unwrap_or(last)), l);
        }
        "identifier" | "crate" | "super" | "self" => {
            let t = text(node, src);
            match prefix.is_empty() {
                true => cx.import(t, None, Some(alias.unwrap_or(t)), l),
                false => cx.import(prefix, Some(t), Some(alias.unwrap_or(t)), l),
            }
        }
        "use_as_clause" => {
            let alias = node.child_by_field_name("alias").map(|a| text(a, src));
            if let Some(path) = node.child_by_field_name("path") {
                use_leaf(path, prefix, alias, cx);
            }
        }
        "use_wildcard" => {
            let path = node.named_child(0).map_or(String::new(), |p| path_segs(text(p, src)).join("::"));
            cx.import(&join(prefix, &path), None, None, l);
        }
        "scoped_use_list" => {
            let path = node.child_by_field_name("path").map_or(String::new(), |p| path_segs(text(p, src)).join("::"));
            if let Some(list) = node.child_by_field_name("list") {
                let prefix = join(prefix, &path);
                for item in named(list) {
                    use_leaf(item, &prefix, None, cx);
                }
            }
        }
        "use_list" => {
            for item in named(node) {
                use_leaf(item, prefix, None, cx);
            }
        }
        _ => {}
    }
}

/// Calls written inside a macro's token tree: a name or path followed by `( … )`.
fn token_calls(tree: Node, cx: &mut Cx) {
    let src = cx.src;
    let mut stack = vec![tree];
    while let Some(t) = stack.pop() {
        let mut c = t.walk();
        let kids: Vec<Node> = t.children(&mut c).collect();
        for (i, k) in kids.iter().enumerate() {
            if k.kind() == "token_tree" {
                stack.push(*k);
                continue;
            }
            let args = kids.get(i + 1).is_some_and(|n| n.kind() == "token_tree" && text(*n, src).starts_with('('));
            if k.kind() != "identifier" || !args {
                continue;
            }
            let word = |n: &Node| matches!(n.kind(), "identifier" | "self" | "crate" | "super");
            let mut segs = vec![text(*k, src)];
            let mut j = i;
            while j >= 2 && kids[j - 1].kind() == "::" && word(&kids[j - 2]) {
                segs.push(text(kids[j - 2], src));
                j -= 2;
            }
            let mut sep = "::";
            if segs.len() == 1 && j >= 2 && kids[j - 1].kind() == "." && word(&kids[j - 2]) {
                segs.push(text(kids[j - 2], src));
                sep = ".";
            }
            segs.reverse();
            cx.call(&segs, sep, line(*k));
        }
    }
}

/// Names a pattern binds.
fn pattern(node: Node, src: &[u8], out: &mut HashSet<String>) {
    let mut stack = vec![node];
    while let Some(n) = stack.pop() {
        match n.kind() {
            "identifier" | "shorthand_field_identifier" => {
                out.insert(text(n, src).to_string());
            }
            "tuple_struct_pattern" | "struct_pattern" => {
                let ty = n.child_by_field_name("type").map(|t| t.id());
                stack.extend(named(n).into_iter().filter(|c| Some(c.id()) != ty));
            }
            "match_pattern" | "tuple_pattern" | "slice_pattern" | "or_pattern" | "ref_pattern" | "mut_pattern"
            | "reference_pattern" | "captured_pattern" | "field_pattern" | "parameter" => stack.extend(named(n)),
            _ => {}
        }
    }
}

/// A call: a function or path calls it, a method on `self` or a name calls `self.m` / `x.m`,
/// a method on anything else calls its name.
fn call_expression(node: Node, cx: &mut Cx) -> bool {
    let src = cx.src;
    let Some(f) = node.child_by_field_name("function") else { return true };
    let g = if f.kind() == "generic_function" { f.child_by_field_name("function").unwrap_or(f) } else { f };
    match g.kind() {
        "identifier" | "scoped_identifier" => {
            cx.call(&path_segs(text(g, src)), "::", line(g));
            cx.skip(Some(f));
        }
        "field_expression" => {
            let (Some(value), Some(field)) = (g.child_by_field_name("value"), g.child_by_field_name("field")) else {
                return true;
            };
            if matches!(value.kind(), "self" | "identifier") {
                cx.call(&[text(value, src), text(field, src)], ".", line(g));
                cx.skip(Some(f));
            } else {
                cx.call(&[text(field, src)], ".", line(field));
            }
        }
        _ => {}
    }
    true
}

impl Rules for Rust {
    fn visit(&self, node: Node, cx: &mut Cx) -> bool {
        let src = cx.src;
        match node.kind() {
            "use_declaration" => {
                if let Some(arg) = node.child_by_field_name("argument") {
                    use_leaf(arg, "", None, cx);
                }
                false
            }
            "mod_item" if node.child_by_field_name("body").is_none() => {
                if let Some(n) = node.child_by_field_name("name").map(|n| text(n, src)) {
                    cx.import(&format!("mod:{n}"), None, Some(n), line(node));
                }
                false
            }
            "extern_crate_declaration" => {
                if let Some(n) = node.child_by_field_name("name").map(|n| text(n, src)) {
                    let bound = node.child_by_field_name("alias").map_or(n, |a| text(a, src));
                    cx.import(n, None, Some(bound), line(node));
                }
                false
            }
            "attribute_item"
            | "inner_attribute_item"
            | "macro_definition"
            | "line_comment"
            | "block_comment"
            | "string_literal"
            | "raw_string_literal"
            | "char_literal" => false,
            "impl_item" => {
                if let Some(t) = node.child_by_field_name("trait") {
                    if let Some(path) = type_path(t, src) {
                        cx.inherits(&path, line(t));
                    }
                    cx.skip(Some(t));
                }
                cx.skip(node.child_by_field_name("type"));
                true
            }
            "trait_item" => {
                if let Some(bounds) = node.child_by_field_name("bounds") {
                    for b in named(bounds) {
                        if let Some(path) = type_path(b, src) {
                            cx.inherits(&path, line(b));
                        }
                    }
                    cx.skip(Some(bounds));
                }
                cx.skip(node.child_by_field_name("name"));
                true
            }
            "struct_item"
            | "enum_item"
            | "union_item"
            | "type_item"
            | "const_item"
            | "static_item"
            | "enum_variant"
            | "function_item"
            | "function_signature_item"
            | "mod_item"
            | "associated_type" => {
                cx.skip(node.child_by_field_name("name"));
                true
            }
            "call_expression" => call_expression(node, cx),
            "macro_invocation" => {
                if let Some(m) = node.child_by_field_name("macro") {
                    let segs = path_segs(text(m, src));
                    static SET: OnceLock<HashSet<&'static str>> = OnceLock::new();
                    if !segs.last().is_some_and(|s| listed(&SET, STD_MACROS, s)) {
                        cx.call(&segs, "::", line(m));
                    }
                }
                for tree in named(node).into_iter().filter(|n| n.kind() == "token_tree") {
                    token_calls(tree, cx);
                }
                false
            }
            "type_identifier" => {
                cx.reference(&[text(node, src)], "::", line(node));
                false
            }
            "scoped_type_identifier" => {
                cx.reference(&path_segs(text(node, src)), "::", line(node));
                false
            }
            "identifier" => {
                cx.read(&[text(node, src)], "::", line(node));
                false
            }
            "scoped_identifier" => {
                cx.read(&path_segs(text(node, src)), "::", line(node));
                false
            }
            _ => true,
        }
    }

    fn bind(&self, node: Node, src: &[u8], out: &mut HashSet<String>) {
        match node.kind() {
            "parameter" | "let_declaration" | "for_expression" | "match_arm" | "let_condition" => {
                if let Some(p) = node.child_by_field_name("pattern") {
                    pattern(p, src, out);
                }
            }
            "closure_parameters" => named(node).into_iter().for_each(|p| pattern(p, src, out)),
            "type_parameters" => {
                for p in named(node) {
                    let name = match p.kind() {
                        "type_identifier" => Some(p),
                        "constrained_type_parameter" => p.child_by_field_name("left"),
                        _ => p.child_by_field_name("name"),
                    };
                    bind_name(name, src, out);
                }
            }
            "function_item" => bind_name(node.child_by_field_name("name"), src, out),
            _ => {}
        }
    }

    walk::builtins!(BUILTINS);
}

#[cfg(test)]
mod tests {
    use ctxd_index::edges::EdgeKind;

    use super::super::extract;
    use super::super::testing::{edges, triples};
    use super::*;

    #[test]
    fn use_trees_mods_and_crates() {
        let src = "use crate::a::{b, c::D, self};\nuse super::x::*;\nuse std::fmt as f;\nuse serde;\nmod foo;\n\
                   mod inline { use super::Thing; }\nextern crate rand as r;\n";
        let got = edges(&extract("src/lib.rs", "rust", src), EdgeKind::Imports);
        let want = triples(&[
            (None, "crate::a", Some("b")),
            (None, "crate::a::c", Some("D")),
            (None, "crate::a", None),
            (None, "super::x", None),
            (None, "std", Some("fmt")),
            (None, "serde", None),
            (None, "mod:foo", None),
            (Some("inline"), "super", Some("Thing")),
            (None, "rand", None),
        ]);
        assert_eq!(got, want);
        assert_eq!(path_segs("::std::vec::Vec::<u8>::new"), ["std", "vec", "Vec", "new"]);
    }

    #[test]
    fn calls_references_and_impls() {
        let src = "use std::f64::consts::PI;\nstruct Point { x: f64 }\n\
                   impl<T> fmt::Display for Point<T> where T: Copy {\n    \
                   fn fmt(&self, f: &mut Formatter, t: T) -> Result<(), Error> {\n        \
                   let a = Point::new(); self.x(); a.b(); Point { x: 1.0 }; my!(a);\n        \
                   helper::<u8>(1); let c = |v| v; c(2); Color::Red; assert_eq!(area(a), PI); Ok(())\n    }\n}\n\
                   trait Shape: Named + fmt::Debug {}\n";
        let e = extract("src/p.rs", "rust", src);
        let of = |kind| edges(&e, kind).into_iter().map(|(f, t, _)| (f.unwrap_or_default(), t)).collect::<Vec<_>>();
        let pairs = |v: &[(&str, &str)]| v.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect::<Vec<_>>();
        assert_eq!(
            of(EdgeKind::Inherits),
            pairs(&[("Point", "fmt::Display"), ("Shape", "Named"), ("Shape", "fmt::Debug")])
        );
        assert_eq!(
            of(EdgeKind::Calls),
            pairs(&[
                ("Point::fmt", "Point::new"),
                ("Point::fmt", "self.x"),
                ("Point::fmt", "a.b"),
                ("Point::fmt", "my"),
                ("Point::fmt", "helper"),
                ("Point::fmt", "area"),
            ])
        );
        assert_eq!(
            of(EdgeKind::References),
            pairs(&[
                ("Point::fmt", "Formatter"),
                ("Point::fmt", "Error"),
                ("Point::fmt", "Point"),
                ("Point::fmt", "Color")
            ])
        );
    }
}
