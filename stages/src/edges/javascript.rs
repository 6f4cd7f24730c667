//! JavaScript, TypeScript and TSX edges. **Imports**: `import d, {a, b as c} from './x'` → one
//! edge per imported name (`d`, `a`, `b`; a namespace or bare import has none), TS
//! `import x = require('./r')`, `export … from`, `require('./y')`, dynamic `import('./z')`.
//! **Calls**: `f()`, `obj.m()`, `this.m()`, `super.m()`, `a.b.c()`, `new Foo()` → `Foo`;
//! a call on anything else keeps the method name. **References**: type names (annotations,
//! generics, `implements` of a class body), `CamelCase` names read (JSX elements included) and
//! attributes of imported modules. **Inherits**: `extends` of classes and interfaces, TS
//! `implements`.

use std::collections::HashSet;

use tree_sitter::Node;

use super::walk::{self, fields, line, named, text, Access, Cx, Rules};

/// The JavaScript / TypeScript / TSX rules.
pub(super) struct JavaScript;

const BUILTINS: &[&str] = &[
    "console",
    "window",
    "document",
    "globalThis",
    "process",
    "Object",
    "Array",
    "String",
    "Number",
    "Boolean",
    "Symbol",
    "JSON",
    "Math",
    "Date",
    "Promise",
    "Error",
    "TypeError",
    "RangeError",
    "SyntaxError",
    "Map",
    "Set",
    "WeakMap",
    "WeakSet",
    "RegExp",
    "parseInt",
    "parseFloat",
    "isNaN",
    "isFinite",
    "setTimeout",
    "setInterval",
    "clearTimeout",
    "clearInterval",
    "require",
    "module",
    "exports",
    "undefined",
    "NaN",
    "Infinity",
    "Reflect",
    "Proxy",
    "BigInt",
    "fetch",
    "structuredClone",
    "queueMicrotask",
    "encodeURIComponent",
    "decodeURIComponent",
    "Record",
    "Partial",
    "Required",
    "Readonly",
    "Pick",
    "Omit",
    "Exclude",
    "Extract",
    "ReturnType",
    "Parameters",
    "Awaited",
    "NonNullable",
    "InstanceType",
    "ReadonlyArray",
    "Function",
    "Iterable",
    "Iterator",
    "AsyncIterable",
    "PromiseLike",
    "ArrayLike",
    "Uint8Array",
    "ArrayBuffer",
    "Buffer",
    "URL",
    "Intl",
];

/// The text of a string literal (its fragments).
fn string(node: Node, src: &[u8]) -> Option<String> {
    (node.kind() == "string").then(|| named(node).into_iter().map(|f| text(f, src)).collect())
}

/// How this grammar writes `a.b` (see [`walk::chain`]).
const ACCESS: Access = Access {
    roots: &["identifier", "this", "super"],
    access: "member_expression",
    member: "property",
    member_kinds: &["property_identifier", "private_property_identifier"],
    object: "object",
};

fn chain<'s>(node: Node, src: &'s [u8]) -> Option<Vec<&'s str>> {
    walk::chain(node, src, &ACCESS)
}

/// A type named in a heritage clause, without type arguments (`ns.J`, `K`).
fn type_name(node: Node, src: &[u8]) -> Option<String> {
    match node.kind() {
        "type_identifier" | "nested_type_identifier" | "identifier" | "member_expression" => {
            Some(text(node, src).split_whitespace().collect())
        }
        "generic_type" => type_name(node.child_by_field_name("name")?, src),
        _ => None,
    }
}

/// Names a parameter or declarator pattern binds.
fn pattern(node: Node, src: &[u8], out: &mut HashSet<String>) {
    let mut stack = vec![node];
    while let Some(n) = stack.pop() {
        match n.kind() {
            "identifier" | "shorthand_property_identifier_pattern" => {
                out.insert(text(n, src).to_string());
            }
            "assignment_pattern" | "object_assignment_pattern" => stack.extend(n.child_by_field_name("left")),
            "pair_pattern" => stack.extend(n.child_by_field_name("value")),
            "required_parameter" | "optional_parameter" => stack.extend(n.child_by_field_name("pattern")),
            "object_pattern" | "array_pattern" | "rest_pattern" | "formal_parameters" => stack.extend(named(n)),
            _ => {}
        }
    }
}

