//! The prose names what exists: a path or a module path in inline code (`` `pipeline/src/x.rs` ``,
//! `` `ctxd_index::scope` ``) in the repository's Markdown outside fenced blocks, or in a `//!` or
//! `///` comment of a Rust file, must name a file or module that exists. Links are `links.rs`'s;
//! this is the prose around them, which went stale unseen when files moved.
//!
//! What counts as a path: a code span without spaces whose first component is a top-level folder
//! of the repository; `:LINE` and `#anchor` suffixes are dropped. It exists when it resolves
//! against the root, the linking file's top folder (its crate) or the file's own folder. Spans with
//! placeholders (`<`, `*`, `{`, `$`, `…`) are not paths, and a span with a one-letter name in it (a
//! file `x.rs`, a folder `a/`, a module `crate::a::b`) is an example, not a name. What counts as a module
//! path: `ctxd_<crate>::a::b…` (or `crate::a::b…` in a Rust file, for its own crate); each segment
//! in turn must be a module file (`a.rs`, `a/mod.rs`) or an item the module before it declares
//! (`fn`, `struct`, `enum`, `trait`, `type`, `const`, `static`, `mod`, `macro_rules!`, or a
//! `pub use` naming it or a glob re-export of a module that declares it); the first item ends the
//! check. Not read: `docs/history/` and CHANGELOG.md, which tell of files as they were, and the
//! skipped folders of `links.rs`.

use std::collections::BTreeMap;
use std::path::Path;

use crate::links::{files_ending, markdown_files, prose_lines, slashed};

/// A name in prose that names nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaleName {
    /// The file, relative to the repository root (`/`-separated).
    pub file: String,
    /// Its 1-based line.
    pub line: usize,
    /// The code span's text.
    pub name: String,
    /// Why it names nothing.
    pub why: String,
}

/// Folders and files whose prose tells of the past.
const HISTORY: [&str; 2] = ["docs/history/", "CHANGELOG.md"];

/// Every stale name of the repository at `root`; `crates` maps each package name with `-` as
/// `_` (`ctxd_index`) to its folder.
pub fn check(root: &Path, crates: &BTreeMap<String, String>) -> std::io::Result<Vec<StaleName>> {
    let top: Vec<String> = std::fs::read_dir(root)?
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with('.'))
        .collect();
    let mut out = Vec::new();
    let mut texts: Vec<(String, Vec<(usize, String)>)> = Vec::new();
    for path in markdown_files(root)? {
        let rel = slashed(path.strip_prefix(root).unwrap_or(&path));
        let text = std::fs::read_to_string(&path)?;
        texts.push((rel, prose_lines(&text).into_iter().map(|(n, l)| (n, l.to_string())).collect()));
    }
    for dir in crates.values() {
        for path in files_ending(&root.join(dir), ".rs")? {
            let rel = slashed(path.strip_prefix(root).unwrap_or(&path));
            let text = std::fs::read_to_string(&path)?;
            texts.push((rel, doc_lines(&text)));
        }
    }
    for (rel, lines) in texts.iter().filter(|(rel, _)| !HISTORY.iter().any(|h| rel.starts_with(h))) {
        let own = crates.values().find(|d| rel.starts_with(&format!("{d}/"))).cloned();
        for (line, text) in lines {
            for span in code_spans(text) {
                let stale = |why: String| StaleName { file: rel.clone(), line: *line, name: span.to_string(), why };
                if let Some(path) = path_in(span, &top) {
                    if !resolves(root, rel, &path) {
                        out.push(stale(format!("{path} is no file or folder of the repository")));
                    }
                } else if let Some(why) =
                    module_path(span).and_then(|m| missing_module(root, crates, own.as_deref(), &m))
                {
                    out.push(stale(why));
                }
            }
        }
    }
    Ok(out)
}

/// The `//!` and `///` comments of a Rust file, with their lines.
pub fn doc_lines(text: &str) -> Vec<(usize, String)> {
    text.lines()
        .enumerate()
        .filter_map(|(i, l)| {
            let t = l.trim_start();
            t.strip_prefix("//!").or_else(|| t.strip_prefix("///")).map(|c| (i + 1, c.to_string()))
        })
        .collect()
}

