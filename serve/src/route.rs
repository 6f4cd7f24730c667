//! Query analysis and routing: deterministic, no model, microseconds.
//!
//! [`analyze`] reads a query the way a developer writes one and decides where to look:
//!
//! | route    | when                                                            | what runs |
//! |----------|-----------------------------------------------------------------|-----------|
//! | `path`   | a file path is named (`src/auth/login.ts:45`, `login.ts`)        | that file's chunks, nearest the line first, then hybrid |
//! | `symbol` | the query is (mostly) identifiers: `Type::method`, `obj.method()`, `CamelCase`, `snake_case` | symbol-table lookup (exact, then prefix, then fuzzy) and the definition chunks, then hybrid |
//! | `error`  | an error message or a stack trace                               | hybrid on the message, frames' files and functions boosted |
//! | `module` | a word names a top-level folder or module of the index           | hybrid, that folder boosted |
//! | `hybrid` | free text                                                       | vector + BM25 fused |
//!
//! The **intent** (explain, implement, debug, refactor, find-definition, documentation, or
//! general) comes from cue words and the query's shape; it sets the weights of the vector,
//! BM25 and symbol signals ([`Intent::weights`]) and whether documents or definitions are
//! preferred. Route and intent are returned with the results so callers can see why.

use serde::Serialize;

/// Where a query is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Route {
    Path,
    Symbol,
    Error,
    Module,
    Hybrid,
}

impl Route {
    /// Lowercase name (JSON and metric label).
    pub fn as_str(self) -> &'static str {
        match self {
            Route::Path => "path",
            Route::Symbol => "symbol",
            Route::Error => "error",
            Route::Module => "module",
            Route::Hybrid => "hybrid",
        }
    }
}

/// What the asker wants to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Intent {
    Explain,
    Implement,
    Debug,
    Refactor,
    FindDefinition,
    Documentation,
    General,
}

/// Relative weights of the signals for one query.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Weights {
    pub vector: f32,
    pub bm25: f32,
    pub symbol: f32,
    /// Multiplier for chunks that are whole definitions (functions, classes, …).
    pub definition_boost: f32,
    /// Multiplier for chunks of documents (Markdown, reST, text, HTML, PDF).
    pub doc_boost: f32,
}

impl Intent {
    /// Kebab-case name (JSON and metric label).
    pub fn as_str(self) -> &'static str {
        match self {
            Intent::Explain => "explain",
            Intent::Implement => "implement",
            Intent::Debug => "debug",
            Intent::Refactor => "refactor",
            Intent::FindDefinition => "find-definition",
            Intent::Documentation => "documentation",
            Intent::General => "general",
        }
    }

    /// Signal weights for this intent: meaning first for questions, exact words first for
    /// errors, the symbol table first for definitions.
    pub fn weights(self) -> Weights {
        let w = |vector, bm25, symbol, definition_boost, doc_boost| Weights {
            vector,
            bm25,
            symbol,
            definition_boost,
            doc_boost,
        };
        match self {
            Intent::Explain => w(1.0, 0.6, 0.5, 1.1, 1.05),
            Intent::Implement => w(1.0, 0.6, 0.6, 1.15, 0.9),
            Intent::Debug => w(0.8, 1.0, 0.6, 1.1, 0.85),
            Intent::Refactor => w(0.8, 0.8, 0.9, 1.2, 0.8),
            Intent::FindDefinition => w(0.6, 0.8, 1.5, 1.3, 0.7),
            Intent::Documentation => w(1.0, 0.7, 0.2, 0.9, 1.3),
            Intent::General => w(1.0, 0.5, 0.5, 1.0, 1.0),
        }
    }
}

/// A file named in the query, with the line when one was given.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PathRef {
    pub path: String,
    pub line: Option<u32>,
}

