//! Definitions out of a file's chunks: the rows of the index's `symbols` table.
//!
//! Every chunk whose kind is a definition (`function`, `method`, `class`, `struct`, `impl`, …)
//! names one; a definition split into pieces (`function_part`, or a large container opened into
//! members whose header/tail are `class_part`) is one symbol spanning all its pieces. For each:
//! the name (last segment of the chunk symbol), the parent (the rest), a qualified name (module
//! path from the file path + symbol: `src::auth::verify_password`, `pkg.models.User.save`), the
//! signature (first code line after doc comments, attributes and decorators) and a doc summary
//! (first line of the leading doc comment, or of a Python docstring).

use std::collections::BTreeMap;

use ctxd_index::symbols::SymbolRow;

use ctxd_index::record::Chunk;

fn is_comment(line: &str) -> bool {
    let t = line.trim_start();
    ["///", "//", "/*", "*", "#[", "#!", "@", "--", "\"\"\"", "'''"].iter().any(|p| t.starts_with(p))
        || (t.starts_with('#') && !t.starts_with("#include") && !t.starts_with("#define"))
}

fn doc_summary(content: &str, language: &str) -> Option<String> {
    let clean = |l: &str| {
        l.trim()
            .trim_start_matches("///")
            .trim_start_matches("//!")
            .trim_start_matches("/**")
            .trim_start_matches("//")
            .trim_start_matches("/*")
            .trim_start_matches('*')
            .trim_start_matches('#')
            .trim_start_matches("--")
            .trim_end_matches("*/")
            .trim()
            .to_string()
    };
    // Leading comments above the definition.
    for line in content.lines() {
        let t = line.trim_start();
        if t.starts_with("#[") || t.starts_with('@') || t.is_empty() {
            continue;
        }
        if !is_comment(line) {
            break;
        }
        let c = clean(line);
        if !c.is_empty() {
            return Some(c);
        }
    }
    // A Python docstring right after the signature.
    if language == "python" {
        let mut lines = content.lines().skip_while(|l| {
            !l.trim_start().starts_with("def ")
                && !l.trim_start().starts_with("class ")
                && !l.trim_start().starts_with("async def ")
        });
        lines.next();
        for line in lines.by_ref().take(3) {
            let t = line.trim().trim_start_matches("r\"\"\"").trim_start_matches("\"\"\"").trim_start_matches("'''");
            let t = t.trim_end_matches("\"\"\"").trim_end_matches("'''").trim();
            if !t.is_empty() && (line.contains("\"\"\"") || line.contains("'''")) {
                return Some(t.to_string());
            }
        }
    }
    None
}

/// Lines a signature spans at most (a long parameter list, one per line).
const SIGNATURE_LINES: usize = 12;

/// The definition's signature: its first line that is not a comment, attribute or decorator,
/// and the lines after it while its brackets are open (a parameter list over several lines),
/// joined on one line, at most 300 characters, without a trailing `{`.
fn signature(content: &str) -> String {
    let mut sig = String::new();
    let mut depth = 0i32;
    // Comments, attributes and decorators are skipped before the first line only: inside an open
    // parameter list `*args`, `**kwargs` and `#[attr]` lines are part of it.
    let lines = content.lines().map(str::trim).skip_while(|l| l.is_empty() || is_comment(l)).filter(|l| !l.is_empty());
    for (i, line) in lines.take(SIGNATURE_LINES).enumerate() {
        // On one line: `def f(\n    a,\n    b,\n) -> T:` is `def f(a, b,) -> T:`.
        if i > 0 && !sig.ends_with(['(', '[']) && !line.starts_with([')', ']']) {
            sig.push(' ');
        }
        sig.push_str(line);
        // Brackets inside string literals (`sep="("`) do not count.
        let mut quote: Option<char> = None;
        let mut escaped = false;
        for c in line.chars() {
            match (quote, c) {
                (Some(_), '\\') if !escaped => {
                    escaped = true;
                    continue;
                }
                (Some(q), c) if c == q && !escaped => quote = None,
                (Some(_), _) => {}
                // (Not `'`: Rust lifetimes and char literals would open a string.)
                (None, '"' | '`') => quote = Some(c),
                (None, '(' | '[') => depth += 1,
                (None, ')' | ']') => depth -= 1,
                _ => {}
            }
            escaped = false;
        }
        if depth <= 0 || sig.len() > 300 {
            break;
        }
    }
    let mut sig: String = sig.chars().take(300).collect();
    if let Some(stripped) = sig.strip_suffix('{') {
        sig = stripped.trim_end().to_string();
    }
    sig
}

