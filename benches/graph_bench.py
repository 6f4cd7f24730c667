#!/usr/bin/env python3
"""Code graph at scale: latency of `find_references` and `repo_map`, and the graph's build time.

Builds a corpus of at least --min-chunks chunks by copying a source tree (default: the working tree
of a bare mirror at HEAD, e.g. /work/.mirror/tobymao+sqlglot/repo) into `copy_0/`, `copy_1/`, ...
until the index holds enough chunks (each copy is a distinct set of paths: every definition exists
once per copy, so names are ambiguous across copies, as in a monorepo with vendored duplicates).
Indexes it full-text only (`ctxd index --no-embed`: the graph needs no vectors), starts
`ctxd serve` on it (full-text only, as indexed), then measures over HTTP on 127.0.0.1 (client-side wall time, so the figures
include HTTP and JSON):

* the first graph request (loading files, symbols and edges and resolving every edge);
* `POST /v1/graph/find_references` for --refs random definition names (p50, p99);
* `POST /v1/graph/repo_map` with a query (locate's ranking: BM25, symbols, paths, graph) for
  --maps queries made of random definition names and docstring words (p50, p99).

    python3 benches/graph_bench.py --ctxd target/debug/ctxd --mirror /work/.mirror/tobymao+sqlglot/repo \
        [--work ~/.cache/ctxd/graph-bench] [--min-chunks 250000] [--refs 300] [--maps 100]
"""
import argparse, json, os, random, re, shutil, subprocess, sys, time, urllib.request


def post(base, path, body):
    req = urllib.request.Request(base + path, data=json.dumps(body).encode(), headers={"content-type": "application/json"})
    t = time.perf_counter()
    with urllib.request.urlopen(req, timeout=600) as r:
        out = json.loads(r.read())
    return out, (time.perf_counter() - t) * 1000


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ctxd", required=True)
    ap.add_argument("--mirror", default="/work/.mirror/tobymao+sqlglot/repo")
    ap.add_argument("--work", default=os.path.expanduser("~/.cache/ctxd/graph-bench"))
    ap.add_argument("--min-chunks", type=int, default=250_000)
    ap.add_argument("--refs", type=int, default=300)
    ap.add_argument("--maps", type=int, default=100)
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args()
    random.seed(a.seed)
    src, root, db = os.path.join(a.work, "src"), os.path.join(a.work, "root"), os.path.join(a.work, "db")
    if not os.path.isdir(src):
        os.makedirs(src)
        archive = subprocess.run(["git", "-C", a.mirror, "archive", "HEAD"], capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", src], input=archive, check=True)
    os.makedirs(root, exist_ok=True)
    ctxd_json = lambda *args: json.loads(subprocess.run([a.ctxd, *args], capture_output=True, text=True, check=True).stdout)
    rows = lambda: ctxd_json("snapshots", "--db", db, "--json")["snapshots"][-1]["rows"] if os.path.isdir(db) else 0
    copies = len([d for d in os.listdir(root) if d.startswith("copy_")])
    # Grow copy by copy (each indexed incrementally) until the index is large enough.
    while copies == 0 or rows() < a.min_chunks:
        shutil.copytree(src, os.path.join(root, f"copy_{copies}"))
        copies += 1
        t = time.time()
        s = ctxd_json("index", root, "--db", db, "--no-embed", "--json")
        print(f"{copies} copies: {rows()} chunks, index {time.time() - t:.1f}s ({s.get('files_indexed')} files)", flush=True)
    total_chunks = rows()
    stats = ctxd_json("graph", "stats", "--db", db, "--json")
    print("graph:", json.dumps(stats), flush=True)
    # Names to ask for: definitions of the source tree.
    names, words = set(), []
    for dirpath, _, files in os.walk(src):
        for f in files:
            if f.endswith(".py"):
                text = open(os.path.join(dirpath, f), errors="replace").read()
                names.update(re.findall(r"^\s*(?:def|class)\s+([A-Za-z_]\w{3,})", text, re.M))
                words += re.findall(r"\"\"\"(\w[^\n\"]{10,60})", text)
    names = sorted(names)
    # Served as it was indexed: full-text only (no model: a query vector over rows without vectors
    # would be a flat scan that measures nothing the graph does).
    config = os.path.join(a.work, "serve.toml")
    with open(config, "w") as f:
        f.write(f'[source]\nroot = {json.dumps(root)}\nembed = false\n\n[index]\ndb = {json.dumps(db)}\n')
    serve = subprocess.Popen([a.ctxd, "serve", "--config", config, "--listen", "127.0.0.1:0", "--flight-listen", ""],
                             stderr=subprocess.PIPE, text=True)
    base = None
    for line in serve.stderr:
        m = re.search(r"listening on (http://[\d.:]+)", line)
        if m:
            base = m.group(1)
            break
    try:
        # Measured once the initial scan of the tree has committed (/readyz): the scan hashes every
        # file on the same cores and is not what the graph costs.
        while True:
            try:
                if urllib.request.urlopen(base + "/readyz").status == 200:
                    break
            except urllib.error.HTTPError:
                pass
            time.sleep(0.5)
        # The first request builds the graph of the version (a map by centrality needs no query).
        _, first_ms = post(base, "/v1/graph/repo_map", {"budget": 256})
        lat = []
        for n in random.sample(names, min(a.refs, len(names))):
            try:
                _, ms = post(base, "/v1/graph/find_references", {"symbol": n, "limit": 50})
                lat.append(ms)
            except urllib.error.HTTPError:
                pass
        maps = []
        for _ in range(a.maps):
            q = " ".join(random.sample(names, 2) + random.sample(words, 1))
            _, ms = post(base, "/v1/graph/repo_map", {"query": q, "budget": 1024})
            maps.append(ms)
        out = {
            "chunks": total_chunks, "files": stats["files"], "definitions": stats["definitions"], "edges": stats["edges"],
            "first_request_ms (graph load + build)": round(first_ms),
            "find_references_ms": {"n": len(lat), "p50": round(pct(lat, 50), 1), "p99": round(pct(lat, 99), 1)},
            "repo_map_ms": {"n": len(maps), "p50": round(pct(maps, 50), 1), "p99": round(pct(maps, 99), 1)},
        }
        print(json.dumps(out, indent=1))
    finally:
        serve.terminate()
        serve.wait(timeout=60)


if __name__ == "__main__":
    main()
