#!/usr/bin/env python3
"""Fine-tunes ctxd's code embedding model: a bi-encoder trained from the default model
(sentence-transformers/all-MiniLM-L6-v2, the base every ctxd index already reads; its tokenizer,
window and pooling stay as they are, so the chunker's budget and the embed key scheme do not
move) on the pairs `train/mine_pairs.py` writes.

The loss is the contrastive one of SweRank and CoRNStack: each query against its positive, the
other queries' positives in the batch (in-batch negatives) and `--hard-negatives` of its own mined
hard negatives, cross-entropy over cosine × `--scale`. Every random choice is seeded (`--seed`):
the pair order, the hard negatives taken, dropout. Early stopping reads the pairs of the validation
repositories (`split == "validation"`, a slice of the training repositories, never a dev or
evaluation repository): every `--eval-every` steps the MRR@10 of each validation query's positive
among the positives and hard negatives of its repository's validation pairs, averaged over the pair
kinds (docstring queries — code search — weigh as much as commit messages); the best step is
kept, and training stops after `--patience` evaluations without a gain or at `--time-budget`.

The consistency filter (`--filter-k K`): a pair is kept only when the base model ranks its
positive within the top K of its candidates (the positive, its hard negatives and the positives
of the repository's other pairs of the same kind, up to `--filter-pool`); SweRank found such
filtered pairs better than unfiltered ones. The ranks are computed once per base model and pairs
file and cached (`--ranks-cache`, default `base_ranks.json` beside the output), so variants
that differ only in K share one pass.

Output (`--out DIR`): the model saved by sentence-transformers (Hugging Face layout: config,
tokenizer, `model.safetensors`, `modules.json`, `1_Pooling/config.json` in the 6.x form ctxd
reads), a `training.json` of every option, the data counts, pairs/s, the validation curve and the
chosen step, and a model card (`README.md`) naming the data, its licences and the figures.

Large batches in small memory (`--mini-batch M`, gradient caching): the contrastive loss wants
many in-batch negatives (MiniLM itself was trained with batches of over a thousand); a batch is
encoded M texts at a time without gradients, the loss's gradient with respect to every vector is
taken, and each piece is encoded again with gradients (dropout replayed), which gives the very
update of the whole batch (`contrastive_step`). `--interpolate A,B` then also writes `wise-A`,
`wise-B`: the chosen model's weights pulled back toward the base's (WiSE-FT), each judged on the
validation pairs, for use where the training data's domain is narrower than the queries'.

CPU path (this 2-core machine): `--device cpu --bf16 --query-len 48 --doc-len 128 --batch 64
--mini-batch 32 --max-pairs 9000 --time-budget 2100` (bf16 only where the CPU has AMX or
AVX512-BF16; without them bf16 autocast is slower than f32); GPU path: `train/gpu-train.sh` (bf16,
larger batches and windows), the same script.
"""

from __future__ import annotations

import argparse
import gzip
import json
import lzma
import math
import os
import random
import re
import sys
import time
from collections import defaultdict, deque
from pathlib import Path