/// Everything [`analyze`] found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Analysis {
    pub route: Route,
    pub intent: Intent,
    /// Files named (first = most specific).
    pub paths: Vec<PathRef>,
    /// Identifiers as written (`Type::method`, `getUser`, `verify_password`), call parens removed.
    pub symbols: Vec<String>,
    /// Known folders/modules named.
    pub modules: Vec<String>,
    /// True when the query is or contains an error message or a stack trace.
    pub error: bool,
}

/// Extensions that make a bare word a file name.
const FILE_EXTENSIONS: &[&str] = &[
    "rs", "py", "pyi", "js", "jsx", "mjs", "cjs", "ts", "tsx", "go", "java", "kt", "kts", "scala", "c", "h", "cc",
    "cpp", "cxx", "hpp", "hh", "cs", "rb", "php", "sh", "bash", "lua", "swift", "md", "markdown", "rst", "txt", "json",
    "jsonl", "yaml", "yml", "toml", "html", "htm", "css", "scss", "sql", "ipynb", "pdf", "csv", "xml", "proto",
    "gradle", "cfg", "ini", "lock", "vue", "svelte", "dart", "ex", "exs", "erl", "hs", "ml", "clj", "zig", "nim", "r",
    "jl",
];

/// Words that carry intent or glue, not content (never symbols or modules by themselves).
const FILLER: &[&str] = &[
    "a",
    "an",
    "the",
    "of",
    "in",
    "on",
    "for",
    "to",
    "and",
    "or",
    "is",
    "are",
    "was",
    "be",
    "it",
    "this",
    "that",
    "with",
    "from",
    "by",
    "at",
    "as",
    "do",
    "does",
    "did",
    "how",
    "what",
    "where",
    "why",
    "when",
    "which",
    "who",
    "i",
    "we",
    "you",
    "my",
    "our",
    "me",
    "can",
    "could",
    "should",
    "would",
    "will",
    "find",
    "show",
    "get",
    "go",
    "definition",
    "defined",
    "define",
    "declaration",
    "declared",
    "implementation",
    "implemented",
    "source",
    "code",
    "function",
    "method",
    "class",
    "struct",
    "type",
    "trait",
    "interface",
    "enum",
    "module",
    "file",
    "symbol",
    "def",
    "fn",
    "func",
    "impl",
    "jump",
    "open",
    "locate",
    "look",
    "up",
    "lookup",
    "see",
    "usages",
    "usage",
    "uses",
    "references",
    "callers",
    "call",
    "calls",
    "called",
    "line",
    "lines",
    "please",
    "me",
    "explain",
    "?",
];

fn is_filler(w: &str) -> bool {
    FILLER.contains(&w.to_ascii_lowercase().as_str())
}

