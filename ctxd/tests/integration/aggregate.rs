//! `POST /v1/aggregate` gathering from the local index, another ctxd and an MCP server, and
//! surviving a dead and a slow source.

use std::time::Duration;

use serde_json::{json, Value};

use super::support::*;

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
    // One search first, so the aggregate below does not time the remote's cold first query (a
    // loaded 2-core CI machine took over 2 s for it through MCP).
    let warm = remote.client.post(format!("{}/v1/search", remote.base)).bearer_auth("remote-secret");
    assert_eq!(warm.json(&json!({"query": "password hash"})).send().unwrap().status().as_u16(), 200);
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
timeout_ms = 15000
[[aggregate.sources]]
name = "team-mcp"
kind = "mcp"
url = "{remote}/mcp"
token_env = "REMOTE_TOKEN"
timeout_ms = 15000
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
    // The local source answers within its 2 s default: one search first, so the timing below is
    // not that of a cold first query (a loaded 2-core CI machine took longer once).
    assert_eq!(d.post("/v1/search", &json!({"query": "password hash"})).status().as_u16(), 200);

    let ask = |body: Value| -> Value {
        let resp = d.post("/v1/aggregate", &body);
        assert_eq!(resp.status().as_u16(), 200);
        resp.json().unwrap()
    };
    let body = json!({"query": "verify the password against the stored hash", "budget": 800});
    let started = std::time::Instant::now();
    let v = ask(body.clone());
    // Not held up by the slow source, whose server answers after 5 s.
    assert!(started.elapsed() < Duration::from_millis(4_800), "the slow source is cut at its timeout");
    let status = |v: &Value, name: &str| -> Value {
        v["sources"].as_array().unwrap().iter().find(|s| s["name"] == name).unwrap().clone()
    };
    // Cut at its 300 ms timeout, not at the 5 s its server sleeps.
    let slow_ms = status(&v, "slow")["latency_ms"].as_f64().unwrap();
    assert!(slow_ms < 2_500.0, "the slow source is cut at its timeout: {v}");
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
