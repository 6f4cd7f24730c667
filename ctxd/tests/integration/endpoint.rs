//! An embedding server, both ways: a `ctxd serve` answers `/v1/embeddings` (OpenAI's form) and
//! `/embed` + `/info` (text-embeddings-inference's) with its model, and other ctxd processes
//! embed through it (`--endpoint`, `[model] endpoint`) — storing the vectors a local model
//! would (cosine ≥ 0.9999 chunk by chunk), waiting out an endpoint that is down (retries
//! counted, nothing lost) and refusing one that serves another model.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::{
    assert_same_vectors, copy_dir, cosine, ctxd, repo_root, run_ok, vectors_by_chunk, wait_for, Daemon,
};

/// The demo project in `dir/demo`.
fn demo(dir: &Path) -> std::path::PathBuf {
    let root = dir.join("demo");
    copy_dir(&repo_root().join("examples/demo"), &root);
    root
}

/// An embedding server: a daemon over a one-file folder.
fn embedding_server(dir: &Path, listen: &str) -> Daemon {
    let small = dir.join("small");
    std::fs::create_dir_all(&small).unwrap();
    std::fs::write(small.join("a.md"), "# a\nsmall\n").unwrap();
    let mut cmd = ctxd();
    cmd.args(["serve", "--listen", listen, "--flight-listen", "127.0.0.1:0", "--watch"])
        .arg(&small)
        .arg("--db")
        .arg(dir.join(format!("server-db-{}", listen.replace([':', '.'], "-"))));
    Daemon::spawn_raw(&mut cmd)
}

fn embed_lines(extra: &[&str], texts: &str) -> Vec<Vec<f32>> {
    let args: Vec<&std::ffi::OsStr> = extra.iter().map(std::ffi::OsStr::new).collect();
    crate::support::embed_stdin(&args, texts).0
}

#[test]
fn an_endpoint_embeds_what_the_local_model_would_in_both_forms() {
    let tmp = tempfile::tempdir().unwrap();
    let root = demo(tmp.path());
    let server = embedding_server(tmp.path(), "127.0.0.1:0");
    server.wait_ready();

    // The server's own answers, in both forms.
    let resp = server
        .post("/v1/embeddings", &json!({"input": ["fn main() {}", "hash a password"], "model": "all-MiniLM-L6-v2"}));
    assert_eq!(resp.status().as_u16(), 200);
    let body: Value = resp.json().unwrap();
    assert_eq!(body["object"], "list");
    assert_eq!(body["model"], "sentence-transformers/all-MiniLM-L6-v2");
    assert_eq!(body["data"][1]["index"], 1);
    assert_eq!(body["data"][0]["embedding"].as_array().unwrap().len(), 384);
    let other = server.post("/v1/embeddings", &json!({"input": "x", "model": "text-embedding-3-small"}));
    assert_eq!(other.status().as_u16(), 404, "another model is refused");
    let tei: Value = server.post("/embed", &json!({"inputs": "hash a password"})).json().unwrap();
    assert_eq!(tei.as_array().unwrap().len(), 1);
    let info: Value = server.get("/info").json().unwrap();
    assert_eq!(info["model_id"], "sentence-transformers/all-MiniLM-L6-v2");
    assert_eq!(server.post("/embed", &json!({"inputs": []})).status().as_u16(), 400);

    // `ctxd embed`, here and through the server: the same vectors.
    let texts = "check a password against its hash\nfn main() { println!(\"hi\"); }\n";
    let local = embed_lines(&[], texts);
    let remote = embed_lines(&["--endpoint", &server.base], texts);
    assert_eq!((local.len(), remote.len()), (2, 2));
    for (a, b) in local.iter().zip(&remote) {
        assert!(cosine(a, b) >= 0.9999, "ctxd embed through the endpoint: cosine {}", cosine(a, b));
    }
    let tei_vec = tei[0].as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect::<Vec<_>>();
    assert!(cosine(&tei_vec, &embed_lines(&[], "hash a password\n")[0]) >= 0.9999);

    // Indexing the demo through each form stores the local index's vectors.
    let local_db = tmp.path().join("local");
    run_ok(ctxd().arg("index").arg(&root).arg("--db").arg(&local_db));
    let local_vectors = vectors_by_chunk(&local_db);
    for kind in ["openai", "tei"] {
        let db = tmp.path().join(kind);
        run_ok(ctxd().arg("index").arg(&root).arg("--db").arg(&db).args([
            "--endpoint",
            &server.base,
            "--endpoint-kind",
            kind,
        ]));
        assert_same_vectors(&local_vectors, &vectors_by_chunk(&db), &format!("demo through the {kind} endpoint"));
        // …and searches it, embedding the query through the endpoint too.
        let out =
            run_ok(ctxd().args(["search", "check a password against its hash", "--json", "--db"]).arg(&db).args([
                "--endpoint",
                &server.base,
                "--endpoint-kind",
                kind,
            ]));
        assert!(out.contains("src/auth.rs"), "{kind}: {out}");
    }
}

