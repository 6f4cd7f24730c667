//! Why each file under a root is indexed or not — `ctxd ls-files --explain`.
//!
//! Every file under the root is walked without ignore rules (except inside `.git`, never
//! indexed). A file the real scan reports is judged by loading it (6 below); any other file by
//! the first path rule that skips it, in the order indexing applies them:
//! 1. inside an excluded folder (the index itself);
//! 2. a hidden (dot-named) file or folder on its path;
//! 3. a `.gitignore` / `.ignore` / `.git/info/exclude` rule — the file, line and pattern;
//! 4. a name rule ([`classify_name`]: a binary extension, a secret file);
//! 5. the source's include/exclude globs;
//! 6. what loading it finds ([`crate::load::load`] itself, with no previous state): too large,
//!    binary content, an invalid document; a file above the stream threshold is indexed in parts.
//!
//! A file none of these skips but the real scan does not report is skipped by a rule this list
//! cannot name (a global `core.excludesFile`, a parent folder's `.gitignore` above the root).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use crate::load::{load, LoadConfig, LoadOutcome};
use crate::skip::{classify_name, SkipReason};
use crate::state::FileState;
use crate::watch::{rel_path, IgnoreMatcher, PathRule, Scanner};
use crate::SourceFile;

/// Why a file is or is not indexed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Indexed (`streamed`: in parts, being above the stream threshold).
    Indexed { streamed: bool },
    /// Inside a folder the scan never enters (the index).
    Excluded,
    /// A dot-named part of its path.
    Hidden { part: String },
    /// An ignore rule: the file it is in, its line (when found) and the pattern.
    Ignored { file: PathBuf, line: Option<usize>, pattern: String },
    /// A name rule (binary extension, secret).
    Name(SkipReason),
    /// Outside the source's include globs or inside its exclude globs.
    NotSelected,
    /// Loading skips it: `too_large`, `binary`, `invalid`.
    Content(&'static str),
    /// The scan skips it by a rule not listed here (a global or parent gitignore).
    Unlisted,
}

impl Verdict {
    /// Whether the file is indexed.
    pub fn indexed(&self) -> bool {
        matches!(self, Verdict::Indexed { .. })
    }

    /// One line: `indexed`, or `skipped: <rule>`.
    pub fn describe(&self) -> String {
        match self {
            Verdict::Indexed { streamed: false } => "indexed".into(),
            Verdict::Indexed { streamed: true } => "indexed, streamed in parts (large file)".into(),
            Verdict::Excluded => "skipped: inside the index folder".into(),
            Verdict::Hidden { part } => format!("skipped: hidden ('{part}' starts with a dot)"),
            Verdict::Ignored { file, line, pattern } => match line {
                Some(n) => format!("skipped: {}:{n}: {pattern}", file.display()),
                None => format!("skipped: {}: {pattern}", file.display()),
            },
            Verdict::Name(SkipReason::Secret) => "skipped: secret file name or extension".into(),
            Verdict::Name(SkipReason::BinaryExt) => "skipped: binary file extension".into(),
            Verdict::Name(SkipReason::Ignored) => "skipped: ignored name".into(),
            Verdict::NotSelected => "skipped: outside the source's include/exclude globs".into(),
            Verdict::Content("too_large") => "skipped: larger than [source] max_file_bytes".into(),
            Verdict::Content("binary") => "skipped: binary content (NUL bytes or not text)".into(),
            Verdict::Content("invalid") => "skipped: a document that does not parse".into(),
            Verdict::Content(other) => format!("skipped: {other}"),
            Verdict::Unlisted => "skipped: a global or parent-folder ignore rule".into(),
        }
    }
}

