//! `ctxd setup`: each client's file written where that client reads it, in a form its own parser
//! reads (JSON; TOML and YAML through Python's `tomllib` and PyYAML), idempotent, `--print`
//! writing nothing, `--remove` undoing it — and the written stdio entry starting a working server.

use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;

use serde_json::{json, Value};

use crate::support::{copy_dir, ctxd, index_json, python, repo_root, run_ok};

#[test]
fn setup_writes_each_clients_config_and_the_entry_starts_a_working_server() {
    let tmp = tempfile::tempdir().unwrap();
    let (home, root, db) = (tmp.path().join("home"), tmp.path().join("proj"), tmp.path().join("db"));
    std::fs::create_dir_all(&home).unwrap();
    copy_dir(&repo_root().join("examples/demo"), &root);
    index_json(&root, &db);
    std::fs::create_dir_all(root.join(".cursor")).unwrap();
    std::fs::write(root.join(".cursor/mcp.json"), r#"{"mcpServers": {"other": {"command": "other-server"}}}"#).unwrap();
    let setup = |args: &[&str]| -> String {
        run_ok(
            ctxd()
                .env("HOME", &home)
                .env_remove("XDG_CONFIG_HOME")
                .env_remove("CODEX_HOME")
                .arg("setup")
                .args(args)
                .arg("--root")
                .arg(&root)
                .arg("--db")
                .arg(&db),
        )
    };
    let clients = [
        ("claude-code", root.join(".mcp.json")),
        ("cursor", root.join(".cursor/mcp.json")),
        ("vscode", root.join(".vscode/mcp.json")),
        ("codex", home.join(".codex/config.toml")),
        ("claude-desktop", home.join(".config/Claude/claude_desktop_config.json")),
        ("continue", root.join(".continue/mcpServers/ctxd.yaml")),
        ("windsurf", home.join(".codeium/windsurf/mcp_config.json")),
    ];
    // An index that does not exist yet: said, with the command that builds it.
    let out = ctxd()
        .env("HOME", &home)
        .args(["setup", "cursor", "--print", "--root"])
        .arg(&root)
        .args(["--db", "/nonexistent/db"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no index at /nonexistent/db yet") && err.contains("ctxd index"), "{err}");
    // --print writes nothing.
    let printed = setup(&["codex", "--print"]);
    assert!(printed.contains("would be written as") && printed.contains("[mcp_servers.ctxd]"), "{printed}");
    assert!(!home.join(".codex/config.toml").exists());
    for (client, file) in &clients {
        let out = setup(&[client]);
        assert!(out.contains("written") || out.contains("updated"), "{client}: {out}");
        assert!(file.exists(), "{client}: {} not written", file.display());
        assert!(setup(&[client]).contains("already up to date"), "{client}: a second run changes nothing");
    }
    // Each file read back by a parser of its format: the ctxd entry's command and arguments.
    let read_back = r#"
import json, sys, tomllib, yaml
out = {}
for client, path in json.loads(sys.argv[1]).items():
    text = open(path).read()
    if path.endswith(".toml"):
        out[client] = tomllib.loads(text)["mcp_servers"]["ctxd"]
    elif path.endswith(".yaml"):
        block = yaml.safe_load(text)
        assert block["schema"] == "v1" and block["name"] == "ctxd", block
        out[client] = block["mcpServers"][0]
    else:
        doc = json.loads(text)
        out[client] = doc["servers" if client == "vscode" else "mcpServers"]["ctxd"]
print(json.dumps(out))
"#;
    let paths: serde_json::Map<String, Value> =
        clients.iter().map(|(c, f)| (c.to_string(), json!(f.display().to_string()))).collect();
    let out = python().args(["-c", read_back, &Value::Object(paths).to_string()]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let entries: Value = serde_json::from_slice(&out.stdout).unwrap();
    let want_args = json!(["mcp", "--db", db.display().to_string(), "--root", root.display().to_string()]);
    for (client, _) in &clients {
        let e = &entries[*client];
        assert!(e["command"].as_str().unwrap().ends_with("/ctxd"), "{client}: {e}");
        assert_eq!(e["args"], want_args, "{client}: {e}");
    }
    assert_eq!(entries["vscode"]["type"], "stdio");
    assert_eq!(entries["claude-code"]["type"], "stdio");
    let cursor: Value = serde_json::from_str(&std::fs::read_to_string(root.join(".cursor/mcp.json")).unwrap()).unwrap();
    assert_eq!(cursor["mcpServers"]["other"]["command"], "other-server", "other servers are kept");

    // The entry as a client would start it: initialize, then a tool call over stdio.
    let e = &entries["cursor"];
    let args: Vec<&str> = e["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
    let mut child = std::process::Command::new(e["command"].as_str().unwrap())
        .args(&args)
        .env("CTXD_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18"}});
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                      "params": {"name": "locate", "arguments": {"text": "verify a password against the stored hash"}}});
    writeln!(stdin, "{init}\n{call}").unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert_eq!(first["result"]["serverInfo"]["name"], "ctxd", "{first}");
    let second: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert_eq!(second["result"]["structuredContent"]["files"][0]["path"], "src/auth.rs", "{second}");
    drop(stdin);
    child.wait().unwrap();

    // --remove undoes it: the other server stays, ctxd's entry and its own files go.
    for (client, file) in &clients {
        setup(&[client, "--remove"]);
        match *client {
            "continue" => assert!(!file.exists(), "continue's block file is deleted"),
            "codex" => assert!(!std::fs::read_to_string(file).unwrap().contains("ctxd"), "{client}"),
            _ => assert!(!std::fs::read_to_string(file).unwrap().contains("\"ctxd\""), "{client}"),
        }
    }
    let cursor: Value = serde_json::from_str(&std::fs::read_to_string(root.join(".cursor/mcp.json")).unwrap()).unwrap();
    assert_eq!(cursor, json!({"mcpServers": {"other": {"command": "other-server"}}}));
    // A daemon's URL gives the HTTP form with its token; a broken file is left alone.
    let with_token = |scope: &str| {
        ctxd()
            .env("HOME", &home)
            .env("CTXD_AUTH_TOKEN", "tok-1")
            .args(["setup", "vscode", "--url", "http://127.0.0.1:7700/mcp", "--tools", "minimal", "--print"])
            .args(["--scope", scope, "--root"])
            .arg(&root)
            .output()
            .unwrap()
    };
    let out = with_token("user");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("\"url\": \"http://127.0.0.1:7700/mcp?tools=minimal\"") && text.contains("Bearer tok-1"),
        "{text}"
    );
    // Never a token in a project file (they are usually committed).
    let out = with_token("project");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("usually committed"));
    // Removing what was never written writes nothing.
    let fresh = tmp.path().join("fresh-home");
    std::fs::create_dir_all(&fresh).unwrap();
    run_ok(ctxd().env("HOME", &fresh).args(["setup", "windsurf", "--remove", "--root"]).arg(&root));
    assert!(!fresh.join(".codeium").exists(), "nothing created by a removal");
    std::fs::write(root.join(".mcp.json"), "{ broken").unwrap();
    let out = ctxd().env("HOME", &home).args(["setup", "claude-code", "--root"]).arg(&root).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("nothing was written"));
    assert_eq!(std::fs::read_to_string(root.join(".mcp.json")).unwrap(), "{ broken");
}
