//! The walk every language shares: one parse, the definitions found exactly as the chunker
//! finds them (the top level, then the members of each container, named by
//! [`crate::chunk::lang::def_info`] and joined with `.` or `::`), a scope per definition with
//! the names bound inside it, and the edge sink (deduplicated, capped).
//!
//! A language supplies [`Rules`]: what a node emits, which names a node binds locally, which
//! names are builtins. One pass over the named nodes, in document order: a name is local from
//! where it is bound (a parameter, an assignment, a loop variable) to the end of its
//! definition, so a use written before its binding (a comprehension's expression before its
//! `for`) is not seen as local. The walk is iterative (an explicit stack, one tree cursor), so
//! a deeply nested file cannot overflow the thread's stack.

use std::collections::HashSet;
use std::sync::OnceLock;

use ctxd_index::{edges::EdgeKind, edges::EdgeRow};
use tree_sitter::{Node, Tree};

use crate::chunk::lang::def_info;

/// Most edges kept for one file; the rest are counted and dropped.
pub(super) const MAX_EDGES: usize = 20_000;

/// What a language contributes to the walk.
pub(super) trait Rules {
    /// Emits the edges of `node`; false when its children need no visit.
    fn visit(&self, node: Node, cx: &mut Cx) -> bool;
    /// Adds the names `node` binds locally (parameters, assignments, loop variables, …).
    fn bind(&self, _node: Node, _src: &[u8], _locals: &mut HashSet<String>) {}
    /// Whether `name` is a builtin (never an edge target on its own).
    fn builtin(&self, _name: &str) -> bool {
        false
    }
    /// The receiver variable of a method definition (Go), written `self` in targets.
    fn receiver(&self, _def: Node, _src: &[u8]) -> Option<String> {
        None
    }
}

/// One definition (or the file) being walked.
struct Scope {
    symbol: Option<String>,
    /// The definition's own name: never one of its locals.
    own: Option<String>,
    locals: HashSet<String>,
    /// Node id of the definition's member container.
    body: Option<usize>,
    receiver: Option<String>,
}

/// The walk's state, handed to [`Rules::visit`].
pub(super) struct Cx<'a> {
    pub src: &'a [u8],
    path: &'a str,
    language: &'a str,
    rules: &'a dyn Rules,
    scopes: Vec<Scope>,
    /// Names the file's imports bind (modules and imported names).
    pub imported: HashSet<String>,
    skip: HashSet<usize>,
    seen: HashSet<(Option<String>, EdgeKind, String, Option<String>)>,
    out: Vec<EdgeRow>,
    dropped: usize,
}

/// Text of a node (empty when not UTF-8).
pub(super) fn text<'s>(node: Node, src: &'s [u8]) -> &'s str {
    node.utf8_text(src).unwrap_or("")
}

/// Adds the name `node` gives (when there is one) to the names a scope binds.
pub(super) fn bind_name(node: Option<Node>, src: &[u8], out: &mut HashSet<String>) {
    if let Some(n) = node {
        out.insert(text(n, src).to_string());
    }
}

/// 1-based line of a node.
pub(super) fn line(node: Node) -> u32 {
    node.start_position().row as u32 + 1
}

/// How a grammar writes a member access (`a.b`): the node kinds of a chain's root name, the
/// access node, its field holding the member name (and the kinds that name may have, when
/// the grammar allows others, such as JS's computed members) and its field holding the object.
pub(super) struct Access {
    pub roots: &'static [&'static str],
    pub access: &'static str,
    pub member: &'static str,
    pub member_kinds: &'static [&'static str],
    pub object: &'static str,
}

/// A plain chain: `a`, `this.a`, `a.b.c` — root names and member accesses only (a call, an
/// index or any other node in it gives `None`); segments root first.
pub(super) fn chain<'s>(node: Node, src: &'s [u8], how: &Access) -> Option<Vec<&'s str>> {
    let mut segs = Vec::new();
    let mut cur = node;
    loop {
        let kind = cur.kind();
        if how.roots.contains(&kind) {
            segs.push(text(cur, src));
            segs.reverse();
            return Some(segs);
        }
        if kind != how.access {
            return None;
        }
        let member = cur.child_by_field_name(how.member)?;
        if !how.member_kinds.is_empty() && !how.member_kinds.contains(&member.kind()) {
            return None;
        }
        segs.push(text(member, src));
        cur = cur.child_by_field_name(how.object)?;
    }
}

/// `CamelCase`: an upper-case first letter and some lower-case letter (not `T`, not `MAX`).
pub(super) fn is_camel(name: &str) -> bool {
    name.chars().next().is_some_and(|c| c.is_uppercase()) && name.chars().any(|c| c.is_lowercase())
}

