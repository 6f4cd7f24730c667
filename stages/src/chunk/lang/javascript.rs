//! JavaScript, TypeScript and TSX definitions: function and generator declarations and
//! signatures, methods (also arrow functions in class fields), classes, interfaces, type
//! aliases, enums, namespaces, `export`ed declarations, and `const`/`let`/`var` bindings of a
//! function or class.

use tree_sitter::Node;

use super::node::{field_text, DefInfo};

/// Classifies a JavaScript/TypeScript/TSX node; `func` is the kind of a function here.
pub(super) fn def_info<'t>(node: Node<'t>, src: &[u8], func: &'static str) -> Option<DefInfo<'t>> {
    match node.kind() {
        "function_declaration" | "generator_function_declaration" | "function_signature" => {
            Some(DefInfo { name: field_text(node, "name", src), kind: func, body: None })
        }
        "method_definition" | "method_signature" | "abstract_method_signature" => {
            Some(DefInfo { name: field_text(node, "name", src), kind: "method", body: None })
        }
        "class_declaration" | "abstract_class_declaration" | "class" => {
            Some(DefInfo { name: field_text(node, "name", src), kind: "class", body: node.child_by_field_name("body") })
        }
        "interface_declaration" => Some(DefInfo {
            name: field_text(node, "name", src),
            kind: "interface",
            body: node.child_by_field_name("body"),
        }),
        "type_alias_declaration" => Some(DefInfo { name: field_text(node, "name", src), kind: "type", body: None }),
        "enum_declaration" => Some(DefInfo { name: field_text(node, "name", src), kind: "enum", body: None }),
        "internal_module" | "module" => Some(DefInfo {
            name: field_text(node, "name", src),
            kind: "module",
            body: node.child_by_field_name("body"),
        }),
        "export_statement" => node.child_by_field_name("declaration").and_then(|d| def_info(d, src, func)),
        "expression_statement" => {
            node.named_child(0).filter(|c| c.kind() == "internal_module").and_then(|d| def_info(d, src, func))
        }
        "lexical_declaration" | "variable_declaration" => {
            let decl = node.named_child(0).filter(|c| c.kind() == "variable_declarator")?;
            let value = decl.child_by_field_name("value")?;
            let kind = match value.kind() {
                "arrow_function" | "function_expression" | "function" | "generator_function" => func,
                "class" => "class",
                _ => return None,
            };
            Some(DefInfo { name: field_text(decl, "name", src), kind, body: None })
        }
        "public_field_definition" | "field_definition" => {
            let value = node.child_by_field_name("value")?;
            matches!(value.kind(), "arrow_function" | "function_expression").then(|| DefInfo {
                name: field_text(node, "name", src),
                kind: "method",
                body: None,
            })
        }
        _ => None,
    }
}
