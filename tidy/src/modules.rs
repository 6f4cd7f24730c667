//! A crate's files as modules, and the file-level imports between them.
//!
//! Each `.rs` file under `src/` is one module, named by its path (`a/b.rs` and `a/b/mod.rs` are
//! `a::b`; `lib.rs`/`main.rs` the root). A file imports another when its code (comments,
//! literals and `#[cfg(test)]` items left out) names a path into it: a `use` tree, or a path in
//! the code, starting at `crate::`, `super::`, `self::` or a child module's name. The path is
//! resolved to the longest module prefix that is a file, so `crate::a::Item` imports `a.rs` —
//! a parent's `pub use child::Item` is an import of the child, and a child's `super::Item` an
//! import of the parent, which is why a directory module's children use their siblings directly.
//!
//! The crate root (`lib.rs`, `main.rs`) is a file of the graph like the others: its `use` lines
//! and code import the files they name, and a module naming an item the root defines imports the
//! root (a trait kept in `lib.rs` that the root's own functions use through its modules is a
//! circle). Only its `mod` and `pub use` lines are no imports — they are the crate's face — and
//! `crate::X` re-exported there is read as the file the item comes from (`pub use store::X`
//! makes `crate::X` an import of `store.rs`).

use crate::lexer::{blank_comments_and_literals, is_ident, without_tests};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// One file of a crate.
pub struct RustFile {
    /// Relative to the crate's `src/`, with `/` separators.
    pub rel: String,
    pub module: Vec<String>,
    /// Lines outside test-only items.
    pub code_lines: usize,
    /// Only compiled for tests (`#[cfg(test)] mod x;` in its parent): left out of the checks.
    pub test_only: bool,
    code: String,
}

impl RustFile {
    /// The types it declares `pub` (`pub struct|enum|trait|type Name`; `pub(crate)` ones are not
    /// public), comments, literals and test-only items left out.
    pub fn public_types(&self) -> Vec<String> {
        const KINDS: [&str; 4] = ["pub struct ", "pub enum ", "pub trait ", "pub type "];
        self.code
            .lines()
            .filter_map(|l| KINDS.iter().find_map(|k| l.trim_start().strip_prefix(k)))
            .map(|rest| rest.chars().take_while(|c| is_ident(*c)).collect::<String>())
            .filter(|name| !name.is_empty())
            .collect()
    }
}

impl RustFile {
    /// The modules it declares as files (`mod m;`), each with whether it is public (`pub mod m;`;
    /// `pub(crate)` and the like are not), test-only declarations left out.
    pub fn module_declarations(&self) -> Vec<(String, bool)> {
        self.code
            .lines()
            .filter_map(|l| {
                let l = l.trim_start();
                let (public, rest) = match l.strip_prefix("pub ") {
                    Some(rest) => (true, rest),
                    None if l.starts_with("pub(") => (false, l.split_once(") ")?.1),
                    None => (false, l),
                };
                let name = rest.strip_prefix("mod ")?.strip_suffix(';')?.trim();
                name.chars().all(is_ident).then(|| (name.to_string(), public))
            })
            .collect()
    }
}

/// A file-level import: `from` names `path`, which lies in `to`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Import {
    pub from: String,
    pub to: String,
    pub path: String,
}

/// The files of one crate's `src/`.
pub struct CrateFiles {
    pub files: Vec<RustFile>,
}

impl CrateFiles {
    /// Reads every `.rs` file under `src`.
    pub fn read(src: &Path) -> std::io::Result<Self> {
        let mut paths = Vec::new();
        collect_rs(src, &mut paths)?;
        paths.sort();
        let mut files = Vec::new();
        for path in paths {
            let text = std::fs::read_to_string(&path)?;
            let rel = path.strip_prefix(src).unwrap_or(&path).to_string_lossy().replace('\\', "/");
            let stripped = without_tests(&blank_comments_and_literals(&text));
            let total = text.lines().count();
            let module = module_of(&rel);
            files.push((rel, module, total - stripped.test_lines.min(total), stripped));
        }
        let test_only: BTreeSet<Vec<String>> = files
            .iter()
            .flat_map(|(_, module, _, s)| {
                s.test_modules.iter().map(move |m| [module.clone(), vec![m.clone()]].concat())
            })
            .collect();
        let files = files
            .into_iter()
            .map(|(rel, module, code_lines, stripped)| RustFile {
                test_only: test_only.iter().any(|t| module.starts_with(t)),
                rel,
                module,
                code_lines,
                code: stripped.code,
            })
            .collect();
        Ok(CrateFiles { files })
    }

