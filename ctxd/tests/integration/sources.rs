//! Named sources end to end: a config with three `[[source]]` entries indexes them into one
//! database (`ctxd index --config`), each file under `<name>/`, with include/exclude globs;
//! every query surface narrows to `source`; a token limited to one source reads nothing else
//! over HTTP, MCP, Arrow Flight and `/v1/status`; dropping a source from the config and
//! indexing again drops only its files.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

use super::support::{ctxd, python, run_ok, Daemon};

const ADMIN: &str = "admin-token-0123456789";
const DOCS_ONLY: &str = "docs-team-token-0123456789";

fn write(root: &Path, files: &[(&str, &str)]) {
    for (rel, text) in files {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
}

/// Three repositories that all talk about invoices, so an unscoped search finds all three.
fn repos(base: &Path) {
    write(
        &base.join("api"),
        &[
            ("billing/invoice.py", "def total_invoice(lines):\n    \"\"\"Sums the invoice lines with their tax.\"\"\"\n    return sum(l.amount for l in lines)\n"),
            ("billing/fixtures/sample.py", "INVOICE_FIXTURE = {'id': 1, 'total': 10}\n"),
            ("README.md", "# API\nThe invoice service.\n"),
        ],
    );
    write(
        &base.join("docs"),
        &[
            ("invoices.md", "# Invoices\nHow an invoice total is computed: the sum of its lines with tax.\n"),
            ("refunds.md", "# Refunds\nA refunded invoice keeps its total and records the reason.\n"),
        ],
    );
    write(
        &base.join("web"),
        &[("src/invoice.js", "export function renderInvoice(invoice) {\n  return `<b>${invoice.total}</b>`;\n}\n")],
    );
}

fn config(base: &Path, sources: &[&str]) -> std::path::PathBuf {
    let mut text = String::new();
    for name in sources {
        text.push_str(&format!("[[source]]\nname = \"{name}\"\nroot = \"{name}\"\n"));
        if *name == "api" {
            text.push_str("include = [\"**/*.py\"]\nexclude = [\"**/fixtures/**\"]\n");
        }
        text.push('\n');
    }
    text.push_str("[index]\ndb = \"db\"\n\n[server]\nsource_tokens_file = \"tokens.toml\"\n");
    let path = base.join("ctxd.toml");
    std::fs::write(&path, text).unwrap();
    std::fs::write(base.join("tokens.toml"), format!("[[token]]\ntoken = \"{DOCS_ONLY}\"\nsources = [\"docs\"]\n"))
        .unwrap();
    path
}

fn sources_of(results: &Value, key: &str) -> Vec<String> {
    let mut out: Vec<String> = results[key]
        .as_array()
        .unwrap_or_else(|| panic!("no {key}: {results}"))
        .iter()
        .map(|r| r["source"].as_str().unwrap_or("?").to_string())
        .collect();
    out.sort();
    out.dedup();
    out
}

fn paths(results: &Value, key: &str) -> Vec<String> {
    results[key].as_array().unwrap().iter().map(|r| r["path"].as_str().unwrap().to_string()).collect()
}

#[test]
fn named_sources_share_one_index_and_a_token_reads_only_its_own() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path();
    repos(base);
    let cfg = config(base, &["api", "docs", "web"]);
    let db = base.join("db");

    // One pass over every source, into one database.
    let out = run_ok(ctxd().args(["index", "--config"]).arg(&cfg).arg("--json"));
    let summary: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(
        summary["files_indexed"], 4,
        "api 1 (README left out by include, the fixture by exclude), docs 2, web 1: {summary}"
    );

    // The CLI narrows with --source; results carry their source and a path under it.
    let search = |extra: &[&str]| -> Value {
        let out =
            run_ok(ctxd().args(["search", "invoice total", "--db"]).arg(&db).args(["--json", "--k", "10"]).args(extra));
        serde_json::from_str(out.trim()).unwrap()
    };
    let all = search(&[]);
    assert_eq!(sources_of(&all, "results"), ["api", "docs", "web"], "{all}");
    assert!(!paths(&all, "results").iter().any(|p| p.contains("fixtures") || p.ends_with("README.md")));
    let docs = search(&["--source", "docs"]);
    assert_eq!(sources_of(&docs, "results"), ["docs"]);
    assert!(paths(&docs, "results").iter().all(|p| p.starts_with("docs/")));
    let two = search(&["--source", "api,web"]);
    assert_eq!(sources_of(&two, "results"), ["api", "web"]);

    // The daemon, with a full token and a token for `docs` only.
    let mut cmd = ctxd();
    cmd.arg("serve").arg("--config").arg(&cfg).env("CTXD_AUTH_TOKEN", ADMIN);
    let d = Daemon::spawn_raw(cmd.args(["--listen", "127.0.0.1:0", "--flight-listen", "127.0.0.1:0"]));
    let http = reqwest::blocking::Client::builder().timeout(Duration::from_secs(60)).build().unwrap();
    let post = |token: &str, path: &str, body: Value| -> (u16, Value) {
        let resp = http.post(format!("{}{path}", d.base)).bearer_auth(token).json(&body).send().unwrap();
        (resp.status().as_u16(), resp.json().unwrap_or(Value::Null))
    };
    let get = |token: &str, path: &str| http.get(format!("{}{path}", d.base)).bearer_auth(token).send().unwrap();
    super::support::wait_for("readiness", Duration::from_secs(300), || get(ADMIN, "/readyz").status().as_u16() == 200);

    let q = json!({"query": "invoice total", "k": 10});
    let (s, admin_all) = post(ADMIN, "/v1/search", q.clone());
    assert_eq!((s, sources_of(&admin_all, "results")), (200, vec!["api".into(), "docs".into(), "web".into()]));
    let (s, admin_api) = post(ADMIN, "/v1/search", json!({"query": "invoice total", "source": "api"}));
    assert_eq!((s, sources_of(&admin_api, "results")), (200, vec!["api".to_string()]));
    let (s, unknown) = post(ADMIN, "/v1/search", json!({"query": "invoice", "source": "nope"}));
    assert_eq!(s, 400, "{unknown}");
    assert!(unknown["error"].as_str().unwrap().contains("unknown source 'nope'"), "{unknown}");

    // The docs token: only docs, on every surface; asking for another source is 403.
    let (s, mine) = post(DOCS_ONLY, "/v1/search", q.clone());
    assert_eq!((s, sources_of(&mine, "results")), (200, vec!["docs".to_string()]), "{mine}");
    let (s, denied) = post(DOCS_ONLY, "/v1/search", json!({"query": "invoice", "source": ["docs", "api"]}));
    assert_eq!(s, 403, "{denied}");
    assert!(denied["error"].as_str().unwrap().contains("'api'"), "{denied}");
    let (s, ctx) = post(DOCS_ONLY, "/v1/context", json!({"query": "how is an invoice total computed", "budget": 2000}));
    assert_eq!(s, 200);
    assert!(!paths(&ctx, "blocks").is_empty() && paths(&ctx, "blocks").iter().all(|p| p.starts_with("docs/")), "{ctx}");
    let (s, loc) = post(DOCS_ONLY, "/v1/locate", json!({"text": "invoice total is wrong in total_invoice"}));
    assert_eq!(s, 200);
    assert!(paths(&loc, "files").iter().all(|p| p.starts_with("docs/")), "{loc}");
    let (s, syms) = post(DOCS_ONLY, "/v1/symbols/get", json!({"names": ["total_invoice"]}));
    assert_eq!(s, 200);
    assert!(
        syms["missing"].as_array().unwrap().iter().any(|m| m == "total_invoice"),
        "another source's symbol: {syms}"
    );
    let (s, refs) = post(DOCS_ONLY, "/v1/graph/find_references", json!({"symbol": "total_invoice"}));
    assert!(s == 200 || s == 400, "{refs}");
    assert!(!refs.to_string().contains("api/billing"), "{refs}");
    let (s, admin_refs) = post(ADMIN, "/v1/graph/find_references", json!({"symbol": "total_invoice"}));
    assert_eq!(s, 200);
    assert!(admin_refs.to_string().contains("api/billing/invoice.py"), "{admin_refs}");

    // /v1/status names only the caller's sources; /metrics is for the full token.
    let status: Value = get(DOCS_ONLY, "/v1/status").json().unwrap();
    let names: Vec<&str> = status["sources"].as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["docs"], "{status}");
    assert_eq!(status["sources"][0]["files"], 2);
    let full: Value = get(ADMIN, "/v1/status").json().unwrap();
    assert_eq!(full["sources"].as_array().unwrap().len(), 3, "{full}");
    assert_eq!(get(DOCS_ONLY, "/metrics").status().as_u16(), 403);
    assert_eq!(get(DOCS_ONLY, "/v1/sessions").status().as_u16(), 403, "sessions cite every source");
    assert_eq!(get(ADMIN, "/metrics").status().as_u16(), 200);
    assert_eq!(get(ADMIN, "/v1/sessions").status().as_u16(), 200);
    assert_eq!(get("wrong-token-0123456789", "/v1/status").status().as_u16(), 401);

    // MCP over HTTP with the docs token.
    let call = |token: &str, args: Value| -> Value {
        let msg =
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "search", "arguments": args}});
        post(token, "/mcp", msg).1
    };
    let r = call(DOCS_ONLY, json!({"query": "invoice total"}));
    let found = &r["result"]["structuredContent"];
    assert!(!found.is_null(), "{r}");
    assert_eq!(sources_of(found, "results"), ["docs"], "{r}");
    let r = call(DOCS_ONLY, json!({"query": "invoice", "source": "web"}));
    assert_eq!(r["result"]["isError"], true, "{r}");
    let r = call(ADMIN, json!({"query": "invoice total", "source": "web"}));
    assert_eq!(sources_of(&r["result"]["structuredContent"], "results"), ["web"], "{r}");

    // Arrow Flight: a whole-table ticket and a search ticket with the docs token.
    let script = r#"
