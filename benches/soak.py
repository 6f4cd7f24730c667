#!/usr/bin/env python3
"""Soak: a writer and a reader serving every query kind for a long time while the sources change.

Corpus: the first `--files` (2,000) CoSQA Python files copied into a git work tree
(~/.cache/ctxd/bench-soak/src, branch `main`), indexed as two named sources by one
configuration: `code`, the folder itself (watched), and `history`, the same repository's `main`
read from git (`include = ["edits/**"]`, polled every 5 s). Built once; later runs start from a
fresh copy of that index.

For `--minutes` (30), at the same time:
* `--clients` (50) threads ask, each in turn, every query kind — routed and BM25 search,
  context, completion context, locate, the callers graph tool, the symbol list and MCP's
  `search` tool over `POST /mcp` — a repeated CoSQA question or a distinct one, pausing
  `--think-ms` (1,000) between requests; three of four go to the writer, one to the reader;
* an editor rewrites a file under `edits/` every `--edit-ms` (500) and commits to `main` every
  `--commit-secs` (30) (the folder source sees the edits, the git source the commits; the
  daemon compacts as commits accumulate);
* the writer gets `SIGHUP` (its configuration read again) every `--reload-minutes` (5);
* the reader (`--role reader` on the same database) is restarted once, at half time (the
  clients ask the writer meanwhile).

Every 10 s: resident memory and open files of both processes, and what the writer's `/metrics`
says holds its memory (live and resident heap, LanceDB's two caches, the answers kept). Printed:
one row per 5-minute window (requests, errors, 503s, p50/p99 per process), the writer's memory
at each window's end, then the goals: resident memory after the warm-up grows ≤ 10 %, open
files flat, 0 errors, each window's p99 within 1.5× of the first. The warm-up ends when the
writer's bounded caches (the answer cache, LanceDB's index and metadata caches) have filled —
for each, the first sample where it holds ≥ 99 % of its most in the run; the latest of those
(the first window, `--window-minutes`, if the daemon does not report them); the growth after the first window is
printed too. A non-200 answer other than 503 is an error (the requests are all valid).

    python3 benches/soak.py [--ctxd BIN] [--minutes 30] [--clients 50] [--json-out FILE]

`--cache-fill N` measures instead what the bounded caches take per distinct question: the writer
alone on a fresh copy of the index, nothing edited, one client asking N distinct routed searches
in turn; every 250 answers the heap (live and resident), LanceDB's two caches and the answers the
answer cache keeps, then the heap each distinct question added while the answer cache filled
(from the 250th on: the first questions also load the model and the rescorer).
"""
import argparse, json, os, random, shutil, signal, subprocess, sys, threading, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ctxd_daemon import default_ctxd  # noqa: E402
from load import Daemon, log  # noqa: E402
from load_edit import git, git_commit  # noqa: E402
from load_probe import post_json, proc_rss_mb, scrape  # noqa: E402
from load_tail import pct  # noqa: E402

HOME = os.path.expanduser("~")
WORK = os.path.join(HOME, ".cache/ctxd/bench-soak")
COSQA = "/work/shared/eval/cosqa"
KINDS = ["search", "bm25", "context", "completion", "locate", "callers", "symbols", "mcp"]


def config_text(src, db):
    return f"""[[source]]
name = "code"
root = "{src}"
exclude = [".git/**"]

[[source]]
name = "history"
git = "{src}"
refs = ["main"]
include = ["edits/**"]
poll_interval_secs = 5

[index]
db = "{db}"
"""


