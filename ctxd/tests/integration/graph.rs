//! The code graph and localization end to end: a small Python project indexed with the real
//! model and grammars, the graph tools on the CLI, an edit that renames a function, a traceback
//! routed to its frames' files, and the HTTP/MCP surfaces with their limits.

use std::path::Path;

use ctxd_codegraph::tools::GraphTool;
use serde_json::{json, Value};

use super::support::{ctxd, index_json, run_ok, serve_project};

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn project(root: &Path) {
    write(root, "pkg/__init__.py", "from .core import Engine\n");
    write(
        root,
        "pkg/core.py",
        "\"\"\"The engine.\"\"\"\n\n\ndef helper(x):\n    return x + 1\n\n\nclass Engine:\n    \"\"\"Runs jobs.\"\"\"\n\n    def run(self, n):\n        if n < 0:\n            raise ValueError(\"engine refuses negative job counts\")\n        return helper(n)\n\n    def stop(self):\n        return self.run(0)\n",
    );
    write(
        root,
        "pkg/cli.py",
        "from pkg.core import Engine\n\n\ndef main():\n    engine = Engine()\n    return engine.run(3)\n",
    );
    write(
        root,
        "pkg/plugins.py",
        "from . import core\n\n\nclass Turbo(core.Engine):\n    def run(self, n):\n        return 2 * n\n",
    );
    write(
        root,
        "tests/test_core.py",
        "from pkg.core import Engine, helper\n\n\ndef test_run():\n    assert Engine().run(1) == 2\n\n\ndef test_helper():\n    assert helper(1) == 2\n",
    );
    write(root, "README.md", "# Engine\n\nRun jobs with the engine.\n");
}

fn graph(db: &Path, args: &[&str]) -> Value {
    let out = run_ok(ctxd().arg("graph").args(args).arg("--db").arg(db).arg("--json"));
    serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
}

fn places(v: &Value, key: &str) -> Vec<(String, u64)> {
    let mut out: Vec<(String, u64)> = v[key]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| (u["path"].as_str().unwrap().to_string(), u["line"].as_u64().unwrap_or(0)))
        .collect();
    out.sort();
    out
}

fn paths(v: &Value) -> Vec<String> {
    v["files"].as_array().unwrap().iter().map(|f| f["path"].as_str().unwrap().to_string()).collect()
}

