//! Indexing end to end: a folder indexed, searched, edited and deleted while a daemon serves it
//! (bad input skipped and counted); a SIGTERM mid-ingest then a restart equals an uninterrupted
//! run; bad arguments fail clearly; documents (PDF, notebooks, HTML) found by section, page and
//! cell; big files streamed in parts; unchanged chunks never embedded twice.

use std::time::Duration;

use serde_json::{json, Value};

use super::support::*;

#[test]
fn index_search_then_edit_and_delete_while_serving() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("repo");
    copy_dir(&repo_root().join("examples/demo"), &root);
    // Bad input that must be skipped and counted, never fatal.
    std::fs::write(root.join("blob.dat"), b"\x00\x01\x02binary\x00").unwrap();
    std::fs::write(root.join("notes.txt"), b"latin-1 caf\xe9 notes about the espresso machine").unwrap();
    std::fs::write(root.join(".env"), "SECRET_TOKEN=hunter2\n").unwrap();
    std::fs::create_dir_all(root.join("build")).unwrap();
    std::fs::write(root.join("build/generated.js"), "function generatedBundle() {}\n").unwrap();
    let db = tmp.path().join("db");

    let summary = index_json(&root, &db);
    assert_eq!(summary["files_indexed"], 8, "{summary}"); // 7 demo files + notes.txt
    assert_eq!(summary["files_skipped"], 1, "binary blob skipped: {summary}");
    assert_eq!(summary["files_failed"], 0, "{summary}");
    assert!(summary["chunks_written"].as_u64().unwrap() >= 15, "{summary}");
    let version = summary["index_version"].as_u64().unwrap();

    // A natural-language query finds the function by meaning (hybrid and vector).
    for mode in ["hybrid", "vector"] {
        let out = run_ok(
            ctxd()
                .args(["search", "check whether a password matches the stored hash", "--db"])
                .arg(&db)
                .args(["--k", "3", "--json", "--mode", mode]),
        );
        let v: Value = serde_json::from_str(&out).unwrap();
        let top = &v["results"][0];
        assert_eq!(top["path"], "src/auth.rs", "{mode}: {v}");
        assert_eq!(top["symbol"], "verify_password", "{mode}: {v}");
        let (s, e) = (top["start_line"].as_u64().unwrap(), top["end_line"].as_u64().unwrap());
        let text = std::fs::read_to_string(root.join("src/auth.rs")).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(top["content"].as_str().unwrap(), lines[s as usize - 1..e as usize].join("\n"), "exact line range");
    }
    // The symbol table knows the definition, with its signature.
    let v: Value =
        serde_json::from_str(&run_ok(ctxd().args(["symbols", "verify_password", "--json", "--db"]).arg(&db))).unwrap();
    let sym = &v["symbols"][0];
    assert_eq!(sym["path"], "src/auth.rs", "{v}");
    assert_eq!(sym["kind"], "function", "{v}");
    assert!(sym["signature"].as_str().unwrap().contains("fn verify_password("), "{v}");
    assert!(sym["qualified_name"].as_str().unwrap().ends_with("auth::verify_password"), "{v}");
    // BM25 finds an identifier; nothing from ignored or secret files is indexed.
    let v: Value = serde_json::from_str(&run_ok(
        ctxd().args(["search", "fetchUserProfile", "--mode", "bm25", "--json", "--db"]).arg(&db),
    ))
    .unwrap();
    assert_eq!(v["results"][0]["path"], "web/api.ts", "{v}");
    let v: Value = serde_json::from_str(&run_ok(
        ctxd().args(["search", "hunter2 generatedBundle", "--mode", "bm25", "--json", "--db"]).arg(&db),
    ))
    .unwrap();
    assert!(paths_of(&v).iter().all(|p| p != ".env" && !p.starts_with("build/")), "{v}");

    // Re-indexing unchanged input writes nothing.
    let again = index_json(&root, &db);
    assert_eq!(again["files_indexed"], 0, "{again}");
    assert_eq!(again["files_unchanged"], 8, "{again}");
    assert_eq!(again["index_version"].as_u64().unwrap(), version, "no new version: {again}");

    // Name this state: tagged snapshots can be searched after the index moved on.
    let out = run_ok(ctxd().args(["snapshot", "tag", "before-edits", "--db"]).arg(&db));
    assert!(out.contains(&format!("tagged version {version}")), "{out}");

    // The daemon picks up edits and deletions.
    let daemon = Daemon::start(&root, &db);
    daemon.wait_ready();
    assert_eq!(daemon.get("/healthz").status().as_u16(), 200);
    // The first scan's progress: every file it found is done (all unchanged since `ctxd index`).
    let status: Value = daemon.get("/v1/status").json().unwrap();
    let p = &status["indexing"];
    assert_eq!(p["scan_done"], true, "{status}");
    assert!(p["files_seen"].as_u64().unwrap() >= 9 && p["files_done"] == p["files_seen"], "{status}");
    assert_eq!(p["secs_left"], 0.0, "{status}");
    // The first scrape of a daemon that just became ready (nothing changed, no query yet) has
    // every series the dashboards and alert rules read, and a description for every metric.
    let first = daemon.get("/metrics").text().unwrap();
    for entry in std::fs::read_dir(repo_root().join("dashboards")).unwrap() {
        let used = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        for name in metric_names(&used) {
            let base = ["_bucket", "_sum", "_count"]
                .iter()
                .fold(name.clone(), |n, s| n.strip_suffix(s).map(str::to_string).unwrap_or(n));
            assert!(first.lines().any(|l| l.starts_with(&base)), "{base} is missing from the first scrape");
        }
    }
    for name in metric_names(&first) {
        let base = ["_bucket", "_sum", "_count"]
            .iter()
            .fold(name.clone(), |n, s| n.strip_suffix(s).map(str::to_string).unwrap_or(n));
        assert!(first.contains(&format!("# HELP {base} ")), "{base} has no description");
    }
    let mut cache = std::fs::read_to_string(root.join("lib/cache.py")).unwrap();
    cache.push_str("\n\ndef compute_fibonacci_numbers(count):\n    \"\"\"Returns the first `count` Fibonacci numbers.\"\"\"\n    numbers = [0, 1]\n    while len(numbers) < count:\n        numbers.append(numbers[-1] + numbers[-2])\n    return numbers[:count]\n");
    std::fs::write(root.join("lib/cache.py"), cache).unwrap();
    wait_for("the edit to be searchable", Duration::from_secs(120), || {
        let (status, v) = daemon.search(json!({"query": "fibonacci numbers sequence", "k": 3}));
        status == 200 && v["results"][0]["symbol"] == "compute_fibonacci_numbers"
    });
    let (_, v) = daemon.search(json!({"query": "fibonacci numbers sequence", "k": 1, "mode": "vector"}));
    assert_eq!(v["results"][0]["path"], "lib/cache.py", "{v}");
    // Every answer says which version it read, when that was committed, and (a daemon's writer
    // knows) how many files changed since: none once the edit is in.
    let stamp = &v["index"];
    assert!(stamp["version"].as_u64().unwrap() > version, "{v}");
    assert!(stamp["committed_at"].as_str().unwrap().ends_with('Z'), "{v}");
    assert_eq!(stamp["changed_since"], 0, "{v}");
    // (The version may move on between answers without a file changing: folding new rows into
    // the full-text index is a commit of its own.)
    let at_least_stamp = |v: &Value| v["index"]["version"].as_u64().unwrap() >= stamp["version"].as_u64().unwrap();
    let context: Value = daemon.post("/v1/context", &json!({"query": "fibonacci", "budget": 300})).json().unwrap();
    assert!(at_least_stamp(&context), "{context}");
    let located: Value = daemon.post("/v1/locate", &json!({"text": "fibonacci numbers are wrong"})).json().unwrap();
    assert!(at_least_stamp(&located), "{located}");
    assert_eq!(located["index"]["changed_since"], 0, "{located}");

    std::fs::remove_file(root.join("web/api.ts")).unwrap();
    wait_for("the deletion to be reflected", Duration::from_secs(120), || {
        let (_, v) = daemon.search(json!({"query": "fetchUserProfile user profile", "k": 20, "mode": "hybrid"}));
        v["results"].is_array() && !paths_of(&v).contains(&"web/api.ts".to_string())
    });

    // As of the tag (or its version number) the deleted file is still there, while ingestion goes on.
    for as_of in [json!("before-edits"), json!(version)] {
        let (status, v) = daemon.search(json!({"query": "fetchUserProfile", "k": 5, "mode": "bm25", "as_of": as_of}));
        assert_eq!(status, 200, "{v}");
        assert_eq!(v["version"], version, "{v}");
        assert!(paths_of(&v).contains(&"web/api.ts".to_string()), "as of {as_of}: {v}");
    }
    let out = run_ok(
        ctxd()
            .args(["search", "fetchUserProfile", "--mode", "bm25", "--json", "--as-of", "before-edits", "--db"])
            .arg(&db),
    );
    let cli: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(cli["results"][0]["path"], "web/api.ts", "{out}");
    // The CLI reads the tagged version; it runs no pipeline, so the files changed since are unknown.
    assert_eq!(cli["index"]["version"], version, "{out}");
    assert!(cli["index"].get("changed_since").is_none(), "{out}");
    let snaps: Value = serde_json::from_str(&run_ok(ctxd().args(["snapshots", "--json", "--db"]).arg(&db))).unwrap();
    let list = snaps["snapshots"].as_array().unwrap();
    let tagged = list.iter().find(|s| s["version"] == version).unwrap();
    assert_eq!(tagged["tags"], json!(["before-edits"]), "{snaps}");
    assert!(list.last().unwrap()["version"].as_u64().unwrap() > version, "the edits are newer versions");
    assert!(list.iter().all(|s| s["rows"].is_u64() && s["timestamp"].is_string()), "{snaps}");
    // Printing into a pipe closed by its reader (`ctxd snapshots --json | head -c0`) ends quietly.
    let mut child = ctxd()
        .args(["snapshots", "--json", "--db"])
        .arg(&db)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "a closed pipe is not a panic: {stderr}");
    assert!(out.status.code() != Some(101), "{:?}: {stderr}", out.status);
    // Arrow Flight with the real pyarrow client, and the table itself with lancedb/pylance.
    let rows = tagged["rows"].to_string();
    let out = python()
        .arg(repo_root().join("ctxd/tests/flight_client.py"))
        .args([daemon.flight.as_str(), &db.to_string_lossy(), &version.to_string(), &rows])
        .args(["verify_password", "src/auth.rs"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "flight/lance client failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let (status, v) = daemon.search(json!({"query": "x", "as_of": "no-such-tag"}));
    assert_eq!(status, 400, "{v}");
    assert!(v["error"].as_str().unwrap().contains("no tag 'no-such-tag'"), "{v}");

    // Malformed requests get a 400 with a JSON error; the daemon keeps serving.
    let (status, v) = daemon.search(json!({"query": "   "}));
    assert_eq!(status, 400);
    assert!(v["error"].as_str().unwrap().contains("empty"), "{v}");
    let (status, _) = daemon.search(json!({"query": "x", "k": 0}));
    assert_eq!(status, 400);
    let (status, _) = daemon.search(json!({"query": "x", "mode": "psychic"}));
    assert_eq!(status, 400);
    let resp = daemon
        .client
        .post(format!("{}/v1/search", daemon.base))
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .unwrap();
    assert_eq!(resp.status().as_u16(), 400);
    let (status, _) = daemon.search(json!({"query": "password hash"}));
    assert_eq!(status, 200);
    // A language filter is parsed at the edge: a misspelt one is refused with the labels.
    let (status, v) = daemon.search(json!({"query": "password hash", "language": "pyhton"}));
    assert_eq!(status, 400, "{v}");
    let msg = v["error"].as_str().unwrap_or_default();
    assert!(msg.contains("unknown language 'pyhton'") && msg.contains("python"), "{v}");
    let (status, v) = daemon.search(json!({"query": "password hash", "language": "Python", "mode": "bm25"}));
    assert_eq!(status, 200, "{v}");

    // Metrics: the per-stage contract and the index gauges.
    let text = daemon.get("/metrics").text().unwrap();
    for stage in ["load", "chunk", "embed", "upsert"] {
        for name in [
            "ctxd_stage_received_items_total",
            "ctxd_stage_queue_depth_items",
            "ctxd_stage_processing_duration_seconds_bucket",
        ] {
            assert!(text.contains(&format!("{name}{{stage=\"{stage}\"")), "missing {name} for {stage}");
        }
    }
    for name in [
        "ctxd_stage_blocked_seconds_total{stage=\"watch\"}",
        "ctxd_index_rows ",
        "ctxd_index_version ",
        "ctxd_embed_tokens_total ",
        "ctxd_query_duration_seconds_bucket",
    ] {
        assert!(text.contains(name), "missing {name}");
    }
    assert!(daemon.metric("ctxd_upsert_removed_files_total").unwrap_or(0.0) >= 1.0);
    // The fragments gauge follows the commits (the index was empty at start; no pass ran yet).
    assert!(daemon.metric("ctxd_index_fragments").unwrap_or(0.0) >= 1.0, "{text}");
    // Every metric the Grafana dashboards use exists in a real scrape.
    for entry in std::fs::read_dir(repo_root().join("dashboards")).unwrap() {
        let dash = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        for name in metric_names(&dash) {
            let base = ["_bucket", "_sum", "_count"]
                .iter()
                .fold(name.clone(), |n, s| n.strip_suffix(s).map(str::to_string).unwrap_or(n));
            assert!(text.lines().any(|l| l.starts_with(&base)), "dashboard metric {name} is not exported");
        }
    }

    let status = daemon.sigterm();
    assert!(status.success(), "clean exit on SIGTERM: {status:?}");

    // Compaction and cleanup keep the tagged snapshot (and every current row).
    let rows_before: Value =
        serde_json::from_str(&run_ok(ctxd().args(["snapshots", "--json", "--db"]).arg(&db))).unwrap();
    let latest_rows = rows_before["snapshots"].as_array().unwrap().last().unwrap()["rows"].clone();
    let out = run_ok(ctxd().args(["compact", "--retain-secs", "0", "--json", "--db"]).arg(&db));
    let report: Value = serde_json::from_str(&out).unwrap();
    assert!(report["versions_after"].as_u64() < report["versions_before"].as_u64(), "{report}");
    let snaps: Value = serde_json::from_str(&run_ok(ctxd().args(["snapshots", "--json", "--db"]).arg(&db))).unwrap();
    let list = snaps["snapshots"].as_array().unwrap();
    assert!(list.iter().any(|s| s["tags"] == json!(["before-edits"]) && s["version"] == version), "{snaps}");
    assert_eq!(list.last().unwrap()["rows"], latest_rows, "{snaps}");
    let out = run_ok(
        ctxd()
            .args(["search", "fetchUserProfile", "--mode", "bm25", "--json", "--as-of", "before-edits", "--db"])
            .arg(&db),
    );
    assert_eq!(serde_json::from_str::<Value>(&out).unwrap()["results"][0]["path"], "web/api.ts", "{out}");
}

#[test]
fn sigterm_mid_ingest_then_restart_equals_uninterrupted_run() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("corpus");
    write_corpus(&root, 240);
    let db_full = tmp.path().join("full");
    let full = index_json(&root, &db_full);
    assert_eq!(full["files_indexed"], 240, "{full}");
    let want = fingerprint(&db_full);

    // Small queues so that most of the corpus is still unread when SIGTERM arrives.
    let config = tmp.path().join("small-queues.toml");
    std::fs::write(
        &config,
        "[pipeline]\nload = { capacity = 2, workers = 1 }\nchunk = { capacity = 2, workers = 1 }\nembed = { capacity = 2, workers = 1 }\nupsert = { capacity = 2, workers = 1 }\nembed_batch_tokens = 512\ncommit_interval_ms = 200\n",
    )
    .unwrap();
    let db = tmp.path().join("interrupted");
    let daemon = Daemon::start_with(&root, &db, &["serve", "--config", config.to_str().unwrap()]);
    wait_for("a first commit", Duration::from_secs(300), || {
        daemon.metric("ctxd_index_commits_total").unwrap_or(0.0) >= 1.0
    });
    let status = daemon.sigterm();
    assert!(status.success(), "clean exit on SIGTERM mid-ingest: {status:?}");
    let partial = fingerprint(&db);
    assert!(!partial.is_empty(), "the drain committed what was in flight");
    assert!(
        partial.len() < want.len(),
        "the run was interrupted mid-ingest ({} of {} chunks)",
        partial.len(),
        want.len()
    );

    let resumed = index_json(&root, &db);
    assert!(resumed["files_unchanged"].as_u64().unwrap() > 0, "committed files are not redone: {resumed}");
    assert_eq!(fingerprint(&db), want, "same index as the uninterrupted run");

    // SIGKILL (no drain at all) at several points of one ingestion, restarting each time:
    // the final index is still exactly the clean run's (no duplicates, nothing missing).
    let db = tmp.path().join("killed");
    let mut progress = Vec::new();
    for kill_after_commits in [1.0, 3.0, 2.0] {
        let daemon = Daemon::start_with(&root, &db, &["serve", "--config", config.to_str().unwrap()]);
        wait_for("commits before the kill", Duration::from_secs(300), || {
            daemon.metric("ctxd_index_commits_total").unwrap_or(0.0) >= kill_after_commits
        });
        drop(daemon); // SIGKILL
        progress.push(fingerprint(&db).len());
    }
    assert!(progress.windows(2).all(|w| w[0] <= w[1]), "restarts resume, never lose committed chunks: {progress:?}");
    assert!(*progress.last().unwrap() < want.len(), "killed before the end: {progress:?}");
    let resumed = index_json(&root, &db);
    assert!(resumed["files_unchanged"].as_u64().unwrap() > 0, "{resumed}");
    assert_eq!(fingerprint(&db), want, "same index as the uninterrupted run after three SIGKILLs");
}

