#!/usr/bin/env python3
"""A large real repository indexed from scratch on this machine, then a crash half way and a resume.

The corpus is a plain checkout (no git history) of a large repository written by others at a fixed
commit — default: git itself (git/git at 1a3e64c6c4, 4,847 files, 1.6M lines of C, shell and
AsciiDoc), `git archive` from the mirror `fetch` brings. Prints:

1. **First index** (`ctxd index --json`, embedding on): wall time, chunks, chunks/s, peak RSS (VmHWM,
   sampled every 0.2 s) and peak anonymous RSS, and the cost per file and per chunk in the windows
   ending at 10%, 50% and 100% of the files (from the progress lines ctxd logs every 5 s): if a step's
   cost grew with the files indexed, the later windows would cost more per chunk.
2. **Afterwards**: the code graph's build time (`ctxd graph stats`), then `ctxd serve` on the index
   (after `ctxd compact`) and p50/p95 of POST /v1/search and /v1/locate, one request at a time.
3. **Crash and resume**: a second index into a new database is killed with SIGKILL once half the
   files are done; the rows committed by then are counted (pylance, read-only), then the same command
   runs again. Redone work = chunks embedded by the resume beyond those the crash left undone,
   as a share of the chunks committed before the crash (goal ≤ 5%).

    python3 benches/large_repo.py --ctxd BIN [--src DIR] [--work DIR] [--skip-first]
"""
import argparse, json, os, re, shutil, subprocess, sys, threading, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ctxd_daemon import percentiles, post, start_serve  # noqa: E402
from locate_latency import checkout  # noqa: E402

PROGRESS = re.compile(r"([\d,]+) of ([\d,]+)\+? files(?:, still scanning)? · ([\d,]+) chunks")
SEARCHES = ["how are packfiles written", "delta compression of objects", "parse a commit object",
            "merge conflict markers", "reflog expiry", "credential helper protocol", "sparse checkout patterns",
            "rename detection in diff", "fsmonitor daemon", "bundle uri download", "submodule update recursion",
            "garbage collection of loose objects", "ref transaction locking", "shallow clone depth",
            "rebase interactive todo list", "http smart protocol v2", "index file format extensions",
            "commit graph generation numbers", "multi pack index bitmap", "worktree add lock"]
LOCATES = ["git gc --auto leaves loose objects behind when the repository has many packs",
           "`git rebase -i` drops the todo list when the editor exits with an error",
           "credential helper is asked twice for the same URL on a 401 response",
           "sparse-checkout set with cone mode ignores nested directories",
           "git fetch over the v2 protocol hangs when the server sends an empty packfile",
           "commit-graph write crashes on a repository with a grafted commit",
           "worktree remove deletes a locked worktree without --force",
           "diff --find-renames reports a rename for two unrelated empty files",
           "reflog expire --stale-fix loops forever on a broken ref", "bundle-uri fails to parse a relative URI"]


def sample(pid, peaks, stop):
    """Peak VmHWM and RssAnon (KiB) of `pid` until `stop` is set."""
    while not stop.is_set():
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    key, _, val = line.partition(":")
                    if key in ("VmHWM", "RssAnon"):
                        peaks[key] = max(peaks.get(key, 0), int(val.split()[0]))
        except OSError:
            return
        time.sleep(0.2)


