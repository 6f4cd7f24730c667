//! Document formats: where a human would split a file, and text out of files that are not text.
//!
//! Two kinds of format live here:
//!
//! * **Line formats** (Markdown, reStructuredText, JSON, YAML, TOML) stay as they are on disk;
//!   [`line_sections`] says where their sections start and end (0-based line ranges) and labels
//!   each with a citation path: the heading path of Markdown (`Install > Linux`, from
//!   pulldown-cmark, so `#` inside code fences is not a heading), the section path of reST
//!   (underlined/overlined titles, levels in order of first appearance), the top-level key of
//!   JSON (`$.dependencies`, `$[3]`, found by a string-aware scan that never recurses, so deep
//!   nesting cannot overflow) and of YAML, and the table of TOML (`[server]`). CSV is cut by the
//!   chunker, which repeats the header line into every chunk.
//! * **Extracted formats** (PDF, Jupyter notebooks, HTML) are turned into text by [`extract`],
//!   with sections that carry a fixed citation position instead of source lines: the page number
//!   of a PDF page (lopdf), the 1-based cell number of a notebook cell (markdown and code cells;
//!   outputs dropped except short text/plain results), the source line of an HTML heading
//!   (scraper; `script`, `style`, `noscript`, `template` dropped, `<title>` kept).
//!
//! [`sniff`] names the format of a file without a telling extension from its first bytes.
//!
//! Malformed input never fails a file: a corrupt PDF or notebook is an error the loader counts
//! and skips; invalid JSON/TOML is counted and indexed as plain text windows.

use std::fmt::Write as _;

use crate::metrics as m;

/// A labelled range of a document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    /// First line (0-based) of the section in the text being chunked.
    pub start: usize,
    /// Last line (0-based, inclusive).
    pub end: usize,
    /// Citation path: heading path, key path, page, cell.
    pub label: Option<String>,
    /// Chunk kind (`section`, `key`, `table`, `page`, `cell`).
    pub kind: &'static str,
    /// For extracted formats: the position every chunk of this section cites (page number,
    /// cell number, source line) instead of lines of the extracted text.
    pub fixed_line: Option<u32>,
}

/// Text extracted from a non-text format, with its sections.
#[derive(Debug, Clone)]
pub struct Extracted {
    pub text: String,
    pub sections: Vec<Section>,
}

/// Why a file of an extracted format could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    #[error("corrupt pdf: {0}")]
    Pdf(String),
    #[error("invalid notebook: {0}")]
    Notebook(String),
}

/// Formats handled by [`extract`].
pub fn is_extracted(language: &str) -> bool {
    matches!(language, "pdf" | "notebook" | "html")
}

/// Guesses the format of a file with no telling extension from its first bytes.
pub fn sniff(head: &[u8]) -> Option<&'static str> {
    let text = String::from_utf8_lossy(&head[..head.len().min(512)]);
    let t = text.trim_start_matches('\u{feff}').trim_start();
    let lower = t.to_ascii_lowercase();
    if head.starts_with(b"%PDF-") {
        Some("pdf")
    } else if lower.starts_with("<!doctype html") || lower.starts_with("<html") {
        Some("html")
    } else if let Some(shebang) = t.strip_prefix("#!") {
        let first = shebang.lines().next().unwrap_or("");
        if first.contains("python") {
            Some("python")
        } else if first.contains("node") {
            Some("javascript")
        } else if ["bash", "/sh", " sh", "zsh"].iter().any(|s| first.contains(s)) {
            Some("bash")
        } else {
            None
        }
    } else if (t.starts_with('{') || t.starts_with('[')) && (t.contains("\"cells\"") && t.contains("\"nbformat\"")) {
        Some("notebook")
    } else if t.starts_with('{') && t.contains('"') {
        Some("json")
    } else {
        None
    }
}

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

fn line_of_offset(line_starts: &[usize], offset: usize) -> usize {
    line_starts.partition_point(|&s| s <= offset).saturating_sub(1)
}

