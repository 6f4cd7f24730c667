//! Import targets → indexed files: pure functions over the set of indexed paths ([`FileSet`]),
//! no index access. [`resolve_import`] takes an `imports` edge as stored (the module spec as
//! written, the imported name) and returns the file(s) it points at, best first, or nothing
//! when the module is outside the root (standard library, packages, crates):
//!
//! * **Python** — `a.b.c` → `a/b/c.py` or `a/b/c/__init__.py` under any source root (matched by
//!   path suffix whose prefix is not itself a package; the shortest prefix wins); with a name
//!   that is a module itself (`from a.b import c`) that module's file first; relative imports
//!   (`..util`, `.`) from the importing file's package.
//! * **Rust** — `crate::…` from the crate root (the nearest ancestor folder holding `lib.rs` or
//!   `main.rs`), `self::`, `super::`, and paths relative to the current module; the longest
//!   module prefix that is a file wins (`crate::a::b::C` → `src/a/b.rs`, else `src/a.rs`, else
//!   the crate root); `mod:x` → `x.rs` or `x/mod.rs` beside a `mod.rs`/`lib.rs`/`main.rs`, else
//!   in the file's `<stem>/` folder.
//! * **JavaScript / TypeScript** — relative specs only: `./x` → `x.ts`, `.tsx`, `.js`, `.jsx`,
//!   `.mjs`, `.cjs`, `.d.ts`, or `x/index.*`; `./x.js` also finds `x.ts`.
//! * **Go** — the non-test `.go` files of the folder whose path ends with the longest suffix of
//!   the import path (at least two segments unless the path starts with a host such as
//!   `github.com`; single-segment paths are the standard library).
//! * **Java** — `com.acme` + `Foo` → `…/com/acme/Foo.java` (or the class `com/acme.java` of a
//!   static import); a wildcard → the `.java` files of the package folder.
//! * **C / C++** — an include relative to the includer, else by path suffix.

use std::collections::{HashMap, HashSet};

/// Every indexed path, with exact lookup, lookup by path suffix and folder listings.
#[derive(Debug, Default)]
pub struct FileSet {
    paths: HashSet<String>,
    /// File name → the paths with that name.
    by_name: HashMap<String, Vec<String>>,
    /// Folder (`""` for the root) → its files, sorted.
    dirs: HashMap<String, Vec<String>>,
    /// Last segment of a folder → the folders with that name.
    dirs_by_name: HashMap<String, Vec<String>>,
}

/// The folder of a path (`""` at the root).
fn parent(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(d, _)| d)
}

/// Whether `path` is `suffix` or ends with `/suffix`.
fn ends_with_segments(path: &str, suffix: &str) -> bool {
    path == suffix || (path.ends_with(suffix) && path[..path.len() - suffix.len()].ends_with('/'))
}

/// `rel` (with `.` and `..`) from folder `dir`; `None` when it climbs above the root.
fn join(dir: &str, rel: &str) -> Option<String> {
    let mut parts: Vec<&str> = dir.split('/').filter(|p| !p.is_empty()).collect();
    for seg in rel.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            s => parts.push(s),
        }
    }
    Some(parts.join("/"))
}

/// Joins a folder and a relative path (`""` folder = the root).
fn under(dir: &str, rel: &str) -> String {
    match (dir.is_empty(), rel.is_empty()) {
        (true, _) => rel.to_string(),
        (_, true) => dir.to_string(),
        _ => format!("{dir}/{rel}"),
    }
}

impl FileSet {
    /// The set of `paths` (relative, `/`-separated).
    pub fn new(paths: impl IntoIterator<Item = String>) -> Self {
        let mut set = FileSet::default();
        let mut known_dirs: HashSet<String> = HashSet::new();
        for p in paths {
            if !set.paths.insert(p.clone()) {
                continue;
            }
            let name = p.rsplit('/').next().unwrap_or(&p).to_string();
            set.by_name.entry(name).or_default().push(p.clone());
            let mut dir = parent(&p).to_string();
            set.dirs.entry(dir.clone()).or_default().push(p);
            // Every ancestor folder is a folder too.
            while !dir.is_empty() && known_dirs.insert(dir.clone()) {
                let last = dir.rsplit('/').next().unwrap_or(&dir).to_string();
                set.dirs_by_name.entry(last).or_default().push(dir.clone());
                dir = parent(&dir).to_string();
            }
        }
        for list in set.dirs.values_mut() {
            list.sort();
        }
        for list in set.by_name.values_mut().chain(set.dirs_by_name.values_mut()) {
            list.sort_by(|a, b| (a.len(), a).cmp(&(b.len(), b)));
        }
        set
    }