DEFAULT_BASE = Path(os.environ.get("CTXD_MODEL_DIR", Path.home() / ".cache/ctxd/models")) / (
    "sentence-transformers/all-MiniLM-L6-v2"
)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pairs", type=Path, default=Path.home() / ".cache/ctxd/pairs/pairs.jsonl.gz")
    p.add_argument("--base", type=Path, default=DEFAULT_BASE, help="the model to start from (a folder)")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--device", default="cpu")
    p.add_argument("--kinds", default="commit,docstring,issue", help="pair kinds to train on (ablation)")
    p.add_argument("--max-pairs", type=int, default=0, help="train on at most this many pairs (0: all)")
    p.add_argument("--hard-negatives", type=int, default=1, help="mined hard negatives per query (0: in-batch only)")
    p.add_argument("--filter-k", type=int, default=0, help="consistency filter: keep pairs the base ranks in top K (0: off)")
    p.add_argument("--filter-pool", type=int, default=200)
    p.add_argument("--ranks-cache", type=Path, default=None, help="the filter's base ranks (default: OUT/base_ranks.json)")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--mini-batch", type=int, default=0,
                   help="encode a batch in pieces of this many texts (gradient caching: a large batch in bounded memory; 0: whole)")
    p.add_argument("--epochs", type=float, default=1.0)
    p.add_argument("--lr", type=float, default=3e-5)
    p.add_argument("--warmup", type=float, default=0.1, help="share of the steps")
    p.add_argument("--scale", type=float, default=20.0)
    p.add_argument("--query-len", type=int, default=48)
    p.add_argument("--doc-len", type=int, default=128)
    p.add_argument("--eval-every", type=int, default=200)
    p.add_argument("--eval-pairs", type=int, default=1500)
    p.add_argument("--patience", type=int, default=4)
    p.add_argument("--time-budget", type=float, default=0.0, help="seconds of training at most (0: none)")
    p.add_argument("--bf16", action="store_true", help="autocast to bf16 (a GPU, or a CPU with AMX or AVX512-BF16)")
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--seed", type=int, default=13)
    p.add_argument("--interpolate", default="",
                   help="also save OUT/wise-A for each A of a comma list: base·(1−A) + best·A (WiSE-FT), each judged on validation")
    p.add_argument("--short-queries", action="store_true",
                   help="train docstring pairs on a search-box form of their query (short_query); validation unchanged")
    p.add_argument("--steps", type=int, default=0, help="stop after this many steps (smoke tests)")
    return p.parse_args(argv)


def read_pairs(path: Path, kinds: set[str]):
    """The pairs of the wanted kinds, split into (train, validation)."""
    train, validation = [], []
    opener = lzma.open if path.suffix == ".xz" else gzip.open
    with opener(path, "rt", encoding="utf-8") as f:
        for line in f:
            pair = json.loads(line)
            if pair["kind"] not in kinds or not pair.get("positive") or not pair.get("query"):
                continue
            (validation if pair.get("split") == "validation" else train).append(pair)
    return train, validation


def short_query(doc: str, max_words: int = 12) -> str:
    """A docstring's first sentence as someone would type it into a search box: lower case, no
    closing full stop, at most `max_words` words ("Return the number of nodes in the graph." →
    "return the number of nodes in the graph")."""
    first = re.split(r"(?<=[.!?])\s|\n", doc.strip(), maxsplit=1)[0]
    words = first.rstrip(".!?:; ").lower().split()
    return " ".join(words[:max_words])


class Encoder:
    """The model's transformer with mean pooling to unit vectors, as ctxd pools it."""

    def __init__(self, base: Path, device: str, bf16: bool):
        import torch
        from sentence_transformers import SentenceTransformer

        self.torch = torch
        # Weights in f32 whatever the base file holds (the GPU path carries an f16 base): the
        # optimizer steps f32 parameters, bf16 autocast speeds the matrix products.
        self.st = SentenceTransformer(str(base), device=device, model_kwargs={"dtype": torch.float32})
        self.model = self.st[0].auto_model
        self.tokenizer = self.st[0].tokenizer
        self.device = device
        self.bf16 = bf16

    def encode(self, texts, max_len: int):
        torch = self.torch
        batch = self.tokenizer(texts, padding=True, truncation=True, max_length=max_len, return_tensors="pt")
        batch = {k: v.to(self.device) for k, v in batch.items()}
        with torch.autocast(device_type=self.device.split(":")[0], dtype=torch.bfloat16, enabled=self.bf16):
            hidden = self.model(**batch).last_hidden_state
        mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        return torch.nn.functional.normalize(pooled.float(), dim=-1)

    def encode_all(self, texts, max_len: int, batch: int = 64):
        """Unit vectors of `texts` in their order, encoded in length-sorted batches."""
        torch = self.torch
        self.model.eval()
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        vecs = [None] * len(texts)
        with torch.no_grad():
            for s in range(0, len(order), batch):
                idx = order[s : s + batch]
                for i, row in zip(idx, self.encode([texts[i] for i in idx], max_len)):
                    vecs[i] = row
        return torch.stack(vecs) if vecs else torch.zeros(0)


