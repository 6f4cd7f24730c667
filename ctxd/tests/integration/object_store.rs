//! An `s3://` source into an `s3://` index on moto: a listing diff indexes what changed, and a
//! watching daemon follows the bucket.

use std::time::Duration;

use serde_json::{json, Value};

use super::support::*;

#[test]
fn s3_source_into_s3_index_then_a_listing_diff_and_a_watching_daemon() {
    let s3 = S3Server::start();
    let tmp = tempfile::tempdir().unwrap();
    s3.ops(
        "corpus",
        &[
            ("bucket", "", ""),
            ("put", "src/auth/login.py", "def verify_password(user, password):\n    \"\"\"Check a password against the stored bcrypt hash.\"\"\"\n    return bcrypt.checkpw(password, user.hash)\n"),
            ("put", "src/docs/deploy.md", "# Deploying\n\n## Rolling restart\n\nDrain each replica before restarting the kubernetes pods one by one.\n"),
            ("put", "src/notes.txt", "The quarterly llama census counted forty-two llamas in the valley.\n"),
            ("put", "src/logo.png", "not really a png"),
            ("put", "elsewhere/skip.md", "# outside the watched prefix\n"),
        ],
    );
    // The mirror of the bucket goes to the test's temp dir; listings every second for the daemon.
    let config = tmp.path().join("ctxd.toml");
    std::fs::write(&config, "[source]\npoll_interval_secs = 1\nmirror_dir = \"mirror\"\n").unwrap();
    let config = config.to_str().unwrap().to_string();
    let cmd = |args: &[&str]| {
        let mut c = ctxd();
        c.args(args);
        s3.env(&mut c);
        c
    };
    let db = "s3://corpus/index";
    let index_args = ["index", "s3://corpus/src", "--db", db, "--config", &config, "--json"];
    let first: Value = serde_json::from_str(run_ok(&mut cmd(&index_args)).trim()).unwrap();
    assert_eq!(first["files_indexed"], 3, "three text objects under the prefix: {first}");
    let search = |q: &str| -> Value {
        let out = run_ok(&mut cmd(&["search", q, "--db", db, "--mode", "bm25", "--json"]));
        serde_json::from_str(&out).unwrap()
    };
    assert_eq!(paths_of(&search("llama census")).first().map(String::as_str), Some("notes.txt"));
    assert!(paths_of(&search("bcrypt password")).contains(&"auth/login.py".to_string()));
    // The index lives in the bucket: LanceDB versions there, listed like a local one.
    let snaps: Value = serde_json::from_str(&run_ok(&mut cmd(&["snapshots", "--db", db, "--json"]))).unwrap();
    assert!(!snaps["snapshots"].as_array().unwrap().is_empty(), "{snaps}");

    // Edit, delete and add objects: the second run applies exactly the listing diff.
    s3.ops(
        "corpus",
        &[
            ("put", "src/notes.txt", "The annual alpaca survey replaced the llama census.\n"),
            ("delete", "src/docs/deploy.md", ""),
            ("put", "src/new/cache.rs", "/// Evicts the least recently used entry.\npub fn evict_lru(cache: &mut Cache) {\n    cache.pop_oldest();\n}\n"),
        ],
    );
    let second: Value = serde_json::from_str(run_ok(&mut cmd(&index_args)).trim()).unwrap();
    assert_eq!(second["files_indexed"], 2, "{second}");
    assert_eq!(second["files_removed"], 1, "{second}");
    assert_eq!(second["files_unchanged"], 1, "{second}");
    assert_eq!(paths_of(&search("alpaca survey")).first().map(String::as_str), Some("notes.txt"));
    assert!(!paths_of(&search("kubernetes replica restart")).contains(&"docs/deploy.md".to_string()));
    assert!(paths_of(&search("evict least recently used")).contains(&"new/cache.rs".to_string()));

    assert!(tmp.path().join("mirror/new/cache.rs").is_file(), "objects are mirrored where configured");

    // A daemon on the bucket (local index) follows new objects by listing every second.
    let local_db = tmp.path().join("local-db");
    let mut serve = cmd(&["serve", "--config"]);
    serve.arg(&config);
    let daemon = Daemon::spawn(serve, "s3://corpus/src", &local_db);
    daemon.wait_ready();
    let (status, found) = daemon.search(json!({"query": "evict least recently used", "mode": "bm25"}));
    assert_eq!(status, 200, "{found}");
    assert!(paths_of(&found).contains(&"new/cache.rs".to_string()), "{found}");
    s3.ops("corpus", &[("put", "src/late.md", "# Late arrival\n\nThe zeppelin docking procedure.\n")]);
    wait_for("the new object to be searchable", Duration::from_secs(60), || {
        let (_, v) = daemon.search(json!({"query": "zeppelin docking", "mode": "bm25"}));
        paths_of(&v).first().map(String::as_str) == Some("late.md")
    });
    s3.ops("corpus", &[("delete", "src/late.md", "")]);
    wait_for("the deleted object to leave the index", Duration::from_secs(60), || {
        let (_, v) = daemon.search(json!({"query": "zeppelin docking", "mode": "bm25"}));
        !paths_of(&v).contains(&"late.md".to_string())
    });
}