/// Cue phrases per intent, matched on the lowercased query (word-bounded at the start).
const CUES: &[(Intent, &[&str])] = &[
    (
        Intent::Debug,
        &[
            "error",
            "exception",
            "traceback",
            "stack trace",
            "panic",
            "panicked",
            "crash",
            "crashes",
            "fail",
            "fails",
            "failing",
            "failed",
            "failure",
            "bug",
            "broken",
            "doesn't work",
            "does not work",
            "not working",
            "segfault",
            "undefined",
            "null pointer",
            "nullpointer",
            "npe",
            "timeout",
            "times out",
            "time out",
            "timed out",
            "hang",
            "hangs",
            "deadlock",
            "leak",
            "wrong result",
            "regression",
            "fix",
            "debug",
            "cannot",
            "can't",
            "unable to",
            "unexpected",
            "returns nil",
            "returns null",
            "raises",
            "thrown",
            "throws",
        ],
    ),
    (
        Intent::Refactor,
        &[
            "refactor",
            "rename",
            "extract",
            "clean up",
            "cleanup",
            "simplify",
            "restructure",
            "deduplicate",
            "dedupe",
            "split",
            "inline",
            "move",
            "decouple",
            "reorganize",
            "reorganise",
            "rewrite",
            "migrate",
            "replace all",
            "duplicated",
            "duplicate code",
        ],
    ),
    (
        Intent::Documentation,
        &[
            "docs",
            "documentation",
            "readme",
            "guide",
            "tutorial",
            "how to install",
            "install",
            "installation",
            "setup",
            "set up",
            "configure",
            "configuration",
            "getting started",
            "changelog",
            "release notes",
            "api reference",
            "manual",
            "faq",
            "license",
            "contributing",
            "readme.md",
        ],
    ),
    (
        Intent::Implement,
        &[
            "implement",
            "add",
            "create",
            "write",
            "build",
            "support for",
            "make it",
            "generate",
            "new endpoint",
            "new feature",
            "extend",
            "integrate",
            "hook up",
            "wire up",
            "example of",
            "snippet",
            "how do i",
            "how can i",
            "how to",
        ],
    ),
    (
        Intent::FindDefinition,
        &[
            "where is",
            "where are",
            "where's",
            "defined",
            "definition",
            "declared",
            "declaration",
            "find the",
            "locate",
            "go to",
            "jump to",
            "which file",
            "source of",
            "implementation of",
            "signature of",
        ],
    ),
    (
        Intent::Explain,
        &[
            "how does",
            "how do",
            "what does",
            "what is",
            "what are",
            "why does",
            "why is",
            "explain",
            "understand",
            "how is",
            "how are",
            "handled",
            "overview",
            "walk me through",
            "describe",
            "purpose of",
            "meaning of",
            "what happens",
            "works",
            "responsible for",
            "difference between",
        ],
    ),
];

/// Analyses a query. `is_module` says whether a word names a top-level folder or module of
/// the index (case-insensitive); pass `|_| false` when unknown.
pub fn analyze(query: &str, is_module: impl Fn(&str) -> bool) -> Analysis {
    let q = query.trim();
    let lower = q.to_lowercase();
    let trace = stack_trace(q);
    let paths = find_paths(q);
    let symbols = find_symbols(q, &trace);
    let error = !trace.frames.is_empty() || trace.message || looks_like_error(q);
    let words: Vec<&str> = q
        .split(|c: char| c.is_whitespace() || matches!(c, ',' | ';' | '"' | '\'' | '`' | '(' | ')' | '?' | '!'))
        .filter(|w| !w.is_empty())
        .collect();
    let modules: Vec<String> = words
        .iter()
        .map(|w| {
            w.trim_matches(|c: char| !c.is_alphanumeric() && c != '_' && c != '-' && c != '/').trim_end_matches('/')
        })
        .filter(|w| w.len() >= 2 && !is_filler(w) && is_module(w))
        .map(str::to_string)
        .fold(Vec::new(), |mut v, w| {
            if !v.contains(&w) {
                v.push(w)
            }
            v
        });
    // Content words: neither filler, nor a path, nor an identifier.
    let content_words = words
        .iter()
        .map(|w| w.trim_matches(|c: char| matches!(c, '.' | ':' | '(' | ')')))
        .filter(|w| !w.is_empty() && !is_filler(w))
        .filter(|w| !symbols.iter().any(|s| s == w || w.starts_with(s.as_str())))
        .filter(|w| !paths.iter().any(|p| p.path.ends_with(*w) || w.contains(p.path.as_str())))
        .count();

    let mut intent = intent_of(&lower);
    if error && intent != Intent::Refactor {
        intent = Intent::Debug;
    }
    let route = if error && (!trace.frames.is_empty() || trace.message || q.lines().count() > 1 || q.len() > 60) {
        Route::Error
    } else if !paths.is_empty() && content_words <= 3 {
        Route::Path
    } else if !symbols.is_empty() && (content_words == 0 || (content_words <= 2 && intent != Intent::Explain)) {
        Route::Symbol
    } else if !paths.is_empty() {
        Route::Path
    } else if !modules.is_empty() {
        Route::Module
    } else {
        Route::Hybrid
    };
    if intent == Intent::General && route == Route::Symbol {
        intent = Intent::FindDefinition;
    }
    Analysis { route, intent, paths, symbols, modules, error }
}

