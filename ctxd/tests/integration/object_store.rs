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

/// Runs `code` (Python with boto3 clients `s3` and `sqs` on the moto server) and returns its stdout.
fn aws(s3: &S3Server, code: &str) -> String {
    let script = format!(
        "import json, sys, boto3\nkw = dict(endpoint_url=sys.argv[1], aws_access_key_id='ctxd-test', \
         aws_secret_access_key='ctxd-test-secret', region_name='us-east-1')\n\
         s3, sqs = boto3.client('s3', **kw), boto3.client('sqs', **kw)\n{code}"
    );
    let out = python().arg("-c").arg(script).arg(&s3.endpoint).output().unwrap();
    assert!(out.status.success(), "boto3: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn s3_changes_arrive_by_notification_and_a_reconciling_listing_repairs_lost_events() {
    require_model();
    let s3 = S3Server::start();
    let tmp = tempfile::tempdir().unwrap();
    s3.ops(
        "corpus",
        &[
            ("bucket", "", ""),
            ("put", "src/notes.txt", "The quarterly llama census counted forty-two llamas in the valley.\n"),
        ],
    );
    // The bucket's events go to a queue (what `aws s3api put-bucket-notification-configuration` sets up).
    let notify = "arn = sqs.get_queue_attributes(QueueUrl=q, AttributeNames=['QueueArn'])['Attributes']['QueueArn']\n\
                  s3.put_bucket_notification_configuration(Bucket='corpus', NotificationConfiguration={'QueueConfigurations': \
                  [{'QueueArn': arn, 'Events': ['s3:ObjectCreated:*', 's3:ObjectRemoved:*']}]})\n";
    let queue = aws(&s3, &format!("q = sqs.create_queue(QueueName='ctxd-events')['QueueUrl']\n{notify}print(q)"));
    assert!(queue.starts_with("http"), "{queue}");
    let config = tmp.path().join("ctxd.toml");
    std::fs::write(
        &config,
        format!(
            "[source]\npoll_interval_secs = 1\nsqs_queue = \"{queue}\"\nreconcile_interval_secs = 6\nmirror_dir = \"{}\"\n",
            tmp.path().join("mirror").display()
        ),
    )
    .unwrap();
    let mut serve = ctxd();
    serve.args(["serve", "--config"]).arg(&config);
    s3.env(&mut serve);
    let daemon = Daemon::spawn(serve, "s3://corpus/src", &tmp.path().join("db"));
    daemon.wait_ready();
    let found = |q: &str| paths_of(&daemon.search(json!({"query": q, "mode": "bm25"})).1);
    assert_eq!(found("llama census"), ["notes.txt"]);
    let listings = || daemon.metric("ctxd_object_listings_total").unwrap_or(0.0);
    let events =
        |outcome: &str| daemon.metric(&format!("ctxd_object_events_total{{outcome=\"{outcome}\"}}")).unwrap_or(0.0);

    // A put and a delete arrive as events, without waiting for a listing.
    let started = std::time::Instant::now();
    s3.ops("corpus", &[("put", "src/late.md", "# Late arrival\n\nThe zeppelin docking procedure.\n")]);
    wait_for("the new object to be searchable", Duration::from_secs(30), || found("zeppelin docking") == ["late.md"]);
    eprintln!("event to searchable: {:.2} s", started.elapsed().as_secs_f64());
    s3.ops("corpus", &[("delete", "src/late.md", "")]);
    wait_for("the deleted object to leave the index", Duration::from_secs(30), || found("zeppelin docking").is_empty());
    assert!(events("applied") >= 2.0, "applied: {}", events("applied"));
    let downloads = daemon.metric("ctxd_object_downloads_total").unwrap_or(0.0);

    // A duplicate of an event already applied, and a late removal of an object that exists, change nothing.
    let etag = aws(&s3, "print(s3.head_object(Bucket='corpus', Key='src/notes.txt')['ETag'].strip('\"'))");
    let body = |name: &str, key: &str| {
        json!({"Records": [{"eventName": name, "s3": {"bucket": {"name": "corpus"},
            "object": {"key": key, "size": 67, "eTag": etag}}}]})
        .to_string()
    };
    for b in [body("ObjectCreated:Put", "src/notes.txt"), body("ObjectRemoved:Delete", "src/notes.txt")] {
        aws(&s3, &format!("sqs.send_message(QueueUrl='{queue}', MessageBody=json.dumps({b}))"));
    }
    wait_for("the duplicate and the late removal", Duration::from_secs(30), || {
        events("duplicate") >= 1.0 && events("stale") >= 1.0
    });
    assert_eq!(found("llama census"), ["notes.txt"], "a late removal does not remove an object that exists");
    assert_eq!(daemon.metric("ctxd_object_downloads_total").unwrap_or(0.0), downloads, "nothing downloaded again");

    // Events lost (the notification rule off, the queue purged): the reconciling listing repairs.
    aws(
        &s3,
        &format!(
            "s3.put_bucket_notification_configuration(Bucket='corpus', NotificationConfiguration={{}})\n\
         s3.put_object(Bucket='corpus', Key='src/quiet.md', Body=b'# Quiet\\n\\nThe walrus ledger balances.\\n')\n\
         sqs.purge_queue(QueueUrl='{queue}')"
        ),
    );
    let before = listings();
    wait_for("the reconciling listing to find the object", Duration::from_secs(30), || {
        found("walrus ledger") == ["quiet.md"]
    });
    assert!(listings() > before, "found by a listing");
    // Listings ran at start and every 6 s only, not every second (poll_interval_secs).
    let elapsed = started.elapsed().as_secs_f64();
    assert!(listings() <= 2.0 + elapsed / 6.0, "{} listings in {elapsed:.0} s", listings());
}
