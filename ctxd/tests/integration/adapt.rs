//! The query adapter end to end: a git work tree whose history speaks the project's own jargon
//! (code names the base model cannot know: "the wombat" is the CSV reader), indexed by the real
//! model; `ctxd index` fits the adapter at its end, `ctxd adapt` reports it, and `ctxd locate`'s
//! vector signal alone ranks the file a jargon-worded text is about higher with it than without;
//! a daemon fits it in its background, at its CPU share, answering throughout, and stops a fit
//! cleanly at shutdown.

use std::path::Path;

use serde_json::Value;

use std::time::Duration;

use serde_json::json;

use super::support::{ctxd, git, run_ok, wait_for, Daemon};

/// (file, code name, code): eight unrelated modules, each with the project's name for it.
const MODULES: [(&str, &str, &str); 8] = [
    (
        "src/csv_reader.py",
        "wombat",
        "def read_rows(text):\n    return [line.split(',') for line in text.splitlines()]\n",
    ),
    ("src/mailer.py", "narwhal", "def send_mail(smtp, to, body):\n    smtp.sendmail('noreply', to, body)\n"),
    ("src/images.py", "pangolin", "def resize(img, w, h):\n    return img.resize((w, h))\n"),
    (
        "src/passwords.py",
        "axolotl",
        "def hash_password(pw, salt):\n    import hashlib\n    return hashlib.sha256(salt + pw).hexdigest()\n",
    ),
    ("src/compress.py", "quokka", "def gzip_bytes(data):\n    import gzip\n    return gzip.compress(data)\n"),
    ("src/html.py", "capybara", "def render_page(title, body):\n    return f'<html><h1>{title}</h1>{body}</html>'\n"),
    ("src/cache.py", "okapi", "def memo(f):\n    seen = {}\n    return lambda x: seen.setdefault(x, f(x))\n"),
    ("src/logs.py", "tapir", "def log_line(level, msg):\n    print(f'[{level}] {msg}')\n"),
];

const TEMPLATES: [&str; 10] = [
    "fix the {} when the input is empty",
    "speed up the {} on large inputs",
    "{}: handle unicode correctly",
    "make the {} thread safe",
    "the {} leaked memory, fixed",
    "refactor the {} for readability",
    "add retries to the {}",
    "{}: better error messages",
    "the {} crashed on windows",
    "document how the {} is configured",
];

/// The answer of a vector-signal-only `locate` of `text`.
fn vector_only(db: &Path, text: &str, extra: &[&str]) -> Value {
    let without = "paths,frames,symbols,messages,bm25,definitions,graph,recency,cochange,commits,demote";
    let out =
        run_ok(ctxd().args(["locate", text, "--json", "--k", "8", "--without", without, "--db"]).arg(db).args(extra));
    serde_json::from_str(&out).unwrap()
}

/// A git work tree at `root`: the eight modules, then 96 commits, each touching the module its
/// message names by code name only (97 commits in all).
fn jargon_repo(root: &Path) {
    std::fs::create_dir_all(root.join("src")).unwrap();
    git(root, &["init", "-q", "-b", "main"]);
    for (path, _, code) in MODULES {
        std::fs::write(root.join(path), code).unwrap();
    }
    git(root, &["add", "."]);
    git(root, &["commit", "-q", "-m", "initial import of every module"]);
    // 96 commits, each touching the module its message names by code name only.
    for i in 0..96 {
        let (path, name, _) = MODULES[i % MODULES.len()];
        let message = TEMPLATES[(i / MODULES.len()) % TEMPLATES.len()].replace("{}", name);
        let mut text = std::fs::read_to_string(root.join(path)).unwrap();
        text.push_str(&format!("# change {i}\n"));
        std::fs::write(root.join(path), text).unwrap();
        git(root, &["commit", "-q", "-am", &message]);
    }
}

#[test]
fn an_adapter_fitted_on_the_history_ranks_a_jargon_worded_text_s_file_higher() {
    super::support::require_model();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("proj");
    jargon_repo(&root);
    let db = dir.path().join("db");
    let indexed = ctxd().arg("index").arg(&root).arg("--db").arg(&db).output().unwrap();
    assert!(indexed.status.success(), "{}", String::from_utf8_lossy(&indexed.stderr));
    let log = String::from_utf8_lossy(&indexed.stderr);
    assert!(log.contains("query adapter in use"), "ctxd index fits the adapter at its end: {log}");
    // `ctxd adapt` fits it again on demand and says how it was judged.
    let report: Value = serde_json::from_str(&run_ok(ctxd().args(["adapt", "--json", "--db"]).arg(&db))).unwrap();
    let sel = &report["selection"];
    assert!(sel["fit"].is_object(), "{report}");
    assert!(sel["adapted_mrr"].as_f64().unwrap() > sel["base_mrr"].as_f64().unwrap(), "{report}");
    assert_eq!(report["history_commits"].as_u64(), Some(97), "{report}");
    assert!(report.get("shuffled").is_none(), "{report}");
    // The shuffled control is stored when asked for, judged on its own shuffled commits.
    let control = run_ok(ctxd().args(["adapt", "--json", "--shuffled", "1", "--db"]).arg(&db));
    let control: Value = serde_json::from_str(&control).unwrap();
    assert_eq!(control["shuffled"].as_u64(), Some(1), "{control}");
    assert!(control["selection"]["adapted_mrr"].as_f64().unwrap() < sel["adapted_mrr"].as_f64().unwrap(), "{control}");
    run_ok(ctxd().args(["adapt", "--db"]).arg(&db));
    // A new text in the project's words, the vector signal alone: with the adapter the module it
    // names ranks higher than with the base model's query vector, for most code names.
    let (mut better, mut base_total, mut adapted_total) = (0, 0, 0);
    for (path, name, _) in MODULES {
        let text = format!("the {name} is broken again since the last release");
        let position = |v: &Value| {
            v["files"].as_array().unwrap().iter().position(|f| f["path"].as_str() == Some(path)).unwrap_or(8)
        };
        let adapted = vector_only(&db, &text, &[]);
        let base = vector_only(&db, &text, &["--no-adapter"]);
        assert_eq!(adapted["adapted"], Value::Bool(true), "{adapted}");
        assert!(base.get("adapted").is_none(), "{base}");
        let (a, b) = (position(&adapted), position(&base));
        adapted_total += a;
        base_total += b;
        better += usize::from(a < b || a == 0);
    }
    assert!(adapted_total < base_total, "mean rank with the adapter {adapted_total}/8, without {base_total}/8");
    assert!(better >= 6, "{better} of 8 code names ranked higher with the adapter");
}

