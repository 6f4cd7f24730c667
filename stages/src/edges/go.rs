//! Go edges. **Imports**: one edge per import spec, target the import path, name the alias
//! when there is one (`al`, `.`, `_`). **Calls**: `f()`, `pkg.F()`, `v.M()`; in a method, calls
//! on its receiver are written `self.M` (`func (s *Server) Start()` calling `s.Stop()` →
//! `self.Stop`), so they resolve to the receiver type's members; builtins and conversions
//! skipped. **References**: type names (`pkg.Type` kept qualified), composite literal types,
//! exported (`CamelCase`) names read and `pkg.Name` on imported packages. **Inherits**: embedded
//! struct fields and embedded interfaces.

use std::collections::HashSet;

use tree_sitter::Node;

use super::walk::{self, fields, line, named, text, Access, Cx, Rules};

/// The Go rules.
pub(super) struct Go;

const BUILTINS: &[&str] = &[
    "append",
    "cap",
    "clear",
    "close",
    "complex",
    "copy",
    "delete",
    "imag",
    "len",
    "make",
    "max",
    "min",
    "new",
    "panic",
    "print",
    "println",
    "real",
    "recover",
    "bool",
    "byte",
    "complex64",
    "complex128",
    "error",
    "float32",
    "float64",
    "int",
    "int8",
    "int16",
    "int32",
    "int64",
    "rune",
    "string",
    "uint",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "uintptr",
    "any",
    "comparable",
    "nil",
    "true",
    "false",
    "iota",
];

/// How this grammar writes `a.b` (see [`walk::chain`]).
const ACCESS: Access = Access {
    roots: &["identifier", "package_identifier"],
    access: "selector_expression",
    member: "field",
    member_kinds: &[],
    object: "operand",
};

fn chain<'s>(node: Node, src: &'s [u8]) -> Option<Vec<&'s str>> {
    walk::chain(node, src, &ACCESS)
}

/// An embedded type's name: `Base`, `pkg.Other` (pointers and type arguments dropped).
fn embedded(node: Node, src: &[u8]) -> Option<String> {
    match node.kind() {
        "type_identifier" | "qualified_type" => Some(text(node, src).split_whitespace().collect()),
        "pointer_type" => embedded(node.named_child(0)?, src),
        "generic_type" => embedded(node.child_by_field_name("type")?, src),
        _ => None,
    }
}

impl Rules for Go {
    fn visit(&self, node: Node, cx: &mut Cx) -> bool {
        let src = cx.src;
        match node.kind() {
            "import_spec" => {
                let Some(path) = node.child_by_field_name("path") else { return false };
                let path = text(path, src).trim_matches(['"', '`']);
                let alias = node.child_by_field_name("name").map(|n| text(n, src));
                let bound = alias.unwrap_or_else(|| path.rsplit('/').next().unwrap_or(path));
                cx.import(path, alias, Some(bound), line(node));
                false
            }
            "package_clause" | "comment" | "interpreted_string_literal" | "raw_string_literal" => false,
            "type_spec" | "type_alias" => {
                cx.skip(node.child_by_field_name("name"));
                true
            }
            "method_declaration" => {
                cx.skip(node.child_by_field_name("receiver"));
                true
            }
            "field_declaration" if node.child_by_field_name("name").is_none() => {
                if let Some(t) = node.child_by_field_name("type") {
                    if let Some(name) = embedded(t, src) {
                        cx.inherits(&name, line(t));
                    }
                }
                false
            }
            "type_elem" => {
                if let [t] = named(node)[..] {
                    if let Some(name) = embedded(t, src) {
                        cx.inherits(&name, line(t));
                        return false;
                    }
                }
                true
            }
            "keyed_element" => {
                cx.skip(node.named_child(0));
                true
            }
            "call_expression" => {
                let Some(f) = node.child_by_field_name("function") else { return true };
                if let Some(segs) = chain(f, src) {
                    cx.call(&segs, ".", line(f));
                    cx.skip(Some(f));
                } else if f.kind() == "selector_expression" {
                    if let Some(field) = f.child_by_field_name("field") {
                        cx.call(&[text(field, src)], ".", line(field));
                    }
                }
                true
            }
            "type_identifier" => cx.type_word(node),
            "qualified_type" => {
                let segs: Vec<&str> = named(node).into_iter().map(|n| text(n, src)).collect();
                cx.reference(&segs, ".", line(node));
                false
            }
            "identifier" => cx.identifier(node),
            "selector_expression" => cx.access(node, &ACCESS).unwrap_or(true),
            _ => true,
        }
    }

    fn bind(&self, node: Node, src: &[u8], out: &mut HashSet<String>) {
        let names: Vec<Node> = match node.kind() {
            "parameter_declaration"
            | "variadic_parameter_declaration"
            | "var_spec"
            | "const_spec"
            | "type_parameter_declaration" => fields(node, "name"),
            "type_spec" | "type_alias" => node.child_by_field_name("name").into_iter().collect(),
            "short_var_declaration" | "range_clause" => node.child_by_field_name("left").map(named).unwrap_or_default(),
            _ => Vec::new(),
        };
        for n in names.into_iter().filter(|n| matches!(n.kind(), "identifier" | "type_identifier")) {
            out.insert(text(n, src).to_string());
        }
    }

    walk::builtins!(BUILTINS);

    fn receiver(&self, def: Node, src: &[u8]) -> Option<String> {
        let recv = def.child_by_field_name("receiver")?.named_child(0)?;
        recv.child_by_field_name("name").map(|n| text(n, src).to_string())
    }
}

#[cfg(test)]
mod tests {
    use ctxd_index::edges::EdgeKind;

    use super::super::{extract, testing::edges};

    #[test]
    fn imports_embedding_and_receiver_calls() {
        let src = "package main\nimport (\n  \"fmt\"\n  al \"github.com/a/b/pkg\"\n  . \"x/y\"\n)\n\
                   type S struct {\n  Base\n  *al.Other\n  n int\n}\ntype I interface { io.Reader; Foo; M() error }\n\
                   func (s *S) Start(x al.T) error {\n  s.Stop()\n  fmt.Println(x, Version)\n  v := T{Name: 1}\n  \
                   n := len(v.items)\n  go worker(n)\n  return New(v).Run()\n}\n";
        let e = extract("cmd/main.go", "go", src);
        let imports = edges(&e, EdgeKind::Imports);
        let want: Vec<(Option<String>, String, Option<String>)> = vec![
            (None, "fmt".into(), None),
            (None, "github.com/a/b/pkg".into(), Some("al".into())),
            (None, "x/y".into(), Some(".".into())),
        ];
        assert_eq!(imports, want);
        let of = |kind| edges(&e, kind).into_iter().map(|(f, t, _)| (f.unwrap_or_default(), t)).collect::<Vec<_>>();
        let pairs = |v: &[(&str, &str)]| v.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect::<Vec<_>>();
        assert_eq!(
            of(EdgeKind::Inherits),
            pairs(&[("S", "Base"), ("S", "al.Other"), ("I", "io.Reader"), ("I", "Foo")])
        );
        assert_eq!(
            of(EdgeKind::Calls),
            pairs(&[
                ("S.Start", "self.Stop"),
                ("S.Start", "fmt.Println"),
                ("S.Start", "worker"),
                ("S.Start", "Run"),
                ("S.Start", "New"),
            ])
        );
        assert_eq!(of(EdgeKind::References), pairs(&[("S.Start", "al.T"), ("S.Start", "Version"), ("S.Start", "T")]));
    }
}