fn intent_of(lower: &str) -> Intent {
    // The earliest cue wins ("fix the docs build" is debugging; "add docs for X" is implementing
    // docs — documentation wins over implement when both appear, as the object of the verb).
    let mut best: Option<(usize, usize, Intent)> = None;
    for (rank, (intent, cues)) in CUES.iter().enumerate() {
        for cue in *cues {
            if let Some(pos) = find_word(lower, cue) {
                let key = (pos, rank);
                if best.is_none_or(|(p, r, _)| key < (p, r)) {
                    best = Some((pos, rank, *intent));
                }
            }
        }
    }
    match best {
        // "how do I configure X" / "how to install": the documentation cue outranks the generic
        // implement opener.
        Some((_, _, Intent::Implement))
            if CUES[2].1.iter().any(|c| find_word(lower, c).is_some()) && !lower.contains("implement") =>
        {
            Intent::Documentation
        }
        Some((_, _, i)) => i,
        None => Intent::General,
    }
}

/// Position of `cue` in `text` at word boundaries.
fn find_word(text: &str, cue: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(i) = text[from..].find(cue) {
        let at = from + i;
        let before = text[..at].chars().next_back();
        let after = text[at + cue.len()..].chars().next();
        let boundary = |c: Option<char>| c.is_none_or(|c| !c.is_alphanumeric() && c != '_');
        if boundary(before) && boundary(after) {
            return Some(at);
        }
        from = at + cue.len();
    }
    None
}

/// Frames and message lines of a stack trace, if the query holds one.
#[derive(Debug, Default)]
struct Trace {
    /// (file, line, function) per frame.
    frames: Vec<(Option<String>, Option<u32>, Option<String>)>,
    /// A line that is an error message (`ValueError: …`, `error[E0308]: …`, `panicked at`).
    message: bool,
}

fn stack_trace(q: &str) -> Trace {
    let mut t = Trace::default();
    for line in q.lines().map(str::trim) {
        // Python: File "app/models.py", line 42, in save
        if let Some(rest) = line.strip_prefix("File \"") {
            if let Some((file, after)) = rest.split_once('"') {
                let ln = after
                    .split("line ")
                    .nth(1)
                    .and_then(|s| s.split(|c: char| !c.is_ascii_digit()).next())
                    .and_then(|n| n.parse().ok());
                let func = after.split(", in ").nth(1).map(|s| s.trim().to_string());
                t.frames.push((Some(file.to_string()), ln, func));
                continue;
            }
        }
        // Java/JS: at com.acme.Foo.bar(Foo.java:42) / at handler (src/server.js:10:5) / at src/x.js:3:1
        if let Some(rest) = line.strip_prefix("at ") {
            let (func, loc) = match rest.split_once('(') {
                Some((f, l)) => (Some(f.trim().to_string()), l.trim_end_matches(')')),
                None => (None, rest),
            };
            let (file, ln) = split_line_suffix(loc);
            if file.contains('.') || func.is_some() {
                t.frames.push((Some(file.to_string()).filter(|f| f.contains('.')), ln, func.filter(|f| !f.is_empty())));
                continue;
            }
        }
        // Rust: thread 'main' panicked at src/main.rs:10:5 / --> src/lib.rs:3:9
        if let Some(loc) = line.split("panicked at ").nth(1).or_else(|| line.strip_prefix("--> ")) {
            let loc = loc.trim_end_matches(':').split_whitespace().next().unwrap_or("");
            let (file, ln) = split_line_suffix(loc.trim_end_matches([',', ':']));
            t.frames.push((Some(file.to_string()), ln, None));
            t.message = true;
            continue;
        }
        // Go: main.go:12 +0x1d / goroutine 1 [running]:
        if line.starts_with("goroutine ") && line.ends_with("]:") {
            t.message = true;
        }
        if line.starts_with("Traceback (most recent call last)") {
            t.message = true;
        }
        // ValueError: x / java.lang.NullPointerException: y / error[E0308]: mismatched types / TypeError: …
        if let Some((head, _)) = line.split_once(": ") {
            let head = head.trim();
            let name = head.rsplit('.').next().unwrap_or(head);
            if !head.contains(' ')
                && (name.ends_with("Error")
                    || name.ends_with("Exception")
                    || head.starts_with("error[")
                    || head == "error"
                    || head == "panic"
                    || head == "fatal")
            {
                t.message = true;
            }
        }
    }
    t
}

