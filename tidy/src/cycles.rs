//! Import circles: the strongly connected groups of a crate's file-level import graph.
//!
//! A group of two or more files that reach each other through imports is a circle: none of them
//! can be read, changed or moved alone. Tarjan's algorithm finds every such group in one pass.

use crate::modules::Import;
use std::collections::BTreeMap;

/// One circle: its files and the imports that join them.
#[derive(Debug)]
pub struct Circle {
    pub files: Vec<String>,
    pub imports: Vec<Import>,
}

impl std::fmt::Display for Circle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "import circle between {}:", self.files.join(", "))?;
        for import in &self.imports {
            write!(f, "\n    {} → {} (names {})", import.from, import.to, import.path)?;
        }
        Ok(())
    }
}

/// Every circle among `imports`, each with the imports inside it (one per pair of files).
pub fn circles(imports: &[Import]) -> Vec<Circle> {
    let mut graph: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for import in imports {
        graph.entry(&import.from).or_default().push(&import.to);
        graph.entry(&import.to).or_default();
    }
    let mut tarjan =
        Tarjan { graph: &graph, index: BTreeMap::new(), low: BTreeMap::new(), stack: Vec::new(), groups: Vec::new() };
    for node in graph.keys() {
        if !tarjan.index.contains_key(node) {
            tarjan.visit(node);
        }
    }
    tarjan
        .groups
        .into_iter()
        .filter(|group| group.len() > 1)
        .map(|mut files| {
            files.sort();
            let mut seen = std::collections::BTreeSet::new();
            let imports = imports
                .iter()
                .filter(|i| files.contains(&i.from.as_str()) && files.contains(&i.to.as_str()))
                .filter(|i| seen.insert((i.from.clone(), i.to.clone())))
                .cloned()
                .collect();
            Circle { files: files.into_iter().map(str::to_string).collect(), imports }
        })
        .collect()
}

struct Tarjan<'a> {
    graph: &'a BTreeMap<&'a str, Vec<&'a str>>,
    index: BTreeMap<&'a str, usize>,
    low: BTreeMap<&'a str, usize>,
    stack: Vec<&'a str>,
    groups: Vec<Vec<&'a str>>,
}

impl<'a> Tarjan<'a> {
    fn visit(&mut self, node: &'a str) {
        let n = self.index.len();
        self.index.insert(node, n);
        self.low.insert(node, n);
        self.stack.push(node);
        for &next in &self.graph[node] {
            if !self.index.contains_key(next) {
                self.visit(next);
                let low = self.low[node].min(self.low[next]);
                self.low.insert(node, low);
            } else if self.stack.contains(&next) {
                let low = self.low[node].min(self.index[next]);
                self.low.insert(node, low);
            }
        }
        if self.low[node] == self.index[node] {
            let mut group = Vec::new();
            while let Some(top) = self.stack.pop() {
                group.push(top);
                if top == node {
                    break;
                }
            }
            self.groups.push(group);
        }
    }
}
