//! What the per-language rules share: the definition a node holds ([`DefInfo`]) and reading a
//! node's text or a named field's text out of the source. A leaf: imports nothing of `lang`.

use tree_sitter::Node;

/// What a definition node is.
pub(crate) struct DefInfo<'t> {
    pub(crate) name: Option<String>,
    pub(crate) kind: &'static str,
    /// Node whose named children are members (class body, impl block, …).
    pub(crate) body: Option<Node<'t>>,
}

pub(super) fn text_of(node: Node, src: &[u8]) -> String {
    node.utf8_text(src).unwrap_or("").to_string()
}

pub(super) fn field_text(node: Node, field: &str, src: &[u8]) -> Option<String> {
    node.child_by_field_name(field).map(|n| text_of(n, src))
}
