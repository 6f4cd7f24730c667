#!/usr/bin/env python3
"""Packs mined pairs for the GPU path: the pairs that fit a byte budget, xz-compressed, with the
f16 base model beside them, in one folder (`train-bundle/`, git-ignored) that a `device` call
carries (the working tree, the base and the pairs must travel in 64 MiB in all).

Each pair keeps its query, its positive, `--negatives` of its hard negatives, its kind, repository
and split; texts are cut to `--max-chars` (the GPU run reads 256 tokens of a document, about 1,000
characters of code). Pairs are taken in a fixed order (sha1 of query and positive, every validation
pair first up to `--validation`), so the same pairs file and options give the same bundle.

    python3 train/pack_pairs.py --pairs ~/.cache/ctxd/pairs/pairs.jsonl.gz --out train-bundle \
        [--budget-mib 9] [--base DIR]
"""
import argparse
import gzip
import hashlib
import json
import lzma
import os
import shutil
import sys
from pathlib import Path

DEFAULT_BASE = Path(os.environ.get("CTXD_MODEL_DIR", Path.home() / ".cache/ctxd/models")) / (
    "sentence-transformers/all-MiniLM-L6-v2-f16"
)
BASE_FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "vocab.txt",
              "special_tokens_map.json", "modules.json", "sentence_bert_config.json",
              "config_sentence_transformers.json", "1_Pooling/config.json")


def slim(pair, negatives, max_chars):
    return {
        "kind": pair["kind"],
        "repo": pair["repo"],
        "split": pair.get("split", "train"),
        "path": pair.get("path"),
        "symbol": pair.get("symbol"),
        "query": pair["query"][:max_chars],
        "positive": pair["positive"][:max_chars],
        "negatives": [n[:max_chars] for n in pair.get("negatives", [])[:negatives]],
    }


def ordered(path):
    pairs = []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            pairs.append(json.loads(line))
    key = lambda p: hashlib.sha1((p["query"] + "\0" + p["positive"]).encode()).hexdigest()
    return sorted(pairs, key=lambda p: (p.get("split") != "validation", key(p)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=Path, default=Path.home() / ".cache/ctxd/pairs/pairs.jsonl.gz")
    ap.add_argument("--out", type=Path, default=Path("train-bundle"))
    ap.add_argument("--base", type=Path, default=DEFAULT_BASE)
    ap.add_argument("--budget-mib", type=float, default=9.0)
    ap.add_argument("--negatives", type=int, default=1)
    ap.add_argument("--validation", type=int, default=1500)
    ap.add_argument("--max-chars", type=int, default=1200)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for name in BASE_FILES:
        src = args.base / name
        if src.is_file():
            (args.out / "base" / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, args.out / "base" / name)
    if not (args.out / "base/model.safetensors").is_file():
        sys.exit(f"pack_pairs: {args.base} has no model.safetensors (scripts/convert-f16.sh writes the f16 base)")
    budget = int(args.budget_mib * 2**20)
    lines, taken_validation = [], 0
    for pair in ordered(args.pairs):
        if pair.get("split") == "validation":
            if taken_validation >= args.validation:
                continue
            taken_validation += 1
        lines.append((json.dumps(slim(pair, args.negatives, args.max_chars)) + "\n").encode())
    # The most pairs whose compressed file fits the budget: a first guess from the ratio of the
    # whole, then 5 % fewer until it fits (each try is one compression).
    whole = len(lzma.compress(b"".join(lines), preset=6))
    count = min(len(lines), int(len(lines) * budget / max(whole, 1)))
    while True:
        data = lzma.compress(b"".join(lines[:count]), preset=6)
        if len(data) <= budget or count == 0:
            break
        count = int(count * 0.95)
    (args.out / "pairs.jsonl.xz").write_bytes(data)
    print(f"pack_pairs: {count} of {len(lines)} pairs ({min(taken_validation, count)} validation), "
          f"{len(data) / 2**20:.1f} MiB -> {args.out}/pairs.jsonl.xz", file=sys.stderr)


if __name__ == "__main__":
    main()
