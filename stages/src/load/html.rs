//! HTML: the visible text (scraper; `script`, `style`, `noscript`, `template` dropped, `<title>`
//! kept), a section per heading labelled with the heading path and citing the heading's source
//! line. The walk is iterative, so deep documents cannot overflow the stack.

use super::section::{line_of_offset, line_starts, push_section, Extracted};

pub(super) fn html(source: &str) -> Extracted {
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
#[cfg(test)]
mod tests {
    use crate::load::{extract, labels};

    #[test]
    fn html_visible_text_by_heading() {
        let h = "<!doctype html><html><head><title>Doc</title><style>p{}</style></head><body>\n<p>Lead text</p>\n<script>var secret = 1;</script>\n<h1>Setup</h1>\n<p>Install <b>it</b>.</p>\n<h2>Linux</h2><ul><li>apt</li></ul></body></html>";
        let e = extract("html", h.as_bytes()).unwrap();
        assert_eq!(labels(&e.sections), vec!["Doc", "Setup", "Setup > Linux"]);
        assert!(!e.text.contains("secret") && !e.text.contains("p{}"));
        assert!(e.text.contains("Install it."));
        assert_eq!(e.sections[1].fixed_line, Some(4), "cites the heading's source line");
    }
}
