#!/usr/bin/env python3
"""A sharded first build against one build (issue 87, item 1). A corpus is uploaded to a moto S3
server on 127.0.0.1; `ctxd index s3://…` builds it in one process; then, for each N, `ctxd index
--shard I/N` for I = 0..N-1, one after another on this machine, and `ctxd index --commit` build it
again into an empty index. Per shard: objects listed and downloaded, files indexed, chunks
written, bytes the process read (`/proc/PID/io` rchar), wall time. Per N: the largest shard's share
of the objects (goal ~1/N), the commit's time (publishing, then the indexes), and the projected
wall time of N shards on N machines (the slowest shard + the commit). Then the indexes are compared
with the one build: rows and chunk ids, symbols, edges, vectors (lowest cosine), and the top 10
of `ctxd search` for the first --queries questions.

    ~/.cache/ctxd/py-venv/bin/python benches/sharded_build.py --ctxd BIN --corpus DIR \
        [--shards 2,4] [--queries FILE --nqueries 50] [--no-embed] [--work DIR] [--out FILE.json]

Needs the test venv (boto3, pylance, moto_server): scripts/test.sh installs it.
"""
import argparse, json, os, subprocess, sys, tempfile, time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from load import S3_ENV, start_moto  # noqa: E402
from reembed_shards import run_measured  # noqa: E402


def run(cmd, env):
    """Runs `cmd`: (stdout, seconds, rchar) of the process; exits on failure."""
    out, secs, rchar, _ = run_measured(cmd, env)
    return out, secs, rchar


def work_and_moto(work, prefix):
    """The working folder (`work`, else a new temporary one) and a moto server: (work, process, endpoint)."""
    work = work or tempfile.mkdtemp(prefix=prefix)
    os.makedirs(work, exist_ok=True)
    moto, endpoint = start_moto()
    return work, moto, endpoint


def upload(endpoint, bucket, root):
    import boto3

    s3 = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=S3_ENV["AWS_ACCESS_KEY_ID"],
                      aws_secret_access_key=S3_ENV["AWS_SECRET_ACCESS_KEY"], region_name="us-east-1")
    s3.create_bucket(Bucket=bucket)
    files = [os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs]

    def put(path):
        with open(path, "rb") as f:
            s3.put_object(Bucket=bucket, Key="src/" + os.path.relpath(path, root), Body=f.read())

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(put, files))
    return len(files)


def table_rows(db, table, cols):
    import lance

    path = os.path.join(db, f"{table}.lance")
    return lance.dataset(path).to_table(columns=cols).to_pylist() if os.path.isdir(path) else []


def compare(a, b):
    """What differs between the indexes at `a` and `b` (ids, definitions, edges, vectors)."""
    out = {}
    ca = {r["chunk_id"]: r for r in table_rows(a, "chunks", ["chunk_id", "path", "content_hash", "vector"])}
    cb = {r["chunk_id"]: r for r in table_rows(b, "chunks", ["chunk_id", "path", "content_hash", "vector"])}
    out["chunks"] = [len(ca), len(cb)]
    out["same_chunk_ids"] = set(ca) == set(cb)
    out["same_paths_and_hashes"] = all((ca[k]["path"], ca[k]["content_hash"]) == (cb[k]["path"], cb[k]["content_hash"])
                                       for k in ca if k in cb)
    worst = 1.0
    for k, r in ca.items():
        va, vb = r["vector"], cb.get(k, {}).get("vector")
        if va is None or vb is None:
            continue
        dot = sum(x * y for x, y in zip(va, vb))
        na, nb = sum(x * x for x in va) ** 0.5, sum(y * y for y in vb) ** 0.5
        worst = min(worst, dot / max(na * nb, 1e-12))
    out["lowest_cosine"] = worst
    for table, key in [("symbols", "symbol_id"), ("edges", "edge_id")]:
        sa = sorted((r["path"], r[key]) for r in table_rows(a, table, ["path", key]))
        sb = sorted((r["path"], r[key]) for r in table_rows(b, table, ["path", key]))
        out[table] = [len(sa), len(sb)]
        out[f"same_{table}"] = sa == sb
    return out


