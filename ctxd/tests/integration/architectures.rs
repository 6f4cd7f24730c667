//! The non-BERT architectures end to end, on the random-weight fixtures of
//! `models/tests/fixtures/arch` (their `reference.json` holds what transformers computed):
//! `ctxd embed` gives the reference's document vectors and, with `--query`, its query vectors
//! (the model card's prompt put first); `ctxd index` and `ctxd search` run a NomicBERT model
//! with its prompts, its window fitting the chunk budget (said in the log).

use std::ffi::OsStr;
use std::path::PathBuf;

use serde_json::Value;

use crate::support::{cosine, ctxd, run_ok};

fn fixture(name: &str) -> PathBuf {
    crate::support::repo_root().join("models/tests/fixtures/arch").join(name)
}

/// `ctxd embed --model DIR --jsonl [extra]` of `texts`: the vectors and stderr.
fn embed(model: &std::path::Path, extra: &[&str], texts: &[String]) -> (Vec<Vec<f32>>, String) {
    let mut args: Vec<&OsStr> = ["--jsonl", "--device", "cpu", "--model"].map(OsStr::new).to_vec();
    args.push(model.as_os_str());
    args.extend(extra.iter().map(OsStr::new));
    let input: String = texts.iter().map(|t| serde_json::to_string(t).unwrap() + "\n").collect();
    crate::support::embed_stdin(&args, &input)
}

fn floats(v: &Value) -> Vec<Vec<f32>> {
    serde_json::from_value(v.clone()).unwrap()
}

#[test]
fn embed_gives_the_reference_vectors_for_documents_and_queries() {
    for name in ["qwen3", "nomic_bert", "modernbert", "jina_bert"] {
        let dir = fixture(name);
        let reference: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("reference.json")).unwrap()).unwrap();
        let texts: Vec<String> = serde_json::from_value(reference["texts"].clone()).unwrap();
        let queries: Vec<String> = serde_json::from_value(reference["queries"].clone()).unwrap();
        let (docs, err) = embed(&dir, &[], &texts);
        assert!(err.contains("as documents"), "{name}: {err}");
        for (got, want) in docs.iter().zip(floats(&reference["documents"])) {
            assert!(cosine(got, &want) >= 0.9999, "{name}: a document at {}", cosine(got, &want));
        }
        let (qs, err) = embed(&dir, &["--query"], &queries);
        for (got, want) in qs.iter().zip(floats(&reference["query_vectors"])) {
            assert!(cosine(got, &want) >= 0.9999, "{name}: a query at {}: {err}", cosine(got, &want));
        }
        if name == "qwen3" {
            assert!(err.contains("after the prompt \"Instruct:"), "{err}");
            // Without its instruction a query is another vector: the prompt is really applied.
            let (bare, _) = embed(&dir, &["--query", "--query-prefix", ""], &queries);
            assert!(cosine(&bare[0], &qs[0]) < 0.999, "the query prompt changed nothing");
        }
    }
}

#[test]
fn a_nomic_bert_model_indexes_and_searches_with_its_window_and_prompts() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("src");
    std::fs::create_dir_all(&root).unwrap();
    // One long file: its chunks must fit the fixture's 128-token window.
    let long: String =
        (0..60).map(|i| format!("def handler_{i}(request):\n    return route(request, {i})\n\n")).collect();
    std::fs::write(root.join("handlers.py"), long).unwrap();
    std::fs::write(root.join("config.py"), "def read_config(path):\n    return json.load(open(path))\n").unwrap();
    let db = tmp.path().join("db");
    let model = fixture("nomic_bert");
    let out = ctxd()
        .arg("index")
        .arg(&root)
        .arg("--db")
        .arg(&db)
        .args(["--device", "cpu", "--json", "--model"])
        .arg(&model)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("chunk budget") && err.contains("cut to 112"), "the window fits the budget: {err}");
    assert!(err.contains("nomic_bert runs on candle") && err.contains("search_document"), "{err}");
    let summary: Value = serde_json::from_str(String::from_utf8_lossy(&out.stdout).trim()).unwrap();
    assert!(summary["chunks_written"].as_u64().unwrap_or(0) >= 3, "{summary}");
    let found = run_ok(
        ctxd()
            .args(["search", "read the config file", "--json", "--k", "5", "--device", "cpu", "--db"])
            .arg(&db)
            .arg("--model")
            .arg(&model),
    );
    let found: Value = serde_json::from_str(found.trim()).unwrap();
    let results = found["results"].as_array().expect("results");
    assert!(!results.is_empty(), "{found}");
    let paths: Vec<&str> = results.iter().filter_map(|r| r["path"].as_str()).collect();
    assert!(paths.contains(&"config.py"), "{paths:?}");
    // A new document prefix is another model id for the index's vectors.
    let out = ctxd()
        .arg("index")
        .arg(&root)
        .arg("--db")
        .arg(&db)
        .args(["--device", "cpu", "--json", "--document-prefix", "passage: ", "--model"])
        .arg(&model)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("+doc-"), "a changed document prefix went unnoticed: {err}");
}

#[test]
fn a_cross_encoder_reorders_the_candidates_of_a_search() {
    let tmp = tempfile::tempdir().unwrap();
    let root = crate::support::repo_root().join("examples/demo");
    let db = tmp.path().join("db");
    run_ok(ctxd().arg("index").arg(&root).arg("--db").arg(&db).arg("--json"));
    let search = |extra: &[&str]| -> (Vec<String>, String) {
        let out = ctxd()
            .args(["search", "where are passwords checked", "--json", "--k", "30", "--device", "cpu", "--db"])
            .arg(&db)
            .args(extra)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{err}");
        let found: Value = serde_json::from_str(String::from_utf8_lossy(&out.stdout).trim()).unwrap();
        let ids = found["results"]
            .as_array()
            .expect("results")
            .iter()
            .map(|r| r["path"].as_str().unwrap_or("").to_string())
            .collect();
        (ids, err)
    };
    let (plain, _) = search(&[]);
    let cross = crate::support::repo_root().join("models/tests/fixtures/cross/bert");
    let (reranked, err) = search(&["--rerank-model", cross.to_str().unwrap()]);
    assert!(err.contains("reranking with the cross-encoder"), "{err}");
    assert!(!plain.is_empty());
    // Rescoring reorders the candidates it is given (the per-file cap then keeps other chunks
    // of a file); it never brings in other files.
    let files = |ids: &[String]| ids.iter().cloned().collect::<std::collections::BTreeSet<_>>();
    assert_eq!(files(&plain), files(&reranked), "the same files");
    assert_ne!(plain, reranked, "the cross-encoder's scores changed the order");
    // A checkpoint that is no cross-encoder is refused by name.
    let out = ctxd()
        .args(["search", "passwords", "--device", "cpu", "--db"])
        .arg(&db)
        .arg("--rerank-model")
        .arg(fixture("nomic_bert"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("not a cross-encoder"), "{err}");
}