/// The texts of a line's single-backtick code spans.
pub fn code_spans(line: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(open) = rest.find('`') {
        let after = &rest[open + 1..];
        if after.starts_with('`') {
            rest = after.trim_start_matches('`');
            continue;
        }
        let Some(close) = after.find('`') else { break };
        out.push(&after[..close]);
        rest = &after[close + 1..];
    }
    out
}

/// The path a code span names, if it names one (see the module docs).
pub fn path_in(span: &str, top: &[String]) -> Option<String> {
    let path = span.split('#').next()?;
    // `file.rs:40` or `file.rs:40-52` names lines of the file.
    let path = match path.rsplit_once(':') {
        Some((p, lines)) if !lines.is_empty() && lines.chars().all(|c| c.is_ascii_digit() || c == '-') => p,
        _ => path,
    };
    let plain = |c: char| c.is_ascii_alphanumeric() || "_.-/".contains(c);
    if !path.contains('/') || !path.chars().all(plain) || path.starts_with('/') || path.contains("//") {
        return None;
    }
    let path = path.trim_end_matches('/');
    let example = path.split('/').any(|c| one_letter(c.split('.').next().unwrap_or(c)));
    let first = path.split('/').next()?;
    (top.iter().any(|t| t == first) && !example).then(|| path.to_string())
}

/// A one-letter name: a placeholder in an example (`a/b.rs`, `crate::a::X`).
fn one_letter(name: &str) -> bool {
    name.len() == 1 && name.chars().all(|c| c.is_ascii_alphabetic())
}

/// Whether `path` exists against the root, the top folder of `rel` or `rel`'s own folder.
fn resolves(root: &Path, rel: &str, path: &str) -> bool {
    let top = rel.split('/').next().unwrap_or("");
    let dir = rel.rsplit_once('/').map_or("", |(d, _)| d);
    [root.join(path), root.join(top).join(path), root.join(dir).join(path)].iter().any(|p| p.exists())
}

/// A module path's segments (`ctxd_index::scope::SourceScope` → `[ctxd_index, scope,
/// SourceScope]`), if the span is one.
pub fn module_path(span: &str) -> Option<Vec<String>> {
    let start = span.find("ctxd_").or_else(|| span.find("crate::"))?;
    if start > 0 && span[..start].ends_with(|c: char| c.is_alphanumeric() || c == '_') {
        return None;
    }
    let path: String =
        span[start..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':').collect();
    let segs: Vec<String> = path.split("::").map(str::to_string).collect();
    (segs.len() >= 2 && segs.iter().all(|s| !s.is_empty() && !one_letter(s))).then_some(segs)
}

/// Why `segs` names no module or item, or `None` when it does (see the module docs).
fn missing_module(
    root: &Path,
    crates: &BTreeMap<String, String>,
    own: Option<&str>,
    segs: &[String],
) -> Option<String> {
    let dir = match (segs[0].as_str(), crates.get(&segs[0])) {
        ("crate", _) => own?.to_string(),
        (_, Some(dir)) => dir.clone(),
        (name, None) => return Some(format!("no workspace crate is named {name}")),
    };
    let src = root.join(&dir).join("src");
    let mut file = ["lib.rs", "main.rs"].iter().map(|f| src.join(f)).find(|p| p.exists())?;
    let mut module: Vec<&str> = Vec::new();
    for seg in &segs[1..] {
        let mut parts = module.clone();
        parts.push(seg);
        let base = parts.iter().fold(src.clone(), |p, s| p.join(s));
        if let Some(found) = [base.with_extension("rs"), base.join("mod.rs")].into_iter().find(|p| p.exists()) {
            module.push(seg);
            file = found;
            continue;
        }
        let text = std::fs::read_to_string(&file).ok()?;
        if declares(&text, seg) || glob_declares(&src, &module, &text, seg) {
            return None;
        }
        let at = slashed(file.strip_prefix(root).unwrap_or(&file));
        return Some(format!("`{seg}` is neither a module nor an item of {at}"));
    }
    None
}

/// Whether `text` declares `name` as an item or re-exports it by name.
fn declares(text: &str, name: &str) -> bool {
    const KINDS: [&str; 9] = ["fn", "mod", "struct", "enum", "type", "const", "static", "trait", "macro_rules!"];
    text.lines().any(|l| {
        let words: Vec<&str> = l.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '!')).collect();
        words.windows(2).any(|w| KINDS.contains(&w[0]) && w[1] == name)
            || (l.trim_start().starts_with("pub use") && words.contains(&name))
    })
}