#[test]
fn index_shows_its_progress_on_stderr_and_keeps_stdout_for_the_summary() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("many");
    std::fs::create_dir_all(&root).unwrap();
    for i in 0..300 {
        let body = format!(
            "def handler_{i}(request):\n    \"\"\"Handle request number {i}.\"\"\"\n    return request.get({i})\n"
        );
        std::fs::write(root.join(format!("mod_{i}.py")), body).unwrap();
    }
    let out = ctxd()
        .arg("index")
        .arg(&root)
        .arg("--db")
        .arg(tmp.path().join("db"))
        .arg("--json")
        .env("CTXD_PROGRESS_MS", "50")
        .env("CTXD_LOG", "info")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let summary: Value = serde_json::from_slice(&out.stdout).expect("stdout is the JSON summary alone");
    assert_eq!(summary["files_indexed"], 300, "{summary}");
    let err = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = err.lines().filter(|l| l.contains("indexing: ")).collect();
    assert!(!lines.is_empty(), "no progress line in: {err}");
    let last = lines.last().unwrap();
    assert!(last.contains(" files") && last.contains(" chunks") && last.contains("chunks/s"), "{last}");
}

#[test]
fn bad_arguments_fail_clearly_without_side_effects() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("db");
    let out = ctxd().arg("index").arg(tmp.path().join("missing")).arg("--db").arg(&db).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not a readable directory") && err.contains("missing"), "{err}");
    assert!(!db.exists(), "no index directory is created for a bad root");
    let out = ctxd().args(["search", "anything", "--db"]).arg(&db).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no index at"), "search on a missing index names it");
    let bad = tmp.path().join("bad.toml");
    std::fs::write(&bad, "[source]\nroot = \".\"\nbogus = 1\n").unwrap();
    let out = ctxd().args(["config", "validate"]).arg(&bad).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("bogus"));
    std::fs::write(&bad, "[source]\nroot = \".\"\n[server]\nmcp_tools = \"search,grep\"\n").unwrap();
    let out = ctxd().args(["config", "validate"]).arg(&bad).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("server.mcp_tools") && err.contains("'grep'") && err.contains("minimal"), "{err}");
    std::fs::write(&bad, "[source]\nroot = \".\"\n[locate]\nmodel = \"handset\"\n").unwrap();
    let out = ctxd().args(["config", "validate"]).arg(&bad).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("locate.model") && err.contains("'handset'") && err.contains("fitted or hand"), "{err}");
    // A word outside a flag's closed set is refused as the flag is read, naming the valid ones.
    let out = ctxd().args(["search", "x", "--db"]).arg(&db).args(["--device", "gpu"]).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--device") && err.contains("'gpu' is not auto, cpu or cuda:N"), "{err}");
    // A GPU asked for by a binary built without CUDA: one sentence saying how to build one.
    if !cfg!(feature = "cuda") {
        let root = repo_root().join("examples/demo");
        let out = ctxd().arg("index").arg(&root).arg("--db").arg(&db).args(["--device", "cuda:0"]).output().unwrap();
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("cuda:0") && err.contains("scripts/build-cuda.sh") && err.contains("\"auto\""), "{err}");
    }
}

