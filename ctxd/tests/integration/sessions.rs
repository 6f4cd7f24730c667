//! Sessions end to end: a daemon on a small project answers `/v1/context` in sessions — what a
//! session was sent is cited, not repeated; other sessions and requests without one are not
//! touched; an edit makes a block new again; usage, bad ids and the CLI's `--session`.

use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};

use super::support::{ctxd, run_ok, serve_project, wait_for};

fn project(root: &Path) {
    let files = [
        ("billing/invoice.py", "def total_invoice(lines):\n    \"\"\"Sums the invoice lines with their tax.\"\"\"\n    return sum(l.amount * (1 + l.tax) for l in lines)\n"),
        ("billing/refund.py", "def refund_invoice(invoice, reason):\n    \"\"\"Refunds a paid invoice and records the reason.\"\"\"\n    invoice.status = 'refunded'\n    invoice.reason = reason\n    return invoice\n"),
        ("billing/tax.py", "def invoice_tax_rate(country):\n    \"\"\"The tax rate applied to an invoice for a country.\"\"\"\n    return {'de': 0.19, 'fr': 0.2}.get(country, 0.0)\n"),
        ("billing/reminder.py", "def send_invoice_reminder(invoice, days):\n    \"\"\"Emails a reminder for an unpaid invoice after some days.\"\"\"\n    return f'reminder for {invoice.id} after {days} days'\n"),
        ("billing/export.py", "def export_invoices_csv(invoices):\n    \"\"\"Writes invoices as CSV rows.\"\"\"\n    return '\\n'.join(f'{i.id},{i.total}' for i in invoices)\n"),
    ];
    for (rel, text) in files {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
}

fn citations(v: &Value) -> Vec<String> {
    cited(v, |_| true)
}

/// The citations of the blocks that `pick` accepts (whole blocks, skeletons), sorted.
fn cited(v: &Value, pick: impl Fn(&Value) -> bool) -> Vec<String> {
    let mut out: Vec<String> = v["blocks"]
        .as_array()
        .unwrap_or_else(|| panic!("no blocks: {v}"))
        .iter()
        .filter(|b| pick(b))
        .map(|b| format!("{}:{}-{}", b["path"].as_str().unwrap(), b["start_line"], b["end_line"]))
        .collect();
    out.sort();
    out
}

fn is_skeleton(b: &Value) -> bool {
    b["skeleton"] == true
}

#[test]
fn sessions_cite_what_they_were_sent_and_stay_apart() {
    let (tmp, root, db, d) = serve_project(project);
    let ask = |session: Option<&str>| -> Value {
        let mut body = json!({"query": "invoice refund and tax", "budget": 200});
        if let Some(s) = session {
            body["session"] = json!(s);
        }
        let resp = d.post("/v1/context", &body);
        assert_eq!(resp.status().as_u16(), 200);
        resp.json().unwrap()
    };
    let plain = ask(None);
    let first = ask(Some("agent-1"));
    assert_eq!(citations(&first), citations(&plain), "a new session answers like no session");
    assert!(first.get("already_sent").is_none(), "{first}");
    let sent_first = citations(&first);
    assert!(!sent_first.is_empty());

    // The same question again in the session: nothing repeated, all of it cited in one line.
    // (A block first sent as a skeleton may come whole later: that is more, not a repeat.)
    let second = ask(Some("agent-1"));
    let already: Vec<String> = second["already_sent"].as_array().unwrap().iter().map(|c| c.to_string()).collect();
    assert!(!already.is_empty(), "{second}");
    for c in cited(&first, |b| !is_skeleton(b)) {
        assert!(!citations(&second).contains(&c), "{c} sent whole, then again: {second}");
    }
    for c in cited(&first, is_skeleton) {
        assert!(!cited(&second, is_skeleton).contains(&c), "{c} skeleton sent twice: {second}");
    }
    assert!(second["context"].as_str().unwrap().contains("already sent: "), "{second}");

    // Other sessions and requests without one are not changed by agent-1's history.
    assert_eq!(citations(&ask(Some("agent-2"))), sent_first);
    assert_eq!(citations(&ask(None)), citations(&plain));

    // A budget too small for every candidate: the rest come as signature skeletons (unless asked not to).
    let small = |skeletons: bool| -> Value {
        let body = json!({"query": "invoice refund and tax", "budget": 160, "skeletons": skeletons});
        d.post("/v1/context", &body).json().unwrap()
    };
    let with = small(true);
    let skel: Vec<&Value> = with["blocks"].as_array().unwrap().iter().filter(|b| is_skeleton(b)).collect();
    assert!(!skel.is_empty(), "{with}");
    assert!(skel[0]["content"].as_str().unwrap().starts_with("def ") && with["tokens_used"].as_u64().unwrap() <= 160);
    let without = small(false);
    assert!(without["blocks"].as_array().unwrap().iter().all(|b| b.get("skeleton").is_none()), "{without}");
    assert!(without["blocks"].as_array().unwrap().len() < with["blocks"].as_array().unwrap().len());

    // An edit makes the edited block new again for the session.
    let edited = &cited(&first, |b| !is_skeleton(b))[0];
    let path = edited.split(':').next().unwrap();
    let text = std::fs::read_to_string(root.join(path)).unwrap();
    std::fs::write(root.join(path), text.replace("\"\"\"", "\"\"\" ")).unwrap();
    wait_for("the edit to be indexed", Duration::from_secs(60), || {
        let (_, v) = d.search(json!({"query": "invoice", "k": 20, "mode": "bm25"}));
        v["results"]
            .as_array()
            .is_some_and(|r| r.iter().any(|h| h["content"].as_str().unwrap_or("").contains("\"\"\" ")))
    });
    let third = ask(Some("agent-1"));
    assert!(citations(&third).iter().any(|c| c.starts_with(path)), "{path} edited but not sent again: {third}");

    // Usage, unknown and bad ids.
    let usage: Value = d.get("/v1/sessions/agent-1").json().unwrap();
    assert_eq!(usage["tools"]["context"]["calls"], 3, "{usage}");
    assert!(usage["tokens"].as_u64().unwrap() > 0 && usage["repeats_avoided"].as_u64().unwrap() > 0, "{usage}");
    assert_eq!(d.get("/v1/sessions/nobody").status().as_u16(), 404);
    assert_eq!(d.get("/v1/sessions/bad%20id").status().as_u16(), 400);
    let resp = d.post("/v1/context", &json!({"query": "invoice", "budget": 200, "session": "../etc"}));
    assert_eq!(resp.status().as_u16(), 400);
    assert!(resp.text().unwrap().contains("session id"));
    let resp = d.post("/v1/context", &json!({"query": "invoice", "budget": 0, "session": "agent-1"}));
    assert_eq!(resp.status().as_u16(), 400);

    // MCP over HTTP: initialize issues an Mcp-Session-Id; the calls that carry it are a session.
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18"}});
    let resp = d.post("/mcp", &init);
    let sid = resp.headers().get("mcp-session-id").expect("an Mcp-Session-Id").to_str().unwrap().to_string();
    assert!(sid.starts_with("mcp-") && sid.len() > 20, "{sid}");
    let other = d.post("/mcp", &init);
    assert_ne!(other.headers().get("mcp-session-id").unwrap().to_str().unwrap(), sid, "one id per initialize");
    let mcp_context = |sid: Option<&str>| -> Value {
        let msg = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "get_context",
            "arguments": {"query": "invoice refund and tax", "budget": 200}}});
        let mut req = d.client.post(format!("{}/mcp", d.base)).json(&msg);
        if let Some(sid) = sid {
            req = req.header("Mcp-Session-Id", sid);
        }
        let v: Value = req.send().unwrap().json().unwrap();
        v["result"]["structuredContent"].clone()
    };
    let one = mcp_context(Some(&sid));
    assert_eq!(one["session"], sid.as_str(), "{one}");
    assert!(one["already_sent"].as_array().is_none_or(|a| a.is_empty()), "{one}");
    let two = mcp_context(Some(&sid));
    assert!(!two["already_sent"].as_array().unwrap().is_empty(), "{two}");
    let anonymous = mcp_context(None);
    assert!(anonymous["session"].is_null() && anonymous["already_sent"].as_array().is_none_or(|a| a.is_empty()));
    let bad = d.client.post(format!("{}/mcp", d.base)).header("Mcp-Session-Id", "a b").json(&init).send().unwrap();
    assert_eq!(bad.status().as_u16(), 400);
    drop(d);

    // The CLI keeps a session between processes.
    let cache = tmp.path().join("cache");
    let cli = |session: &str| -> Value {
        let out = run_ok(
            ctxd()
                .env("CTXD_SESSION_DIR", &cache)
                .args(["context", "--json", "--budget", "200", "--session", session, "--db"])
                .arg(&db)
                .arg("invoice refund and tax"),
        );
        serde_json::from_str(out.trim()).unwrap()
    };
    let one = cli("cli-1");
    assert!(one.get("already_sent").is_none() && !citations(&one).is_empty(), "{one}");
    let two = cli("cli-1");
    assert!(!two["already_sent"].as_array().unwrap().is_empty(), "{two}");
    let out = ctxd().args(["context", "--session", "a/b", "--db"]).arg(&db).arg("x").output().unwrap();
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("session id"));

    // Batch symbol tools: a folder's outline, many sources in one budget, a session's repeats cited.
    let outline = run_ok(ctxd().args(["list-symbols", "billing", "--db"]).arg(&db));
    for name in ["total_invoice", "refund_invoice", "export_invoices_csv"] {
        assert!(outline.contains(name), "{name} missing from the outline:\n{outline}");
    }
    let module = run_ok(ctxd().args(["list-symbols", "billing.tax", "--json", "--db"]).arg(&db));
    let module: Value = serde_json::from_str(module.trim()).unwrap();
    assert_eq!(module["files"][0]["path"], "billing/tax.py", "{module}");
    let get = |session: &str, budget: &str| -> Value {
        let out = run_ok(
            ctxd()
                .env("CTXD_SESSION_DIR", &cache)
                .args(["get-symbols", "total_invoice", "invoice_tax_rate", "no_such_name", "--json"])
                .args(["--budget", budget, "--session", session, "--db"])
                .arg(&db),
        );
        serde_json::from_str(out.trim()).unwrap()
    };
    let both = get("sym-1", "2000");
    assert_eq!(both["symbols"].as_array().unwrap().len(), 2, "{both}");
    assert!(both["symbols"][0]["source"].as_str().unwrap().starts_with("def total_invoice("), "{both}");
    assert_eq!(both["missing"], json!(["no_such_name"]));
    let again = get("sym-1", "2000");
    assert!(again["symbols"].as_array().unwrap().is_empty() && again["already_sent"].as_array().unwrap().len() == 2);
    let first = both["symbols"][0]["tokens"].as_u64().unwrap();
    let tight = get("sym-2", &(first + 3).to_string());
    assert_eq!(tight["symbols"].as_array().unwrap().len(), 1, "only the first source fits: {tight}");
    assert_eq!(tight["over_budget"].as_array().unwrap().len(), 1, "{tight}");
    let out = ctxd().args(["list-symbols", "../nowhere", "--db"]).arg(&db).output().unwrap();
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("no indexed file"));
}
