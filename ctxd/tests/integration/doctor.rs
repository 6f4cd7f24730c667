//! `ctxd doctor`: a healthy set-up is all `ok`; a stale folder, a broken model file and a source
//! that does not open each give their finding with a fix, the last two a non-zero exit.

use serde_json::Value;

use crate::support::{copy_dir, ctxd, index_json, repo_root, Daemon};

#[test]
fn doctor_finds_a_stale_folder_a_broken_model_and_a_broken_source() {
    let tmp = tempfile::tempdir().unwrap();
    let (root, db) = (tmp.path().join("proj"), tmp.path().join("db"));
    copy_dir(&repo_root().join("examples/demo"), &root);
    index_json(&root, &db);
    let config = tmp.path().join("ctxd.toml");
    std::fs::write(&config, format!("[source]\nroot = {:?}\n[index]\ndb = {:?}\n", root, db)).unwrap();
    let doctor = |args: &[&str]| {
        let out = ctxd().arg("doctor").args(args).output().unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let cfg = config.to_str().unwrap();
    let (ok, out, err) = doctor(&["--config", cfg]);
    assert!(ok, "{out}{err}");
    for check in ["config", "cpu", "model", "index", "writer", "sources", "freshness"] {
        assert!(out.lines().any(|l| l.starts_with("ok") && l.contains(check)), "{check}: {out}");
    }
    assert!(out.contains("loads and embeds (384 dimensions)") && out.contains("nothing changed"), "{out}");
    // The lease is read, not taken: the last writer was the `ctxd index` above, gone now.
    assert!(out.contains("no writer runs (the last one was ctxd index (pid "), "{out}");

    // An edit not indexed yet: a warning with the way to fix it, exit 0.
    let file = root.join("lib/cache.py");
    std::fs::write(&file, std::fs::read_to_string(&file).unwrap() + "\n# edited\n").unwrap();
    let (ok, out, _) = doctor(&["--config", cfg]);
    assert!(ok, "{out}");
    let line = out.lines().find(|l| l.contains("freshness")).unwrap();
    assert!(line.starts_with("warn") && line.contains("1 modified, 0 added, 0 removed"), "{out}");
    assert!(out.contains("→ run `ctxd index --config FILE`"), "{out}");

    // A daemon writing the index: the kernel's lock table shows its lease held.
    let daemon = Daemon::start(&root, &db);
    daemon.wait_ready();
    let (ok, out, _) = doctor(&["--db", db.to_str().unwrap()]);
    assert!(ok && out.lines().any(|l| l.contains("writer") && l.contains("a writer runs: ctxd serve")), "{out}");
    drop(daemon);

    // A model whose tokenizer file is broken: BROKEN, the fix, exit 1 (JSON form).
    let home = std::path::PathBuf::from(std::env::var_os("HOME").unwrap());
    let model = tmp.path().join("model");
    copy_dir(&home.join(".cache/ctxd/models/sentence-transformers/all-MiniLM-L6-v2"), &model);
    std::fs::write(model.join("tokenizer.json"), "{ not a tokenizer").unwrap();
    let (ok, out, _) = doctor(&["--db", db.to_str().unwrap(), "--model", model.to_str().unwrap(), "--json"]);
    assert!(!ok, "{out}");
    let v: Value = serde_json::from_str(&out).unwrap();
    let finding = v["findings"].as_array().unwrap().iter().find(|f| f["check"] == "model").unwrap();
    assert_eq!(finding["status"], "broken", "{v}");
    assert!(finding["detail"].as_str().unwrap().contains("tokenizer"), "{v}");
    assert!(finding["fix"].as_str().unwrap().contains("fetch-model.sh"), "{v}");
    assert_eq!(v["broken"], 1, "only the model is broken: {v}");

    // A source that does not open: its finding names it, exit 1.
    let gone = tmp.path().join("no-such-folder");
    std::fs::write(&config, format!("[source]\nroot = {:?}\n[index]\ndb = {:?}\n", gone, db)).unwrap();
    let (ok, out, _) = doctor(&["--config", cfg]);
    assert!(!ok, "{out}");
    assert!(out.lines().any(|l| l.starts_with("BROKEN") && l.contains("no-such-folder")), "{out}");
}

#[test]
fn ls_files_explains_which_rule_skips_each_file() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("proj");
    copy_dir(&repo_root().join("examples/demo"), &root);
    std::fs::write(root.join("secrets.pem"), "-----BEGIN PRIVATE KEY-----\n").unwrap();
    std::fs::write(root.join("notes.txt"), "plain notes\n").unwrap();
    let list = |args: &[&str]| -> Value {
        let out = ctxd().arg("ls-files").arg(&root).args(args).arg("--json").output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let why = |v: &Value, path: &str| -> String {
        let f =
            v["files"].as_array().unwrap().iter().find(|f| f["path"] == path).unwrap_or_else(|| panic!("{path}: {v}"));
        f["why"].as_str().unwrap().to_string()
    };
    let v = list(&["--explain"]);
    assert_eq!(why(&v, "notes.txt"), "indexed");
    assert_eq!(why(&v, "secrets.pem"), "skipped: secret file name or extension");
    // An ignore rule added: the file now names the .gitignore line that skips it.
    std::fs::write(root.join(".gitignore"), "# local notes\nnotes.txt\n").unwrap();
    let v = list(&["--explain"]);
    let reason = why(&v, "notes.txt");
    assert!(reason.starts_with("skipped: ") && reason.ends_with(".gitignore:2: notes.txt"), "{reason}");
    // The same verdicts as indexing: every file listed as indexed is indexed, and only those.
    let plain = list(&[]);
    let listed: Vec<&str> = plain["files"].as_array().unwrap().iter().map(|f| f["path"].as_str().unwrap()).collect();
    let summary = index_json(&root, &tmp.path().join("db"));
    assert_eq!(summary["files_indexed"].as_u64().unwrap() as usize, listed.len(), "{summary} vs {listed:?}");
    assert!(!listed.contains(&"notes.txt") && !listed.contains(&"secrets.pem"), "{listed:?}");
}
