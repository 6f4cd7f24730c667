#!/usr/bin/env python3
"""Repeated questions after a commit: what a question asked before costs once a commit has made
its kept answer old (every commit starts a new index version and an empty answer cache).

One client, no concurrency, so the figure is the cost of the work and not of a queue:

1. `ctxd serve` watches the load bench's CoSQA folder (`benches/load.py` copies and indexes it
   into ~/.cache/ctxd/bench-load; run that once first);
2. pass `first`: the first `--questions` (200) CoSQA dev queries, routed search, k 10, default
   rescoring — computed, then kept;
3. pass `kept`: the same again — answered from the answer cache;
4. a file is added to the watched folder and the run waits until it is searchable (one commit,
   a new version);
5. pass `after-commit`: the same questions again — the answer cache is empty, each is computed
   again (its query vector is cached; rescoring reads what it kept: the candidates' token rows,
   512 chunks, and — since this change — each (query, candidate) score).

Printed per pass: p50/p90/p99/mean latency, and the deltas of
`ctxd_query_rerank_cache_{hits,misses}_total` (candidates whose score or token rows were kept /
candidates encoded by the model) and of the answer cache's hits and misses.

    python3 benches/repeat_after_commit.py [--ctxd BIN] [--questions 200]
"""
import argparse, json, os, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ctxd_daemon import default_ctxd, post, start_daemon  # noqa: E402
from load_probe import scrape  # noqa: E402

WORK = os.path.expanduser("~/.cache/ctxd/bench-load")
QUERIES = "/work/shared/eval/cosqa/queries-dev.jsonl"
PROBE = "_repeat_after_commit_probe.py"


def run_pass(base, questions):
    before = scrape(base)
    lat = []
    for q in questions:
        t = time.perf_counter()
        post(base, "/v1/search", {"query": q, "k": 10, "mode": "routed"}, timeout=120)
        lat.append((time.perf_counter() - t) * 1000)
    after = scrape(base)
    d = lambda n: int(after.get((n, ""), 0) - before.get((n, ""), 0))  # noqa: E731
    lat.sort()
    pct = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))]  # noqa: E731
    return {
        "p50_ms": pct(0.5), "p90_ms": pct(0.9), "p99_ms": pct(0.99), "mean_ms": sum(lat) / len(lat),
        "rerank_kept": d("ctxd_query_rerank_cache_hits_total"), "rerank_encoded": d("ctxd_query_rerank_cache_misses_total"),
        "answer_hits": d("ctxd_query_answer_cache_hits_total"), "answer_misses": d("ctxd_query_answer_cache_misses_total"),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ctxd", default=default_ctxd())
    ap.add_argument("--src", default=os.path.join(WORK, "src"))
    ap.add_argument("--db", default=os.path.join(WORK, "db"))
    ap.add_argument("--questions", type=int, default=200)
    args = ap.parse_args()
    if not os.path.isdir(args.src) or not os.path.isdir(args.db):
        sys.exit(f"{args.src} or {args.db} is missing: run benches/load.py once first (it copies and indexes CoSQA)")
    with open(QUERIES) as f:
        questions = [json.loads(l)["query"] for l in f if l.strip()][: args.questions]
    probe = os.path.join(args.src, PROBE)
    if os.path.exists(probe):
        os.remove(probe)
    proc, base, ready = start_daemon(args.ctxd, args.src, args.db, 600)
    print(f"ctxd {args.ctxd}: ready after {ready:.1f} s; {len(questions)} questions, one client")
    try:
        time.sleep(5)  # start-up maintenance, if any, before the first pass
        rows = [("first", run_pass(base, questions)), ("kept", run_pass(base, questions))]
        token = f"probetoken{int(time.time())}"
        with open(probe, "w") as f:
            f.write(f"def {token}():\n    return 'a file added to make one commit'\n")
        t0 = time.time()
        while not post(base, "/v1/search", {"query": token, "k": 1, "mode": "bm25"})["results"]:
            if time.time() - t0 > 120:
                sys.exit("the added file did not become searchable within 120 s")
            time.sleep(0.2)
        print(f"one commit: the added file searchable after {time.time() - t0:.1f} s")
        rows.append(("after-commit", run_pass(base, questions)))
    finally:
        if os.path.exists(probe):
            os.remove(probe)
            time.sleep(3)  # the watcher removes it from the index before the drain
        proc.terminate()
        proc.wait(timeout=120)
    print(f"{'pass':<13} {'p50ms':>7} {'p90ms':>7} {'p99ms':>7} {'meanms':>7} {'answers hit/miss':>17} {'rescored kept/encoded':>22}")
    for name, r in rows:
        print(
            f"{name:<13} {r['p50_ms']:>7.1f} {r['p90_ms']:>7.1f} {r['p99_ms']:>7.1f} {r['mean_ms']:>7.1f} "
            f"{str(r['answer_hits']) + '/' + str(r['answer_misses']):>17} {str(r['rerank_kept']) + '/' + str(r['rerank_encoded']):>22}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
