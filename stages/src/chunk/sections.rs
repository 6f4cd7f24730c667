//! Where a line format splits: the sections of Markdown, reStructuredText, JSON, YAML and TOML,
//! which stay as they are on disk. [`line_sections`] says where their sections start and end
//! (0-based line ranges) and labels each with a citation path: the heading path of Markdown
//! (`Install > Linux`, from pulldown-cmark, so `#` inside code fences is not a heading), the
//! section path of reST (underlined/overlined titles, levels in order of first appearance), the
//! top-level key of JSON (`$.dependencies`, `$[3]`, found by a string-aware scan that never
//! recurses, so deep nesting cannot overflow) and of YAML, and the table of TOML (`[server]`).
//! CSV is cut by the chunker, which repeats the header line into every chunk. Invalid JSON/TOML
//! is counted and indexed as plain text windows.

use crate::load::{line_of_offset, line_starts, Section};
use crate::metrics as m;

/// Sections of a line format, or `None` when the format has no structure ctxd knows.
pub fn line_sections(language: &str, text: &str, lines: &[&str]) -> Option<Vec<Section>> {
    let starts: Vec<(usize, Option<String>, &'static str)> = match language {
        "markdown" => markdown_headings(text),
        "rst" => rst_titles(lines),
        "json" => {
            if let Err(e) = serde_json::from_str::<serde::de::IgnoredAny>(text) {
                metrics::counter!(m::LOAD_INVALID_TOTAL, "format" => "json").increment(1);
                tracing::warn!("invalid json ({e}); indexed as plain text");
                return None;
            }
            json_keys(lines)
        }
        "yaml" => yaml_keys(lines),
        "toml" => {
            if let Err(e) = text.parse::<toml::Table>() {
                metrics::counter!(m::LOAD_INVALID_TOTAL, "format" => "toml").increment(1);
                tracing::warn!("invalid toml ({}); indexed as plain text", e.message());
            }
            toml_tables(lines)
        }
        _ => return None,
    };
    Some(close_sections(starts, lines.len()))
}