def index(ctxd, src, db, kill_at=None, files=0):
    """Runs `ctxd index SRC --db DB --json`; returns (summary or None, progress [(t, done, total,
    chunks)], peaks, wall). With `kill_at` (a fraction), SIGKILLs it once that share of the files is done."""
    env = dict(os.environ, CTXD_LOG="info")
    t0 = time.time()
    proc = subprocess.Popen([ctxd, "index", src, "--db", db, "--json"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    peaks, stop = {}, threading.Event()
    threading.Thread(target=sample, args=(proc.pid, peaks, stop), daemon=True).start()
    progress = []
    for line in proc.stderr:
        m = PROGRESS.search(line)
        if m:
            done, total, chunks = (int(g.replace(",", "")) for g in m.groups())
            if "still scanning" not in line:
                progress.append((time.time() - t0, done, total, chunks))
            # The total grows while the scan runs (it waits on the pipeline): `files` is the
            # checkout's count, known up front.
            if kill_at is not None and done >= kill_at * files:
                progress.append((time.time() - t0, done, total, chunks))
                proc.kill()
                break
    out = proc.stdout.read()
    proc.wait()
    stop.set()
    wall = time.time() - t0
    summary = json.loads(out) if proc.returncode == 0 and out.strip() else None
    return summary, progress, peaks, wall


def window_costs(progress, wall, files, chunks):
    """Cost per file and per chunk in the windows (5–10%], (45–50%], (95–100%] of the files."""
    points = [(0.0, 0, 0)] + [(t, d, c) for t, d, _, c in progress] + [(wall, files, chunks)]
    rows = []
    for lo, hi in ((0.05, 0.10), (0.45, 0.50), (0.95, 1.0)):
        a = min(points, key=lambda p: abs(p[1] - lo * files))
        b = min(points, key=lambda p: abs(p[1] - hi * files))
        if b[1] > a[1] and b[2] > a[2]:
            rows.append((f"{int(hi * 100)}%", (b[0] - a[0]) / (b[1] - a[1]) * 1000, (b[0] - a[0]) / (b[2] - a[2]) * 1000))
    return rows


def rows_in(db):
    """(rows, distinct paths) of the chunks table, read with pylance (a reader beside no writer)."""
    code = ("import lance,sys; t=lance.dataset(sys.argv[1]+'/chunks.lance').to_table(columns=['path']);"
            "print(t.num_rows, len(set(t.column('path').to_pylist())))")
    py = os.environ.get("CTXD_TEST_PYTHON", os.path.expanduser("~/.cache/ctxd/py-venv/bin/python"))
    out = subprocess.run([py, "-c", code, db], capture_output=True, text=True, check=True).stdout.split()
    return int(out[0]), int(out[1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ctxd", required=True)
    ap.add_argument("--mirror", default="/work/.mirror/git+git/repo")
    ap.add_argument("--commit", default="1a3e64c6c4a623626ff0687008732a8e007e2a1c")
    ap.add_argument("--src", default=os.path.expanduser("~/.cache/ctxd/bench-large/git"))
    ap.add_argument("--work", default=os.path.expanduser("~/.cache/ctxd/bench-large"))
    ap.add_argument("--skip-first", action="store_true", help="reuse WORK/db from an earlier run")
    ap.add_argument("--skip-crash", action="store_true", help="stop after the latencies")
    ap.add_argument("--only-crash", action="store_true", help="only the crash and resume")
    args = ap.parse_args()
    if not os.path.isdir(args.src):
        checkout(args.mirror, args.commit, args.src)
    files = sum(len(fs) for _, _, fs in os.walk(args.src))
    lines = 0
    for d, _, fs in os.walk(args.src):
        for f in fs:
            with open(os.path.join(d, f), "rb") as fh:
                lines += fh.read().count(b"\n")
    print(f"corpus: {args.src} ({args.commit[:10]}): {files:,} files, {lines:,} lines")
    db = os.path.join(args.work, "db")
    quiet = dict(os.environ, CTXD_LOG="warn")

    if not args.only_crash:
        first(args, db, quiet)
    if not args.skip_crash:
        crash(args, files)


def first(args, db, quiet):
    """The first index, the graph's build time and the latencies afterwards."""
    if not args.skip_first:
        shutil.rmtree(db, ignore_errors=True)
        s, progress, peaks, wall = index(args.ctxd, args.src, db)
        if s is None:
            sys.exit("the first index failed")
        print(f"first index: {wall:.0f} s wall, {s['files_indexed']:,} files, {s['chunks_written']:,} chunks, "
              f"{s['chunks_written'] / wall:.1f} chunks/s; peak RSS {peaks['VmHWM'] / 1024:.0f} MB "
              f"(anonymous {peaks['RssAnon'] / 1024:.0f} MB)")
        for at, per_file, per_chunk in window_costs(progress, wall, s["files_seen"], s["chunks_written"]):
            print(f"  window ending at {at:>4} of the files: {per_file:.0f} ms/file, {per_chunk:.1f} ms/chunk")
    g = json.loads(subprocess.run([args.ctxd, "graph", "stats", "--db", db, "--json"], capture_output=True,
                                  text=True, check=True, env=quiet).stdout)
    print(f"code graph: {json.dumps({k: v for k, v in g.items() if not isinstance(v, (dict, list))})}")
    subprocess.run([args.ctxd, "compact", "--db", db, "--json"], check=True, capture_output=True, env=quiet)
    proc, base, ready = start_serve(args.ctxd, ["--role", "reader", "--db", db], ready_within=600)
    try:
        for name, path, bodies in (("search", "/v1/search", [{"query": q, "k": 10} for q in SEARCHES]),
                                   ("locate", "/v1/locate", [{"text": t, "k": 10} for t in LOCATES])):
            # A first request apart (it opens the version, builds the graph); then each text once
            # (answers are cached: a repeated text would measure the cache).
            t = time.perf_counter()
            post(base, path, {**bodies[0], ("query" if name == "search" else "text"): "warm up"}, timeout=600)
            first_ms = (time.perf_counter() - t) * 1000
            lat = []
            for body in bodies:
                t = time.perf_counter()
                post(base, path, body, timeout=120)
                lat.append((time.perf_counter() - t) * 1000)
            print(f"{name}: first request {first_ms:.0f} ms; then {len(lat)} texts one at a time: "
                  f"{percentiles(lat, (50, 95))}")
    finally:
        proc.terminate()
        proc.wait()


def crash(args, files):
    """SIGKILL half way through a first index, then the same command again."""
    crash = os.path.join(args.work, "db-crash")
    shutil.rmtree(crash, ignore_errors=True)
    _, progress, _, wall = index(args.ctxd, args.src, crash, kill_at=0.5, files=files)
    rows, paths = rows_in(crash)
    done = progress[-1][1] if progress else 0
    print(f"killed (SIGKILL) after {wall:.0f} s at {done:,} files done: {rows:,} chunks of {paths:,} files committed")
    s, _, _, wall2 = index(args.ctxd, args.src, crash)
    total = s["index_rows"]
    redo = max(0, s["chunks_embedded"] - (total - rows))
    print(f"resume: {wall2:.0f} s, {s['files_unchanged']:,} files unchanged (not chunked or embedded again), "
          f"{s['files_indexed']:,} indexed, {s['chunks_embedded']:,} chunks embedded, "
          f"{s['chunks_reused']:,} reused; the crash left {total - rows:,} of {total:,} chunks to do")
    print(f"redone: {redo:,} chunks = {100 * redo / max(rows, 1):.2f}% of the {rows:,} committed before the kill "
          f"(goal <= 5%)")


if __name__ == "__main__":
    main()
