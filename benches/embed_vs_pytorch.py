#!/usr/bin/env python3
"""Side-by-side embedding benchmark: ctxd's embedders vs sentence-transformers on PyTorch (CPU).

Both embed the same real chunks (ctxd's own chunks of each corpus, with the header ctxd embeds) with the same model
weights and the same thread count. For each ctxd mode (default: the fast oneDNN path at bf16 and at f32, and candle at
f32) prints chunks/s, tokens/s, the ctxd/PyTorch ratio and the cosine agreement per vector.

    python3 benches/embed_vs_pytorch.py                      # CoSQA corpus + a crate from ~/.cargo/registry/src
    python3 benches/embed_vs_pytorch.py --corpus DIR --chunks 512 --threads 2 --modes bf16,f32

The first run creates a venv (default ~/.cache/ctxd/bench-venv) and installs sentence-transformers (and torch) from PyPI.
ctxd is built in the dev profile (candle optimised) unless --ctxd points at another binary.
"""
import argparse
import glob
import json
import math
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
CACHE = os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache"))
MODEL_DIR = os.path.join(os.environ.get("CTXD_MODEL_DIR", os.path.join(CACHE, "ctxd", "models")),
                         "sentence-transformers", "all-MiniLM-L6-v2")


def ensure_venv(venv):
    py = os.path.join(venv, "bin", "python")
    probe = [py, "-c", "import sentence_transformers, torch"]
    if os.path.exists(py) and subprocess.run(probe, capture_output=True).returncode == 0:
        return py
    print(f"creating {venv} and installing sentence-transformers (with torch) from PyPI", file=sys.stderr)
    subprocess.run([sys.executable, "-m", "venv", venv], check=True)
    subprocess.run([py, "-m", "pip", "install", "--quiet", "sentence-transformers"], check=True)
    return py


def default_corpora():
    corpora = [os.path.join(REPO, "..", "shared", "eval", "cosqa", "corpus")]
    crates = sorted(glob.glob(os.path.expanduser("~/.cargo/registry/src/*/tokio-1*/src")))
    if crates:
        corpora.append(crates[-1])
    return [c for c in corpora if os.path.isdir(c)]


def build_ctxd():
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(CACHE, "ctxd-target"))
    subprocess.run(["cargo", "build", "-q", "-p", "ctxd"], cwd=REPO, check=True,
                   env={**os.environ, "CARGO_TARGET_DIR": target})
    return os.path.join(target, "debug", "ctxd")


def torch_side(args):
    """Runs inside the venv: embeds texts.jsonl with sentence-transformers and prints a JSON result."""
    import torch
    from sentence_transformers import SentenceTransformer
    torch.set_num_threads(args.threads)
    texts = [json.loads(l) for l in open(os.path.join(args.torch_side, "texts.jsonl"))]
    model = SentenceTransformer(MODEL_DIR, device="cpu")
    model.encode(texts[:8], batch_size=32)
    start = time.perf_counter()
    vectors = model.encode(texts, batch_size=32, convert_to_numpy=True, normalize_embeddings=True)
    seconds = time.perf_counter() - start
    json.dump({"seconds": seconds, "vectors": vectors.tolist(), "torch": torch.__version__}, sys.stdout)


def cosine(a, b):
    dot = sum(x * y for x, y in zip(a, b))
    return dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--corpus", action="append", help="folder to take chunks from (repeatable)")
    p.add_argument("--chunks", type=int, default=256, help="chunks per corpus")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--modes", default="bf16,f32,candle",
                   help="ctxd modes: bf16 / f32 (fast oneDNN path), candle (candle f32), auto (the default config)")
    p.add_argument("--venv", default=os.path.join(CACHE, "ctxd", "bench-venv"))
    p.add_argument("--ctxd", help="ctxd binary (default: build the dev profile)")
    p.add_argument("--torch-side", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.torch_side:
        return torch_side(args)

    py = ensure_venv(args.venv)
    ctxd = args.ctxd or build_ctxd()
    corpora = args.corpus or default_corpora()
    env = {**os.environ, "RAYON_NUM_THREADS": str(args.threads), "OMP_NUM_THREADS": str(args.threads),
           "CTXD_LOG": "warn"}
    flags = {"bf16": ["--backend", "onednn", "--precision", "bf16"],
             "f32": ["--backend", "onednn", "--precision", "f32"],
             "candle": ["--backend", "candle", "--precision", "f32"],
             "auto": []}
    modes = [m for m in args.modes.split(",") if m]
    for m in modes:
        if m not in flags:
            sys.exit(f"unknown mode {m!r}: use {', '.join(flags)}")
    env["CTXD_EMBED_THREADS"] = str(args.threads)
    print(f"{'corpus':<24} {'mode':<7} {'chunks':>6} {'mean tok':>8} {'ctxd c/s':>9} {'torch c/s':>9} {'ratio':>6} "
          f"{'ctxd tok/s':>10} {'torch tok/s':>11} {'min cos':>8} {'mean cos':>8}")
    for corpus in corpora:
        theirs = None
        name = os.path.basename(os.path.normpath(corpus if not corpus.endswith("src") else os.path.dirname(corpus)))
        for mode in modes:
            with tempfile.TemporaryDirectory() as out:
                subprocess.run([ctxd, "bench", "--corpus", corpus, "--embed-chunks", str(args.chunks), "--skip-e2e",
                                "--export", out] + flags[mode], check=True, env=env, stdout=subprocess.DEVNULL)
                timing = json.load(open(os.path.join(out, "ctxd-timing.json")))
                ours = [json.loads(l) for l in open(os.path.join(out, "ctxd-vectors.jsonl"))]
                if theirs is None:
                    res = subprocess.run([py, __file__, "--torch-side", out, "--threads", str(args.threads)],
                                         check=True, env=env, capture_output=True, text=True)
                    theirs = json.loads(res.stdout)
            cos = [cosine(a, b) for a, b in zip(ours, theirs["vectors"])]
            n, tokens = timing["chunks"], timing["tokens"]
            c_cps, t_cps = n / timing["seconds"], n / theirs["seconds"]
            print(f"{name[:24]:<24} {mode:<7} {n:>6} {tokens / n:>8.0f} {c_cps:>9.1f} {t_cps:>9.1f} "
                  f"{c_cps / t_cps:>6.2f} {tokens / timing['seconds']:>10.0f} {tokens / theirs['seconds']:>11.0f} "
                  f"{min(cos):>8.5f} {sum(cos) / len(cos):>8.5f}", flush=True)
    print(f"(threads={args.threads}, torch {theirs['torch']}, model {MODEL_DIR})")


if __name__ == "__main__":
    main()
