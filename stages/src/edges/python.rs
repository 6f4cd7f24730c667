//! Python edges. **Imports**: `import a.b [as x]` → target `a.b`; `from m import A, B` → one
//! edge per name (target `m`, kept relative: `..util`, `.`); `from m import *` → no name.
//! **Calls**: `f()`, `mod.f()`, `obj.m()`, `self.m()` / `cls.m()`, `super().m()` → `super.m`,
//! constructors `Foo()`; a call on anything else keeps the method name only. **References**:
//! annotation types, decorators, the classes of `isinstance`/`issubclass`, `CamelCase` names
//! read and attributes of imported modules. **Inherits**: class bases but `object`
//! (`Generic[T]` → `Generic`). Parameters, assignment targets, loop and `with`/`except`
//! variables and nested functions are local: never targets.

use std::collections::HashSet;

use tree_sitter::Node;

use super::walk::{self, bind_name, fields, line, named, text, Access, Cx, Rules};

/// The Python rules.
pub(super) struct Python;

const BUILTINS: &[&str] = &[
    "abs",
    "all",
    "any",
    "ascii",
    "bin",
    "bool",
    "breakpoint",
    "bytearray",
    "bytes",
    "callable",
    "chr",
    "classmethod",
    "compile",
    "complex",
    "delattr",
    "dict",
    "dir",
    "divmod",
    "enumerate",
    "eval",
    "exec",
    "filter",
    "float",
    "format",
    "frozenset",
    "getattr",
    "globals",
    "hasattr",
    "hash",
    "help",
    "hex",
    "id",
    "input",
    "int",
    "isinstance",
    "issubclass",
    "iter",
    "len",
    "list",
    "locals",
    "map",
    "max",
    "memoryview",
    "min",
    "next",
    "object",
    "oct",
    "open",
    "ord",
    "pow",
    "print",
    "property",
    "range",
    "repr",
    "reversed",
    "round",
    "set",
    "setattr",
    "slice",
    "sorted",
    "staticmethod",
    "str",
    "sum",
    "super",
    "tuple",
    "type",
    "vars",
    "zip",
    "None",
    "True",
    "False",
    "NotImplemented",
    "Ellipsis",
    "__name__",
    "__file__",
    "Exception",
    "BaseException",
    "ValueError",
    "TypeError",
    "KeyError",
    "IndexError",
    "AttributeError",
    "RuntimeError",
    "NotImplementedError",
    "StopIteration",
    "OSError",
    "IOError",
    "ImportError",
    "AssertionError",
    "LookupError",
    "ZeroDivisionError",
    "FileNotFoundError",
    "PermissionError",
    "TimeoutError",
    "KeyboardInterrupt",
    "SystemExit",
    "UnicodeDecodeError",
    "DeprecationWarning",
    "Warning",
    "UserWarning",
    "Any",
    "Optional",
    "Union",
    "List",
    "Dict",
    "Set",
    "Tuple",
    "Type",
    "Callable",
    "Iterable",
    "Iterator",
    "Sequence",
    "Mapping",
    "Generator",
    "ClassVar",
    "Literal",
    "Final",
];

/// How this grammar writes `a.b` (see [`walk::chain`]).
const ACCESS: Access =
    Access { roots: &["identifier"], access: "attribute", member: "attribute", member_kinds: &[], object: "object" };

fn chain<'s>(node: Node, src: &'s [u8]) -> Option<Vec<&'s str>> {
    walk::chain(node, src, &ACCESS)
}

/// Every name a type annotation mentions (`Optional[Dict[str, Foo]]` → `Foo`).
fn type_names(node: Node, cx: &mut Cx) {
    let mut stack = vec![node];
    while let Some(n) = stack.pop() {
        if let Some(segs) = chain(n, cx.src) {
            cx.reference(&segs, ".", line(n));
        } else if n.kind() != "string" {
            stack.extend(named(n).into_iter().rev());
        }
    }
}

/// Names bound by an assignment target or loop variable (not attributes or subscripts).
fn pattern(node: Node, src: &[u8], out: &mut HashSet<String>) {
    let mut stack = vec![node];
    while let Some(n) = stack.pop() {
        match n.kind() {
            "identifier" => {
                out.insert(text(n, src).to_string());
            }
            "pattern_list"
            | "tuple_pattern"
            | "list_pattern"
            | "list_splat_pattern"
            | "tuple"
            | "list"
            | "parenthesized_expression"
            | "as_pattern_target" => stack.extend(named(n)),
            _ => {}
        }
    }
}

