//! Git sources end to end: two repositories (one a shallow bare clone) with two refs each and
//! a folder source in one database, read from the object databases with gitoxide — no
//! checkout. Queries narrow by `source` and `ref` (CLI, HTTP, MCP) and every result carries
//! both; a submodule, a Git LFS pointer, a symlink, a ref that does not exist and a missing
//! blob are each skipped and counted while the rest is indexed; a commit to a watched branch is
//! searchable after the next poll, and a deleted file leaves that branch only.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};

use super::support::{ctxd, git, run_ok, Daemon};

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// `proj`: `main` and `release/1.0` share the invoice module and the guide; the release branch
/// has its own tax rule, main a new exporter; plus a submodule, an LFS pointer and a symlink.
fn project(base: &Path) -> std::path::PathBuf {
    let repo = base.join("proj");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    write(&repo, "src/invoice.py", "def total_invoice(lines):\n    \"\"\"Sums the invoice lines with their tax.\"\"\"\n    return sum(l.amount for l in lines)\n");
    write(
        &repo,
        "src/tax.py",
        "def tax_rate(country):\n    \"\"\"The flat tax rate of a country.\"\"\"\n    return 0.2\n",
    );
    write(&repo, "docs/guide.md", "# Guide\nHow invoices are totalled and taxed.\n");
    write(&repo, "data/weights.csv", "version https://git-lfs.github.com/spec/v1\noid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\nsize 12345\n");
    std::os::unix::fs::symlink("src/invoice.py", repo.join("invoice_link.py")).unwrap();
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "first"]);
    let first = git(&repo, &["rev-parse", "HEAD"]);
    // A submodule entry (a gitlink; its repository is not needed to record it).
    git(&repo, &["update-index", "--add", "--cacheinfo", &format!("160000,{first},vendor/lib")]);
    git(&repo, &["commit", "-q", "-m", "vendor lib"]);
    git(&repo, &["branch", "release/1.0"]);
    git(&repo, &["checkout", "-q", "release/1.0"]);
    write(&repo, "src/tax.py", "def tax_rate(country):\n    \"\"\"The zebracalc graduated tax rule of the release branch.\"\"\"\n    return 0.1 if country == 'xx' else 0.2\n");
    git(&repo, &["commit", "-q", "-am", "release tax rule"]);
    git(&repo, &["checkout", "-q", "main"]);
    write(&repo, "src/export.py", "def export_quokka(invoices):\n    \"\"\"Writes the quokkaexport file of every invoice.\"\"\"\n    return [i.id for i in invoices]\n");
    write(
        &repo,
        "src/broken.py",
        "def soon_missing():\n    \"\"\"A blob this test deletes from the object database.\"\"\"\n",
    );
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "exporter"]);
    repo
}

fn config(base: &Path) -> std::path::PathBuf {
    let text = r#"
[[source]]
name = "proj"
git = "proj"
refs = ["main", "release/*", "no-such-branch"]
mirror_dir = "mirror/proj"
# Polled when the webhook says so.
poll_interval_secs = 3600

[[source]]
name = "shallow"
git = "shallow.git"
refs = ["main", "release/1.0"]
mirror_dir = "mirror/shallow"
poll_interval_secs = 1

[[source]]
name = "notes"
root = "notes"

# The clone's work tree as a folder: its files as they are on disk, with the history of HEAD.
[[source]]
name = "work"
root = "proj"
include = ["src/**"]

[index]
db = "db"

[server]
webhook_secret_file = "webhook-secret"
"#;
    std::fs::write(base.join("webhook-secret"), "a-long-webhook-secret-0123456789\n").unwrap();
    let path = base.join("ctxd.toml");
    std::fs::write(&path, text).unwrap();
    path
}

fn field(results: &Value, key: &str) -> Vec<String> {
    let mut out: Vec<String> = results["results"]
        .as_array()
        .unwrap_or_else(|| panic!("no results: {results}"))
        .iter()
        .map(|r| r[key].as_str().unwrap_or("").to_string())
        .collect();
    out.sort();
    out.dedup();
    out
}

fn paths(results: &Value) -> Vec<String> {
    results["results"].as_array().unwrap().iter().map(|r| r["path"].as_str().unwrap().to_string()).collect()
}

