//! The house rules, checked on this workspace: no import circle inside a crate, no source file
//! over 600 lines without its tests, ARCHITECTURE.md's code map naming every `src/` file, the
//! crate graph pointing one way, and every Markdown link leading to a file and heading that exist;
//! and commit subjects of at most 72 characters since the rule began.
//! Each failure says what is wrong, where, and what to do.

use std::path::PathBuf;

/// The workspace root under test: Cargo's run-time CARGO_MANIFEST_DIR names the checkout under
/// test, even when the test binary is one cargo built from another checkout of the same sources
/// and reused (a shared target dir).
fn root() -> PathBuf {
    let manifest: PathBuf =
        std::env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from).unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into());
    manifest.parent().expect("tidy/ sits in the workspace root").to_path_buf()
}

#[test]
fn commit_subjects_since_the_rule_are_short() {
    match ctxd_tidy::commits::long_subjects(&root()) {
        Ok(long) => {
            let said: Vec<String> = long.iter().map(ToString::to_string).collect();
            assert!(said.is_empty(), "{} commit subject(s) too long:\n{}", said.len(), said.join("\n"));
        }
        Err(why) => eprintln!("skipped: commit subjects not checked: {why}"),
    }
}

#[test]
fn the_tree_keeps_the_house_rules() {
    let root = root();
    let root = root.as_path();
    let violations = ctxd_tidy::check(root).expect("reading the workspace's sources and ARCHITECTURE.md");
    let said: Vec<String> = violations.iter().map(ToString::to_string).collect();
    assert!(said.is_empty(), "{} house rule(s) broken:\n{}", said.len(), said.join("\n"));
}
