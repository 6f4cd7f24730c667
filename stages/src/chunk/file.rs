//! What a whole text becomes: the method for its language (tree-sitter definitions, document
//! sections, CSV row windows that repeat the header, plain token windows), the sections of
//! extracted text citing their fixed positions, the merging of small sibling definitions, and
//! the file's symbol table (taken before merging).

use tree_sitter::Tree;

use super::chunker::{ChunkConfig, Chunker, Ctx};
use super::lang::{grammar, parse};
use super::record::{self, make_chunk, ChunkedFile};
use super::sections::line_sections;
use super::symbols;
use crate::edges;
use crate::load::{LoadedFile, Section};
use crate::metrics as m;
use ctxd_index::record::Chunk;

impl Chunker {
    /// Chunks a loaded file and lists its definitions and, for code, its outgoing edges
    /// ([`crate::edges::extract`], each from the innermost definition of the symbol table).
    /// Symbols are taken before small definitions are merged, so every definition has its own
    /// symbol-table row.
    pub fn chunk_file(&self, file: &LoadedFile) -> ChunkedFile {
        let (mut chunks, symbols, edges) = match &file.sections {
            Some(sections) => (self.chunk_sections(&file.text, sections), Vec::new(), Vec::new()),
            None => {
                let (raw, method, tree) = self.chunk_unmerged(file.language, &file.text);
                let mut symbols = symbols::extract(&file.rel, file.language, &raw);
                if let Some(tree) = &tree {
                    symbols::add_members(&file.rel, file.language, &file.text, tree, &mut symbols);
                }
                let chunks = self.merge_small(file.language, &file.text, raw);
                self.count_chunks(method, &chunks);
                let edges = match tree {
                    Some(tree) => {
                        let edges = edges::extract_parsed(&file.rel, file.language, &file.text, &tree);
                        edges::fit_to_symbols(edges, &symbols)
                    }
                    None => Vec::new(),
                };
                (chunks, symbols, edges)
            }
        };
        record::place(&file.rel, file.language, &mut chunks);
        ChunkedFile {
            rel: file.rel.clone(),
            language: file.language,
            file_hash: file.file_hash.clone(),
            chunks,
            symbols,
            edges,
            part: None,
        }
    }

    /// Chunks text extracted from a PDF, notebook or HTML file: windows inside each section,
    /// labelled with it and citing its fixed position (page, cell, heading line).
    pub fn chunk_sections(&self, text: &str, sections: &[Section]) -> Vec<Chunk> {
        if text.trim().is_empty() {
            return Vec::new();
        }
        let ctx = self.ctx("text", text);
        let mut out = Vec::new();
        for s in sections {
            let from = out.len();
            let end = s.end.min(ctx.lines.len() - 1);
            if s.start > end {
                continue;
            }
            self.windows(&ctx, s.start..=end, s.label.clone(), Some(s.kind), &mut out);
            if let Some(line) = s.fixed_line {
                for c in &mut out[from..] {
                    (c.start_line, c.end_line) = (line, line);
                }
            }
        }
        self.count_chunks("section", &out);
        out
    }

    fn count_chunks(&self, method: &'static str, out: &[Chunk]) {
        let tokens: u64 = out.iter().map(|c| c.token_count as u64).sum();
        metrics::counter!(m::CHUNK_CHUNKS_TOTAL, "method" => method).increment(out.len() as u64);
        metrics::counter!(m::CHUNK_TOKENS_TOTAL).increment(tokens);
    }

    /// Chunks `text` written in `language`.
    pub fn chunk(&self, language: &str, text: &str) -> Vec<Chunk> {
        let (raw, method, _) = self.chunk_unmerged(language, text);
        let chunks = self.merge_small(language, text, raw);
        self.count_chunks(method, &chunks);
        chunks
    }

