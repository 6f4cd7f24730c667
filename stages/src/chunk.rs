//! The chunk stage: a file's text → chunks with exact line ranges, symbols and token counts.
//!
//! **Code** (Rust, Python, JavaScript, TypeScript, TSX, Go, Java, C, C++, C#, Ruby, PHP, Bash,
//! Kotlin, Scala, Lua, Swift) is parsed with tree-sitter. The top
//! level is walked in order: every definition (function, method, class, struct, enum, trait,
//! impl, interface, type, module) becomes a chunk together with the comments, doc comments,
//! attributes and decorators directly above it; everything between definitions (imports,
//! module headers, statements) becomes `module` chunks. A definition larger than the token
//! budget is opened up when it is a container (impl, class, trait, module, interface): its
//! header, each member (with a qualified symbol such as `Type::method` or `Class.method`) and
//! its tail become chunks; otherwise it is split between the statements of its body (or the
//! arms of a `match`, the cases of a `switch`: the first multi-line list of named children
//! under its `body`), every piece after the first prefixed with the definition's signature so
//! it still reads as part of that function (its line range cites only its own lines); a single
//! statement larger than a piece is cut between lines. Small whole definitions (under
//! `min_tokens`) are merged with adjacent sibling definitions into `definitions` chunks of up to
//! `merge_tokens`, their symbols joined by `, `; the symbol table is built before merging, so
//! every definition keeps its own row. A file that fails to parse falls back to windows.
//!
//! **Documents** are first split into the sections [`crate::formats`] finds (Markdown and reST
//! headings, JSON/YAML keys, TOML tables; pages, cells and headings of extracted PDF, notebook
//! and HTML text), each labelled with its citation path as the chunk symbol; CSV is cut into row
//! windows that repeat the header. **Everything else** is cut into token windows with overlap on
//! line boundaries. A single line longer than the budget is cut into pieces that keep its line
//! number. Pieces of an oversized definition have kind `<kind>_part`.
//!
//! Token counts come from the embedding model's tokenizer (any `Fn(&str) -> usize` in tests).

pub mod stage;
use std::sync::Arc;

use tree_sitter::{Language, Node, Parser};

use crate::formats::{self, Section};
use crate::load::LoadedFile;
use crate::metrics as m;

/// Counts tokens in a text.
pub type TokenCountFn = Arc<dyn Fn(&str) -> usize + Send + Sync>;

/// Chunker settings.
#[derive(Debug, Clone)]
pub struct ChunkConfig {
    /// Upper bound of tokens per chunk.
    pub max_tokens: usize,
    /// Tokens repeated between consecutive windows.
    pub overlap_tokens: usize,
    /// Whole definitions below this many tokens are merged with their sibling definitions…
    pub min_tokens: usize,
    /// …while the merged chunk stays within this many tokens (0: never merge).
    pub merge_tokens: usize,
}

impl Default for ChunkConfig {
    fn default() -> Self {
        Self { max_tokens: 240, overlap_tokens: 32, min_tokens: 48, merge_tokens: 120 }
    }
}

/// One chunk of a file.
#[derive(Debug, Clone, PartialEq)]
pub struct Chunk {
    pub symbol: Option<String>,
    pub kind: Option<String>,
    /// 1-based, inclusive.
    pub start_line: u32,
    /// 1-based, inclusive.
    pub end_line: u32,
    pub content: String,
    pub content_hash: String,
    pub token_count: u32,
}

/// A file cut into chunks.
#[derive(Debug, Clone)]
pub struct ChunkedFile {
    pub rel: String,
    pub language: &'static str,
    /// blake3 of the file; for a part of a streamed file, `partial:<hash>` (complete once the
    /// index's `streams` table records `<hash>`).
    pub file_hash: String,
    pub chunks: Vec<Chunk>,
    /// The file's definitions (the symbol table's rows); empty for streamed parts.
    pub symbols: Vec<ctxd_index::SymbolRow>,
    /// Set for the parts of a file too large to hold in memory (see [`Chunker::stream`]).
    pub part: Option<Part>,
}

/// One part of a streamed file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    /// 0-based part number.
    pub index: u32,
    /// True for the last part; its `index + 1` is the number of parts.
    pub last: bool,
    /// blake3 of the whole file, recorded once every part is committed.
    pub file_hash: String,
}

/// Bounds the parts of streamed files that are read but not yet committed, so memory stays
/// flat however fast the reader is compared with embedding and commits (queues between stages
/// are bounded in items, and a part is a big item). Cheap to clone (shared).
#[derive(Clone)]
pub struct PartBudget {
    inner: std::sync::Arc<(std::sync::Mutex<usize>, std::sync::Condvar)>,
    max: usize,
}