fn module_path(path: &str, language: &str) -> (String, &'static str) {
    let sep = if matches!(language, "rust" | "cpp" | "php") { "::" } else { "." };
    let stem = path.rsplit_once('.').map_or(path, |(s, _)| s);
    let mut parts: Vec<&str> = stem.split('/').filter(|p| !p.is_empty()).collect();
    if matches!(parts.last(), Some(&"mod") | Some(&"__init__") | Some(&"index") | Some(&"lib")) && parts.len() > 1 {
        parts.pop();
    }
    (parts.join(sep), sep)
}

/// The definitions among the chunks of the file at `path` (all of its chunks, before small
/// definitions are merged — see [`crate::chunk::Chunker::chunk_file`]).
pub fn extract(path: &str, language: &str, chunks: &[Chunk]) -> Vec<SymbolRow> {
    // (symbol, base kind) → (chunks of the definition).
    let mut defs: BTreeMap<(String, String), Vec<&Chunk>> = BTreeMap::new();
    for row in chunks {
        let (Some(symbol), Some(kind)) = (row.symbol.as_deref(), row.kind.as_deref()) else { continue };
        let base = kind.strip_suffix("_part").unwrap_or(kind);
        if !ctxd_index::symbols::is_definition(kind) || symbol.is_empty() {
            continue;
        }
        defs.entry((symbol.to_string(), base.to_string())).or_default().push(row);
    }
    let mut out = Vec::with_capacity(defs.len());
    for ((symbol, kind), parts) in defs {
        let first = parts.iter().min_by_key(|r| r.start_line).expect("non-empty");
        let end = parts.iter().map(|r| r.end_line).max().unwrap_or(first.start_line);
        out.push(row(path, language, symbol, kind, (first.start_line, end), &first.content));
    }
    out
}

/// The symbol-table row of one definition: `content` is its text (from its first line).
fn row(path: &str, language: &str, symbol: String, kind: String, (start, end): (u32, u32), content: &str) -> SymbolRow {
    let (module, sep) = module_path(path, language);
    let split = symbol.rfind("::").map(|i| (i, 2)).or_else(|| symbol.rfind('.').map(|i| (i, 1)));
    let (parent, name) = match split {
        Some((i, w)) => (Some(symbol[..i].to_string()), symbol[i + w..].to_string()),
        None => (None, symbol.clone()),
    };
    let symbol_in_module = symbol.replace("::", sep).replace('.', sep);
    let qualified_name = if module.is_empty() { symbol_in_module } else { format!("{module}{sep}{symbol_in_module}") };
    let mut h = blake3::Hasher::new();
    h.update(path.as_bytes());
    h.update(&[0]);
    h.update(qualified_name.as_bytes());
    h.update(&start.to_le_bytes());
    SymbolRow {
        symbol_id: h.finalize().to_hex()[..32].to_string(),
        name,
        qualified_name,
        symbol,
        kind,
        language: language.to_string(),
        path: path.to_string(),
        start_line: start,
        end_line: end,
        signature: signature(content),
        parent,
        doc: doc_summary(content, language),
    }
}

