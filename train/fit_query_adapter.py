#!/usr/bin/env python3
"""Fits ctxd's generic query adapter: a linear map on the pooled query vector, learned from the
mined pairs (train/mine_pairs.py) over document vectors that ctxd itself computes and holds fixed.

Why: the documents of every index are already embedded by the base model; training only the query
side costs a short query's embedding per pair and re-embeds no index (issue 86, part 1). This
script embeds the pairs' queries and documents once with `ctxd embed` (cached by text hash under
--cache, so a rerun resumes), fits each variant on the training repositories' pairs, judges every
variant on the validation repositories' pairs (MRR@10 of the positive among all that repository's
documents) and writes the best one, when it beats the base, as the raw little-endian f32 matrix
that `ctxd_models::adapter::QueryAdapter::from_bytes` reads.

Variants: `ridge` (closed form toward the positive's vector, pulled toward the identity) and
`contrastive` (InfoNCE over in-batch and hard negatives, Adam from the identity with an L2 pull
toward it). Only numpy is needed.

    python3 train/fit_query_adapter.py --pairs ~/.cache/ctxd/pairs/pairs.jsonl.gz \
        --out models/adapters/all-minilm-l6-v2.bin [--max-train 40000] [--report ../shared/eval/cosqa]
"""
import argparse
import gzip
import hashlib
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def parse_args(argv):
    target = Path(os.environ.get("CARGO_TARGET_DIR", Path.home() / ".cache" / "ctxd-target"))
    release = target / "release" / "ctxd"
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", default=str(Path.home() / ".cache/ctxd/pairs/pairs.jsonl.gz"))
    ap.add_argument("--ctxd", default=str(release if release.exists() else target / "debug" / "ctxd"))
    ap.add_argument("--cache", default=str(Path.home() / ".cache/ctxd/adapter-vectors"))
    ap.add_argument("--out", help="where the chosen adapter's weights go (nothing written when none wins)")
    ap.add_argument("--report-json", help="every variant's validation figures, as JSON")
    ap.add_argument("--max-train", type=int, default=40000, help="training pairs used (a fixed sample)")
    ap.add_argument("--max-valid", type=int, default=4000, help="validation pairs used (a fixed sample)")
    ap.add_argument("--negatives", type=int, default=3, help="hard negatives per pair embedded and used")
    ap.add_argument("--kinds", default="commit,docstring,issue", help="pair kinds trained on")
    ap.add_argument("--valid-kinds", help="pair kinds judged on (default: --kinds); another kind than the"
                    " training one asks whether a fit carries over to a query style it never saw")
    ap.add_argument("--variants", default="ridge:10,ridge:30,ridge:100,contrastive:0.05,contrastive:0.2")
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--seed", type=int, default=13)
    return ap.parse_args(argv)


def load_pairs(path, kinds, valid_kinds, max_train, max_valid, seed):
    train, valid = [], []
    with gzip.open(path, "rt") as f:
        for line in f:
            p = json.loads(line)
            if p["split"] == "validation" and p["kind"] in valid_kinds:
                valid.append(p)
            elif p["split"] != "validation" and p["kind"] in kinds:
                train.append(p)
    rng = random.Random(seed)
    rng.shuffle(train)
    rng.shuffle(valid)
    return train[:max_train], valid[:max_valid]


class Vectors:
    """Text → vector, embedded by `ctxd embed` in batches and cached on disk by text hash."""

    def __init__(self, ctxd, cache):
        self.ctxd, self.cache = ctxd, Path(cache)
        self.cache.mkdir(parents=True, exist_ok=True)
        self.known = {}
        for part in sorted(self.cache.glob("part-*.npz")):
            z = np.load(part)
            self.known.update(zip(z["keys"].tolist(), z["vectors"]))

    @staticmethod
    def key(text):
        return hashlib.sha1(text.encode()).hexdigest()

    def ensure(self, texts, batch=2000):
        todo = sorted({t for t in texts if self.key(t) not in self.known})
        done = 0
        for i in range(0, len(todo), batch):
            part = todo[i:i + batch]
            t0 = time.time()
            lines = "".join(json.dumps(t) + "\n" for t in part)
            out = subprocess.run([self.ctxd, "embed", "--jsonl"], input=lines, capture_output=True, text=True, check=True)
            vecs = np.array([json.loads(l) for l in out.stdout.splitlines()], dtype=np.float32)
            if len(vecs) != len(part):
                sys.exit(f"ctxd embed returned {len(vecs)} vectors for {len(part)} texts")
            keys = [self.key(t) for t in part]
            name = self.cache / f"part-{int(time.time() * 1000)}.npz"
            np.savez(name, keys=np.array(keys), vectors=vecs)
            self.known.update(zip(keys, vecs))
            done += len(part)
            print(f"embedded {done}/{len(todo)} ({len(part) / (time.time() - t0):.0f} texts/s)", file=sys.stderr, flush=True)

    def matrix(self, texts):
        return np.stack([self.known[self.key(t)] for t in texts])


def unit(m):
    return m / np.maximum(np.linalg.norm(m, axis=-1, keepdims=True), 1e-12)