fn line_starts(text: &str) -> Vec<usize> {
    std::iter::once(0).chain(text.match_indices('\n').map(|(i, _)| i + 1)).collect()
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

/// Extracts text and sections from a PDF, notebook or HTML file.
pub fn extract(language: &str, bytes: &[u8]) -> Result<Extracted, FormatError> {
    match language {
        "pdf" => pdf(bytes),
        "notebook" => notebook(bytes),
        _ => Ok(html(&String::from_utf8_lossy(bytes))),
    }
}

/// Appends `text` as a section citing `fixed`.
fn push_section(out: &mut Extracted, text: &str, label: String, kind: &'static str, fixed: u32) {
    let text = text.trim_end();
    if text.trim().is_empty() {
        return;
    }
    let start = if out.text.is_empty() { 0 } else { out.text.matches('\n').count() + 1 };
    if !out.text.is_empty() {
        out.text.push('\n');
    }
    out.text.push_str(text);
    let end = start + text.matches('\n').count();
    out.sections.push(Section { start, end, label: Some(label), kind, fixed_line: Some(fixed) });
}

fn pdf(bytes: &[u8]) -> Result<Extracted, FormatError> {
    let doc = lopdf::Document::load_mem(bytes).map_err(|e| FormatError::Pdf(e.to_string()))?;
    let mut out = Extracted { text: String::new(), sections: Vec::new() };
    let pages: Vec<u32> = doc.get_pages().keys().copied().collect();
    let mut failed = 0;
    for page in pages {
        // lopdf can panic on malformed content streams: a bad page is skipped, not the file.
        let text = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| doc.extract_text(&[page])));
        match text {
            Ok(Ok(t)) => push_section(&mut out, &t, format!("page {page}"), "page", page),
            _ => failed += 1,
        }
    }
    if failed > 0 {
        metrics::counter!(m::LOAD_INVALID_TOTAL, "format" => "pdf_page").increment(failed);
        tracing::warn!("{failed} pdf page(s) without extractable text");
    }
    if out.sections.is_empty() && failed > 0 {
        return Err(FormatError::Pdf("no page could be read".into()));
    }
    Ok(out)
}

/// Short plain-text outputs are kept (they often hold the answer); longer ones are cut.
const NOTEBOOK_OUTPUT_CHARS: usize = 300;

fn notebook(bytes: &[u8]) -> Result<Extracted, FormatError> {
    let nb: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| FormatError::Notebook(e.to_string()))?;
    let cells = nb["cells"].as_array().ok_or_else(|| FormatError::Notebook("no \"cells\" array".into()))?;
    let lang = nb["metadata"]["kernelspec"]["language"].as_str().unwrap_or("python").to_string();
    let joined = |v: &serde_json::Value| match v {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Array(parts) => parts.iter().filter_map(|p| p.as_str()).collect(),
        _ => String::new(),
    };
    let mut out = Extracted { text: String::new(), sections: Vec::new() };
    for (i, cell) in cells.iter().enumerate() {
        let kind = cell["cell_type"].as_str().unwrap_or("raw");
        let mut text = joined(&cell["source"]);
        if kind == "code" {
            let mut outputs = String::new();
            for o in cell["outputs"].as_array().into_iter().flatten() {
                let t = joined(if o["text"].is_null() { &o["data"]["text/plain"] } else { &o["text"] });
                outputs.push_str(&t);
            }
            if !outputs.trim().is_empty() {
                let cut: String = outputs.chars().take(NOTEBOOK_OUTPUT_CHARS).collect();
                let _ = write!(text, "\n# output:\n{}", cut.trim_end());
            }
        }
        let label = format!("cell {} ({})", i + 1, if kind == "code" { lang.as_str() } else { kind });
        push_section(&mut out, &text, label, "cell", i as u32 + 1);
    }
    Ok(out)
}

