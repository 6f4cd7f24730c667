#!/usr/bin/env python3
"""PyTorch's side of scripts/gpu-check.sh: the same model's forward pass alone, in sequences/s, at a
fixed sequence length for a few batch sizes and precisions, and (with --texts) sentence-transformers'
`encode` end to end on the same texts ctxd embedded — on the same device, in the same run.

    python3 benches/torch_forward.py --model DIR --device cuda --precisions fp16,fp32 --json
    python3 benches/torch_forward.py --model DIR --device cpu --texts texts.jsonl

The forward sequences are real tokens (a long paragraph tokenized and cut to --seq-len, [SEP]
kept), every row full, so no padding is measured, exactly as `ctxd bench --forward` does. Each
cell runs one warm-up batch, then batches until --min-seconds have passed (at least two), with the
device synchronised before the clock is read. Prints one JSON object (--json) or a table. Needs
torch and transformers (sentence-transformers for --texts); says so and exits 3 when they are missing.
"""
import argparse
import json
import sys
import time

PARAGRAPH = ("The daemon watches a repository, chunks every file by its definitions and embeds each "
             "chunk; fn search(index: &Index, query: &str) -> Vec<Hit> { index.hybrid(query).take(10).collect() } "
             "Ranked, cited, token-budgeted context comes back in milliseconds, always fresh. ")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="model directory (f32 or f16 safetensors)")
    ap.add_argument("--device", default="cpu", help="cpu or cuda")
    ap.add_argument("--precisions", default="fp32", help="comma-separated: fp16, fp32, bf16")
    ap.add_argument("--batches", default="32,128,512")
    ap.add_argument("--seq-len", type=int, default=256)
    ap.add_argument("--min-seconds", type=float, default=2.0)
    ap.add_argument("--texts", help="a JSON-lines file of texts to encode end to end (sentence-transformers)")
    ap.add_argument("--encode-precision", default=None, help="precision of the encode run (default: the first)")
    ap.add_argument("--profile", action="store_true",
                    help="also profile the largest batch (torch.profiler): the top kernels by device time")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    try:
        import torch
        from transformers import AutoModel, AutoTokenizer
    except ImportError as e:
        print(f"torch_forward: {e}: PyTorch and transformers are needed (the GPU machine's python3 has them)",
              file=sys.stderr)
        sys.exit(3)

    dtypes = {"fp16": torch.float16, "fp32": torch.float32, "bf16": torch.bfloat16}
    precisions = [p for p in args.precisions.split(",") if p]
    for p in precisions:
        if p not in dtypes:
            sys.exit(f"torch_forward: precision {p} is not one of {', '.join(dtypes)}")
    batches = [int(b) for b in args.batches.split(",") if b]
    device = torch.device(args.device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    tok = AutoTokenizer.from_pretrained(args.model)
    ids = tok(PARAGRAPH * (1 + 4 * args.seq_len // len(PARAGRAPH) + 8), truncation=True,
              max_length=args.seq_len, return_tensors="pt")["input_ids"][0]
    if ids.shape[0] < args.seq_len:
        sys.exit(f"torch_forward: the tokenizer gave {ids.shape[0]} tokens, fewer than --seq-len {args.seq_len}")
    rows = []
    for p in precisions:
        try:  # transformers >= 4.56 names it dtype; older ones torch_dtype
            model = AutoModel.from_pretrained(args.model, dtype=dtypes[p])
        except TypeError:
            model = AutoModel.from_pretrained(args.model, torch_dtype=dtypes[p])
        model = model.to(device).eval()
        cells = []
        with torch.inference_mode():
            for b in batches:
                batch = ids.unsqueeze(0).repeat(b, 1).to(device)
                mask = torch.ones_like(batch)
                model(input_ids=batch, attention_mask=mask)
                sync()
                started, runs = time.perf_counter(), 0
                while runs < 2 or time.perf_counter() - started < args.min_seconds:
                    out = model(input_ids=batch, attention_mask=mask).last_hidden_state
                    # The same pooling ctxd does (mean over the mask, then L2), so both sides
                    # compute the whole sentence vector, not the encoder alone.
                    pooled = (out * mask.unsqueeze(-1)).sum(1) / mask.sum(1, keepdim=True)
                    torch.nn.functional.normalize(pooled.float(), dim=-1)
                    runs += 1
                sync()
                cells.append([b, runs * b / (time.perf_counter() - started)])
            kernels = profile(model, ids, max(batches), device) if args.profile else []
        rows.append({"device": str(device), "backend": f"pytorch {torch.__version__}", "precision": p,
                     "seq_per_s": cells, "kernels": kernels})
        del model
        if device.type == "cuda":
            torch.cuda.empty_cache()
    result = {"seq_len": args.seq_len, "rows": rows}
    if args.texts:
        result["encode"] = encode(args, device, dtypes[args.encode_precision or precisions[0]], sync)
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        for r in rows:
            print(r["device"], r["backend"], r["precision"], " ".join(f"b{b}={s:.0f}" for b, s in r["seq_per_s"]))
        if "encode" in result:
            print("encode:", result["encode"])


def profile(model, ids, batch, device, passes=3, top=12):
    """[kernel or op, ms per pass, share] of the top `top` by device time (CPU time on a CPU)."""
    import torch
    from torch.profiler import ProfilerActivity
    gpu = device.type == "cuda"
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if gpu else [])
    batch_ids = ids.unsqueeze(0).repeat(batch, 1).to(device)
    mask = torch.ones_like(batch_ids)
    try:
        with torch.profiler.profile(activities=acts) as prof:
            for _ in range(passes):
                model(input_ids=batch_ids, attention_mask=mask)
            if gpu:
                torch.cuda.synchronize()
        events = prof.key_averages()
        if gpu:
            events = [e for e in events if str(getattr(e, "device_type", "")).endswith("CUDA")]
            time_of = lambda e: getattr(e, "self_device_time_total", None) or getattr(e, "self_cuda_time_total", 0)
        else:
            time_of = lambda e: e.self_cpu_time_total
        total = sum(time_of(e) for e in events) or 1
        events = sorted(events, key=time_of, reverse=True)[:top]
        return [[e.key[:90], time_of(e) / 1e3 / passes, time_of(e) / total] for e in events]
    except Exception as e:  # the profile is an extra: its failure is said, not fatal
        return [[f"profile failed: {e}", 0.0, 0.0]]


def encode(args, device, dtype, sync):
    """sentence-transformers' encode on the texts, end to end (tokenize, batch, forward, pool)."""
    import torch
    from sentence_transformers import SentenceTransformer
    with open(args.texts) as f:
        texts = [json.loads(line) for line in f if line.strip()]
    model = SentenceTransformer(args.model, device=str(device))
    if dtype != torch.float32:
        model = model.to(dtype)
    model.encode(texts[:64], batch_size=64)
    sync()
    started = time.perf_counter()
    model.encode(texts, batch_size=128)
    sync()
    secs = time.perf_counter() - started
    return {"texts": len(texts), "seconds": secs, "texts_per_s": len(texts) / secs,
            "precision": str(dtype).replace("torch.", "")}


if __name__ == "__main__":
    main()
