//! The crate graph against ARCHITECTURE.md's table of directions: each workspace crate's
//! `[dependencies]` may name only the ctxd crates in its row of the table under
//! `## Dependency directions` (`| \`crate\` | \`a\`, \`b\` |`, `—` for none).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The table: crate folder → the crate folders it may depend on.
pub fn allowed(doc: &str) -> BTreeMap<String, BTreeSet<String>> {
    crate::codemap::name_table(doc, "## Dependency directions")
}

/// The package name of the crate in `dir` (`name = "…"` of its `[package]`).
pub fn package_name(dir: &Path) -> std::io::Result<Option<String>> {
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml"))?;
    Ok(manifest
        .lines()
        .find_map(|l| l.trim().strip_prefix("name").map(|r| r.trim().trim_start_matches('=').trim().trim_matches('"')))
        .map(str::to_string))
}

/// The package names in the `[dependencies]` section of `dir/Cargo.toml`.
pub fn dependencies(dir: &Path) -> std::io::Result<Vec<String>> {
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml"))?;
    let mut out = Vec::new();
    let mut inside = false;
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            inside = line == "[dependencies]";
            continue;
        }
        if inside && !line.is_empty() && !line.starts_with('#') {
            let name = line.split(['.', '=', ' ']).next().unwrap_or("").trim();
            if !name.is_empty() {
                out.push(name.to_string());
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_read_row_by_row() {
        let doc = "## Dependency directions\n\n| crate | may depend on |\n|---|---|\n| `index` | — |\n\
                   | `search` | `models`, `index` |\n\n## Next\n| `x` | `y` |\n";
        let table = allowed(doc);
        assert_eq!(table.len(), 2, "{table:?}");
        assert!(table["index"].is_empty());
        assert_eq!(table["search"].iter().map(String::as_str).collect::<Vec<_>>(), ["index", "models"]);
    }
}
