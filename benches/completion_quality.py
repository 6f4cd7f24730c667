#!/usr/bin/env python3
"""Completion-context usefulness: does the context hold the definitions the next lines use?

For random cursor places in the completion-latency corpus (the index `completion_latency.py`
builds), the gold files are where the identifiers of the *next three lines* — what the developer
is about to type — are defined, found through ctxd's own symbol table (`mode: symbol`), other
than the cursor's file. A request is a hit when one of its snippets comes from a gold file.
Places whose next lines use nothing defined elsewhere are skipped. Seeded; nothing is tuned on it.

    python3 benches/completion_quality.py [--ctxd BIN] [--db DIR] [--places 200]
"""
import argparse, glob, os, random, re, statistics, time

from ctxd_daemon import completion_bench_args, post, start_daemon

KEYWORDS = set("""as async await break const continue crate dyn else enum extern false fn for if impl in let loop
match mod move mut pub ref return self Self static struct super trait true type unsafe use where while Some None Ok
Err Box Vec String Option Result usize isize u8 u16 u32 u64 i8 i16 i32 i64 f32 f64 bool str char new default from
into clone len iter map unwrap expect push insert get""".split())


def main():
    ap = argparse.ArgumentParser()
    completion_bench_args(ap)
    ap.add_argument("--places", type=int, default=200)
    args = ap.parse_args()
    random.seed(23)
    proc, base, _ = start_daemon(args.ctxd, args.src, args.db, ready_within=3600)
    try:
        files = [f for f in glob.glob(os.path.join(args.src, "**", "*.rs"), recursive=True) if 2000 < os.path.getsize(f) < 200000]
        defined = {}

        def definitions(name):
            if name not in defined:
                r = post(base, "/v1/search", {"query": name, "mode": "symbol", "k": 5})
                defined[name] = {h["path"] for h in r["results"] if h.get("symbol") and h["symbol"].split("::")[-1] == name}
            return defined[name]

        hits, asked, lat = 0, 0, []
        tries = 0
        while asked < args.places and tries < args.places * 20:
            tries += 1
            path = random.choice(files)
            rel = os.path.relpath(path, args.src)
            lines = open(path, encoding="utf-8", errors="replace").read().split("\n")
            if len(lines) < 20:
                continue
            line = random.randint(10, len(lines) - 4)
            upcoming = "\n".join(lines[line:line + 3])
            names = {w for w in re.findall(r"[A-Za-z_][A-Za-z0-9_]{3,}", upcoming) if w not in KEYWORDS}
            gold = set()
            for n in list(names)[:8]:
                gold |= {p for p in definitions(n) if not rel.endswith(p) and not p.endswith(rel)}
            if not gold:
                continue
            cur = lines[line - 1]
            body = {"uri": "file://" + path, "language": "rust", "line": line, "max_chunks": 3,
                    "prefix": ("\n".join(lines[: line - 1]) + "\n" + cur)[-8000:],
                    "suffix": "\n" + "\n".join(lines[line:line + 20]), "strategy": "multi_line"}
            t = time.perf_counter()
            r = post(base, "/v1/completion-context", body)
            lat.append((time.perf_counter() - t) * 1000)
            asked += 1
            hits += any(s["uri"] in gold for s in r["snippets"])
        print(f"{asked} places with definitions elsewhere: context holds one of them at {hits / max(asked, 1):.3f} "
              f"(mean latency {statistics.mean(lat):.1f} ms)")
    finally:
        proc.terminate()
        proc.wait()


if __name__ == "__main__":
    main()