def prepare(args):
    """The git work tree and its index, built once; returns (src, config path, template db)."""
    src, template = os.path.join(WORK, "src"), os.path.join(WORK, "db-template")
    if not os.path.isdir(src):
        files = sorted(os.listdir(os.path.join(COSQA, "corpus")))[: args.files]
        os.makedirs(os.path.join(src, "edits"))
        for name in files:
            shutil.copy2(os.path.join(COSQA, "corpus", name), os.path.join(src, name))
        for i in range(args.edit_files):
            with open(os.path.join(src, "edits", f"e{i:03d}.py"), "w") as f:
                f.write(f"def edited_{i}(x):\n    return x + {i}\n")
        git(src, "init", "-q", "-b", "main")
        git_commit(src, "corpus", who="soak")
        log(f"copied {len(files)} CoSQA files into the git work tree {src}")
    config = os.path.join(WORK, "soak.toml")
    with open(config, "w") as f:
        f.write(config_text(src, os.path.join(WORK, "db")))
    if not os.path.isdir(template):
        with open(os.path.join(WORK, "template.toml"), "w") as f:
            f.write(config_text(src, template))
        t0 = time.time()
        r = subprocess.run([args.ctxd, "index", "--config", os.path.join(WORK, "template.toml")], capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"ctxd index failed:\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
        log(f"indexed both sources in {time.time() - t0:.0f} s")
    shutil.rmtree(os.path.join(WORK, "db"), ignore_errors=True)
    shutil.copytree(template, os.path.join(WORK, "db"))
    return src, config


def request_for(kind, q, symbol, path):
    """(path, body) of one request of `kind`."""
    if kind == "search":
        return "/v1/search", {"query": q, "k": 10}
    if kind == "bm25":
        return "/v1/search", {"query": q, "k": 10, "mode": "bm25"}
    if kind == "context":
        return "/v1/context", {"query": q, "budget": 2000}
    if kind == "completion":
        return "/v1/completion-context", {"uri": path, "prefix": f"def helper(x):\n    # {q}\n    return ", "line": 3}
    if kind == "locate":
        return "/v1/locate", {"text": f"{q}\n\nThe function {symbol} in {path} does not do this.", "k": 10}
    if kind == "callers":
        return "/v1/graph/callers", {"symbol": symbol, "limit": 20}
    if kind == "symbols":
        return "/v1/symbols/list", {"target": path}
    call = {"name": "search", "arguments": {"query": q, "k": 5}}
    return "/mcp", {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call}


class Record:
    """Every answer: (time, process, kind, status, latency ms); thread-safe."""

    def __init__(self):
        self.lock, self.rows = threading.Lock(), []

    def add(self, *row):
        with self.lock:
            self.rows.append(row)


def client(idx, targets, queries, symbols, deadline, record, args):
    rng = random.Random(idx)
    n = 0
    while time.time() < deadline:
        kind = KINDS[(idx + n) % len(KINDS)]
        q = rng.choice(queries) if n % 2 == 0 else f"{rng.choice(queries)} {idx}-{n}"
        symbol, path = rng.choice(symbols)
        who = "reader" if n % 4 == 3 and targets["reader"] else "writer"
        route, body = request_for(kind, q, symbol, f"code/{path}")
        t0 = time.time()
        try:
            status, answer, _ = post_json(targets[who], route, body, timeout=120)
            if kind == "mcp" and status == 200 and (answer or {}).get("error"):
                status = 599
        except Exception:
            status = 598
        record.add(t0, who, kind, status, (time.time() - t0) * 1000)
        n += 1
        time.sleep(args.think_ms / 1000 * rng.uniform(0.5, 1.5))


def editor(src, deadline, args, counts):
    i = 0
    last_commit = time.time()
    while time.time() < deadline:
        k = i % args.edit_files
        with open(os.path.join(src, "edits", f"e{k:03d}.py"), "w") as f:
            f.write(f"def edited_{k}(x):\n    \"\"\"Edit {i} of the soak.\"\"\"\n    return x * {i} + {k}\n")
        counts["edits"] += 1
        i += 1
        if time.time() - last_commit >= args.commit_secs:
            counts["commits"] += git_commit(src, f"edit {i}", who="soak")
            last_commit = time.time()
        time.sleep(args.edit_ms / 1000)


def open_files(pid):
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return float("nan")


# What `/metrics` says the memory holds: the heap's live and resident bytes (jemalloc) and the
# bounded caches within it (LanceDB's two, the answer cache's answers), as `scrape` keys them.
MEMORY_SERIES = {
    ("ctxd_process_heap_bytes", '{state="allocated"}'): "heap_mb",
    ("ctxd_process_heap_bytes", '{state="resident"}'): "resident_mb",
    ("ctxd_index_cache_bytes", '{cache="index"}'): "lance_index_mb",
    ("ctxd_index_cache_bytes", '{cache="metadata"}'): "lance_metadata_mb",
    ("ctxd_query_answer_cache_answers", ""): "answers",
}


def memory(base):
    """{heap_mb, resident_mb, lance_index_mb, lance_metadata_mb, answers} of a daemon ({} if unreadable)."""
    m = scrape(base)
    return {key: m[series] / (1 << 20) if key.endswith("_mb") else m[series]
            for series, key in MEMORY_SERIES.items() if series in m}


# The writer's bounded caches, as `memory` names them: full once each holds what it will hold.
BOUNDED = ("answers", "lance_index_mb", "lance_metadata_mb")


def caches_full_at(samples):
    """When every bounded cache of the writer has filled: for each, the first sample where it holds
    ≥ 99 % of its most in the run; the latest of those is the end of the warm-up (a cache that
    fills and then sheds, as the index cache dropping superseded segments does, counts from when it
    first filled). None if the daemon did not report them."""
    held = [s.get("writer_memory") or {} for s in samples]
    if not held or not all(k in h for h in held[-1:] for k in BOUNDED):
        return None
    most = {k: max(h.get(k, 0) for h in held) for k in BOUNDED}
    firsts = [next(s["t"] for s, h in zip(samples, held) if h.get(k, 0) >= 0.99 * most[k]) for k in BOUNDED]
    return max(firsts)


def rss_growth_after(samples, since):
    """The writer's largest RSS after `since` against its RSS at the first sample from then."""
    after = [s for s in samples if s["t"] >= since]
    return max(s["writer_rss_mb"] for s in after) / after[0]["writer_rss_mb"] - 1 if after else None


def summarize(record, samples, t_start, args):
    windows = []
    window = args.window_minutes * 60
    for w in range(int(args.minutes * 60 // window)):
        lo, hi = t_start + w * window, t_start + (w + 1) * window
        rows = [r for r in record.rows if lo <= r[0] < hi]
        ok = {who: sorted(r[4] for r in rows if r[1] == who and r[3] == 200) for who in ("writer", "reader")}
        seen = [s for s in samples if lo <= s["t"] < hi] or samples[-1:]
        windows.append({
            "window": w + 1, "requests": len(rows),
            "errors": sum(1 for r in rows if r[3] not in (200, 503)),
            "refused_503": sum(1 for r in rows if r[3] == 503),
            **{f"{who}_p50_ms": pct(v, 0.5) for who, v in ok.items()},
            **{f"{who}_p99_ms": pct(v, 0.99) for who, v in ok.items()},
            **{f"{who}_rss_mb": max(s[f"{who}_rss_mb"] for s in seen) for who in ("writer", "reader")},
            **{f"{who}_fds": max(s[f"{who}_fds"] for s in seen) for who in ("writer", "reader")},
            # The writer's memory at the window's end, by what holds it.
            "writer_memory": seen[-1].get("writer_memory", {}),
        })
    full = caches_full_at(samples)
    goals = {
        # Warm-up: until the bounded caches stopped filling (the first window if not measured).
        "writer_rss_growth": rss_growth_after(samples, full if full is not None else t_start + window),
        "caches_full_min": (full - t_start) / 60 if full is not None else None,
        "writer_rss_growth_after_first_window": rss_growth_after(samples, t_start + window),
        "writer_open_files": (windows[0]["writer_fds"], max(w["writer_fds"] for w in windows)),
        "errors": sum(w["errors"] for w in windows),
        "p99_over_first": max((w["writer_p99_ms"] / windows[0]["writer_p99_ms"]) for w in windows) if windows else None,
    }
    return windows, goals


def fill_figures(rows):
    """What the distinct questions after the first 250 added (the first ones also load the model and
    the rescorer), as one sentence."""
    first, last = rows[min(1, len(rows) - 1)], rows[-1]
    kept = last.get("answers", 0) - first.get("answers", 0)
    lance = sum(last.get(k, 0) - first.get(k, 0) for k in ("lance_index_mb", "lance_metadata_mb"))
    heap = last.get("heap_mb", 0) - first.get("heap_mb", 0)
    return (f"from {first['answers_asked']:.0f} to {last['answers_asked']:.0f} distinct searches: heap +{heap:.1f} MB, "
            f"LanceDB caches +{lance:.1f} MB, answers kept +{kept:.0f}; the rest of the heap +{heap - lance:.1f} MB = "
            f"{(heap - lance) * 1024 / max(kept, 1):.1f} KB per answer kept (the answer, its query's embedding, the "
            f"rescoring caches); RSS +{last['rss_mb'] - first['rss_mb']:.0f} MB")


def cache_fill(args, config, queries):
    """The writer alone; `args.cache_fill` distinct searches; memory every 250 answers."""
    writer = Daemon(args.ctxd, ["--config", config], os.path.join(WORK, "writer.log"), name="writer")
    writer.wait_ready(600)
    rows = []
    try:
        for n in range(args.cache_fill + 1):
            if n % 250 == 0:
                time.sleep(6)  # the daemon samples its heap and caches every 5 s
                rows.append({"answers_asked": n, "rss_mb": proc_rss_mb(writer.proc.pid), **memory(writer.base)})
                log(f"{n} distinct searches: " + ", ".join(f"{k} {v:.1f}" for k, v in rows[-1].items()))
            if n < args.cache_fill:
                status, _, _ = post_json(writer.base, "/v1/search", {"query": f"{queries[n % len(queries)]} {n}", "k": 10})
                if status != 200:
                    sys.exit(f"search {n} answered {status}")
    finally:
        writer.stop()
    log(fill_figures(rows))
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump({"cache_fill": rows}, f, indent=1)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ctxd", default=default_ctxd())
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--edit-files", type=int, default=50)
    ap.add_argument("--think-ms", type=float, default=1000)
    ap.add_argument("--edit-ms", type=float, default=500)
    ap.add_argument("--commit-secs", type=float, default=30)
    ap.add_argument("--reload-minutes", type=float, default=5)
    ap.add_argument("--window-minutes", type=float, default=5)
    ap.add_argument("--cache-fill", type=int, default=0, metavar="N",
                    help="measure the caches' memory per distinct question instead (N searches, no soak)")
    ap.add_argument("--json-out")
    args = ap.parse_args()
    os.makedirs(WORK, exist_ok=True)
    src, config = prepare(args)
    queries = [json.loads(line)["query"] for line in open(os.path.join(COSQA, "queries-dev.jsonl"))]
    if args.cache_fill:
        return cache_fill(args, config, queries)
    symbols = []
    for name in sorted(os.listdir(src))[:400]:
        if name.endswith(".py"):
            for line in open(os.path.join(src, name), errors="replace"):
                if line.startswith("def "):
                    symbols.append((line[4:].split("(")[0].strip(), name))
                    break
    db = os.path.join(WORK, "db")
    writer = Daemon(args.ctxd, ["--config", config], os.path.join(WORK, "writer.log"), name="writer")
    writer.wait_ready(600)
    reader_args = ["--role", "reader", "--db", db]
    reader = Daemon(args.ctxd, reader_args, os.path.join(WORK, "reader.log"), name="reader")
    reader.wait_ready(600)
    targets = {"writer": writer.base, "reader": reader.base}
    record, samples, counts = Record(), [], {"edits": 0, "commits": 0, "reloads": 0, "reader_restarts": 0}
    t_start = time.time()
    deadline = t_start + args.minutes * 60
    threads = [threading.Thread(target=client, args=(i, targets, queries, symbols, deadline, record, args), daemon=True)
               for i in range(args.clients)]
    threads.append(threading.Thread(target=editor, args=(src, deadline, args, counts), daemon=True))
    for t in threads:
        t.start()
    next_reload, restarted = t_start + args.reload_minutes * 60, False
    while time.time() < deadline:
        now = time.time()
        samples.append({"t": now, "writer_rss_mb": proc_rss_mb(writer.proc.pid), "writer_fds": open_files(writer.proc.pid),
                        "reader_rss_mb": proc_rss_mb(reader.proc.pid), "reader_fds": open_files(reader.proc.pid),
                        "writer_memory": memory(writer.base)})
        if now >= next_reload:
            writer.proc.send_signal(signal.SIGHUP)
            counts["reloads"] += 1
            next_reload += args.reload_minutes * 60
        if not restarted and now >= t_start + args.minutes * 30:
            targets["reader"] = None
            reader.stop()
            reader = Daemon(args.ctxd, reader_args, os.path.join(WORK, "reader.log"), name="reader")
            reader.wait_ready(600)
            targets["reader"] = reader.base
            restarted = True
            counts["reader_restarts"] += 1
        if not writer.alive():
            log(f"the writer died:\n{writer.tail()}")
            break
        s = samples[-1]
        held = ", ".join(f"{k} {v:.0f}" for k, v in s["writer_memory"].items())
        log(f"{(now - t_start) / 60:5.1f} min: {len(record.rows)} answers, writer {s['writer_rss_mb']:.0f} MB "
            f"{s['writer_fds']} files ({held}), reader {s['reader_rss_mb']:.0f} MB {s['reader_fds']} files")
        time.sleep(10)
    for t in threads:
        t.join(timeout=180)
    windows, goals = summarize(record, samples, t_start, args)
    reader.stop()
    writer.stop()
    log("| window | requests | errors | 503 | writer p50 / p99 | reader p50 / p99 | RSS writer / reader (max) "
        "| open files writer / reader (max) |")
    log("|---|---|---|---|---|---|---|---|")
    for w in windows:
        log(f"| {w['window']} | {w['requests']} | {w['errors']} | {w['refused_503']} | {w['writer_p50_ms']:.0f} / "
            f"{w['writer_p99_ms']:.0f} ms | {w['reader_p50_ms']:.0f} / {w['reader_p99_ms']:.0f} ms | "
            f"{w['writer_rss_mb']:.0f} / {w['reader_rss_mb']:.0f} MB | {w['writer_fds']} / {w['reader_fds']} |")
    log("| window | writer RSS | heap live / resident | LanceDB index / metadata cache | answers kept |")
    log("|---|---|---|---|---|")
    for w in windows:
        m = w["writer_memory"]
        if m:
            log(f"| {w['window']} | {w['writer_rss_mb']:.0f} MB | {m.get('heap_mb', float('nan')):.0f} / "
                f"{m.get('resident_mb', float('nan')):.0f} MB | {m.get('lance_index_mb', float('nan')):.1f} / "
                f"{m.get('lance_metadata_mb', float('nan')):.1f} MB | {m.get('answers', float('nan')):.0f} |")
    log(f"counts: {counts}")
    by_kind = {k: sum(1 for r in record.rows if r[2] == k and r[3] not in (200, 503)) for k in KINDS}
    log(f"errors by kind: {by_kind}")
    full = goals["caches_full_min"]
    log(f"the writer's bounded caches full at {full:.1f} min" if full is not None else "cache fill not reported")
    log(f"writer RSS growth after the first window {goals['writer_rss_growth_after_first_window']:+.1%}")
    log(f"goals: writer RSS growth after warm-up {goals['writer_rss_growth']:+.1%} (≤ 10 %), open files "
        f"first window max {goals['writer_open_files'][0]}, max of all {goals['writer_open_files'][1]} (flat), errors {goals['errors']} (0), "
        f"worst window p99 / first {goals['p99_over_first']:.2f}× (≤ 1.5×)")
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump({"windows": windows, "goals": goals, "counts": counts, "samples": samples, "by_kind": by_kind}, f, indent=1)


if __name__ == "__main__":
    main()
