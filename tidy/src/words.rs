//! One meaning per word, in the names a reader navigates by: module files and folders, and public
//! types.
//!
//! ARCHITECTURE.md's `## Words` table gives each word that once meant two things its one meaning
//! and the crates whose names may hold it (`| \`graph\` | the code graph … | \`codegraph\`, … |`).
//! A module (a file's own name; a folder's, by its `mod.rs`) or a public type whose name holds the
//! word — as one of the words of its `snake_case` or `CamelCase` name, or their plural in `s` —
//! outside those crates breaks the rule
//! (a `runtime` module in `pipeline` beside `models/src/runtime.rs`, a pipeline `Engine` beside
//! oneDNN's). Separately, a public type name is declared once in the workspace, so no two types
//! answer to one name.

use std::collections::{BTreeMap, BTreeSet};

/// The table: word → the crate folders whose names may hold it.
pub fn table(doc: &str) -> BTreeMap<String, BTreeSet<String>> {
    crate::codemap::name_table(doc, "## Words")
}

/// The words of a name, lowercased: `snake_case` split at `_`, `CamelCase` before each capital.
pub fn words_of(name: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    for c in name.chars() {
        if c == '_' || c.is_uppercase() {
            if !word.is_empty() {
                words.push(std::mem::take(&mut word));
            }
            if c == '_' {
                continue;
            }
        }
        word.extend(c.to_lowercase());
    }
    if !word.is_empty() {
        words.push(word);
    }
    words
}

/// The table's words `name` holds (as one of its words, or that word's plural in `s`).
pub fn held<'t>(name: &str, table: &'t BTreeMap<String, BTreeSet<String>>) -> Vec<&'t str> {
    let words = words_of(name);
    table
        .keys()
        .filter(|w| words.iter().any(|x| x == *w || x.strip_suffix('s') == Some(w.as_str())))
        .map(String::as_str)
        .collect()
}

/// A name somewhere in the workspace: the crate, the file it is in, and the name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Named {
    pub krate: String,
    pub file: String,
    pub name: String,
}

/// The public type names declared in more than one place, each with its places.
pub fn declared_twice(types: &[Named]) -> Vec<(String, Vec<Named>)> {
    let mut by_name: BTreeMap<&str, Vec<Named>> = BTreeMap::new();
    for t in types {
        by_name.entry(&t.name).or_default().push(t.clone());
    }
    by_name.into_iter().filter(|(_, at)| at.len() > 1).map(|(name, at)| (name.to_string(), at)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = "# A\n\n## Words\n\n| word | means | named in |\n|---|---|---|\n\
                       | `graph` | the code graph | `codegraph`, `ctxd` |\n| `edge` | a code-graph row | `index` |\n\n## Next\n\
                       | `stage` | not in the table | `x` |\n";

    #[test]
    fn the_table_is_read_from_its_section_only() {
        let t = table(DOC);
        assert_eq!(t.keys().collect::<Vec<_>>(), ["edge", "graph"]);
        assert_eq!(t["graph"], ["codegraph".to_string(), "ctxd".to_string()].into());
    }

    #[test]
    fn names_are_split_into_words_and_plurals_count() {
        assert_eq!(words_of("CachedGraph"), ["cached", "graph"]);
        assert_eq!(words_of("graph_tools"), ["graph", "tools"]);
        let t = table(DOC);
        assert_eq!(held("edges", &t), ["edge"]);
        assert_eq!(held("EdgeRow", &t), ["edge"]);
        assert!(held("Hedge", &t).is_empty(), "a word inside another word is not the word");
        assert!(held("paragraph", &t).is_empty());
    }

    #[test]
    fn a_type_declared_in_two_crates_is_found() {
        let n = |krate: &str, name: &str| Named { krate: krate.into(), file: "a.rs".into(), name: name.into() };
        let twice = declared_twice(&[n("pipeline", "Engine"), n("models", "Engine"), n("models", "Weights")]);
        assert_eq!(twice.len(), 1);
        assert_eq!(twice[0].0, "Engine");
    }
}
