//! Python definitions: functions (methods inside a class), classes, and decorated definitions
//! (the decorators stay with the definition's chunk).

use tree_sitter::Node;

use super::node::{field_text, DefInfo};

/// Classifies a Python node; `func` is the kind of a function here (`method` inside a class).
pub(super) fn def_info<'t>(node: Node<'t>, src: &[u8], func: &'static str) -> Option<DefInfo<'t>> {
    match node.kind() {
        "function_definition" => Some(DefInfo { name: field_text(node, "name", src), kind: func, body: None }),
        "class_definition" => {
            Some(DefInfo { name: field_text(node, "name", src), kind: "class", body: node.child_by_field_name("body") })
        }
        "decorated_definition" => node.child_by_field_name("definition").and_then(|d| def_info(d, src, func)),
        _ => None,
    }
}