impl JavaScript {
    fn import(node: Node, cx: &mut Cx) {
        let src = cx.src;
        let source = node.child_by_field_name("source").and_then(|s| string(s, src)).unwrap_or_default();
        let l = line(node);
        let mut any = false;
        for clause in named(node) {
            match clause.kind() {
                "import_clause" => {
                    for part in named(clause) {
                        match part.kind() {
                            "identifier" => cx.import(&source, Some(text(part, src)), Some(text(part, src)), l),
                            "namespace_import" => {
                                let bound = part.named_child(0).map(|b| text(b, src));
                                cx.import(&source, None, bound, l);
                            }
                            "named_imports" => {
                                for s in named(part).into_iter().filter(|s| s.kind() == "import_specifier") {
                                    let Some(name) = s.child_by_field_name("name").map(|n| text(n, src)) else {
                                        continue;
                                    };
                                    let bound = s.child_by_field_name("alias").map_or(name, |a| text(a, src));
                                    cx.import(&source, Some(name), Some(bound), line(s));
                                }
                            }
                            _ => continue,
                        }
                        any = true;
                    }
                }
                "import_require_clause" => {
                    let bound = clause.named_child(0).map(|b| text(b, src));
                    if let Some(target) = clause.child_by_field_name("source").and_then(|s| string(s, src)) {
                        cx.import(&target, None, bound, l);
                    }
                    any = true;
                }
                _ => {}
            }
        }
        if !any && !source.is_empty() {
            cx.import(&source, None, None, l);
        }
    }

    /// `export … from './m'`: one import edge per exported name (none for `export *`); false
    /// (the children are done) unless the export names no module.
    fn export_from(node: Node, cx: &mut Cx) -> bool {
        let src = cx.src;
        let Some(source) = node.child_by_field_name("source").and_then(|s| string(s, src)) else {
            return true;
        };
        let specs: Vec<Node> = named(node)
            .into_iter()
            .filter(|c| c.kind() == "export_clause")
            .flat_map(named)
            .filter(|s| s.kind() == "export_specifier")
            .collect();
        if specs.is_empty() {
            cx.import(&source, None, None, line(node));
        }
        for s in specs {
            if let Some(name) = s.child_by_field_name("name") {
                cx.import(&source, Some(text(name, src)), None, line(s));
            }
        }
        false
    }

    /// A call: `require('./m')` and `import('./m')` import, a call on a name or an access chain
    /// calls it, a method call on anything else calls the method's name.
    fn call_expression(node: Node, cx: &mut Cx) {
        let src = cx.src;
        let Some(f) = node.child_by_field_name("function") else { return };
        let first_arg = node.child_by_field_name("arguments").and_then(|a| a.named_child(0));
        let module = first_arg.and_then(|a| string(a, src));
        if f.kind() == "import" || (text(f, src) == "require" && f.kind() == "identifier") {
            if let Some(m) = module {
                cx.import(&m, None, None, line(node));
            }
        } else if let Some(segs) = chain(f, src) {
            cx.call(&segs, ".", line(f));
            cx.skip(Some(f));
        } else if f.kind() == "member_expression" {
            if let Some(p) = f.child_by_field_name("property") {
                cx.call(&[text(p, src)], ".", line(p));
            }
        }
    }

    /// A class's `extends` and `implements`: an inherits edge per type named.
    fn heritage(node: Node, cx: &mut Cx) {
        let src = cx.src;
        for clause in named(node) {
            match clause.kind() {
                "extends_clause" => {
                    for v in fields(clause, "value") {
                        if let Some(t) = type_name(v, src) {
                            cx.inherits(&t, line(v));
                        }
                    }
                }
                "implements_clause" => {
                    for t in named(clause) {
                        if let Some(t) = type_name(t, src) {
                            cx.inherits(&t, line(clause));
                        }
                    }
                }
                _ => {
                    if let Some(t) = type_name(clause, src) {
                        cx.inherits(&t, line(clause));
                    }
                }
            }
        }
    }
}

impl Rules for JavaScript {
    fn visit(&self, node: Node, cx: &mut Cx) -> bool {
        let src = cx.src;
        match node.kind() {
            "import_statement" => {
                Self::import(node, cx);
                false
            }
            "export_statement" => Self::export_from(node, cx),
            "export_clause" | "string" | "template_string" | "comment" | "regex" => node.kind() == "template_string",
            "call_expression" => {
                Self::call_expression(node, cx);
                true
            }
            "new_expression" => {
                let c = node.child_by_field_name("constructor");
                if let Some(segs) = c.and_then(|c| chain(c, src)) {
                    cx.call(&segs, ".", line(node));
                    cx.skip(c);
                }
                true
            }
            "class_heritage" => {
                Self::heritage(node, cx);
                false
            }
            "extends_type_clause" => {
                for t in fields(node, "type") {
                    if let Some(t) = type_name(t, src) {
                        cx.inherits(&t, line(node));
                    }
                }
                false
            }
            "variable_declarator"
            | "class_declaration"
            | "abstract_class_declaration"
            | "class"
            | "function_declaration"
            | "generator_function_declaration"
            | "function_expression"
            | "interface_declaration"
            | "type_alias_declaration"
            | "enum_declaration"
            | "type_parameter" => {
                cx.skip(node.child_by_field_name("name"));
                true
            }
            "type_identifier" => cx.type_word(node),
            "nested_type_identifier" => cx.type_path(node),
            "identifier" => cx.identifier(node),
            "member_expression" => cx.access(node, &ACCESS).unwrap_or(true),
            _ => true,
        }
    }

