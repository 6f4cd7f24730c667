#!/usr/bin/env python3
"""How distinct questions fare over a longer stretch of editing: 50 clients asking distinct
routed searches for `--seconds` (150), with (`ingest`) or without (`idle`) the load bench's
editor (20 files/s into the watched folder, a git commit every 10 s), printing every 15 s the
window's QPS, p50 and p99 beside the index's fragments, version and full-text folds at its end
(from `/metrics`, read as each window ends; the lines are printed after the run), and at the end how
often (and how long) the routed search rebuilt the latest version's path vocabulary. The load bench (`load.py`) gives one figure per 30-s run; this shows the
trend inside a run — what the index the queries read accumulates while the writer streams.

Uses the load bench's index and configuration (run `benches/load.py` once first).

    python3 benches/load_trend.py [--ctxd BIN] [--seconds 150] [--edit-seconds N] [idle|ingest]

`--edit-seconds N` (ingest): the editor stops after N s while the clients go on asking — whether QPS comes back
as soon as the writer has caught up (what the writer's work took) or stays down until maintenance compacts (what
the index it left costs each query).
"""
import argparse, json, os, sys, threading, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ctxd_daemon import default_ctxd  # noqa: E402
from load import COSQA, WORK, Daemon, Stats, client_loop, log  # noqa: E402
from load_edit import edit_side, remove_ingested  # noqa: E402
from load_probe import scrape  # noqa: E402
from load_tail import pct  # noqa: E402

WINDOW = 15


def index_state(base):
    m = scrape(base)
    return {k: m.get((f"ctxd_index_{k}", "")) for k in ("fragments", "version", "fts_updates_total")}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("scenario", nargs="?", choices=["idle", "ingest"], default="ingest")
    ap.add_argument("--ctxd", default=default_ctxd())
    ap.add_argument("--seconds", type=float, default=150)
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--edit-seconds", type=float, default=0, help="ingest: stop the editor after this many seconds (0: at the end)")
    args = ap.parse_args()
    config = os.path.join(WORK, "load.toml")
    if not os.path.exists(config):
        sys.exit(f"{config} is missing: run benches/load.py once first (it builds the index and writes it)")
    queries = [json.loads(line)["query"] for line in open(os.path.join(COSQA, "queries-dev.jsonl"))]
    # Earlier runs' edited files go (the daemon's start-up removes them from the index before it is
    # ready), so every run starts from the same corpus: each run's editor adds 300 files, ~15 % more rows.
    remove_ingested(os.path.join(WORK, "src"))
    daemon = Daemon(args.ctxd, ["--config", config], os.path.join(WORK, "logs", "trend.log"), name="serve")
    stats = Stats()
    try:
        daemon.wait_ready(1800)
        log(f"{args.scenario}, {args.clients} clients, at start: {index_state(daemon.base)}")
        t_start = time.monotonic()
        deadline = t_start + args.seconds
        # The load bench's client (distinct questions, Retry-After honoured) and editor.
        asking = argparse.Namespace(k=10, ignore_retry_after=False)
        edits = argparse.Namespace(edit_rate=20, git_commit_secs=10, seconds=args.edit_seconds or args.seconds,
                                   ingest_wait=120)
        finish = edit_side(daemon.base, os.path.join(WORK, "src"), 300, f"t{int(time.time())}", edits)(t_start) \
            if args.scenario == "ingest" else None
        stopped, stopper = {}, None
        if finish and args.edit_seconds:
            def stop_editing():
                time.sleep(args.edit_seconds)
                stopped.update(finish())
            stopper = threading.Thread(target=stop_editing, daemon=True)
            stopper.start()
        port, tag = int(daemon.base.rsplit(":", 1)[1]), f"trend{int(time.time())}"
        threads = [threading.Thread(target=client_loop, daemon=True,
                                    args=(i, "127.0.0.1", port, queries, "unique", deadline, stats, asking, tag))
                   for i in range(args.clients)]
        for t in threads:
            t.start()
        states = []
        for w in range(int(args.seconds // WINDOW)):
            time.sleep(max(0.0, t_start + (w + 1) * WINDOW - time.monotonic()))
            states.append(index_state(daemon.base))
        for t in threads:
            t.join(timeout=70)
        for w, state in enumerate(states):
            lo, hi = t_start + w * WINDOW, t_start + (w + 1) * WINDOW
            answers = [(s, status) for sent, s, status in stats.timeline if lo <= sent < hi]
            lat = sorted(s * 1000 for s, status in answers if status == 200)
            log(f"{w * WINDOW:4d}-{(w + 1) * WINDOW:4d} s: {len(lat) / WINDOW:6.1f} QPS, p50 {pct(lat, 0.5):5.0f} ms, "
                f"p99 {pct(lat, 0.99):5.0f} ms, not 200: {len(answers) - len(lat)}; index {state}")
        log(f"errors: {stats.errors or 'none'}")
        m = scrape(daemon.base)
        builds = m.get(("ctxd_query_vocab_build_duration_seconds_count", ""))
        if builds:
            mean_ms = m.get(("ctxd_query_vocab_build_duration_seconds_sum", ""), 0) / builds * 1000
            log(f"path vocabulary rebuilds: {builds:.0f}, {mean_ms:.0f} ms each on average")
        if finish:
            if stopper:
                stopper.join()
            info = stopped if stopper else finish()
            log(f"editor: {info['edits']} writes, {info['git_commits']} git commits, the last searchable after "
                f"{info['last_edit_searchable_s']} s")
    finally:
        daemon.stop()


if __name__ == "__main__":
    main()
