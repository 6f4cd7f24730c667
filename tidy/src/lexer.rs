//! Rust source reduced to what the import checks read: comments and the contents of string and
//! character literals blanked (quotes kept), and items under `#[cfg(test)]`/`#[cfg(all(test, …))]`
//! blanked too, with every newline kept so line numbers and line counts stay true.
//!
//! This is a lexer, not a parser: it knows just enough of Rust's tokens (nested block comments,
//! raw strings with hashes, byte strings, char literals against lifetimes) that a `crate::` or a
//! brace inside a string or a comment is never read as code.

/// The text of one source file, with comments and literal contents blanked.
pub fn blank_comments_and_literals(src: &str) -> String {
    let chars: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    let blank = |c: char, out: &mut String| out.push(if c == '\n' { '\n' } else { ' ' });
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0usize;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    blank(chars[i], &mut out);
                    i += 1;
                }
            }
        } else if let Some(hashes) = raw_string_start(&chars, i) {
            // r"…", r#"…"#, br"…": copy the prefix and the opening quote, blank to the closing one.
            let open = i + 1 + hashes + usize::from(c == 'b');
            out.extend(&chars[i..=open]);
            i = open + 1;
            while i < chars.len() {
                if chars[i] == '"' && (1..=hashes).all(|h| chars.get(i + h) == Some(&'#')) {
                    out.push('"');
                    out.extend(std::iter::repeat_n('#', hashes));
                    i += 1 + hashes;
                    break;
                }
                blank(chars[i], &mut out);
                i += 1;
            }
        } else if c == '"' {
            out.push('"');
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                if i < chars.len() {
                    blank(chars[i], &mut out);
                    i += 1;
                }
            }
            if i < chars.len() {
                out.push('"');
                i += 1;
            }
        } else if c == '\'' {
            i += char_literal(&chars, i, &mut out);
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// The number of `#` of a raw string starting at `i` (`r"`, `r#"`, `br"`), if one starts there.
fn raw_string_start(chars: &[char], i: usize) -> Option<usize> {
    let prev_is_ident = i > 0 && is_ident(chars[i - 1]);
    let mut j = match chars[i] {
        'r' if !prev_is_ident => i + 1,
        'b' if !prev_is_ident && chars.get(i + 1) == Some(&'r') => i + 2,
        _ => return None,
    };
    let mut hashes = 0;
    while chars.get(j) == Some(&'#') {
        hashes += 1;
        j += 1;
    }
    (chars.get(j) == Some(&'"')).then_some(hashes)
}

/// Copies a char literal at `i` blanked (`'x'`, `'\n'`, `'\u{1F}'`) or a lifetime as it is;
/// returns how many chars it took.
fn char_literal(chars: &[char], i: usize, out: &mut String) -> usize {
    let is_literal = match chars.get(i + 1) {
        Some('\\') => true,
        Some(_) => chars.get(i + 2) == Some(&'\''),
        None => false,
    };
    if !is_literal {
        out.push('\'');
        return 1;
    }
    let mut j = i + 1;
    if chars[j] == '\\' {
        j += 2;
    } else {
        j += 1;
    }
    while j < chars.len() && chars[j] != '\'' && chars[j] != '\n' {
        j += 1;
    }
    let end = (j + 1).min(chars.len());
    out.push('\'');
    out.extend(std::iter::repeat_n(' ', end - i - 2));
    out.push('\'');
    end - i
}

/// Whether `c` can be part of an identifier.
pub fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// What test-only code a file has: the text without it, the lines it took, and the file modules
/// declared test-only (`#[cfg(test)] mod testkit;`).
pub struct WithoutTests {
    pub code: String,
    pub test_lines: usize,
    pub test_modules: Vec<String>,
}

/// Blanks every item under a test-only `#[cfg(…)]` in text already passed through
/// [`blank_comments_and_literals`].
pub fn without_tests(code: &str) -> WithoutTests {
    let mut text: Vec<char> = code.chars().collect();
    let mut test_lines = 0;
    let mut test_modules = Vec::new();
    let mut i = 0;
    while let Some(start) = find_test_cfg(&text, i) {
        let end = item_end(&text, start);
        let item: String = text[start..end].iter().collect();
        if let Some(name) = declared_file_module(&item) {
            test_modules.push(name);
        }
        test_lines += item.matches('\n').count() + 1;
        for c in &mut text[start..end] {
            if *c != '\n' {
                *c = ' ';
            }
        }
        i = end;
    }
    WithoutTests { code: text.into_iter().collect(), test_lines, test_modules }
}

/// The start of the next `#[cfg(test)]` or `#[cfg(all(test, …))]` attribute at or after `from`.
fn find_test_cfg(text: &[char], from: usize) -> Option<usize> {
    let mut i = from;
    while i + 2 < text.len() {
        if text[i] == '#' && text[i + 1] == '[' {
            let end = matching(text, i + 1, '[', ']');
            let attr: String = text[i + 2..end].iter().filter(|c| !c.is_whitespace()).collect();
            if attr == "cfg(test)" || attr.starts_with("cfg(all(test,") {
                return Some(i);
            }
            i = end;
        }
        i += 1;
    }
    None
}

/// The end (exclusive) of the item an attribute at `start` applies to: through its `;` or its
/// closing brace, whichever comes first at depth zero.
fn item_end(text: &[char], start: usize) -> usize {
    let mut i = start;
    while i < text.len() {
        match text[i] {
            '[' => i = matching(text, i, '[', ']'),
            '{' => return matching(text, i, '{', '}') + 1,
            ';' => return i + 1,
            _ => {}
        }
        i += 1;
    }
    text.len()
}

/// The index of the bracket closing the one at `open`.
fn matching(text: &[char], open: usize, left: char, right: char) -> usize {
    let mut depth = 0usize;
    for (i, &c) in text.iter().enumerate().skip(open) {
        if c == left {
            depth += 1;
        } else if c == right {
            depth -= 1;
            if depth == 0 {
                return i;
            }
        }
    }
    text.len().saturating_sub(1)
}

/// `name` of an item `… mod name;` (a module in a file of its own).
fn declared_file_module(item: &str) -> Option<String> {
    let item = item.trim_end();
    let body = item.strip_suffix(';')?;
    let at = body.rfind("mod ")?;
    let name = body[at + 4..].trim();
    name.chars().all(is_ident).then(|| name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_and_literals_are_blanked_and_lines_kept() {
        let src = "use crate::a; // crate::b\n/* crate::c /* nested */ */ let s = \"crate::d\";\n\
                   let r = r#\"crate::e \" \"#; let c = '\"'; fn f<'a>(x: &'a str) {}\n";
        let out = blank_comments_and_literals(src);
        assert_eq!(out.matches('\n').count(), src.matches('\n').count());
        assert!(out.contains("use crate::a;"));
        for hidden in ["crate::b", "crate::c", "crate::d", "crate::e"] {
            assert!(!out.contains(hidden), "{hidden} should be blanked in {out:?}");
        }
        assert!(out.contains("fn f<'a>(x: &'a str) {}"), "{out:?}");
    }

    #[test]
    fn test_items_are_blanked_and_counted() {
        let src = "use crate::a;\n#[cfg(test)]\nmod testkit;\n#[cfg(test)]\nmod tests {\n    use crate::b;\n}\n";
        let out = without_tests(&blank_comments_and_literals(src));
        assert!(out.code.contains("crate::a") && !out.code.contains("crate::b"));
        assert_eq!(out.test_modules, ["testkit"]);
        assert_eq!(out.test_lines, 2 + 4);
    }
}