def candidate_ranks(enc: Encoder, pairs, args, pool_cap: int):
    """Each pair's rank (1-based) of its positive among its candidates under `enc`: the
    positive, its hard negatives and the positives of the other pairs of its repository and kind
    (the first `pool_cap` of them, in file order) — less those that are true for it too: the
    positives of pairs with the same query (a commit's other changed definitions) and other
    versions of the same definition (same path and symbol)."""
    groups = defaultdict(list)
    for i, p in enumerate(pairs):
        groups[(p["repo"], p["kind"])].append(i)
    texts, index = [], {}

    def add(t):
        if t not in index:
            index[t] = len(texts)
            texts.append(t)
        return index[t]

    def same_target(p, o):
        return o["query"] == p["query"] or (p.get("path") and (o.get("path"), o.get("symbol")) == (p["path"], p.get("symbol")))

    cands, queries = [], []
    for members in groups.values():
        pool = [(add(pairs[i]["positive"]), pairs[i]) for i in members[:pool_cap]]
        for i in members:
            p = pairs[i]
            own = add(p["positive"])
            others = [t for t, o in pool if t != own and not same_target(p, o)]
            negs = [add(n) for n in p.get("negatives", [])]
            cands.append((own, sorted(set(others + negs + [own]))))
            queries.append(p["query"])
    doc = enc.encode_all(texts, args.doc_len)
    qv = enc.encode_all(queries, args.query_len)
    ranks = []
    for q, (own, c) in zip(qv, cands):
        scores = doc[c] @ q
        ranks.append(int((scores > scores[c.index(own)]).sum().item()) + 1)
    return ranks


def mrr_at_10(ranks):
    return sum(1.0 / r for r in ranks if r <= 10) / max(len(ranks), 1)


def consistency_filter(enc, pairs, args):
    cache = args.ranks_cache or args.out / "base_ranks.json"
    key = ":".join(str(v) for v in (args.pairs, os.path.getsize(args.pairs), args.filter_pool, len(pairs),
                                    args.base, args.query_len, args.doc_len, args.kinds, args.short_queries))
    if cache.is_file() and json.loads(cache.read_text()).get("key") == key:
        ranks = json.loads(cache.read_text())["ranks"]
    else:
        ranks = candidate_ranks(enc, pairs, args, args.filter_pool)
        cache.write_text(json.dumps({"key": key, "ranks": ranks}))
    kept = [p for p, r in zip(pairs, ranks) if r <= args.filter_k]
    return kept, ranks


def batches(pairs, args, rng):
    """Batches of pairs in a seeded order; no two pairs of a batch share a positive or a query
    (another's positive would be a false in-batch negative). A pair that would is put first in
    the next batch instead; the last, short batch is yielded too."""
    order = list(range(len(pairs)))
    rng.shuffle(order)
    pending = deque(order)
    while pending:
        batch, positives, queries, deferred = [], set(), set(), []
        while pending and len(batch) < args.batch and len(deferred) <= 8 * args.batch:
            i = pending.popleft()
            p = pairs[i]
            if p["positive"] in positives or p["query"] in queries:
                deferred.append(i)
                continue
            batch.append(p)
            positives.add(p["positive"])
            queries.add(p["query"])
        pending.extendleft(reversed(deferred))
        yield batch


class ReplayedRandomness:
    """The random state of a moment, replayed: gradient caching encodes each piece twice (first
    without gradients, then with them), and dropout must drop the same units both times."""

    def __init__(self, torch):
        self.torch = torch
        self.cpu = torch.get_rng_state()
        self.cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None

    def __enter__(self):
        self.saved = ReplayedRandomness(self.torch)
        self.torch.set_rng_state(self.cpu)
        if self.cuda is not None:
            self.torch.cuda.set_rng_state_all(self.cuda)

    def __exit__(self, *exc):
        self.torch.set_rng_state(self.saved.cpu)
        if self.saved.cuda is not None:
            self.torch.cuda.set_rng_state_all(self.saved.cuda)


