//! Every definition of a code file, at any depth of containers (a class's methods, an impl's
//! functions, a namespace's classes), named exactly as the chunker names the members it opens
//! (`Class.method`, `Type::method`) — whether or not the container was small enough to stay
//! one chunk. The symbols table lists them all, so the code graph has a node for every method
//! its edges start or end in.

use tree_sitter::{Node, Tree};

use super::lang::def_info;

/// One definition: its symbol, kind and 1-based line range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub symbol: String,
    pub kind: &'static str,
    pub start_line: u32,
    pub end_line: u32,
}

/// Containers opened at most (a pathological file cannot make the walk unbounded).
const MAX_DEFINITIONS: usize = 50_000;

/// The definitions of `source` (a file in `language`), top level and members, in line order.
#[cfg(test)]
pub fn definitions(language: &str, source: &str) -> Vec<Member> {
    match super::lang::parse(language, source) {
        Some(tree) => definitions_parsed(&tree, language, source),
        None => Vec::new(),
    }
}

/// [`definitions`] of a file already parsed into `tree`.
pub fn definitions_parsed(tree: &Tree, language: &str, source: &str) -> Vec<Member> {
    let src = source.as_bytes();
    let sep = if language == "rust" { "::" } else { "." };
    let mut out = Vec::new();
    // (container node, its symbol) — explicit stack, no recursion.
    let mut stack: Vec<(Node, Option<String>)> = vec![(tree.root_node(), None)];
    while let Some((container, parent)) = stack.pop() {
        let mut c = container.walk();
        let children: Vec<Node> = container.named_children(&mut c).collect();
        for child in children {
            if out.len() >= MAX_DEFINITIONS {
                return out;
            }
            let Some(info) = def_info(child, language, src, parent.is_some()) else { continue };
            let symbol = match (&parent, info.name) {
                (Some(p), Some(n)) if !p.is_empty() => format!("{p}{sep}{n}"),
                (_, Some(n)) => n,
                (Some(p), None) => p.clone(),
                (None, None) => continue,
            };
            if symbol.is_empty() {
                continue;
            }
            out.push(Member {
                symbol: symbol.clone(),
                kind: info.kind,
                start_line: child.start_position().row as u32 + 1,
                end_line: child.end_position().row as u32 + 1,
            });
            if let Some(body) = info.body {
                stack.push((body, Some(symbol)));
            }
        }
    }
    out.sort_by_key(|m| (m.start_line, std::cmp::Reverse(m.end_line)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn methods_of_small_containers_are_definitions() {
        let py = "class Engine:\n    def run(self):\n        return 1\n\n    class Inner:\n        def go(self):\n            pass\n\ndef helper():\n    pass\n";
        let got: Vec<(String, u32, u32)> =
            definitions("python", py).into_iter().map(|m| (m.symbol, m.start_line, m.end_line)).collect();
        assert_eq!(
            got,
            vec![
                ("Engine".into(), 1, 7),
                ("Engine.run".into(), 2, 3),
                ("Engine.Inner".into(), 5, 7),
                ("Engine.Inner.go".into(), 6, 7),
                ("helper".into(), 9, 10)
            ]
        );
        let rs = "struct P;\nimpl P {\n    fn norm(&self) -> f64 { 0.0 }\n}\n";
        let syms: Vec<String> = definitions("rust", rs).into_iter().map(|m| m.symbol).collect();
        assert!(syms.contains(&"P::norm".to_string()), "{syms:?}");
        assert!(definitions("python", "def broken(:\n").len() <= 1);
        assert!(definitions("markdown", "# x").is_empty());
    }
}