def searches(ctxd, db, queries, env):
    tops = []
    for q in queries:
        out, _, _ = run([ctxd, "search", q, "--json", "--k", "10", "--db", db], env)
        tops.append([r["path"] for r in json.loads(out)["results"]])
    return tops


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ctxd", required=True)
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--shards", default="2,4")
    ap.add_argument("--queries", default=None, help="JSONL with a 'query' field")
    ap.add_argument("--nqueries", type=int, default=50)
    ap.add_argument("--no-embed", action="store_true", help="full-text only (a big corpus's commit time)")
    ap.add_argument("--skip-single", action="store_true", help="no one-process build to compare with")
    ap.add_argument("--work", default=None)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    work, moto, endpoint = work_and_moto(a.work, "ctxd-sharded-build-")
    env = dict(os.environ, **S3_ENV, AWS_ENDPOINT_URL=endpoint, CTXD_LOG="warn")
    try:
        t0 = time.time()
        objects = upload(endpoint, "corpus", a.corpus)
        print(f"ctxd: {a.ctxd}; corpus: {a.corpus} ({objects} objects uploaded to moto in {time.time() - t0:.0f}s); work: {work}")
        extra = ["--no-embed"] if a.no_embed else []

        def config(name):
            path = os.path.join(work, f"{name}.toml")
            with open(path, "w") as f:
                f.write(f'[source]\nmirror_dir = "{os.path.join(work, "mirror-" + name)}"\n')
            return path

        result = {"objects": objects, "no_embed": a.no_embed, "runs": []}
        single = os.path.join(work, "single")
        if not a.skip_single:
            out, secs, rchar = run([a.ctxd, "index", "s3://corpus/src", "--db", single, "--config", config("single"),
                                    "--json"] + extra, env)
            s = json.loads(out)
            result["single"] = {"seconds": secs, "files_indexed": s["files_indexed"], "chunks": s["chunks_written"],
                                "rchar": rchar}
            print(f"one build: {s['files_indexed']} files, {s['chunks_written']} chunks in {secs:.1f}s")
        print(f"{'N':>3} {'shard':>6} {'listed':>7} {'downloaded':>10} {'share':>6} {'chunks':>7} {'rchar MB':>9} {'seconds':>8}")
        for n in [int(x) for x in a.shards.split(",")]:
            db, cfg = os.path.join(work, f"n{n}"), config(f"n{n}")
            shards = []
            for i in range(n):
                out, secs, rchar = run([a.ctxd, "index", "s3://corpus/src", "--db", db, "--config", cfg,
                                        "--shard", f"{i}/{n}", "--json"] + extra, env)
                r = json.loads(out)
                shard = {"shard": f"{i}/{n}", "listed": objects, "downloaded": r["written"]["objects"],
                         "files_indexed": r["files_indexed"], "chunks": r["written"]["chunks"],
                         "fragments": r["written"]["fragments"], "rchar": rchar, "seconds": secs}
                shards.append(shard)
                print(f"{n:>3} {shard['shard']:>6} {objects:>7} {shard['downloaded']:>10} "
                      f"{shard['downloaded'] / max(objects, 1):>6.3f} {shard['chunks']:>7} {rchar / 1e6:>9.1f} {secs:>8.1f}")
            out, secs, _ = run([a.ctxd, "index", "s3://corpus/src", "--db", db, "--config", cfg, "--commit", "--json"], env)
            c = json.loads(out)
            slowest = max(s["seconds"] for s in shards)
            row = {"n": n, "shards": shards, "commit_seconds": secs, "publish_seconds": c["publish_seconds"],
                   "published": c["published"], "largest_share": max(s["downloaded"] for s in shards) / max(objects, 1),
                   "projected_seconds": slowest + secs}
            if not a.skip_single:
                row["compare"] = compare(single, db)
            result["runs"].append(row)
            print(f"N={n}: commit {secs:.1f}s (publish {c['publish_seconds']:.1f}s, then indexes); largest share "
                  f"{row['largest_share']:.3f}; projected on {n} machines: {slowest:.1f}s + {secs:.1f}s = "
                  f"{row['projected_seconds']:.1f}s")
            if "compare" in row:
                print(f"     vs one build: {json.dumps(row['compare'])}")
        if a.queries and not a.skip_single and result["runs"]:
            with open(a.queries) as f:
                qs = [json.loads(line)["query"] for line in f if line.strip()][: a.nqueries]
            base = searches(a.ctxd, single, qs, env)
            for row in result["runs"]:
                got = searches(a.ctxd, os.path.join(work, f"n{row['n']}"), qs, env)
                row["same_top10"] = sum(x == y for x, y in zip(base, got))
                print(f"N={row['n']}: top 10 of `ctxd search` identical for {row['same_top10']} of {len(qs)} queries")
        if a.out:
            with open(a.out, "w") as f:
                json.dump(result, f, indent=1)
    finally:
        moto.kill()


if __name__ == "__main__":
    main()
