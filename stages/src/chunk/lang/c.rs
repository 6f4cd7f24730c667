//! C and C++ definitions: the shared table (functions, structs, enums, typedefs; C++ classes and
//! namespaces) with two rules of their own: a C++ template is the definition it declares, and a
//! typedef without a name (a prototype or variable) is no definition.

use tree_sitter::Node;

use super::generic;
use super::node::DefInfo;

/// Classifies a C or C++ node (`lang` is `c` or `cpp`).
pub(super) fn def_info<'t>(node: Node<'t>, lang: &str, src: &[u8], nested: bool) -> Option<DefInfo<'t>> {
    if lang == "cpp" && node.kind() == "template_declaration" {
        let mut cursor = node.walk();
        let inner = node.named_children(&mut cursor).find(|c| def_info(*c, lang, src, nested).is_some())?;
        return def_info(inner, lang, src, nested);
    }
    let info = generic::def_info(node, lang, src, nested)?;
    // C/C++ prototypes and variables are declarations too, but not definitions.
    if node.kind() == "type_definition" && info.name.is_none() {
        return None;
    }
    Some(info)
}
