//! The full-text side of a routed query: the BM25 text (the query, an error's message lines
//! without its frames, the words of its identifiers) and, for lean (completion) queries, the
//! few distinct informative words nearest the cursor.

use std::collections::HashSet;

use crate::route::{identifier_words, Analysis, Route};

/// The BM25 text of a query: the query itself (for an error, its message lines, not the
/// frames) plus the words of every identifier.
pub(super) fn bm25_text(query: &str, a: &Analysis) -> String {
    let mut text = if a.route == Route::Error {
        let kept: Vec<&str> = query
            .lines()
            .map(str::trim)
            .filter(|l| !l.starts_with("File \"") && !l.starts_with("at ") && !l.starts_with("Traceback"))
            .collect();
        kept.join(" ")
    } else {
        query.to_string()
    };
    for s in &a.symbols {
        let words = identifier_words(s);
        if words.len() > 1 {
            text.push(' ');
            text.push_str(&words.join(" "));
        }
    }
    text
}

/// Words every language's code is full of: no signal for BM25.
const CODE_STOP_WORDS: &[&str] = &[
    "the", "and", "for", "let", "mut", "pub", "self", "return", "true", "false", "none", "some", "const", "static",
    "impl", "use", "this", "def", "function", "var", "new", "int", "str", "string", "not", "else", "elif", "while",
    "with", "from", "import", "null", "void", "public", "private", "class", "struct", "enum",
];

/// The last `max` distinct words of `text` (3+ characters, not all digits, not
/// [`CODE_STOP_WORDS`]), in text order.
pub(super) fn last_distinct_terms(text: &str, max: usize) -> String {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for w in text.split(|c: char| !c.is_alphanumeric() && c != '_').rev() {
        let lower = w.to_lowercase();
        if w.len() < 3 || w.chars().all(|c| c.is_ascii_digit()) || CODE_STOP_WORDS.contains(&lower.as_str()) {
            continue;
        }
        if seen.insert(lower) {
            out.push(w);
            if out.len() >= max {
                break;
            }
        }
    }
    out.reverse();
    out.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::route::analyze;

    #[test]
    fn bm25_text_adds_identifier_words_and_drops_frames() {
        let a = analyze("getUserById returns null", |_| false);
        assert!(bm25_text("getUserById returns null", &a).ends_with("get user by id"));
        let q = "Traceback (most recent call last):\n  File \"a.py\", line 3, in run\nKeyError: 'user_id'";
        let a = analyze(q, |_| false);
        let t = bm25_text(q, &a);
        assert!(t.contains("KeyError") && !t.contains("a.py"), "{t}");
    }

    #[test]
    fn lean_queries_keep_the_last_distinct_informative_terms() {
        let t = last_distinct_terms("let total = self.price * qty;\nreturn apply_discount(total, 10, self.price)", 3);
        assert_eq!(t, "apply_discount total price");
        assert_eq!(last_distinct_terms("fn a() { 1 }", 5), "");
    }
}
