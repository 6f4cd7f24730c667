#!/usr/bin/env python3
"""Side-by-side embedding benchmark: ctxd's embedders vs sentence-transformers on PyTorch (CPU or GPU).

Both embed the same real chunks (ctxd's own chunks of each corpus, with the header ctxd embeds) with the same model
weights and the same thread count. For each ctxd mode (default: the fast oneDNN path at bf16 and at f32, and candle at
f32) prints chunks/s, tokens/s, the ctxd/PyTorch ratio and the cosine agreement per vector.

    python3 benches/embed_vs_pytorch.py                      # CoSQA corpus + a crate from ~/.cargo/registry/src
    python3 benches/embed_vs_pytorch.py --corpus DIR --chunks 512 --threads 2 --modes bf16,f32
    python3 benches/embed_vs_pytorch.py --device cuda --ctxd DIR/ctxd --chunks 4096   # GPU: a --features cuda build

With --device cuda both sides run on GPU 0: ctxd in f16 and f32 (modes cuda-f16, cuda-f32), PyTorch in fp16
(sentence-transformers' encode end to end, and the model's forward alone on pre-tokenized batches of 512, the
figure to hold ctxd's forward against); the cosine column compares with PyTorch's fp16 vectors, and
--cpu-reference also embeds the same chunks with ctxd's CPU f32 path and prints the cosine of each GPU mode to it.
A Python that already has sentence-transformers and a CUDA torch (the GPU machine's python3) is used as it is.

--model DIR compares on another model; --arch compares each architecture ctxd runs besides BERT
(NomicBERT, ModernBERT, JinaBERT v2, Qwen3) at full size with random weights, written by
`scripts/gen-arch-fixtures.py --full-size DIR` (default ~/.cache/ctxd/bench-arch), ctxd on candle f32
against PyTorch f32 (sentence-transformers on the model card; JinaBERT, whose modelling code is not on
PyPI, through that script's PyTorch transcription, mean-pooled).

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
    here_ok = subprocess.run([sys.executable, "-c", "import sentence_transformers, torch"], capture_output=True)
    if here_ok.returncode == 0:
        return sys.executable
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


def jina_side(args, texts, config):
    """JinaBERT v2 in PyTorch (scripts/gen-arch-fixtures.py's transcription; not on PyPI): batches of 32
    by length, mean pooling, unit length — what sentence-transformers' encode does for it."""
    import importlib.util

    import torch
    from safetensors.torch import load_file
    from tokenizers import Tokenizer

    spec = importlib.util.spec_from_file_location("fixtures", os.path.join(REPO, "scripts", "gen-arch-fixtures.py"))
    fixtures = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fixtures)
    dims = [config[k] for k in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                                "intermediate_size")]
    model = fixtures.jina_modules()(*dims).eval()
    model.load_state_dict(load_file(os.path.join(args.model, "model.safetensors")))
    tok = Tokenizer.from_file(os.path.join(args.model, "tokenizer.json"))
    tok.no_padding()
    tok.enable_truncation(512)

    def encode(batch):
        return fixtures.jina_embed(model, tok, batch)

    order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
    encode([texts[i] for i in order[:32]])
    start = time.perf_counter()
    vectors = [None] * len(texts)
    for i in range(0, len(order), 32):
        part = order[i:i + 32]
        for j, v in zip(part, encode([texts[k] for k in part]).tolist()):
            vectors[j] = v
    seconds = time.perf_counter() - start
    json.dump({"seconds": seconds, "vectors": vectors, "torch": torch.__version__}, sys.stdout)


def torch_side(args):
    """Runs inside the venv: embeds texts.jsonl with sentence-transformers and prints a JSON result."""
    import torch
    from sentence_transformers import SentenceTransformer
    torch.set_num_threads(args.threads)
    texts = [json.loads(l) for l in open(os.path.join(args.torch_side, "texts.jsonl"))]
    gpu = args.device == "cuda"
    config = json.load(open(os.path.join(args.model, "config.json")))
    if config.get("position_embedding_type") == "alibi":
        return jina_side(args, texts, config)
    model = SentenceTransformer(args.model, device=args.device)
    model.max_seq_length = min(model.max_seq_length or 512, 512)
    if gpu:
        model = model.half()
    batch = 256 if gpu else 32
    model.encode(texts[:batch], batch_size=batch)
    sync = torch.cuda.synchronize if gpu else (lambda: None)
    sync()
    start = time.perf_counter()
    vectors = model.encode(texts, batch_size=batch, convert_to_numpy=True, normalize_embeddings=True)
    sync()
    seconds = time.perf_counter() - start
    out = {"seconds": seconds, "vectors": vectors.astype("float32").tolist(), "torch": torch.__version__}
    if gpu:
        # The forward pass alone: the texts tokenized beforehand into padded batches of 512.
        features = [model.tokenize(texts[i:i + 512]) for i in range(0, len(texts), 512)]
        features = [{k: v.to("cuda") for k, v in f.items()} for f in features]
        with torch.inference_mode():
            model.forward(features[0])
            sync()
            start = time.perf_counter()
            for f in features:
                model.forward(f)
            sync()
        out["forward_seconds"] = time.perf_counter() - start
        out["device_name"] = torch.cuda.get_device_name(0)
    json.dump(out, sys.stdout)