fn locate(db: &Path, text: &str) -> Value {
    let mut cmd = ctxd();
    cmd.args(["locate", "-", "--json", "--db"]).arg(db);
    cmd.stdin(std::process::Stdio::piped()).stdout(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), text.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "locate: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn the_code_graph_answers_with_cited_places_and_follows_edits() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    project(&root);
    let db = tmp.path().join("db");
    index_json(&root, &db);

    // References: calls, inheritance, imports of the name, in tests last.
    let refs = graph(&db, &["references", "Engine"]);
    assert_eq!(
        places(&refs, "uses"),
        vec![
            ("pkg/__init__.py".into(), 1),
            ("pkg/cli.py".into(), 1),
            ("pkg/cli.py".into(), 5),
            ("pkg/plugins.py".into(), 4),
            ("tests/test_core.py".into(), 1),
            ("tests/test_core.py".into(), 5),
        ],
        "{refs}"
    );
    let callers = graph(&db, &["callers", "helper"]);
    assert_eq!(
        places(&callers, "uses"),
        vec![("pkg/core.py".into(), 14), ("tests/test_core.py".into(), 9)],
        "{callers}"
    );
    assert_eq!(callers["uses"][0]["in_symbol"], "Engine.run");
    let callees = graph(&db, &["callees", "Engine.stop"]);
    assert_eq!(
        callees["uses"][0]["targets"][0]["symbol"], "Engine.run",
        "self.run → the enclosing class's run: {callees}"
    );
    let imports = graph(&db, &["imports", "pkg/cli.py"]);
    assert_eq!(paths(&imports), vec!["pkg/core.py"], "{imports}");
    let by = graph(&db, &["imported-by", "pkg/core.py"]);
    assert_eq!(paths(&by), vec!["pkg/__init__.py", "pkg/cli.py", "pkg/plugins.py", "tests/test_core.py"], "{by}");

    // Impact of a diff touching helper: Engine.run is affected, both tests exercise it.
    let diff = tmp.path().join("change.diff");
    std::fs::write(&diff, "--- a/pkg/core.py\n+++ b/pkg/core.py\n@@ -4,2 +4,2 @@\n def helper(x):\n-    return x + 1\n+    return x + 2\n").unwrap();
    let out = run_ok(ctxd().args(["graph", "impact", "--json", "--diff"]).arg(&diff).arg("--db").arg(&db));
    let impact: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(impact["changed"][0]["symbol"], "helper", "{impact}");
    assert_eq!(impact["affected"][0]["symbol"], "Engine.run", "{impact}");
    let affected: Vec<&str> =
        impact["affected"].as_array().unwrap().iter().filter_map(|t| t["symbol"].as_str()).collect();
    assert!(affected.contains(&"Engine.stop"), "two hops: stop calls run: {impact}");
    let tests: Vec<&str> = impact["tests"].as_array().unwrap().iter().filter_map(|t| t["symbol"].as_str()).collect();
    assert!(tests.contains(&"test_helper"), "{impact}");
    assert!(impact["tests"]
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t["path"] == "tests/test_core.py" && t["symbol"].is_null()));

    // A repository map within its budget, the most used definitions first.
    let map = graph(&db, &["repo-map", "--budget", "60"]);
    assert!(map["tokens"].as_u64().unwrap() <= 60, "{map}");
    assert_eq!(map["files"][0]["path"], "pkg/core.py", "{map}");

    // A traceback routes to its frames' files (the innermost first), the test file demoted.
    let trace = "Engine fails on negative counts\n\nTraceback (most recent call last):\n  File \"/home/u/proj/tests/test_core.py\", line 5, in test_run\n  File \"/home/u/venv/site-packages/pkg/core.py\", line 13, in run\nValueError: engine refuses negative job counts\n";
    let found = locate(&db, trace);
    assert_eq!(paths(&found)[0], "pkg/core.py", "{found}");
    let why = found["files"][0]["why"].to_string();
    // The fitted model weighs the frames and the message's string literal (both reasons, in its order).
    assert!(why.contains("frame") && why.contains("message"), "{why}");
    assert_eq!(found["files"][0]["definitions"][0]["symbol"], "Engine.run", "{found}");
    // The hand-set weights, named on the command line: the same first file, other scores.
    let out = run_ok(ctxd().args(["locate", trace, "--json", "--locate-model", "hand", "--db"]).arg(&db));
    let hand: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!((found["model"].as_str(), hand["model"].as_str()), (Some("fitted"), Some("hand")), "{hand}");
    assert_eq!(paths(&hand)[0], "pkg/core.py", "{hand}");
    assert_ne!(found["files"][0]["score"], hand["files"][0]["score"]);
    let hand_why = hand["files"][0]["why"].to_string();
    assert!(hand_why.contains("frame") && hand_why.contains("message"), "{hand_why}");
    // Where the time went: each step's milliseconds, within the whole.
    let t = &found["timings"];
    let steps: u64 = ["graph_ms", "embed_ms", "retrieve_ms", "messages_ms", "history_ms", "rank_ms"]
        .iter()
        .map(|k| t[k].as_u64().unwrap_or_else(|| panic!("timings.{k}: {found}")))
        .sum();
    assert!(steps <= found["took_ms"].as_u64().unwrap() + 1, "{found}");
    // `context` takes localization's file ranking for an issue-like query (and says so), not
    // for a short question.
    let ctx = |q: &str| -> Value {
        let out = run_ok(ctxd().args(["context", "--json", "--budget", "400", "--db"]).arg(&db).arg("--").arg(q));
        serde_json::from_str(out.trim()).unwrap()
    };
    let issue = ctx(trace);
    assert_eq!(issue["located"][0], "pkg/core.py", "{issue}");
    let first = issue["blocks"].as_array().unwrap().iter().find(|b| b["relevance_rank"] == 0).unwrap();
    assert_eq!(first["path"], "pkg/core.py", "{issue}");
    assert!(ctx("how does the engine run jobs").get("located").is_none());

    // Rename helper → assist: the callers follow, the old name has no definition left.
    let core = std::fs::read_to_string(root.join("pkg/core.py")).unwrap().replace("helper", "assist");
    std::fs::write(root.join("pkg/core.py"), core).unwrap();
    index_json(&root, &db);
    let callers = graph(&db, &["callers", "assist"]);
    assert_eq!(places(&callers, "uses"), vec![("pkg/core.py".into(), 14)], "{callers}");
    let out = ctxd().args(["graph", "callers", "helper", "--db"]).arg(&db).output().unwrap();
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("no definition named 'helper'"));
    // The test still imports and calls `helper`: kept as unresolved names.
    let tests_imports = graph(&db, &["imports", "tests/test_core.py"]);
    assert_eq!(tests_imports["files"][0]["names"], json!(["Engine", "helper"]), "{tests_imports}");

    // Bad input: empty text, binary text, a 100k-line diff, an unknown file.
    let out = ctxd().args(["locate", "  ", "--db"]).arg(&db).output().unwrap();
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("empty"));
    let out = ctxd().args(["locate", "a\u{1}b", "--db"]).arg(&db).output().unwrap();
    assert!(out.status.success(), "control characters are text");
    let big = "--- a/pkg/core.py\n+++ b/pkg/core.py\n".to_string() + &"@@ -12,1 +12,1 @@\n+x\n".repeat(50_000);
    std::fs::write(&diff, big).unwrap();
    let out = run_ok(ctxd().args(["graph", "impact", "--json", "--diff"]).arg(&diff).arg("--db").arg(&db));
    assert_eq!(serde_json::from_str::<Value>(out.trim()).unwrap()["changed"][0]["symbol"], "Engine.run");
    let out = ctxd().args(["graph", "imports", "../../etc/passwd", "--db"]).arg(&db).output().unwrap();
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("no indexed file"));
}

