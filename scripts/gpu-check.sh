#!/usr/bin/env bash
# ctxd's embedding path against PyTorch on the same device, in one run, in one table:
#   * the forward pass alone, sequences/s at 256 tokens for batch 32/128/512: ctxd (`ctxd bench
#     --forward`, or the `ctxd-forward` binary a bundle carries: the same measurement) in f16 and f32 on a GPU (f32, and bf16 where native, on a CPU) beside PyTorch
#     (benches/torch_forward.py, the same weights) in fp16 and fp32 (fp32 on a CPU);
#   * the cosine of ctxd's vectors to committed reference vectors (sentence-transformers on a
#     CPU, models/tests/fixtures/reference.json): goal >= 0.999 in f16, >= 0.9999 in f32;
#   * end to end, texts/s embedding the CoSQA corpus's chunk texts: ctxd's embedding service (what
#     the indexer runs: tokenize, length-sorted batches, forward, pool) against
#     sentence-transformers' `encode` on the same texts.
# On a machine with a GPU (nvidia-smi lists one and the ctxd binary has cuda) both sides run on
# GPU 0; elsewhere the same table comes out with device = cpu, and the script exits 0. A side
# that cannot run says why in its row (PyTorch not installed, a precision the device refuses).
#   scripts/gpu-check.sh                 # here: the dev build, the f16 model copy, CoSQA texts
#   scripts/gpu-check.sh --bundle DIR    # what scripts/gpu-bundle.sh wrote (binary, model, texts)
#   scripts/gpu-check.sh --quick         # small batches and texts: a smoke of the script itself
#   scripts/gpu-check.sh --profile       # also where the time goes at the largest batch: ctxd's
#                                        # encoder stage by stage (device synchronised per stage),
#                                        # PyTorch's top kernels (torch.profiler), and ctxd's top
#                                        # kernels through Nsight Compute where `ncu` runs
# Environment: CTXD_BIN (the binary), CTXD_GPU_CHECK_OUT (where the JSON figures are kept;
# default a temporary folder, printed), PYTHON (default python3: the one with torch).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

bundle="" quick=0 profile=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        --bundle) bundle="$2"; shift 2 ;;
        --quick) quick=1; shift ;;
        --profile) profile=(--profile); shift ;;
        -h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
        *) echo "gpu-check: unknown argument $1" >&2; exit 2 ;;
    esac
done
started=$(date +%s)
python="${PYTHON:-python3}"
out="${CTXD_GPU_CHECK_OUT:-$(mktemp -d)}"
mkdir -p "$out"
cache="${XDG_CACHE_HOME:-$HOME/.cache}"

if [[ -n "$bundle" ]]; then
    reference="$bundle/reference.json"
    texts="$bundle/texts.jsonl"
    [[ -f "$texts.xz" && ! -f "$texts" ]] && { xz -dc "$texts.xz" >"$out/texts.jsonl"; texts="$out/texts.jsonl"; }
    mkdir -p "$out/model"
    tar -C "$out/model" -xJf "$bundle/model.tar.xz"
    model="$(find "$out/model" -mindepth 1 -maxdepth 1 -type d | head -1)"
    bin="${CTXD_BIN:-}"
    for name in ctxd-forward ctxd; do
        if [[ -z "$bin" && -x "$bundle/$name" ]]; then
            bin="$bundle/$name"
        elif [[ -z "$bin" && -f "$bundle/$name.xz" ]]; then
            xz -dc "$bundle/$name.xz" >"$out/$name" && chmod +x "$out/$name" && bin="$out/$name"
        fi
    done
else
    bin="${CTXD_BIN:-${CARGO_TARGET_DIR:-$cache/ctxd-target}/debug/ctxd}"
    [[ -x "$bin" ]] || { echo "gpu-check: building ctxd (dev profile)" >&2; CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$cache/ctxd-target}" cargo build -q -p ctxd; }
    scripts/convert-f16.sh
    model="${CTXD_MODEL_DIR:-$cache/ctxd/models}/sentence-transformers/all-MiniLM-L6-v2-f16"
    reference="models/tests/fixtures/reference.json"
    texts="$out/texts.jsonl"
fi
[[ -x "$bin" ]] || { echo "gpu-check: no ctxd binary at ${bin:-$bundle} (set CTXD_BIN)" >&2; exit 1; }
# ctxd-forward takes `ctxd bench --forward`'s flags directly.
if [[ "$(basename "$bin")" == ctxd-forward ]]; then fwd=("$bin"); else fwd=("$bin" bench --forward); fi
[[ -f "$model/model.safetensors" ]] || { echo "gpu-check: no model at $model" >&2; exit 1; }