    /// Number of paths.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.paths.len()
    }

    /// Whether `path` is indexed.
    pub fn contains(&self, path: &str) -> bool {
        self.paths.contains(path)
    }

    /// Indexed paths equal to `suffix` or ending in `/suffix`, shortest first.
    pub fn with_suffix(&self, suffix: &str) -> Vec<&str> {
        let name = suffix.rsplit('/').next().unwrap_or(suffix);
        let found = self.by_name.get(name).into_iter().flatten();
        found.filter(|p| ends_with_segments(p, suffix)).map(String::as_str).collect()
    }

    /// The files directly in folder `dir` (`""` for the root), sorted.
    pub fn list_dir(&self, dir: &str) -> &[String] {
        self.dirs.get(dir.trim_end_matches('/')).map_or(&[], Vec::as_slice)
    }

    /// Folders equal to `suffix` or ending in `/suffix`, shortest first.
    pub fn dirs_with_suffix(&self, suffix: &str) -> Vec<&str> {
        let name = suffix.rsplit('/').next().unwrap_or(suffix);
        let found = self.dirs_by_name.get(name).into_iter().flatten();
        found.filter(|d| ends_with_segments(d, suffix)).map(String::as_str).collect()
    }
}

/// The indexed file(s) an import edge of a `language` file at `from_path` points at, best
/// first; empty when the module is outside the root (see the module docs for each language).
pub fn resolve_import(
    files: &FileSet,
    language: &str,
    from_path: &str,
    target: &str,
    name: Option<&str>,
) -> Vec<String> {
    let mut out = match language {
        "python" => python(files, from_path, target, name),
        "rust" => rust(files, from_path, target, name),
        "javascript" | "typescript" | "tsx" => script(files, from_path, target),
        "go" => go(files, target),
        "java" => java(files, target, name),
        "c" | "cpp" => include(files, from_path, target),
        _ => Vec::new(),
    };
    let mut seen = HashSet::new();
    out.retain(|p| seen.insert(p.clone()));
    out
}

fn python(files: &FileSet, from: &str, target: &str, name: Option<&str>) -> Vec<String> {
    let dots = target.chars().take_while(|c| *c == '.').count();
    let rest = target[dots..].replace('.', "/");
    // A module at `base`: its `.py` file or its package's `__init__.py`.
    let module = |base: &str| -> Vec<String> {
        let candidates = [format!("{base}.py"), under(base, "__init__.py")];
        let candidates = if base.is_empty() { &candidates[1..] } else { &candidates[..] };
        if dots > 0 {
            return candidates.iter().filter(|c| files.contains(c)).cloned().collect();
        }
        // Absolute: under a source root, i.e. a folder that is not itself a package; the
        // shortest root wins (a module file before a package of the same root).
        let mut found: Vec<(usize, usize, &str)> = Vec::new();
        for (order, c) in candidates.iter().enumerate() {
            for p in files.with_suffix(c) {
                let root = p[..p.len() - c.len()].trim_end_matches('/');
                if !files.contains(&under(root, "__init__.py")) {
                    found.push((root.len(), order, p));
                }
            }
        }
        found.sort();
        let best = found.first().map(|f| f.0);
        found.into_iter().filter(|f| Some(f.0) == best).map(|f| f.2.to_string()).collect()
    };
    let base = if dots > 0 {
        let mut dir = parent(from).to_string();
        for _ in 1..dots {
            if dir.is_empty() {
                return Vec::new();
            }
            dir = parent(&dir).to_string();
        }
        under(&dir, &rest)
    } else {
        rest
    };
    if let Some(n) = name {
        let sub = module(&under(&base, n));
        if !sub.is_empty() {
            return sub;
        }
    }
    module(&base)
}