    fn bind(&self, node: Node, src: &[u8], out: &mut HashSet<String>) {
        let field = match node.kind() {
            "formal_parameters" => Some(node),
            "arrow_function" => node.child_by_field_name("parameter"),
            "variable_declarator"
            | "function_declaration"
            | "generator_function_declaration"
            | "class_declaration"
            | "function_expression"
            | "class"
            | "type_parameter" => node.child_by_field_name("name"),
            "catch_clause" => node.child_by_field_name("parameter"),
            "for_in_statement" => node.child_by_field_name("left"),
            _ => None,
        };
        match field {
            Some(n) if n.kind() == "type_identifier" => {
                out.insert(text(n, src).to_string());
            }
            Some(n) => pattern(n, src, out),
            None => {}
        }
    }

    walk::builtins!(BUILTINS);
}

#[cfg(test)]
mod tests {
    use ctxd_index::edges::EdgeKind;

    use super::super::extract;
    use super::super::testing::{edges, triples};

    #[test]
    fn every_import_form() {
        let src = "import d, {a, b as c} from './x';\nimport * as ns from \"./ns\";\nimport './side';\n\
                   export {e} from './e';\nexport * from './all';\nconst y = require('./y');\n\
                   function lazy() { return import('./z'); }\n";
        let got = edges(&extract("web/m.js", "javascript", src), EdgeKind::Imports);
        let want = triples(&[
            (None, "./x", Some("d")),
            (None, "./x", Some("a")),
            (None, "./x", Some("b")),
            (None, "./ns", None),
            (None, "./side", None),
            (None, "./e", Some("e")),
            (None, "./all", None),
            (None, "./y", None),
            (Some("lazy"), "./z", None),
        ]);
        assert_eq!(got, want);
        let ts = "import type {T} from './t';\nimport x = require('./r');\n";
        let got = edges(&extract("web/m.ts", "typescript", ts), EdgeKind::Imports);
        assert_eq!(got, triples(&[(None, "./t", Some("T")), (None, "./r", None)]));
    }

    #[test]
    fn classes_calls_and_types() {
        let ts = "import * as ns from './ns';\ninterface I extends J, K<L> { f(a: Foo): Bar }\n\
                  export class C extends B<X> implements I, ns.J {\n  private p: Q;\n  \
                  m<T>(a: A, t: T): R {\n    const w = new Widget(a);\n    this.go(w);\n    w.run();\n    \
                  helper(ns.value, Kind.One);\n    console.log(a);\n    return super.m(a);\n  }\n}\n";
        let e = extract("web/c.ts", "typescript", ts);
        let of = |kind| edges(&e, kind).into_iter().map(|(f, t, _)| (f.unwrap_or_default(), t)).collect::<Vec<_>>();
        let pairs = |v: &[(&str, &str)]| v.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect::<Vec<_>>();
        assert_eq!(of(EdgeKind::Inherits), pairs(&[("I", "J"), ("I", "K"), ("C", "B"), ("C", "I"), ("C", "ns.J")]));
        assert_eq!(
            of(EdgeKind::Calls),
            pairs(&[("C.m", "Widget"), ("C.m", "this.go"), ("C.m", "w.run"), ("C.m", "helper"), ("C.m", "super.m")])
        );
        assert_eq!(
            of(EdgeKind::References),
            pairs(&[
                ("I.f", "Foo"),
                ("I.f", "Bar"),
                ("C", "Q"),
                ("C.m", "A"),
                ("C.m", "R"),
                ("C.m", "ns.value"),
                ("C.m", "Kind"),
            ])
        );
        let jsx = "import Button from './button';\nexport function App() { return <Button onClick={go} />; }\n";
        let e = extract("web/app.jsx", "javascript", jsx);
        assert!(edges(&e, EdgeKind::References).contains(&(Some("App".into()), "Button".into(), None)), "{e:?}");
    }
}