# The GPU's CUDA libraries: the driver's own, and PyTorch's wheels (cuBLAS, cuRAND, NVRTC, the
# runtime) where the binary does not carry them.
device=cpu
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    libs="$("$python" - <<'PY' 2>/dev/null || true
import glob, os, site
dirs = []
for base in site.getsitepackages():
    dirs += sorted(d for d in glob.glob(os.path.join(base, "nvidia", "*", "lib")) if os.path.isdir(d))
    dirs += sorted(d for d in glob.glob(os.path.join(base, "nvidia", "cu*", "lib")) if os.path.isdir(d))
print(":".join(dict.fromkeys(dirs)))
PY
)"
    export LD_LIBRARY_PATH="${libs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    if "${fwd[@]}" --device cuda:0 --batches 1 --seq-len 8 --min-seconds 0 --precisions f32 \
        --model "$model" --json >"$out/probe.json" 2>"$out/probe.err" && ! grep -q '"refused": "' "$out/probe.json"; then
        device=cuda:0
    else
        echo "gpu-check: a GPU is listed but ctxd cannot use it, so both sides run on the cpu: $(tail -c 400 "$out/probe.err"; grep -o '"refused": "[^"]*' "$out/probe.json" || true)" >&2
    fi
fi

if [[ $quick == 1 ]]; then
    batches="4,8" seq=64 secs=0 ntexts=64
else
    batches="32,128,512" seq=256 secs=2 ntexts=100000
fi
if [[ "$device" == cpu ]]; then
    ctxd_precisions="" torch_precisions="fp32" torch_device=cpu
    [[ $quick == 1 ]] || batches="32,128"
    [[ $quick == 1 ]] || ntexts=1024
else
    ctxd_precisions="--precisions f16,f32" torch_precisions="fp16,fp32" torch_device=cuda
fi

# The texts: each CoSQA corpus file with its path as a header, as ctxd embeds a chunk (written
# here; a bundle carries them).
if [[ -z "$bundle" && ! -s "$texts" ]]; then
    corpus="${CTXD_GPU_CHECK_CORPUS:-$repo/../shared/eval/cosqa/corpus}"
    [[ -d "$corpus" ]] || { echo "gpu-check: no corpus at $corpus (set CTXD_GPU_CHECK_CORPUS)" >&2; exit 1; }
    scripts/corpus-texts.py "$corpus" "$texts"
fi
head -n "$ntexts" "$texts" >"$out/texts-used.jsonl"

echo "gpu-check: device $device, binary $bin, model $model, $(wc -l <"$out/texts-used.jsonl") texts; figures in $out" >&2
# shellcheck disable=SC2086
"${fwd[@]}" --device "$device" --model "$model" --batches "$batches" --seq-len "$seq" \
    --min-seconds "$secs" --reference "$reference" --texts "$out/texts-used.jsonl" $ctxd_precisions "${profile[@]}" --json \
    >"$out/ctxd.json" 2>"$out/ctxd.err" || { cat "$out/ctxd.err" >&2; exit 1; }
torch_rc=0
"$python" benches/torch_forward.py --model "$model" --device "$torch_device" --precisions "$torch_precisions" \
    --batches "$batches" --seq-len "$seq" --min-seconds "$secs" --texts "$out/texts-used.jsonl" "${profile[@]}" --json \
    >"$out/torch.json" 2>"$out/torch.err" || torch_rc=$?

# ctxd's kernels by name (Nsight Compute, one metric: each kernel's duration) at batch 128, f16:
# warm-up and two passes. Optional: ncu is not on every machine and not every runtime lets it
# read the GPU's counters; what it says goes into ncu.err.
if [[ ${#profile[@]} -gt 0 && "$device" != cpu ]] && command -v ncu >/dev/null 2>&1; then
    timeout 150 ncu --metrics gpu__time_duration.sum --csv --launch-count 600 "${fwd[@]}" --device "$device" \
        --model "$model" --batches 128 --seq-len "$seq" --min-seconds 0 --precisions f16 \
        >"$out/ncu.csv" 2>"$out/ncu.err" || echo "gpu-check: ncu did not finish: $(tail -c 300 "$out/ncu.err")" >&2
fi

"$python" - "$out" "$device" "$torch_rc" "$batches" <<'PY'
import csv, json, os, sys
out, device, torch_rc, batches = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4].split(",")
ctxd = json.load(open(os.path.join(out, "ctxd.json")))
torch = json.load(open(os.path.join(out, "torch.json"))) if torch_rc == 0 else None
why = "" if torch_rc == 0 else open(os.path.join(out, "torch.err")).read().strip().splitlines()[-1:] or ["failed"]
print(f"\n## ctxd vs PyTorch, {ctxd['model']}, device {device}, {ctxd['seq_len']} tokens per sequence\n")
print("| side | precision | " + " | ".join(f"forward seq/s, batch {b}" for b in batches)
      + " | cosine to reference (min / mean) | texts/s end to end |")
print("|---|---|" + "---:|" * len(batches) + "---|---:|")
for r in ctxd["rows"]:
    if r.get("refused"):
        print(f"| ctxd {r['backend']} {r['device']} | {r['precision']} | refused: {r['refused']} |")
        continue
    cells = " | ".join(f"{s:.0f}" for _, s in r["seq_per_s"])
    cos = f"{r['cosine_min']:.6f} / {r['cosine_mean']:.6f}" if r.get("cosine_min") is not None else "-"
    if r.get("non_finite"):
        cos += f" ({r['non_finite']} vectors NaN/inf)"
    e2e = f"{r['texts_per_s']:.0f}" if r.get("texts_per_s") else "-"
    print(f"| ctxd {r['backend']} {r['device']} | {r['precision']} | {cells} | {cos} | {e2e} |")
if torch:
    enc = torch.get("encode")
    for i, r in enumerate(torch["rows"]):
        cells = " | ".join(f"{s:.0f}" for _, s in r["seq_per_s"])
        e2e = f"{enc['texts_per_s']:.0f} (sentence-transformers encode, {enc['precision']})" if enc and i == 0 else "-"
        print(f"| {r['backend']} {r['device']} | {r['precision']} | {cells} | (reference) | {e2e} |")
    best = lambda rows, p: next((dict(r["seq_per_s"]) for r in rows if r["precision"] == p and not r.get("refused")), {})
    c16, t16 = best(ctxd["rows"], "f16"), best(torch["rows"], "fp16")
    c32, t32 = best(ctxd["rows"], "f32"), best(torch["rows"], "fp32")
    big = max(int(b) for b in batches)
    print()
    for name, c, t in (("f16", c16, t16), ("f32", c32, t32)):
        if big in c and big in t:
            print(f"forward {name} at batch {big}: ctxd/PyTorch = {c[big] / t[big]:.2f}")
    ctxd_e2e = next((r.get("texts_per_s") for r in ctxd["rows"] if r.get("texts_per_s")), None)
    if enc and ctxd_e2e:
        print(f"end to end: ctxd/sentence-transformers = {ctxd_e2e / enc['texts_per_s']:.2f} "
              f"(ctxd {ctxd['rows'][0]['precision']}, sentence-transformers {enc['precision']})")
else:
    print(f"| PyTorch | - | not run: {why[0]} |")

big = max(int(b) for b in batches)
for r in ctxd["rows"]:
    if r.get("stages"):
        total = sum(ms for _, ms in r["stages"])
        print(f"\nctxd {r['backend']} {r['device']} {r['precision']}: {total:.2f} ms per pass at batch {big}, by stage "
              "(device synchronised after each)\n")
        print("| stage | ms per pass | share |\n|---|---:|---:|")
        for stage, ms in r["stages"]:
            print(f"| {stage} | {ms:.2f} | {100 * ms / total:.1f}% |")
for r in (torch or {}).get("rows", []):
    if r.get("kernels"):
        print(f"\n{r['backend']} {r['device']} {r['precision']}: top kernels at batch {big} (torch.profiler)\n")
        print("| kernel | ms per pass | share |\n|---|---:|---:|")
        for name, ms, share in r["kernels"]:
            print(f"| `{name}` | {ms:.3f} | {100 * share:.1f}% |")
ncu = os.path.join(out, "ncu.csv")
if os.path.exists(ncu) and os.path.getsize(ncu) > 0:
    lines = open(ncu).read().splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith('"ID"')), None)
    per = {}
    for row in csv.DictReader(lines[start:]) if start is not None else []:
        if row.get("Metric Name") == "gpu__time_duration.sum":
            unit = row.get("Metric Unit", "nsecond")
            scale = {"nsecond": 1e-6, "usecond": 1e-3, "msecond": 1.0, "second": 1e3}.get(unit, 1e-6)
            name = row["Kernel Name"][:90]
            t, n = per.get(name, (0.0, 0))
            per[name] = (t + float(row["Metric Value"].replace(",", "")) * scale, n + 1)
    if per:
        total = sum(t for t, _ in per.values())
        print(f"\nctxd candle {device} f16: kernels at batch 128 (Nsight Compute, warm-up + 2 passes, {total:.1f} ms in all)\n")
        print("| kernel | launches | ms | share |\n|---|---:|---:|---:|")
        for name, (t, n) in sorted(per.items(), key=lambda kv: -kv[1][0])[:15]:
            print(f"| `{name}` | {n} | {t:.2f} | {100 * t / total:.1f}% |")
PY
echo "gpu-check: done in $(( $(date +%s) - started ))s" >&2
