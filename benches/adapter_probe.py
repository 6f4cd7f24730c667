#!/usr/bin/env python3
"""Does a per-repository query adapter learned from git history move the dense ranking of issues?

Issue 86's go/no-go probe, on localization *train* issues only. For one repository: its files at the
latest base commit of its issues are indexed once by ctxd (Python files, as benches/localization.py's
default set), the chunk vectors read from the Lance table; the mirror's first-parent history up to
that commit gives (first message line -> changed .py files) pairs; summaries and issue texts are
embedded by `ctxd embed --query`. For each issue, an adapter is fitted on the commits strictly before
its base commit (never its fix), and the gold files are ranked by the best chunk's cosine with the
base query vector and with the adapted one. Two controls: the same fits on commits whose file sets
were permuted (`*-shuffled`: learning, not recency, if they fall to the base), and `recency` (files
ranked by their latest change before the issue's base commit, no text at all), and `frequency`
(files ranked by how many of those commits changed them). `--only` runs some
variants (the contrastive ones are slow).

    ~/.cache/ctxd/py-venv/bin/python benches/adapter_probe.py --ctxd BIN --repo dask/dask [--work DIR] \
        [--only base,ridge30,ridge30-shuffled,recency]
"""
import argparse, json, os, subprocess, sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "..", "shared", "eval", "localization")


def git(gitdir, *args):
    return subprocess.run(["git", "--git-dir", gitdir, *args], check=True, capture_output=True).stdout


def checkout(gitdir, commit, tree):
    """The commit's .py files written under `tree` (once); blobs the mirror lacks are skipped."""
    if os.path.isdir(tree):
        return
    listing = git(gitdir, "ls-tree", "-r", "-z", commit).split(b"\0")
    blobs = []
    for rec in listing:
        if rec:
            meta, path = rec.split(b"\t", 1)
            mode, kind, oid = meta.decode().split()
            path = path.decode("utf-8", "surrogateescape")
            if kind == "blob" and mode != "120000" and path.endswith(".py") and not any(
                    p.startswith(".") for p in path.split("/")):
                blobs.append((oid, path))
    inp = "".join(oid + "\n" for oid, _ in blobs).encode()
    out = subprocess.run(["git", "--git-dir", gitdir, "cat-file", "--batch"], input=inp, check=True,
                         capture_output=True).stdout
    pos = 0
    for oid, path in blobs:
        nl = out.index(b"\n", pos)
        head = out[pos:nl].decode().split()
        pos = nl + 1
        if len(head) < 3 or head[1] != "blob":
            continue
        size = int(head[2])
        full = os.path.join(tree, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "wb") as f:
            f.write(out[pos:pos + size])
        pos += size + 1


def history(gitdir, commit, limit):
    """[(time, summary, [changed .py paths])], newest first: first parents, a merge diffed against its
    first parent (as ctxd's history reads it)."""
    out = git(gitdir, "log", "--first-parent", "--diff-merges=first-parent", f"-n{limit}", "--name-only",
              "--format=\x01%H\x02%ct\x02%s", commit).decode("utf-8", "replace")
    rows = []
    for block in out.split("\x01")[1:]:
        head, _, files = block.partition("\n")
        sha, t, summary = head.split("\x02", 2)
        paths = [p for p in files.split("\n") if p.endswith(".py")]
        rows.append((int(t), summary, paths))
    return rows


def embed(ctxd, texts, query=True):
    inp = "".join(json.dumps(t[:4000]) + "\n" for t in texts)
    args = [ctxd, "embed", "--jsonl"] + (["--query"] if query else [])
    out = subprocess.run(args, input=inp.encode(), check=True, capture_output=True).stdout.decode()
    return np.array([json.loads(l) for l in out.splitlines()], dtype=np.float32)


def chunks(db):
    import lance
    t = lance.dataset(os.path.join(db, "chunks.lance"))
    tab = t.to_table(columns=["path", "vector"])
    paths = tab.column("path").to_pylist()
    vec = np.stack(tab.column("vector").to_numpy(zero_copy_only=False)).astype(np.float32)
    return paths, vec


def unit(x):
    return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-9)


def fit_ridge(Q, T, lam):
    """W minimising |QW - T|^2 + lam |W - I|^2."""
    d = Q.shape[1]
    return np.linalg.solve(Q.T @ Q + lam * np.eye(d), Q.T @ T + lam * np.eye(d))


