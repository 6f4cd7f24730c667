#!/usr/bin/env python3
"""Completion-context latency: p50/p90/p99 of POST /v1/completion-context on a big index.

Indexes a corpus of real code (default: Rust crates from ~/.cargo/registry/src until the index
holds --min-chunks chunks, 50,000 by default) unless --db already holds one, starts `ctxd serve`
on it, then sends --requests completion requests built from random cursor positions in the
indexed files (prefix = the file up to the cursor, suffix = the rest; multi_line strategy, as an
editor would) and prints latency percentiles, measured at the client over HTTP on 127.0.0.1.
With --keystrokes K each place gets K requests, one more character of the real line typed each
time (an editor asks on every keystroke); the first request at each place is reported apart.

    python3 benches/completion_latency.py [--ctxd BIN] [--db DIR] [--requests 500] [--keystrokes 1]
"""
import argparse, glob, json, os, random, shutil, subprocess, time, urllib.request

from ctxd_daemon import completion_bench_args, percentiles, post, start_daemon


def main():
    ap = argparse.ArgumentParser()
    completion_bench_args(ap)
    ap.add_argument("--min-chunks", type=int, default=50000)
    ap.add_argument("--requests", type=int, default=500)
    ap.add_argument("--keystrokes", type=int, default=1,
                    help="requests per place, one more typed character each (1: a new place every request)")
    args = ap.parse_args()
    random.seed(11)

    if not os.path.isdir(args.db):
        # About 12 chunks per file of crate source: copy crates until the estimate is reached.
        os.makedirs(args.src, exist_ok=True)
        crates = sorted(glob.glob(os.path.expanduser("~/.cargo/registry/src/*/*")))
        files = 0
        for c in crates:
            if files * 12 >= args.min_chunks * 1.1:
                break
            name = os.path.basename(c)
            dest = os.path.join(args.src, name)
            if not os.path.isdir(dest):
                shutil.copytree(os.path.join(c, "src") if os.path.isdir(os.path.join(c, "src")) else c, dest,
                                ignore=shutil.ignore_patterns("*.json", "*.md", "target", "tests", "benches"))
            files += sum(1 for _ in glob.glob(os.path.join(dest, "**", "*.rs"), recursive=True))
        t0 = time.time()
        out = subprocess.run([args.ctxd, "index", args.src, "--db", args.db, "--json"], check=True,
                             capture_output=True, text=True, env=dict(os.environ, CTXD_LOG="warn")).stdout
        summary = json.loads(out)
        print(f"indexed {summary['files_indexed']} files, {summary['index_rows']} chunks in {time.time() - t0:.0f}s")

    # The steady state of a daemon that has been up for its first maintenance interval:
    # fragments compacted, the ANN vector index and the symbol-name indexes built.
    t0 = time.time()
    report = json.loads(subprocess.run([args.ctxd, "compact", "--db", args.db, "--json"], check=True,
                                       capture_output=True, text=True, env=dict(os.environ, CTXD_LOG="warn")).stdout)
    print(f"maintenance pass in {time.time() - t0:.0f}s: fragments {report['fragments_before']} -> "
          f"{report['fragments_after']}, vector index built: {report['vector_index_built']}")

    proc, base, _ = start_daemon(args.ctxd, args.src, args.db, ready_within=3600)
    try:
        rows = None
        with urllib.request.urlopen(base + "/metrics") as r:
            for line in r.read().decode().splitlines():
                if line.startswith("ctxd_index_rows "):
                    rows = int(float(line.split()[1]))
        print(f"index rows: {rows}")
        files = [f for f in glob.glob(os.path.join(args.src, "**", "*.rs"), recursive=True) if 2000 < os.path.getsize(f) < 200000]
        def body(path, lines, line, col):
            cur = lines[line - 1]
            prefix = "\n".join(lines[: line - 1]) + "\n" + cur[:col]
            suffix = cur[col:] + "\n" + "\n".join(lines[line:line + 20])
            return {"uri": "file://" + path, "language": "rust", "prefix": prefix[-8000:], "suffix": suffix,
                    "line": line, "max_chunks": 3, "strategy": "multi_line"}

        def place():
            path = random.choice(files)
            lines = open(path, encoding="utf-8", errors="replace").read().split("\n")
            line = random.randint(5, max(6, len(lines) - 1))
            return path, lines, line, len(lines[line - 1]) // 2

        # Sessions: a place in a file, then --keystrokes characters of the real line typed there
        # (1 = every request at a new place: nothing can be reused between requests).
        sessions = []
        for _ in range(max(1, args.requests // args.keystrokes)):
            path, lines, line, col = place()
            typed = [body(path, lines, line, min(col + k, len(lines[line - 1]))) for k in range(args.keystrokes)]
            sessions.append(typed)
        for _ in range(20):  # warm-up at other places
            post(base, "/v1/completion-context", body(*place()))
        lat, first, empty = [], [], 0
        for typed in sessions:
            for k, b in enumerate(typed):
                t = time.perf_counter()
                r = post(base, "/v1/completion-context", b)
                ms = (time.perf_counter() - t) * 1000
                lat.append(ms)
                if k == 0:
                    first.append(ms)
                empty += not r["snippets"]
        print(f"all ({args.keystrokes} keystrokes per place): {len(lat)} requests: {percentiles(lat)}")
        if args.keystrokes > 1:
            print(f"first keystroke at each place: {len(first)} requests: {percentiles(first)}")
        print(f"{empty} empty answers")
    finally:
        proc.terminate()
        proc.wait()


if __name__ == "__main__":
    main()