/// The folder holding a Rust file's child modules: its own folder for `mod.rs`, `lib.rs` and
/// `main.rs`, else the `<stem>/` folder beside it.
fn rust_children(from: &str) -> String {
    let file = from.rsplit('/').next().unwrap_or(from);
    match file {
        "mod.rs" | "lib.rs" | "main.rs" => parent(from).to_string(),
        _ => from.strip_suffix(".rs").unwrap_or(from).to_string(),
    }
}

/// The file of the module whose children live in `dir`.
fn rust_module_file(files: &FileSet, dir: &str) -> Option<String> {
    let inside = ["lib.rs", "main.rs", "mod.rs"].map(|f| under(dir, f));
    let beside = (!dir.is_empty()).then(|| format!("{dir}.rs"));
    inside.into_iter().chain(beside).find(|f| files.contains(f))
}

/// The longest prefix of `segs` that is a module file under `dir`.
fn rust_longest(files: &FileSet, dir: &str, segs: &[&str]) -> Option<String> {
    (1..=segs.len()).rev().find_map(|k| {
        let base = under(dir, &segs[..k].join("/"));
        [format!("{base}.rs"), format!("{base}/mod.rs")].into_iter().find(|f| files.contains(f))
    })
}

fn rust(files: &FileSet, from: &str, target: &str, name: Option<&str>) -> Vec<String> {
    if let Some(m) = target.strip_prefix("mod:") {
        return rust_longest(files, &rust_children(from), &[m]).into_iter().collect();
    }
    let mut segs: Vec<&str> = target.split("::").filter(|s| !s.is_empty()).collect();
    segs.extend(name);
    let crate_root = || {
        let mut dir = parent(from).to_string();
        loop {
            if files.contains(&under(&dir, "lib.rs")) || files.contains(&under(&dir, "main.rs")) {
                return Some(dir);
            }
            if dir.is_empty() {
                return None;
            }
            dir = parent(&dir).to_string();
        }
    };
    let (dir, rest) = match segs.first() {
        Some(&"crate") => match crate_root() {
            Some(d) => (d, &segs[1..]),
            None => return Vec::new(),
        },
        Some(&"self") | Some(&"super") => {
            let mut dir = rust_children(from);
            let supers = segs.iter().take_while(|s| **s == "super").count();
            for _ in 0..supers {
                dir = parent(&dir).to_string();
            }
            (dir, &segs[supers.max(usize::from(segs[0] == "self"))..])
        }
        _ => {
            // A path relative to the current module (2018 edition), then to the crate root;
            // anything else is another crate.
            let found = rust_longest(files, &rust_children(from), &segs)
                .or_else(|| crate_root().and_then(|root| rust_longest(files, &root, &segs)));
            return found.into_iter().collect();
        }
    };
    rust_longest(files, &dir, rest).or_else(|| rust_module_file(files, &dir)).into_iter().collect()
}

fn script(files: &FileSet, from: &str, target: &str) -> Vec<String> {
    let relative = target == "." || target == ".." || target.starts_with("./") || target.starts_with("../");
    let Some(base) = relative.then(|| join(parent(from), target)).flatten() else { return Vec::new() };
    const EXTS: [&str; 7] = ["ts", "tsx", "js", "jsx", "mjs", "cjs", "d.ts"];
    let mut candidates = vec![base.clone()];
    // TypeScript's ESM style names the emitted file: `./x.js` is `x.ts`.
    if let Some(stem) = [".js", ".jsx", ".mjs", ".cjs"].iter().find_map(|e| base.strip_suffix(e)) {
        candidates.extend(["ts", "tsx", "mts", "cts"].map(|e| format!("{stem}.{e}")));
    }
    candidates.extend(EXTS.map(|e| format!("{base}.{e}")));
    candidates.extend(EXTS.map(|e| under(&base, &format!("index.{e}"))));
    candidates.into_iter().find(|c| files.contains(c)).into_iter().collect()
}