impl PartBudget {
    /// At most `max` parts in flight.
    pub fn new(max: usize) -> Self {
        Self { inner: Default::default(), max: max.max(1) }
    }

    /// Blocks the calling (blocking) thread until a part may be produced, then takes a slot.
    /// A part lost without reaching the sink (a failed embedding) would hold its slot for
    /// ever, so after 30 s without progress the slot is taken anyway (slower, never stuck).
    pub fn acquire(&self) {
        let (lock, cv) = &*self.inner;
        let mut n = lock.lock().unwrap_or_else(|e| e.into_inner());
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while *n >= self.max {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                tracing::warn!("stream parts not committed for 30 s; reading on");
                break;
            }
            n = cv.wait_timeout(n, left).unwrap_or_else(|e| e.into_inner()).0;
        }
        *n += 1;
    }

    /// `k` parts left the pipeline (committed, failed or dropped).
    pub fn release(&self, k: usize) {
        if k == 0 {
            return;
        }
        let (lock, cv) = &*self.inner;
        let mut n = lock.lock().unwrap_or_else(|e| e.into_inner());
        *n = n.saturating_sub(k);
        cv.notify_all();
    }
}

/// Prefix of the `file_hash` of the rows of a streamed file (see [`ctxd_index::streams`]).
pub use ctxd_index::PARTIAL_PREFIX;

/// Stable id of a chunk: path, line range and content.
pub fn chunk_id(path: &str, chunk: &Chunk) -> String {
    let mut h = blake3::Hasher::new();
    h.update(path.as_bytes());
    h.update(&[0]);
    h.update(&chunk.start_line.to_le_bytes());
    h.update(&chunk.end_line.to_le_bytes());
    h.update(chunk.content_hash.as_bytes());
    h.finalize().to_hex()[..32].to_string()
}

/// The tree-sitter grammar for a language label, when ctxd has one.
pub fn grammar(language: &str) -> Option<Language> {
    Some(match language {
        "rust" => tree_sitter_rust::LANGUAGE.into(),
        "python" => tree_sitter_python::LANGUAGE.into(),
        "javascript" => tree_sitter_javascript::LANGUAGE.into(),
        "typescript" => tree_sitter_typescript::LANGUAGE_TYPESCRIPT.into(),
        "tsx" => tree_sitter_typescript::LANGUAGE_TSX.into(),
        "go" => tree_sitter_go::LANGUAGE.into(),
        "java" => tree_sitter_java::LANGUAGE.into(),
        "c" => tree_sitter_c::LANGUAGE.into(),
        "cpp" => tree_sitter_cpp::LANGUAGE.into(),
        "csharp" => tree_sitter_c_sharp::LANGUAGE.into(),
        "ruby" => tree_sitter_ruby::LANGUAGE.into(),
        "php" => tree_sitter_php::LANGUAGE_PHP.into(),
        "bash" => tree_sitter_bash::LANGUAGE.into(),
        "kotlin" => tree_sitter_kotlin_ng::LANGUAGE.into(),
        "scala" => tree_sitter_scala::LANGUAGE.into(),
        "lua" => tree_sitter_lua::LANGUAGE.into(),
        "swift" => tree_sitter_swift::LANGUAGE.into(),
        _ => return None,
    })
}

/// What a definition node is.
struct DefInfo<'t> {
    name: Option<String>,
    kind: &'static str,
    /// Node whose named children are members (class body, impl block, …).
    body: Option<Node<'t>>,
}

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

fn text_of(node: Node, src: &[u8]) -> String {
    node.utf8_text(src).unwrap_or("").to_string()
}

fn field_text(node: Node, field: &str, src: &[u8]) -> Option<String> {
    node.child_by_field_name(field).map(|n| text_of(n, src))
}

fn is_comment_like(kind: &str) -> bool {
    matches!(
        kind,
        "comment"
            | "line_comment"
            | "block_comment"
            | "multiline_comment"
            | "attribute_item"
            | "attribute_list"
            | "decorator"
            | "annotation"
    )
}

