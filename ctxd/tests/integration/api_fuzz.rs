//! The HTTP API fuzzed from its own contract, and the MCP tools from their input schemas.
//!
//! A daemon behind a bearer token serves the demo project. `GET /openapi.json` (no token) is
//! the document `serve/src/openapi.rs` builds from the handlers' types; Schemathesis (PyPI,
//! installed by `scripts/test.sh` into the test venv) loads it — which validates it as OpenAPI
//! 3.1 — and fuzzes every operation with a fixed seed and a bounded number of examples, valid and
//! invalid, with these checks: no 5xx (`not_a_server_error`), every status and content type one
//! the document declares, every JSON answer valid against its schema, and no route behind the
//! token answering without it (`ignored_auth`). Then `ctxd/tests/mcp_fuzz.py` draws every MCP
//! tool's arguments from its `inputSchema` (Hypothesis) and calls each over `POST /mcp`: a
//! JSON-RPC result every time, never an error or a 5xx. (A handler that panicked would drop its
//! connection: both fuzzers count that as a failure.) The daemon must still be healthy after.
//!
//! `CTXD_FUZZ_EXAMPLES` (default 40) sets the examples per operation and per tool; the seed
//! is fixed, so a failure reproduces with the command the test prints.

use serde_json::Value;

use crate::support::*;

const TOKEN: &str = "fuzz-test-token-0123456789";
const SEED: &str = "20261128";

fn examples() -> String {
    std::env::var("CTXD_FUZZ_EXAMPLES").unwrap_or_else(|_| "40".into())
}

/// Runs `cmd`, printing what it said, and returns whether it succeeded.
fn run_printed(cmd: &mut std::process::Command) -> bool {
    eprintln!("running {cmd:?}");
    let out = cmd.output().expect("starting the fuzzer");
    eprintln!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    out.status.success()
}

#[test]
fn every_route_and_every_mcp_tool_survive_a_fuzz_from_their_own_schemas() {
    require_model();
    let probe = python().args(["-c", "import schemathesis, hypothesis"]).output().unwrap();
    assert!(
        probe.status.success(),
        "schemathesis is missing from the test venv: run scripts/test.sh (it installs schemathesis from PyPI)"
    );
    let (tmp, _root, daemon) = serve_demo_with_token(TOKEN);

    // The contract is served without the token; index data is not.
    let doc = daemon.get("/openapi.json");
    assert_eq!(doc.status().as_u16(), 200);
    let doc: Value = doc.json().unwrap();
    assert_eq!(doc["openapi"], "3.1.0");
    let operations: usize = doc["paths"].as_object().unwrap().values().map(|p| p.as_object().unwrap().len()).sum();
    assert!(operations >= 30, "{operations} operations");
    assert_eq!(daemon.get("/v1/status").status().as_u16(), 401);

    let checks = "not_a_server_error,status_code_conformance,content_type_conformance,\
                  response_schema_conformance,ignored_auth";
    let schema_url = format!("{}/openapi.json", daemon.base);
    let auth = format!("Authorization: Bearer {TOKEN}");
    let report = tmp.path().join("schemathesis");
    let mut st = python();
    st.args(["-m", "schemathesis.cli", "run", &schema_url, "--url", &daemon.base, "-H", &auth])
        .args(["--checks", checks, "--max-examples", &examples(), "--seed", SEED, "--workers", "1"])
        .args(["--phases", "examples,coverage,fuzzing", "--request-timeout", "120", "--no-color"])
        .args(["--suppress-health-check", "all", "--generation-database", "none", "--report-dir"])
        .arg(&report)
        // Its caches (`.schemathesis/`) go to the test's directory, not the checkout.
        .current_dir(tmp.path())
        .env("SCHEMATHESIS_HOOKS", "")
        .env("NO_COLOR", "1");
    assert!(run_printed(&mut st), "schemathesis found failures (its output above); the run reproduces with its seed");

    let mut mcp = python();
    mcp.arg(repo_root().join("ctxd/tests/mcp_fuzz.py")).args([&daemon.base, TOKEN, &examples(), SEED]);
    assert!(run_printed(&mut mcp), "an MCP tool failed the fuzz (output above)");

    let health = daemon.get("/healthz");
    assert_eq!(health.status().as_u16(), 200, "the daemon survived the fuzz");
    let status = daemon.client.get(format!("{}/v1/status", daemon.base)).bearer_auth(TOKEN).send().unwrap();
    assert_eq!(status.status().as_u16(), 200);
}