#[test]
fn a_down_endpoint_pauses_indexing_and_nothing_is_lost() {
    let tmp = tempfile::tempdir().unwrap();
    let root = demo(tmp.path());
    // A free port, nothing listening on it yet.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let endpoint = format!("http://127.0.0.1:{port}");
    let db = tmp.path().join("db");
    let mut cmd: Command = ctxd();
    cmd.env("CTXD_EMBED_ENDPOINT", &endpoint);
    let client = Daemon::spawn(cmd_serve(cmd), &root, &db);
    // The pipeline waits, retrying and counting each failed try; the daemon answers meanwhile.
    wait_for("failed tries counted", Duration::from_secs(60), || {
        client.metric("ctxd_embed_endpoint_errors_total{kind=\"openai\"}").unwrap_or(0.0) >= 2.0
    });
    assert_eq!(client.get("/readyz").status().as_u16(), 503, "not ready while nothing can be embedded");
    // `ctxd doctor` says so at once (one try, no waiting).
    let doctor = ctxd().args(["doctor", "--endpoint", &endpoint]).output().unwrap();
    let said = String::from_utf8_lossy(&doctor.stdout).to_string() + &String::from_utf8_lossy(&doctor.stderr);
    assert!(!doctor.status.success(), "doctor passed a closed endpoint: {said}");
    assert!(
        said.contains(&format!("{endpoint}/v1/embeddings")) && said.contains("start the embedding server"),
        "{said}"
    );
    // The endpoint comes up: indexing resumes and completes with every chunk.
    let server = embedding_server(tmp.path(), &format!("127.0.0.1:{port}"));
    client.wait_ready();
    let doctor = run_ok(ctxd().args(["doctor", "--endpoint", &endpoint]));
    assert!(doctor.contains("embeds through the endpoint"), "{doctor}");
    drop(server);
    let local_db = tmp.path().join("local");
    run_ok(ctxd().arg("index").arg(&root).arg("--db").arg(&local_db));
    let got = vectors_by_chunk(&db);
    assert_same_vectors(&vectors_by_chunk(&local_db), &got, "demo indexed across an endpoint outage");
}

/// `cmd` as `ctxd serve` (its listen flags come from [`Daemon::spawn`]).
fn cmd_serve(mut cmd: Command) -> Command {
    cmd.arg("serve");
    cmd
}

#[test]
fn an_endpoint_serving_another_model_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let server = embedding_server(tmp.path(), "127.0.0.1:0");
    server.wait_ready();
    // The server runs the default model; this client is told another model of the same size
    // (the f16 copy ctxd makes of it: another model id).
    let half = ctxd_models::resolve::ctxd_model_dir().join("sentence-transformers/all-MiniLM-L6-v2-f16");
    if !half.join("model.safetensors").is_file() {
        eprintln!("skipped: no f16 copy of the default model (scripts/convert-f16.sh, which scripts/test.sh runs)");
        return;
    }
    for kind in ["openai", "tei"] {
        let out = ctxd()
            .arg("embed")
            .arg("--model")
            .arg(&half)
            .args(["--endpoint", &server.base, "--endpoint-kind", kind])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .and_then(|mut c| {
                std::io::Write::write_all(c.stdin.as_mut().unwrap(), b"hello\n")?;
                c.wait_with_output()
            })
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{kind}: a wrong model was accepted");
        assert!(err.contains("all-MiniLM-L6-v2"), "{kind}: the error names the models: {err}");
    }
}