fn html(source: &str) -> Extracted {
    use scraper::{node::Node, Html};
    let doc = Html::parse_document(source);
    let mut out = Extracted { text: String::new(), sections: Vec::new() };
    let mut title = String::new();
    // (level, heading) path; text gathered since the last heading.
    let mut path: Vec<(u8, String)> = Vec::new();
    let mut buf = String::new();
    let mut search_from = 0usize;
    let starts = line_starts(source);
    let mut line = 1u32;
    let flush = |out: &mut Extracted, buf: &mut String, path: &[(u8, String)], line: u32, title: &str| {
        let label = if path.is_empty() {
            title.to_string()
        } else {
            path.iter().map(|(_, t)| t.as_str()).collect::<Vec<_>>().join(" > ")
        };
        let text: Vec<&str> = buf.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
        push_section(out, &text.join("\n"), label, "section", line);
        buf.clear();
    };
    let mut stack = vec![doc.tree.root()];
    // Iterative pre-order walk (deep documents cannot overflow the stack).
    while let Some(node) = stack.pop() {
        match node.value() {
            Node::Element(el) => {
                let name = el.name();
                if matches!(name, "script" | "style" | "noscript" | "template") {
                    continue;
                }
                if name == "title" {
                    title = node.descendants().filter_map(|n| n.value().as_text().map(|t| t.to_string())).collect();
                    continue;
                }
                if let Some(level) = name.strip_prefix('h').and_then(|l| l.parse::<u8>().ok()).filter(|l| *l <= 6) {
                    flush(&mut out, &mut buf, &path, line, &title);
                    let heading: String =
                        node.descendants().filter_map(|n| n.value().as_text().map(|t| t.to_string())).collect();
                    let heading = heading.split_whitespace().collect::<Vec<_>>().join(" ");
                    if let Some(pos) = source[search_from..].find(heading.as_str()) {
                        search_from += pos;
                        line = line_of_offset(&starts, search_from) as u32 + 1;
                    }
                    path.retain(|(l, _)| *l < level);
                    path.push((level, heading.clone()));
                    buf.push_str(&heading);
                    buf.push('\n');
                    continue;
                }
                if matches!(name, "p" | "div" | "li" | "tr" | "br" | "pre" | "section" | "article" | "table") {
                    buf.push('\n');
                }
                let children: Vec<_> = node.children().collect();
                stack.extend(children.into_iter().rev());
            }
            Node::Text(t) => buf.push_str(t),
            _ => {
                let children: Vec<_> = node.children().collect();
                stack.extend(children.into_iter().rev());
            }
        }
    }
    flush(&mut out, &mut buf, &path, line, &title);
    out
}

