//! `ctxd chunk`: the chunks it prints for a file are the ones `ctxd index` stores for it (same
//! lines and symbols), each with the exact text the model embeds; a malformed line is an error
//! naming its number.

use std::io::Write;
use std::process::Stdio;

use serde_json::{json, Value};

use super::support::*;

const SOURCE: &str = r#"import json


def load_invoices(path):
    """Reads the invoices of a JSON file."""
    with open(path) as f:
        rows = json.load(f)
    invoices = []
    for row in rows:
        if row.get("void"):
            continue
        invoices.append(Invoice(row["id"], row["lines"]))
    return invoices


class Invoice:
    def __init__(self, ident, lines):
        self.ident = ident
        self.lines = lines

    def total_with_tax(self, rate):
        subtotal = 0
        for line in self.lines:
            subtotal += line["qty"] * line["price"]
        discount = 0.05 * subtotal if subtotal > 1000 else 0
        return round((subtotal - discount) * (1 + rate), 2)
"#;

/// Runs `ctxd chunk` with `input` on stdin; its output and whether it succeeded.
fn chunk(input: &str) -> (bool, String, String) {
    let mut child = ctxd()
        .arg("chunk")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("running ctxd chunk");
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    (out.status.success(), String::from_utf8(out.stdout).unwrap(), String::from_utf8_lossy(&out.stderr).into())
}

#[test]
fn chunk_prints_what_the_index_stores_and_embeds() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("src");
    std::fs::create_dir_all(root.join("pkg")).unwrap();
    std::fs::write(root.join("pkg/mod.py"), SOURCE).unwrap();
    let db = tmp.path().join("db");
    index_json(&root, &db);

    let input = format!("{}\n{}\n", json!({"path": "pkg/mod.py", "text": SOURCE}), json!({"path": "a.md", "text": ""}));
    let (ok, out, err) = chunk(&input);
    assert!(ok, "{err}");
    let lines: Vec<Value> = out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 2, "one answer per input line: {out}");
    assert_eq!((lines[0]["path"].as_str(), lines[0]["language"].as_str()), (Some("pkg/mod.py"), Some("python")));
    assert_eq!(lines[1]["chunks"], json!([]), "an empty file has no chunks");
    let chunks = lines[0]["chunks"].as_array().unwrap();
    let load = chunks.iter().find(|c| c["symbol"] == "load_invoices").expect("load_invoices is a chunk");
    assert_eq!(load["definition"], true, "{load}");
    assert_eq!(load["start_line"], 4, "{load}");
    let content = load["content"].as_str().unwrap();
    assert_eq!(load["text"].as_str().unwrap(), format!("pkg/mod.py load_invoices\n{content}"));
    assert!(chunks.iter().all(|c| c["token_count"].as_u64().unwrap() > 0));

    // Every chunk is one the index holds: same lines, symbol and content.
    let found: Value = serde_json::from_str(&run_ok(
        ctxd()
            .args(["search", "import json invoices total tax", "--mode", "bm25", "--k", "20", "--json", "--db"])
            .arg(&db),
    ))
    .unwrap();
    let key = |c: &Value| (c["start_line"].clone(), c["end_line"].clone(), c["symbol"].clone(), c["content"].clone());
    let mut stored: Vec<_> = found["results"].as_array().unwrap().iter().map(key).collect();
    let mut printed: Vec<_> = chunks.iter().map(key).collect();
    stored.sort_by_key(|k| k.0.as_u64());
    printed.sort_by_key(|k| k.0.as_u64());
    assert!(printed.len() >= 2, "{out}");
    assert_eq!(printed, stored, "ctxd chunk vs the index: {found}");

    let (ok, _, err) = chunk("{\"path\": \"a.py\", \"text\": \"x = 1\"}\nnot json\n");
    assert!(!ok && err.contains("stdin line 2"), "{err}");
}
