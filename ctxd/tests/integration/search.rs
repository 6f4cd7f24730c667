//! Routed search, context assembly and completion context over HTTP against the real model.

use std::time::Duration;

use serde_json::{json, Value};

use super::support::*;

#[test]
fn routed_search_context_assembly_and_completion_context() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("src");
    write_corpus(&root, 30);
    // A vendored exact copy: the assembler must not spend budget on it twice.
    std::fs::create_dir_all(root.join("vendor")).unwrap();
    std::fs::copy(root.join("pkg3/m3.py"), root.join("vendor/m3_copy.py")).unwrap();
    let db = tmp.path().join("db");
    index_json(&root, &db);

    // The router: a symbol, a path with a line, free text.
    let search = |q: &str| -> Value {
        serde_json::from_str(&run_ok(ctxd().args(["search", q, "--json", "--db"]).arg(&db))).unwrap()
    };
    let sym = search("SortInvoice3.step");
    assert_eq!(sym["route"], "symbol", "{sym}");
    assert_eq!(sym["intent"], "find-definition", "{sym}");
    assert_eq!(paths_of(&sym)[0], "pkg3/m3.py", "{sym}");
    let by_path = search("pkg5/m5.py:20");
    assert_eq!(by_path["route"], "path", "{by_path}");
    let first = &by_path["results"][0];
    assert_eq!(first["path"], "pkg5/m5.py");
    assert!(first["start_line"].as_u64().unwrap() <= 20 && first["end_line"].as_u64().unwrap() >= 20, "{first}");
    let free = search("how does the playlist get rotated");
    assert_eq!(free["route"], "hybrid");
    assert_eq!(free["intent"], "explain");
    // The per-file cap: no file takes more than 3 of 10 slots.
    let mut counts = std::collections::HashMap::new();
    for p in paths_of(&free) {
        *counts.entry(p).or_insert(0) += 1;
    }
    assert!(counts.values().all(|n| *n <= 3), "{free}");

    // Context assembly: within budget, cited, no line twice, attention order.
    for budget in [120usize, 400, 1500] {
        let out = run_ok(
            ctxd()
                .args(["context", "sort every invoice by factor", "--budget", &budget.to_string(), "--json", "--db"])
                .arg(&db),
        );
        let v: Value = serde_json::from_str(&out).unwrap();
        let used = v["tokens_used"].as_u64().unwrap() as usize;
        assert!(used <= budget, "over budget: {v}");
        assert_eq!(v["budget"].as_u64().unwrap() as usize, budget);
        assert!(v["route"].is_string() && v["intent"].is_string(), "{v}");
        let blocks = v["blocks"].as_array().unwrap();
        assert!(!blocks.is_empty(), "{v}");
        let mut lines = std::collections::HashSet::new();
        let mut texts = std::collections::HashSet::new();
        for b in blocks {
            let (s, e) = (b["start_line"].as_u64().unwrap(), b["end_line"].as_u64().unwrap());
            assert!(b["path"].as_str().is_some_and(|p| !p.is_empty()) && s >= 1 && e >= s, "{b}");
            for l in s..=e {
                assert!(lines.insert((b["path"].as_str().unwrap().to_string(), l)), "line cited twice: {v}");
            }
            assert!(texts.insert(b["content"].as_str().unwrap().trim().to_string()), "duplicate text: {v}");
            assert!(v["context"].as_str().unwrap().contains(&format!("{}:{s}-{e}", b["path"].as_str().unwrap())));
        }
        let ranks: Vec<u64> = blocks.iter().map(|b| b["relevance_rank"].as_u64().unwrap()).collect();
        let n = ranks.len() as u64;
        let expected: Vec<u64> =
            (0..n).step_by(2).chain((1..n).step_by(2).collect::<Vec<_>>().into_iter().rev()).collect();
        assert_eq!(ranks, expected, "most relevant first and last");
        if budget >= 400 {
            let gold = blocks.iter().any(|b| b["path"] == "pkg3/m3.py");
            let copy = blocks.iter().any(|b| b["path"] == "vendor/m3_copy.py");
            assert!(gold || copy, "the invoice sorter is in the context: {v}");
        }
    }

    // The daemon: context over HTTP (plain and streamed) and completion context.
    let d = Daemon::start(&root, &db);
    d.wait_ready();
    let resp = d.post("/v1/context", &json!({"query": "scale the ledger", "budget": 300, "format": "markdown"}));
    assert_eq!(resp.status().as_u16(), 200);
    let v: Value = resp.json().unwrap();
    assert!(v["tokens_used"].as_u64().unwrap() <= 300 && v["context"].as_str().unwrap().starts_with("### "), "{v}");
    let bad = d.post("/v1/context", &json!({"query": "x", "budget": 0}));
    assert_eq!(bad.status().as_u16(), 400);
    let text = d.post("/v1/context/stream", &json!({"query": "scale the ledger", "budget": 300})).text().unwrap();
    let lines: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(lines.len() >= 2 && lines[..lines.len() - 1].iter().all(|l| l["block"].is_object()), "{text}");
    assert_eq!(lines.last().unwrap()["done"]["blocks"].as_array().unwrap().len(), lines.len() - 1, "{text}");

    // Late-interaction rescoring: on by default (its histogram counts each query), off on request.
    let rescored = || d.metric("ctxd_query_rerank_duration_seconds_count").unwrap_or(0.0);
    let before = rescored();
    // Each computed search times its vector and BM25 searches (`ctxd_query_signal_duration_seconds`).
    let searched = |signal: &str| {
        d.metric(&format!("ctxd_query_signal_duration_seconds_count{{signal=\"{signal}\"}}")).unwrap_or(0.0)
    };
    let (vector_before, fulltext_before) = (searched("vector"), searched("fulltext"));
    let encodings = || d.metric("ctxd_query_encodings_total").unwrap_or(0.0);
    let encoded = encodings();
    let on: Value = d.post("/v1/search", &json!({"query": "sort every invoice by factor"})).json().unwrap();
    assert_eq!(rescored(), before + 1.0, "{on}");
    assert_eq!(encodings(), encoded + 1.0, "the query is encoded once: its vector and token states in one pass");
    assert_eq!((searched("vector"), searched("fulltext")), (vector_before + 1.0, fulltext_before + 1.0), "{on}");
    // The same request again at the same version: the answer cache answers, nothing is rescored.
    let cached = |name: &str| d.metric(name).unwrap_or(0.0);
    let answered = cached("ctxd_query_answer_cache_hits_total");
    let again: Value = d.post("/v1/search", &json!({"query": "sort every invoice by factor"})).json().unwrap();
    assert_eq!(again["results"], on["results"]);
    assert_eq!(rescored(), before + 1.0, "a cached answer is not searched again");
    assert_eq!(searched("vector"), vector_before + 1.0, "a cached answer runs no signal");
    assert_eq!(cached("ctxd_query_answer_cache_hits_total"), answered + 1.0);
    // The candidates were scored from the late-interaction codes stored with them, none encoded.
    // The same question as another request (computed again): their scores are kept.
    let (hits, misses) = (cached("ctxd_query_rerank_cache_hits_total"), cached("ctxd_query_rerank_cache_misses_total"));
    let stored = cached("ctxd_query_rerank_stored_total");
    assert!(stored >= 2.0, "the first query scored its candidates from their stored codes: {stored}");
    assert_eq!(misses, 0.0, "no candidate was encoded at query time");
    let again: Value =
        d.post("/v1/search", &json!({"query": "sort every invoice by factor", "rerank": true})).json().unwrap();
    assert_eq!(again["results"], on["results"]);
    assert_eq!(rescored(), before + 2.0, "computed again");
    assert_eq!(cached("ctxd_query_rerank_cache_misses_total"), misses, "nothing encoded again");
    assert!(cached("ctxd_query_rerank_cache_hits_total") >= hits + 2.0);
    let off: Value =
        d.post("/v1/search", &json!({"query": "sort every invoice by factor", "rerank": false})).json().unwrap();
    assert_eq!(rescored(), before + 2.0, "rerank: false skips rescoring");
    for v in [&on, &off] {
        assert!(matches!(paths_of(v)[0].as_str(), "pkg3/m3.py" | "vendor/m3_copy.py"), "{v}");
    }
    let top = on["results"][0]["score"].as_f64().unwrap();
    assert!((1.0..=2.0).contains(&top), "rescored candidates score 1..2: {on}");

    let cursor = std::fs::read_to_string(root.join("pkg2/m2.py")).unwrap();
    let prefix: String = cursor.lines().take(10).collect::<Vec<_>>().join("\n") + "\n        return self.step(";
    let body = json!({"uri": format!("file://{}", root.join("pkg2/m2.py").display()), "language": "python",
        "prefix": prefix, "line": 11, "max_chunks": 3, "strategy": "multi_line"});
    let resp = d.post("/v1/completion-context", &body);
    assert_eq!(resp.status().as_u16(), 200);
    let v: Value = resp.json().unwrap();
    let snippets = v["snippets"].as_array().unwrap();
    assert!(!snippets.is_empty() && snippets.len() <= 3, "{v}");
    for s in snippets {
        let inside = s["uri"] == "pkg2/m2.py"
            && s["line_start"].as_u64().unwrap() <= 11
            && s["line_end"].as_u64().unwrap() >= 11;
        assert!(!inside, "the cursor's own chunk is never returned: {v}");
        assert!(s["importance"].as_u64().unwrap() <= 100);
    }
    let imps: Vec<u64> = snippets.iter().map(|s| s["importance"].as_u64().unwrap()).collect();
    assert!(imps.windows(2).all(|w| w[0] >= w[1]), "importance decays with rank: {v}");
    // The next keystrokes inside a word at the same place are answered from the cache…
    let counter = |name: &str| d.metric(name).unwrap_or(0.0);
    let (hits, misses) =
        (counter("ctxd_query_completion_cache_hits_total"), counter("ctxd_query_completion_cache_misses_total"));
    let mut typed = body.clone();
    typed["prefix"] = json!(format!("{prefix}val"));
    let again: Value = d.post("/v1/completion-context", &typed).json().unwrap();
    assert_eq!(again, v, "same place, same completed words: same answer");
    assert_eq!(counter("ctxd_query_completion_cache_hits_total"), hits + 1.0);
    // …until the next commit.
    let version = d.get("/v1/status").json::<Value>().unwrap()["version"].as_u64().unwrap();
    std::fs::write(root.join("pkg3/fresh.py"), "def freshly_written_helper(step):\n    return step * 2\n").unwrap();
    wait_for("commit", Duration::from_secs(60), || {
        d.get("/v1/status").json::<Value>().unwrap()["version"].as_u64().unwrap() > version
    });
    // (The query side picks the new version up on its own schedule: asked again until it has.)
    wait_for("a new version searched again", Duration::from_secs(10), || {
        let _: Value = d.post("/v1/completion-context", &typed).json().unwrap();
        counter("ctxd_query_completion_cache_misses_total") > misses
    });
    // The path vocabulary follows the commit off the query path: a question naming the new file
    // is routed to it once the background refresh has run (a few seconds), never by a request
    // rebuilding it (`routed/vocab.rs`'s test counts those).
    wait_for("the new path known to the router", Duration::from_secs(30), || {
        let v: Value = d.post("/v1/search", &json!({"query": "pkg3/fresh.py"})).json().unwrap();
        v["route"] == "path" && v["results"][0]["path"] == "pkg3/fresh.py"
    });
    let empty = json!({"uri": "a.py", "prefix": "x = (", "line": 1});
    let v: Value = d.post("/v1/completion-context", &empty).json().unwrap();
    assert_eq!(v["snippets"], json!([]), "too short to search: empty, not an error");

    // `[server] rerank_depth = 0` (here through the environment) turns rescoring off for every
    // request; its default is the searcher's.
    assert_eq!(ctxd_config::ServerConfig::default().rerank_depth, ctxd_search::rerank::RERANK_DEPTH);
    drop(d);
    let mut cmd = ctxd();
    cmd.env("CTXD_SERVER_RERANK_DEPTH", "0").arg("serve");
    let d = Daemon::spawn(cmd, &root, &db);
    d.wait_ready();
    let v: Value = d.post("/v1/search", &json!({"query": "sort every invoice by factor"})).json().unwrap();
    assert!(matches!(paths_of(&v)[0].as_str(), "pkg3/m3.py" | "vendor/m3_copy.py"), "{v}");
    assert_eq!(d.metric("ctxd_query_rerank_duration_seconds_count").unwrap_or(0.0), 0.0, "nothing rescored");
}

