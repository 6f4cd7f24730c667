#!/usr/bin/env python3
"""What the query adapter costs a `locate` request (issue 86's "a query pays <= 2 ms more").

Starts a reader daemon on an index that holds a query adapter (`ctxd index` of a git work tree fits
one; e.g. a `benches/localization.py --work DIR` index), asks `/v1/locate` N distinct texts, each once
to warm the query-embedding cache and then with and without the adapter (`"no_adapter"`), and prints
the answers' `timings.embed_ms` (the step that embeds the text and applies the adapter) and wall times.

    python3 benches/adapter_cost.py --ctxd BIN --db DIR [--n 30]
"""
import argparse, json, statistics, time

from ctxd_daemon import post, start_serve


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ctxd", required=True)
    ap.add_argument("--db", required=True)
    ap.add_argument("--n", type=int, default=30)
    args = ap.parse_args()
    proc, base, _ = start_serve(args.ctxd, ["--role", "reader", "--db", args.db], ready_within=300)

    def ask(text, no_adapter):
        t = time.perf_counter()
        answer = post(base, "/v1/locate", {"text": text, "k": 10, "no_adapter": no_adapter}, timeout=300)
        return answer, (time.perf_counter() - t) * 1000

    try:
        texts = [f"parse error on a nested expression with a window function, case {i}" for i in range(args.n)]
        rows = {False: [], True: []}
        for t in texts:
            ask(t, True)
            for no in (False, True):
                answer, ms = ask(t, no)
                rows[no].append((answer["timings"]["embed_ms"], ms, bool(answer.get("adapted"))))
        for no in (False, True):
            e, w = [r[0] for r in rows[no]], [r[1] for r in rows[no]]
            print(json.dumps({"adapter": not no, "adapted_answers": sum(r[2] for r in rows[no]), "n": len(w),
                              "embed_ms_mean": round(statistics.mean(e), 3), "wall_ms_median": round(statistics.median(w), 1)}))
    finally:
        proc.terminate()
        proc.wait(timeout=60)


if __name__ == "__main__":
    main()
