//! Reading an issue: the parts of a long, noisy text that point at code, each with its weight.
//!
//! * the **title** (the first line) — the densest summary;
//! * **frames** of stack traces (Python, Java/JS, Rust, Go), in order (the last frames are
//!   nearest the fault);
//! * **paths** and **dotted module names** named anywhere;
//! * **identifiers**: in backticks, called (`name(`), CamelCase, snake_case, `a::b`, `a.b.c`;
//!   those in the title or in code blocks weigh more;
//! * **messages**: error lines (`ValueError: …`) and quoted strings long enough to be a
//!   message, to match against string literals in the code;
//! * the **prose** for BM25 and the vector: the text without noise — environment and package
//!   lists (`name==1.2`, `name   1.2.3`), version/OS boilerplate, URLs, and long runs of
//!   data-like lines (logs past their first lines) are dropped; what is left is capped.

use ctxd_search::route::analyze;

/// Bytes of prose kept for BM25 (the head of the issue says most).
const PROSE_BYTES: usize = 6_000;
/// Characters of text given to the vector (the model reads ~256 tokens anyway).
const VECTOR_CHARS: usize = 1_200;

/// One stack frame.
#[derive(Debug, Clone, PartialEq)]
pub struct Frame {
    pub file: String,
    pub line: Option<u32>,
    pub function: Option<String>,
}

/// What the text says, in parts.
#[derive(Debug, Clone, Default)]
pub struct Issue {
    pub title: String,
    pub frames: Vec<Frame>,
    pub paths: Vec<String>,
    /// Identifiers with weights (title and code blocks ×2, backticked ×1.5).
    pub identifiers: Vec<(String, f64)>,
    /// Error lines and quoted messages.
    pub messages: Vec<String>,
    /// Code-like words (with a digit, an underscore or a camel hump: `RF02`, `L031`,
    /// `dialect_tsql`, `parseTable`), title ones ×2: matched against file names.
    pub file_words: Vec<(String, f64)>,
    /// Cleaned text for BM25.
    pub prose: String,
    /// Text for the query vector.
    pub summary: String,
    /// Whether the text asks about tests or docs (their demotion is lifted).
    pub wants_tests: bool,
    pub wants_docs: bool,
}

/// Whether a line is an environment dump / package list / boilerplate line.
fn is_noise(line: &str) -> bool {
    let t = line.trim();
    if t.is_empty() {
        return false;
    }
    let lower = t.to_ascii_lowercase();
    // `package==1.2.3`, `package 1.2.3` (pip list / freeze), `- OS: Ubuntu`, `Python 3.9.1`.
    let words: Vec<&str> = t.split_whitespace().collect();
    let versionish = |w: &str| {
        let w = w.trim_start_matches(['v', '=', '>', '<', '~', '^']);
        w.contains('.')
            && w.chars().next().is_some_and(|c| c.is_ascii_digit())
            && w.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '+' | '-'))
    };
    if t.contains("==") && words.len() <= 2 {
        return true;
    }
    if words.len() == 2 && versionish(words[1]) && !words[0].contains('(') {
        return true;
    }
    if lower.starts_with("http://") || lower.starts_with("https://") {
        return true;
    }
    const BOILERPLATE: &[&str] = &[
        "os:",
        "- os",
        "python version",
        "platform:",
        "operating system",
        "* os",
        "version:",
        "- version",
        "[x]",
        "[ ]",
        "- [x]",
        "- [ ]",
        "<details",
        "</details",
        "<summary",
        "</summary",
        "<!--",
        "-->",
    ];
    BOILERPLATE.iter().any(|b| lower.starts_with(b))
}

/// Whether the text explicitly talks about tests (or docs): then they are not demoted.
fn asks_for(text: &str, words: &[&str]) -> bool {
    let title = text.lines().next().unwrap_or("").to_ascii_lowercase();
    words.iter().any(|w| title.split(|c: char| !c.is_alphanumeric()).any(|x| x == *w))
}