fn go(files: &FileSet, target: &str) -> Vec<String> {
    let segs: Vec<&str> = target.split('/').filter(|s| !s.is_empty()).collect();
    let min = if segs.first().is_some_and(|s| s.contains('.')) { 1 } else { 2 };
    for k in (min..=segs.len()).rev() {
        let suffix = segs[segs.len() - k..].join("/");
        for dir in files.dirs_with_suffix(&suffix) {
            let sources: Vec<String> = files
                .list_dir(dir)
                .iter()
                .filter(|f| f.ends_with(".go") && !f.ends_with("_test.go"))
                .cloned()
                .collect();
            if !sources.is_empty() {
                return sources;
            }
        }
    }
    Vec::new()
}

fn java(files: &FileSet, target: &str, name: Option<&str>) -> Vec<String> {
    let package = target.replace('.', "/");
    let first = |suffix: String| files.with_suffix(&suffix).first().map(|p| p.to_string());
    if let Some(class) = name.and_then(|n| first(format!("{package}/{n}.java"))) {
        return vec![class];
    }
    // A static import's class, or the class of a nested-class import.
    if let Some(class) = first(format!("{package}.java")) {
        return vec![class];
    }
    if name.is_some() {
        return Vec::new();
    }
    let dir =
        files.dirs_with_suffix(&package).into_iter().find(|d| files.list_dir(d).iter().any(|f| f.ends_with(".java")));
    dir.map(|d| files.list_dir(d).iter().filter(|f| f.ends_with(".java")).cloned().collect()).unwrap_or_default()
}