def fit_softmax(Q, pos, F, lam, steps=150, lr=0.002, tau=20.0, batch=256, seed=0):
    """W (from I) maximising each commit's log-probability of its changed files among all files
    (softmax over cosines with the files' mean chunk vectors x tau), plus lam |W - I|^2; Adam on
    mini-batches. pos[i]: a set of file ids."""
    d = Q.shape[1]
    eye = np.eye(d, dtype=np.float32)
    W = eye.copy()
    m, v = np.zeros_like(W), np.zeros_like(W)
    rng = np.random.default_rng(seed)
    mask = np.zeros((len(Q), len(F)), dtype=np.float32)
    for i, fs in enumerate(pos):
        mask[i, list(fs)] = 1.0
    for step in range(1, steps + 1):
        b = rng.choice(len(Q), size=min(batch, len(Q)), replace=False)
        Qb = Q[b]
        Z = Qb @ W
        nz = np.linalg.norm(Z, axis=1, keepdims=True)
        Zu = Z / nz
        S = tau * (Zu @ F.T)
        S -= S.max(axis=1, keepdims=True)
        E = np.exp(S)
        P_all = E / E.sum(axis=1, keepdims=True)
        Ep = E * mask[b]
        P_pos = Ep / np.maximum(Ep.sum(axis=1, keepdims=True), 1e-30)
        G = tau * (P_all - P_pos) @ F
        G = (G - (G * Zu).sum(axis=1, keepdims=True) * Zu) / nz
        g = Qb.T @ G / len(b) + 2 * lam * (W - eye)
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        W -= lr * (m / (1 - 0.9 ** step)) / (np.sqrt(v / (1 - 0.999 ** step)) + 1e-8)
    return W


def choose(Q, pos, Fv, fits, share=0.1):
    """The fit (of `fits`: name -> function(Q, pos) -> W) whose fit on the older commits ranks the newest
    `share` of them (their changed files among all files, by file vector) best, or None when none beats
    the base (what ctxd does)."""
    n_out = max(10, min(200, int(len(Q) * share)))
    if len(Q) - n_out < 30:
        return None
    def mrr(W):
        total = 0.0
        for q, fs in zip(Q[:n_out], pos[:n_out]):
            qq = unit(q @ W) if W is not None else q
            order = np.argsort(-(Fv @ qq))[:10]
            hit = [r for r, f in enumerate(order) if f in fs]
            total += 1.0 / (hit[0] + 1) if hit else 0.0
        return total / n_out
    best, best_fit = mrr(None), None
    for name, fit in fits.items():
        m = mrr(fit(Q[n_out:], pos[n_out:]))
        if m > best:
            best, best_fit = m, name
    return best_fit


def rank_files(q, C, chunk_file, nfiles):
    s = C @ q
    best = np.full(nfiles, -9.0, dtype=np.float32)
    np.maximum.at(best, chunk_file, s)
    return np.argsort(-best)