/// Classifies a node as a definition (with name, kind and member container) or not.
fn def_info<'t>(node: Node<'t>, lang: &str, src: &[u8], nested: bool) -> Option<DefInfo<'t>> {
    let func = if nested { "method" } else { "function" };
    match (lang, node.kind()) {
        ("rust", "function_item" | "function_signature_item") => {
            Some(DefInfo { name: field_text(node, "name", src), kind: func, body: None })
        }
        ("rust", "struct_item") => Some(DefInfo { name: field_text(node, "name", src), kind: "struct", body: None }),
        ("rust", "enum_item") => Some(DefInfo { name: field_text(node, "name", src), kind: "enum", body: None }),
        ("rust", "union_item") => Some(DefInfo { name: field_text(node, "name", src), kind: "union", body: None }),
        ("rust", "macro_definition") => {
            Some(DefInfo { name: field_text(node, "name", src), kind: "macro", body: None })
        }
        ("rust", "trait_item") => {
            Some(DefInfo { name: field_text(node, "name", src), kind: "trait", body: node.child_by_field_name("body") })
        }
        ("rust", "mod_item") if node.child_by_field_name("body").is_some() => Some(DefInfo {
            name: field_text(node, "name", src),
            kind: "module",
            body: node.child_by_field_name("body"),
        }),
        ("rust", "impl_item") => {
            let ty = field_text(node, "type", src).map(|t| t.split('<').next().unwrap_or(&t).trim().to_string());
            Some(DefInfo { name: ty, kind: "impl", body: node.child_by_field_name("body") })
        }
        ("python", "function_definition") => {
            Some(DefInfo { name: field_text(node, "name", src), kind: func, body: None })
        }
        ("python", "class_definition") => {
            Some(DefInfo { name: field_text(node, "name", src), kind: "class", body: node.child_by_field_name("body") })
        }
        ("python", "decorated_definition") => {
            node.child_by_field_name("definition").and_then(|d| def_info(d, lang, src, nested))
        }
        ("javascript" | "typescript" | "tsx", k) => match k {
            "function_declaration" | "generator_function_declaration" | "function_signature" => {
                Some(DefInfo { name: field_text(node, "name", src), kind: func, body: None })
            }
            "method_definition" | "method_signature" | "abstract_method_signature" => {
                Some(DefInfo { name: field_text(node, "name", src), kind: "method", body: None })
            }
            "class_declaration" | "abstract_class_declaration" | "class" => Some(DefInfo {
                name: field_text(node, "name", src),
                kind: "class",
                body: node.child_by_field_name("body"),
            }),
            "interface_declaration" => Some(DefInfo {
                name: field_text(node, "name", src),
                kind: "interface",
                body: node.child_by_field_name("body"),
            }),
            "type_alias_declaration" => Some(DefInfo { name: field_text(node, "name", src), kind: "type", body: None }),
            "enum_declaration" => Some(DefInfo { name: field_text(node, "name", src), kind: "enum", body: None }),
            "internal_module" | "module" => Some(DefInfo {
                name: field_text(node, "name", src),
                kind: "module",
                body: node.child_by_field_name("body"),
            }),
            "export_statement" => node.child_by_field_name("declaration").and_then(|d| def_info(d, lang, src, nested)),
            "expression_statement" => node
                .named_child(0)
                .filter(|c| c.kind() == "internal_module")
                .and_then(|d| def_info(d, lang, src, nested)),
            "lexical_declaration" | "variable_declaration" => {
                let decl = node.named_child(0).filter(|c| c.kind() == "variable_declarator")?;
                let value = decl.child_by_field_name("value")?;
                let kind = match value.kind() {
                    "arrow_function" | "function_expression" | "function" | "generator_function" => func,
                    "class" => "class",
                    _ => return None,
                };
                Some(DefInfo { name: field_text(decl, "name", src), kind, body: None })
            }
            "public_field_definition" | "field_definition" => {
                let value = node.child_by_field_name("value")?;
                matches!(value.kind(), "arrow_function" | "function_expression").then(|| DefInfo {
                    name: field_text(node, "name", src),
                    kind: "method",
                    body: None,
                })
            }
            _ => None,
        },
        ("go", "function_declaration") => {
            Some(DefInfo { name: field_text(node, "name", src), kind: "function", body: None })
        }
        ("go", "method_declaration") => {
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
        ("go", "type_declaration") => {
            let spec = node.named_child(0).filter(|c| c.kind() == "type_spec" || c.kind() == "type_alias")?;
            let kind = match spec.child_by_field_name("type").map(|t| t.kind()) {
                Some("struct_type") => "struct",
                Some("interface_type") => "interface",
                _ => "type",
            };
            Some(DefInfo { name: field_text(spec, "name", src), kind, body: None })
        }
        ("cpp", "template_declaration") => {
            let mut cursor = node.walk();
            let inner = node.named_children(&mut cursor).find(|c| def_info(*c, lang, src, nested).is_some())?;
            def_info(inner, lang, src, nested)
        }
        (_, kind) => {
            let (def_kind, container) = generic_def(lang, kind)?;
            let def_kind = if def_kind == "function" && nested { "method" } else { def_kind };
            let name = field_text(node, "name", src).or_else(|| declarator_name(node, src));
            // C/C++ prototypes and variables are declarations too, but not definitions.
            if matches!(lang, "c" | "cpp") && kind == "type_definition" && name.is_none() {
                return None;
            }
            let body = if container { body_of(node) } else { None };
            Some(DefInfo { name, kind: def_kind, body })
        }
    }
}