    /// Every `pub use` of an item of a public module, in any file: its items then have two public
    /// paths (`m::Item` and the re-export), as `(file, m)` with `m` the module's path. A module is
    /// public when it and every module above it is declared `pub mod`. Re-exports of private
    /// modules, the way a crate names its types once, are not counted.
    pub fn two_paths(&self) -> Vec<(String, String)> {
        let files: Vec<&RustFile> = self.files.iter().filter(|f| !f.test_only).collect();
        let declared_pub: BTreeSet<Vec<String>> = files
            .iter()
            .flat_map(|f| {
                f.code.lines().filter_map(|l| l.trim().strip_prefix("pub mod ")).map(|rest| {
                    let name = rest.trim_end_matches(|c: char| c == ';' || c == '{' || c.is_whitespace());
                    [f.module.clone(), vec![name.to_string()]].concat()
                })
            })
            .collect();
        let public = |m: &[String]| (1..=m.len()).all(|n| declared_pub.contains(&m[..n]));
        let modules: BTreeSet<&[String]> = files.iter().map(|f| f.module.as_slice()).collect();
        let mut out = Vec::new();
        for file in &files {
            let children: BTreeSet<String> = modules
                .iter()
                .filter(|m| m.len() == file.module.len() + 1 && m.starts_with(&file.module))
                .map(|m| m[m.len() - 1].clone())
                .collect();
            for line in file.code.lines() {
                let Some(tree) = line.trim().strip_prefix("pub use ") else { continue };
                let mut paths = Vec::new();
                let tree: String =
                    tree.trim_end_matches(';').split_whitespace().map(|w| if w == "as" { "@" } else { w }).collect();
                expand_use(&tree, &mut Vec::new(), &mut paths);
                for path in paths {
                    let Some(absolute) = absolute(&file.module, &path, &children) else { continue };
                    // The module the item lives in: the longest prefix that is a file.
                    let home = (0..absolute.len()).rev().map(|n| &absolute[..n]).find(|m| modules.contains(m));
                    if let Some(home) = home {
                        if !home.is_empty() && home != file.module.as_slice() && public(home) {
                            out.push((file.rel.clone(), home.join("::")));
                        }
                    }
                }
            }
        }
        out.sort();
        out.dedup();
        out
    }

    /// Every file-level import between two files of the crate (test-only files left out), sorted.
    pub fn imports(&self) -> Vec<Import> {
        let by_module: BTreeMap<&[String], &RustFile> =
            self.files.iter().filter(|f| !f.test_only).map(|f| (f.module.as_slice(), f)).collect();
        let children_of = |module: &[String]| -> BTreeSet<String> {
            by_module
                .keys()
                .filter(|m| m.len() == module.len() + 1 && m.starts_with(module))
                .map(|m| m[m.len() - 1].clone())
                .collect()
        };
        // The root's `use` lines by the name they bind: `crate::Index` is read as the file it comes from.
        let root_children = children_of(&[]);
        let root_names: BTreeMap<String, Vec<String>> = by_module
            .get(&[][..])
            .map(|root| paths_in(&root.code))
            .unwrap_or_default()
            .into_iter()
            .filter_map(|path| absolute(&[], &path, &root_children))
            .filter_map(|path| Some((path.last()?.clone(), path)))
            .filter(|(name, _)| !root_children.contains(name))
            .collect();
        let mut out = BTreeSet::new();
        for file in self.files.iter().filter(|f| !f.test_only) {
            let children = children_of(&file.module);
            // The root's `pub use` lines name the crate's types once (no imports); its other
            // paths — `use` lines and code — are imports of the files they name.
            let code: String = if file.module.is_empty() {
                file.code.lines().filter(|l| !l.trim_start().starts_with("pub use ")).collect::<Vec<_>>().join("\n")
            } else {
                file.code.clone()
            };
            for path in paths_in(&code) {
                let Some(mut absolute) = absolute(&file.module, &path, &children) else { continue };
                if let Some(origin) = absolute.first().and_then(|name| root_names.get(name)) {
                    absolute.splice(..1, origin.iter().cloned());
                }
                let target = (0..=absolute.len()).rev().find_map(|n| by_module.get(&absolute[..n]));
                if let Some(target) = target {
                    if target.rel != file.rel {
                        out.insert(Import { from: file.rel.clone(), to: target.rel.clone(), path: path.join("::") });
                    }
                }
            }
        }
        out.into_iter().collect()
    }
}

