//! `docs/reference/configuration.md` against the parser and `configs/ctxd.toml` (tests only):
//! every key the page's tables list is one the parser knows (a file setting it alone gets no
//! "unknown key"; a wrong type is fine, it proves the key is read); every key the raw layer's
//! types read (`raw.rs`, walked from `RawConfig`) is on the page; every key `configs/ctxd.toml`
//! holds (set or commented out, `# key = value`) is on the page, and every key on the page is in
//! `configs/ctxd.toml`. Keys are named by their dotted path: `source.root` (for `[source]` and each
//! `[[source]]`), `pipeline.load`, `aggregate.sources.name` (each `[[aggregate.sources]]`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::{Config, ConfigError};

/// The repository root: above this crate's run-time `CARGO_MANIFEST_DIR` (right even when a test
/// binary built from another checkout is reused), else the build-time one.
fn repo_root() -> PathBuf {
    let manifest =
        std::env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from).unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into());
    manifest.parent().expect("config/ sits in the workspace root").to_path_buf()
}

/// The keys of the page's tables, by dotted path, each with the TOML that sets it alone (to `0`).
///
/// A `## ` heading names the section its tables document by its first backticked table
/// (`` `[source]` and `[[source]]` `` → `source`); a heading without one (the tokens file, the
/// environment variables) documents none. A row's first cell lists keys: `` `key` ``,
/// `` `[rerank] model` `` (a section of its own) or `` `sources[].name` `` (an array of tables).
fn documented_keys(doc: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut section: Option<String> = None;
    for line in doc.lines() {
        if line.starts_with("## ") {
            section = line
                .split('`')
                .skip(1)
                .step_by(2)
                .find(|s| s.starts_with('['))
                .map(|s| s.trim_matches(['[', ']']).to_string());
            continue;
        }
        let (Some(section), Some(cell)) = (&section, line.strip_prefix('|').and_then(|l| l.split('|').next())) else {
            continue;
        };
        for span in cell.split('`').skip(1).step_by(2) {
            let (table, key) = match span.strip_prefix('[').and_then(|s| s.split_once("] ")) {
                Some((table, key)) => (table.to_string(), key.to_string()),
                None => (section.clone(), span.to_string()),
            };
            let toml = match key.split_once("[].") {
                Some((array, key)) => format!("[[{table}.{array}]]\n{key} = 0\n"),
                None => format!("[{table}]\n{key} = 0\n"),
            };
            out.insert(format!("{table}.{}", key.replace("[]", "")), toml);
        }
    }
    out
}

/// The keys of `configs/ctxd.toml` by dotted path: `key = …` lines, and commented-out ones
/// (`# key = …` that parse as TOML), under the last `[table]` / `[[table]]` header (commented
/// out or not).
fn file_keys(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut table = String::new();
    for line in text.lines() {
        let commented = line.trim_start().starts_with('#');
        let line = line.trim_start_matches(['#', ' ']).trim_end();
        if line.starts_with('[') && line.ends_with(']') {
            table = line.trim_matches(['[', ']']).to_string();
        } else if let Some((key, _)) = line.split_once(" = ") {
            let name = !key.is_empty() && key.chars().all(|c| c.is_ascii_lowercase() || c == '_');
            // A comment's prose (`# false = full-text only: …`) is no key: a key's line parses.
            if !table.is_empty() && name && (!commented || toml::from_str::<toml::Table>(line).is_ok()) {
                out.insert(format!("{table}.{key}"));
            }
        }
    }
    out
}

/// The problems `Config::from_toml` reports for `text` that say a key is unknown.
fn unknown_keys(text: &str) -> Vec<String> {
    match Config::from_toml(text, Path::new("reference.toml")) {
        Err(ConfigError::Invalid { errors, .. }) => {
            errors.0.iter().filter(|p| p.message.contains("unknown key")).map(ToString::to_string).collect()
        }
        _ => Vec::new(),
    }
}