/// Definition node kinds of the languages handled by the table (Java, C, C++, C#, Ruby, PHP,
/// Bash, Kotlin, Scala, Lua, Swift): the chunk kind and whether members are chunked inside it.
fn generic_def(lang: &str, kind: &str) -> Option<(&'static str, bool)> {
    Some(match (lang, kind) {
        ("java", "method_declaration" | "constructor_declaration") => ("method", false),
        ("java", "class_declaration" | "record_declaration") => ("class", true),
        ("java", "interface_declaration" | "annotation_type_declaration") => ("interface", true),
        ("java", "enum_declaration") => ("enum", true),
        ("c" | "cpp", "function_definition") => ("function", false),
        ("c" | "cpp", "struct_specifier") => ("struct", true),
        ("c" | "cpp", "enum_specifier") => ("enum", false),
        ("c" | "cpp", "type_definition") => ("type", false),
        ("cpp", "class_specifier") => ("class", true),
        ("cpp", "namespace_definition") => ("module", true),
        ("csharp", "class_declaration" | "record_declaration") => ("class", true),
        ("csharp", "struct_declaration") => ("struct", true),
        ("csharp", "interface_declaration") => ("interface", true),
        ("csharp", "enum_declaration") => ("enum", false),
        ("csharp", "method_declaration" | "constructor_declaration" | "destructor_declaration") => ("method", false),
        ("csharp", "property_declaration") => ("property", false),
        ("csharp", "namespace_declaration" | "file_scoped_namespace_declaration") => ("module", true),
        ("ruby", "method" | "singleton_method") => ("function", false),
        ("ruby", "class" | "singleton_class") => ("class", true),
        ("ruby", "module") => ("module", true),
        ("php", "function_definition") => ("function", false),
        ("php", "method_declaration") => ("method", false),
        ("php", "class_declaration") => ("class", true),
        ("php", "interface_declaration") => ("interface", true),
        ("php", "trait_declaration") => ("trait", true),
        ("php", "enum_declaration") => ("enum", true),
        ("php", "namespace_definition") => ("module", true),
        ("bash", "function_definition") => ("function", false),
        ("kotlin", "function_declaration") => ("function", false),
        ("kotlin", "class_declaration") => ("class", true),
        ("kotlin", "object_declaration") => ("object", true),
        ("scala", "function_definition" | "function_declaration") => ("function", false),
        ("scala", "class_definition") => ("class", true),
        ("scala", "object_definition") => ("object", true),
        ("scala", "trait_definition") => ("trait", true),
        ("lua", "function_declaration") => ("function", false),
        ("swift", "function_declaration" | "init_declaration") => ("function", false),
        ("swift", "class_declaration") => ("class", true),
        ("swift", "protocol_declaration") => ("interface", true),
        _ => return None,
    })
}

/// The name inside a C/C++ declarator chain (`int *foo(void)` → `foo`, `A::b` → `A::b`).
fn declarator_name(node: Node, src: &[u8]) -> Option<String> {
    let mut cur = node.child_by_field_name("declarator")?;
    for _ in 0..8 {
        match cur.kind() {
            "identifier"
            | "field_identifier"
            | "qualified_identifier"
            | "destructor_name"
            | "operator_name"
            | "type_identifier" => return Some(text_of(cur, src)),
            _ => cur = cur.child_by_field_name("declarator")?,
        }
    }
    None
}

/// The member container of a definition: its `body` field, or a body-like child (Kotlin).
fn body_of(node: Node) -> Option<Node> {
    if let Some(b) = node.child_by_field_name("body") {
        return Some(b);
    }
    let mut cursor = node.walk();
    let found = node
        .named_children(&mut cursor)
        .find(|c| matches!(c.kind(), "class_body" | "enum_class_body" | "declaration_list" | "template_body"));
    found
}

/// Cuts files into chunks.
#[derive(Clone)]
pub struct Chunker {
    count: TokenCountFn,
    cfg: ChunkConfig,
}

struct Ctx<'a> {
    lines: Vec<&'a str>,
    line_tokens: Vec<usize>,
    lang: &'a str,
    src: &'a [u8],
}

impl Chunker {
    /// A chunker counting tokens with `count`.
    pub fn new(count: TokenCountFn, cfg: ChunkConfig) -> Self {
        Self { count, cfg }
    }

    /// A chunker counting tokens with the embedding model's tokenizer.
    pub fn with_tokenizer(counter: ctxd_models::TokenCounter, cfg: ChunkConfig) -> Self {
        Self::new(Arc::new(move |s: &str| counter.count(s)), cfg)
    }