def contrastive_step(enc, queries, docs, args):
    """One batch's loss, its gradients accumulated on the model: each query against its positive
    (`docs[i]`), the batch's other documents and the hard negatives after them. With
    `--mini-batch M` (gradient caching, Gao et al. 2021) the texts are first encoded M at a time
    without gradients, the loss's gradient with respect to each vector is taken, and each piece is
    encoded again with gradients and given its vectors' gradient: the same update as the whole
    batch at once, in the memory of M texts, for about a third more computation."""
    torch = enc.torch
    labels = torch.arange(len(queries))

    def loss_of(q, d):
        scores = q @ d.T * args.scale
        return torch.nn.functional.cross_entropy(scores, labels.to(scores.device))

    m = args.mini_batch
    if not m or m >= len(queries) + len(docs):
        loss = loss_of(enc.encode(queries, args.query_len), enc.encode(docs, args.doc_len))
        loss.backward()
        return loss
    pieces = [(queries[s : s + m], args.query_len) for s in range(0, len(queries), m)]
    pieces += [(docs[s : s + m], args.doc_len) for s in range(0, len(docs), m)]
    states, vectors = [], []
    with torch.no_grad():
        for texts, length in pieces:
            states.append(ReplayedRandomness(torch))
            vectors.append(enc.encode(texts, length))
    cached = [v.detach().requires_grad_() for v in vectors]
    nq = -(-len(queries) // m)
    loss = loss_of(torch.cat(cached[:nq]), torch.cat(cached[nq:]))
    loss.backward()
    for (texts, length), state, v in zip(pieces, states, cached):
        with state:
            (enc.encode(texts, length) * v.grad).sum().backward()
    return loss.detach()


def interpolate(base: Path, tuned: Path, alpha: float, out: Path):
    """WiSE-FT (Wortsman et al. 2022): the tuned model's folder with every weight set to
    base·(1−alpha) + tuned·alpha — a fine-tuned model pulled back toward the general one it came
    from, which keeps more of what the base knew outside the training data's domain."""
    import shutil

    from safetensors.torch import load_file, save_file

    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(tuned, out)
    b, t = load_file(str(base / "model.safetensors")), load_file(str(tuned / "model.safetensors"))

    def bare(name):  # one file may name a weight under the model's prefix, the other not
        return name.split(".", 1)[1] if name.startswith(("bert.", "model.")) else name

    b = {bare(k): v for k, v in b.items()}
    mixed = {}
    for name, w in t.items():
        src = b.get(bare(name))
        if src is None or src.shape != w.shape:
            raise SystemExit(f"interpolate: {base} has no weight {name} of shape {tuple(w.shape)}: not the tuned model's base")
        mixed[name] = (src.to(w.dtype) * (1 - alpha) + w * alpha).contiguous() if w.is_floating_point() else w
    save_file(mixed, str(out / "model.safetensors"), metadata={"format": "pt"})


def train(args):
    import torch

    random.seed(args.seed)
    torch.manual_seed(args.seed)
    if args.threads:
        torch.set_num_threads(args.threads)
    args.out.mkdir(parents=True, exist_ok=True)
    train_pairs, validation = read_pairs(args.pairs, set(args.kinds.split(",")))
    if args.short_queries:
        for p in train_pairs:
            if p["kind"] == "docstring":
                p["query"] = short_query(p["query"]) or p["query"]
    enc = Encoder(args.base, args.device, args.bf16)
    report = {"options": {k: str(v) for k, v in vars(args).items()}, "pairs_read": len(train_pairs)}
    if args.filter_k:
        train_pairs, ranks = consistency_filter(enc, train_pairs, args)
        report["filter"] = {"k": args.filter_k, "kept": len(train_pairs), "of": len(ranks)}
    rng = random.Random(args.seed)
    rng.shuffle(train_pairs)
    if args.max_pairs:
        train_pairs = train_pairs[: args.max_pairs]
    rng_eval = random.Random(args.seed + 1)
    validation = sorted(validation, key=lambda p: (p["repo"], p["query"]))
    rng_eval.shuffle(validation)
    validation = validation[: args.eval_pairs]
    report["train_pairs"] = len(train_pairs)
    report["validation_pairs"] = len(validation)
    steps_per_epoch = max(len(train_pairs) // args.batch, 1)
    total = max(int(steps_per_epoch * args.epochs), 1)
    if args.steps:
        total = min(total, args.steps)
    opt = torch.optim.AdamW(enc.model.parameters(), lr=args.lr, weight_decay=0.01)
    warm = max(int(total * args.warmup), 1)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min((s + 1) / warm, max(0.0, (total - s) / max(total - warm, 1)))
    )

    def evaluate(model=None):
        """The validation MRR@10 averaged over pair kinds (a docstring query — code search — counts
        as much as a commit message, however many of each there are), and each kind's."""
        if not validation:
            return 0.0, {}
        ranks = candidate_ranks(model or enc, validation, args, 200)
        by_kind = defaultdict(list)
        for pair, rank in zip(validation, ranks):
            by_kind[pair["kind"]].append(rank)
        kinds = {k: round(mrr_at_10(r), 4) for k, r in sorted(by_kind.items())}
        return sum(kinds.values()) / len(kinds), kinds

    m, kinds = evaluate()
    curve = [{"step": 0, "validation_mrr10": m, "by_kind": kinds}]
    print(f"train: {len(train_pairs)} pairs, {total} steps; validation MRR@10 at start {curve[0]['validation_mrr10']:.4f}", file=sys.stderr)
    best, best_step, stale, step, seen_pairs = curve[0]["validation_mrr10"], 0, 0, 0, 0
    best_dir = args.out / "best"
    enc.st.save(str(best_dir))
    def checkpoint(loss):
        """Evaluates the step; keeps the model when it is the best so far."""
        nonlocal best, best_step, stale
        m, kinds = evaluate()
        curve.append({"step": step, "validation_mrr10": m, "by_kind": kinds, "loss": loss})
        print(f"eval step {step}: validation MRR@10 {m:.4f} {kinds} (best {best:.4f} at {best_step})", file=sys.stderr)
        if m > best:
            best, best_step, stale = m, step, 0
            enc.st.save(str(best_dir))
        else:
            stale += 1

    start = time.time()
    train_seconds = 0.0
    stop, epoch, loss = False, 0, None
    while not stop:
        for batch in batches(train_pairs, args, rng):
            t0 = time.time()
            enc.model.train()
            queries = [p["query"] for p in batch]
            docs = [p["positive"] for p in batch]
            for p in batch:
                negs = p.get("negatives", [])[:]
                rng.shuffle(negs)
                docs.extend(negs[: args.hard_negatives])
            loss = contrastive_step(enc, queries, docs, args)
            torch.nn.utils.clip_grad_norm_(enc.model.parameters(), 1.0)
            opt.step()
            sched.step()
            opt.zero_grad()
            step += 1
            seen_pairs += len(batch)
            train_seconds += time.time() - t0
            if step % 20 == 0:
                print(f"step {step}/{total} loss {loss.item():.4f} {seen_pairs / train_seconds:.1f} pairs/s", file=sys.stderr)
            if step % args.eval_every == 0 or step == total:
                checkpoint(loss.item())
            if step >= total or stale >= args.patience or (args.time_budget and time.time() - start > args.time_budget):
                stop = True
                break
        epoch += 1
        if epoch >= math.ceil(args.epochs):
            break
    if curve[-1]["step"] != step:  # stopped between evaluations (time budget, epochs' end)
        checkpoint(loss.item() if loss is not None else None)
    report.update(
        steps=step,
        pairs_per_second=round(seen_pairs / max(train_seconds, 1e-9), 2),
        train_seconds=round(train_seconds, 1),
        wall_seconds=round(time.time() - start, 1),
        curve=curve,
        best_step=best_step,
        best_validation_mrr10=best,
        start_validation_mrr10=curve[0]["validation_mrr10"],
    )
    wise = {}
    for alpha in [float(a) for a in args.interpolate.split(",") if a]:
        folder = args.out / f"wise-{alpha:g}"
        interpolate(args.base, best_dir, alpha, folder)
        m, kinds = evaluate(Encoder(folder, args.device, args.bf16))
        wise[f"{alpha:g}"] = {"validation_mrr10": m, "by_kind": kinds}
        print(f"wise-{alpha:g}: validation MRR@10 {m:.4f} {kinds}", file=sys.stderr)
    if wise:
        report["interpolated"] = wise
    (args.out / "training.json").write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps({k: v for k, v in report.items() if k != "curve"}), file=sys.stderr)
    return report


if __name__ == "__main__":
    train(parse_args())