#[test]
fn the_reference_page_lists_the_keys_the_parser_reads() {
    let page = repo_root().join("docs/reference/configuration.md");
    let doc = std::fs::read_to_string(&page).unwrap();
    let documented = documented_keys(&doc);
    assert!(documented.len() > 60, "the page's tables were read: {documented:?}");
    // The probe can fail: a key the parser does not know is reported as such.
    assert!(!unknown_keys("[index]\nno_such_key = 0\n").is_empty());

    let file = std::fs::read_to_string(repo_root().join("configs/ctxd.toml")).unwrap();
    let in_file = file_keys(&file);
    let mut drift = Vec::new();
    for (key, toml) in &documented {
        for problem in unknown_keys(toml) {
            drift.push(format!("configuration.md lists {key}, which the parser does not know ({problem})"));
        }
        if !in_file.contains(key) {
            drift.push(format!("configuration.md lists {key}, which configs/ctxd.toml does not hold"));
        }
    }
    for key in in_file.iter().filter(|k| !documented.contains_key(*k)) {
        drift.push(format!("configs/ctxd.toml holds {key}, which configuration.md does not list"));
    }
    assert!(drift.is_empty(), "{} drifted ({} problem(s)):\n{}", page.display(), drift.len(), drift.join("\n"));
}

/// The keys `raw.rs`'s types read, by dotted path, walked from `RawConfig`: a field whose type is
/// another `Raw…` table (or an array of them, or an enum of them) stands for that table's keys,
/// unless `whole` holds its own path (`pipeline.load`, documented as one `{capacity, workers}`).
fn raw_keys(source: &str, whole: &BTreeMap<String, String>) -> BTreeSet<String> {
    // Each `pub(crate) struct|enum Raw… {` up to its closing `}`: its fields `(name, type)`; an
    // enum's are its variants' payloads, unnamed.
    let mut types: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in source.lines() {
        let header = line.strip_prefix("pub(crate) struct ").or_else(|| line.strip_prefix("pub(crate) enum "));
        if let Some(name) = header.and_then(|h| h.strip_suffix(" {")) {
            current = Some(name.to_string());
            types.entry(name.to_string()).or_default();
        } else if line == "}" {
            current = None;
        } else if let Some(name) = &current {
            let line = line.trim().trim_end_matches(',');
            let field = match line.strip_prefix("pub ").and_then(|l| l.split_once(": ")) {
                Some((key, ty)) => (key.to_string(), ty.to_string()),
                None if line.contains('(') && !line.starts_with(['/', '#']) => (String::new(), line.to_string()),
                None => continue,
            };
            types.get_mut(name).unwrap().push(field);
        }
    }
    let mut out = BTreeSet::new();
    let mut todo = vec![("RawConfig".to_string(), String::new())];
    while let Some((ty, path)) = todo.pop() {
        for (key, field_ty) in types.get(&ty).into_iter().flatten().filter(|(k, _)| k != "unknown") {
            let key_path = if key.is_empty() { path.clone() } else { [path.as_str(), key].join(".") };
            let key_path = key_path.trim_start_matches('.').to_string();
            // The innermost `Raw…` type the field holds, if any (`Key<Vec<RawAggregateSource>>`).
            let table = field_ty
                .split(['<', '>', '(', ')'])
                .find(|t| t.starts_with("Raw") && types.contains_key(*t))
                .map(str::to_string);
            match table {
                Some(table) if !whole.contains_key(&key_path) => todo.push((table, key_path)),
                _ => {
                    out.insert(key_path);
                }
            }
        }
    }
    out
}

#[test]
fn every_key_the_parser_reads_is_on_the_reference_page() {
    let page = repo_root().join("docs/reference/configuration.md");
    let documented = documented_keys(&std::fs::read_to_string(&page).unwrap());
    let raw = std::fs::read_to_string(repo_root().join("config/src/raw.rs")).unwrap();
    let read = raw_keys(&raw, &documented);
    assert!(read.len() > 60 && read.contains("aggregate.sources.url"), "raw.rs's keys were read: {read:?}");
    let missing: Vec<&String> = read.iter().filter(|k| !documented.contains_key(*k)).collect();
    assert!(
        missing.is_empty(),
        "{} does not list {} key(s) the parser reads (config/src/raw.rs): {}",
        page.display(),
        missing.len(),
        missing.iter().map(|k| k.as_str()).collect::<Vec<_>>().join(", ")
    );
}
