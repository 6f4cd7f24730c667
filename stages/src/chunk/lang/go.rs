//! Go definitions: functions, methods (named `Receiver.Method`, pointer and type parameters
//! dropped from the receiver) and type declarations (struct, interface or other type).

use tree_sitter::Node;

use super::node::{field_text, text_of, DefInfo};

/// Classifies a Go node.
pub(super) fn def_info<'t>(node: Node<'t>, src: &[u8]) -> Option<DefInfo<'t>> {
    match node.kind() {
        "function_declaration" => Some(DefInfo { name: field_text(node, "name", src), kind: "function", body: None }),
        "method_declaration" => {
            let recv = node
                .child_by_field_name("receiver")
                .and_then(|r| r.named_child(0))
                .and_then(|p| p.child_by_field_name("type"))
                .map(|t| text_of(t, src).trim_start_matches('*').split('[').next().unwrap_or("").to_string());
            let name = field_text(node, "name", src);
            let name = match (recv, name) {
                (Some(r), Some(n)) if !r.is_empty() => Some(format!("{r}.{n}")),
                (_, n) => n,
            };
            Some(DefInfo { name, kind: "method", body: None })
        }
        "type_declaration" => {
            let spec = node.named_child(0).filter(|c| c.kind() == "type_spec" || c.kind() == "type_alias")?;
            let kind = match spec.child_by_field_name("type").map(|t| t.kind()) {
                Some("struct_type") => "struct",
                Some("interface_type") => "interface",
                _ => "type",
            };
            Some(DefInfo { name: field_text(spec, "name", src), kind, body: None })
        }
        _ => None,
    }
}
