//! The fixture repository `tests/fixtures/graph` (Python, Rust, TypeScript/JavaScript, Go and
//! Java, a few files each): its exact edge set, as extracted and as the chunker stores it.

use std::collections::BTreeSet;
use std::path::PathBuf;

use ctxd_index::{edges::EdgeKind, edges::EdgeKind::*, edges::EdgeRow};

use super::extract;
use crate::chunk::testing::chunker;
use crate::lang::detect;
use crate::load::LoadedFile;

/// (kind, path, from_symbol, target, name), `""` for none.
type Row = (EdgeKind, String, String, String, String);

/// Every edge of the fixture, as [`extract`] names it.
const EXPECTED: &[(EdgeKind, &str, &str, &str, &str)] = &[
    (Inherits, "go/geo/geo.go", "Square", "Named", ""),
    (References, "go/geo/geo.go", "New", "Square", ""),
    (References, "go/geo/geo.go", "New", "Named", ""),
    (Imports, "go/main.go", "", "fmt", ""),
    (Imports, "go/main.go", "", "example.com/fixture/go/geo", ""),
    (References, "go/main.go", "main", "geo.Shape", ""),
    (Calls, "go/main.go", "main", "geo.New", ""),
    (Calls, "go/main.go", "main", "fmt.Println", ""),
    (Calls, "go/main.go", "main", "s.Area", ""),
    (Imports, "java/com/acme/zoo/Dog.java", "", "com.acme", "Animal"),
    (Imports, "java/com/acme/zoo/Dog.java", "", "java.io", "Serializable"),
    (Inherits, "java/com/acme/zoo/Dog.java", "Dog", "Animal", ""),
    (Inherits, "java/com/acme/zoo/Dog.java", "Dog", "Serializable", ""),
    (Calls, "java/com/acme/zoo/Dog.java", "Dog.sound", "bark", ""),
    (Calls, "java/com/acme/zoo/Dog.java", "Dog.bark", "repeat", ""),
    (Imports, "python/shop/__init__.py", "", ".models", "Item"),
    (Imports, "python/shop/models.py", "", "shop.util", "fmt_price"),
    (Inherits, "python/shop/models.py", "Item", "Base", ""),
    (Calls, "python/shop/models.py", "Item.label", "self.describe", ""),
    (Calls, "python/shop/models.py", "Item.label", "fmt_price", ""),
    (Imports, "python/tests/test_models.py", "", "shop", "Item"),
    (Imports, "python/tests/test_models.py", "", "shop", "util"),
    (Imports, "python/tests/test_models.py", "", "shop.util", "fmt_price"),
    (Calls, "python/tests/test_models.py", "test_label", "Item", ""),
    (Calls, "python/tests/test_models.py", "test_label", "endswith", ""),
    (Calls, "python/tests/test_models.py", "test_label", "item.label", ""),
    (Calls, "python/tests/test_models.py", "test_label", "fmt_price", ""),
    (Calls, "python/tests/test_models.py", "test_label", "util.fmt_price", ""),
    (Imports, "rust/src/lib.rs", "", "mod:shapes", ""),
    (Imports, "rust/src/lib.rs", "", "crate::shapes", "Circle"),
    (Imports, "rust/src/lib.rs", "", "crate::shapes", "Shape"),
    (References, "rust/src/lib.rs", "total_area", "Shape", ""),
    (Calls, "rust/src/lib.rs", "total_area", "sum", ""),
    (Calls, "rust/src/lib.rs", "total_area", "map", ""),
    (Calls, "rust/src/lib.rs", "total_area", "all.iter", ""),
    (Calls, "rust/src/lib.rs", "total_area", "s.area", ""),
    (References, "rust/src/lib.rs", "unit", "Circle", ""),
    (Calls, "rust/src/lib.rs", "unit", "Circle::new", ""),
    (Imports, "rust/src/shapes.rs", "", "std::f64::consts", "PI"),
    (References, "rust/src/shapes.rs", "Circle::new", "Circle", ""),
    (Inherits, "rust/src/shapes.rs", "Circle", "Shape", ""),
    (Calls, "rust/src/shapes.rs", "Circle::area", "square", ""),
    (References, "rust/src/shapes.rs", "Circle::area", "PI", ""),
    (Imports, "web/button.ts", "", "./base", "Widget"),
    (Imports, "web/button.ts", "", "./util", "label"),
    (Inherits, "web/button.ts", "Button", "Widget", ""),
    (Calls, "web/button.ts", "Button.render", "label", ""),
    (Calls, "web/button.ts", "Button.render", "super.render", ""),
];

/// The fixture's files: (path relative to the fixture, absolute path).
fn fixture_files() -> Vec<(String, PathBuf)> {
    let root = std::env::var_os("CARGO_MANIFEST_DIR")
        .map_or_else(|| env!("CARGO_MANIFEST_DIR").into(), PathBuf::from)
        .join("../tests/fixtures/graph");
    let mut files = Vec::new();
    let mut stack = vec![root.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("fixture folder") {
            let path = entry.expect("fixture entry").path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let rel = path.strip_prefix(&root).expect("under the root").to_string_lossy().replace('\\', "/");
                files.push((rel, path));
            }
        }
    }
    files.sort();
    files
}

fn row(e: &EdgeRow) -> Row {
    let s = |o: &Option<String>| o.clone().unwrap_or_default();
    (e.kind, e.path.clone(), s(&e.from_symbol), e.target.clone(), s(&e.name))
}

fn expected() -> BTreeSet<Row> {
    EXPECTED.iter().map(|&(k, p, f, t, n)| (k, p.into(), f.into(), t.into(), n.into())).collect()
}

#[test]
fn fixture_edges_are_exactly_these() {
    let files = fixture_files();
    assert_eq!(files.len(), 14, "{files:?}");
    let mut got = BTreeSet::new();
    for (rel, path) in &files {
        let text = std::fs::read_to_string(path).expect("fixture file");
        for e in extract(rel, detect(rel), &text) {
            assert_eq!(e.language, detect(rel));
            assert!(e.line >= 1 && e.line as usize <= text.lines().count(), "{e:?}");
            assert!(got.insert(row(&e)), "duplicate edge {e:?}");
        }
    }
    let want = expected();
    let missing: Vec<_> = want.difference(&got).collect();
    let extra: Vec<_> = got.difference(&want).collect();
    assert!(missing.is_empty() && extra.is_empty(), "missing {missing:#?}\nextra {extra:#?}");
}

/// What the chunk stage stores: the symbols table lists every member (see
/// `chunk::members`), so the stored edges start at the same definitions as the extracted ones,
/// even where a small class stays one chunk.
#[test]
fn fixture_edges_as_stored_start_at_the_same_definitions() {
    let mut got = BTreeSet::new();
    for (rel, path) in fixture_files() {
        let language = detect(&rel);
        let text = std::fs::read_to_string(&path).expect("fixture file");
        let file =
            LoadedFile { rel, language, text, file_hash: String::new(), lossy: false, sections: None, stream: None };
        let chunked = chunker(200).chunk_file(&file);
        let symbols: std::collections::HashSet<&str> = chunked.symbols.iter().map(|s| s.symbol.as_str()).collect();
        for e in &chunked.edges {
            if let Some(from) = &e.from_symbol {
                assert!(symbols.contains(from.as_str()), "{from} is a row of the symbols table");
            }
        }
        got.extend(chunked.edges.iter().map(row));
    }
    assert_eq!(got, expected());
    assert!(got.iter().any(|(k, _, f, t, _)| *k == Calls && f == "Item.label" && t == "self.describe"));
}
