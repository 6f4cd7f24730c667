//! The rules ARCHITECTURE.md states about the tree, as checks that fail a test run when a change
//! breaks them (`tests/house.rs`, run by `cargo test --workspace` and so by `scripts/test.sh`):
//!
//! - **no file-level import circle inside a crate** (`modules.rs` reads the imports, `cycles.rs`
//!   finds the circles): a parent's `pub use child::…` counts as an import of the child;
//! - **no `src/` file over 600 lines** without its `#[cfg(test)]` items;
//! - **the code map is the tree** (`codemap.rs`): ARCHITECTURE.md names every `src/` file of
//!   every workspace crate, and every `.rs` file it names exists;
//! - **one path to every type**: a file never re-exports (`pub use m::…`) the items of a module
//!   it declares public (`pub mod m`);
//! - **the crate graph points one way** (`deps.rs`): each crate depends only on the ctxd crates
//!   its row of ARCHITECTURE.md's table of directions allows;
//! - **one meaning per word** (`words.rs`): a module or public type whose name holds a word of
//!   ARCHITECTURE.md's `## Words` table lies in a crate of the word's row, and no public type name
//!   is declared twice in the workspace;
//! - **Markdown links lead somewhere** (`links.rs`): every relative link of every `*.md` file
//!   names a file that exists, and its `#anchor` a heading of the Markdown file it points into;
//! - **the prose names what exists** (`prose.rs`): a path or module path in inline code, in the
//!   Markdown or in a `//!` / `///` comment, names a file or module that exists;
//! - **at most 40 % of the modules `pub`**: a module other crates reach for a few items is
//!   `pub(crate)`, its items named once by its parent;
//! - **short commit subjects** (`commits.rs`): every commit after the rule's start has a subject of
//!   at most 72 characters (its own test in `tests/house.rs`, as it reads git, not the tree).
//!
//! Formatting and lints are checked by `cargo fmt --check` and `cargo clippy` in
//! `scripts/test.sh`; this crate has no dependencies, so it builds in seconds and runs first.

mod codemap;
pub mod commits;
mod cycles;
mod deps;
mod lexer;
mod links;
mod modules;
mod prose;
mod words;

use std::path::Path;

/// The longest a source file may be, its test-only items not counted.
pub const MAX_CODE_LINES: usize = 600;

/// The most of the workspace's modules that may be `pub`, in percent: a module other crates reach
/// for a few items is `pub(crate)`, its items named by its parent (ARCHITECTURE.md).
pub const MAX_PUBLIC_MODULES_PERCENT: usize = 40;

/// One broken rule, said as a sentence with the crate and file.
#[derive(Debug)]
pub enum Violation {
    Circle { krate: String, circle: cycles::Circle },
    TooLong { krate: String, file: String, lines: usize },
    NotInCodeMap { krate: String, file: String },
    NamedButMissing { krate: String, file: String },
    Dependency { krate: String, on: String },
    NoDirection { krate: String },
    TwoPaths { krate: String, file: String, module: String },
    BrokenLink(links::BrokenLink),
    StaleName(prose::StaleName),
    WordOutOfPlace { at: words::Named, word: String, crates: Vec<String> },
    TypeTwice { name: String, at: Vec<words::Named> },
    PublicModules { public: usize, total: usize },
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Violation::Circle { krate, circle } => write!(
                f,
                "{krate}: {circle}\n  cut it: move what both sides need into a file of its own, or import the \
                 child that defines an item instead of the parent that re-exports it"
            ),
            Violation::TooLong { krate, file, lines } => write!(
                f,
                "{krate}/src/{file}: {lines} lines besides its tests (at most {MAX_CODE_LINES}): split it where a \
                 part owns one thing"
            ),
            Violation::NotInCodeMap { krate, file } => {
                write!(f, "{krate}/src/{file} is not in ARCHITECTURE.md's code map: say there what it owns")
            }
            Violation::NamedButMissing { krate, file } => {
                write!(f, "ARCHITECTURE.md names {krate}/src/{file}, which does not exist: correct the code map")
            }
            Violation::Dependency { krate, on } => write!(
                f,
                "{krate}/Cargo.toml depends on {on}, which its row of ARCHITECTURE.md's dependency table does not \
                 allow: move what it needs below both, or argue the direction in ARCHITECTURE.md first"
            ),
            Violation::TwoPaths { krate, file, module } => write!(
                f,
                "{krate}/src/{file} re-exports items of the public module `{module}`, so they have two paths: make \
                 `{module}` private (the re-export is then the one path) or drop the re-export and name them \
                 `{module}::…`"
            ),
            Violation::NoDirection { krate } => {
                write!(f, "{krate} has no row in ARCHITECTURE.md's dependency table: say what it may depend on")
            }
            Violation::WordOutOfPlace { at, word, crates } => write!(
                f,
                "{}/src/{}: `{}` holds the word `{word}`, which ARCHITECTURE.md's table of words gives one meaning, \
                 named only in {}: rename it to say what it is here, or change the table first",
                at.krate,
                at.file,
                at.name,
                crates.join(", ")
            ),
            Violation::PublicModules { public, total } => write!(
                f,
                "{public} of the workspace's {total} modules are `pub` (at most {MAX_PUBLIC_MODULES_PERCENT} %): make a \
                 module that other crates reach for a few items `pub(crate)` and name those items in its parent"
            ),
            Violation::TypeTwice { name, at } => {
                let places: Vec<String> = at.iter().map(|n| format!("{}/src/{}", n.krate, n.file)).collect();
                write!(
                    f,
                    "`{name}` is declared public in {}: rename one so the name means one type",
                    places.join(" and ")
                )
            }
            Violation::StaleName(prose::StaleName { file, line, name, why }) => write!(
                f,
                "{file}:{line}: `{name}` names nothing: {why}; correct the name to what it became, or drop it"
            ),
            Violation::BrokenLink(links::BrokenLink { file, line, link, reason }) => {
                write!(f, "{file}:{line}: the link ({link}) ")?;
                match reason {
                    links::Reason::NoFile { resolved } => write!(
                        f,
                        "leads to {resolved}, which does not exist: correct the path (relative to the file's \
                         folder) or drop the link"
                    ),
                    links::Reason::NoHeading { resolved, anchor } => write!(
                        f,
                        "names #{anchor}, which is no heading of {resolved}: use the heading's anchor (lowercased, \
                         punctuation dropped, spaces as '-', a repeated heading's with -1, -2, …)"
                    ),
                    links::Reason::OutsideRepository => f.write_str("leads outside the repository: use a URL"),
                }
            }
        }
    }
}

