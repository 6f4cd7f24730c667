//! The shared definition table: node kinds that are definitions in Java, C, C++, C#, Ruby, PHP,
//! Bash, Kotlin, Scala, Lua and Swift, with their chunk kind and whether members are chunked
//! inside them; the name is the node's `name` field or the name inside a C-style declarator.

use tree_sitter::Node;

use super::node::{field_text, text_of, DefInfo};

/// Classifies a node of a language of the table.
pub(super) fn def_info<'t>(node: Node<'t>, lang: &str, src: &[u8], nested: bool) -> Option<DefInfo<'t>> {
    let (def_kind, container) = generic_def(lang, node.kind())?;
    let def_kind = if def_kind == "function" && nested { "method" } else { def_kind };
    let name = field_text(node, "name", src).or_else(|| declarator_name(node, src));
    let body = if container { body_of(node) } else { None };
    Some(DefInfo { name, kind: def_kind, body })
}

/// Definition node kinds of the languages handled by the table (Java, C, C++, C#, Ruby, PHP,
/// Bash, Kotlin, Scala, Lua, Swift): the chunk kind and whether members are chunked inside it.
fn generic_def(lang: &str, kind: &str) -> Option<(&'static str, bool)> {
    Some(match (lang, kind) {
        ("java", "method_declaration" | "constructor_declaration") => ("method", false),
        ("java", "class_declaration" | "record_declaration") => ("class", true),
        ("java", "interface_declaration" | "annotation_type_declaration") => ("interface", true),
        ("java", "enum_declaration") => ("enum", true),
        ("c" | "cpp", "function_definition") => ("function", false),
        ("c" | "cpp", "struct_specifier") => ("struct", true),
        ("c" | "cpp", "enum_specifier") => ("enum", false),
        ("c" | "cpp", "type_definition") => ("type", false),
        ("cpp", "class_specifier") => ("class", true),
        ("cpp", "namespace_definition") => ("module", true),
        ("csharp", "class_declaration" | "record_declaration") => ("class", true),
        ("csharp", "struct_declaration") => ("struct", true),
        ("csharp", "interface_declaration") => ("interface", true),
        ("csharp", "enum_declaration") => ("enum", false),
        ("csharp", "method_declaration" | "constructor_declaration" | "destructor_declaration") => ("method", false),
        ("csharp", "property_declaration") => ("property", false),
        ("csharp", "namespace_declaration" | "file_scoped_namespace_declaration") => ("module", true),
        ("ruby", "method" | "singleton_method") => ("function", false),
        ("ruby", "class" | "singleton_class") => ("class", true),
        ("ruby", "module") => ("module", true),
        ("php", "function_definition") => ("function", false),
        ("php", "method_declaration") => ("method", false),
        ("php", "class_declaration") => ("class", true),
        ("php", "interface_declaration") => ("interface", true),
        ("php", "trait_declaration") => ("trait", true),
        ("php", "enum_declaration") => ("enum", true),
        ("php", "namespace_definition") => ("module", true),
        ("bash", "function_definition") => ("function", false),
        ("kotlin", "function_declaration") => ("function", false),
        ("kotlin", "class_declaration") => ("class", true),
        ("kotlin", "object_declaration") => ("object", true),
        ("scala", "function_definition" | "function_declaration") => ("function", false),
        ("scala", "class_definition") => ("class", true),
        ("scala", "object_definition") => ("object", true),
        ("scala", "trait_definition") => ("trait", true),
        ("lua", "function_declaration") => ("function", false),
        ("swift", "function_declaration" | "init_declaration") => ("function", false),
        ("swift", "class_declaration") => ("class", true),
        ("swift", "protocol_declaration") => ("interface", true),
        _ => return None,
    })
}

/// The name inside a C/C++ declarator chain (`int *foo(void)` → `foo`, `A::b` → `A::b`).
fn declarator_name(node: Node, src: &[u8]) -> Option<String> {
    let mut cur = node.child_by_field_name("declarator")?;
    for _ in 0..8 {
        match cur.kind() {
            "identifier"
            | "field_identifier"
            | "qualified_identifier"
            | "destructor_name"
            | "operator_name"
            | "type_identifier" => return Some(text_of(cur, src)),
            _ => cur = cur.child_by_field_name("declarator")?,
        }
    }
    None
}

/// The member container of a definition: its `body` field, or a body-like child (Kotlin).
fn body_of(node: Node) -> Option<Node> {
    if let Some(b) = node.child_by_field_name("body") {
        return Some(b);
    }
    let mut cursor = node.walk();
    let found = node
        .named_children(&mut cursor)
        .find(|c| matches!(c.kind(), "class_body" | "enum_class_body" | "declaration_list" | "template_body"));
    found
}
