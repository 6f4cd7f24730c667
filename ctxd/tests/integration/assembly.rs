//! Assembly strategies and document-type filters end to end: a daemon on a small project with
//! code, tests, docs and config answers `/v1/context` laid out balanced, hierarchical (file
//! outlines first), sequential (file and line order, a traceback's files first) and thematic
//! (groups under headings); `auto` picks by intent and says why; unknown strategies and types
//! are 400s; the CLI and MCP take the same options.

use std::path::Path;

use serde_json::{json, Value};

use super::support::{ctxd, run_ok, serve_project};

fn project(root: &Path) {
    let files = [
        (
            "billing/invoice.py",
            "class Invoice:\n    \"\"\"An invoice: lines, tax and a total.\"\"\"\n\n    def __init__(self, lines):\n        self.lines = lines\n\n    def subtotal(self):\n        \"\"\"Sum of the invoice lines before tax.\"\"\"\n        return sum(l.amount for l in self.lines)\n\n    def total(self, rate):\n        \"\"\"The invoice total with tax at rate.\"\"\"\n        return self.subtotal() * (1 + rate)\n\n\ndef invoice_from_rows(rows):\n    \"\"\"Builds an invoice from database rows.\"\"\"\n    return Invoice([r for r in rows if r.amount])\n",
        ),
        (
            "billing/tax.py",
            "def tax_rate(country):\n    \"\"\"The VAT rate of a country for an invoice.\"\"\"\n    return {'de': 0.19, 'fr': 0.2}.get(country, 0.0)\n\n\ndef invoice_tax(invoice, country):\n    \"\"\"The tax owed on an invoice total.\"\"\"\n    return invoice.subtotal() * tax_rate(country)\n",
        ),
        (
            "mail/smtp.py",
            "import smtplib\n\n\ndef send_mail(host, to, body):\n    \"\"\"Sends an email through an SMTP server.\"\"\"\n    with smtplib.SMTP(host) as smtp:\n        smtp.sendmail('billing@example.com', [to], body)\n\n\ndef mail_invoice(host, invoice, to):\n    \"\"\"Emails an invoice total to a customer.\"\"\"\n    send_mail(host, to, f'Your invoice total is {invoice.total(0.19)}')\n",
        ),
        (
            "tests/test_invoice.py",
            "from billing.invoice import Invoice\n\n\ndef test_invoice_total_includes_tax():\n    \"\"\"An invoice total adds the tax to the subtotal.\"\"\"\n    assert Invoice([]).total(0.2) == 0\n",
        ),
        ("docs/billing.md", "# Billing\n\nInvoices are totalled with tax per country and emailed to customers over SMTP.\n"),
        ("config/billing.toml", "[invoice]\ncurrency = \"EUR\"\ntax_country = \"de\"\nsmtp_host = \"mail.example.com\"\n"),
    ];
    for (rel, text) in files {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
}

fn blocks(v: &Value) -> &Vec<Value> {
    v["blocks"].as_array().unwrap_or_else(|| panic!("no blocks: {v}"))
}

fn citations(v: &Value) -> Vec<String> {
    let mut out: Vec<String> = blocks(v)
        .iter()
        .filter(|b| b.get("outline").is_none())
        .map(|b| format!("{}:{}-{}", b["path"].as_str().unwrap(), b["start_line"], b["end_line"]))
        .collect();
    out.sort();
    out
}

#[test]
fn strategies_lay_out_the_same_blocks_and_filters_keep_to_their_types() {
    let (_tmp, _root, db, d) = serve_project(project);
    let ask = |body: Value| -> Value {
        let resp = d.post("/v1/context", &body);
        assert_eq!(resp.status().as_u16(), 200, "{body}");
        resp.json().unwrap()
    };
    let query = "invoice total tax and email";
    let with = |assembly: &str| ask(json!({"query": query, "budget": 4000, "assembly": assembly}));

    // Balanced and sequential send the same blocks; sequential in file and line order.
    let balanced = with("balanced");
    assert_eq!(balanced["assembly"], "balanced");
    assert!(balanced.get("assembly_reason").is_none(), "{balanced}");
    let sequential = with("sequential");
    assert_eq!(sequential["assembly"], "sequential");
    assert_eq!(citations(&sequential), citations(&balanced));
    let order: Vec<(String, u64)> = blocks(&sequential)
        .iter()
        .map(|b| (b["path"].as_str().unwrap().to_string(), b["start_line"].as_u64().unwrap()))
        .collect();
    for w in order.windows(2) {
        let later_file_seen_before = order.iter().take_while(|o| o != &&w[0]).any(|o| o.0 == w[1].0);
        assert!(!later_file_seen_before, "a file's blocks are not together: {order:?}");
        if w[0].0 == w[1].0 {
            assert!(w[0].1 < w[1].1, "not in line order: {order:?}");
        }
    }

    // Hierarchical: outlines of the best files first, with their definitions and lines.
    let hier = with("hierarchical");
    assert_eq!(hier["assembly"], "hierarchical");
    let first = &blocks(&hier)[0];
    assert_eq!(first["outline"], true, "{hier}");
    let outlines = blocks(&hier).iter().take_while(|b| b["outline"] == true).count();
    assert!(blocks(&hier).iter().skip(outlines).all(|b| b.get("outline").is_none()), "outlines first: {hier}");
    let invoice = blocks(&hier).iter().find(|b| b["outline"] == true && b["path"] == "billing/invoice.py");
    let invoice = invoice.unwrap_or_else(|| panic!("no outline of billing/invoice.py: {hier}"));
    let text = invoice["content"].as_str().unwrap();
    assert!(text.contains("class Invoice:") && text.contains("def total(self, rate):  # lines 11-13"), "{text}");
    assert!(hier["context"].as_str().unwrap().contains("outline=\"true\""));
    assert!(hier["tokens_used"].as_u64().unwrap() <= 4000);

    // Thematic: every block under a heading, a theme's blocks together.
    let thematic = with("thematic");
    assert_eq!(thematic["assembly"], "thematic");
    assert_eq!(citations(&thematic), citations(&balanced));
    let themes = thematic["themes"].as_array().unwrap_or_else(|| panic!("no themes: {thematic}"));
    assert!(!themes.is_empty() && themes.iter().all(|t| !t.as_str().unwrap().is_empty()));
    let seq: Vec<u64> = blocks(&thematic).iter().map(|b| b["theme"].as_u64().expect("a theme per block")).collect();
    assert!(seq.windows(2).all(|w| w[0] <= w[1]) && (*seq.last().unwrap() as usize) < themes.len(), "{seq:?}");
    let context = thematic["context"].as_str().unwrap();
    assert_eq!(context.matches("<theme title=").count(), themes.len(), "{context}");

    // Auto picks by intent and says why.
    let trace = "Traceback (most recent call last):\n  File \"/srv/app/mail/smtp.py\", line 11, in mail_invoice\n    send_mail(host, to, body)\n  File \"/srv/app/billing/invoice.py\", line 13, in total\n    return self.subtotal() * (1 + rate)\nTypeError: unsupported operand type(s) for *: 'NoneType' and 'float'";
    let debug = ask(json!({"query": trace, "budget": 4000}));
    assert_eq!(debug["assembly"], "sequential", "{debug}");
    assert!(debug["assembly_reason"].as_str().unwrap().contains("stack trace"), "{debug}");
    let paths: Vec<&str> = blocks(&debug).iter().map(|b| b["path"].as_str().unwrap()).collect();
    if let (Some(m), Some(i)) =
        (paths.iter().position(|p| *p == "mail/smtp.py"), paths.iter().position(|p| *p == "billing/invoice.py"))
    {
        assert!(m < i, "the trace's outer frame first: {paths:?}");
    }
    let explain = ask(json!({"query": "explain how does the invoice total work", "budget": 4000}));
    assert_eq!(explain["assembly"], "hierarchical", "{explain}");
    assert!(explain["assembly_reason"].as_str().unwrap().starts_with("auto: "));

    // Unknown strategies and document types are 400s that name the choices.
    for body in [
        json!({"query": query, "budget": 4000, "assembly": "strategy"}),
        json!({"query": query, "budget": 4000, "doc_types": ["binaries"]}),
    ] {
        let resp = d.post("/v1/context", &body);
        assert_eq!(resp.status().as_u16(), 400, "{body}");
        let text = resp.text().unwrap();
        assert!(text.contains("balanced") || text.contains("config"), "{text}");
    }

    // Document types.
    let only = |types: Value| -> Vec<String> {
        let v = ask(json!({"query": query, "budget": 4000, "doc_types": types, "assembly": "balanced"}));
        blocks(&v).iter().map(|b| b["path"].as_str().unwrap().to_string()).collect()
    };
    let tests = only(json!(["tests"]));
    assert!(!tests.is_empty() && tests.iter().all(|p| p.starts_with("tests/")), "{tests:?}");
    let docs = only(json!(["docs", "config"]));
    assert!(docs.iter().any(|p| p == "docs/billing.md"), "{docs:?}");
    assert!(docs.iter().all(|p| p == "docs/billing.md" || p == "config/billing.toml"), "{docs:?}");
    let code = only(json!(["code"]));
    assert!(!code.is_empty() && code.iter().all(|p| p.starts_with("billing/") || p.starts_with("mail/")), "{code:?}");

    // MCP takes the same options and reports the assembly.
    let msg = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "get_context",
        "arguments": {"query": query, "assembly": "thematic", "doc_types": ["code"]}}});
    let r: Value = d.post("/mcp", &msg).json().unwrap();
    assert_eq!(r["result"]["structuredContent"]["assembly"], "thematic", "{r}");
    let msg = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "get_context",
        "arguments": {"query": query, "assembly": "strategy"}}});
    let r: Value = d.post("/mcp", &msg).json().unwrap();
    assert_eq!(r["result"]["isError"], true, "{r}");
    drop(d);

    // The CLI.
    let out = run_ok(
        ctxd()
            .args(["context", "--json", "--assembly", "hierarchical", "--doc-types", "code", "--db"])
            .arg(&db)
            .arg(query),
    );
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["assembly"], "hierarchical");
    assert!(blocks(&v).iter().all(|b| !b["path"].as_str().unwrap().starts_with("tests/")), "{v}");
    let out = ctxd().args(["context", "--assembly", "nope", "--db"]).arg(&db).arg(query).output().unwrap();
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("unknown assembly 'nope'"));
    let out = ctxd().args(["context", "--doc-types", "code,binaries", "--db"]).arg(&db).arg(query).output().unwrap();
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("'binaries'"));
}
