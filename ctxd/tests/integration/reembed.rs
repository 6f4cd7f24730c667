//! Re-embedding with a second model: resumable, a serving daemon follows the switch, the new
//! table holds the vectors a fresh index of the new model holds, and an index an older ctxd
//! wrote is re-embedded once on open.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::{json, Value};

use super::support::*;

#[test]
fn reembed_with_a_second_model_is_resumable_and_a_serving_daemon_follows_the_switch() {
    let models = std::env::var_os("CTXD_MODEL_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/ctxd/models"));
    assert!(
        models.join(SECOND_MODEL).join("model.safetensors").is_file(),
        "second model missing: run scripts/fetch-second-model.sh (scripts/test.sh does)"
    );
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("repo");
    copy_dir(&repo_root().join("examples/demo"), &root);
    write_corpus(&root.join("corpus"), 150);
    let db = tmp.path().join("db");
    let summary = index_json(&root, &db);
    let rows = summary["index_rows"].as_u64().unwrap();
    assert!(rows > 300, "{summary}");

    let daemon = Daemon::start(&root, &db);
    daemon.wait_ready();
    let status: Value = daemon.get("/v1/status").json().unwrap();
    assert_eq!(status["model"], "sentence-transformers/all-MiniLM-L6-v2", "{status}");
    assert_eq!(status["table"], "chunks", "{status}");
    let query = json!({"query": "check whether a password matches the stored hash", "k": 3, "mode": "vector"});
    let (code, before) = daemon.search(query.clone());
    assert_eq!(code, 200, "{before}");
    assert_eq!(before["results"][0]["path"], "src/auth.rs", "{before}");

    // 1. Interrupted: the job is killed once it has committed rows to the new table.
    let target = db.join("chunks__sentence-transformers-paraphrase-minilm-l3-v2.lance");
    let mut job = ctxd()
        .args(["reembed", "--json", "--no-switch", "--block-rows", "16", "--model", SECOND_MODEL, "--db"])
        .arg(&db)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for("first re-embedded rows", Duration::from_secs(300), || {
        count_versions(&target) >= 3 || job.try_wait().unwrap().is_some()
    });
    let _ = job.kill();
    let _ = job.wait();
    // Not switched: the daemon still answers from the first table and model.
    let status: Value = daemon.get("/v1/status").json().unwrap();
    assert_eq!(status["table"], "chunks", "{status}");

    // An edit while the job runs: the daemon commits it to the old table; the job catches up.
    let auth = root.join("src/auth.rs");
    let mut text = std::fs::read_to_string(&auth).unwrap();
    text.push_str("\n/// Rotates the signing keys of the session vault every night.\npub fn rotate_vault_keys() {}\n");
    std::fs::write(&auth, text).unwrap();
    wait_for("edit indexed", Duration::from_secs(60), || {
        let (_, v) = daemon.search(json!({"query": "rotate_vault_keys", "k": 3, "mode": "bm25"}));
        v["results"].as_array().is_some_and(|r| !r.is_empty())
    });

    // 2. Resumed and switched, with searches answered all along.
    let db2 = db.clone();
    let resumed = std::thread::spawn(move || reembed_json(&db2, SECOND_MODEL));
    let mut answered = 0;
    while !resumed.is_finished() {
        let (code, v) = daemon.search(query.clone());
        assert_eq!(code, 200, "search during the job: {v}");
        assert!(!v["results"].as_array().unwrap().is_empty(), "search during the job: {v}");
        answered += 1;
        std::thread::sleep(Duration::from_millis(100));
    }
    let report = resumed.join().unwrap();
    eprintln!("resumed run: {report}");
    assert!(answered > 0);
    let (done, embedded, total) =
        (report["resumed"].as_u64().unwrap(), report["embedded"].as_u64().unwrap(), report["rows"].as_u64().unwrap());
    assert!(done > 0, "the second run resumed: {report}");
    assert!(embedded > 0, "{report}");
    assert_eq!(report["switched"], true, "{report}");
    assert_eq!(report["to_model"], SECOND_MODEL, "{report}");
    assert_eq!(report["from_table"], "chunks", "{report}");
    assert!(total >= rows, "{report}");

    // The daemon follows: new model and table for queries, still finding the right code.
    wait_for("daemon switched", Duration::from_secs(120), || {
        daemon.get("/v1/status").json::<Value>().is_ok_and(|s| s["model"] == SECOND_MODEL)
    });
    let status: Value = daemon.get("/v1/status").json().unwrap();
    assert_eq!(status["table"], "chunks__sentence-transformers-paraphrase-minilm-l3-v2", "{status}");
    assert_eq!(daemon.metric("ctxd_pipeline_model_switches_total"), Some(1.0));
    let (code, after) = daemon.search(query.clone());
    assert_eq!(code, 200, "{after}");
    assert_eq!(after["results"][0]["path"], "src/auth.rs", "{after}");
    let (s0, s1) = (before["results"][0]["score"].as_f64().unwrap(), after["results"][0]["score"].as_f64().unwrap());
    assert!((s0 - s1).abs() > 1e-3, "another model gives other similarities: {s0} vs {s1}");
    // The edit made during the job is in the new table.
    let (_, v) = daemon.search(json!({"query": "rotate the vault signing keys", "k": 5, "mode": "vector"}));
    assert!(v["results"].as_array().unwrap().iter().any(|r| r["symbol"] == "rotate_vault_keys"), "{v}");
    // The daemon now writes to the new table: an edit after the switch is found there.
    std::fs::write(
        root.join("src/ledger.rs"),
        "/// Reconciles the quarterly ledger totals.\npub fn reconcile_ledger() {}\n",
    )
    .unwrap();
    wait_for("edit after the switch", Duration::from_secs(60), || {
        let (_, v) = daemon.search(json!({"query": "reconcile_ledger", "k": 3, "mode": "bm25"}));
        paths_of(&v).iter().any(|p| p == "src/ledger.rs")
    });
    // One-shot commands follow the pointer too (and load the new model from it).
    let v: Value = serde_json::from_str(&run_ok(
        ctxd().args(["search", "reconcile the quarterly ledger", "--mode", "vector", "--json", "--db"]).arg(&db),
    ))
    .unwrap();
    assert_eq!(v["results"][0]["path"], "src/ledger.rs", "{v}");
    assert_eq!(daemon.sigterm().code(), Some(0));

    // 3. Rollback: the first table is found again; only what changed since is embedded.
    let back = reembed_json(&db, "sentence-transformers/all-MiniLM-L6-v2");
    assert_eq!(back["to_table"], "chunks", "{back}");
    assert!(back["resumed"].as_u64().unwrap() > back["embedded"].as_u64().unwrap(), "{back}");
    assert!(back["embedded"].as_u64().unwrap() >= 1, "the ledger file was embedded: {back}");
    let v: Value = serde_json::from_str(&run_ok(
        ctxd().args(["search", "reconcile the quarterly ledger", "--mode", "vector", "--json", "--db"]).arg(&db),
    ))
    .unwrap();
    assert_eq!(v["results"][0]["path"], "src/ledger.rs", "{v}");
    // Re-embedding into the model in use is refused clearly.
    let out = ctxd()
        .args(["reembed", "--model", "sentence-transformers/all-MiniLM-L6-v2", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("already uses model"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `ctxd index --model B` and `ctxd index` then `ctxd reembed --model B` hold the same vectors:
/// a re-embedding job embeds the text the indexer embeds.
#[test]
fn reembed_holds_the_vectors_a_fresh_index_of_the_new_model_holds() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("repo");
    copy_dir(&repo_root().join("examples/demo"), &root);
    write_corpus(&root.join("corpus"), 12);
    let fresh = tmp.path().join("fresh");
    run_ok(ctxd().arg("index").arg(&root).arg("--db").arg(&fresh).args(["--model", SECOND_MODEL]));
    let moved = tmp.path().join("moved");
    index_json(&root, &moved);
    let report = reembed_json(&moved, SECOND_MODEL);
    assert_eq!(report["switched"], true, "{report}");
    assert_same_vectors(
        &vectors_by_chunk(&fresh),
        &vectors_by_chunk(&moved),
        "fresh index of B vs index re-embedded to B",
    );
}

/// An index written by an older ctxd (no `embed_key` column; vectors cached by content alone)
/// is re-embedded once when a writer opens it, says so, and then equals a fresh index.
#[test]
fn an_index_of_an_older_ctxd_is_reembedded_once_on_open() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("repo");
    copy_dir(&repo_root().join("examples/demo"), &root);
    let db = tmp.path().join("db");
    index_json(&root, &db);
    // What an older ctxd left: the same table without the key column.
    let script = "import lance, sys\nds = lance.dataset(sys.argv[1])\nds.drop_columns(['embed_key'])\n\
                  assert 'embed_key' not in lance.dataset(sys.argv[1]).schema.names";
    let out = python().arg("-c").arg(script).arg(db.join("chunks.lance")).output().unwrap();
    assert!(out.status.success(), "pylance: {}", String::from_utf8_lossy(&out.stderr));
    // Readers still search it.
    let v: Value = serde_json::from_str(&run_ok(
        ctxd().args(["search", "check whether a password matches the stored hash", "--json", "--db"]).arg(&db),
    ))
    .unwrap();
    assert_eq!(v["results"][0]["path"], "src/auth.rs", "{v}");
    // A writer migrates it, with a log line saying so.
    let out = ctxd().arg("index").arg(&root).arg("--db").arg(&db).arg("--json").output().unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{log}");
    assert!(log.contains("written by an older ctxd") && log.contains("index migrated"), "{log}");
    let fresh = tmp.path().join("fresh");
    index_json(&root, &fresh);
    assert_same_vectors(&vectors_by_chunk(&fresh), &vectors_by_chunk(&db), "migrated vs fresh index");
    // Indexing and the re-embedding job both store each chunk's late-interaction codes: every row
    // of the fresh index and of the table the job filled has them.
    let filled = |db: &Path| late_codes_by_table(db).into_iter().any(|(_, rows, late)| rows > 0 && late == rows);
    assert!(filled(&fresh), "fresh index: {:?}", late_codes_by_table(&fresh));
    assert!(filled(&db), "re-embedded index: {:?}", late_codes_by_table(&db));
    // Once: the next writer finds a keyed table.
    let out = ctxd().arg("index").arg(&root).arg("--db").arg(&db).output().unwrap();
    assert!(!String::from_utf8_lossy(&out.stderr).contains("written by an older ctxd"));
}