def metrics(order, gold):
    rank = {f: r for r, f in enumerate(order[:10])}
    first = min((rank[g] for g in gold if g in rank), default=None)
    acc = {k: all(g in rank and rank[g] < k for g in gold) for k in (1, 5, 10)}
    return acc, (1.0 / (first + 1) if first is not None else 0.0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ctxd", required=True)
    ap.add_argument("--repo", required=True)
    ap.add_argument("--work", default="/tmp/adapter-probe")
    ap.add_argument("--commits", type=int, default=3000)
    ap.add_argument("--lams", default="1,3,10,30")
    ap.add_argument("--train-commits", type=int, default=2000)
    ap.add_argument("--only", default="", help="comma-separated variants to run (default: all)")
    args = ap.parse_args()
    issues = [json.loads(l) for l in open(os.path.join(DATA, "train.jsonl"))]
    issues = [x for x in issues if x["repo"] == args.repo]
    gitdir = f"/work/.mirror/{args.repo.replace('/', '+')}/repo"
    times = {x["id"]: int(git(gitdir, "show", "-s", "--format=%ct", x["base_commit"]).decode()) for x in issues}
    latest = max(issues, key=lambda x: times[x["id"]])["base_commit"]
    work = os.path.join(args.work, args.repo.replace("/", "+"))
    tree, db = os.path.join(work, "tree"), os.path.join(work, "db")
    checkout(gitdir, latest, tree)
    if not os.path.isdir(db):
        subprocess.run([args.ctxd, "index", tree, "--db", db], check=True, capture_output=True)
    paths, C = chunks(db)
    root = os.path.abspath(tree)
    rel = [p[len(root) + 1:] if p.startswith(root) else p.lstrip("/") for p in paths]
    files = sorted(set(rel))
    fid = {f: i for i, f in enumerate(files)}
    chunk_file = np.array([fid[r] for r in rel])
    Fv = np.zeros((len(files), C.shape[1]), dtype=np.float32)
    np.add.at(Fv, chunk_file, C)
    Fv = unit(Fv)
    hist = history(gitdir, latest, args.commits)
    hist = [(t, s, [fid[p] for p in ps if p in fid]) for t, s, ps in hist]
    # Every commit's files, for the recency control (before the example filter).
    changes = [(t, fs) for t, _, fs in hist]
    hist = [h for h in hist if 1 <= len(h[2]) <= 20 and len(h[1]) >= 15]
    cache = os.path.join(work, "emb.npz")
    if os.path.exists(cache):
        z = np.load(cache)
        H, Iq = z["H"], z["I"]
    else:
        H = embed(args.ctxd, [s for _, s, _ in hist])
        Iq = embed(args.ctxd, [x["query"] for x in issues])
        np.savez(cache, H=H, I=Iq)
    print(f"{args.repo}: {len(files)} files, {len(C)} chunks, {len(hist)} commits, {len(issues)} issues", file=sys.stderr)
    rng = np.random.default_rng(0)
    variants = {"base": None}
    for lam in [float(x) for x in args.lams.split(",")]:
        variants[f"ridge{lam:g}"] = ("ridge", lam, False)
        variants[f"soft{lam:g}"] = ("soft", lam, False)
    variants["soft-auto"] = ("auto-soft", 0, False)
    variants["any-auto"] = ("auto-any", 0, False)
    variants["soft-shuffled"] = ("soft", float(args.lams.split(",")[1]), True)
    for lam in [float(x) for x in args.lams.split(",")]:
        variants[f"ridge{lam:g}-shuffled"] = ("ridge", lam, True)
    variants["recency"] = ("recency", 0, False)
    variants["frequency"] = ("frequency", 0, False)
    if args.only:
        keep = args.only.split(",")
        variants = {v: s for v, s in variants.items() if v in keep}
    sums = {v: [0, 0, 0, 0.0, 0] for v in variants}
    for x, q in zip(issues, Iq):
        gold = [fid[g] for g in x["gold_files"] if g in fid]
        if not gold:
            continue
        tr = [(s, fs, h) for (t, s, fs), h in zip(hist, H) if t < times[x["id"]]][: args.train_commits]
        if len(tr) < 30:
            continue
        Q = np.stack([h for _, _, h in tr])
        pos = [set(fs) for _, fs, _ in tr]
        for v, spec in variants.items():
            if spec is not None and spec[0] in ("recency", "frequency"):
                key = np.full(len(files), -1, dtype=np.int64)
                for t, fs in changes:
                    if t < times[x["id"]]:
                        for f in fs:
                            key[f] = max(key[f], t) if spec[0] == "recency" else max(key[f], 0) + 1
                acc, rr = metrics(np.argsort(-key, kind="stable"), gold)
                s = sums[v]
                s[0] += acc[1]; s[1] += acc[5]; s[2] += acc[10]; s[3] += rr; s[4] += 1
                continue
            if spec is None:
                qq = q
            else:
                kind, lam, shuf = spec
                p = list(pos)
                if shuf:
                    rng.shuffle(p)
                if kind.startswith("auto"):
                    fits = {}
                    for l in [float(x) for x in args.lams.split(",")]:
                        fits[("soft", l)] = lambda Qx, px, l=l: fit_softmax(Qx, px, Fv, l * 1e-3)
                        if kind == "auto-any":
                            fits[("ridge", l)] = lambda Qx, px, l=l: fit_ridge(
                                Qx, np.stack([unit(Fv[list(fs)].mean(0)) for fs in px]), l)
                    pick = choose(Q, p, Fv, fits)
                    kind, lam = pick if pick is not None else ("none", 0)
                if kind == "none":
                    W = np.eye(Q.shape[1], dtype=np.float32)
                elif kind == "ridge":
                    T = np.stack([unit(Fv[list(fs)].mean(0)) for fs in p])
                    W = fit_ridge(Q, T, lam)
                else:
                    W = fit_softmax(Q, p, Fv, lam * 1e-3)
                qq = unit(q @ W)
            acc, rr = metrics(rank_files(qq, C, chunk_file, len(files)), gold)
            s = sums[v]
            s[0] += acc[1]; s[1] += acc[5]; s[2] += acc[10]; s[3] += rr; s[4] += 1
    for v, s in sums.items():
        n = max(s[4], 1)
        print(json.dumps({"repo": args.repo, "variant": v, "n": s[4], "acc1": s[0] / n, "acc5": s[1] / n,
                          "acc10": s[2] / n, "mrr10": s[3] / n}))


if __name__ == "__main__":
    main()