#[test]
fn documents_are_found_by_section_page_and_cell() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("docs");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(
        root.join("guide.md"),
        "# Operations guide\n\nHow to run the service.\n\n## Proxy timeout\n\nRequests through the corporate \
         proxy are cut after thirty seconds; raise `upstream_wait` for slow mirrors.\n\n## Backups\n\nSnapshots are \
         copied to cold storage every night.\n",
    )
    .unwrap();
    std::fs::write(
        root.join("report.pdf"),
        ctxd_stages::load::simple_pdf(&[
            "Quarterly revenue grew in all regions",
            "Pelican migration routes shifted north",
        ]),
    )
    .unwrap();
    let nb = json!({
        "nbformat": 4, "nbformat_minor": 5, "metadata": {},
        "cells": [
            {"cell_type": "markdown", "metadata": {}, "source": ["# Model fit\n"]},
            {"cell_type": "code", "metadata": {}, "execution_count": 1, "outputs": [],
             "source": ["import matplotlib.pyplot as plt\n", "plt.hist(residuals, bins=40)\n", "plt.title('residual histogram')"]}
        ]
    });
    std::fs::write(root.join("analysis.ipynb"), nb.to_string()).unwrap();
    std::fs::write(root.join("broken.ipynb"), "{\"cells\": [").unwrap();
    std::fs::write(root.join("cities.csv"), "city,country\nLyon,France\nOsaka,Japan\n").unwrap();
    let db = tmp.path().join("db");
    let summary = index_json(&root, &db);
    assert_eq!(summary["files_indexed"], 4, "{summary}");
    assert_eq!(summary["files_skipped"], 1, "corrupt notebook skipped and counted: {summary}");

    let top = |query: &str| -> Value {
        let out = run_ok(ctxd().args(["search", query, "--k", "3", "--json", "--db"]).arg(&db));
        let v: Value = serde_json::from_str(&out).unwrap();
        v["results"][0].clone()
    };
    let md = top("proxy timeout");
    assert_eq!(md["path"], "guide.md", "{md}");
    assert_eq!(md["symbol"], "Operations guide > Proxy timeout", "{md}");
    assert_eq!((md["start_line"].as_u64(), md["end_line"].as_u64()), (Some(5), Some(8)), "{md}");
    let pdf = top("pelican migration");
    assert_eq!(pdf["path"], "report.pdf", "{pdf}");
    assert_eq!(pdf["start_line"], 2, "cites page 2: {pdf}");
    assert_eq!(pdf["symbol"], "page 2", "{pdf}");
    let cell = top("plot a histogram of the residuals");
    assert_eq!(cell["path"], "analysis.ipynb", "{cell}");
    assert_eq!(cell["start_line"], 2, "cites cell 2: {cell}");
    // Full-text only: a log indexed without vectors is found by BM25, never by vector search.
    let logs = tmp.path().join("logs");
    std::fs::create_dir_all(&logs).unwrap();
    let log: String = (0..500).map(|i| format!("2026-11-22T06:{:02}:00Z worker-{i} heartbeat ok\n", i % 60)).collect();
    std::fs::write(logs.join("app.log"), format!("{log}2026-11-22T07:00:00Z worker-7 panicked: disk quota exceeded\n"))
        .unwrap();
    let log_db = tmp.path().join("log-db");
    let out = run_ok(ctxd().arg("index").arg(&logs).arg("--db").arg(&log_db).args(["--no-embed", "--json"]));
    let summary: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(summary["files_indexed"], 1, "{summary}");
    let bm25: Value = serde_json::from_str(&run_ok(
        ctxd().args(["search", "disk quota exceeded", "--mode", "bm25", "--json", "--db"]).arg(&log_db),
    ))
    .unwrap();
    assert!(bm25["results"][0]["content"].as_str().unwrap().contains("worker-7 panicked"), "{bm25}");
    let vector: Value = serde_json::from_str(&run_ok(
        ctxd().args(["search", "disk quota exceeded", "--mode", "vector", "--json", "--db"]).arg(&log_db),
    ))
    .unwrap();
    assert!(vector["results"].as_array().unwrap().is_empty(), "unembedded rows are not vector hits: {vector}");

    let csv = top("Osaka");
    assert_eq!(csv["path"], "cities.csv", "{csv}");
    assert!(csv["content"].as_str().unwrap().starts_with("city,country\n"), "{csv}");
}

