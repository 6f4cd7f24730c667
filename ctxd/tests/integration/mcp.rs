//! The MCP tools over stdio and `POST /mcp` (the official SDK's client), behind a bearer token,
//! never answering outside the indexed root.

use std::time::Duration;

use serde_json::{json, Value};

use super::support::*;

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

    // MCP over stdio, driven by the official Python SDK: the client's one JSON summary line.
    let stdio_client = |mode: &str| -> Value {
        let out = python()
            .arg(repo_root().join("ctxd/tests/mcp_client.py"))
            .args([mode, env!("CARGO_BIN_EXE_ctxd")])
            .arg(&db)
            .arg(&root)
            .output()
            .unwrap();
        assert!(out.status.success(), "mcp client {mode}: {}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(out.stdout.rsplit(|b| *b == b'\n').find(|l| !l.is_empty()).unwrap()).unwrap()
    };
    let v = stdio_client("stdio");
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

    // `--tools minimal`: three tools, instructions naming only them, the others refused with the way out.
    let v = stdio_client("stdio-minimal");
    assert_eq!(v["tools"], json!(["search", "get_context", "locate"]), "{v}");
    assert_eq!(v["locate_top"], "src/auth.rs", "{v}");
    let instructions = v["instructions"].as_str().unwrap();
    assert!(instructions.contains("locate first") && !instructions.contains("impact"), "{instructions}");
    let refused = v["refused"].as_str().unwrap_or_default();
    assert!(refused.contains("'callers' is not offered") && refused.contains("--tools all"), "{v}");

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