fn looks_like_error(q: &str) -> bool {
    let lower = q.to_lowercase();
    [
        "exception",
        "traceback",
        "panicked",
        "segmentation fault",
        "stack overflow",
        "undefined is not",
        "cannot read propert",
        "no such file",
        "permission denied",
        "errno",
        "exit code",
        "error:",
        "fatal:",
    ]
    .iter()
    .any(|m| lower.contains(m))
}

/// `path:line[:col]` → (path, line).
fn split_line_suffix(s: &str) -> (&str, Option<u32>) {
    let mut parts = s.rsplitn(3, ':');
    let last = parts.next().unwrap_or("");
    let mid = parts.next();
    let first = parts.next();
    match (first, mid) {
        (Some(f), Some(m)) if m.parse::<u32>().is_ok() && last.parse::<u32>().is_ok() => (f, m.parse().ok()),
        (_, Some(m)) if last.parse::<u32>().is_ok() => {
            let path_end = s.len() - last.len() - 1;
            let _ = m;
            (&s[..path_end], last.parse().ok())
        }
        _ => (s, None),
    }
}

/// File paths named in the query, with `:line` or "line N" when given.
fn find_paths(q: &str) -> Vec<PathRef> {
    let mut out: Vec<PathRef> = Vec::new();
    let words: Vec<&str> = q.split_whitespace().collect();
    for (i, raw) in words.iter().enumerate() {
        let w =
            raw.trim_matches(|c: char| matches!(c, '"' | '\'' | '`' | '(' | ')' | ',' | ';' | '[' | ']' | '<' | '>'));
        let w = w.strip_prefix("File").unwrap_or(w);
        let (path, mut line) = split_line_suffix(w.trim_end_matches(['.', ':', '?']));
        let path = path.trim_start_matches("./").trim_start_matches("a/").trim_start_matches("b/");
        let ext = std::path::Path::new(path).extension().and_then(|e| e.to_str()).unwrap_or("");
        let has_ext = FILE_EXTENSIONS.contains(&ext.to_ascii_lowercase().as_str());
        let has_dir = path.contains('/') && path.len() > 2 && !path.starts_with("http") && !path.contains("//");
        // `obj.method` and `Type::method` are symbols, not files.
        let dotted_ident = !path.contains('/') && path.contains('.') && !has_ext;
        if path.is_empty() || path.contains("::") || dotted_ident || !(has_ext || has_dir) {
            continue;
        }
        if !path.chars().all(|c| c.is_alphanumeric() || matches!(c, '/' | '.' | '_' | '-' | '\\' | '@' | '+')) {
            continue;
        }
        // "... foo.rs line 30" / "at line 30"
        if line.is_none() {
            if let (Some(a), Some(b)) = (words.get(i + 1), words.get(i + 2)) {
                if a.eq_ignore_ascii_case("line") || a.eq_ignore_ascii_case("l.") {
                    line = b.trim_matches(|c: char| !c.is_ascii_digit()).parse().ok();
                }
            }
        }
        if !out.iter().any(|p| p.path == path) {
            out.push(PathRef { path: path.to_string(), line });
        }
    }
    // Paths from stack-trace frames (`File "x.py", line 3`) carry their line too.
    for (file, ln, _) in stack_trace(q).frames {
        if let Some(f) = file {
            let f = f.trim_start_matches("./").to_string();
            if let Some(p) = out.iter_mut().find(|p| p.path == f) {
                p.line = p.line.or(ln);
            } else if f.contains('.') {
                out.push(PathRef { path: f, line: ln });
            }
        }
    }
    // Most specific (deepest) path first.
    out.sort_by_key(|p| std::cmp::Reverse(p.path.matches('/').count()));
    out
}