#[test]
fn git_sources_are_read_by_ref_from_the_object_database() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path();
    let repo = project(base);
    // A shallow bare clone of both branches: the second git source.
    let url = format!("file://{}", repo.display());
    let out = Command::new("git")
        .args(["clone", "-q", "--bare", "--depth", "1", "--no-single-branch", &url])
        .arg(base.join("shallow.git"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // A blob missing from `proj`'s object database (a damaged repository).
    let broken = git(&repo, &["rev-parse", "main:src/broken.py"]);
    std::fs::remove_file(repo.join(".git/objects").join(&broken[..2]).join(&broken[2..])).unwrap();
    write(base, "notes/meeting.md", "# Meeting\nWe agreed the invoice total includes tax.\n");
    let cfg = config(base);
    let db = base.join("db");

    let out = ctxd().args(["index", "--config"]).arg(&cfg).arg("--json").output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let summary: Value = serde_json::from_str(String::from_utf8_lossy(&out.stdout).trim()).unwrap();
    // proj: main 4 (invoice, tax, guide, export; broken's blob is gone), release 1 (its tax
    // rule: the invoice module and the guide are main's, read through release's overlay);
    // shallow: main 5 (with broken), release 1; notes 1; work 4 (src/: the work tree still has
    // broken.py).
    assert_eq!(summary["files_indexed"], 16, "{summary}\n{stderr}");
    for line in [
        "no-such-branch' names no branch",
        "vendor/lib is a submodule",
        "is a Git LFS pointer",
        "src/broken.py",
        "a shallow repository",
    ] {
        assert!(stderr.contains(line), "no log line with '{line}':\n{stderr}");
    }
    // The mirror holds each blob once: the invoice module and the guide are shared by 4 views.
    let blobs = walk_files(&base.join("mirror/proj"));
    assert_eq!(blobs, 5, "invoice, guide, two tax rules, export");

    let search = |extra: &[&str]| -> Value {
        let out = run_ok(ctxd().args(["search", "--db"]).arg(&db).args(["--json", "--k", "20"]).args(extra));
        serde_json::from_str(out.trim()).unwrap()
    };
    let release = search(&["tax rate rule", "--source", "proj", "--ref", "release/1.0"]);
    assert_eq!(field(&release, "source"), ["proj"], "{release}");
    assert_eq!(field(&release, "ref"), ["release/1.0"], "{release}");
    assert!(paths(&release).iter().all(|p| p.starts_with("proj@release~1.0/")), "{release}");
    assert!(release["results"].to_string().contains("zebracalc"), "{release}");
    let main = search(&["tax rate rule", "--source", "proj", "--ref", "main"]);
    assert_eq!(field(&main, "ref"), ["main"]);
    assert!(!main["results"].to_string().contains("zebracalc"), "main has the flat rule: {main}");
    let all = search(&["invoice total", "--mode", "bm25"]);
    assert_eq!(field(&all, "source"), ["notes", "proj", "shallow", "work"], "{all}");
    // A file the same on both refs is stored once (main's rows) and read by both views.
    let shared = search(&["sums the invoice lines", "--source", "proj", "--mode", "bm25"]);
    let invoice: Vec<String> = paths(&shared).into_iter().filter(|p| p.ends_with("src/invoice.py")).collect();
    assert_eq!(invoice, ["proj@main/src/invoice.py"], "one row set for every ref: {shared}");
    let shared = search(&["sums the invoice lines", "--source", "proj", "--ref", "release/1.0", "--mode", "bm25"]);
    assert_eq!(paths(&shared)[0], "proj@release~1.0/src/invoice.py", "{shared}");
    assert_eq!(field(&shared, "ref"), ["release/1.0"], "{shared}");

    // History: per ref, and for the folder that is a work tree (its HEAD, main).
    let history = |extra: &[&str]| -> Value {
        let out = run_ok(ctxd().args(["history", "--db"]).arg(&db).arg("--json").args(extra));
        serde_json::from_str(out.trim()).unwrap()
    };
    let h = history(&["src/tax.py", "--source", "proj", "--ref", "release/1.0"]);
    let files = h["files"].as_array().unwrap();
    assert_eq!(files.len(), 1, "{h}");
    assert_eq!(
        (files[0]["path"].as_str(), files[0]["ref"].as_str()),
        (Some("proj@release~1.0/src/tax.py"), Some("release/1.0"))
    );
    let summaries: Vec<&str> =
        files[0]["commits"].as_array().unwrap().iter().map(|c| c["summary"].as_str().unwrap()).collect();
    assert_eq!(summaries, ["release tax rule", "first"], "{h}");
    let every_view = history(&["src/invoice.py"]);
    let views: Vec<&str> =
        every_view["files"].as_array().unwrap().iter().map(|f| f["path"].as_str().unwrap()).collect();
    assert_eq!(
        views,
        [
            "proj@main/src/invoice.py",
            "proj@release~1.0/src/invoice.py",
            "shallow@main/src/invoice.py",
            "shallow@release~1.0/src/invoice.py",
            "work/src/invoice.py"
        ],
        "{every_view}"
    );
    let work = history(&["work/src/export.py"]);
    assert_eq!(work["files"][0]["commits"][0]["summary"], "exporter", "{work}");
    let cochanged = work["files"][0]["cochanged"].as_array().unwrap();
    assert!(
        cochanged.iter().any(|c| c[0] == "work/src/broken.py"),
        "export.py and broken.py came in one commit: {work}"
    );
    // impact lists what changes with a changed file.
    let out = run_ok(ctxd().args(["graph", "impact", "work/src/export.py", "--json", "--db"]).arg(&db));
    let impact: Value = serde_json::from_str(out.trim()).unwrap();
    let partners = impact["cochanged"].as_array().unwrap_or_else(|| panic!("no cochanged: {impact}"));
    assert!(
        partners.iter().any(|c| c["path"] == "work/src/broken.py" && c["with"] == "work/src/export.py"),
        "{impact}"
    );
    let missing = ctxd().args(["history", "src/nope.py", "--db"]).arg(&db).output().unwrap();
    assert!(!missing.status.success() && String::from_utf8_lossy(&missing.stderr).contains("src/nope.py"));
    // locate says why: the release branch's tax rule changed in its last commit. The hand-set
    // weights weigh the history signals; the fitted model, chosen on rows without history, does not.
    let out =
        run_ok(ctxd().args(["locate", "the graduated tax rate rule is wrong for country xx", "--db"]).arg(&db).args([
            "--json",
            "--locate-model",
            "hand",
            "--source",
            "proj",
            "--ref",
            "release/1.0",
        ]));
    let located: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(located["files"][0]["path"], "proj@release~1.0/src/tax.py", "{located}");
    let why = located["files"][0]["why"].to_string();
    assert!(why.contains("recency: last changed") && why.contains("release tax rule"), "{why}");

    // The daemon: HTTP and MCP take `ref`; without one a git source is read at its first ref.
    let mut cmd = ctxd();
    cmd.arg("serve").arg("--config").arg(&cfg).args(["--listen", "127.0.0.1:0", "--flight-listen", "127.0.0.1:0"]);
    let d = Daemon::spawn_raw(&mut cmd);
    d.wait_ready();
    // Status names each git source's refs, with what is stored under each view.
    let status: Value = d.get("/v1/status").json().unwrap();
    let proj = status["sources"].as_array().unwrap().iter().find(|s| s["name"] == "proj").unwrap();
    let refs: Vec<&str> = proj["refs"].as_array().unwrap().iter().map(|r| r["ref"].as_str().unwrap()).collect();
    assert_eq!(refs, ["main", "release/1.0"], "{status}");
    assert!(status["sources"].as_array().unwrap().iter().any(|s| s["name"] == "notes" && s.get("refs").is_none()));
    // The web page on two refs: the status lists them, a search at the second one finds its rule.
    if let Some(browser) = crate::ui::Browser::start() {
        browser.go(&format!("{}/ui#status", d.base));
        browser.wait("the sources", "document.querySelector('#status-sources').textContent.includes('release/1.0')");
        browser.go(&format!("{}/ui#ask", d.base));
        browser.type_into("#ask-text", "zebracalc");
        browser.js("document.getElementById('ask-mode').value = 'bm25';");
        browser.type_into("#ask-source", "proj");
        browser.type_into("#ask-ref", "release/1.0");
        browser.click("#ask-go");
        browser.wait("a result", "document.querySelectorAll('#ask-results .result').length > 0");
        assert!(browser.text("#ask-results .result .head").contains("proj@release~1.0/"));
        let errors = browser.console_errors();
        assert!(errors.is_empty(), "console errors: {errors:#?}");
    }
    let (s, v) = d.search(json!({"query": "quokkaexport", "source": "proj", "mode": "bm25"}));
    assert_eq!(s, 200);
    assert_eq!(paths(&v), ["proj@main/src/export.py"], "{v}");
    assert_eq!((field(&v, "source"), field(&v, "ref")), (vec!["proj".into()], vec!["main".into()]));
    let (s, v) = d.search(json!({"query": "quokkaexport", "source": "proj", "ref": "release/1.0", "mode": "bm25"}));
    assert_eq!(s, 200);
    assert!(paths(&v).is_empty(), "the exporter is not on the release branch: {v}");
    let (s, v) = d.search(json!({"query": "zebracalc", "ref": "release/1.0", "mode": "bm25"}));
    assert_eq!(s, 200);
    assert_eq!(field(&v, "source"), ["proj", "shallow"], "both repositories at release/1.0: {v}");
    let (s, v) = d.search(json!({"query": "invoice", "source": "notes", "ref": "main"}));
    assert_eq!(s, 400, "a folder has no ref: {v}");
    let msg = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "search", "arguments": {"query": "zebracalc", "source": "shallow", "ref": "release/1.0"}}});
    let r: Value = d.post("/mcp", &msg).json().unwrap();
    let found = &r["result"]["structuredContent"];
    assert_eq!(field(found, "ref"), ["release/1.0"], "{r}");
    assert!(paths(found)[0].starts_with("shallow@release~1.0/"), "{r}");
    // Symbols of a shared file are read through the overlay too.
    let msg = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "search_symbols", "arguments": {"name": "total_invoice", "source": "proj", "ref": "release/1.0"}}});
    let r = d.post("/mcp", &msg).text().unwrap();
    assert!(r.contains("proj@release~1.0/src/invoice.py") && !r.contains("proj@main/"), "{r}");
    let msg = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "history", "arguments": {"path": "src/export.py", "source": "proj"}}});
    let r: Value = d.post("/mcp", &msg).json().unwrap();
    let logs = &r["result"]["structuredContent"]["files"];
    assert_eq!(logs[0]["path"], "proj@main/src/export.py", "the default ref only: {r}");
    assert_eq!(logs.as_array().map(Vec::len), Some(1), "{r}");
    for reason in ["submodule", "lfs_pointer", "symlink", "missing_ref", "unreadable"] {
        let n = d.metric(&format!("ctxd_watch_skipped_total{{reason=\"{reason}\"}}")).unwrap_or(0.0);
        assert!(n >= 1.0, "skips counted as {reason}: {n}");
    }

    let guide = |r: &str| {
        let found =
            paths(&d.search(json!({"query": "guide invoices", "source": "proj", "ref": r, "mode": "bm25", "k": 20})).1);
        found.iter().any(|p| p.ends_with("/docs/guide.md"))
    };
    assert!(guide("main") && guide("release/1.0"), "a restart keeps every ref's files");
    // A commit on main is searchable after the next poll; a file deleted on main leaves main only.
    write(&repo, "src/refund.py", "def refund_wombat(invoice):\n    \"\"\"Issues the wombatrefund of an invoice.\"\"\"\n    return -invoice.total\n");
    git(&repo, &["add", "src/refund.py"]);
    git(&repo, &["rm", "-q", "docs/guide.md"]);
    // main changes the invoice module the release branch shared: release keeps its own copy.
    write(&repo, "src/invoice.py", "def total_invoice(lines):\n    \"\"\"Sums the invoice lines with their tax and the narwhalfee.\"\"\"\n    return sum(l.amount for l in lines) + 1\n");
    git(&repo, &["add", "src/invoice.py"]);
    // (Its blob is gone: git would refuse to write a tree that names it.)
    git(&repo, &["rm", "-q", "--cached", "src/broken.py"]);
    git(&repo, &["commit", "-q", "-m", "refunds"]);
    let poll = |name: &str, header: Option<(&str, &str)>| {
        let mut req = d.client.post(format!("{}/v1/sources/{name}/poll", d.base)).body("{}");
        if let Some((h, v)) = header {
            req = req.header(h, v);
        }
        let resp = req.send().unwrap();
        (resp.status().as_u16(), resp.text().unwrap())
    };
    assert_eq!(poll("proj", Some(("X-Gitlab-Token", "wrong"))).0, 401);
    assert_eq!(poll("proj", Some(("X-Hub-Signature-256", "sha256=00"))).0, 401);
    assert_eq!(poll("notes", None).0, 404, "a folder is watched, not polled");
    assert_eq!(poll("nope", None).0, 404);
    std::thread::sleep(Duration::from_secs(2));
    assert!(
        paths(&d.search(json!({"query": "wombatrefund", "source": "proj", "mode": "bm25"})).1).is_empty(),
        "no poll yet"
    );
    let (s, body) = poll("proj", Some(("X-Gitlab-Token", "a-long-webhook-secret-0123456789")));
    assert_eq!(s, 202, "{body}");
    super::support::wait_for("the new commit after the webhook", Duration::from_secs(60), || {
        paths(&d.search(json!({"query": "wombatrefund", "source": "proj", "mode": "bm25"})).1)
            == ["proj@main/src/refund.py"]
    });
    super::support::wait_for("the deletion", Duration::from_secs(30), || !guide("main"));
    assert!(guide("release/1.0"), "the release branch keeps its guide");
    let invoice = |r: &str| {
        d.search(json!({"query": "sums the invoice lines", "source": "proj", "ref": r, "mode": "bm25", "k": 5})).1
    };
    super::support::wait_for("main's new invoice module", Duration::from_secs(30), || {
        invoice("main").to_string().contains("narwhalfee")
    });
    super::support::wait_for("release's own invoice module", Duration::from_secs(30), || {
        paths(&invoice("release/1.0")).first().map(String::as_str) == Some("proj@release~1.0/src/invoice.py")
    });
    let release = invoice("release/1.0");
    assert!(!release.to_string().contains("narwhalfee"), "main's change never shows under release: {release}");
    drop(d);

    // Not a repository: a clear error naming the path.
    std::fs::write(base.join("bad.toml"), "[[source]]\nname = \"x\"\ngit = \"notes\"\n[index]\ndb = \"db2\"\n")
        .unwrap();
    let bad = ctxd().args(["index", "--config"]).arg(base.join("bad.toml")).output().unwrap();
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(!bad.status.success() && err.contains("not a readable git repository") && err.contains("notes"), "{err}");
}