    /// Chunks a loaded file.
    /// Chunks a loaded file and lists its definitions. Symbols are taken before small
    /// definitions are merged, so every definition has its own symbol-table row.
    pub fn chunk_file(&self, file: &LoadedFile) -> ChunkedFile {
        let (chunks, symbols) = match &file.sections {
            Some(sections) => (self.chunk_sections(&file.text, sections), Vec::new()),
            None => {
                let (raw, method) = self.chunk_unmerged(file.language, &file.text);
                let symbols = crate::symbols::extract(&file.rel, file.language, &raw);
                let chunks = self.merge_small(file.language, &file.text, raw);
                self.count_chunks(method, &chunks);
                (chunks, symbols)
            }
        };
        ChunkedFile {
            rel: file.rel.clone(),
            language: file.language,
            file_hash: file.file_hash.clone(),
            chunks,
            symbols,
            part: None,
        }
    }

    /// Chunks a file too large to hold in memory: reads about `block_bytes` of whole lines at a
    /// time, cuts them into token windows (exact file line numbers) and hands each block's
    /// chunks to `emit` as a [`Part`] while reading on; returns the last part. `emit` returning
    /// false stops the read (the pipeline is shutting down). Memory stays at one block.
    pub fn stream(
        &self,
        file: &LoadedFile,
        path: &std::path::Path,
        block_bytes: usize,
        budget: &PartBudget,
        mut emit: impl FnMut(ChunkedFile) -> bool,
    ) -> std::io::Result<ChunkedFile> {
        use std::io::BufRead;
        let mut file_reader = std::io::BufReader::with_capacity(1 << 20, std::fs::File::open(path)?);
        // UTF-16 (with a byte-order mark) is transcoded to UTF-8 as it is read.
        let bom = match file_reader.fill_buf()? {
            [0xFF, 0xFE, ..] => Some(true),
            [0xFE, 0xFF, ..] => Some(false),
            _ => None,
        };
        let mut reader: Box<dyn BufRead> = match bom {
            Some(le) => {
                file_reader.consume(2);
                let utf8 = crate::utf16::Utf16Reader::new(file_reader, le);
                Box::new(std::io::BufReader::with_capacity(1 << 20, utf8))
            }
            None => Box::new(file_reader),
        };
        let partial = format!("{PARTIAL_PREFIX}{}", file.file_hash);
        let mut index = 0u32;
        let mut first_line = 0usize;
        let mut block: Vec<u8> = Vec::with_capacity(block_bytes + 4096);
        loop {
            // One slot per part, released by the sink when the part is committed.
            budget.acquire();
            block.clear();
            let mut eof = false;
            while block.len() < block_bytes {
                if reader.read_until(b'\n', &mut block)? == 0 {
                    eof = true;
                    break;
                }
            }
            if !eof && reader.fill_buf()?.is_empty() {
                eof = true;
            }
            metrics::counter!(m::CHUNK_STREAM_BYTES_TOTAL).increment(block.len() as u64);
            let text = String::from_utf8_lossy(&block);
            let lines = text.matches('\n').count() + usize::from(!text.ends_with('\n') && !text.is_empty());
            let mut chunks = self.chunk("text", &text);
            for c in &mut chunks {
                c.start_line += first_line as u32;
                c.end_line += first_line as u32;
            }
            first_line += lines;
            let part = ChunkedFile {
                rel: file.rel.clone(),
                language: file.language,
                file_hash: partial.clone(),
                chunks,
                symbols: Vec::new(),
                part: Some(Part { index, last: eof, file_hash: file.file_hash.clone() }),
            };
            metrics::counter!(m::CHUNK_STREAM_PARTS_TOTAL).increment(1);
            if eof {
                return Ok(part);
            }
            if !emit(part) {
                budget.release(1);
                return Err(std::io::Error::new(std::io::ErrorKind::Interrupted, "pipeline shutting down"));
            }
            index += 1;
        }
    }