/// Identifiers: `a::b`, `obj.method()`, CamelCase, camelCase, snake_case, SCREAMING_CASE.
fn find_symbols(q: &str, trace: &Trace) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut push = |s: &str| {
        let s = s.trim_matches(|c: char| !c.is_alphanumeric() && c != '_');
        if s.len() >= 2 && !out.iter().any(|o| o == s) {
            out.push(s.to_string());
        }
    };
    for raw in q.split(|c: char| c.is_whitespace() || matches!(c, ',' | ';' | '"' | '\'' | '`' | '[' | ']' | '{' | '}'))
    {
        let w = raw.trim_end_matches(['?', '!', ':', '.']).trim_start_matches(['(', '&', '*', '#', '@', '$']);
        let w = w.split('(').next().unwrap_or(w);
        if w.is_empty() || w.contains('/') || w.contains('\\') {
            continue;
        }
        let ext = w.rsplit('.').next().unwrap_or("");
        if w.contains('.') && !w.contains("::") && FILE_EXTENSIONS.contains(&ext.to_ascii_lowercase().as_str()) {
            continue; // a file name
        }
        if !w.chars().all(|c| c.is_alphanumeric() || matches!(c, '_' | ':' | '.' | '<' | '>' | '$')) {
            continue;
        }
        let call = raw.contains("()") || raw.contains('(');
        if w.contains("::")
            || (w.contains('.') && w.split('.').all(|p| is_identifier(p) && p.len() >= 2) && w.split('.').count() >= 2)
        {
            push(w);
        } else if is_identifier(w) && (is_code_cased(w) || call) {
            push(w);
        }
    }
    for (_, _, func) in &trace.frames {
        if let Some(f) = func {
            let short = f.rsplit(['.', ':', ' ']).next().unwrap_or(f);
            if is_identifier(short) && !matches!(short, "<module>" | "<anonymous>" | "new" | "Object") {
                push(short);
            }
        }
    }
    out
}

fn is_identifier(w: &str) -> bool {
    let mut chars = w.chars();
    chars.next().is_some_and(|c| c.is_alphabetic() || c == '_' || c == '$')
        && chars.all(|c| c.is_alphanumeric() || c == '_' || c == '$')
}

/// snake_case, CamelCase (two humps), camelCase, SCREAMING_CASE.
fn is_code_cased(w: &str) -> bool {
    let letters = w.chars().filter(|c| c.is_alphabetic()).count();
    if letters < 2 {
        return false;
    }
    if w.contains('_') && w.trim_matches('_').contains('_') || (w.starts_with('_') && w.len() > 2) {
        return true;
    }
    let humps = w.chars().zip(w.chars().skip(1)).filter(|(a, b)| a.is_lowercase() && b.is_uppercase()).count();
    let first_upper = w.chars().next().is_some_and(char::is_uppercase);
    // camelCase (getUser) or CamelCase with two humps (HashMap); a lone capitalised word
    // ("Postgres") is just a word.
    humps >= 1 && (!first_upper || humps >= 1 && w.chars().filter(|c| c.is_uppercase()).count() >= 2)
}

