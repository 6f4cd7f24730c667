//! Rust definitions: functions, structs, enums, unions, `macro_rules!`, traits, inline modules
//! and impl blocks (named by their type without generics; their members are chunked inside).

use tree_sitter::Node;

use super::node::{field_text, DefInfo};

/// Classifies a Rust node; `func` is the kind of a function here (`method` inside a container).
pub(super) fn def_info<'t>(node: Node<'t>, src: &[u8], func: &'static str) -> Option<DefInfo<'t>> {
    match node.kind() {
        "function_item" | "function_signature_item" => {
            Some(DefInfo { name: field_text(node, "name", src), kind: func, body: None })
        }
        "struct_item" => Some(DefInfo { name: field_text(node, "name", src), kind: "struct", body: None }),
        "enum_item" => Some(DefInfo { name: field_text(node, "name", src), kind: "enum", body: None }),
        "union_item" => Some(DefInfo { name: field_text(node, "name", src), kind: "union", body: None }),
        "macro_definition" => Some(DefInfo { name: field_text(node, "name", src), kind: "macro", body: None }),
        "trait_item" => {
            Some(DefInfo { name: field_text(node, "name", src), kind: "trait", body: node.child_by_field_name("body") })
        }
        "mod_item" if node.child_by_field_name("body").is_some() => Some(DefInfo {
            name: field_text(node, "name", src),
            kind: "module",
            body: node.child_by_field_name("body"),
        }),
        "impl_item" => {
            let ty = field_text(node, "type", src).map(|t| t.split('<').next().unwrap_or(&t).trim().to_string());
            Some(DefInfo { name: ty, kind: "impl", body: node.child_by_field_name("body") })
        }
        _ => None,
    }
}