/// `a/b.rs`, `a/b/mod.rs` → `[a, b]`; `lib.rs`, `main.rs` → `[]`.
fn module_of(rel: &str) -> Vec<String> {
    let stem = rel.strip_suffix(".rs").unwrap_or(rel);
    let mut parts: Vec<String> = stem.split('/').map(str::to_string).collect();
    if parts.last().is_some_and(|p| p == "mod") || (parts.len() == 1 && (parts[0] == "lib" || parts[0] == "main")) {
        parts.pop();
    }
    parts
}

fn collect_rs(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            collect_rs(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    Ok(())
}

/// A path as written, made absolute from the module it is written in; `None` when it does not
/// start inside the crate (another crate, a type, a local).
fn absolute(module: &[String], path: &[String], children: &BTreeSet<String>) -> Option<Vec<String>> {
    let mut base: Vec<String>;
    let mut rest = path;
    match path.first()?.as_str() {
        "crate" => {
            base = Vec::new();
            rest = &path[1..];
        }
        "self" => {
            base = module.to_vec();
            rest = &path[1..];
        }
        "super" => {
            base = module.to_vec();
            while rest.first().is_some_and(|s| s == "super") {
                base.pop()?;
                rest = &rest[1..];
            }
        }
        first if children.contains(first) => base = module.to_vec(),
        _ => return None,
    }
    base.extend(rest.iter().filter(|s| *s != "self").cloned());
    Some(base)
}

/// Every path the code names: each `use` tree expanded, and each `a::b::c` chain outside them.
fn paths_in(code: &str) -> Vec<Vec<String>> {
    let chars: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if !is_ident(chars[i]) || (i > 0 && (is_ident(chars[i - 1]) || chars[i - 1] == ':')) {
            i += 1;
            continue;
        }
        let word_end = (i..chars.len()).find(|&j| !is_ident(chars[j])).unwrap_or(chars.len());
        let word: String = chars[i..word_end].iter().collect();
        if word == "use" && chars.get(word_end).is_some_and(|c| c.is_whitespace()) {
            let end = (word_end..chars.len()).find(|&j| chars[j] == ';').unwrap_or(chars.len());
            let tree: String = chars[word_end..end].iter().collect();
            // `a as b` → `a@b`, then no whitespace: the renaming is cut at the leaf.
            let tree: String = tree.split_whitespace().map(|w| if w == "as" { "@" } else { w }).collect();
            expand_use(&tree, &mut Vec::new(), &mut out);
            i = end;
            continue;
        }
        let (chain, end) = chain_at(&chars, i);
        if chain.len() > 1 {
            out.push(chain);
        }
        i = end.max(word_end);
    }
    out
}

/// The `a::b::c` chain of identifiers starting at `i` (whitespace allowed around `::`), and its end.
fn chain_at(chars: &[char], mut i: usize) -> (Vec<String>, usize) {
    let mut chain = Vec::new();
    loop {
        let end = (i..chars.len()).find(|&j| !is_ident(chars[j])).unwrap_or(chars.len());
        if end == i {
            break;
        }
        chain.push(chars[i..end].iter().collect::<String>());
        let mut j = end;
        while chars.get(j).is_some_and(|c| c.is_whitespace()) {
            j += 1;
        }
        if chars.get(j) == Some(&':') && chars.get(j + 1) == Some(&':') {
            j += 2;
            while chars.get(j).is_some_and(|c| c.is_whitespace()) {
                j += 1;
            }
            i = j;
        } else {
            return (chain, end);
        }
    }
    (chain, i)
}

/// Expands a `use` tree (whitespace removed, `as` written `@`) under `prefix`:
/// `a::{b,c::{d@e,*}}` → `a::b`, `a::c::d`, `a::c`.
fn expand_use(tree: &str, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    let tree = tree.strip_prefix("::").unwrap_or(tree);
    if let Some(open) = tree.find('{') {
        let head: Vec<String> = tree[..open].split("::").filter(|s| !s.is_empty()).map(str::to_string).collect();
        let close = tree.rfind('}').unwrap_or(tree.len());
        let n = prefix.len();
        prefix.extend(head);
        for part in split_top(&tree[open + 1..close]) {
            expand_use(part, prefix, out);
        }
        prefix.truncate(n);
        return;
    }
    let path = tree.split('@').next().unwrap_or(tree);
    let mut full = prefix.clone();
    full.extend(path.split("::").filter(|s| !s.is_empty() && *s != "*").map(str::to_string));
    if !full.is_empty() {
        out.push(full);
    }
}

/// Splits `a, b::{c, d}, e` at its top-level commas.
fn split_top(list: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0usize, 0);
    for (i, c) in list.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&list[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&list[start..]);
    parts.into_iter().filter(|p| !p.is_empty()).collect()
}
