//! Code cut on definition boundaries: the top level (or an opened container's members) walked
//! in order, each definition a chunk with the comments and attributes directly above it, the
//! gaps between definitions `module` chunks; a definition over budget opened into its members
//! when it is a container, otherwise split between the statements of its body, every piece
//! after the first prefixed with the definition's signature.

use tree_sitter::Node;

use super::chunker::{Chunker, Ctx};
use super::lang::{def_info, is_comment_like};
use super::record::make_chunk;
use ctxd_index::record::Chunk;

/// A definition found by [`Chunker::members`]: lines (0-based, with its leading comments),
/// symbol, kind, node and member container.
struct Def<'t> {
    start: usize,
    end: usize,
    symbol: Option<String>,
    kind: &'static str,
    node: Node<'t>,
    body: Option<Node<'t>>,
}

/// The statement list of a function-like node: follow `body` fields (or, without one, the
/// child spanning the most lines) down to the first node below the definition that has
/// several named children over several lines — a block of statements, match arms, cases.
fn statement_list(node: Node) -> Option<Node> {
    let mut cur = node;
    for depth in 0..6 {
        if let Some(body) = cur.child_by_field_name("body") {
            cur = body;
            continue;
        }
        if depth > 0 && cur.named_child_count() >= 2 && cur.end_position().row > cur.start_position().row {
            return Some(cur);
        }
        cur = widest_child(cur)?;
    }
    None
}

fn widest_child(node: Node) -> Option<Node> {
    let mut c = node.walk();
    let found = node.named_children(&mut c).max_by_key(|n| n.end_position().row - n.start_position().row);
    found
}

impl Chunker {
    /// Walks the named children of `container` covering lines `from..=to`, emitting definition
    /// chunks and gap (`module`) chunks in line order.
    pub(super) fn members(
        &self,
        ctx: &Ctx,
        container: Node,
        from: usize,
        to: usize,
        parent: Option<&str>,
        out: &mut Vec<Chunk>,
    ) {
        let mut gap_start = from;
        let mut comment_start: Option<usize> = None;
        let mut cursor = container.walk();
        let children: Vec<Node> = container.named_children(&mut cursor).collect();
        for child in children {
            let (start, end) = (child.start_position().row, child.end_position().row);
            if end < gap_start || start > to {
                continue;
            }
            if is_comment_like(child.kind()) {
                // A run of comments/attributes directly above a definition belongs to it.
                comment_start.get_or_insert(start.max(gap_start));
                continue;
            }
            let Some(info) = def_info(child, ctx.lang, ctx.src, parent.is_some()) else {
                comment_start = None;
                continue;
            };
            let def_start = comment_start.take().unwrap_or(start).max(gap_start);
            let def_end = end.min(to);
            if def_start > gap_start {
                self.gap(ctx, gap_start, def_start - 1, parent, out);
            }
            let symbol = match (parent, info.name) {
                (Some(p), Some(n)) => Some(format!("{p}{}{n}", if ctx.lang == "rust" { "::" } else { "." })),
                (None, Some(n)) => Some(n),
                (p, None) => p.map(str::to_string),
            };
            let def = Def { start: def_start, end: def_end, symbol, kind: info.kind, node: child, body: info.body };
            self.definition(ctx, def, out);
            gap_start = def_end + 1;
        }
        if gap_start <= to {
            self.gap(ctx, gap_start, to, parent, out);
        }
    }

    fn definition(&self, ctx: &Ctx, def: Def, out: &mut Vec<Chunk>) {
        let Def { start, end, ref symbol, kind, body, .. } = def;
        let symbol = symbol.clone();
        let tokens: usize = ctx.line_tokens[start..=end].iter().sum();
        if tokens <= self.cfg.max_tokens {
            self.push(ctx, start..=end, symbol, Some(kind), out);
            return;
        }
        if let Some(body) = body {
            let has_members = {
                let mut c = body.walk();
                let found = body.named_children(&mut c).any(|n| def_info(n, ctx.lang, ctx.src, true).is_some());
                found
            };
            if has_members {
                let before = out.len();
                self.members(ctx, body, start, end, symbol.as_deref().or(Some("")), out);
                // The container's header/tail chunks carry the container's kind, marked as a part.
                for c in &mut out[before..] {
                    if c.kind.as_deref() == Some("module") {
                        c.kind = Some(format!("{kind}_part"));
                        c.symbol = symbol.clone();
                    }
                }
                return;
            }
        }
        // Pieces of an oversized definition: `function_part` etc., so whole definitions
        // (plain kinds) can be told from pieces.
        let part_kind = format!("{kind}_part");
        if !self.statement_pieces(ctx, &def, &part_kind, out) {
            self.windows(ctx, start..=end, symbol, Some(&part_kind), out);
        }
    }