    fn ctx<'a>(&self, language: &'a str, text: &'a str) -> Ctx<'a> {
        let mut lines: Vec<&str> = text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l)).collect();
        // The "line" after a final newline does not exist.
        if lines.len() > 1 && lines.last() == Some(&"") {
            lines.pop();
        }
        let line_tokens = lines.iter().map(|l| (self.count)(l) + 1).collect();
        Ctx { lines, line_tokens, lang: language, src: text.as_bytes() }
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
            self.windows(&ctx, s.start, end, s.label.clone(), Some(s.kind), &mut out);
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
        let (raw, method) = self.chunk_unmerged(language, text);
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
    /// metric label).
    fn chunk_unmerged(&self, language: &str, text: &str) -> (Vec<Chunk>, &'static str) {
        if text.trim().is_empty() {
            return (Vec::new(), "window");
        }
        let ctx = self.ctx(language, text);
        let mut out = Vec::new();
        let mut method = "window";
        if let Some(grammar) = grammar(language) {
            let mut parser = Parser::new();
            if parser.set_language(&grammar).is_ok() {
                if let Some(tree) = parser.parse(text, None) {
                    let root = tree.root_node();
                    self.members(&ctx, root, 0, ctx.lines.len() - 1, None, &mut out);
                    method = "tree_sitter";
                }
            }
        }
        if method == "window" {
            if language == "csv" {
                self.csv(&ctx, &mut out);
            } else if let Some(sections) = formats::line_sections(language, text, &ctx.lines) {
                method = "section";
                for s in sections {
                    self.windows(&ctx, s.start, s.end, s.label, Some(s.kind), &mut out);
                }
            } else {
                self.windows(&ctx, 0, ctx.lines.len() - 1, None, None, &mut out);
            }
        }
        (out, method)
    }

    /// CSV/TSV: row windows, each chunk starting with the header line so its columns are named.
    fn csv(&self, ctx: &Ctx, out: &mut Vec<Chunk>) {
        let header = ctx.lines[0];
        if ctx.lines.len() == 1 {
            self.push(ctx, 0, 0, None, Some("rows"), out);
            return;
        }
        let header_tokens = ctx.line_tokens[0];
        let budget = self.cfg.max_tokens.saturating_sub(header_tokens).max(self.cfg.max_tokens / 2).max(8);
        let sub = Chunker { count: self.count.clone(), cfg: ChunkConfig { max_tokens: budget, ..self.cfg.clone() } };
        let from = out.len();
        sub.windows(ctx, 1, ctx.lines.len() - 1, None, Some("rows"), out);
        for c in &mut out[from..] {
            c.content = format!("{header}\n{}", c.content);
            c.content_hash = blake3::hash(c.content.as_bytes()).to_hex().to_string();
            c.token_count = (self.count)(&c.content) as u32;
        }
    }

    /// Walks the named children of `container` covering lines `from..=to`, emitting definition
    /// chunks and gap (`module`) chunks in line order.
    fn members(&self, ctx: &Ctx, container: Node, from: usize, to: usize, parent: Option<&str>, out: &mut Vec<Chunk>) {
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
            self.push(ctx, start, end, symbol, Some(kind), out);
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
            self.windows(ctx, start, end, symbol, Some(&part_kind), out);
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
        self.windows(ctx, start, end, symbol, Some("module"), out);
    }

    /// Token windows with overlap over lines `start..=end`.
    fn windows(
        &self,
        ctx: &Ctx,
        start: usize,
        end: usize,
        symbol: Option<String>,
        kind: Option<&str>,
        out: &mut Vec<Chunk>,
    ) {
        let max = self.cfg.max_tokens.max(8);
        let mut a = start;
        while a <= end {
            if ctx.line_tokens[a] > max {
                self.long_line(ctx, a, symbol.clone(), kind, out);
                a += 1;
                continue;
            }
            let mut b = a;
            let mut tokens = ctx.line_tokens[a];
            while b < end && ctx.line_tokens[b + 1] <= max && tokens + ctx.line_tokens[b + 1] <= max {
                b += 1;
                tokens += ctx.line_tokens[b];
            }
            self.push(ctx, a, b, symbol.clone(), kind, out);
            if b >= end {
                break;
            }
            // Next window starts early enough to repeat ~overlap tokens, but always moves on.
            let mut next = b + 1;
            let mut overlap = 0;
            while next > a + 1 && overlap + ctx.line_tokens[next - 1] <= self.cfg.overlap_tokens {
                next -= 1;
                overlap += ctx.line_tokens[next];
            }
            a = next;
        }
    }

    fn long_line(&self, ctx: &Ctx, line: usize, symbol: Option<String>, kind: Option<&str>, out: &mut Vec<Chunk>) {
        let text = ctx.lines[line];
        // Start from ~3 bytes per token and shrink a piece until it fits.
        let max = self.cfg.max_tokens.max(8);
        let mut rest = text;
        while !rest.is_empty() {
            let mut take = (max * 3).min(rest.len());
            loop {
                while !rest.is_char_boundary(take) {
                    take -= 1;
                }
                let piece = &rest[..take];
                let n = (self.count)(piece);
                if n <= max || take <= 16 {
                    if !piece.trim().is_empty() {
                        out.push(make_chunk(piece.to_string(), line, line, symbol.clone(), kind, n));
                    }
                    rest = &rest[take..];
                    break;
                }
                take = take * max / n.max(1) * 9 / 10;
                take = take.max(16).min(rest.len());
            }
        }
    }

    fn push(
        &self,
        ctx: &Ctx,
        start: usize,
        end: usize,
        symbol: Option<String>,
        kind: Option<&str>,
        out: &mut Vec<Chunk>,
    ) {
        let content = ctx.lines[start..=end].join("\n");
        if content.trim().is_empty() {
            return;
        }
        let tokens = (self.count)(&content);
        out.push(make_chunk(content, start, end, symbol, kind, tokens));
    }
}

