//! One writer, many readers: `ctxd serve --role writer` ingests into an index in a bucket
//! (moto on 127.0.0.1) and holds the writer lease; two `--role reader` processes follow its
//! commits and answer exactly as the writer does; a second writer and a `ctxd index` are
//! refused with the lease named; the writer killed with SIGKILL is replaced once its lease
//! expires, and nothing is lost or doubled. Then a distributed re-embedding: three
//! `ctxd reembed --shard I/3` processes (one crashes and is run again alone) and one
//! `--commit`; the writer and both readers follow the model switch and still agree. On a local
//! index the lock file does the same.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::support::{ctxd, paths_of, run_ok, wait_for, Daemon, S3Server, SECOND_MODEL};

const DB: &str = "s3://team/index";

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// A search's answer reduced to what must agree between processes: (path, lines, score).
fn answer(d: &Daemon, body: Value) -> Vec<(String, i64, i64, String)> {
    let (status, v) = d.search(body);
    assert_eq!(status, 200, "{v}");
    v["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let score = r["score"].as_f64().unwrap_or(0.0);
            (
                r["path"].as_str().unwrap_or("").to_string(),
                r["start_line"].as_i64().unwrap_or(0),
                r["end_line"].as_i64().unwrap_or(0),
                format!("{score:.4}"),
            )
        })
        .collect()
}

fn version(d: &Daemon) -> u64 {
    let v: Value = d.get("/v1/status").json().unwrap();
    v["version"].as_u64().unwrap()
}

/// Runs `cmd` and expects it to fail soon; returns its stderr.
fn refused(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "expected a refusal, got success: {err}");
    err
}