/// The workspace members listed in `root/Cargo.toml` (`members = [...]`).
pub fn workspace_crates(root: &Path) -> std::io::Result<Vec<String>> {
    let manifest = std::fs::read_to_string(root.join("Cargo.toml"))?;
    let list = manifest
        .split_once("members")
        .and_then(|(_, rest)| rest.split_once('['))
        .and_then(|(_, rest)| rest.split_once(']'))
        .map(|(list, _)| list)
        .unwrap_or("");
    Ok(list.split(',').map(|m| m.trim().trim_matches('"').to_string()).filter(|m| !m.is_empty()).collect())
}

/// Every rule broken in the workspace at `root`.
pub fn check(root: &Path) -> std::io::Result<Vec<Violation>> {
    let crates = workspace_crates(root)?;
    let doc = std::fs::read_to_string(root.join("ARCHITECTURE.md"))?;
    let named = codemap::named_files(&doc, &crates);
    let allowed = deps::allowed(&doc);
    let mut packages = std::collections::BTreeMap::new();
    for krate in &crates {
        if let Some(name) = deps::package_name(&root.join(krate))? {
            packages.insert(name, krate.clone());
        }
    }
    let words = words::table(&doc);
    let mut types = Vec::new();
    let (mut public, mut total) = (0, 0);
    let mut violations = Vec::new();
    for krate in &crates {
        match allowed.get(krate) {
            None => violations.push(Violation::NoDirection { krate: krate.clone() }),
            Some(may) => {
                for dep in deps::dependencies(&root.join(krate))? {
                    if let Some(on) = packages.get(&dep).filter(|on| !may.contains(*on)) {
                        violations.push(Violation::Dependency { krate: krate.clone(), on: on.clone() });
                    }
                }
            }
        }
        let files = modules::CrateFiles::read(&root.join(krate).join("src"))?;
        for declared in files.files.iter().filter(|f| !f.test_only).flat_map(|f| f.module_declarations()) {
            total += 1;
            public += usize::from(declared.1);
        }
        violations.extend(check_crate(krate, &files));
        violations.extend(check_words(krate, &files, &words, &mut types));
        let listed = named.get(krate).cloned().unwrap_or_default();
        for file in &files.files {
            if !listed.contains(&file.rel) {
                violations.push(Violation::NotInCodeMap { krate: krate.clone(), file: file.rel.clone() });
            }
        }
        for file in &listed {
            if !files.files.iter().any(|f| &f.rel == file) {
                violations.push(Violation::NamedButMissing { krate: krate.clone(), file: file.clone() });
            }
        }
    }
    for (name, at) in words::declared_twice(&types) {
        violations.push(Violation::TypeTwice { name, at });
    }
    if public * 100 > MAX_PUBLIC_MODULES_PERCENT * total {
        violations.push(Violation::PublicModules { public, total });
    }
    violations.extend(links::check(root)?.into_iter().map(Violation::BrokenLink));
    let by_module_name = packages.iter().map(|(name, dir)| (name.replace('-', "_"), dir.clone())).collect();
    violations.extend(prose::check(root, &by_module_name)?.into_iter().map(Violation::StaleName));
    Ok(violations)
}

