//! Old indexes open: each fixture under `ctxd/tests/fixtures/index-format-1-*` is an index written
//! by an older build (its `README.md` says which and how), with the folder it indexed. The new
//! binary searches it as it is, writes to it (a file added: the oldest one, without `embed_key`,
//! is re-embedded once by the writer first), compacts it and searches it again — the old files
//! and the new one found, every row of the folder there once. (A newer format than the build's
//! is refused: `index/src/format.rs`'s tests.)

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::support::{copy_dir, ctxd, paths_of, repo_root, require_model, run_ok};

fn fixtures() -> Vec<PathBuf> {
    let dir = repo_root().join("ctxd/tests/fixtures");
    let mut out: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("index-format-1-"))
        .collect();
    out.sort();
    out
}

fn search(db: &Path, query: &str) -> Vec<String> {
    let out = run_ok(ctxd().args(["search", query, "--json", "--k", "5", "--db"]).arg(db));
    paths_of(&serde_json::from_str::<Value>(out.trim()).unwrap())
}

/// The rows of the latest version.
fn rows(db: &Path) -> u64 {
    let out = run_ok(ctxd().args(["snapshots", "--json", "--db"]).arg(db));
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    v["snapshots"].as_array().and_then(|s| s.last()).and_then(|s| s["rows"].as_u64()).unwrap()
}

#[test]
fn indexes_written_by_older_builds_are_searched_written_and_compacted() {
    require_model();
    let found = fixtures();
    assert!(found.len() >= 2, "the fixtures are committed: {found:?}");
    for fixture in found {
        let name = fixture.file_name().unwrap().to_string_lossy().into_owned();
        let tmp = tempfile::tempdir().unwrap();
        let (db, src) = (tmp.path().join("db"), tmp.path().join("src"));
        copy_dir(&fixture.join("db"), &db);
        copy_dir(&fixture.join("src"), &src);
        // Read as it is.
        let before = rows(&db);
        assert!(before > 0, "{name}");
        assert_eq!(search(&db, "parse the ledger invoice totals")[0], "billing.py", "{name}");
        // Written: a new file, the folder indexed again.
        std::fs::write(src.join("shipping.py"), "def route_parcel(parcel, depot):\n    \"\"\"Send a parcel to its nearest depot.\"\"\"\n    return depot.nearest(parcel.zip)\n").unwrap();
        let out = run_ok(ctxd().arg("index").arg(&src).arg("--db").arg(&db).arg("--json"));
        let summary: Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
        assert_eq!(summary["files_failed"].as_u64(), Some(0), "{name}: {summary}");
        assert_eq!(search(&db, "send a parcel to the nearest depot")[0], "shipping.py", "{name}");
        assert_eq!(search(&db, "parse the ledger invoice totals")[0], "billing.py", "{name}");
        // The new file's one chunk added, nothing duplicated (files the older build hashed or chunked
        // otherwise may be read again; their chunks are the same and replace themselves).
        let after = rows(&db);
        assert_eq!(after, before + 1, "{name}: {summary}");
        // Compacted, and still the same rows and answers.
        run_ok(ctxd().args(["compact", "--retain-secs", "0", "--db"]).arg(&db));
        assert_eq!(rows(&db), after, "{name}");
        assert_eq!(search(&db, "send a parcel to the nearest depot")[0], "shipping.py", "{name}");
        // Nothing indexed twice: a second run finds nothing to do.
        let out = run_ok(ctxd().arg("index").arg(&src).arg("--db").arg(&db).arg("--json"));
        let again: Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
        assert_eq!(again["files_indexed"].as_u64(), Some(0), "{name}: {again}");
        assert_eq!(rows(&db), after, "{name}");
    }
}