import json, sys
import pyarrow.flight as flight
loc, token = sys.argv[1], sys.argv[2]
opts = flight.FlightCallOptions(headers=[(b"authorization", ("Bearer " + token).encode())])
c = flight.connect(loc)
table = c.do_get(flight.Ticket(json.dumps({"table": "chunks"}).encode()), opts).read_all()
hits = c.do_get(flight.Ticket(json.dumps({"query": "invoice total", "k": 10}).encode()), opts).read_all()
try:
    c.do_get(flight.Ticket(json.dumps({"table": "chunks", "source": "api"}).encode()), opts).read_all()
    denied = False
except flight.FlightError as e:
    denied = "may not read source" in str(e)
infos = list(c.list_flights(options=opts))
print(json.dumps({"table_paths": table.column("path").to_pylist(), "table_sources": table.column("source").to_pylist(),
                  "hit_sources": hits.column("source").to_pylist(), "denied": denied,
                  "counts": [i.total_records for i in infos]}))
"#;
    let flight = |token: &str| -> Value {
        let out = python().arg("-c").arg(script).arg(&d.flight).arg(token).stderr(Stdio::inherit()).output().unwrap();
        assert!(out.status.success(), "flight client failed: {}", String::from_utf8_lossy(&out.stdout));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let f = flight(DOCS_ONLY);
    let table_paths: Vec<&str> = f["table_paths"].as_array().unwrap().iter().map(|p| p.as_str().unwrap()).collect();
    assert!(!table_paths.is_empty() && table_paths.iter().all(|p| p.starts_with("docs/")), "{f}");
    assert!(f["table_sources"].as_array().unwrap().iter().all(|s| s == "docs"), "{f}");
    assert!(f["hit_sources"].as_array().unwrap().iter().all(|s| s == "docs"), "{f}");
    assert_eq!(f["denied"], true, "{f}");
    assert!(f["counts"].as_array().unwrap().iter().all(|c| c == -1), "row counts hidden: {f}");
    let f = flight(ADMIN);
    let sources: std::collections::BTreeSet<&str> =
        f["table_sources"].as_array().unwrap().iter().map(|s| s.as_str().unwrap()).collect();
    assert_eq!(sources.into_iter().collect::<Vec<_>>(), ["api", "docs", "web"]);
    drop(d);

    // Dropping `web` from the config drops its files, and nothing else.
    let before = run_ok(
        ctxd().args(["search", "invoice", "--db"]).arg(&db).args(["--json", "--k", "20", "--source", "docs,api"]),
    );
    config(base, &["api", "docs"]);
    let out = run_ok(ctxd().args(["index", "--config"]).arg(&cfg).arg("--json"));
    let summary: Value = serde_json::from_str(out.trim()).unwrap();
    // (A file with definitions but no graph edges is chunked again, as in any index whose edges
    // table is empty; its rows are unchanged.)
    assert_eq!(
        (summary["files_removed"].as_u64(), summary["chunks_written"].as_u64()),
        (Some(1), Some(0)),
        "{summary}"
    );
    let after = search(&[]);
    assert_eq!(sources_of(&after, "results"), ["api", "docs"]);
    let again = run_ok(
        ctxd().args(["search", "invoice", "--db"]).arg(&db).args(["--json", "--k", "20", "--source", "docs,api"]),
    );
    let (b, a): (Value, Value) = (serde_json::from_str(&before).unwrap(), serde_json::from_str(&again).unwrap());
    assert_eq!(paths(&b, "results"), paths(&a, "results"), "the other sources are untouched");

    // A config naming its sources refuses a PATH; a bad source name is a config error.
    let refused = ctxd().args(["index", "."]).arg("--config").arg(&cfg).output().unwrap();
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("names its sources"));
    std::fs::write(base.join("bad.toml"), "[[source]]\nname = \"a/b\"\nroot = \"api\"\n[[source]]\nroot = \"docs\"\n")
        .unwrap();
    let bad = Command::new(env!("CARGO_BIN_EXE_ctxd"))
        .args(["config", "validate"])
        .arg(base.join("bad.toml"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(!bad.status.success() && err.contains("source.name") && err.contains("missing field `name`"), "{err}");
}

/// `SIGHUP` makes a running daemon read its configuration again and apply its sources: an added
/// source is indexed, a removed one dropped, the others left as they are (not indexed again); a
/// file that does not parse changes nothing.
#[test]
fn sighup_indexes_an_added_source_and_drops_a_removed_one() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path();
    repos(base);
    // An import, so the code graph has an edge (an index whose graph is empty is given one
    // again at every start).
    write(
        &base.join("api"),
        &[(
            "billing/tax.py",
            "from billing.invoice import total_invoice\n\ndef tax(lines):\n    return total_invoice(lines) * 0.2\n",
        )],
    );
    let cfg = base.join("ctxd.toml");
    let write_config = |names: &[&str]| {
        let mut text: String =
            names.iter().map(|n| format!("[[source]]\nname = \"{n}\"\nroot = \"{n}\"\n\n")).collect();
        text.push_str("[index]\ndb = \"db\"\n");
        std::fs::write(&cfg, text).unwrap();
    };
    write_config(&["api", "docs"]);
    let mut cmd = ctxd();
    cmd.arg("serve").arg("--config").arg(&cfg).args(["--listen", "127.0.0.1:0", "--flight-listen", "127.0.0.1:0"]);
    let d = Daemon::spawn_raw(&mut cmd);
    d.wait_ready();
    let found = || sources_of(&d.search(json!({"query": "invoice total", "mode": "bm25", "k": 30})).1, "results");
    assert_eq!(found(), ["api", "docs"]);
    let hangup = || assert!(Command::new("kill").args(["-HUP", &d.child.id().to_string()]).status().unwrap().success());
    let metric = |name: &str| d.metric(name).unwrap_or(0.0);
    let (upserted, removed) = (metric("ctxd_upsert_files_total"), metric("ctxd_upsert_removed_files_total"));

    std::fs::write(&cfg, "[[source]]\nname = \n").unwrap();
    hangup();
    super::support::wait_for("the failed reload counted", Duration::from_secs(30), || {
        metric("ctxd_pipeline_source_reloads_total{result=\"failed\"}") >= 1.0
    });
    assert_eq!(found(), ["api", "docs"], "a broken file changes nothing");

    write_config(&["api", "web"]);
    hangup();
    super::support::wait_for("web indexed and docs dropped", Duration::from_secs(120), || found() == ["api", "web"]);
    let (s, v) = d.search(json!({"query": "refund", "source": "docs"}));
    assert_eq!(s, 400, "docs is no source any more: {v}");
    let (s, v) = d.search(json!({"query": "render invoice", "source": "web", "mode": "bm25"}));
    assert_eq!((s, paths(&v, "results").first().map(String::as_str)), (200, Some("web/src/invoice.js")), "{v}");
    super::support::wait_for("the removals counted", Duration::from_secs(30), || {
        metric("ctxd_upsert_removed_files_total") >= removed + 2.0
    });
    assert_eq!(
        metric("ctxd_upsert_files_total"),
        upserted + 1.0,
        "only web's file is indexed; api's are not read again"
    );
    assert_eq!(metric("ctxd_pipeline_source_reloads_total{result=\"applied\"}"), 1.0);
    drop(d);

    // Without --config there is nothing to reload: SIGHUP is ignored, never fatal.
    let d = Daemon::start_with(&base.join("web"), &base.join("db-watch"), &["serve"]);
    d.wait_ready();
    assert!(Command::new("kill").args(["-HUP", &d.child.id().to_string()]).status().unwrap().success());
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(d.get("/healthz").status().as_u16(), 200, "still serving after SIGHUP");
}