/// A file over the streaming threshold is chunked and committed in parts, all of it searchable
/// with exact line numbers; a changed version replaces the old one completely.
#[test]
fn big_files_are_streamed_in_parts() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("logs");
    std::fs::create_dir_all(&root).unwrap();
    let line = |i: usize| format!("2026-11-22T06:00:{:02}Z request {i} served in {} ms", i % 60, i % 97);
    let mut text: String = (1..=20_000).map(|i| line(i) + "\n").collect();
    text.push_str("2026-11-22T07:00:00Z kernel: zebra-stripe allocator exhausted\n");
    std::fs::write(root.join("server.log"), &text).unwrap();
    let db = tmp.path().join("db");
    let cfg = tmp.path().join("stream.toml");
    std::fs::write(&cfg, "[source]\nstream_threshold_bytes = 65536\nstream_block_bytes = 65536\n").unwrap();
    let index = |extra: &[&str]| -> Value {
        let out = run_ok(
            ctxd().arg("index").arg(&root).arg("--db").arg(&db).arg("--config").arg(&cfg).args(extra).arg("--json"),
        );
        serde_json::from_str(out.trim()).unwrap()
    };
    let summary = index(&["--no-embed"]);
    assert_eq!(summary["files_indexed"], 1, "one file, however many parts: {summary}");
    assert!(summary["commits"].as_u64().unwrap() >= 1, "{summary}");
    let hit = |q: &str| -> Value {
        let out = run_ok(ctxd().args(["search", q, "--mode", "bm25", "--k", "1", "--json", "--db"]).arg(&db));
        serde_json::from_str::<Value>(&out).unwrap()["results"][0].clone()
    };
    let top = hit("zebra-stripe allocator exhausted");
    assert_eq!(top["path"], "server.log", "{top}");
    let (s, e) = (top["start_line"].as_u64().unwrap() as usize, top["end_line"].as_u64().unwrap() as usize);
    let lines: Vec<&str> = text.lines().collect();
    assert!(e == 20_001 && top["content"].as_str().unwrap() == lines[s - 1..e].join("\n"), "exact lines: {top}");
    // Unchanged: nothing to do. Changed: the new version replaces every part of the old one.
    assert_eq!(index(&["--no-embed"])["files_unchanged"], 1);
    std::fs::write(root.join("server.log"), text.replace("zebra-stripe", "quagga-stripe")).unwrap();
    assert_eq!(index(&["--no-embed"])["files_indexed"], 1);
    assert_eq!(hit("quagga-stripe allocator")["end_line"], 20_001);
    let old = hit("zebra-stripe");
    assert!(old.is_null() || !old["content"].as_str().unwrap().contains("zebra"), "old version gone: {old}");
}