def cosine(a, b):
    dot = sum(x * y for x, y in zip(a, b))
    return dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--corpus", action="append", help="folder to take chunks from (repeatable)")
    p.add_argument("--chunks", type=int, default=256, help="chunks per corpus")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--modes", help="ctxd modes: bf16 / f32 (fast oneDNN path), candle (candle f32), auto (the "
                   "default config); cuda-f16 / cuda-f32 (GPU 0). Default: bf16,f32,candle on the cpu, "
                   "cuda-f16,cuda-f32 with --device cuda")
    p.add_argument("--cpu-reference", action="store_true",
                   help="with --device cuda: also print each GPU mode's cosine to ctxd's CPU f32 vectors")
    p.add_argument("--venv", default=os.path.join(CACHE, "ctxd", "bench-venv"))
    p.add_argument("--ctxd", help="ctxd binary (default: build the dev profile)")
    p.add_argument("--model", default=MODEL_DIR, help="model directory (default all-MiniLM-L6-v2)")
    p.add_argument("--arch", nargs="?", const=os.path.join(CACHE, "ctxd", "bench-arch"), metavar="DIR",
                   help="compare every architecture in DIR (scripts/gen-arch-fixtures.py --full-size DIR), candle f32")
    p.add_argument("--torch-side", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.torch_side:
        return torch_side(args)
    if args.arch:
        for name in ("nomic_bert", "modernbert", "jina_bert", "qwen3"):
            model = os.path.join(args.arch, name)
            if not os.path.isdir(model):
                sys.exit(f"{model} is missing: run scripts/gen-arch-fixtures.py --full-size {args.arch}")
            print(f"== {name}", flush=True)
            rest = [a for a in sys.argv[1:] if a != "--arch" and a != args.arch]
            subprocess.run([sys.executable, __file__, "--model", model, "--modes", args.modes or "candle"] + rest,
                           check=True)
        return

    py = ensure_venv(args.venv)
    ctxd = args.ctxd or build_ctxd()
    corpora = args.corpus or default_corpora()
    env = {**os.environ, "RAYON_NUM_THREADS": str(args.threads), "OMP_NUM_THREADS": str(args.threads),
           "CTXD_LOG": "warn"}
    flags = {"bf16": ["--device", "cpu", "--backend", "onednn", "--precision", "bf16"],
             "f32": ["--device", "cpu", "--backend", "onednn", "--precision", "f32"],
             "candle": ["--device", "cpu", "--backend", "candle", "--precision", "f32"],
             "cuda-f16": ["--device", "cuda:0", "--precision", "f16"],
             "cuda-f32": ["--device", "cuda:0", "--precision", "f32"],
             "auto": []}
    default_modes = "cuda-f16,cuda-f32" if args.device == "cuda" else "bf16,f32,candle"
    modes = [m for m in (args.modes or default_modes).split(",") if m]
    for m in modes:
        if m not in flags:
            sys.exit(f"unknown mode {m!r}: use {', '.join(flags)}")
    env["CTXD_EMBED_THREADS"] = str(args.threads)
    print(f"{'corpus':<24} {'mode':<7} {'chunks':>6} {'mean tok':>8} {'ctxd c/s':>9} {'torch c/s':>9} {'ratio':>6} "
          f"{'ctxd tok/s':>10} {'torch tok/s':>11} {'min cos':>8} {'mean cos':>8}")
    def run_ctxd(corpus, mode, out):
        subprocess.run([ctxd, "bench", "--corpus", corpus, "--embed-chunks", str(args.chunks), "--skip-e2e",
                        "--model", args.model, "--export", out] + flags[mode], check=True, env=env,
                       stdout=subprocess.DEVNULL)
        timing = json.load(open(os.path.join(out, "ctxd-timing.json")))
        return timing, [json.loads(l) for l in open(os.path.join(out, "ctxd-vectors.jsonl"))]

    for corpus in corpora:
        theirs, reference = None, None
        name = os.path.basename(os.path.normpath(corpus if not corpus.endswith("src") else os.path.dirname(corpus)))
        if args.device == "cuda" and args.cpu_reference:
            with tempfile.TemporaryDirectory() as out:
                reference = run_ctxd(corpus, "f32", out)[1]
        for mode in modes:
            with tempfile.TemporaryDirectory() as out:
                timing, ours = run_ctxd(corpus, mode, out)
                if theirs is None:
                    res = subprocess.run([py, __file__, "--torch-side", out, "--threads", str(args.threads),
                                          "--device", args.device, "--model", args.model], check=True, env=env,
                                         capture_output=True, text=True)
                    theirs = json.loads(res.stdout)
            cos = [cosine(a, b) for a, b in zip(ours, theirs["vectors"])]
            n, tokens = timing["chunks"], timing["tokens"]
            c_cps, t_cps = n / timing["seconds"], n / theirs["seconds"]
            print(f"{name[:24]:<24} {mode:<7} {n:>6} {tokens / n:>8.0f} {c_cps:>9.1f} {t_cps:>9.1f} "
                  f"{c_cps / t_cps:>6.2f} {tokens / timing['seconds']:>10.0f} {tokens / theirs['seconds']:>11.0f} "
                  f"{min(cos):>8.5f} {sum(cos) / len(cos):>8.5f}", flush=True)
            if reference is not None:
                ref = [cosine(a, b) for a, b in zip(ours, reference)]
                print(f"{'':<24} {mode:<7} cosine to ctxd's CPU f32 vectors: min {min(ref):.5f}, "
                      f"mean {sum(ref) / len(ref):.5f}", flush=True)
        if "forward_seconds" in theirs:
            print(f"{name[:24]:<24} torch fp16 forward alone (padded batches of 512): "
                  f"{n / theirs['forward_seconds']:.0f} sequences/s on {theirs['device_name']}", flush=True)
    print(f"(threads={args.threads}, device {args.device}, torch {theirs['torch']}, model {args.model})")


if __name__ == "__main__":
    main()