    /// Splits an oversized definition between the statements of its body. Every piece after
    /// the first starts with the definition's signature (the lines from its first code line to
    /// the first statement), so it reads as code of that function; line ranges cite the piece's
    /// own lines. A statement larger than a piece is cut between lines. False when the
    /// definition has no statement list to cut (the caller falls back to windows).
    fn statement_pieces(&self, ctx: &Ctx, def: &Def, kind: &str, out: &mut Vec<Chunk>) -> bool {
        let Def { start, end, ref symbol, node, .. } = *def;
        let Some(body) = statement_list(node) else { return false };
        let mut cursor = body.walk();
        let mut cuts: Vec<usize> = body
            .named_children(&mut cursor)
            .map(|c| c.start_position().row)
            .filter(|&r| r > start && r <= end)
            .collect();
        cuts.dedup();
        let Some(&first_stmt) = cuts.first() else { return false };
        cuts.push(end + 1);
        let max = self.cfg.max_tokens.max(8);
        // The signature: from the node's first line up to the first statement, if it is short.
        let sig_start = node.start_position().row.max(start);
        let mut header_end = first_stmt.saturating_sub(1).max(sig_start);
        let tokens_of = |a: usize, b: usize| ctx.line_tokens[a..=b].iter().sum::<usize>();
        while header_end > sig_start && tokens_of(sig_start, header_end) > max / 3 {
            header_end -= 1;
        }
        let (header, header_tokens) = if tokens_of(sig_start, header_end) <= max / 3 {
            (ctx.lines[sig_start..=header_end].join("\n"), tokens_of(sig_start, header_end))
        } else {
            (String::new(), 0)
        };
        let mut a = start;
        while a <= end {
            let budget = if a == start || header.is_empty() { max } else { max - header_tokens };
            // The furthest statement boundary the piece can reach.
            let mut b = None;
            let mut sum = 0;
            let mut line = a;
            for &cut in cuts.iter().filter(|&&c| c > a) {
                while line < cut {
                    sum += ctx.line_tokens[line];
                    line += 1;
                }
                if sum > budget {
                    break;
                }
                b = Some(cut - 1);
            }
            let b = match b {
                Some(b) => b,
                None => {
                    // One statement larger than a piece: as many of its lines as fit.
                    if ctx.line_tokens[a] > budget {
                        self.long_line(ctx, a, symbol.clone(), Some(kind), out);
                        a += 1;
                        continue;
                    }
                    let mut b = a;
                    let mut sum = ctx.line_tokens[a];
                    while b < end && sum + ctx.line_tokens[b + 1] <= budget {
                        b += 1;
                        sum += ctx.line_tokens[b];
                    }
                    b
                }
            };
            let body_text = ctx.lines[a..=b].join("\n");
            if !body_text.trim().is_empty() {
                let content = if a == start || header.is_empty() || a <= header_end {
                    body_text
                } else {
                    format!("{header}\n{body_text}")
                };
                let tokens = (self.count)(&content);
                out.push(make_chunk(content, a, b, symbol.clone(), Some(kind), tokens));
            }
            a = b + 1;
        }
        true
    }

    fn gap(&self, ctx: &Ctx, start: usize, end: usize, parent: Option<&str>, out: &mut Vec<Chunk>) {
        let text: String = ctx.lines[start..=end].join("\n");
        // Closing braces and blank runs carry no meaning of their own.
        if text.chars().filter(|c| c.is_alphanumeric()).count() < 3 {
            return;
        }
        let symbol = parent.filter(|p| !p.is_empty()).map(str::to_string);
        self.windows(ctx, start..=end, symbol, Some("module"), out);
    }
}
#[cfg(test)]
mod tests {
    use crate::chunk::testing::chunker;

