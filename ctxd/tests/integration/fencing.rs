//! Fencing: a writer on an index in a bucket (moto on 127.0.0.1) is paused with SIGSTOP past
//! its lease's TTL while files change; a successor (`ctxd index`) takes the expired lease,
//! commits the changes and gives the lease back; the paused writer is resumed with SIGCONT. It
//! must write nothing — not one object under the index's prefix — and exit with the lease named
//! (code 75); the index is then what a clean run over the same files makes. `benches/faults.py
//! fencing` repeats this 20 times.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::support::*;

const BUCKET: &str = "fence";
const DB: &str = "s3://fence/index";

fn signal(daemon: &Daemon, sig: &str) {
    let pid = daemon.child.id().to_string();
    assert!(Command::new("kill").args([&format!("-{sig}"), &pid]).status().unwrap().success());
}

/// The version the daemon serves, once it has stayed put for 1.5 s (folds after a commit are
/// versions of their own).
fn settled_version(d: &Daemon) -> u64 {
    let version = || d.get("/v1/status").json::<Value>().unwrap()["version"].as_u64().unwrap_or(0);
    let mut v = version();
    loop {
        std::thread::sleep(Duration::from_millis(1500));
        let now = version();
        if now == v {
            return v;
        }
        v = now;
    }
}

fn index_once(s3: &S3Server, root: &Path, db: &str, config: &Path) -> Value {
    let mut c = ctxd();
    c.arg("index").arg(root).args(["--db", db, "--json", "--config"]).arg(config);
    s3.env(&mut c);
    serde_json::from_str(run_ok(&mut c).trim()).unwrap()
}

#[test]
fn a_writer_paused_past_its_lease_commits_nothing_after_a_successor_took_over() {
    let s3 = S3Server::start();
    s3.ops(BUCKET, &[("bucket", "", "")]);
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("src");
    write_corpus(&root, 14);
    let config = tmp.path().join("ctxd.toml");
    std::fs::write(&config, "[index]\nlease_ttl_secs = 3\n").unwrap();
    let mut serve = ctxd();
    serve.args(["serve", "--role", "writer", "--db", DB, "--listen", "127.0.0.1:0", "--flight-listen", "127.0.0.1:0"]);
    serve.arg("--config").arg(&config).arg("--watch").arg(&root);
    s3.env(&mut serve);
    let mut stale = Daemon::spawn_raw(&mut serve);
    stale.wait_ready();
    settled_version(&stale);

    // Paused; meanwhile files change (the kernel queues the watcher's events for it) and the
    // lease expires.
    signal(&stale, "STOP");
    let paused = Instant::now();
    std::fs::write(
        root.join("pkg0/m0.py"),
        "def okapi_census(herd):\n    \"\"\"Count the okapis.\"\"\"\n    return len(herd)\n",
    )
    .unwrap();
    std::fs::write(root.join("notes.md"), "# Zeppelin docking\n\nMoor the zeppelin to the mast at dawn.\n").unwrap();
    std::fs::remove_file(root.join("pkg1/m1.py")).unwrap();
    std::thread::sleep(Duration::from_secs(3).saturating_sub(paused.elapsed()) + Duration::from_millis(1500));

    // The successor takes the expired lease, commits the changes and gives the lease back.
    let took = index_once(&s3, &root, DB, &config);
    assert_eq!((took["files_indexed"].as_u64(), took["files_removed"].as_u64()), (Some(2), Some(1)), "{took}");
    let written = s3.objects(BUCKET, "index/");
    assert!(written.iter().any(|k| k.contains("chunks")), "{written:?}");

    // Resumed: it must find its lease gone before any write, and stop.
    signal(&stale, "CONT");
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = stale.child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "the paused writer did not stop after it resumed");
        std::thread::sleep(Duration::from_millis(100));
    };
    let log = stale.log.lock().unwrap().join("\n");
    assert_eq!(status.code(), Some(75), "{log}");
    assert!(log.contains("s3://fence/index/_ctxd/writer.lease was taken by another writer"), "{log}");
    // Give anything it might still have sent time to land, then compare every object.
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(s3.objects(BUCKET, "index/"), written, "the stale writer wrote to the index");

    // The index is a clean run's: nothing left to do over the same files, the same rows as a
    // fresh index of them, and the changes searchable.
    let again = index_once(&s3, &root, DB, &config);
    assert_eq!(again["files_indexed"], 0, "{again}");
    assert_eq!(again["files_removed"], 0, "{again}");
    let clean = index_json(&root, &tmp.path().join("clean"));
    assert_eq!(again["index_rows"], clean["index_rows"], "{again} vs a clean run {clean}");
    let mut read = ctxd();
    read.args(["serve", "--role", "reader", "--db", DB, "--listen", "127.0.0.1:0", "--flight-listen", "127.0.0.1:0"]);
    s3.env(&mut read);
    let reader = Daemon::spawn_raw(&mut read);
    reader.wait_ready();
    let (_, found) = reader.search(json!({"query": "okapi census", "mode": "bm25"}));
    assert_eq!(paths_of(&found).first().map(String::as_str), Some("pkg0/m0.py"), "{found}");
    let (_, gone) = reader.search(json!({"query": "render_invoice_1", "mode": "bm25"}));
    assert!(!paths_of(&gone).contains(&"pkg1/m1.py".to_string()), "{gone}");
}