/// Commits a change to the wombat (the CSV reader) with `message`.
fn commit_to_the_wombat(root: &Path, message: &str) {
    let path = root.join("src/csv_reader.py");
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str(&format!("# {message}\n"));
    std::fs::write(&path, text).unwrap();
    git(root, &["commit", "-q", "-am", message]);
}

/// A jargon-worded localization over HTTP; it must answer.
fn ask(d: &Daemon) -> Value {
    let body = json!({"text": "the wombat is broken again since the last release", "k": 5});
    let resp = d.post("/v1/locate", &body);
    assert_eq!(resp.status().as_u16(), 200, "locate answers while the adapter is fitted");
    resp.json().unwrap()
}

#[test]
fn a_daemon_fits_the_adapter_in_its_background_at_its_share_answering_throughout() {
    super::support::require_model();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("proj");
    jargon_repo(&root);
    let db = dir.path().join("db");
    let mut cmd = ctxd();
    cmd.arg("serve").env("CTXD_INDEX_ADAPT_CPU_PERCENT", "10").env("CTXD_INDEX_ADAPT_INTERVAL_SECS", "1");
    let daemon = Daemon::spawn(cmd, &root, &db);
    daemon.wait_ready();
    let kept = |d: &Daemon| d.metric("ctxd_adapt_runs_total{outcome=\"kept\"}").unwrap_or(0.0);
    // The first fit runs once the scan and the history are in; locate answers meanwhile.
    wait_for("the first background fit", Duration::from_secs(300), || {
        ask(&daemon);
        kept(&daemon) >= 1.0
    });
    assert_eq!(daemon.metric("ctxd_adapt_in_use_bool"), Some(1.0));
    wait_for("the adapter in use", Duration::from_secs(10), || ask(&daemon)["adapted"] == Value::Bool(true));
    // The status names it, with how it was judged.
    let status: Value = daemon.get("/v1/status").json().unwrap();
    let adapter = &status["query_adapter"];
    assert_eq!(adapter["in_use"], Value::Bool(true), "{status}");
    assert!(adapter["report"]["commits"].as_u64().unwrap() >= 30, "{status}");
    assert!(adapter["report"]["adapted_mrr"].as_f64() > adapter["report"]["base_mrr"].as_f64(), "{status}");
    assert!(adapter["report"].get("control").is_none(), "{status}");
    // A request can leave it out.
    let body = json!({"text": "the wombat is broken again since the last release", "no_adapter": true});
    let base: Value = daemon.post("/v1/locate", &body).json().unwrap();
    assert!(base["files"].is_array() && base.get("adapted").is_none(), "{base}");
    // It worked at most its share of the time (10 %), resting the rest.
    let busy = daemon.metric("ctxd_adapt_busy_seconds_total").unwrap();
    let wall = daemon.metric("ctxd_adapt_run_duration_seconds_sum").unwrap();
    assert!(busy > 0.0 && busy <= 0.1 * wall + 0.05, "worked {busy:.2} s of {wall:.2} s");
    // A commit moves the history: fitted again, and every answer meanwhile uses the older fit.
    commit_to_the_wombat(&root, "wombat: skip blank lines at the end of the input");
    let fitted = |d: &Daemon| kept(d) + d.metric("ctxd_adapt_runs_total{outcome=\"refused\"}").unwrap_or(0.0);
    wait_for("a second background fit", Duration::from_secs(300), || {
        let answer = ask(&daemon);
        assert_eq!(answer["adapted"], Value::Bool(true), "{answer}");
        fitted(&daemon) >= 2.0
    });
    // Shutdown during a fit: it stops between steps, stores nothing, and the daemon exits cleanly.
    commit_to_the_wombat(&root, "wombat: accept a semicolon as the separator");
    wait_for("a third fit to start", Duration::from_secs(300), || {
        daemon.metric("ctxd_adapt_running_bool") == Some(1.0)
    });
    let log = daemon.log.clone();
    let status = daemon.sigterm();
    assert!(status.success(), "{status:?}");
    let lines = log.lock().unwrap().join("\n");
    // Stopped between steps — or, if the fit stored its result in the moment before the signal
    // (a race this test cannot close), finished: never cut off inside a write.
    let stopped = lines.contains("the background fit stopped at shutdown; nothing stored");
    assert!(stopped || lines.matches("fitted in the background").count() == 3, "{lines}");
}
