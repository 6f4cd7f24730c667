//! Identifiers in a query (`a::b`, `obj.method()`, CamelCase, camelCase, snake_case,
//! SCREAMING_CASE, a trace's function names) and their words (`getUserById` → get user by id).

use super::paths::is_file_extension;
use super::trace::Trace;

/// Identifiers: `a::b`, `obj.method()`, CamelCase, camelCase, snake_case, SCREAMING_CASE.
pub(super) fn find_symbols(q: &str, trace: &Trace) -> Vec<String> {
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
        if w.contains('.') && !w.contains("::") && is_file_extension(ext) {
            continue; // a file name
        }
        if !w.chars().all(|c| c.is_alphanumeric() || matches!(c, '_' | ':' | '.' | '<' | '>' | '$')) {
            continue;
        }
        let call = raw.contains("()") || raw.contains('(');
        let dotted =
            w.contains('.') && w.split('.').all(|p| is_identifier(p) && p.len() >= 2) && w.split('.').count() >= 2;
        if w.contains("::") || dotted || (is_identifier(w) && (is_code_cased(w) || call)) {
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
    humps >= 1 && (!first_upper || w.chars().filter(|c| c.is_uppercase()).count() >= 2)
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

    #[test]
    fn identifiers_split_into_words() {
        assert_eq!(identifier_words("getHTTPResponse_code"), ["get", "http", "response", "code"]);
        assert_eq!(identifier_words("Index::open_or_create"), ["index", "open", "or", "create"]);
        assert_eq!(identifier_words("utf8Decoder2"), ["utf", "8", "decoder", "2"]);
    }
}