def fit_ridge(q, t, lam):
    d = q.shape[1]
    a = q.T.astype(np.float64) @ q + lam * np.eye(d)
    b = q.T.astype(np.float64) @ t + lam * np.eye(d)
    return np.linalg.solve(a, b).astype(np.float32)


def fit_contrastive(q, pos, negs, lam, epochs, seed, batch=256, lr=1e-3, tau=0.05):
    """InfoNCE over the batch's positives and every pair's hard negatives, W from the identity."""
    rng = np.random.default_rng(seed)
    d = q.shape[1]
    w = np.eye(d, dtype=np.float64)
    m, v = np.zeros_like(w), np.zeros_like(w)
    step = 0
    for _ in range(epochs):
        order = rng.permutation(len(q))
        for s in range(0, len(order), batch):
            idx = order[s:s + batch]
            qb = q[idx].astype(np.float64)
            docs = np.concatenate([pos[idx], negs[idx].reshape(-1, d)]).astype(np.float64)
            z = qb @ w
            norm = np.linalg.norm(z, axis=1, keepdims=True)
            zn = z / norm
            logits = zn @ docs.T / tau
            logits -= logits.max(axis=1, keepdims=True)
            p = np.exp(logits)
            p /= p.sum(axis=1, keepdims=True)
            p[np.arange(len(idx)), np.arange(len(idx))] -= 1.0  # the positive of row i is column i
            g_zn = p @ docs / tau / len(idx)
            # back through the normalisation: dz = (g - zn (zn·g)) / |z|
            g_z = (g_zn - zn * (zn * g_zn).sum(axis=1, keepdims=True)) / norm
            grad = qb.T @ g_z + lam * (w - np.eye(d))
            step += 1
            m = 0.9 * m + 0.1 * grad
            v = 0.999 * v + 0.001 * grad * grad
            w -= lr * (m / (1 - 0.9 ** step)) / (np.sqrt(v / (1 - 0.999 ** step)) + 1e-8)
    return w.astype(np.float32)


def mrr_at_10(q, docs, gold):
    """MRR@10 of each query's gold document among `docs` (rows of unit vectors)."""
    s = unit(q) @ docs.T
    g = s[np.arange(len(q)), gold]
    ranks = (s > g[:, None]).sum(axis=1)
    return float(np.where(ranks < 10, 1.0 / (ranks + 1), 0.0).mean())


def validation_mrr(valid, vec, w):
    """Per repository: each query against all of that repository's documents; mean over queries."""
    total, n = 0.0, 0
    by_repo = {}
    for p in valid:
        by_repo.setdefault(p["repo"], []).append(p)
    for pairs in by_repo.values():
        docs = sorted({p["positive"] for p in pairs} | {t for p in pairs for t in p["negative_texts"]})
        at = {t: i for i, t in enumerate(docs)}
        dm = unit(vec.matrix(docs))
        q = vec.matrix([p["query"] for p in pairs])
        if w is not None:
            q = q @ w
        total += mrr_at_10(q, dm, np.array([at[p["positive"]] for p in pairs])) * len(pairs)
        n += len(pairs)
    return total / max(n, 1)


def main(argv=None):
    args = parse_args(argv)
    kinds = set(args.kinds.split(","))
    valid_kinds = set((args.valid_kinds or args.kinds).split(","))
    train, valid = load_pairs(args.pairs, kinds, valid_kinds, args.max_train, args.max_valid, args.seed)
    for p in train + valid:
        p["negative_texts"] = p.get("negatives", [])[: args.negatives]
    print(f"{len(train)} training pairs, {len(valid)} validation pairs", file=sys.stderr)
    vec = Vectors(args.ctxd, args.cache)
    texts = [p["query"] for p in train + valid] + [p["positive"] for p in train + valid]
    texts += [t for p in train + valid for t in p["negative_texts"]]
    vec.ensure(texts)
    train = [p for p in train if len(p["negative_texts"]) == args.negatives]
    q = vec.matrix([p["query"] for p in train])
    pos = unit(vec.matrix([p["positive"] for p in train]))
    negs = unit(vec.matrix([t for p in train for t in p["negative_texts"]])).reshape(len(train), args.negatives, -1)
    report = {"train_pairs": len(train), "valid_pairs": len(valid), "base": validation_mrr(valid, vec, None), "variants": {}}
    print(f"base: validation MRR@10 {report['base']:.4f}", file=sys.stderr)
    best = (report["base"], None, None)
    for spec in args.variants.split(","):
        kind, lam = spec.split(":")
        t0 = time.time()
        w = fit_ridge(q, pos, float(lam)) if kind == "ridge" else fit_contrastive(q, pos, negs, float(lam), args.epochs, args.seed)
        score = validation_mrr(valid, vec, w)
        report["variants"][spec] = {"validation_mrr10": score, "fit_seconds": round(time.time() - t0, 2)}
        print(f"{spec}: validation MRR@10 {score:.4f} ({time.time() - t0:.1f} s)", file=sys.stderr, flush=True)
        if score > best[0]:
            best = (score, spec, w)
    report["chosen"] = best[1]
    if args.report_json:
        Path(args.report_json).write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report))
    if args.out and best[2] is not None:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_bytes(best[2].astype("<f4").tobytes())


if __name__ == "__main__":
    main()
