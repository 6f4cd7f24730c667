"""One client, one distinct question at a time: routed `/v1/search` latency over an existing index,
as a user of a daemon sees it, and where the time goes.

Starts `ctxd serve --role reader --db DB` (no watching: the index as it is), asks `--warm`
questions first (not counted), then `--n` others from a queries file (JSON lines with a "query"
field, e.g. ../shared/eval/cosqa/queries-dev.jsonl), each once, and prints p50/p95/p99 of the
answers' wall time, then the daemon's own per-step means from /metrics: the query's encoding, the
vector, full-text, symbol and path steps (`ctxd_query_signal_duration_seconds`), the rescoring
(`ctxd_query_rerank_duration_seconds`), and how many candidates were scored from stored codes or
encoded (`ctxd_query_rerank_stored_total`, `_cache_misses_total`).

    python3 benches/search_latency.py --ctxd ~/.cache/ctxd-target/release/ctxd --db /tmp/cosqa \\
        --queries ../shared/eval/cosqa/queries-dev.jsonl [--env CTXD_LATE_CODEC=none]

`--env CTXD_LATE_CODEC=none` measures the same index rescored the old way (the model encodes each
question's candidates)."""
import argparse, json, os, re, sys, time, urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ctxd_daemon import default_ctxd, percentiles, post, start_serve  # noqa: E402


def metrics(base):
    """Prometheus text of the daemon as {name{labels}: value}."""
    with urllib.request.urlopen(base + "/metrics", timeout=10) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        m = re.match(r"^([a-zA-Z_:][\w:]*(?:\{[^}]*\})?) ([0-9.eE+-]+|NaN)$", line)
        if m:
            out[m.group(1)] = float(m.group(2))
    return out


def step_means(before, after):
    """Mean ms per call of each timed step between two /metrics readings."""
    rows = []
    for key, total in after.items():
        name = key.split("{")[0]
        if not name.endswith("_sum") or not name.startswith(("ctxd_query_signal_duration", "ctxd_query_rerank_duration")):
            continue
        count_key = key.replace("_sum", "_count", 1)
        calls = after.get(count_key, 0) - before.get(count_key, 0)
        if calls > 0:
            rows.append(f"{key.replace('_sum', '', 1)}: {(total - before.get(key, 0)) / calls * 1000:.1f} ms x {calls:.0f}")
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ctxd", default=default_ctxd())
    ap.add_argument("--db", required=True)
    ap.add_argument("--queries", required=True)
    ap.add_argument("--n", type=int, default=200, help="questions measured")
    ap.add_argument("--warm", type=int, default=10, help="questions asked first, not measured")
    ap.add_argument("--env", action="append", default=[], help="KEY=VALUE for the daemon (repeatable)")
    args = ap.parse_args()
    questions = [json.loads(line)["query"] for line in open(args.queries) if line.strip()]
    if len(questions) < args.warm + args.n:
        sys.exit(f"{args.queries} has {len(questions)} questions; --warm + --n is {args.warm + args.n}")
    for kv in args.env:
        key, _, value = kv.partition("=")
        os.environ[key] = value
    proc, base, ready = start_serve(args.ctxd, ["--role", "reader", "--db", args.db], ready_within=300)
    try:
        for q in questions[: args.warm]:
            post(base, "/v1/search", {"query": q, "k": 10})
        before = metrics(base)
        times = []
        for q in questions[args.warm : args.warm + args.n]:
            t0 = time.perf_counter()
            post(base, "/v1/search", {"query": q, "k": 10})
            times.append((time.perf_counter() - t0) * 1000)
        after = metrics(base)
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    print(f"search_latency: {args.db}, {args.n} distinct questions, one client ({' '.join(args.env) or 'defaults'})")
    print(f"  routed /v1/search: {percentiles(times, (50, 95, 99))}")
    for row in step_means(before, after):
        print(f"  {row}")
    for name in ("ctxd_query_encodings_total", "ctxd_query_rerank_stored_total", "ctxd_query_rerank_cache_misses_total"):
        print(f"  {name}: +{after.get(name, 0) - before.get(name, 0):.0f}")


if __name__ == "__main__":
    main()