    #[test]
    fn rust_definitions_with_docs_and_exact_lines() {
        let src = "use std::fmt;\n\n/// Adds two numbers.\n#[inline]\nfn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n\nstruct Point { x: i32 }\n\nimpl Point {\n    fn norm(&self) -> i32 { self.x }\n}\n";
        let chunks = chunker(200).chunk("rust", src);
        let add = chunks.iter().find(|c| c.symbol.as_deref() == Some("add")).expect("add chunk");
        assert_eq!((add.start_line, add.end_line), (3, 7));
        assert!(add.content.starts_with("/// Adds two numbers."));
        assert_eq!(add.kind.as_deref(), Some("function"));
        let imp = chunks.iter().find(|c| c.kind.as_deref() == Some("impl")).expect("impl chunk");
        assert_eq!(imp.symbol.as_deref(), Some("Point"));
        assert_eq!((imp.start_line, imp.end_line), (11, 13));
        let module = chunks.iter().find(|c| c.kind.as_deref() == Some("module")).expect("use chunk");
        assert_eq!(module.start_line, 1);
        for c in &chunks {
            let lines: Vec<&str> = src.split('\n').collect();
            assert_eq!(c.content, lines[c.start_line as usize - 1..c.end_line as usize].join("\n"));
        }
    }

    #[test]
    fn large_container_is_opened_with_qualified_members() {
        let mut src = String::from("class Store:\n    \"\"\"A store.\"\"\"\n");
        for i in 0..6 {
            src.push_str(&format!(
                "    def get_{i}(self, key):\n        return self.data[key] + {i} + other_value + more\n\n"
            ));
        }
        let chunks = chunker(30).chunk("python", &src);
        let syms: Vec<_> = chunks.iter().filter_map(|c| c.symbol.clone()).collect();
        assert!(syms.contains(&"Store.get_0".to_string()), "{syms:?}");
        assert!(syms.contains(&"Store.get_5".to_string()), "{syms:?}");
        let method = chunks.iter().find(|c| c.symbol.as_deref() == Some("Store.get_3")).unwrap();
        assert_eq!(method.kind.as_deref(), Some("method"));
        assert!(method.content.trim_start().starts_with("def get_3"));
    }

    #[test]
    fn oversized_functions_split_between_statements_with_the_signature() {
        let mut src = String::from("/// Doc.\nfn process(input: &str, limit: usize) -> usize {\n");
        for i in 0..8 {
            src.push_str(&format!(
                "    if input.len() > {i} {{\n        step_{i}(input, limit);\n        log({i});\n    }}\n"
            ));
        }
        src.push_str("    limit\n}\n");
        let chunks = chunker(30).chunk("rust", &src);
        assert!(chunks.len() > 2, "{chunks:#?}");
        assert!(chunks.iter().all(|c| c.kind.as_deref() == Some("function_part")));
        assert!(chunks.iter().all(|c| c.token_count <= 30), "{chunks:#?}");
        let lines: Vec<&str> = src.lines().collect();
        assert_eq!(chunks[0].start_line, 1);
        assert_eq!(chunks.last().unwrap().end_line as usize, lines.len());
        for (i, c) in chunks.iter().enumerate() {
            // Cut between statements: every piece after the first starts on an `if` or the tail.
            let first = lines[c.start_line as usize - 1].trim_start();
            if i > 0 {
                assert!(first.starts_with("if ") || first.starts_with("limit"), "{first}");
                assert!(c.content.starts_with("fn process(input: &str, limit: usize) -> usize {\n"), "{}", c.content);
                let own = lines[c.start_line as usize - 1..c.end_line as usize].join("\n");
                assert!(c.content.ends_with(&own));
            }
            if i + 1 < chunks.len() {
                assert_eq!(chunks[i + 1].start_line, c.end_line + 1, "pieces are contiguous, no overlap");
            }
        }
    }
}
