#!/usr/bin/env python3
"""How distinct questions fare over a longer stretch of editing: 50 clients asking distinct
routed searches for `--seconds` (150), with (`ingest`) or without (`idle`) the load bench's
editor (20 files/s into the watched folder, a git commit every 10 s), printing every 15 s the
window's QPS, p50 and p99 beside the index's fragments, version and full-text folds so far
(from `/metrics`). The load bench (`load.py`) gives one figure per 30-s run; this shows the
trend inside a run — what the index the queries read accumulates while the writer streams.

Uses the load bench's index and configuration (run `benches/load.py` once first).

    python3 benches/load_trend.py [--ctxd BIN] [--seconds 150] [idle|ingest]
"""
import argparse, http.client, json, os, random, sys, threading, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ctxd_daemon import default_ctxd  # noqa: E402
from load import COSQA, WORK, Daemon, edit_side, log, pct, scrape  # noqa: E402

WINDOW = 15


def index_state(base):
    m = scrape(base)
    return {k: m.get((f"ctxd_index_{k}", "")) for k in ("fragments", "version", "fts_updates_total")}


def client(i, port, queries, deadline, rows, lock):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    n = 0
    while time.time() < deadline:
        body = json.dumps({"query": f"{queries[(i * 37 + n) % len(queries)]} q{i}-{n}-{random.random():.6f}", "k": 10})
        t0 = time.time()
        conn.request("POST", "/v1/search", body, {"content-type": "application/json"})
        r = conn.getresponse()
        r.read()
        with lock:
            rows.append((t0, (time.time() - t0) * 1000, r.status))
        n += 1


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("scenario", nargs="?", choices=["idle", "ingest"], default="ingest")
    ap.add_argument("--ctxd", default=default_ctxd())
    ap.add_argument("--seconds", type=float, default=150)
    ap.add_argument("--clients", type=int, default=50)
    args = ap.parse_args()
    config = os.path.join(WORK, "load.toml")
    if not os.path.exists(config):
        sys.exit(f"{config} is missing: run benches/load.py once first (it builds the index and writes it)")
    queries = [json.loads(line)["query"] for line in open(os.path.join(COSQA, "queries-dev.jsonl"))]
    daemon = Daemon(args.ctxd, ["--config", config], os.path.join(WORK, "logs", "trend.log"), name="serve")
    rows, lock = [], threading.Lock()
    try:
        daemon.wait_ready(1800)
        log(f"{args.scenario}, {args.clients} clients, at start: {index_state(daemon.base)}")
        t_start = time.time()
        deadline = t_start + args.seconds
        edits = argparse.Namespace(edit_rate=20, git_commit_secs=10, seconds=args.seconds, ingest_wait=120)
        finish = edit_side(daemon.base, os.path.join(WORK, "src"), 300, f"t{int(t_start)}", edits)(time.monotonic()) \
            if args.scenario == "ingest" else None
        port = int(daemon.base.rsplit(":", 1)[1])
        threads = [threading.Thread(target=client, args=(i, port, queries, deadline, rows, lock), daemon=True)
                   for i in range(args.clients)]
        for t in threads:
            t.start()
        for w in range(int(args.seconds // WINDOW)):
            time.sleep(max(0.0, t_start + (w + 1) * WINDOW - time.time()))
            with lock:
                lat = sorted(ms for t, ms, s in rows if t_start + w * WINDOW <= t < t_start + (w + 1) * WINDOW and s == 200)
                bad = sum(1 for t, _, s in rows if t_start + w * WINDOW <= t < t_start + (w + 1) * WINDOW and s != 200)
            log(f"{w * WINDOW:4d}-{(w + 1) * WINDOW:4d} s: {len(lat) / WINDOW:6.1f} QPS, p50 {pct(lat, 0.5):5.0f} ms, "
                f"p99 {pct(lat, 0.99):5.0f} ms, not 200: {bad}; index {index_state(daemon.base)}")
        for t in threads:
            t.join(timeout=70)
        if finish:
            info = finish()
            log(f"editor: {info['edits']} writes, {info['git_commits']} git commits")
    finally:
        daemon.stop()


if __name__ == "__main__":
    main()