/// Each file under `under` (default: the scanner's root), sorted by path, with its verdict.
/// Blocking (reads files): run it on a blocking thread.
pub fn explain(scanner: &Scanner, cfg: &LoadConfig, under: Option<&Path>) -> Vec<(String, Verdict)> {
    let root = scanner.root();
    let mut scanned = HashSet::new();
    scanner.scan(|f| {
        scanned.insert(f.abs);
        true
    });
    let matcher = scanner.ignore_matcher();
    let start = under.map_or_else(|| root.to_path_buf(), |p| p.canonicalize().unwrap_or_else(|_| p.to_path_buf()));
    let walker = ignore::WalkBuilder::new(&start)
        .standard_filters(false)
        .follow_links(false)
        .filter_entry(|e| e.file_name() != ".git")
        .build();
    let mut out = Vec::new();
    // Ignore files read once each, to name the line of a rule.
    let mut rule_files: HashMap<PathBuf, Vec<String>> = HashMap::new();
    for entry in walker.flatten() {
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        let abs = entry.path();
        let Some(rel) = rel_path(root, abs) else { continue };
        let verdict = judge(scanner, &matcher, cfg, abs, &rel, &scanned, &mut rule_files);
        out.push((rel, verdict));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

fn judge(
    scanner: &Scanner,
    matcher: &IgnoreMatcher,
    cfg: &LoadConfig,
    abs: &Path,
    rel: &str,
    scanned: &HashSet<PathBuf>,
    rule_files: &mut HashMap<PathBuf, Vec<String>>,
) -> Verdict {
    // What the scan reports is past every path rule (a `!` re-include included): only what
    // loading finds is left to judge.
    if scanned.contains(abs) {
        return content(cfg, abs, rel);
    }
    match matcher.rule_for(abs, false) {
        Some(PathRule::Excluded) => return Verdict::Excluded,
        Some(PathRule::Hidden(part)) => return Verdict::Hidden { part },
        Some(PathRule::Ignored { file, pattern }) => {
            let lines = rule_files.entry(file.clone()).or_insert_with(|| {
                std::fs::read_to_string(&file).map(|t| t.lines().map(str::to_string).collect()).unwrap_or_default()
            });
            let line = lines.iter().position(|l| l.trim() == pattern).map(|i| i + 1);
            return Verdict::Ignored { file, line, pattern };
        }
        None => {}
    }
    if let Some(reason) = classify_name(abs) {
        return Verdict::Name(reason);
    }
    if !scanner.selector().matches(rel) {
        return Verdict::NotSelected;
    }
    Verdict::Unlisted
}

/// What loading a file the scan reports finds (the loader itself, with no previous state: a
/// large file is opened as a stream, its first block sniffed).
fn content(cfg: &LoadConfig, abs: &Path, rel: &str) -> Verdict {
    let file = SourceFile { rel: rel.to_string(), abs: abs.to_path_buf() };
    match load(&file, &FileState::default(), cfg) {
        Ok(LoadOutcome::Skipped(reason)) => Verdict::Content(reason),
        Ok(LoadOutcome::Loaded(loaded)) => Verdict::Indexed { streamed: loaded.stream.is_some() },
        Ok(_) => Verdict::Indexed { streamed: false },
        Err(_) => Verdict::Content("unreadable"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_file_gets_the_rule_that_skips_it() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("r");
        for (path, body) in [
            ("src/lib.rs", "fn a() {}\n"),
            ("target/out.rs", "fn b() {}\n"),
            (".env", "TOKEN=x\n"),
            ("keys/server.pem", "-----BEGIN-----\n"),
            ("img/logo.png", "png"),
            ("data/blob.txt", "a\0b\0c"),
            (".gitignore", "# build output\ntarget/\n"),
        ] {
            let p = root.join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, body).unwrap();
        }
        let scanner = Scanner::new(&root, Vec::new());
        let cfg = LoadConfig::default();
        let got: HashMap<String, Verdict> = explain(&scanner, &cfg, None).into_iter().collect();
        assert_eq!(got["src/lib.rs"], Verdict::Indexed { streamed: false });
        let root = root.canonicalize().unwrap();
        assert_eq!(
            got["target/out.rs"],
            Verdict::Ignored { file: root.join(".gitignore"), line: Some(2), pattern: "target/".into() }
        );
        assert!(
            got["target/out.rs"].describe().ends_with(".gitignore:2: target/"),
            "{}",
            got["target/out.rs"].describe()
        );
        assert_eq!(got[".env"], Verdict::Hidden { part: ".env".into() });
        assert_eq!(got["keys/server.pem"], Verdict::Name(SkipReason::Secret));
        assert_eq!(got["img/logo.png"], Verdict::Name(SkipReason::BinaryExt));
        assert_eq!(got["data/blob.txt"], Verdict::Content("binary"));
        assert!(got.values().filter(|v| v.indexed()).count() == 1, "{got:?}");
    }
}
