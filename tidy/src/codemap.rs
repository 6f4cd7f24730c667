//! ARCHITECTURE.md's code map against the tree: every `src/` file of every crate is named there,
//! and every `.rs` file it names exists. Also the reader of the document's tables of names
//! ([`name_table`]: the dependency directions, the words), which the other checks hold the tree to.
//!
//! A file is named by a backticked path: `<crate>/src/<path>` anywhere in the document, or
//! `<path>` (relative to `src/`) inside the crate's own section, the one headed
//! ``### `<crate>/` ``. Braces list several: `chunk/{file,code}.rs`, `ctxd/src/{a,b}.rs`.

use std::collections::{BTreeMap, BTreeSet};

/// The table under the heading `heading` (`## Dependency directions`): each row's first backticked
/// name in its first cell → the backticked names of its last cell (`| \`search\` | \`models\`,
/// \`index\` |`; a cell without one, such as `—`, names none). Rows not starting `` | ` `` (the header,
/// the rule) and everything after the next `## ` heading are not read.
pub fn name_table(doc: &str, heading: &str) -> BTreeMap<String, BTreeSet<String>> {
    let names = |cell: &str| -> Vec<String> { cell.split('`').skip(1).step_by(2).map(str::to_string).collect() };
    let mut out = BTreeMap::new();
    let lines = doc.lines().skip_while(|l| l.trim() != heading).skip(1);
    for line in lines.take_while(|l| !l.starts_with("## ")).filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = line.trim().trim_matches('|').split('|').map(str::trim).collect();
        let (Some(first), Some(last)) = (cells.first(), cells.last()) else { continue };
        let Some(key) = names(first).into_iter().next() else { continue };
        out.insert(key, names(last).into_iter().collect());
    }
    out
}

/// The `.rs` paths the document names, by crate folder, relative to that crate's `src/`.
pub fn named_files(doc: &str, crates: &[String]) -> BTreeMap<String, BTreeSet<String>> {
    let mut named: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut section: Option<String> = None;
    for line in doc.lines() {
        if let Some(heading) = line.strip_prefix("### `") {
            section = heading.split('/').next().filter(|c| crates.iter().any(|k| k == c)).map(str::to_string);
        } else if line.starts_with("## ") {
            section = None;
        }
        for span in line.split('`').skip(1).step_by(2) {
            for path in expand_braces(span) {
                // Placeholders (`load/<format>.rs`, `*_handlers.rs`) name no file.
                if !path.ends_with(".rs") || path.contains([' ', '<', '*']) {
                    continue;
                }
                let prefixed = crates
                    .iter()
                    .find_map(|c| path.strip_prefix(&format!("{c}/src/")).map(|rest| (c.clone(), rest.to_string())));
                match (prefixed, &section) {
                    (Some((krate, rel)), _) => {
                        named.entry(krate).or_default().insert(rel);
                    }
                    (None, Some(krate)) if !crates.iter().any(|c| path.starts_with(&format!("{c}/"))) => {
                        named.entry(krate.clone()).or_default().insert(path);
                    }
                    _ => {}
                }
            }
        }
    }
    named
}

/// `a/{b,c}.rs` → `a/b.rs`, `a/c.rs` (one brace group, as the code map writes them).
fn expand_braces(span: &str) -> Vec<String> {
    let (Some(open), Some(close)) = (span.find('{'), span.find('}')) else { return vec![span.to_string()] };
    if close < open {
        return vec![span.to_string()];
    }
    span[open + 1..close]
        .split(',')
        .map(|part| format!("{}{}{}", &span[..open], part.trim(), &span[close + 1..]))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_read_per_section_and_with_braces() {
        let doc = "intro `index/src/record.rs`\n### `stages/` — stages\n- `chunk/{file,code}.rs`, `lib.rs`, \
                   `index/src/reader.rs`, `models/tests/x.rs`\n## Other\n`lost.rs`\n";
        let crates = ["index".to_string(), "stages".to_string(), "models".to_string()];
        let named = named_files(doc, &crates);
        let stages: Vec<&str> = named["stages"].iter().map(String::as_str).collect();
        assert_eq!(stages, ["chunk/code.rs", "chunk/file.rs", "lib.rs"]);
        let index: Vec<&str> = named["index"].iter().map(String::as_str).collect();
        assert_eq!(index, ["reader.rs", "record.rs"]);
        assert!(!named.contains_key("models"));
    }
}