/// Reads an issue text (any length; the caller caps it).
pub fn read(text: &str) -> Issue {
    let title = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("").trim().to_string();
    let mut kept: Vec<&str> = Vec::new();
    let mut code: Vec<&str> = Vec::new();
    let mut in_code = false;
    let mut run = 0usize;
    for line in text.lines() {
        let t = line.trim_start();
        if t.starts_with("```") || t.starts_with("~~~") {
            in_code = !in_code;
            continue;
        }
        if in_code {
            code.push(line);
            // Long code blocks and logs: their first lines carry the signal.
            run += 1;
            if run > 40 {
                continue;
            }
        } else {
            run = 0;
        }
        if !is_noise(line) {
            kept.push(line);
        }
    }
    let clean = kept.join("\n");
    let a = analyze(&clean, |_| false);
    let trace = ctxd_search::route::stack_trace_frames(&clean);
    let frames: Vec<Frame> =
        trace.into_iter().filter_map(|(file, line, function)| Some(Frame { file: file?, line, function })).collect();
    // Paths named outside the frames (a frame's file is the frames signal's, weighted by depth).
    let paths: Vec<String> =
        a.paths.iter().map(|p| p.path.clone()).filter(|p| !frames.iter().any(|f| f.file == *p)).collect();
    let title_a = analyze(&title, |_| false);
    let code_text = code.join("\n");
    let code_a = analyze(&code_text, |_| false);
    let mut identifiers: Vec<(String, f64)> = Vec::new();
    let mut add = |s: &str, w: f64| {
        let s = s.trim_matches(|c: char| !c.is_alphanumeric() && c != '_');
        if s.len() < 3 {
            return;
        }
        match identifiers.iter_mut().find(|(x, _)| x == s) {
            Some(e) => e.1 = e.1.max(w),
            None => identifiers.push((s.to_string(), w)),
        }
    };
    for s in &title_a.symbols {
        add(s, 2.0);
    }
    for s in backticked(&clean) {
        add(&s, 1.5);
    }
    for s in &code_a.symbols {
        add(s, 1.2);
    }
    for s in &a.symbols {
        add(s, 1.0);
    }
    let messages = messages(&clean);
    let mut file_words: Vec<(String, f64)> = Vec::new();
    for (text, w) in [(title.as_str(), 2.0), (clean.as_str(), 1.0)] {
        for word in text.split(|c: char| !c.is_alphanumeric() && c != '_') {
            // A digit, an underscore or a camel hump (`parseTable`, `RF02`; not `SQL`, `JSON`).
            let camel = word.chars().zip(word.chars().skip(1)).any(|(a, b)| a.is_lowercase() && b.is_uppercase());
            let code_like = camel || word.chars().any(|c| c.is_ascii_digit() || c == '_');
            let letters = word.chars().filter(|c| c.is_alphabetic()).count();
            if word.len() >= 3 && letters >= 1 && code_like && !file_words.iter().any(|(x, _)| x == word) {
                file_words.push((word.to_string(), w));
            }
        }
    }
    file_words.truncate(200);
    let mut prose = String::with_capacity(PROSE_BYTES);
    for line in clean.lines() {
        if prose.len() + line.len() > PROSE_BYTES {
            break;
        }
        let t = line.trim();
        if t.starts_with("File \"") || t.starts_with("at ") {
            continue;
        }
        prose.push_str(t);
        prose.push('\n');
    }
    let summary: String = clean.chars().take(VECTOR_CHARS).collect();
    Issue {
        title,
        frames,
        paths,
        identifiers,
        messages,
        file_words,
        prose,
        summary,
        wants_tests: asks_for(text, &["test", "tests", "testing", "pytest", "unittest", "fixture", "fixtures"]),
        wants_docs: asks_for(text, &["doc", "docs", "documentation", "readme", "docstring", "typo"]),
    }
}

/// Spans in single backticks.
fn backticked(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (i, part) in text.split('`').enumerate() {
        if i % 2 == 1 && !part.is_empty() && part.len() <= 80 && !part.contains('\n') {
            let part = part.trim().trim_end_matches("()");
            if part.chars().all(|c| c.is_alphanumeric() || matches!(c, '_' | '.' | ':')) {
                out.push(part.to_string());
            }
        }
    }
    out
}

/// Error lines (`SomethingError: message`) and double-quoted strings of 12+ characters.
fn messages(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut push = |s: &str| {
        let s = s.trim().trim_matches(['"', '\'', '.', ' ']);
        if s.len() >= 12 && s.len() <= 200 && s.contains(' ') && !out.iter().any(|o| o == s) {
            out.push(s.to_string());
        }
    };
    for line in text.lines() {
        let t = line.trim();
        if let Some((head, msg)) = t.split_once(": ") {
            let head = head.rsplit('.').next().unwrap_or(head);
            if head.ends_with("Error") || head.ends_with("Exception") || head.ends_with("Warning") {
                push(msg);
            }
        }
        for (i, part) in t.split('"').enumerate() {
            if i % 2 == 1 {
                push(part);
            }
        }
    }
    out.truncate(12);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_issue_in_parts() {
        let text = "`Parser.parse_table` fails on TSQL brackets\n\
                    When I lint this with `sqlfluff lint`:\n\
                    ```\nSELECT a.[hello] FROM mytable AS a\n```\n\
                    Traceback (most recent call last):\n  File \"/usr/lib/python3/site-packages/sqlfluff/core/parser.py\", line 42, in parse\n\
                    ValueError: Avoid using aliases in join condition\n\
                    ## Environment\nsqlfluff==0.6.9\nPython 3.6.9\nnumpy   1.21.0\n";
        let i = read(text);
        assert_eq!(i.title, "`Parser.parse_table` fails on TSQL brackets");
        assert_eq!(i.frames.len(), 1);
        assert!(i.paths.is_empty(), "a frame's file is not also a named path: {:?}", i.paths);
        assert!(i.frames[0].file.ends_with("sqlfluff/core/parser.py"));
        assert_eq!(i.frames[0].function.as_deref(), Some("parse"));
        assert!(i.identifiers.iter().any(|(s, w)| s == "Parser.parse_table" && *w >= 2.0), "{:?}", i.identifiers);
        assert_eq!(i.messages, vec!["Avoid using aliases in join condition"]);
        assert!(
            !i.prose.contains("0.6.9") && !i.prose.contains("numpy") && !i.prose.contains("File \""),
            "{}",
            i.prose
        );
        assert!(!i.wants_tests);
        assert!(i.file_words.iter().any(|(w, x)| w == "parse_table" && *x == 2.0), "{:?}", i.file_words);
        assert!(!i.file_words.iter().any(|(w, _)| w == "6" || w == "brackets" || w == "TSQL"));
        assert!(read("Test fixtures fail on Windows").wants_tests);
    }

    #[test]
    fn huge_texts_are_read_within_bounds() {
        let text = format!("title\n{}", "pkg==1.0\nsome log line with words 12345\n".repeat(30_000));
        let i = read(&text);
        assert!(i.prose.len() <= PROSE_BYTES + 100);
        assert!(i.summary.chars().count() <= VECTOR_CHARS);
    }
}