#[test]
fn a_writer_and_two_readers_on_a_bucket_agree_and_the_lease_passes_on_after_a_crash() {
    let s3 = S3Server::start();
    s3.ops("team", &[("bucket", "", "")]);
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("src");
    write(&root, "billing/invoice.py", "def total_invoice(lines):\n    \"\"\"Sum the invoice lines with tax.\"\"\"\n    return sum(l.amount * 1.2 for l in lines)\n");
    write(&root, "docs/deploy.md", "# Deploying\n\nDrain each replica before restarting the pods one by one.\n");
    let config = tmp.path().join("ctxd.toml");
    std::fs::write(&config, "[index]\nlease_ttl_secs = 4\n[server]\nreader_poll_ms = 200\n").unwrap();
    let serve = |role: &str, watch: bool| {
        let mut c = ctxd();
        c.args(["serve", "--role", role, "--db", DB, "--listen", "127.0.0.1:0", "--flight-listen", "127.0.0.1:0"]);
        c.arg("--config").arg(&config);
        if watch {
            c.arg("--watch").arg(&root);
        }
        s3.env(&mut c);
        c
    };
    let writer = Daemon::spawn_raw(&mut serve("writer", true));
    writer.wait_ready();
    let readers = [Daemon::spawn_raw(&mut serve("reader", false)), Daemon::spawn_raw(&mut serve("reader", false))];
    for r in &readers {
        r.wait_ready();
        assert!(r.metric("ctxd_index_reader_lag_seconds").is_some(), "a reader reports its lag");
    }

    // After each commit the readers reach the writer's version and answer the same.
    let queries = [
        json!({"query": "sum invoice lines with tax"}),
        json!({"query": "restart pods replica", "mode": "bm25"}),
        json!({"query": "walrus migration schedule", "mode": "hybrid"}),
    ];
    for (i, word) in ["walrus", "narwhal", "axolotl"].iter().enumerate() {
        write(
            &root,
            &format!("notes/n{i}.md"),
            &format!("# {word} migration schedule\n\nThe {word} moves north in spring.\n"),
        );
        let file = format!("notes/n{i}.md");
        wait_for("the writer to commit the new file", Duration::from_secs(60), || {
            paths_of(&writer.search(json!({"query": word, "mode": "bm25"})).1).contains(&file)
        });
        // The writer may fold the new rows into the full-text index right after the commit (a
        // version of its own, which changes BM25 scores): compare once its version stays put.
        let mut v = version(&writer);
        loop {
            std::thread::sleep(Duration::from_millis(1500));
            let now = version(&writer);
            if now == v {
                break;
            }
            v = now;
        }
        let started = Instant::now();
        for r in &readers {
            wait_for("a reader to reach the writer's version", Duration::from_secs(20), || version(r) >= v);
        }
        eprintln!("readers at version {v} {:?} after the writer", started.elapsed());
        for q in &queries {
            let expected = answer(&writer, q.clone());
            assert!(!expected.is_empty(), "{q}");
            for r in &readers {
                assert_eq!(answer(r, q.clone()), expected, "reader and writer differ on {q}");
            }
        }
    }

    // A second writer, and a one-shot index, are refused with the lease and its holder named.
    let err = refused(&mut serve("writer", true));
    assert!(err.contains("writer lock s3://team/index/_ctxd/writer.lease") && err.contains("ctxd serve (pid"), "{err}");
    let mut index = ctxd();
    index.arg("index").arg(&root).args(["--db", DB]);
    s3.env(&mut index);
    assert!(refused(&mut index).contains("already being written by ctxd serve"));
    let snaps = |label: &str| -> u64 {
        let mut c = ctxd();
        c.args(["snapshots", "--db", DB, "--json"]);
        s3.env(&mut c);
        let v: Value = serde_json::from_str(&run_ok(&mut c)).unwrap();
        let rows = v["snapshots"].as_array().unwrap().last().unwrap()["rows"].as_u64().unwrap();
        eprintln!("{label}: {rows} rows");
        rows
    };
    let before = snaps("before the crash");

    // SIGKILL: the lease stays until it expires; a successor is refused meanwhile, then takes over.
    drop(writer);
    let killed = Instant::now();
    let err = refused(&mut serve("writer", true));
    assert!(err.contains("expires in"), "{err}");
    write(&root, "notes/late.md", "# okapi census\n\nThe okapi census was written while no writer ran.\n");
    // A StatefulSet retries until the lease expired; here: wait for the expiry.
    std::thread::sleep(Duration::from_secs(4).saturating_sub(killed.elapsed()) + Duration::from_millis(500));
    let writer = Daemon::spawn_raw(&mut serve("writer", true));
    writer.wait_ready();
    eprintln!("took over {:?} after the kill", killed.elapsed());
    for r in &readers {
        wait_for("readers to see the file written meanwhile", Duration::from_secs(60), || {
            paths_of(&r.search(json!({"query": "okapi census", "mode": "bm25"})).1)
                .contains(&"notes/late.md".to_string())
        });
    }
    let after = snaps("after the takeover");
    assert!(after > before, "the late file added rows ({before} -> {after})");
    // Nothing doubled: a restart over unchanged files commits no new rows.
    let again = writer.sigterm();
    assert!(again.success());
    let writer = Daemon::spawn_raw(&mut serve("writer", true));
    writer.wait_ready();
    assert_eq!(snaps("after a clean restart"), after);

    // Distributed re-embedding while the writer and readers serve: shard 2 crashes (killed before
    // it recorded anything) and the commit names it; run alone again, then one commit publishes.
    let reembed = |args: &[&str]| {
        let mut c = ctxd();
        c.args(["reembed", "--json", "--block-rows", "4", "--model", SECOND_MODEL, "--db", DB]).args(args);
        s3.env(&mut c);
        c
    };
    let mut crashed = reembed(&["--shard", "2/3"]).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    let _ = crashed.kill();
    let _ = crashed.wait();
    let shards: Vec<_> = ["0/3", "1/3"]
        .iter()
        .map(|s| reembed(&["--shard", s]).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap())
        .collect();
    let mut staged = 0;
    for child in shards {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        eprintln!("shard: {report}");
        staged += report["embedded"].as_u64().unwrap();
    }
    let err = refused(&mut reembed(&["--commit"]));
    assert!(err.contains("shard(s) 2/3") && err.contains("--shard 2/3"), "{err}");
    let status = |d: &Daemon| d.get("/v1/status").json::<Value>().unwrap();
    assert_eq!(status(&readers[0])["model"], "sentence-transformers/all-MiniLM-L6-v2", "nothing switched yet");
    assert!(status(&readers[0])["lease"].is_null(), "a reader holds no lease");
    let lease = status(&writer)["lease"].as_str().unwrap_or_default().to_string();
    assert!(lease.starts_with("s3://team/"), "the writer names its lease: {lease}");
    let last: Value = serde_json::from_str(&run_ok(&mut reembed(&["--shard", "2/3"]))).unwrap();
    staged += last["embedded"].as_u64().unwrap();
    let report: Value = serde_json::from_str(&run_ok(&mut reembed(&["--commit"]))).unwrap();
    eprintln!("commit: {report}");
    assert_eq!(report["shards"], 3, "{report}");
    assert_eq!(report["staged_rows"].as_u64(), Some(staged), "every shard's rows in the one commit: {report}");
    assert_eq!(report["rows"].as_u64(), Some(after), "{report}");
    assert_eq!(report["switched"], true, "{report}");
    let all = [&writer, &readers[0], &readers[1]];
    for d in all {
        wait_for("the model switch to be followed", Duration::from_secs(120), || status(d)["model"] == SECOND_MODEL);
    }
    let v = version(&writer);
    for r in &readers {
        wait_for("a reader to reach the writer's version", Duration::from_secs(20), || version(r) >= v);
    }
    for q in &queries {
        let expected = answer(&writer, q.clone());
        assert!(!expected.is_empty(), "{q}");
        for r in &readers {
            assert_eq!(answer(r, q.clone()), expected, "after the switch, reader and writer differ on {q}");
        }
    }
}

#[test]
fn a_local_index_has_one_writer() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("src");
    write(&root, "a.md", "# alpha\n\nThe first file.\n");
    let db = tmp.path().join("db");
    let daemon = Daemon::start(&root, &db);
    daemon.wait_ready();
    let err = refused(ctxd().arg("index").arg(&root).arg("--db").arg(&db));
    assert!(err.contains(".ctxd-writer.lock") && err.contains("ctxd serve (pid"), "{err}");
    drop(daemon); // SIGKILL: the kernel drops the lock with the process
    let out = run_ok(ctxd().arg("index").arg(&root).arg("--db").arg(&db).arg("--json"));
    assert!(out.contains("\"files_unchanged\":1"), "{out}");
}