    /// Code: merges runs of sibling whole definitions (same parent, nothing but blank lines
    /// or braces between them) while one side is below `min_tokens` and the result stays
    /// within `merge_tokens`. The merged chunk has kind `definitions` and the symbols of its
    /// members joined by `, `. Module chunks (imports, headers) and pieces are never merged.
    fn merge_small(&self, language: &str, text: &str, chunks: Vec<Chunk>) -> Vec<Chunk> {
        if self.cfg.merge_tokens == 0 || chunks.len() < 2 || grammar(language).is_none() {
            return chunks;
        }
        fn mergeable(c: &Chunk) -> Option<&str> {
            let kind = c.kind.as_deref()?;
            if kind == "module" || kind.ends_with("_part") {
                return None;
            }
            let first = c.symbol.as_deref()?.split(", ").next()?;
            let parent = first.rfind("::").or_else(|| first.rfind('.')).map_or("", |i| &first[..i]);
            Some(parent)
        }
        let lines: Vec<&str> = text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l)).collect();
        let mut out: Vec<Chunk> = Vec::with_capacity(chunks.len());
        for c in chunks {
            if let Some(last) = out.last_mut() {
                let small =
                    (last.token_count as usize) < self.cfg.min_tokens || (c.token_count as usize) < self.cfg.min_tokens;
                let fits = (last.token_count + c.token_count) as usize <= self.cfg.merge_tokens;
                let siblings = matches!((mergeable(last), mergeable(&c)), (Some(a), Some(b)) if a == b);
                if small && fits && siblings && c.start_line > last.end_line && (c.end_line as usize) <= lines.len() {
                    let content = lines[last.start_line as usize - 1..c.end_line as usize].join("\n");
                    let tokens = (self.count)(&content);
                    if tokens <= self.cfg.merge_tokens {
                        let symbol =
                            format!("{}, {}", last.symbol.as_deref().unwrap_or(""), c.symbol.as_deref().unwrap_or(""));
                        *last = make_chunk(
                            content,
                            last.start_line as usize - 1,
                            c.end_line as usize - 1,
                            Some(symbol),
                            Some("definitions"),
                            tokens,
                        );
                        continue;
                    }
                }
            }
            out.push(c);
        }
        out
    }

    /// [`Chunker::chunk`] before small definitions are merged, with the method used (the
    /// metric label) and, for code, the parsed tree (the graph's edges are read from it).
    fn chunk_unmerged(&self, language: &str, text: &str) -> (Vec<Chunk>, &'static str, Option<Tree>) {
        if text.trim().is_empty() {
            return (Vec::new(), "window", None);
        }
        let ctx = self.ctx(language, text);
        let mut out = Vec::new();
        let mut method = "window";
        let mut parsed = None;
        if let Some(tree) = parse(language, text) {
            let root = tree.root_node();
            self.members(&ctx, root, 0, ctx.lines.len() - 1, None, &mut out);
            method = "tree_sitter";
            parsed = Some(tree);
        }
        if method == "window" {
            if language == "csv" {
                self.csv(&ctx, &mut out);
            } else if let Some(sections) = line_sections(language, text, &ctx.lines) {
                method = "section";
                for s in sections {
                    self.windows(&ctx, s.start..=s.end, s.label, Some(s.kind), &mut out);
                }
            } else {
                self.windows(&ctx, 0..=ctx.lines.len() - 1, None, None, &mut out);
            }
        }
        (out, method, parsed)
    }

    /// CSV/TSV: row windows, each chunk starting with the header line so its columns are named.
    fn csv(&self, ctx: &Ctx, out: &mut Vec<Chunk>) {
        let header = ctx.lines[0];
        if ctx.lines.len() == 1 {
            self.push(ctx, 0..=0, None, Some("rows"), out);
            return;
        }
        let header_tokens = ctx.line_tokens[0];
        let budget = self.cfg.max_tokens.saturating_sub(header_tokens).max(self.cfg.max_tokens / 2).max(8);
        let sub = Chunker { count: self.count.clone(), cfg: ChunkConfig { max_tokens: budget, ..self.cfg.clone() } };
        let from = out.len();
        sub.windows(ctx, 1..=ctx.lines.len() - 1, None, Some("rows"), out);
        for c in &mut out[from..] {
            c.content = format!("{header}\n{}", c.content);
            c.content_hash = blake3::hash(c.content.as_bytes()).to_hex().to_string();
            c.token_count = (self.count)(&c.content) as u32;
        }
    }
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::chunk::testing::{chunker, words};

    #[test]
    fn small_siblings_are_merged_but_keep_their_symbols() {
        let mut src = String::from("use std::fmt;\n\nstruct P { x: i32, y: i32 }\n\nimpl P {\n");
        for f in ["x", "y", "z"] {
            src.push_str(&format!("    fn {f}(&self) -> i32 {{ self.{f} }}\n\n"));
        }
        src.push_str("}\n\nfn big(a: i32) -> i32 {\n");
        for i in 0..12 {
            src.push_str(&format!("    let v{i} = a * {i} + compute(a, {i}) - other(a);\n"));
        }
        src.push_str("    a\n}\n");
        let c =
            Chunker::new(words(), ChunkConfig { max_tokens: 200, overlap_tokens: 4, min_tokens: 20, merge_tokens: 60 });
        let file = LoadedFile {
            rel: "src/p.rs".into(),
            language: "rust",
            text: src.clone(),
            file_hash: String::new(),
            lossy: false,
            sections: None,
            stream: None,
        };
        let out = c.chunk_file(&file);
        // The three one-line methods are one chunk; the impl is small enough to be whole, so
        // the merge happens at the top level: struct + impl are siblings, `big` is not small.
        let merged: Vec<_> = out.chunks.iter().filter(|c| c.kind.as_deref() == Some("definitions")).collect();
        assert_eq!(merged.len(), 1, "{:#?}", out.chunks);
        assert_eq!(merged[0].symbol.as_deref(), Some("P, P"));
        assert_eq!((merged[0].start_line, merged[0].end_line), (3, 12));
        assert_eq!(merged[0].content, src.lines().skip(2).take(10).collect::<Vec<_>>().join("\n"));
        // Imports stay their own chunk; the big function stays whole and alone.
        assert_eq!(out.chunks[0].kind.as_deref(), Some("module"));
        assert!(out.chunks.iter().any(|c| c.symbol.as_deref() == Some("big") && c.kind.as_deref() == Some("function")));
        // The symbol table still has every definition.
        let names: Vec<_> = out.symbols.iter().map(|s| s.symbol.as_str()).collect();
        for n in ["P", "big"] {
            assert!(names.contains(&n), "{names:?}");
        }
        assert!(out.symbols.iter().any(|s| s.kind == "struct") && out.symbols.iter().any(|s| s.kind == "impl"));
        // With merging off nothing is merged.
        let plain = chunker(200).chunk_file(&file);
        assert!(plain.chunks.iter().all(|c| c.kind.as_deref() != Some("definitions")));
    }

    #[test]
    fn methods_merge_inside_an_opened_container() {
        let mut src = String::from("class Store:\n");
        for i in 0..4 {
            src.push_str(&format!("    def get_{i}(self):\n        return {i}\n\n"));
        }
        src.push_str("    def long(self):\n");
        for i in 0..20 {
            src.push_str(&format!("        total = total + value_{i} * weight_{i}\n"));
        }
        let c =
            Chunker::new(words(), ChunkConfig { max_tokens: 60, overlap_tokens: 4, min_tokens: 10, merge_tokens: 30 });
        let chunks = c.chunk("python", &src);
        let merged = chunks.iter().find(|c| c.kind.as_deref() == Some("definitions")).expect("merged");
        assert_eq!(merged.symbol.as_deref(), Some("Store.get_0, Store.get_1, Store.get_2, Store.get_3"));
        assert_eq!((merged.start_line, merged.end_line), (2, 12));
        assert!(chunks.iter().all(|c| c.token_count <= 60));
    }

    #[test]
    fn markdown_splits_at_headings() {
        let md = "# Title\nintro text here\n## Install\nrun the thing\n```\n# not a heading\n```\n## Usage\nuse it\n";
        let chunks = chunker(200).chunk("markdown", md);
        let syms: Vec<_> = chunks.iter().filter_map(|c| c.symbol.clone()).collect();
        assert_eq!(syms, vec!["Title", "Title > Install", "Title > Usage"]);
        assert!(chunks[1].content.contains("# not a heading"));
    }

    #[test]
    fn csv_repeats_the_header() {
        let csv: String = std::iter::once("city,country,population\n".to_string())
            .chain((0..60).map(|i| format!("town{i},land{i},{i}000\n")))
            .collect();
        let chunks = chunker(30).chunk("csv", &csv);
        assert!(chunks.len() > 3);
        assert!(chunks.iter().all(|c| c.content.starts_with("city,country,population\n")));
        assert!(chunks.iter().all(|c| c.token_count <= 30));
        assert_eq!(chunks[0].start_line, 2);
        assert_eq!(chunks.last().unwrap().end_line, 61);
    }

    #[test]
    fn extracted_sections_cite_fixed_positions() {
        let text = "page one words\nmore words\npage two words";
        let sections = vec![
            Section { start: 0, end: 1, label: Some("page 1".into()), kind: "page", fixed_line: Some(1) },
            Section { start: 2, end: 2, label: Some("page 2".into()), kind: "page", fixed_line: Some(2) },
        ];
        let chunks = chunker(200).chunk_sections(text, &sections);
        assert_eq!(chunks.len(), 2);
        assert_eq!((chunks[1].start_line, chunks[1].end_line), (2, 2));
        assert_eq!(chunks[1].symbol.as_deref(), Some("page 2"));
        assert_eq!(chunks[0].kind.as_deref(), Some("page"));
    }

    #[test]
    fn broken_code_still_chunks() {
        let chunks = chunker(200).chunk("rust", "fn broken( {\n let x = ;\n}\n\nfn ok() {}\n");
        assert!(!chunks.is_empty());
        assert!(chunks.iter().any(|c| c.content.contains("fn ok")));
    }
}
