//! File paths named in a query (`src/auth/login.ts:45`, `login.ts`, "main.go line 30") and the
//! extensions that make a bare word a file name.

use serde::Serialize;

/// A file named in the query, with the line when one was given.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PathRef {
    pub path: String,
    pub line: Option<u32>,
}

/// Whether `ext` (without its dot) makes a bare word a file name: an extension of the one table
/// ctxd keeps (`ctxd_index::language::Language::of_extension`).
pub(super) fn is_file_extension(ext: &str) -> bool {
    ctxd_index::language::Language::of_extension(ext).is_some()
}

/// `path:line[:col]` → (path, line).
pub(super) fn split_line_suffix(s: &str) -> (&str, Option<u32>) {
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

/// File paths named in the query, with `:line` or "line N" when given, then the files of the
/// query's stack-trace `frames` (file, line).
pub(super) fn find_paths(q: &str, frames: impl IntoIterator<Item = (Option<String>, Option<u32>)>) -> Vec<PathRef> {
    let mut out: Vec<PathRef> = Vec::new();
    let words: Vec<&str> = q.split_whitespace().collect();
    for (i, raw) in words.iter().enumerate() {
        let w =
            raw.trim_matches(|c: char| matches!(c, '"' | '\'' | '`' | '(' | ')' | ',' | ';' | '[' | ']' | '<' | '>'));
        let w = w.strip_prefix("File").unwrap_or(w);
        let (path, mut line) = split_line_suffix(w.trim_end_matches(['.', ':', '?']));
        let path = path.trim_start_matches("./").trim_start_matches("a/").trim_start_matches("b/");
        let ext = std::path::Path::new(path).extension().and_then(|e| e.to_str()).unwrap_or("");
        let has_ext = is_file_extension(ext);
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
    for (file, ln) in frames {
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