fn include(files: &FileSet, from: &str, target: &str) -> Vec<String> {
    match join(parent(from), target).filter(|p| files.contains(p)) {
        Some(p) => vec![p],
        None => {
            files.with_suffix(target.trim_start_matches("./")).first().map(|p| vec![p.to_string()]).unwrap_or_default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(paths: &[&str]) -> FileSet {
        FileSet::new(paths.iter().map(|p| p.to_string()))
    }

    fn r(files: &FileSet, lang: &str, from: &str, target: &str, name: Option<&str>) -> Vec<String> {
        resolve_import(files, lang, from, target, name)
    }

    #[test]
    fn file_set_lookups() {
        let f = set(&["src/a/b.py", "ab.py", "b.py", "x/src/a/b.py", "src/a/c.py", "deep/one/two/f.go"]);
        assert_eq!(f.len(), 6);
        assert!(f.contains("src/a/b.py") && !f.contains("src/a"));
        assert_eq!(f.with_suffix("b.py"), ["b.py", "src/a/b.py", "x/src/a/b.py"], "segment boundaries, shortest first");
        assert_eq!(f.with_suffix("a/b.py"), ["src/a/b.py", "x/src/a/b.py"]);
        assert_eq!(f.list_dir("src/a"), ["src/a/b.py", "src/a/c.py"]);
        assert_eq!(f.list_dir(""), ["ab.py", "b.py"]);
        assert!(f.list_dir("nowhere").is_empty());
        assert_eq!(f.dirs_with_suffix("one/two"), ["deep/one/two"]);
        assert_eq!(f.dirs_with_suffix("one"), ["deep/one"], "ancestors are folders too");
        assert_eq!(f.dirs_with_suffix("a"), ["src/a", "x/src/a"]);
    }

    #[test]
    fn python_absolute_relative_and_submodules() {
        let f = set(&[
            "src/shop/__init__.py",
            "src/shop/models.py",
            "src/shop/util/__init__.py",
            "src/shop/util/money.py",
            "tests/test_shop.py",
            "vendor/x/shop/models.py",
            "pkg/__init__.py",
            "pkg/json.py",
            "main.py",
        ]);
        let from = "tests/test_shop.py";
        assert_eq!(r(&f, "python", from, "shop.models", None), ["src/shop/models.py"], "shortest source root");
        assert_eq!(r(&f, "python", from, "shop", Some("models")), ["src/shop/models.py"], "a name that is a module");
        assert_eq!(r(&f, "python", from, "shop", Some("Thing")), ["src/shop/__init__.py"]);
        assert_eq!(r(&f, "python", from, "shop.util", None), ["src/shop/util/__init__.py"]);
        assert!(r(&f, "python", from, "json", None).is_empty(), "pkg/json.py is pkg.json, not json");
        assert!(r(&f, "python", from, "os.path", None).is_empty());
        let from = "src/shop/util/money.py";
        assert_eq!(r(&f, "python", from, "..models", Some("Item")), ["src/shop/models.py"]);
        assert_eq!(r(&f, "python", from, ".", None), ["src/shop/util/__init__.py"]);
        assert_eq!(r(&f, "python", "src/shop/models.py", ".", Some("util")), ["src/shop/util/__init__.py"]);
        assert_eq!(r(&f, "python", "src/shop/models.py", ".util", Some("money")), ["src/shop/util/money.py"]);
        assert!(r(&f, "python", "main.py", "...far", None).is_empty(), "above the root");
    }

    #[test]
    fn rust_crate_super_self_and_mods() {
        let f = set(&[
            "src/lib.rs",
            "src/a.rs",
            "src/a/b.rs",
            "src/net/mod.rs",
            "src/net/tcp.rs",
            "src/net/tcp/frame.rs",
            "tools/src/main.rs",
        ]);
        let r = |from: &str, t: &str, n: Option<&str>| r(&f, "rust", from, t, n);
        assert_eq!(r("src/net/tcp.rs", "crate::a::b", Some("C")), ["src/a/b.rs"], "longest module prefix");
        assert_eq!(r("src/net/tcp.rs", "crate::a", Some("Missing")), ["src/a.rs"]);
        assert_eq!(r("src/net/tcp.rs", "crate", Some("Thing")), ["src/lib.rs"], "the crate root itself");
        assert_eq!(r("src/lib.rs", "mod:a", None), ["src/a.rs"]);
        assert_eq!(r("src/lib.rs", "mod:net", None), ["src/net/mod.rs"]);
        assert_eq!(r("src/net/mod.rs", "mod:tcp", None), ["src/net/tcp.rs"], "beside a mod.rs");
        assert_eq!(r("src/net/tcp.rs", "mod:frame", None), ["src/net/tcp/frame.rs"], "in the <stem>/ folder");
        assert_eq!(r("src/net/tcp.rs", "super", Some("Conn")), ["src/net/mod.rs"]);
        assert_eq!(r("src/net/tcp/frame.rs", "super::super", Some("x")), ["src/net/mod.rs"]);
        assert_eq!(r("src/net/tcp.rs", "self::frame", Some("F")), ["src/net/tcp/frame.rs"]);
        assert_eq!(r("src/lib.rs", "net::tcp", Some("Conn")), ["src/net/tcp.rs"], "relative to the module");
        assert!(r("src/lib.rs", "std::fmt", None).is_empty());
        assert!(r("tools/src/main.rs", "crate::a", None).iter().all(|p| p.starts_with("tools/")));
    }

    #[test]
    fn scripts_go_java_and_includes() {
        let f = set(&[
            "web/a.ts",
            "web/b.js",
            "web/comp/index.tsx",
            "web/types.d.ts",
            "web/esm.ts",
            "svc/geo/geo.go",
            "svc/geo/util.go",
            "svc/geo/geo_test.go",
            "svc/main.go",
            "http/server.go",
            "java/com/acme/Foo.java",
            "java/com/acme/Bar.java",
            "java/com/acme/Util.java",
            "native/include/lib.h",
            "native/src/lib.h",
            "native/src/main.c",
        ]);
        assert_eq!(r(&f, "typescript", "web/a.ts", "./b", Some("x")), ["web/b.js"]);
        assert_eq!(r(&f, "tsx", "web/a.ts", "./comp", None), ["web/comp/index.tsx"]);
        assert_eq!(r(&f, "typescript", "web/comp/index.tsx", "../types", None), ["web/types.d.ts"]);
        assert_eq!(r(&f, "typescript", "web/a.ts", "./esm.js", None), ["web/esm.ts"]);
        assert!(r(&f, "javascript", "web/a.ts", "react", None).is_empty());
        assert!(r(&f, "javascript", "web/a.ts", "../../x", None).is_empty());
        assert_eq!(r(&f, "go", "svc/main.go", "example.com/svc/geo", None), ["svc/geo/geo.go", "svc/geo/util.go"]);
        assert_eq!(r(&f, "go", "svc/main.go", "github.com/me/proj/geo", None), ["svc/geo/geo.go", "svc/geo/util.go"]);
        assert!(r(&f, "go", "svc/main.go", "net/http", None).is_empty(), "standard library");
        assert!(r(&f, "go", "svc/main.go", "fmt", None).is_empty());
        assert_eq!(r(&f, "java", "java/x/Y.java", "com.acme", Some("Foo")), ["java/com/acme/Foo.java"]);
        assert_eq!(r(&f, "java", "java/x/Y.java", "com.acme.Util", Some("helper")), ["java/com/acme/Util.java"]);
        let all = r(&f, "java", "java/x/Y.java", "com.acme", None);
        assert_eq!(all, ["java/com/acme/Bar.java", "java/com/acme/Foo.java", "java/com/acme/Util.java"]);
        assert!(r(&f, "java", "java/x/Y.java", "java.util", Some("List")).is_empty());
        assert_eq!(r(&f, "c", "native/src/main.c", "lib.h", None), ["native/src/lib.h"], "beside the includer first");
        assert_eq!(r(&f, "c", "native/src/main.c", "include/lib.h", None), ["native/include/lib.h"]);
        assert!(r(&f, "ruby", "a.rb", "json", None).is_empty());
    }

    /// Every import of `tests/fixtures/graph` that points inside it resolves to its file; the
    /// others (standard library, other packages) to nothing.
    #[test]
    fn fixture_imports_resolve() {
        let root = std::env::var_os("CARGO_MANIFEST_DIR")
            .map_or_else(|| env!("CARGO_MANIFEST_DIR").into(), std::path::PathBuf::from)
            .join("../tests/fixtures/graph");
        let mut paths = Vec::new();
        let mut stack = vec![root.clone()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).expect("fixture folder") {
                let p = entry.expect("entry").path();
                match p.is_dir() {
                    true => stack.push(p),
                    false => paths.push(p.strip_prefix(&root).expect("inside").to_string_lossy().replace('\\', "/")),
                }
            }
        }
        let f = FileSet::new(paths);
        assert_eq!(f.len(), 14);
        // (language, importing file, spec, imported name, files it resolves to)
        type Case<'a> = (&'a str, &'a str, &'a str, Option<&'a str>, &'a [&'a str]);
        let cases: &[Case] = &[
            ("python", "python/shop/__init__.py", ".models", Some("Item"), &["python/shop/models.py"]),
            ("python", "python/shop/models.py", "shop.util", Some("fmt_price"), &["python/shop/util.py"]),
            ("python", "python/tests/test_models.py", "shop", Some("Item"), &["python/shop/__init__.py"]),
            ("python", "python/tests/test_models.py", "shop", Some("util"), &["python/shop/util.py"]),
            ("python", "python/tests/test_models.py", "shop.util", Some("fmt_price"), &["python/shop/util.py"]),
            ("rust", "rust/src/lib.rs", "mod:shapes", None, &["rust/src/shapes.rs"]),
            ("rust", "rust/src/lib.rs", "crate::shapes", Some("Circle"), &["rust/src/shapes.rs"]),
            ("rust", "rust/src/lib.rs", "crate::shapes", Some("Shape"), &["rust/src/shapes.rs"]),
            ("rust", "rust/src/shapes.rs", "std::f64::consts", Some("PI"), &[]),
            ("typescript", "web/button.ts", "./base", Some("Widget"), &["web/base.ts"]),
            ("typescript", "web/button.ts", "./util", Some("label"), &["web/util.js"]),
            ("go", "go/main.go", "fmt", None, &[]),
            ("go", "go/main.go", "example.com/fixture/go/geo", None, &["go/geo/geo.go"]),
            ("java", "java/com/acme/zoo/Dog.java", "com.acme", Some("Animal"), &["java/com/acme/Animal.java"]),
            ("java", "java/com/acme/zoo/Dog.java", "java.io", Some("Serializable"), &[]),
        ];
        for (lang, from, target, name, want) in cases {
            assert!(f.contains(from), "{from}");
            assert_eq!(r(&f, lang, from, target, *name), *want, "{lang} {from}: {target} {name:?}");
        }
    }
}