/// Splits an identifier into its lowercase words: `getHTTPResponse_code` → get http response code.
pub fn identifier_words(ident: &str) -> Vec<String> {
    let mut words = Vec::new();
    for part in ident.split(|c: char| !c.is_alphanumeric()) {
        let chars: Vec<char> = part.chars().collect();
        let mut cur = String::new();
        for (i, &c) in chars.iter().enumerate() {
            let prev = i.checked_sub(1).map(|j| chars[j]);
            let next = chars.get(i + 1).copied();
            let boundary = match prev {
                Some(p) => {
                    (p.is_lowercase() && c.is_uppercase())
                        || (p.is_uppercase() && c.is_uppercase() && next.is_some_and(char::is_lowercase))
                        || (p.is_alphabetic() != c.is_alphabetic())
                }
                None => false,
            };
            if boundary && !cur.is_empty() {
                words.push(std::mem::take(&mut cur).to_lowercase());
            }
            cur.push(c);
        }
        if !cur.is_empty() {
            words.push(cur.to_lowercase());
        }
    }
    words
}

#[cfg(test)]
mod tests {
    use super::*;

    fn modules(w: &str) -> bool {
        ["auth", "billing", "pipeline", "stages", "serve", "docs", "migrations"].contains(&w.to_lowercase().as_str())
    }

    /// (query, route, intent): real-looking queries a coding agent or developer sends.
    const TABLE: &[(&str, Route, Intent)] = &[
        ("src/auth/login.ts:45", Route::Path, Intent::General),
        ("what happens in src/auth/login.ts line 45", Route::Path, Intent::Explain),
        ("explain pipeline/src/graph.rs", Route::Path, Intent::Explain),
        ("fix the bug in app/models/user.py:120", Route::Path, Intent::Debug),
        ("README.md", Route::Path, Intent::Documentation),
        ("refactor utils/date_format.js", Route::Path, Intent::Refactor),
        ("./cmd/server/main.go", Route::Path, Intent::General),
        ("docs/install.rst", Route::Path, Intent::Documentation),
        ("Cargo.toml dependencies", Route::Path, Intent::General),
        ("HashMap::insert", Route::Symbol, Intent::FindDefinition),
        ("where is verify_password defined", Route::Symbol, Intent::FindDefinition),
        ("getUserById", Route::Symbol, Intent::FindDefinition),
        ("find the definition of UserRepository", Route::Symbol, Intent::FindDefinition),
        ("client.send_request()", Route::Symbol, Intent::FindDefinition),
        ("Index::open_or_create", Route::Symbol, Intent::FindDefinition),
        ("rename parse_config to load_config", Route::Symbol, Intent::Refactor),
        ("MAX_RETRY_COUNT", Route::Symbol, Intent::FindDefinition),
        ("jump to EmbedService", Route::Symbol, Intent::FindDefinition),
        ("usages of fetchOrders", Route::Symbol, Intent::FindDefinition),
        ("self.assertEqual", Route::Symbol, Intent::FindDefinition),
        ("how does Searcher::search_with_vector work", Route::Hybrid, Intent::Explain),
        ("what does useEffect cleanup do in OrderList", Route::Hybrid, Intent::Explain),
        (
            "Traceback (most recent call last):\n  File \"app/views.py\", line 42, in checkout\n    total = cart.total()\nAttributeError: 'NoneType' object has no attribute 'total'",
            Route::Error,
            Intent::Debug,
        ),
        ("thread 'main' panicked at src/main.rs:10:5: index out of bounds", Route::Error, Intent::Debug),
        (
            "java.lang.NullPointerException: Cannot invoke \"String.length()\"\n    at com.acme.billing.Invoice.total(Invoice.java:88)",
            Route::Error,
            Intent::Debug,
        ),
        ("TypeError: Cannot read properties of undefined (reading 'map')", Route::Error, Intent::Debug),
        ("error[E0308]: mismatched types expected u32 found usize", Route::Error, Intent::Debug),
        (
            "Uncaught ReferenceError: process is not defined\n    at bundle (src/index.js:3:1)",
            Route::Error,
            Intent::Debug,
        ),
        ("psycopg2.OperationalError: could not connect to server: Connection refused", Route::Error, Intent::Debug),
        ("why does the upload fail with permission denied on large files", Route::Error, Intent::Debug),
        ("how is authentication handled in auth", Route::Module, Intent::Explain),
        ("billing invoice rounding", Route::Module, Intent::General),
        ("add a retry to the stages embed step", Route::Module, Intent::Implement),
        ("migrations for the orders table", Route::Module, Intent::General),
        ("how does the rate limiter work", Route::Hybrid, Intent::Explain),
        ("implement pagination for the search endpoint", Route::Hybrid, Intent::Implement),
        ("how do I configure the database connection pool", Route::Hybrid, Intent::Documentation),
        ("installation guide for windows", Route::Hybrid, Intent::Documentation),
        ("simplify the retry logic in the http client", Route::Hybrid, Intent::Refactor),
        ("memory leak when streaming large responses", Route::Hybrid, Intent::Debug),
        ("convert a list of dicts to a csv file in python", Route::Hybrid, Intent::General),
        ("check if a string is a palindrome", Route::Hybrid, Intent::General),
        ("write a function that merges two sorted arrays", Route::Hybrid, Intent::Implement),
        ("what is the difference between the vector and bm25 modes", Route::Hybrid, Intent::Explain),
        ("tests time out on CI after the upgrade", Route::Hybrid, Intent::Debug),
        ("release notes for version 2", Route::Hybrid, Intent::Documentation),
        ("extract the validation into a helper", Route::Hybrid, Intent::Refactor),
        ("vitamin D deficiency increases the risk of fractures", Route::Hybrid, Intent::General),
    ];