/// Whether a glob re-export (`pub use m::*;`) in `text` brings `name` from a module that declares it.
fn glob_declares(src: &Path, module: &[&str], text: &str, name: &str) -> bool {
    text.lines().filter_map(|l| l.trim().strip_prefix("pub use ")?.strip_suffix("::*;")).any(|m| {
        let base = module.iter().fold(src.to_path_buf(), |p, s| p.join(s)).join(m);
        [base.with_extension("rs"), base.join("mod.rs")]
            .iter()
            .any(|p| std::fs::read_to_string(p).is_ok_and(|t| declares(&t, name)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_paths_and_module_paths_are_read_as_prose_names_them() {
        assert_eq!(code_spans("a `x` b ``y`` c `z/w.rs` d `open"), vec!["x", "z/w.rs"]);
        let top = vec!["docs".to_string(), "pipeline".to_string()];
        assert_eq!(path_in("pipeline/src/runtime.rs", &top).as_deref(), Some("pipeline/src/runtime.rs"));
        assert_eq!(path_in("pipeline/src/answers.rs:40", &top).as_deref(), Some("pipeline/src/answers.rs"));
        assert_eq!(path_in("docs/guide.md#setup", &top).as_deref(), Some("docs/guide.md"));
        assert_eq!(path_in("docs/", &top).as_deref(), Some("docs"));
        for not_a_path in
            ["api/src/main.rs", "pipeline/src/x.rs", "docs/<name>.md", "x / y", "docs", "src/*.rs", "/etc/ctxd"]
        {
            assert_eq!(path_in(not_a_path, &top), None, "{not_a_path}");
        }
        let segs = |s: &str| module_path(s).map(|v| v.join("::"));
        assert_eq!(segs("ctxd_index::scope::SourceScope").as_deref(), Some("ctxd_index::scope::SourceScope"));
        assert_eq!(segs("crate::graph").as_deref(), Some("crate::graph"));
        assert_eq!(segs("Index::open(ctxd_models::start())").as_deref(), Some("ctxd_models::start"));
        assert_eq!(segs("my_crate::scope"), None);
        assert_eq!(segs("crate::a::b"), None, "an example");
        assert!(declares("pub(crate) async fn run() {}", "run") && declares("pub use a::{b, Run};", "Run"));
        assert!(!declares("let run = 1;", "run"));
    }

    #[test]
    fn stale_paths_and_modules_are_found_and_live_ones_pass() {
        let tmp = std::env::temp_dir().join(format!("ctxd-tidy-prose-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        let write = |rel: &str, text: &str| {
            let p = tmp.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        };
        write(
            "kit/src/lib.rs",
            "//! See `kit/src/gone.rs` and `crate::graph`, `crate::live::Thing`, `crate::a::b`.\npub mod live;\n",
        );
        write("kit/src/live.rs", "/// `ctxd_kit::live::run` and `ctxd_kit::live::walk`\npub fn run() {}\n");
        write("README.md", "`kit/src/live.rs`, `kit/src/lib.rs:3`, `kit/old/y.rs`, `kit/old.rs`, `ctxd_gone::run`.\n```\n`kit/src/nope.rs`\n```\n");
        write("docs/history/old.md", "`kit/src/gone.rs`\n");
        let crates = BTreeMap::from([("ctxd_kit".to_string(), "kit".to_string())]);
        let found = check(&tmp, &crates).unwrap();
        let said: Vec<String> = found.iter().map(|s| format!("{}:{} {}", s.file, s.line, s.name)).collect();
        assert_eq!(
            said,
            [
                "README.md:1 kit/old.rs",
                "README.md:1 ctxd_gone::run",
                "kit/src/lib.rs:1 kit/src/gone.rs",
                "kit/src/lib.rs:1 crate::graph",
                "kit/src/lib.rs:1 crate::live::Thing",
                "kit/src/live.rs:1 ctxd_kit::live::walk",
            ],
            "{found:?}"
        );
        let _ = std::fs::remove_dir_all(&tmp);
    }
}