/// Whether `name` is in `list`, through a set built on first use.
pub(super) fn listed(set: &'static OnceLock<HashSet<&'static str>>, list: &[&'static str], name: &str) -> bool {
    set.get_or_init(|| list.iter().copied().collect()).contains(name)
}

/// The `builtin` method of a [`Rules`] impl: whether a name is in the language's list, through
/// a set built on first use (`walk::builtins!(BUILTINS);` inside the impl).
macro_rules! builtins {
    ($list:expr) => {
        fn builtin(&self, name: &str) -> bool {
            static SET: std::sync::OnceLock<std::collections::HashSet<&'static str>> = std::sync::OnceLock::new();
            super::walk::listed(&SET, $list, name)
        }
    };
}
pub(super) use builtins;

/// The named children of a node.
pub(super) fn named(node: Node) -> Vec<Node> {
    let mut c = node.walk();
    let v = node.named_children(&mut c).collect();
    v
}

/// The named children of a node under a field (several `name` fields in Go, …).
pub(super) fn fields<'t>(node: Node<'t>, field: &str) -> Vec<Node<'t>> {
    let mut c = node.walk();
    let v = node.children_by_field_name(field, &mut c).filter(|n| n.is_named()).collect();
    v
}

impl<'a> Cx<'a> {
    /// A type named by one word (`Foo`), referenced; false: nothing below it to visit.
    pub fn type_word(&mut self, node: Node) -> bool {
        let src = self.src;
        self.reference(&[text(node, src)], ".", line(node));
        false
    }

    /// A type named by a dotted path (`pkg.Foo`), referenced by its segments.
    pub fn type_path(&mut self, node: Node) -> bool {
        let src = self.src;
        let segs: Vec<&str> = text(node, src).split('.').map(str::trim).collect();
        self.reference(&segs, ".", line(node));
        false
    }

    /// An identifier, read.
    pub fn identifier(&mut self, node: Node) -> bool {
        let src = self.src;
        self.read(&[text(node, src)], ".", line(node));
        false
    }

    /// A member access (`a.b.c`) read as one dotted name when `how` finds it one: `Some(false)`;
    /// `None` when it is not (a call's result, an index): the caller says what to visit.
    pub fn access(&mut self, node: Node, how: &Access) -> Option<bool> {
        let src = self.src;
        let segs = chain(node, src, how)?;
        self.read(&segs, ".", line(node));
        Some(false)
    }

    /// Skips the subtree of `node` (it was handled by its parent).
    pub fn skip(&mut self, node: Option<Node>) {
        if let Some(n) = node {
            self.skip.insert(n.id());
        }
    }

    /// The language label of the file.
    pub fn language(&self) -> &str {
        self.language
    }

    fn scope(&self) -> &Scope {
        self.scopes.last().expect("the file scope is never popped")
    }

    /// Whether `name` is bound locally in the innermost definition.
    pub fn local(&self, name: &str) -> bool {
        self.scope().binds(name)
    }

    /// Whether `name` is a builtin of the language.
    pub fn builtin(&self, name: &str) -> bool {
        self.rules.builtin(name)
    }

    /// The receiver variable of the enclosing method (Go).
    pub fn receiver(&self) -> Option<&str> {
        self.scope().receiver.as_deref()
    }

    /// Adds an edge from the innermost definition (deduplicated; the first line is kept).
    pub fn emit(&mut self, kind: EdgeKind, target: &str, name: Option<&str>, line: u32) {
        let target = target.trim();
        if target.is_empty() {
            return;
        }
        let from = self.scope().symbol.clone();
        if !self.seen.insert((from.clone(), kind, target.to_string(), name.map(str::to_string))) {
            return;
        }
        if self.out.len() >= MAX_EDGES {
            self.dropped += 1;
            return;
        }
        self.out.push(EdgeRow::new(self.path, self.language, from.as_deref(), kind, target, name, line));
    }

    /// An `Imports` edge; `bound` is the name the import binds in the file, if any.
    pub fn import(&mut self, target: &str, name: Option<&str>, bound: Option<&str>, line: u32) {
        if let Some(b) = bound.filter(|b| !b.is_empty()) {
            self.imported.insert(b.to_string());
        }
        self.emit(EdgeKind::Imports, target, name, line);
    }

    /// A call of the plain chain `segs` (`foo`, `obj.method`, `self.x`, `pkg.mod.f`) joined
    /// with `sep`: a local or builtin callee is skipped; on `self`/`this` or a local variable
    /// only a direct member keeps its head (`self.a.b()`, `x.attr.m()` → `b`, `m`).
    pub fn call(&mut self, segs: &[&str], sep: &str, line: u32) {
        let Some(&root) = segs.first() else { return };
        let root = if Some(root) == self.receiver() { "self" } else { root };
        let target = match segs.len() {
            1 if self.local(root) || self.builtin(root) => return,
            1 => root.to_string(),
            _ if matches!(root, "self" | "this" | "cls" | "super" | "Self") || self.local(root) => match segs.len() {
                2 => format!("{root}{sep}{}", segs[1]),
                _ => segs[segs.len() - 1].to_string(),
            },
            _ if self.builtin(root) => return,
            _ => segs.join(sep),
        };
        self.emit(EdgeKind::Calls, &target, None, line);
    }

