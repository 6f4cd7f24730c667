#!/usr/bin/env python3
"""Branch switch: how long from `git checkout` in a watched work tree to the new files being searchable.

A clone of REPO (default: the search tool's `fetch` of tobymao/sqlglot) is checked out at --from, and
`ctxd serve --config` watches it as a git source with `refs = ["worktree", FROM]` (the work tree's view
is the default; FROM is read from the object database). When the daemon is ready:

1. `git checkout TO` (a ref the index does not hold: its changed chunks are embedded), then
2. `git checkout FROM` again (every vector is in the index: chunking and upserts only).

Every `.py` file the switch to TO changes (under --include) gets a probe: a word of its new content
that appears nowhere in FROM's files; the switch to TO is searchable when each probe finds its file,
the switch back when none does any more. POST /v1/search (bm25, the default ref:
`worktree`; one query with every probe word left) is polled every 50 ms; the figures are the time until the first probe answers and until
every probe does (all changed files searchable). A deleted file counts when its path stops answering.

    python3 benches/branch_switch.py [--ctxd BIN] [--repo DIR] [--from v30.16.0] [--to v30.17.0]
        [--include 'sqlglot/**'] [--max-probes 40]
"""
import argparse, os, re, subprocess, sys, tempfile, time

from ctxd_daemon import default_ctxd, post, start_serve, stop_daemon

WORD = re.compile(r"[A-Za-z][A-Za-z0-9]{7,}")


def git(repo, *args):
    return subprocess.run(["git", "-C", repo, *args], check=True, capture_output=True, text=True).stdout


def probes(repo, old, new, pathspec, limit):
    """(file, word) for files that change from `old` to `new`: a word of the new blob absent from
    every file of `old` under `pathspec` (case-insensitive), or (file, None) for a deleted file."""
    out = []
    for line in git(repo, "diff", "--name-status", "--no-renames", old, new, "--", pathspec).splitlines():
        status, path = line.split("\t", 1)
        if not path.endswith(".py"):
            continue
        if status == "D":
            out.append((path, None))
            continue
        added = [l[1:] for l in git(repo, "diff", "-U0", old, new, "--", path).splitlines() if l.startswith("+") and not l.startswith("+++")]
        for word in sorted({w for l in added for w in WORD.findall(l)}, key=len, reverse=True):
            found = subprocess.run(["git", "-C", repo, "grep", "-q", "-i", "-F", word, old, "--", pathspec])
            if found.returncode == 1:
                out.append((path, word))
                break
        if len(out) >= limit:
            break
    return out


def switch(repo, base, target, todo, gone=False):
    """Checks out `target` and polls until every probe of `todo` answers (with `gone`: until none
    answers at its path any more); returns (first, all, n). One search per round asks for every
    probe word left (so the polling costs the daemon one query every 50 ms, not one per probe)."""
    left = dict(todo)
    t0 = time.time()
    git(repo, "checkout", "-q", "-f", target)
    first = None
    while left and time.time() - t0 < 600:
        words = [w for w in left.values() if w]
        found = {}
        if words:
            r = post(base, "/v1/search", {"query": " ".join(words), "mode": "bm25", "source": "repo", "k": min(200, 10 * len(words))})
            for x in r["results"]:
                found.setdefault(x["path"], []).append(x["content"])
        for path, word in list(left.items()):
            stored = f"repo@worktree/{path}"
            if word is None:
                r = post(base, "/v1/search", {"query": os.path.basename(path), "mode": "bm25", "source": "repo", "k": 10})
                ok = not any(x["path"] == stored for x in r["results"])
            else:
                ok = any(word in c for c in found.get(stored, [])) != gone
                if ok and gone:
                    # Absent from the shared query's top k is not gone: ask for the word alone.
                    r = post(base, "/v1/search", {"query": word, "mode": "bm25", "source": "repo", "k": 10})
                    ok = not any(x["path"] == stored and word in x["content"] for x in r["results"])
            if ok:
                del left[path]
                first = first if first is not None else time.time() - t0
        time.sleep(0.05)
    if left:
        sys.exit(f"not searchable after 600 s: {sorted(left)[:5]}")
    return first, time.time() - t0, len(todo)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ctxd", default=default_ctxd())
    ap.add_argument("--repo", default="/work/.mirror/tobymao+sqlglot/repo")
    ap.add_argument("--from", dest="old", default="v30.16.0")
    ap.add_argument("--to", dest="new", default="v30.17.0")
    ap.add_argument("--include", default="sqlglot/**")
    ap.add_argument("--max-probes", type=int, default=40)
    args = ap.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # the table lines in order with the daemon's log
    work = tempfile.mkdtemp(prefix="ctxd-switch-")
    clone = os.path.join(work, "repo")
    subprocess.run(["git", "clone", "-q", "--no-checkout", args.repo, clone], check=True)
    git(clone, "checkout", "-q", args.old)
    pathspec = args.include.rstrip("*").rstrip("/") or "."
    forward = probes(clone, args.old, args.new, pathspec, args.max_probes)
    with open(os.path.join(work, "ctxd.toml"), "w") as f:
        f.write(f'[[source]]\nname = "repo"\ngit = "{clone}"\nrefs = ["worktree", "{args.old}"]\n'
                f'include = ["{args.include}"]\nmirror_dir = "{work}/mirror"\n\n[index]\ndb = "{work}/db"\n')
    proc, base, ready = start_serve(args.ctxd, ["--config", os.path.join(work, "ctxd.toml")], 3600, work=work)
    try:
        print(f"{args.repo} {args.include}: worktree at {args.old} + ref {args.old} ready after {ready:.1f}s")
        time.sleep(2.0)
        print("| switch | changed files probed | first searchable s | all searchable s |")
        print("|---|---|---|---|")
        first, every, n = switch(clone, base, args.new, forward)
        print(f"| {args.old} → {args.new} (new chunks embedded) | {n} | {first:.2f} | {every:.2f} |")
        time.sleep(2.0)
        first, every, n = switch(clone, base, args.old, [p for p in forward if p[1]], gone=True)
        print(f"| {args.new} → {args.old} (every vector in the index) | {n} | {first:.2f} | {every:.2f} |")
    finally:
        stop_daemon(proc, work)


if __name__ == "__main__":
    main()
