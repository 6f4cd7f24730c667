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
//!
//! [`Route`] also names how a forced mode answered (`vector`, `bm25`), so one type says how
//! any query was answered. The pieces: the intent and its weights (`intent`), file paths
//! (`paths`), stack traces and error messages (`trace`), identifiers and their words
//! (`identifiers`); this module decides the route from what they found.

use serde::{Deserialize, Serialize};

/// `FromStr` (any case; an unknown name is an error listing the accepted ones, see
/// `crate::error::by_name`) and `Display` (the name) for an enum of names with `ALL` and
/// `as_str`: how [`Route`] and [`Intent`] are parsed at the edge.
macro_rules! named {
    ($t:ident, $what:literal) => {
        impl std::str::FromStr for $t {
            type Err = crate::error::SearchError;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                crate::error::by_name($what, s, &$t::ALL, $t::as_str)
            }
        }

        impl std::fmt::Display for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.pad(self.as_str())
            }
        }
    };
}

mod identifiers;
mod intent;
mod paths;
mod trace;

pub use identifiers::identifier_words;
pub use intent::{Intent, IntentWeights};
pub use paths::PathRef;

use identifiers::find_symbols;
use intent::intent_of;
use paths::find_paths;
use trace::{looks_like_error, stack_trace};

/// Where a query is sent (the router's five), or the forced mode that answered it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Route {
    Path,
    Symbol,
    Error,
    Module,
    Hybrid,
    /// Forced mode `vector` (the router never picks it).
    Vector,
    /// Forced mode `bm25`, or `hybrid` without a model (the router never picks it).
    Bm25,
}

impl Route {
    /// Every route.
    pub const ALL: [Route; 7] =
        [Route::Path, Route::Symbol, Route::Error, Route::Module, Route::Hybrid, Route::Vector, Route::Bm25];

    /// Lowercase name (JSON and metric label).
    pub fn as_str(self) -> &'static str {
        match self {
            Route::Path => "path",
            Route::Symbol => "symbol",
            Route::Error => "error",
            Route::Module => "module",
            Route::Hybrid => "hybrid",
            Route::Vector => "vector",
            Route::Bm25 => "bm25",
        }
    }
}

named!(Route, "route");

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

/// The frames `(file, line, function)` of the stack traces in `text` (Python, Java/JS, Rust,
/// Go), in the order they appear.
pub fn stack_trace_frames(text: &str) -> Vec<(Option<String>, Option<u32>, Option<String>)> {
    stack_trace(text).frames
}

/// Analyses a query. `is_module` says whether a word names a top-level folder or module of
/// the index (case-insensitive); pass `|_| false` when unknown.
pub fn analyze(query: &str, is_module: impl Fn(&str) -> bool) -> Analysis {
    let q = query.trim();
    let lower = q.to_lowercase();
    let trace = stack_trace(q);
    let paths = find_paths(q, trace.frames.iter().map(|(file, line, _)| (file.clone(), *line)));
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
}
