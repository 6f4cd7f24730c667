#!/usr/bin/env python3
"""Freshness: how long from a file write to the change being searchable.

Starts `ctxd serve` on a copy of a real crate (hashbrown from ~/.cargo/registry/src, or
--corpus DIR), waits until it is ready, then edits one file at a time (a new function with a
unique name added to an existing source file, ≤ 20 chunks per file) and polls
POST /v1/search (bm25) every 5 ms until the new function comes back. Prints p50/p95/max of
the write → searchable latency and the daemon's own ctxd_pipeline_freshness_seconds.

    python3 benches/freshness.py [--ctxd BIN] [--edits 30] [--corpus DIR]
"""
import argparse, glob, os, shutil, statistics, sys, tempfile, time, urllib.request

from ctxd_daemon import default_ctxd, post, start_daemon, stop_daemon

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ctxd", default=default_ctxd())
    ap.add_argument("--edits", type=int, default=30)
    ap.add_argument("--corpus")
    args = ap.parse_args()
    corpus = args.corpus or sorted(glob.glob(os.path.expanduser("~/.cargo/registry/src/*/hashbrown-0.1*")))[-1]
    work = tempfile.mkdtemp(prefix="ctxd-fresh-")
    root, db = os.path.join(work, "src"), os.path.join(work, "db")
    shutil.copytree(corpus, root)
    files = sorted(f for f in glob.glob(os.path.join(root, "src", "**", "*.rs"), recursive=True) if os.path.getsize(f) < 20000)
    proc, base, ready = start_daemon(args.ctxd, root, db, ready_within=1800, poll=0.2, work=work)
    try:
        print(f"corpus {corpus}: ready after {ready:.1f}s")
        time.sleep(1.0)
        lat, polls = [], []
        for i in range(args.edits):
            path = files[(i * 7) % len(files)]
            name = f"freshnessprobe{i}x{os.getpid()}"
            with open(path, "a") as f:
                f.write(f"\n/// Probe {i}.\npub fn {name}() -> u32 {{\n    {i}\n}}\n")
            start = time.time()
            while True:
                q0 = time.time()
                hits = post(base, "/v1/search", {"query": name, "k": 5, "mode": "bm25"}, timeout=10)["results"]
                polls.append(time.time() - q0)
                if any(name in h["content"] for h in hits):
                    break
                if time.time() - start > 30:
                    sys.exit(f"edit {i} not visible after 30 s")
                time.sleep(0.005)
            lat.append(time.time() - start)
            time.sleep(0.3)
        lat.sort()
        p = lambda q: lat[min(len(lat) - 1, int(round(q * (len(lat) - 1))))]
        print(f"edits {len(lat)}: write -> searchable p50 {p(0.5)*1000:.0f} ms, p95 {p(0.95)*1000:.0f} ms, max {lat[-1]*1000:.0f} ms, mean {statistics.mean(lat)*1000:.0f} ms")
        print(f"search requests while polling: {len(polls)}, mean {statistics.mean(polls)*1000:.0f} ms, max {max(polls)*1000:.0f} ms")
        with urllib.request.urlopen(base + "/metrics", timeout=5) as r:
            text = r.read().decode()
        s = [l for l in text.splitlines() if l.startswith("ctxd_pipeline_freshness_seconds_sum") or l.startswith("ctxd_pipeline_freshness_seconds_count")]
        vals = {l.split()[0].rsplit("_", 1)[1]: float(l.split()[1]) for l in s}
        if vals.get("count"):
            print(f"daemon metric ctxd_pipeline_freshness_seconds: mean {vals['sum'] / vals['count'] * 1000:.0f} ms over {int(vals['count'])} changes (mtime -> commit)")
    finally:
        stop_daemon(proc, work)

if __name__ == "__main__":
    main()
