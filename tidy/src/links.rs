//! The repository's Markdown links lead somewhere: every relative link of every `*.md` file
//! (`[text](path)`, `[text](path#anchor)`, `[text](#anchor)`, `![alt](path)`, and reference
//! definitions `[name]: path`) names a file or folder that exists, relative to the linking file's
//! folder, and an `#anchor` into a Markdown file names one of its headings.
//!
//! Anchors follow GitHub's rule for heading ids: the heading's text (inline code and link syntax
//! dropped, their text kept) lowercased, every character but letters, digits, spaces, `-` and `_`
//! removed, spaces turned into `-`; a repeated heading gets `-1`, `-2`, … in order. Links with a
//! scheme (`https:`, `mailto:`) are not followed, nor anchors into files that are not Markdown
//! (`main.rs#L10`). Fenced code blocks and inline code are not read. The walk skips `target/`,
//! `.git/`, `node_modules/` and `shared/` folders.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

/// Folders whose Markdown is not the repository's own (build outputs, dependencies, mounts).
const SKIPPED_DIRS: [&str; 4] = ["target", ".git", "node_modules", "shared"];

/// One link that leads nowhere.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokenLink {
    /// The linking file, relative to the repository root (`/`-separated).
    pub file: String,
    /// Its 1-based line.
    pub line: usize,
    /// The link as written (`../docs/x.md#setup`).
    pub link: String,
    pub reason: Reason,
}

/// Why a link leads nowhere.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reason {
    /// The path, resolved against the linking file's folder, does not exist.
    NoFile { resolved: String },
    /// The Markdown file exists but has no heading with this anchor.
    NoHeading { resolved: String, anchor: String },
    /// The path climbs above the repository root.
    OutsideRepository,
}

/// Every broken link of the `*.md` files under `root`.
pub fn check(root: &Path) -> std::io::Result<Vec<BrokenLink>> {
    let mut docs = BTreeMap::new();
    for path in markdown_files(root)? {
        let rel = path.strip_prefix(root).unwrap_or(&path).to_path_buf();
        docs.insert(rel, std::fs::read_to_string(&path)?);
    }
    Ok(broken_links(&docs, |rel| root.join(rel).exists()))
}

/// The `*.md` files under `root`, sorted, outside the skipped folders.
pub fn markdown_files(root: &Path) -> std::io::Result<Vec<PathBuf>> {
    files_ending(root, ".md")
}

/// The files under `root` whose names end in `suffix`, sorted, outside the skipped folders.
pub fn files_ending(root: &Path, suffix: &str) -> std::io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir)? {
            let entry = entry?;
            let name = entry.file_name();
            let kind = entry.file_type()?;
            if kind.is_dir() {
                if !SKIPPED_DIRS.iter().any(|s| name == *s) {
                    dirs.push(entry.path());
                }
            } else if kind.is_file() && name.to_string_lossy().ends_with(suffix) {
                out.push(entry.path());
            }
        }
    }
    out.sort();
    Ok(out)
}

/// The broken links of `docs` (Markdown text by path relative to the root); `exists` says
/// whether a root-relative path that is not one of `docs` exists.
pub fn broken_links(docs: &BTreeMap<PathBuf, String>, exists: impl Fn(&Path) -> bool) -> Vec<BrokenLink> {
    let anchors: BTreeMap<&PathBuf, Vec<String>> = docs.iter().map(|(p, text)| (p, heading_anchors(text))).collect();
    let mut out = Vec::new();
    for (file, text) in docs {
        for (line, link) in links(text) {
            let (path, anchor) = link.split_once('#').map_or((link.as_str(), None), |(p, a)| (p, Some(a)));
            let broken = |reason| BrokenLink { file: slashed(file), line, link: link.clone(), reason };
            let target = if path.is_empty() {
                file.clone()
            } else {
                match resolve(file.parent().unwrap_or(Path::new("")), path) {
                    Some(target) => target,
                    None => {
                        out.push(broken(Reason::OutsideRepository));
                        continue;
                    }
                }
            };
            if !docs.contains_key(&target) && !exists(&target) {
                out.push(broken(Reason::NoFile { resolved: slashed(&target) }));
                continue;
            }
            let Some(anchor) = anchor.filter(|a| !a.is_empty()) else { continue };
            let Some(headings) = anchors.get(&target) else { continue };
            if !headings.iter().any(|h| h == anchor) {
                out.push(broken(Reason::NoHeading { resolved: slashed(&target), anchor: anchor.to_string() }));
            }
        }
    }
    out
}