/// `import a.b as c`: an import edge per module, bound to its alias or its first segment.
fn import(node: Node, cx: &mut Cx) {
    let src = cx.src;
    for n in fields(node, "name") {
        let (module, alias) = match n.kind() {
            "aliased_import" => (n.child_by_field_name("name"), n.child_by_field_name("alias")),
            _ => (Some(n), None),
        };
        let Some(module) = module else { continue };
        let target = text(module, src);
        let bound = alias.map_or_else(|| target.split('.').next().unwrap_or(target), |a| text(a, src));
        cx.import(target, None, Some(bound), line(n));
    }
}

/// `from m import a, b as c`: an import edge per name (one for the module when none is named).
fn import_from(node: Node, cx: &mut Cx) {
    let src = cx.src;
    let Some(module) = node.child_by_field_name("module_name") else { return };
    let target: String = text(module, src).split_whitespace().collect();
    let names = fields(node, "name");
    if names.is_empty() {
        cx.import(&target, None, None, line(node));
    }
    for n in names {
        let (name, alias) = match n.kind() {
            "aliased_import" => (n.child_by_field_name("name"), n.child_by_field_name("alias")),
            _ => (Some(n), None),
        };
        let Some(name) = name.map(|n| text(n, src)) else { continue };
        cx.import(&target, Some(name), Some(alias.map_or(name, |a| text(a, src))), line(n));
    }
}

/// A call: `isinstance`/`issubclass` reference their classes, a call on a name or an access
/// chain calls it, `super().m()` calls `super.m`, a call on anything else its method name.
fn call(node: Node, cx: &mut Cx) {
    let src = cx.src;
    let Some(f) = node.child_by_field_name("function") else { return };
    if cx.skipped(f) {
        return;
    }
    if let Some(segs) = chain(f, src) {
        if matches!(segs[..], ["isinstance" | "issubclass"]) {
            let classes = node.child_by_field_name("arguments").and_then(|a| a.named_child(1));
            for c in classes.map(|c| if c.kind() == "tuple" { named(c) } else { vec![c] }).unwrap_or_default() {
                if let Some(segs) = chain(c, src) {
                    cx.reference(&segs, ".", line(c));
                }
            }
        }
        cx.call(&segs, ".", line(f));
        cx.skip(Some(f));
    } else if let (Some(obj), Some(attr)) = (f.child_by_field_name("object"), f.child_by_field_name("attribute")) {
        let is_super =
            obj.kind() == "call" && obj.child_by_field_name("function").is_some_and(|g| text(g, src) == "super");
        if is_super {
            cx.call(&["super", text(attr, src)], ".", line(attr));
            cx.skip(Some(obj));
        } else {
            cx.call(&[text(attr, src)], ".", line(attr));
        }
        cx.skip(Some(attr));
    }
}

impl Rules for Python {
    fn visit(&self, node: Node, cx: &mut Cx) -> bool {
        let src = cx.src;
        match node.kind() {
            "import_statement" => {
                import(node, cx);
                false
            }
            "import_from_statement" => {
                import_from(node, cx);
                false
            }
            "future_import_statement" | "global_statement" | "nonlocal_statement" | "string" => false,
            "keyword_argument" | "function_definition" | "class_definition" => {
                cx.skip(node.child_by_field_name("name"));
                if let Some(bases) = node.child_by_field_name("superclasses") {
                    for b in named(bases) {
                        let b = if b.kind() == "subscript" { b.child_by_field_name("value") } else { Some(b) };
                        let Some(b) = b else { continue };
                        match chain(b, src) {
                            Some(segs) if segs != ["object"] => cx.inherits(&segs.join("."), line(b)),
                            _ => {}
                        }
                    }
                    cx.skip(Some(bases));
                }
                true
            }
            "decorator" => {
                let Some(e) = node.named_child(0) else { return true };
                let callee = if e.kind() == "call" { e.child_by_field_name("function") } else { Some(e) };
                if let Some((c, segs)) = callee.and_then(|c| Some((c, chain(c, src)?))) {
                    if !matches!(segs.last(), Some(&("setter" | "getter" | "deleter"))) {
                        cx.reference(&segs, ".", line(c));
                    }
                    cx.skip(Some(c));
                }
                true
            }
            "call" => {
                call(node, cx);
                true
            }
            "type" => {
                type_names(node, cx);
                false
            }
            "attribute" => cx.access(node, &ACCESS).unwrap_or_else(|| {
                cx.skip(node.child_by_field_name("attribute"));
                true
            }),
            "identifier" => cx.identifier(node),
            _ => true,
        }
    }