/// The names of one crate's modules and public types that hold a word of the table outside the
/// word's crates; its public types are added to `types` for the workspace-wide count.
fn check_words(
    krate: &str,
    files: &modules::CrateFiles,
    table: &std::collections::BTreeMap<String, std::collections::BTreeSet<String>>,
    types: &mut Vec<words::Named>,
) -> Vec<Violation> {
    let mut violations = Vec::new();
    for file in files.files.iter().filter(|f| !f.test_only) {
        let named =
            |name: &str| words::Named { krate: krate.to_string(), file: file.rel.clone(), name: name.to_string() };
        // The file's own module name: a folder's is checked once, by its `mod.rs` (or `folder.rs`).
        let mut names: Vec<words::Named> = file.module.last().map(|m| named(m)).into_iter().collect();
        let public: Vec<words::Named> = file.public_types().iter().map(|t| named(t)).collect();
        types.extend(public.iter().cloned());
        names.extend(public);
        for at in names {
            for word in words::held(&at.name, table) {
                let crates = &table[word];
                if !crates.contains(krate) {
                    let crates = crates.iter().cloned().collect();
                    violations.push(Violation::WordOutOfPlace { at: at.clone(), word: word.to_string(), crates });
                }
            }
        }
    }
    violations
}

/// The circles and long files of one crate.
pub fn check_crate(krate: &str, files: &modules::CrateFiles) -> Vec<Violation> {
    let mut violations: Vec<Violation> = cycles::circles(&files.imports())
        .into_iter()
        .map(|circle| Violation::Circle { krate: krate.to_string(), circle })
        .collect();
    for file in files.files.iter().filter(|f| f.code_lines > MAX_CODE_LINES) {
        violations.push(Violation::TooLong {
            krate: krate.to_string(),
            file: file.rel.clone(),
            lines: file.code_lines,
        });
    }
    for (file, module) in files.two_paths() {
        violations.push(Violation::TwoPaths { krate: krate.to_string(), file, module });
    }
    violations
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_declarations_tell_public_from_crate_private_and_skip_test_modules() {
        let files = crate_with(
            "mods",
            &[(
                "lib.rs",
                "pub mod a;\npub(crate) mod b;\nmod c;\n// pub mod d;\n#[cfg(test)]\nmod tests;\nmod inline {}\n",
            )],
        );
        let root = files.files.iter().find(|f| f.rel == "lib.rs").unwrap();
        let want: Vec<(String, bool)> = vec![("a".into(), true), ("b".into(), false), ("c".into(), false)];
        assert_eq!(root.module_declarations(), want);
        let too_many = Violation::PublicModules { public: 41, total: 100 }.to_string();
        assert!(
            too_many.contains("41 of the workspace's 100 modules") && too_many.contains("at most 40"),
            "{too_many}"
        );
    }

    /// The files of a throw-away crate `src/` written to the temp dir with the given files (and
    /// removed once read).
    fn crate_with(name: &str, files: &[(&str, &str)]) -> modules::CrateFiles {
        let dir = std::env::temp_dir().join(format!("ctxd-tidy-{name}-{}", std::process::id()));
        let src = dir.join("src");
        let _ = std::fs::remove_dir_all(&dir);
        for (rel, text) in files {
            let path = src.join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        let read = modules::CrateFiles::read(&src);
        let _ = std::fs::remove_dir_all(&dir);
        read.unwrap()
    }

    #[test]
    fn a_circle_through_a_parents_re_export_is_found() {
        let files = crate_with(
            "circle",
            &[
                ("lib.rs", "mod a;\nmod b;\n"),
                ("a/mod.rs", "mod child;\npub use child::Thing;\npub struct Owner;\n"),
                ("a/child.rs", "use super::Owner;\npub struct Thing(Owner);\n"),
                ("b.rs", "use crate::a::child::Thing; // crate::a::Owner in a comment\n"),
            ],
        );
        let violations = check_crate("demo", &files);
        assert_eq!(violations.len(), 1, "{violations:?}");
        let said = violations[0].to_string();
        assert!(said.contains("a/child.rs, a/mod.rs"), "{said}");
        assert!(said.contains("a/mod.rs → a/child.rs (names child::Thing)"), "{said}");
    }

    #[test]
    fn siblings_and_test_modules_make_no_circle() {
        let files = crate_with(
            "clean",
            &[
                ("lib.rs", "mod a;\npub mod b;\n#[cfg(test)]\nmod kit;\npub use a::A;\n"),
                ("a.rs", "use crate::b::B;\npub struct A(B);\n#[cfg(test)]\nmod tests { use crate::A; }\n"),
                ("b.rs", "pub struct B;\n"),
                ("kit.rs", "use crate::A;\n"),
                ("c.rs", "fn f() -> crate::A { todo!() }\n"),
            ],
        );
        assert!(check_crate("demo", &files).is_empty());
        assert!(files.files.iter().any(|f| f.rel == "kit.rs" && f.test_only));
        let imports = files.imports();
        // The root is no file in the graph; `crate::A` is read as the file it re-exports.
        assert!(imports.iter().all(|i| i.from != "lib.rs" && i.to != "lib.rs"), "{imports:?}");
        assert!(imports.iter().any(|i| i.from == "c.rs" && i.to == "a.rs"), "{imports:?}");
        assert!(imports.iter().any(|i| i.from == "a.rs" && i.to == "b.rs"), "{imports:?}");
    }

    #[test]
    fn a_public_module_re_exported_gives_two_paths() {
        let files = crate_with(
            "paths",
            &[
                ("lib.rs", "pub mod a;\nmod b;\npub use a::A;\npub use b::B;\n// pub use a::C in a comment\n"),
                ("a.rs", "pub struct A;\n"),
                ("b.rs", "pub struct B;\n"),
            ],
        );
        let said: Vec<String> = check_crate("demo", &files).iter().map(|v| v.to_string()).collect();
        assert_eq!(said.len(), 1, "{said:?}");
        assert!(said[0].starts_with("demo/src/lib.rs re-exports items of the public module `a`"), "{said:?}");
    }

    #[test]
    fn the_crate_root_counts_in_the_circle_check() {
        // A trait kept in lib.rs, implemented by a module whose type the root's own code uses.
        let files = crate_with(
            "root",
            &[
                ("lib.rs", "mod imp;\nuse imp::Impl;\npub trait Seam {}\npub fn start() -> Impl { Impl }\n"),
                ("imp.rs", "use crate::Seam;\npub struct Impl;\nimpl Seam for Impl {}\n"),
            ],
        );
        let said: Vec<String> = check_crate("demo", &files).iter().map(|v| v.to_string()).collect();
        assert_eq!(said.len(), 1, "{said:?}");
        assert!(said[0].contains("imp.rs, lib.rs") && said[0].contains("crate::Seam"), "{said:?}");
        // The trait in a module of its own: no circle (the root's `pub use` names it once).
        let files = crate_with(
            "root-fixed",
            &[
                (
                    "lib.rs",
                    "mod imp;\nmod seam;\nuse imp::Impl;\npub use seam::Seam;\npub fn start() -> Impl { Impl }\n",
                ),
                ("seam.rs", "pub trait Seam {}\n"),
                ("imp.rs", "use crate::seam::Seam;\npub struct Impl;\nimpl Seam for Impl {}\n"),
            ],
        );
        assert!(check_crate("demo", &files).is_empty());
    }

    #[test]
    fn a_public_module_re_exported_from_another_file_gives_two_paths() {
        let files = crate_with(
            "elsewhere",
            &[
                ("lib.rs", "pub mod catalog;\npub mod server;\nmod private;\n"),
                ("catalog.rs", "pub fn tools() {}\n"),
                ("private.rs", "pub fn helper() {}\n"),
                ("server.rs", "pub use crate::catalog::tools;\npub use crate::private::helper;\n"),
            ],
        );
        let said: Vec<String> = check_crate("demo", &files).iter().map(|v| v.to_string()).collect();
        assert_eq!(said.len(), 1, "{said:?}");
        assert!(said[0].starts_with("demo/src/server.rs re-exports items of the public module `catalog`"), "{said:?}");
    }

    #[test]
    fn a_long_file_is_reported_without_its_tests() {
        let body = "fn f() {}\n".repeat(MAX_CODE_LINES - 1);
        let tests = format!("#[cfg(test)]\nmod tests {{\n{}}}\n", "fn t() {}\n".repeat(200));
        let files =
            crate_with("long", &[("lib.rs", &format!("{body}{tests}")), ("big.rs", &"fn g() {}\n".repeat(601))]);
        let long: Vec<String> = check_crate("demo", &files).iter().map(|v| v.to_string()).collect();
        assert_eq!(long.len(), 1, "{long:?}");
        assert!(long[0].starts_with("demo/src/big.rs: 601 lines"), "{long:?}");
    }
}