#[test]
fn unchanged_chunks_are_never_embedded_twice() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("src");
    write_corpus(&root, 20);
    let db = tmp.path().join("db");
    let first = index_json(&root, &db);
    let computed = first["chunks_embedded"].as_u64().unwrap();
    assert!(computed >= 20, "{first}");
    assert_eq!(first["chunks_reused"], 0, "{first}");
    // Every file of the corpus has the same shape, so the same number of chunks.
    assert_eq!(computed % 20, 0, "{first}");
    let per_file = computed / 20;
    // A rename, a copy and a one-function edit. The path is part of the embedded text, so the
    // moved and the copied file are embedded again (a vector of the old path's text would not
    // be the vector of the new one); of the edited file only the edited chunk is.
    std::fs::rename(root.join("pkg3/m3.py"), root.join("pkg3/moved_m3.py")).unwrap();
    std::fs::copy(root.join("pkg4/m4.py"), root.join("pkg4/copy_of_m4.py")).unwrap();
    let edited = std::fs::read_to_string(root.join("pkg5/m5.py")).unwrap();
    std::fs::write(root.join("pkg5/m5.py"), edited.replace("self.count += value", "self.count -= value * 2")).unwrap();
    let second = index_json(&root, &db);
    assert_eq!(second["files_indexed"], 3, "{second}");
    assert_eq!(second["files_removed"], 1, "{second}");
    assert_eq!(second["chunks_embedded"], 2 * per_file + 1, "moved + copied file, one edited chunk: {second}");
    assert_eq!(second["chunks_reused"], per_file - 1, "the edited file's other chunks: {second}");
    // Incremental equals fresh: every chunk holds the vector a fresh index of the tree holds.
    let fresh = tmp.path().join("fresh");
    index_json(&root, &fresh);
    assert_same_vectors(&vectors_by_chunk(&db), &vectors_by_chunk(&fresh), "incremental vs fresh index");
    // The moved file is found at its new path, by meaning (its reused vectors are in place).
    let out = run_ok(
        ctxd().args(["search", "sort every invoice in items by factor", "--mode", "vector", "--json", "--db"]).arg(&db),
    );
    let v: Value = serde_json::from_str(&out).unwrap();
    assert!(paths_of(&v).contains(&"pkg3/moved_m3.py".to_string()), "{v}");
    assert!(!paths_of(&v).contains(&"pkg3/m3.py".to_string()), "{v}");
}
