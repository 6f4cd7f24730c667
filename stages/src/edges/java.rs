//! Java edges. **Imports**: `import com.acme.Foo;` → target `com.acme` name `Foo`;
//! `import com.acme.*;` → target `com.acme` without a name; `import static a.B.m;` → target
//! `a.B` name `m`. **Calls**: `m()`, `this.m()`, `super.m()`, `obj.m()`, `a.b.m()`, `new Foo()`
//! → `Foo` (common `java.lang`/`java.util` types skipped); a call on anything else keeps the
//! method name. **References**: type names (fields, parameters, returns, generics, casts),
//! annotations, `CamelCase` names read (`Color.RED` → `Color`). **Inherits**: `extends` and
//! `implements` of classes, enums and records, `extends` of interfaces.

use std::collections::HashSet;

use tree_sitter::Node;

use super::walk::{self, line, named, text, Access, Cx, Rules};

/// The Java rules.
pub(super) struct Java;

const BUILTINS: &[&str] = &[
    "String",
    "Object",
    "Integer",
    "Long",
    "Short",
    "Byte",
    "Double",
    "Float",
    "Boolean",
    "Character",
    "Void",
    "Number",
    "Math",
    "System",
    "StringBuilder",
    "Objects",
    "Arrays",
    "Collections",
    "List",
    "Map",
    "Set",
    "HashMap",
    "ArrayList",
    "HashSet",
    "LinkedList",
    "LinkedHashMap",
    "LinkedHashSet",
    "TreeMap",
    "TreeSet",
    "Optional",
    "Stream",
    "Collectors",
    "Iterator",
    "Iterable",
    "Collection",
    "Override",
    "Deprecated",
    "SuppressWarnings",
    "FunctionalInterface",
    "SafeVarargs",
    "Exception",
    "RuntimeException",
    "IllegalArgumentException",
    "IllegalStateException",
    "NullPointerException",
    "UnsupportedOperationException",
    "IndexOutOfBoundsException",
    "Thread",
    "Class",
    "var",
];

/// How this grammar writes `a.b` (see [`walk::chain`]).
const ACCESS: Access = Access {
    roots: &["identifier", "this", "super"],
    access: "field_access",
    member: "field",
    member_kinds: &[],
    object: "object",
};

fn chain<'s>(node: Node, src: &'s [u8]) -> Option<Vec<&'s str>> {
    walk::chain(node, src, &ACCESS)
}

/// A type's name without type arguments: `Foo`, `com.acme.Foo`.
fn type_name(node: Node, src: &[u8]) -> Option<String> {
    match node.kind() {
        "type_identifier" | "scoped_type_identifier" => Some(text(node, src).split_whitespace().collect()),
        "generic_type" => type_name(node.named_child(0)?, src),
        _ => None,
    }
}

/// `Inherits` edges for every type of a `superclass`, `super_interfaces` or
/// `extends_interfaces` clause.
fn bases(clause: Node, cx: &mut Cx) {
    let src = cx.src;
    let mut stack = vec![clause];
    while let Some(n) = stack.pop() {
        match type_name(n, src) {
            Some(t) => cx.inherits(&t, line(n)),
            None => stack.extend(named(n).into_iter().rev()),
        }
    }
    cx.skip(Some(clause));
}