/// `dir/rel` with `.` and `..` worked out lexically; `None` when it climbs above the root.
fn resolve(dir: &Path, rel: &str) -> Option<PathBuf> {
    let mut parts: Vec<String> = Vec::new();
    for c in dir.join(rel.trim_start_matches('/')).components() {
        match c {
            Component::Normal(s) => parts.push(s.to_string_lossy().into_owned()),
            Component::ParentDir => {
                parts.pop()?;
            }
            _ => {}
        }
    }
    Some(parts.iter().collect())
}

/// `path` with `/` between its components, whatever the platform.
pub(crate) fn slashed(path: &Path) -> String {
    path.components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/")
}

/// The relative link destinations of a Markdown text, with their lines: inline links and
/// images, and reference definitions; outside code; without a scheme.
pub fn links(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (line, prose) in prose_lines(text) {
        let prose = without_code_spans(prose);
        let mut dests = Vec::new();
        let mut rest = prose.as_str();
        while let Some(i) = rest.find("](") {
            rest = &rest[i + 2..];
            dests.push(destination(rest));
        }
        // A reference definition: `[name]: destination` at the start of a line.
        let trimmed = prose.trim_start();
        if let Some(after) = trimmed.strip_prefix('[').and_then(|t| t.split_once("]:")).map(|(_, d)| d) {
            dests.push(destination(after));
        }
        for dest in dests.into_iter().filter(|d| !d.is_empty() && !has_scheme(d)) {
            out.push((line, dest));
        }
    }
    out
}

/// The destination at the start of `s` (after `](`): `<…>`, or up to a space or the `)` that
/// closes the link (parentheses inside it balanced).
fn destination(s: &str) -> String {
    let s = s.trim_start();
    if let Some(inner) = s.strip_prefix('<') {
        return inner.split('>').next().unwrap_or("").to_string();
    }
    let mut depth = 0usize;
    let mut end = s.len();
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' if depth == 0 => {
                end = i;
                break;
            }
            ')' => depth -= 1,
            c if c.is_whitespace() => {
                end = i;
                break;
            }
            _ => {}
        }
    }
    s[..end].to_string()
}

/// `https:`, `mailto:`, …: a scheme of letters, digits, `+`, `-`, `.` before a colon.
fn has_scheme(dest: &str) -> bool {
    dest.split_once(':').is_some_and(|(scheme, _)| {
        scheme.starts_with(|c: char| c.is_ascii_alphabetic())
            && scheme.chars().all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
    })
}

/// The lines outside fenced code blocks (```` ``` ```` or `~~~`), 1-based.
pub fn prose_lines(text: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut fence: Option<(char, usize)> = None;
    for (i, line) in text.lines().enumerate() {
        let t = line.trim_start();
        let run = |c: char| t.chars().take_while(|&x| x == c).count();
        match fence {
            Some((c, n)) => {
                if run(c) >= n && t.trim_end().chars().all(|x| x == c) {
                    fence = None;
                }
            }
            None => match ['`', '~'].into_iter().find(|&c| run(c) >= 3) {
                Some(c) => fence = Some((c, run(c))),
                None => out.push((i + 1, line)),
            },
        }
    }
    out
}