/// Writes a minimal PDF with one line of text per page (Courier, lopdf): fixtures for tests and
/// benchmarks of the PDF loader.
pub fn simple_pdf(pages: &[&str]) -> Vec<u8> {
    use lopdf::content::{Content, Operation};
    use lopdf::{dictionary, Document, Object, Stream};
    let mut doc = Document::with_version("1.5");
    let pages_id = doc.new_object_id();
    let font_id = doc.add_object(dictionary! {
        "Type" => "Font", "Subtype" => "Type1", "BaseFont" => "Courier",
    });
    let resources_id = doc.add_object(dictionary! { "Font" => dictionary! { "F1" => font_id } });
    let mut kids = Vec::new();
    for text in pages {
        let content = Content {
            operations: vec![
                Operation::new("BT", vec![]),
                Operation::new("Tf", vec!["F1".into(), 24.into()]),
                Operation::new("Td", vec![72.into(), 700.into()]),
                Operation::new("Tj", vec![Object::string_literal(*text)]),
                Operation::new("ET", vec![]),
            ],
        };
        let content_id =
            doc.add_object(Stream::new(dictionary! {}, content.encode().expect("encoding a content stream")));
        let page_id = doc.add_object(dictionary! {
            "Type" => "Page", "Parent" => pages_id, "Contents" => content_id,
        });
        kids.push(page_id.into());
    }
    let count = kids.len() as i64;
    doc.objects.insert(
        pages_id,
        Object::Dictionary(dictionary! {
            "Type" => "Pages", "Kids" => kids, "Count" => count,
            "Resources" => resources_id, "MediaBox" => vec![0.into(), 0.into(), 595.into(), 842.into()],
        }),
    );
    let catalog_id = doc.add_object(dictionary! { "Type" => "Catalog", "Pages" => pages_id });
    doc.trailer.set("Root", catalog_id);
    let mut out = Vec::new();
    doc.save_to(&mut out).expect("writing a pdf to memory");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(t: &str) -> Vec<&str> {
        t.split('\n').collect()
    }

    fn labels(s: &[Section]) -> Vec<String> {
        s.iter().map(|s| s.label.clone().unwrap_or_default()).collect()
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

    #[test]
    fn notebook_cells_with_outputs_cut() {
        let nb = serde_json::json!({
            "nbformat": 4,
            "metadata": {"kernelspec": {"language": "python"}},
            "cells": [
                {"cell_type": "markdown", "source": ["# Loading data\n", "We read the CSV."]},
                {"cell_type": "code", "source": "df = load()\ndf.head()", "outputs": [{"output_type": "stream", "text": "x".repeat(1000)}]},
                {"cell_type": "code", "source": "", "outputs": []}
            ]
        });
        let e = extract("notebook", nb.to_string().as_bytes()).unwrap();
        assert_eq!(labels(&e.sections), vec!["cell 1 (markdown)", "cell 2 (python)"]);
        assert_eq!(e.sections[1].fixed_line, Some(2));
        assert!(e.text.contains("df.head()") && e.text.contains("# output:"));
        assert!(e.text.len() < 500, "outputs are truncated");
        assert!(matches!(extract("notebook", b"{\"cells\": [tru"), Err(FormatError::Notebook(_))));
    }

    #[test]
    fn html_visible_text_by_heading() {
        let h = "<!doctype html><html><head><title>Doc</title><style>p{}</style></head><body>\n<p>Lead text</p>\n<script>var secret = 1;</script>\n<h1>Setup</h1>\n<p>Install <b>it</b>.</p>\n<h2>Linux</h2><ul><li>apt</li></ul></body></html>";
        let e = extract("html", h.as_bytes()).unwrap();
        assert_eq!(labels(&e.sections), vec!["Doc", "Setup", "Setup > Linux"]);
        assert!(!e.text.contains("secret") && !e.text.contains("p{}"));
        assert!(e.text.contains("Install it."));
        assert_eq!(e.sections[1].fixed_line, Some(4), "cites the heading's source line");
    }

    #[test]
    fn pdf_pages_and_corrupt_pdf() {
        let bytes = simple_pdf(&["The quick brown fox", "Second page: pelican migration"]);
        let e = extract("pdf", &bytes).unwrap();
        assert_eq!(labels(&e.sections), vec!["page 1", "page 2"]);
        assert!(e.text.contains("pelican migration"));
        assert_eq!(e.sections[1].fixed_line, Some(2));
        assert!(matches!(extract("pdf", &bytes[..bytes.len() / 3]), Err(FormatError::Pdf(_))));
        assert!(matches!(extract("pdf", b"%PDF-1.5 garbage"), Err(FormatError::Pdf(_))));
    }

    #[test]
    fn sniffing() {
        assert_eq!(sniff(b"%PDF-1.7\n..."), Some("pdf"));
        assert_eq!(sniff(b"#!/usr/bin/env python3\nprint(1)"), Some("python"));
        assert_eq!(sniff(b"#!/bin/sh\necho"), Some("bash"));
        assert_eq!(sniff(b"  <!DOCTYPE html><html>"), Some("html"));
        assert_eq!(sniff(b"{\"cells\": [], \"nbformat\": 4}"), Some("notebook"));
        assert_eq!(sniff(b"{\"a\": 1}"), Some("json"));
        assert_eq!(sniff(b"plain words"), None);
    }
}