fn walk_files(dir: &Path) -> usize {
    let mut n = 0;
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        n += if p.is_dir() { walk_files(&p) } else { 1 };
    }
    n
}

/// A git source that watches its clone's work tree (`refs = ["worktree", "main"]`): queries
/// read the files as they are on disk by default — an uncommitted edit, an untracked file and a
/// branch switch shadow `main`, which keeps its committed files — and the work tree's history
/// follows `HEAD`. A bare repository has no work tree to watch: a clear error.
#[test]
fn worktree_edits_shadow_the_checked_out_ref() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path();
    let app = base.join("app");
    std::fs::create_dir_all(&app).unwrap();
    git(&app, &["init", "-q", "-b", "main"]);
    write(&app, ".gitignore", "build/\n");
    write(
        &app,
        "src/rate.py",
        "def shipping_rate(zone):\n    \"\"\"The flat shipping rate of a zone.\"\"\"\n    return 5\n",
    );
    write(&app, "src/cart.py", "def cart_total(items):\n    \"\"\"Sums the cart.\"\"\"\n    return sum(items)\n");
    git(&app, &["add", "-A"]);
    git(&app, &["commit", "-q", "-m", "first"]);
    git(&app, &["checkout", "-q", "-b", "feature"]);
    write(&app, "src/rate.py", "def shipping_rate(zone):\n    \"\"\"The kangaroozone shipping rule of the feature branch.\"\"\"\n    return 7\n");
    git(&app, &["commit", "-q", "-am", "kangaroo zones"]);
    git(&app, &["checkout", "-q", "main"]);
    write(&app, "build/out.py", "def generated_numbat():\n    pass\n");
    write(base, "notes/n.md", "# Notes\nShipping rates are flat.\n");
    let cfg = base.join("ctxd.toml");
    std::fs::write(
        &cfg,
        "[[source]]\nname = \"app\"\ngit = \"app\"\nrefs = [\"worktree\", \"main\"]\nmirror_dir = \"mirror\"\n\
         poll_interval_secs = 1\n\n[[source]]\nname = \"notes\"\nroot = \"notes\"\n\n[index]\ndb = \"db\"\n",
    )
    .unwrap();
    let mut cmd = ctxd();
    cmd.arg("serve").arg("--config").arg(&cfg).args(["--listen", "127.0.0.1:0", "--flight-listen", "127.0.0.1:0"]);
    let d = Daemon::spawn_raw(&mut cmd);
    d.wait_ready();
    let find = |q: &str, r: Option<&str>| -> Vec<String> {
        let mut body = json!({"query": q, "source": "app", "mode": "bm25", "k": 20});
        if let Some(r) = r {
            body["ref"] = json!(r);
        }
        let (s, v) = d.search(body);
        assert_eq!(s, 200, "{v}");
        paths(&v)
    };
    // The default view is the work tree; `main` is its own view of the same blobs.
    assert_eq!(find("shipping_rate", None), ["app@worktree/src/rate.py"]);
    assert_eq!(find("shipping_rate", Some("main")), ["app@main/src/rate.py"]);
    let (_, v) = d.search(json!({"query": "shipping_rate", "source": "app", "mode": "bm25"}));
    assert_eq!(field(&v, "ref"), ["worktree"], "{v}");
    assert!(find("generated_numbat", None).is_empty(), "ignored files stay out of the work tree's view");
    // An uncommitted edit and an untracked file: the work tree shows them, main does not.
    write(
        &app,
        "src/rate.py",
        "def shipping_rate(zone):\n    \"\"\"The wombatedit rate, not committed.\"\"\"\n    return 6\n",
    );
    write(
        &app,
        "src/coupon.py",
        "def apply_coupon(cart):\n    \"\"\"The quollcoupon discount.\"\"\"\n    return cart\n",
    );
    super::support::wait_for("the uncommitted edit", Duration::from_secs(30), || {
        find("wombatedit", None) == ["app@worktree/src/rate.py"]
            && find("quollcoupon", None) == ["app@worktree/src/coupon.py"]
    });
    assert!(find("wombatedit", Some("main")).is_empty() && find("quollcoupon", Some("main")).is_empty());
    // A branch switch: the work tree's view follows the checkout; main keeps its files.
    git(&app, &["checkout", "-q", "-f", "feature"]);
    std::fs::remove_file(app.join("src/coupon.py")).unwrap();
    super::support::wait_for("the branch switch", Duration::from_secs(30), || {
        find("kangaroozone", None) == ["app@worktree/src/rate.py"] && find("quollcoupon", None).is_empty()
    });
    assert!(find("kangaroozone", Some("main")).is_empty(), "main does not have the feature's rule");
    assert_eq!(find("cart_total", Some("main")), ["app@main/src/cart.py"]);
    // A folder source is read as it is on disk, so `ref = "worktree"` reads it too.
    let (s, v) = d.search(json!({"query": "shipping rates", "ref": "worktree", "mode": "bm25", "k": 20}));
    assert_eq!(s, 200, "{v}");
    assert_eq!(field(&v, "source"), ["app", "notes"], "{v}");
    // The work tree's history follows HEAD (checked every few seconds).
    super::support::wait_for("the work tree's history at the feature branch", Duration::from_secs(30), || {
        let out = ctxd()
            .args(["history", "src/rate.py", "--json", "--source", "app", "--ref", "worktree", "--db"])
            .arg(base.join("db"))
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).contains("kangaroo zones")
    });
    drop(d);

    // A bare repository has no work tree to watch.
    let url = format!("file://{}", app.display());
    let out = Command::new("git").args(["clone", "-q", "--bare", &url]).arg(base.join("bare.git")).output().unwrap();
    assert!(out.status.success());
    std::fs::write(
        base.join("bare.toml"),
        "[[source]]\nname = \"b\"\ngit = \"bare.git\"\nrefs = [\"worktree\"]\n[index]\ndb = \"db3\"\n",
    )
    .unwrap();
    let bad = ctxd().args(["index", "--config"]).arg(base.join("bare.toml")).output().unwrap();
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(
        !bad.status.success() && err.contains("not the top of a clone's work tree") && err.contains("bare.git"),
        "{err}"
    );
}