/// A line with its code spans (a run of backticks up to the next run as long) removed; an
/// unmatched run stays as it is.
fn without_code_spans(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(i) = rest.find('`') {
        out.push_str(&rest[..i]);
        let ticks = rest[i..].chars().take_while(|&c| c == '`').count();
        let after = &rest[i + ticks..];
        match find_run(after, ticks) {
            Some(close) => rest = &after[close + ticks..],
            None => {
                out.push_str(&rest[i..i + ticks]);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// The byte offset of the first run of exactly `n` backticks in `s`.
fn find_run(s: &str, n: usize) -> Option<usize> {
    let bytes = s.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'`' {
            let len = bytes[i..].iter().take_while(|&&b| b == b'`').count();
            if len == n {
                return Some(i);
            }
            i += len;
        } else {
            i += 1;
        }
    }
    None
}

/// The anchors of a Markdown text's headings (ATX, `#` to `######`, outside code), in order,
/// repeated ones numbered.
pub fn heading_anchors(text: &str) -> Vec<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = Vec::new();
    for (_, line) in prose_lines(text) {
        let t = line.trim_start();
        let level = t.chars().take_while(|&c| c == '#').count();
        if !(1..=6).contains(&level) || !t[level..].starts_with([' ', '\t']) {
            continue;
        }
        let title = t[level..].trim().trim_end_matches('#').trim_end();
        let slug = slug(title);
        let n = seen.entry(slug.clone()).or_insert(0);
        out.push(if *n == 0 { slug } else { format!("{slug}-{n}") });
        *n += 1;
    }
    out
}

/// GitHub's anchor of a heading's Markdown text.
pub fn slug(title: &str) -> String {
    // Link syntax drops its destination: `[text](url)` reads as `text`.
    let mut text = String::new();
    let mut rest = title;
    while let Some(i) = rest.find("](") {
        text.push_str(&rest[..i]);
        let after = &rest[i + 2..];
        rest = &after[after.find(')').map_or(after.len(), |p| p + 1)..];
    }
    text.push_str(rest);
    text.to_lowercase()
        .chars()
        .filter(|&c| c.is_alphanumeric() || c == ' ' || c == '-' || c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_follow_githubs_rule() {
        assert_eq!(
            slug("Re-embedding: switching models without downtime"),
            "re-embedding-switching-models-without-downtime"
        );
        assert_eq!(slug("History (recency, co-change, `ctxd history`)"), "history-recency-co-change-ctxd-history");
        assert_eq!(slug("`[source]` and `[[source]]`"), "source-and-source");
        assert_eq!(slug("Under load — admission [control](x.md)"), "under-load--admission-control");
        let doc = "# A\n## Setup\n```\n## Not a heading\n```\n## Setup\n#nospace\n";
        assert_eq!(heading_anchors(doc), ["a", "setup", "setup-1"]);
    }

    #[test]
    fn good_links_pass_and_a_missing_file_or_anchor_is_found() {
        let docs: BTreeMap<PathBuf, String> = [
            (
                "README.md",
                "See [the guide](docs/guide.md#set-it-up), [below](#usage), ![logo](img/logo.png),\n\
                 [gone](docs/gone.md), [lost anchor](docs/guide.md#nowhere), [web](https://x.org/a.md#b),\n\
                 `[code](not/checked.md)` and [up](../../etc/passwd).\n\
                 ```\n[fenced](also/not.md)\n```\n## Usage\n[ref]: src/lib.rs\n",
            ),
            ("docs/guide.md", "# Guide\n## Set it up\nBack to [the top](../README.md#usage) and [src](../src/).\n"),
        ]
        .into_iter()
        .map(|(p, t)| (PathBuf::from(p), t.to_string()))
        .collect();
        let on_disk = ["img/logo.png", "src/lib.rs", "src"];
        let broken = broken_links(&docs, |p| on_disk.iter().any(|d| Path::new(d) == p));
        let said: Vec<(usize, &str, &Reason)> = broken.iter().map(|b| (b.line, b.link.as_str(), &b.reason)).collect();
        assert_eq!(
            said,
            [
                (2, "docs/gone.md", &Reason::NoFile { resolved: "docs/gone.md".into() }),
                (
                    2,
                    "docs/guide.md#nowhere",
                    &Reason::NoHeading { resolved: "docs/guide.md".into(), anchor: "nowhere".into() }
                ),
                (3, "../../etc/passwd", &Reason::OutsideRepository),
            ]
        );
        assert!(broken.iter().all(|b| b.file == "README.md"), "{broken:?}");
    }
}