fn make_chunk(
    content: String,
    start: usize,
    end: usize,
    symbol: Option<String>,
    kind: Option<&str>,
    tokens: usize,
) -> Chunk {
    let content_hash = blake3::hash(content.as_bytes()).to_hex().to_string();
    Chunk {
        symbol: symbol.filter(|s| !s.is_empty()),
        kind: kind.map(str::to_string),
        start_line: start as u32 + 1,
        end_line: end as u32 + 1,
        content,
        content_hash,
        token_count: tokens as u32,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words() -> TokenCountFn {
        Arc::new(|s: &str| s.split_whitespace().count())
    }

    fn chunker(max: usize) -> Chunker {
        Chunker::new(words(), ChunkConfig { max_tokens: max, overlap_tokens: 4, min_tokens: 0, merge_tokens: 0 })
    }

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
    fn js_ts_go_symbols() {
        let js = "import x from 'y';\nexport function hello(name) {\n  return 'hi ' + name;\n}\nconst arrow = (a) => a * 2;\nclass Greeter { greet() { return 1; } }\n";
        let syms: Vec<_> = chunker(200).chunk("javascript", js).into_iter().filter_map(|c| c.symbol).collect();
        assert_eq!(syms, vec!["hello", "arrow", "Greeter"]);
        let ts = "interface Shape { area(): number }\ntype Id = string;\nexport class Circle implements Shape {\n  area(): number { return 3; }\n}\n";
        let syms: Vec<_> = chunker(200).chunk("typescript", ts).into_iter().filter_map(|c| c.symbol).collect();
        assert_eq!(syms, vec!["Shape", "Id", "Circle"]);
        let go = "package main\n\nimport \"fmt\"\n\ntype Server struct {\n\tport int\n}\n\nfunc (s *Server) Start() error {\n\treturn nil\n}\n\nfunc main() {\n\tfmt.Println(1)\n}\n";
        let chunks = chunker(200).chunk("go", go);
        let syms: Vec<_> = chunks.iter().filter_map(|c| c.symbol.clone()).collect();
        assert_eq!(syms, vec!["Server", "Server.Start", "main"]);
    }

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

    #[test]
    fn windows_overlap_and_cover_everything() {
        let text: String = (1..=40).map(|i| format!("line {i} has five words\n")).collect();
        let chunks = chunker(25).chunk("text", &text);
        assert!(chunks.len() > 5);
        assert_eq!(chunks.first().unwrap().start_line, 1);
        assert_eq!(chunks.last().unwrap().end_line, 40);
        for pair in chunks.windows(2) {
            assert!(pair[1].start_line <= pair[0].end_line + 1, "gap between windows");
            assert!(pair[1].start_line > pair[0].start_line, "no progress");
        }
        assert!(chunks.iter().all(|c| c.token_count <= 25));
    }

    #[test]
    fn huge_single_line_is_split_and_keeps_its_line() {
        let line = "word ".repeat(5000);
        let chunks = chunker(50).chunk("text", &format!("first\n{line}\nlast"));
        assert!(chunks.len() > 50);
        assert!(chunks.iter().all(|c| c.token_count <= 50));
        assert!(chunks.iter().filter(|c| c.start_line == 2).count() > 50);
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

    /// One definition per language of the table, with its expected symbol and kind.
    #[test]
    fn every_grammar_finds_definitions() {
        let cases: &[(&str, &str, &str, &str)] = &[
            ("java", "class Shop {\n  /** Total. */\n  int total(int a) { return a; }\n}\n", "Shop", "class"),
            ("c", "#include <stdio.h>\n\nstatic int *find_slot(int key) {\n  return 0;\n}\n", "find_slot", "function"),
            ("cpp", "namespace net {\nclass Socket {\n public:\n  void close() {}\n};\n}\nint Socket::open() { return 1; }\n", "Socket::open", "function"),
            ("csharp", "namespace App {\n  public class Cart {\n    public int Count() { return 0; }\n  }\n}\n", "App", "module"),
            ("ruby", "# Greets.\ndef greet(name)\n  puts name\nend\n", "greet", "function"),
            ("php", "<?php\nfunction render_page($p) {\n  return $p;\n}\n", "render_page", "function"),
            ("bash", "#!/bin/sh\ndeploy_app() {\n  echo hi\n}\n", "deploy_app", "function"),
            ("kotlin", "fun parseConfig(s: String): Int {\n  return 1\n}\n", "parseConfig", "function"),
            ("scala", "object Main {\n  def run(x: Int): Int = x\n}\n", "Main", "object"),
            ("lua", "local M = {}\nfunction M.load(path)\n  return path\nend\n", "M.load", "function"),
            ("swift", "func fetchUser(id: Int) -> String {\n  return \"\"\n}\n", "fetchUser", "function"),
        ];
        // Containers over budget are opened into qualified members.
        let java = format!(
            "class Shop {{\n{}}}\n",
            (0..30).map(|i| format!("  int f{i}(int a) {{ return a + {i}; }}\n")).collect::<String>()
        );
        let chunks = chunker(60).chunk("java", &java);
        assert!(
            chunks.iter().any(|c| c.symbol.as_deref() == Some("Shop.f7") && c.kind.as_deref() == Some("method")),
            "{chunks:#?}"
        );
        for (lang, src, symbol, kind) in cases {
            let chunks = chunker(200).chunk(lang, src);
            let found = chunks.iter().find(|c| c.symbol.as_deref() == Some(symbol));
            let c = found.unwrap_or_else(|| panic!("{lang}: no chunk {symbol} in {chunks:#?}"));
            assert_eq!(c.kind.as_deref(), Some(*kind), "{lang}: {c:?}");
            let lines: Vec<&str> = src.lines().collect();
            assert_eq!(
                c.content,
                lines[c.start_line as usize - 1..c.end_line as usize].join("\n"),
                "{lang}: exact lines"
            );
        }
    }

    /// Streams the file at `path` in 4 KB blocks; returns every part, the last included.
    fn stream_parts(path: &std::path::Path) -> Vec<ChunkedFile> {
        let file = LoadedFile {
            rel: path.file_name().unwrap().to_string_lossy().into_owned(),
            language: "text",
            text: String::new(),
            file_hash: "h".into(),
            lossy: false,
            sections: None,
            stream: Some(path.to_path_buf()),
        };
        let mut parts = Vec::new();
        let last = chunker(40)
            .stream(&file, path, 4096, &PartBudget::new(1000), |p| {
                parts.push(p);
                true
            })
            .unwrap();
        parts.push(last);
        parts
    }

    /// Every chunk is exactly its lines of `text`, and every line of `text` is in some chunk.
    fn assert_exact_cover(parts: &[ChunkedFile], text: &str) {
        let lines: Vec<&str> = text.lines().collect();
        let mut covered = std::collections::BTreeSet::new();
        for c in parts.iter().flat_map(|p| &p.chunks) {
            assert_eq!(c.content, lines[c.start_line as usize - 1..c.end_line as usize].join("\n"));
            covered.extend(c.start_line..=c.end_line);
        }
        assert_eq!(covered.len(), lines.len(), "every line is in some chunk");
    }

    #[test]
    fn streamed_utf16_is_transcoded_with_exact_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big-utf16.log");
        let text: String = (1..=1500).map(|i| format!("zeile {i} größe ✓ 𝄞\n")).collect();
        let mut bytes = vec![0xFF, 0xFE];
        bytes.extend(text.encode_utf16().flat_map(u16::to_le_bytes));
        std::fs::write(&path, &bytes).unwrap();
        let parts = stream_parts(&path);
        assert!(parts.len() > 3, "{} parts", parts.len());
        assert_exact_cover(&parts, &text);
    }

    #[test]
    fn streamed_parts_keep_exact_line_numbers() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big.log");
        let text: String = (1..=2000).map(|i| format!("line {i} of the log\n")).collect();
        std::fs::write(&path, &text).unwrap();
        let parts = stream_parts(&path);
        assert!(parts.len() > 5, "{} parts", parts.len());
        assert!(parts.iter().enumerate().all(|(i, p)| p.part.as_ref().unwrap().index == i as u32));
        assert!(parts.last().unwrap().part.as_ref().unwrap().last);
        assert!(parts.iter().all(|p| p.file_hash == "partial:h"));
        assert_eq!(text.lines().count(), 2000);
        assert_exact_cover(&parts, &text);
    }

    #[test]
    fn broken_code_still_chunks() {
        let chunks = chunker(200).chunk("rust", "fn broken( {\n let x = ;\n}\n\nfn ok() {}\n");
        assert!(!chunks.is_empty());
        assert!(chunks.iter().any(|c| c.content.contains("fn ok")));
    }
}