/// Adds to `rows` the definitions of `text` that no chunk names on its own: the members of
/// containers small enough to stay one chunk (a class's methods), so every method is a node
/// of the code graph (see [`super::members`]).
pub fn add_members(path: &str, language: &str, text: &str, tree: &tree_sitter::Tree, rows: &mut Vec<SymbolRow>) {
    let known: std::collections::HashSet<String> = rows.iter().map(|r| r.symbol.clone()).collect();
    let lines: Vec<&str> = text.lines().collect();
    for m in super::members::definitions_parsed(tree, language, text) {
        if known.contains(&m.symbol) || m.start_line == 0 || m.start_line as usize > lines.len() {
            continue;
        }
        let end = (m.end_line as usize).min(lines.len());
        let content = lines[m.start_line as usize - 1..end].join("\n");
        rows.push(row(path, language, m.symbol, m.kind.to_string(), (m.start_line, m.end_line), &content));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(symbol: &str, kind: &str, lines: (u32, u32), content: &str) -> Chunk {
        Chunk {
            symbol: Some(symbol.into()),
            kind: Some(kind.into()),
            start_line: lines.0,
            end_line: lines.1,
            content: content.into(),
            content_hash: String::new(),
            token_count: 1,
            ..Chunk::default()
        }
    }

    #[test]
    fn definitions_with_qualified_names_signatures_and_docs() {
        let rows = vec![
            row(
                "verify_password",
                "function",
                (3, 9),
                "/// Checks a password.\n#[inline]\npub fn verify_password(p: &str) -> bool {\n    true\n}",
            ),
            row("Point", "impl_part", (11, 12), "impl Point {"),
            row("Point::norm", "method", (13, 15), "    fn norm(&self) -> f64 {\n        0.0\n    }"),
            row("Point", "impl_part", (16, 16), "}"),
            row("", "module", (1, 2), "use std::fmt;"),
        ];
        let syms = extract("src/auth.rs", "rust", &rows);
        assert_eq!(syms.len(), 3, "{syms:#?}");
        let f = syms.iter().find(|s| s.name == "verify_password").unwrap();
        assert_eq!(f.qualified_name, "src::auth::verify_password");
        assert_eq!(f.signature, "pub fn verify_password(p: &str) -> bool");
        assert_eq!(f.doc.as_deref(), Some("Checks a password."));
        let m = syms.iter().find(|s| s.name == "norm").unwrap();
        assert_eq!(m.parent.as_deref(), Some("Point"));
        assert_eq!(m.qualified_name, "src::auth::Point::norm");
        let imp = syms.iter().find(|s| s.kind == "impl").unwrap();
        assert_eq!((imp.start_line, imp.end_line), (11, 16), "a split container spans its parts");
    }

    #[test]
    fn python_docstrings_and_module_paths() {
        let rows = vec![row(
            "User.save",
            "method",
            (4, 7),
            "    @retry\n    def save(self):\n        \"\"\"Persist the user.\"\"\"\n        pass",
        )];
        let s = &extract("pkg/models/__init__.py", "python", &rows)[0];
        assert_eq!(s.qualified_name, "pkg.models.User.save");
        assert_eq!(s.signature, "def save(self):");
        assert_eq!(s.doc.as_deref(), Some("Persist the user."));
        let long = "def qualify(\n    expression: Expression,\n    dialect: str = \"\",\n) -> Expression:\n    \"\"\"Qualifies it.\"\"\"\n    return expression";
        let s = &extract("pkg/qualify.py", "python", &[row("qualify", "function", (1, 6), long)])[0];
        assert_eq!(s.signature, "def qualify(expression: Expression, dialect: str = \"\",) -> Expression:");
        let star = "def f(\n    a,\n    *args,\n    sep=\"(\",\n    **kwargs,\n):\n    return a";
        let s = &extract("pkg/f.py", "python", &[row("f", "function", (1, 7), star)])[0];
        assert_eq!(s.signature, "def f(a, *args, sep=\"(\", **kwargs,):");
    }
}
