#!/usr/bin/env python3
"""`locate` answer time in the daemon on a big index: p50/p95/p99 of POST /v1/locate.

The corpus is one large real repository checked out plainly (no git history; default: moto at the
base commit of its latest training issue, `git archive` from the mirror — about 2,800 files, 83 MB:
Python plus the JSON/YAML resource files it ships). `ctxd index` builds the index unless --db already
holds one, `ctxd compact` brings it to a daemon's steady state (fragments compacted, the ANN vector
index built), then `ctxd serve` is started on it and every issue text of --data (default: the 238
training issues, whatever repository they are about: the answer time depends on the text's length and
on the index, not on whether the issue fits the code) is sent once, one request at a time, over HTTP
on 127.0.0.1. The first request builds the version's code graph and definition index (once per index
version in a daemon) and is reported apart; the others are the steady state. The answer's `timings`
(graph, embedding, retrieval, messages, history, ranking) are averaged to show what dominates.

    python3 benches/locate_latency.py [--ctxd BIN] [--src DIR] [--db DIR] [--data train.jsonl] [--limit N]
"""
import argparse, json, os, statistics, subprocess, time, urllib.request

from ctxd_daemon import default_ctxd, percentiles, post, start_daemon

STEPS = ("graph_ms", "embed_ms", "retrieve_ms", "messages_ms", "history_ms", "rank_ms")


def checkout(mirror, commit, dest):
    os.makedirs(dest)
    archive = subprocess.Popen(["git", "--git-dir", mirror, "archive", commit], stdout=subprocess.PIPE)
    subprocess.run(["tar", "-x", "-C", dest], stdin=archive.stdout, check=True)
    if archive.wait() != 0:
        raise SystemExit(f"git archive {commit} from {mirror} failed")


def measure(base, texts, k):
    """Sends every text once, one at a time; prints the first request apart, then the steady state's
    percentiles and the mean of each step of the answers' `timings`."""
    lat, steps, empty = [], {s: [] for s in STEPS}, 0
    for i, text in enumerate(texts):
        t = time.perf_counter()
        answer = post(base, "/v1/locate", {"text": text, "k": k}, timeout=120)
        ms = (time.perf_counter() - t) * 1000
        empty += not answer["files"]
        if i == 0:
            print(f"first request (builds the version's graph and definition index): {ms:.0f} ms "
                  f"({', '.join(f'{s[:-3]} {v} ms' for s, v in answer['timings'].items())})")
            continue
        lat.append(ms)
        for s in STEPS:
            steps[s].append(answer["timings"][s])
    print(f"steady state, {len(lat)} requests one at a time: {percentiles(lat, (50, 95, 99))}")
    means = {s[:-3]: statistics.mean(v) for s, v in steps.items()}
    most = max(means, key=means.get)
    print("mean per step: " + ", ".join(f"{s} {v:.0f} ms" for s, v in means.items()) + f"; most: {most}")
    print(f"{empty} empty answers")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ctxd", default=default_ctxd())
    ap.add_argument("--mirror", default="/work/.mirror/getmoto+moto/repo")
    ap.add_argument("--commit", default="f46b9e5925", help="the commit checked out into --src when it is absent")
    ap.add_argument("--src", default=os.path.expanduser("~/.cache/ctxd/bench-locate/tree"))
    ap.add_argument("--db", default=os.path.expanduser("~/.cache/ctxd/bench-locate/db"))
    ap.add_argument("--data", default="/work/shared/eval/localization/train.jsonl")
    ap.add_argument("--limit", type=int, help="only the first N texts")
    ap.add_argument("--k", type=int, default=10)
    args = ap.parse_args()
    quiet = dict(os.environ, CTXD_LOG="warn")

    if not os.path.isdir(args.src):
        checkout(args.mirror, args.commit, args.src)
    if not os.path.isdir(args.db):
        t0 = time.time()
        out = subprocess.run([args.ctxd, "index", args.src, "--db", args.db, "--json"], check=True,
                             capture_output=True, text=True, env=quiet).stdout
        s = json.loads(out)
        print(f"indexed {s['files_indexed']} files, {s['index_rows']} chunks in {time.time() - t0:.0f} s")
    t0 = time.time()
    c = json.loads(subprocess.run([args.ctxd, "compact", "--db", args.db, "--json"], check=True,
                                  capture_output=True, text=True, env=quiet).stdout)
    print(f"maintenance pass in {time.time() - t0:.0f} s: fragments {c['fragments_before']} -> "
          f"{c['fragments_after']}, vector index built: {c['vector_index_built']}")

    texts = [json.loads(line)["query"] for line in open(args.data) if line.strip()][: args.limit]
    proc, base, ready = start_daemon(args.ctxd, args.src, args.db, ready_within=3600)
    try:
        with urllib.request.urlopen(base + "/metrics") as r:
            rows = next((int(float(l.split()[1])) for l in r.read().decode().splitlines()
                         if l.startswith("ctxd_index_rows ")), None)
        print(f"daemon ready in {ready:.1f} s; index rows: {rows}; {len(texts)} texts, "
              f"{statistics.median(len(t) for t in texts):.0f} characters at the median")
        measure(base, texts, args.k)
    finally:
        proc.terminate()
        proc.wait()


if __name__ == "__main__":
    main()