    /// A name read (not called): a `CamelCase` head is a reference to that type (`Color.RED` →
    /// `Color`); a chain on an imported module is kept up to its first `CamelCase` part
    /// (`os.path.sep`, `mod.Class.attr` → `mod.Class`); anything else is a local value.
    pub fn read(&mut self, segs: &[&str], sep: &str, line: u32) {
        let Some(&root) = segs.first() else { return };
        let camel = is_camel(root);
        if !camel && !self.imported.contains(root) {
            return;
        }
        if self.local(root) || self.builtin(root) || Some(root) == self.receiver() {
            return;
        }
        let target = if camel {
            root.to_string()
        } else if self.imported.contains(root) {
            let end = segs.iter().skip(1).position(|s| is_camel(s)).map_or(segs.len(), |i| i + 2);
            segs[..end].join(sep)
        } else {
            return;
        };
        self.emit(EdgeKind::References, &target, None, line);
    }

    /// A name used as a type, decorator or class test: a reference unless builtin or bound
    /// locally here or in an enclosing definition (an impl's or class's type parameters).
    pub fn reference(&mut self, segs: &[&str], sep: &str, line: u32) {
        let Some(&root) = segs.first() else { return };
        let bound = self.scopes.iter().skip(1).any(|s| s.binds(root));
        if root.is_empty() || bound || self.builtin(root) || matches!(root, "self" | "this" | "Self") {
            return;
        }
        self.emit(EdgeKind::References, &segs.join(sep), None, line);
    }

    /// An `Inherits` edge from the innermost definition (builtin bases such as `Exception`
    /// are kept: they say what a class is).
    pub fn inherits(&mut self, target: &str, line: u32) {
        let root = target.split(['.', ':', '<']).next().unwrap_or(target);
        if !self.local(root) {
            self.emit(EdgeKind::Inherits, target, None, line);
        }
    }

    /// Whether `node` was marked by [`Cx::skip`] (handled by an ancestor).
    pub fn skipped(&self, node: Node) -> bool {
        self.skip.contains(&node.id())
    }
}

impl Scope {
    /// Whether `name` is bound here (so far in the walk).
    fn binds(&self, name: &str) -> bool {
        self.locals.contains(name) && self.own.as_deref() != Some(name)
    }
}

enum Step<'t> {
    /// A node, and for a member of a container the container's symbol (`None` at the top).
    Enter(Node<'t>, Option<Option<String>>),
    Leave,
}

/// Walks the tree of `source` in `language` with `rules`; the edges in document order, at
/// most [`MAX_EDGES`].
pub(super) fn run(path: &str, language: &str, source: &str, tree: &Tree, rules: &dyn Rules) -> Vec<EdgeRow> {
    let root = tree.root_node();
    let sep = if language == "rust" { "::" } else { "." };
    let mut cx = Cx {
        src: source.as_bytes(),
        path,
        language,
        rules,
        scopes: Vec::new(),
        imported: HashSet::new(),
        skip: HashSet::new(),
        seen: HashSet::new(),
        out: Vec::new(),
        dropped: 0,
    };
    cx.scopes.push(Scope { symbol: None, own: None, locals: HashSet::new(), body: Some(root.id()), receiver: None });
    let mut stack = vec![Step::Enter(root, None)];
    let mut cursor = root.walk();
    while let Some(step) = stack.pop() {
        let (node, member_of) = match step {
            Step::Leave => {
                cx.scopes.pop();
                continue;
            }
            Step::Enter(node, member_of) => (node, member_of),
        };
        if cx.skip.remove(&node.id()) {
            continue;
        }
        if let Some(parent) = member_of {
            if let Some(info) = def_info(node, language, cx.src, parent.is_some()) {
                // Named exactly as `Chunker::members` names it.
                let symbol = match (parent, info.name.clone()) {
                    (Some(p), Some(n)) => Some(format!("{p}{sep}{n}")),
                    (None, Some(n)) => Some(n),
                    (p, None) => p,
                }
                .filter(|s| !s.is_empty());
                for holder in
                    [Some(node), node.child_by_field_name("declaration"), node.child_by_field_name("definition")]
                {
                    cx.skip(holder.and_then(|h| h.child_by_field_name("name")));
                }
                let receiver = rules.receiver(node, cx.src);
                let body = info.body.map(|b| b.id());
                cx.scopes.push(Scope { symbol, own: info.name, locals: HashSet::new(), body, receiver });
                stack.push(Step::Leave);
            }
        }
        if let Some(scope) = cx.scopes.last_mut() {
            rules.bind(node, cx.src, &mut scope.locals);
        }
        if !rules.visit(node, &mut cx) {
            continue;
        }
        let members = if node.id() == root.id() {
            Some(None)
        } else if cx.scope().body == Some(node.id()) {
            Some(Some(cx.scope().symbol.clone().unwrap_or_default()))
        } else {
            None
        };
        // Anonymous tokens (punctuation, keywords) carry no edges: named children only.
        let from = stack.len();
        stack.extend(node.named_children(&mut cursor).map(|child| Step::Enter(child, members.clone())));
        stack[from..].reverse();
    }
    if cx.dropped > 0 {
        tracing::debug!(path, dropped = cx.dropped, "edge cap of {MAX_EDGES} reached; the rest dropped");
    }
    cx.out
}