/// A daemon builds the vector index as soon as its first scan is committed (here over 20 rows,
/// with the interval an hour away), not at the first scheduled maintenance pass.
#[test]
fn the_vector_index_is_built_once_the_first_scan_is_committed() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("src");
    write_corpus(&root, 30);
    let db = tmp.path().join("db");
    let mut cmd = ctxd();
    cmd.env("CTXD_INDEX_VECTOR_INDEX_MIN_ROWS", "20").env("CTXD_INDEX_MAINTENANCE_INTERVAL_SECS", "3600").arg("serve");
    let d = Daemon::spawn(cmd, &root, &db);
    d.wait_ready();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let indexed = || {
        rt.block_on(async {
            let index = ctxd_index::store::Index::open(&db.to_string_lossy()).await.unwrap();
            index.maintenance().has_vector_index().await.unwrap()
        })
    };
    wait_for("the vector index", Duration::from_secs(60), indexed);
    let v: Value = d.post("/v1/search", &json!({"query": "sort every invoice by factor"})).json().unwrap();
    assert!(matches!(paths_of(&v)[0].as_str(), "pkg3/m3.py"), "searched through the index: {v}");
}

/// While the writer commits, a repeated question whose files did not change is answered from
/// the answer kept at the earlier version, saying so (`carried_ms`), and computed again in the
/// background; a commit that changes one of its files makes it computed again at once.
#[test]
fn answers_are_carried_across_commits_that_change_none_of_their_files() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("src");
    write_corpus(&root, 30);
    let db = tmp.path().join("db");
    index_json(&root, &db);
    let d = Daemon::start(&root, &db);
    d.wait_ready();
    let question = json!({"query": "sort every invoice by factor"});
    let ask = || -> Value { d.post("/v1/search", &question).json().unwrap() };
    let version_of = |v: &Value| v["index"]["version"].as_u64().unwrap();
    let latest = || d.get("/v1/status").json::<Value>().unwrap()["version"].as_u64().unwrap();
    // Writes `text` to `path` and waits until the version that holds it is searched: a new
    // version alone is no sign (an index fold or a maintenance pass makes versions too).
    let commit = |path: &str, text: &str, marker: &str| {
        std::fs::write(root.join(path), text).unwrap();
        wait_for("the commit searched", Duration::from_secs(60), || {
            let v: Value = d.post("/v1/search", &json!({"query": marker, "mode": "bm25", "k": 50})).json().unwrap();
            v["results"].as_array().is_some_and(|r| r.iter().any(|h| h["content"].as_str().unwrap().contains(marker)))
        });
    };
    let first = ask();
    assert!(first.get("carried_ms").is_none() && first.get("stale_ms").is_none(), "{first}");
    let top = paths_of(&first)[0].clone();

    // A file no candidate of the answer came from: the answer is carried to the new version.
    commit("pkg1/weather.md", "# Weather\n\nRain tomorrow, sun on Sunday.\n", "Sunday");
    let carried_hits = || d.metric("ctxd_query_answer_cache_carried_hits_total").unwrap_or(0.0);
    let mut carried = Value::Null;
    wait_for("the answer carried to the new version", Duration::from_secs(20), || {
        carried = ask();
        carried.get("carried_ms").is_some()
    });
    assert_eq!(carried["results"], first["results"], "the same files, unchanged: the same answer");
    assert_eq!(version_of(&carried), version_of(&first), "it names the version it was computed at");
    assert!(carried_hits() >= 1.0);
    // Its question is computed again in the background: the next answers are the latest ones.
    wait_for("the carried answer replaced", Duration::from_secs(30), || {
        let v = ask();
        v.get("carried_ms").is_none() && version_of(&v) > version_of(&first)
    });
    assert!(d.metric("ctxd_query_answer_cache_revalidations_total").unwrap_or(0.0) >= 1.0);

    // A commit changing the file the answer ranked first: no answer of an earlier version is
    // carried across it (one computed after it may be carried on, across an index fold).
    let fresh = ask();
    let edited_after = latest();
    let mut text = std::fs::read_to_string(root.join(&top)).unwrap();
    text.push_str("\n\ndef invoice_factor_note():\n    return 'sorted by factor'\n");
    commit(&top, &text, "invoice_factor_note");
    wait_for("an answer at the version that changed its file", Duration::from_secs(20), || {
        let v = ask();
        let carried_across = v.get("carried_ms").is_some() && version_of(&v) <= edited_after;
        assert!(!carried_across, "an answer whose file changed is never carried: {v}");
        version_of(&v) > version_of(&fresh)
    });
}