#[test]
fn locate_and_graph_tools_over_http_and_mcp() {
    let (_tmp, _root, _db, d) = serve_project(project);
    // An issue over the 64 KiB body limit of the other routes (a long log): accepted here.
    let log = "DEBUG 2026-11-23 worker heartbeat ok\n".repeat(6_000);
    let text = format!("Engine.run raises ValueError for negative counts\n\n```\n{log}```\n");
    let resp = d.post("/v1/locate", &json!({"text": text, "k": 3}));
    assert_eq!(resp.status().as_u16(), 200);
    let v: Value = resp.json().unwrap();
    assert_eq!(v["files"][0]["path"], "pkg/core.py", "{v}");
    assert_eq!(v["files"].as_array().unwrap().len(), 3);
    // The feature rows of the best candidates, when asked for (what the ranking model is fitted on).
    let resp = d.post("/v1/locate", &json!({"text": "Engine.run raises ValueError", "k": 2, "features": 4}));
    let v: Value = resp.json().unwrap();
    let rows = v["features"].as_array().unwrap();
    assert!(!rows.is_empty() && rows.len() <= 4, "{v}");
    assert_eq!(rows[0]["path"], v["files"][0]["path"], "{v}");
    assert!(rows[0]["features"].as_object().unwrap().keys().any(|k| k == "bm25" || k == "symbols"), "{v}");
    assert!(d.post("/v1/locate", &json!({"text": "x", "features": 5000})).status().as_u16() == 400);
    // The ranking model: the daemon's default (fitted), or the hand-set weights a request names;
    // their scores differ, the answer says which ran, an unknown name is refused.
    let ask = |model: Option<&str>| -> Value {
        let mut body = json!({"text": "Engine.run raises ValueError for negative counts", "k": 3});
        if let Some(m) = model {
            body["model"] = json!(m);
        }
        d.post("/v1/locate", &body).json().unwrap()
    };
    let (fitted, hand) = (ask(None), ask(Some("hand")));
    assert_eq!((fitted["model"].as_str(), hand["model"].as_str()), (Some("fitted"), Some("hand")), "{hand}");
    assert_eq!(hand["files"][0]["path"], "pkg/core.py", "{hand}");
    assert_ne!(fitted["files"][0]["score"], hand["files"][0]["score"], "{fitted} {hand}");
    let resp = d.post("/v1/locate", &json!({"text": "x", "model": "handset"}));
    assert_eq!(resp.status().as_u16(), 400);
    assert!(resp.text().unwrap().contains("handset"));
    for (path, body, status) in [
        ("/v1/locate", json!({"text": ""}), 400),
        ("/v1/locate", json!({"text": "a\u{0}b"}), 400),
        ("/v1/locate", json!({"text": "x", "without": ["nope"]}), 400),
        ("/v1/locate", json!({"text": "x", "k": 0}), 400),
        ("/v1/graph/find_references", json!({"symbol": "Engine", "limit": 2}), 200),
        ("/v1/graph/find_references", json!({"symbol": "NoSuchThing"}), 400),
        ("/v1/graph/imported_by", json!({"path": "pkg/core.py"}), 200),
        ("/v1/graph/impact", json!({"diff": "Binary files a/x.png and b/x.png differ\n"}), 200),
        ("/v1/graph/impact", json!({"diff": "not a diff"}), 400),
        ("/v1/graph/impact", json!({"paths": ["pkg/core.py"], "colour": 1}), 400),
        ("/v1/graph/repo_map", json!({"query": "engine jobs", "budget": 100}), 200),
        ("/v1/graph/nope", json!({}), 404),
    ] {
        let resp = d.post(path, &body);
        let got = resp.status().as_u16();
        let text = resp.text().unwrap();
        assert_eq!(got, status, "{path} {body}: {text}");
        if status != 200 {
            assert!(text.contains("\"error\""), "{text}");
        }
    }
    let refs: Value = d.post("/v1/graph/find_references", &json!({"symbol": "Engine", "limit": 2})).json().unwrap();
    assert_eq!(refs["uses"].as_array().unwrap().len(), 2);
    // MCP: the tools are listed and answer like HTTP.
    let list: Value = d.post("/mcp", &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})).json().unwrap();
    let names: Vec<&str> =
        list["result"]["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    for t in GraphTool::ALL.map(GraphTool::name).into_iter().chain(["get_repo_overview"]) {
        assert!(names.contains(&t), "{t} in {names:?}");
    }
    let call = |name: &str, args: Value| -> Value {
        let msg =
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": name, "arguments": args}});
        d.post("/mcp", &msg).json().unwrap()
    };
    let r = call("callers", json!({"symbol": "helper"}));
    assert_eq!(r["result"]["structuredContent"]["uses"][0]["in_symbol"], "Engine.run", "{r}");
    let r = call("locate", json!({"text": "  "}));
    assert_eq!(r["result"]["isError"], true, "{r}");
    // `?tools=` narrows the tools a client is offered; an unknown name is refused.
    let list: Value =
        d.post("/mcp?tools=minimal", &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})).json().unwrap();
    let names: Vec<&str> =
        list["result"]["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["search", "get_context", "locate"], "{list}");
    let msg = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                     "params": {"name": "callers", "arguments": {"symbol": "helper"}}});
    let r: Value = d.post("/mcp?tools=locate,search", &msg).json().unwrap();
    assert_eq!(r["error"]["code"], -32602, "{r}");
    assert!(r["error"]["message"].as_str().unwrap().contains("'callers' is not offered"), "{r}");
    let resp = d.post("/mcp?tools=grep", &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}));
    assert_eq!(resp.status().as_u16(), 400);
    assert!(resp.text().unwrap().contains("unknown MCP tool preset or tool 'grep'"));
}