impl Rules for Java {
    fn visit(&self, node: Node, cx: &mut Cx) -> bool {
        let src = cx.src;
        match node.kind() {
            "package_declaration" | "line_comment" | "block_comment" | "string_literal" => false,
            "import_declaration" => {
                let Some(path) =
                    named(node).into_iter().find(|n| matches!(n.kind(), "scoped_identifier" | "identifier"))
                else {
                    return false;
                };
                let path: String = text(path, src).split_whitespace().collect();
                let wildcard = named(node).iter().any(|n| n.kind() == "asterisk");
                match path.rsplit_once('.') {
                    Some((scope, name)) if !wildcard => cx.import(scope, Some(name), Some(name), line(node)),
                    _ => cx.import(&path, None, None, line(node)),
                }
                false
            }
            "class_declaration" | "enum_declaration" | "record_declaration" | "interface_declaration" => {
                for field in ["superclass", "interfaces"] {
                    if let Some(clause) = node.child_by_field_name(field) {
                        bases(clause, cx);
                    }
                }
                if let Some(ext) = named(node).into_iter().find(|n| n.kind() == "extends_interfaces") {
                    bases(ext, cx);
                }
                cx.skip(node.child_by_field_name("name"));
                true
            }
            "method_declaration" | "constructor_declaration" | "enum_constant" | "annotation_type_declaration" => {
                cx.skip(node.child_by_field_name("name"));
                true
            }
            "method_invocation" => {
                let Some(name) = node.child_by_field_name("name") else { return true };
                let object = node.child_by_field_name("object");
                let l = line(name);
                match object.map(|o| (o, chain(o, src))) {
                    None => cx.call(&[text(name, src)], ".", l),
                    Some((o, Some(mut segs))) => {
                        segs.push(text(name, src));
                        cx.call(&segs, ".", l);
                        cx.skip(Some(o));
                    }
                    Some((_, None)) => cx.call(&[text(name, src)], ".", l),
                }
                cx.skip(Some(name));
                true
            }
            "object_creation_expression" => {
                let t = node.child_by_field_name("type");
                if let Some(name) = t.and_then(|t| type_name(t, src)) {
                    cx.call(&name.split('.').collect::<Vec<_>>(), ".", line(node));
                }
                cx.skip(t);
                true
            }
            "type_identifier" => cx.type_word(node),
            "scoped_type_identifier" => cx.type_path(node),
            "identifier" => cx.identifier(node),
            "field_access" => cx.access(node, &ACCESS).unwrap_or_else(|| {
                cx.skip(node.child_by_field_name("field"));
                true
            }),
            "scoped_identifier" => false,
            _ => true,
        }
    }

    fn bind(&self, node: Node, src: &[u8], out: &mut HashSet<String>) {
        let names: Vec<Node> = match node.kind() {
            "formal_parameter"
            | "catch_formal_parameter"
            | "variable_declarator"
            | "enhanced_for_statement"
            | "resource" => node.child_by_field_name("name").into_iter().collect(),
            "type_parameter" => node.named_child(0).into_iter().collect(),
            "lambda_expression" => match node.child_by_field_name("parameters") {
                Some(p) if p.kind() == "identifier" => vec![p],
                Some(p) if p.kind() == "inferred_parameters" => named(p),
                _ => Vec::new(),
            },
            _ => Vec::new(),
        };
        for n in names.into_iter().filter(|n| matches!(n.kind(), "identifier" | "type_identifier")) {
            out.insert(text(n, src).to_string());
        }
    }

    walk::builtins!(BUILTINS);
}

#[cfg(test)]
mod tests {
    use ctxd_index::edges::EdgeKind;

    use super::super::{extract, testing::edges};

    #[test]
    fn imports_bases_calls_and_types() {
        let src = "package com.acme;\nimport com.acme.Foo;\nimport com.acme.*;\nimport static com.acme.Util.helper;\n\
                   public class A extends B<C> implements I, J {\n  private D d;\n  \
                   public A(E e) { super(e); this.go(); d.run(); new F(); helper(); System.out.println(Color.RED); }\n  \
                   @Inject <T> T get(List<G> xs, T t) { return xs.get(0).make(t); }\n}\n\
                   interface I extends K {}\n";
        let e = extract("com/acme/A.java", "java", src);
        let want: Vec<(Option<String>, String, Option<String>)> = vec![
            (None, "com.acme".into(), Some("Foo".into())),
            (None, "com.acme".into(), None),
            (None, "com.acme.Util".into(), Some("helper".into())),
        ];
        assert_eq!(edges(&e, EdgeKind::Imports), want);
        let of = |kind| edges(&e, kind).into_iter().map(|(f, t, _)| (f.unwrap_or_default(), t)).collect::<Vec<_>>();
        let pairs = |v: &[(&str, &str)]| v.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect::<Vec<_>>();
        assert_eq!(of(EdgeKind::Inherits), pairs(&[("A", "B"), ("A", "I"), ("A", "J"), ("I", "K")]));
        assert_eq!(
            of(EdgeKind::Calls),
            pairs(&[
                ("A.A", "this.go"),
                ("A.A", "d.run"),
                ("A.A", "F"),
                ("A.A", "helper"),
                ("A.get", "make"),
                ("A.get", "xs.get")
            ])
        );
        assert_eq!(
            of(EdgeKind::References),
            pairs(&[("A", "D"), ("A.A", "E"), ("A.A", "Color"), ("A.get", "Inject"), ("A.get", "G")])
        );
    }
}