    fn bind(&self, node: Node, src: &[u8], out: &mut HashSet<String>) {
        match node.kind() {
            "parameters" | "lambda_parameters" => {
                for p in named(node) {
                    let name = match p.kind() {
                        "identifier" => Some(p),
                        "default_parameter" | "typed_default_parameter" => p.child_by_field_name("name"),
                        "typed_parameter" | "list_splat_pattern" | "dictionary_splat_pattern" => p.named_child(0),
                        _ => None,
                    };
                    if let Some(n) = name {
                        pattern(n, src, out);
                    }
                }
            }
            "assignment" | "augmented_assignment" | "for_statement" | "for_in_clause" => {
                if let Some(left) = node.child_by_field_name("left") {
                    pattern(left, src, out);
                }
            }
            "as_pattern" => {
                if let Some(alias) = node.child_by_field_name("alias") {
                    pattern(alias, src, out);
                }
            }
            "named_expression" | "function_definition" | "class_definition" => {
                bind_name(node.child_by_field_name("name"), src, out)
            }
            _ => {}
        }
    }

    walk::builtins!(BUILTINS);
}

#[cfg(test)]
mod tests {
    use ctxd_index::edges::EdgeKind;

    use super::super::{extract, testing::edges};

    #[test]
    fn imports_keep_dots_and_names() {
        let src = "import a.b as x\nimport os, sys\nfrom ..util import f, g as h\nfrom . import y\nfrom m import *\n\
                   from __future__ import annotations\n";
        let got = edges(&extract("p/q.py", "python", src), EdgeKind::Imports);
        let want: [(Option<&str>, &str, Option<&str>); 7] = [
            (None, "a.b", None),
            (None, "os", None),
            (None, "sys", None),
            (None, "..util", Some("f")),
            (None, "..util", Some("g")),
            (None, ".", Some("y")),
            (None, "m", None),
        ];
        assert_eq!(got, want.map(|(f, t, n)| (f.map(String::from), t.to_string(), n.map(String::from))));
    }

    #[test]
    fn calls_references_and_bases_skip_locals_and_builtins() {
        let src = "import os\nfrom .models import Base\n\n@register.on(1)\nclass C(Base, mod.Other, Generic[T], object, metaclass=M):\n    \
                   def m(self, p: int, q: Foo = None) -> Bar:\n        z = self.x(p)\n        w = helper(z)\n        \
                   print(len(w))\n        items = load().rows()\n        super().m(p)\n        w.data.pop()\n        \
                   return isinstance(z, (Kind, b.B)) and os.path.join(q) and Thing(z) and os.sep and w.go()\n\n    \
                   @property\n    def n(self):\n        local = 1\n        return local + Config.LIMIT\n";
        let e = extract("pkg/c.py", "python", src);
        let of = |kind| edges(&e, kind).into_iter().map(|(f, t, _)| (f.unwrap_or_default(), t)).collect::<Vec<_>>();
        let pairs = |v: &[(&str, &str)]| v.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect::<Vec<_>>();
        assert_eq!(of(EdgeKind::Inherits), pairs(&[("C", "Base"), ("C", "mod.Other"), ("C", "Generic")]));
        assert_eq!(
            of(EdgeKind::Calls),
            pairs(&[
                ("C.m", "self.x"),
                ("C.m", "helper"),
                ("C.m", "rows"),
                ("C.m", "load"),
                ("C.m", "super.m"),
                ("C.m", "pop"),
                ("C.m", "os.path.join"),
                ("C.m", "Thing"),
                ("C.m", "w.go"),
            ])
        );
        assert_eq!(
            of(EdgeKind::References),
            pairs(&[
                ("C", "register.on"),
                ("C.m", "Foo"),
                ("C.m", "Bar"),
                ("C.m", "Kind"),
                ("C.m", "b.B"),
                ("C.m", "os.sep"),
                ("C.n", "Config"),
            ])
        );
    }
}