/// Turns ordered section starts into ranges covering every line; lines before the first start
/// form an unlabelled preamble.
fn close_sections(mut starts: Vec<(usize, Option<String>, &'static str)>, n: usize) -> Vec<Section> {
    starts.sort_by_key(|s| s.0);
    starts.dedup_by_key(|s| s.0);
    let mut out = Vec::with_capacity(starts.len() + 1);
    if n == 0 {
        return out;
    }
    let first = starts.first().map_or(n, |s| s.0);
    if first > 0 {
        out.push(Section { start: 0, end: first - 1, label: None, kind: "section", fixed_line: None });
    }
    for (i, (start, label, kind)) in starts.iter().enumerate() {
        let end = starts.get(i + 1).map_or(n - 1, |next| next.0 - 1);
        out.push(Section { start: *start, end, label: label.clone(), kind, fixed_line: None });
    }
    out
}

fn markdown_headings(text: &str) -> Vec<(usize, Option<String>, &'static str)> {
    use pulldown_cmark::{Event, Parser, Tag, TagEnd};
    let starts = line_starts(text);
    let mut out = Vec::new();
    let mut path: Vec<(u32, String)> = Vec::new();
    let mut current: Option<(u32, usize, String)> = None;
    for (event, range) in Parser::new(text).into_offset_iter() {
        match event {
            Event::Start(Tag::Heading { level, .. }) => {
                current = Some((level as u32, line_of_offset(&starts, range.start), String::new()));
            }
            Event::Text(t) | Event::Code(t) => {
                if let Some((_, _, title)) = current.as_mut() {
                    title.push_str(&t);
                }
            }
            Event::End(TagEnd::Heading(_)) => {
                if let Some((level, line, title)) = current.take() {
                    path.retain(|(l, _)| *l < level);
                    path.push((level, title.trim().to_string()));
                    let label = path.iter().map(|(_, t)| t.as_str()).collect::<Vec<_>>().join(" > ");
                    out.push((line, Some(label), "section"));
                }
            }
            _ => {}
        }
    }
    out
}

fn rst_titles(lines: &[&str]) -> Vec<(usize, Option<String>, &'static str)> {
    const ADORN: &str = "=-`:'\"~^_*+#<>";
    let adornment = |l: &str| {
        let l = l.trim_end();
        let c = l.chars().next()?;
        (l.len() >= 2 && ADORN.contains(c) && l.chars().all(|x| x == c)).then_some(c)
    };
    let mut styles: Vec<(char, bool)> = Vec::new();
    let mut path: Vec<(usize, String)> = Vec::new();
    let mut out = Vec::new();
    let mut i = 0;
    while i + 1 < lines.len() {
        let title = lines[i].trim();
        let under = adornment(lines[i + 1]);
        let over = i.checked_sub(1).and_then(|p| adornment(lines[p]));
        let is_title = !title.is_empty()
            && adornment(lines[i]).is_none()
            && under.is_some_and(|_| lines[i + 1].trim_end().len() >= title.chars().count());
        if is_title {
            let c = under.unwrap_or('=');
            let overlined = over == Some(c);
            let style = (c, overlined);
            let level = styles.iter().position(|s| *s == style).unwrap_or_else(|| {
                styles.push(style);
                styles.len() - 1
            });
            path.retain(|(l, _)| *l < level);
            path.push((level, title.to_string()));
            let label = path.iter().map(|(_, t)| t.as_str()).collect::<Vec<_>>().join(" > ");
            out.push((if overlined { i - 1 } else { i }, Some(label), "section"));
            i += 2;
        } else {
            i += 1;
        }
    }
    out
}

/// Top-level members of a JSON document: object keys (`$.key`) or array elements (`$[i]`), by a
/// string-aware depth scan.
fn json_keys(lines: &[&str]) -> Vec<(usize, Option<String>, &'static str)> {
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    let mut top_is_array = false;
    let mut expect_member = false;
    let mut key: Option<(usize, String)> = None;
    let mut element = 0usize;
    for (ln, line) in lines.iter().enumerate() {
        for c in line.chars() {
            if in_string {
                if let Some((_, k)) = key.as_mut() {
                    if !escaped && c != '"' {
                        k.push(c);
                    }
                }
                if escaped {
                    escaped = false;
                } else if c == '\\' {
                    escaped = true;
                } else if c == '"' {
                    in_string = false;
                    if let Some((kl, k)) = key.take() {
                        out.push((kl, Some(format!("$.{k}")), "key"));
                    }
                }
                continue;
            }
            if c.is_whitespace() {
                continue;
            }
            if depth == 1 && expect_member && c != ']' && c != '}' {
                expect_member = false;
                if top_is_array {
                    out.push((ln, Some(format!("$[{element}]")), "key"));
                    element += 1;
                } else if c == '"' {
                    key = Some((ln, String::new()));
                }
            }
            match c {
                '"' => in_string = true,
                '{' | '[' => {
                    if depth == 0 {
                        top_is_array = c == '[';
                        expect_member = true;
                    }
                    depth += 1;
                }
                '}' | ']' => depth = depth.saturating_sub(1),
                ',' if depth == 1 => expect_member = true,
                _ => {}
            }
        }
    }
    out
}

fn yaml_keys(lines: &[&str]) -> Vec<(usize, Option<String>, &'static str)> {
    let mut out = Vec::new();
    let mut in_block_scalar = false;
    for (i, line) in lines.iter().enumerate() {
        let top = !line.starts_with([' ', '\t']) && !line.is_empty();
        if top {
            in_block_scalar = false;
        }
        if !top || in_block_scalar || line.starts_with('#') || line.starts_with('-') {
            if line.trim_end() == "---" {
                out.push((i, None, "document"));
            }
            continue;
        }
        if let Some((k, rest)) = line.split_once(':') {
            let k = k.trim().trim_matches(|c| c == '"' || c == '\'');
            if !k.is_empty() {
                out.push((i, Some(k.to_string()), "key"));
                in_block_scalar = matches!(rest.trim(), "|" | ">" | "|-" | ">-");
            }
        }
    }
    out
}

fn toml_tables(lines: &[&str]) -> Vec<(usize, Option<String>, &'static str)> {
    lines
        .iter()
        .enumerate()
        .filter_map(|(i, l)| {
            let t = l.trim();
            (t.starts_with('[') && t.ends_with(']') && !t.starts_with("[\"")).then(|| (i, Some(t.to_string()), "table"))
        })
        .collect()
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::labels;

    fn lines(t: &str) -> Vec<&str> {
        t.split('\n').collect()
    }

    #[test]
    fn markdown_heading_paths_ignore_code_fences() {
        let md = "intro\n# Guide\ntext\n## Install\n```\n# not a heading\n```\n### Linux\napt\n## Usage\nrun\n";
        let s = line_sections("markdown", md, &lines(md)).unwrap();
        assert_eq!(labels(&s), vec!["", "Guide", "Guide > Install", "Guide > Install > Linux", "Guide > Usage"]);
        assert_eq!((s[2].start, s[2].end), (3, 6));
        assert_eq!(s.last().unwrap().end, lines(md).len() - 1);
    }

    #[test]
    fn rst_section_paths() {
        let rst = "=====\nTitle\n=====\n\nIntro.\n\nFirst\n-----\nbody\n\nSub\n~~~\nmore\n\nSecond\n------\nend\n";
        let s = line_sections("rst", rst, &lines(rst)).unwrap();
        assert_eq!(labels(&s), vec!["Title", "Title > First", "Title > First > Sub", "Title > Second"]);
        assert_eq!(s[0].start, 0, "an overlined title starts at its overline");
        assert_eq!(s[1].start, 6);
    }

    #[test]
    fn json_top_level_keys_and_elements() {
        let j = "{\n  \"name\": \"x\",\n  \"deps\": {\n    \"a\": \"{\\\"q\\\"\"\n  },\n  \"list\": [1,\n 2]\n}\n";
        let s = line_sections("json", j, &lines(j)).unwrap();
        assert_eq!(labels(&s), vec!["", "$.name", "$.deps", "$.list"]);
        assert_eq!(s[2].start, 2);
        let a = "[\n{\"a\": 1},\n{\"b\": [\n2]}\n]";
        assert_eq!(labels(&line_sections("json", a, &lines(a)).unwrap()), vec!["", "$[0]", "$[1]"]);
        assert!(line_sections("json", "{\"a\": ", &["{\"a\": "]).is_none(), "truncated json is plain text");
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        // 100k levels: validated and scanned without recursion, so no stack overflow.
        assert_eq!(labels(&line_sections("json", &deep, &[deep.as_str()]).unwrap()), vec!["$[0]"]);
    }

    #[test]
    fn yaml_and_toml_sections() {
        let y = "# cfg\nname: x\nscript: |\n  a: b\nlist:\n  - 1\n---\nother: 2\n";
        assert_eq!(
            labels(&line_sections("yaml", y, &lines(y)).unwrap()),
            vec!["", "name", "script", "list", "", "other"]
        );
        let t = "title = \"x\"\n[server]\nport = 1\n[[bin]]\nname = \"a\"\n";
        assert_eq!(labels(&line_sections("toml", t, &lines(t)).unwrap()), vec!["", "[server]", "[[bin]]"]);
    }
}
