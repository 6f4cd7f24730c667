//! A sharded first build of an `s3://` source on moto: three `ctxd index --shard I/3` processes
//! (one killed with SIGKILL mid-share and run again) and `ctxd index --commit` give the index one
//! `ctxd index` run gives; the commit refuses while a shard is missing, naming it; the writer's
//! first start downloads none of the objects the shards indexed.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{json, Value};

use super::support::*;

/// `(path, id)` of every row of `table` of the index at `db` (symbols: `symbol_id`, edges: `edge_id`), sorted.
fn table_ids(db: &Path, table: &str, id: &str) -> Vec<String> {
    let script = "import sys, lance\nt = lance.dataset(sys.argv[1]).to_table(columns=['path', sys.argv[2]])\n\
                  print('\\n'.join(sorted(f'{p} {i}' for p, i in zip(t['path'].to_pylist(), t[sys.argv[2]].to_pylist()))))";
    let out = python().arg("-c").arg(script).arg(db.join(format!("{table}.lance"))).arg(id).output().unwrap();
    assert!(out.status.success(), "pylance: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).lines().map(str::to_string).collect()
}

#[test]
fn sharded_build_equals_one_build_survives_a_killed_shard_and_the_writer_downloads_nothing() {
    require_model();
    let s3 = S3Server::start();
    let tmp = tempfile::tempdir().unwrap();
    let corpus = tmp.path().join("corpus");
    write_corpus(&corpus, 40);
    std::fs::write(
        corpus.join("README.md"),
        "# Ledger tools\n\n## Rounding\n\nEvery amount is rounded half to even.\n",
    )
    .unwrap();
    let mut ops = vec![("bucket".to_string(), String::new(), String::new())];
    for dir in std::fs::read_dir(&corpus).unwrap().flatten() {
        let files: Vec<std::path::PathBuf> = match dir.path().is_dir() {
            true => std::fs::read_dir(dir.path()).unwrap().flatten().map(|f| f.path()).collect(),
            false => vec![dir.path()],
        };
        for f in files {
            let key = format!("src/{}", f.strip_prefix(&corpus).unwrap().display());
            ops.push(("put".into(), key, std::fs::read_to_string(&f).unwrap()));
        }
    }
    let ops: Vec<(&str, &str, &str)> = ops.iter().map(|(a, b, c)| (a.as_str(), b.as_str(), c.as_str())).collect();
    s3.ops("corpus", &ops);
    let config = |name: &str| {
        let path = tmp.path().join(format!("{name}.toml"));
        let mirror = tmp.path().join(format!("mirror-{name}"));
        std::fs::write(
            &path,
            format!("[source]\npoll_interval_secs = 1\nmirror_dir = {:?}\n", mirror.to_str().unwrap()),
        )
        .unwrap();
        path
    };
    let cmd = |args: &[&str], cfg: &Path, db: &Path| {
        let mut c = ctxd();
        c.args(args).arg("--config").arg(cfg).arg("--db").arg(db);
        s3.env(&mut c);
        c
    };
    let (single, sharded) = (tmp.path().join("single"), tmp.path().join("sharded"));
    let one: Value = serde_json::from_str(
        run_ok(&mut cmd(&["index", "s3://corpus/src", "--json"], &config("single"), &single)).trim(),
    )
    .unwrap();
    assert_eq!(one["files_indexed"], 41, "{one}");

    let shards = config("shards");
    let shard = |i: u32| cmd(&["index", "s3://corpus/src", "--shard", &format!("{i}/3"), "--json"], &shards, &sharded);
    let report = |i: u32| -> Value { serde_json::from_str(run_ok(&mut shard(i)).trim()).unwrap() };
    let first = report(0);
    // Shard 1 is killed once it has downloaded part of its share: it recorded nothing.
    let mut dying = KillOnDrop(shard(1).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap());
    let mirror1 = tmp.path().join("mirror-shards.shard-1-of-3");
    wait_for("shard 1 to download objects", Duration::from_secs(120), || {
        std::fs::read_dir(&mirror1).map(|d| d.flatten().any(|e| e.path().is_dir())).unwrap_or(false)
    });
    dying.0.kill().unwrap();
    dying.0.wait().unwrap();
    let commit = |db: &Path| cmd(&["index", "s3://corpus/src", "--commit", "--json"], &shards, db).output().unwrap();
    let refused = commit(&sharded);
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success() && err.contains("1/3, 2/3") && err.contains("--shard 1/3"), "{err}");
    let (second, third) = (report(1), report(2));
    // Each shard read its own share: the shares add up to the corpus, none is empty.
    let indexed: Vec<u64> = [&first, &second, &third].iter().map(|r| r["files_indexed"].as_u64().unwrap()).collect();
    assert_eq!(indexed.iter().sum::<u64>(), 41, "{indexed:?}");
    assert!(indexed.iter().all(|n| *n > 0 && *n < 41), "{indexed:?}");
    assert_eq!(second["written"]["objects"], second["files_indexed"], "{second}");
    let out = commit(&sharded);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let published: Value = serde_json::from_str(String::from_utf8_lossy(&out.stdout).trim()).unwrap();
    assert_eq!(published["published"]["shards"], 3, "{published}");
    assert_eq!(published["published"]["objects"], 41, "{published}");
    // Committing again publishes nothing twice.
    let again: Value = serde_json::from_str(String::from_utf8_lossy(&commit(&sharded).stdout).trim()).unwrap();
    assert_eq!(again["published"]["shards"], 0, "{again}");

    // The same index: rows, chunk ids, symbols, edges, vectors, answers.
    assert_eq!(fingerprint(&single), fingerprint(&sharded));
    for (table, id) in [("symbols", "symbol_id"), ("edges", "edge_id")] {
        let (a, b) = (table_ids(&single, table, id), table_ids(&sharded, table, id));
        assert!(!a.is_empty(), "{table}: none");
        assert_eq!(a, b, "{table}");
    }
    assert_same_vectors(&vectors_by_chunk(&single), &vectors_by_chunk(&sharded), "sharded vs single");
    for q in ["rotate a ledger", "Keeps state while processing a sensor", "rounded half to even"] {
        let ask = |db: &Path| -> Value {
            let out = run_ok(ctxd().args(["search", q, "--json", "--k", "5", "--db"]).arg(db));
            serde_json::from_str(&out).unwrap()
        };
        assert_eq!(paths_of(&ask(&single)), paths_of(&ask(&sharded)), "{q}");
    }

    // The writer's first start on the built index downloads nothing it indexed, then follows.
    let writer_cfg = config("writer");
    let mut serve = ctxd();
    serve.args(["serve", "--config"]).arg(&writer_cfg);
    s3.env(&mut serve);
    let daemon = Daemon::spawn(serve, "s3://corpus/src", &sharded);
    daemon.wait_ready();
    assert_eq!(daemon.metric("ctxd_object_downloads_total").unwrap_or(0.0), 0.0, "objects the shards indexed");
    s3.ops("corpus", &[("put", "src/pkg3/late.py", "def dock_zeppelin(mast):\n    return mast.moor()\n")]);
    wait_for("the new object to be searchable", Duration::from_secs(60), || {
        let (_, v) = daemon.search(json!({"query": "dock zeppelin mast", "mode": "bm25"}));
        paths_of(&v).first().map(String::as_str) == Some("pkg3/late.py")
    });
    assert_eq!(daemon.metric("ctxd_object_downloads_total"), Some(1.0));
    let (_, found) = daemon.search(json!({"query": "rounded half to even", "mode": "bm25"}));
    assert_eq!(paths_of(&found).first().map(String::as_str), Some("README.md"), "{found}");
}