    #[test]
    fn routes_and_intents_of_real_looking_queries() {
        let mut wrong = Vec::new();
        for (q, route, intent) in TABLE {
            let a = analyze(q, modules);
            if a.route != *route || a.intent != *intent {
                wrong.push(format!("{q:?}: got {:?}/{:?}, want {route:?}/{intent:?}", a.route, a.intent));
            }
        }
        let right = TABLE.len() - wrong.len();
        assert!(TABLE.len() >= 40);
        // ≥ 90% right is the bar; print the misses either way.
        assert!(right * 100 >= TABLE.len() * 90, "{right}/{} right:\n{}", TABLE.len(), wrong.join("\n"));
        eprintln!("router: {right}/{} right; misses:\n{}", TABLE.len(), wrong.join("\n"));
    }

    #[test]
    fn paths_lines_and_symbols_are_extracted() {
        let a = analyze("what happens in src/auth/login.ts:45:3", |_| false);
        assert_eq!(a.paths, [PathRef { path: "src/auth/login.ts".into(), line: Some(45) }]);
        let a = analyze("look at main.go line 30", |_| false);
        assert_eq!(a.paths, [PathRef { path: "main.go".into(), line: Some(30) }]);
        let a = analyze("  File \"app/views.py\", line 42, in checkout\nKeyError: 'id'", |_| false);
        assert_eq!(a.paths[0], PathRef { path: "app/views.py".into(), line: Some(42) });
        assert!(a.symbols.contains(&"checkout".to_string()), "{:?}", a.symbols);
        let a = analyze("why is Foo::bar() slower than obj.fetch_all()", |_| false);
        assert_eq!(a.symbols, ["Foo::bar", "obj.fetch_all"]);
        assert!(a.paths.is_empty());
        let a = analyze("e.g. the Postgres database", |_| false);
        assert!(a.symbols.is_empty(), "{:?}", a.symbols);
    }

    #[test]
    fn identifiers_split_into_words() {
        assert_eq!(identifier_words("getHTTPResponse_code"), ["get", "http", "response", "code"]);
        assert_eq!(identifier_words("Index::open_or_create"), ["index", "open", "or", "create"]);
        assert_eq!(identifier_words("utf8Decoder2"), ["utf", "8", "decoder", "2"]);
    }
}
