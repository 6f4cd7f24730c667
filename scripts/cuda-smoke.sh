#!/usr/bin/env bash
# The CUDA build starts where no NVIDIA driver exists and says why it runs on the cpu:
#   1. its NEEDED entries name no CUDA library (cudarc opens them at run time; the CUDA runtime is
#      linked statically: scripts/cuda-patch-candle.sh);
#   2. `--device auto` embeds on the cpu, exits 0, its start-up line says `device auto: no NVIDIA
#      driver (...)`, and its vectors agree with sentence-transformers' reference (cosine >= 0.9999);
#   3. `--device cuda:0` is refused in its row with that reason (no panic, exit 0).
# It checks the small build (`scripts/build-cuda.sh --forward`: ctxd-forward) and the full ctxd
# CUDA build where one exists (`scripts/build-cuda.sh`, its `bench --forward`). Where a GPU and its
# driver are present (nvidia-smi lists one) step 2 expects cuda:0 instead.
#   scripts/cuda-smoke.sh            # the builds in CTXD_CUDA_TARGET_DIR (default ~/.cache/ctxd-target-cuda)
#   scripts/cuda-smoke.sh BIN...     # these binaries (ctxd-forward or ctxd)
# A CUDA build takes tens of minutes on two cores, so CI does not make one: with no CUDA binary
# this says it skipped and why, and exits 0. scripts/test.sh runs it.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
target="${CTXD_CUDA_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/ctxd-target-cuda}"
fail() { echo "cuda-smoke: FAILED: $*" >&2; exit 1; }

bins=("$@")
if (( ${#bins[@]} == 0 )); then
    for b in "$target/gpu-check/ctxd-forward" "$target/release/ctxd" "$target/debug/ctxd"; do
        [[ -x "$b" ]] && bins+=("$b")
    done
fi
if (( ${#bins[@]} == 0 )); then
    echo "cuda-smoke: skipped: no CUDA build under $target (scripts/fetch-cuda.sh, then" \
        "scripts/build-cuda.sh --forward builds the small one, ~30 min on two cores)" >&2
    exit 0
fi
gpu=0
command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 && gpu=1
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
reference="models/tests/fixtures/reference.json"

for bin in "${bins[@]}"; do
    name="$(basename "$bin")"
    if [[ "$name" == ctxd-forward ]]; then fwd=("$bin"); else fwd=("$bin" bench --forward); fi
    needed="$(readelf -d "$bin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')"
    if grep -Eq '(^| )lib(cuda|cudart|cublas|cublasLt|curand|nvrtc)\.so' <<<"$needed"; then
        fail "$bin links a CUDA library at load (NEEDED: $needed): it would not start without the driver"
    fi
    # Without a driver nothing on the library path may stand in for it (the toolkit's link stub
    # must never be loaded): run with an empty LD_LIBRARY_PATH.
    env -u LD_LIBRARY_PATH "${fwd[@]}" --device auto --precisions f32 --batches 2 --seq-len 32 --min-seconds 0 \
        --reference "$reference" --json >"$work/auto.json" 2>"$work/auto.err" \
        || { cat "$work/auto.err" >&2; fail "$bin --device auto failed"; }
    grep -q 'panicked' "$work/auto.err" && { cat "$work/auto.err" >&2; fail "$bin panicked"; }
    line="$(grep -m1 -o 'embedding on .*' "$work/auto.err" || true)"
    [[ -n "$line" ]] || { cat "$work/auto.err" >&2; fail "$bin printed no start-up line"; }
    python3 - "$work/auto.json" "$gpu" "$line" <<'PY' || fail "$bin --device auto: $line"
import json, sys
out, gpu, line = json.load(open(sys.argv[1])), sys.argv[2] == "1", sys.argv[3]
row = out["rows"][0]
want = "cuda:0" if gpu else "cpu"
assert row.get("refused") is None, row
assert row["device"] == want, f"ran on {row['device']}, expected {want}"
if not gpu:
    assert "device auto: no NVIDIA driver (" in line, f"the start-up line does not say the driver is missing: {line}"
assert row["cosine_min"] >= 0.9999, f"cosine to the reference {row['cosine_min']}"
PY
    echo "cuda-smoke: $name starts without a CUDA library linked (NEEDED: $needed); $line" >&2
    if (( gpu == 0 )); then
        env -u LD_LIBRARY_PATH "${fwd[@]}" --device cuda:0 --precisions f32 --batches 1 --seq-len 8 --min-seconds 0 \
            --json >"$work/cuda.json" 2>"$work/cuda.err" || { cat "$work/cuda.err" >&2; fail "$bin --device cuda:0 exited non-zero"; }
        grep -q 'panicked' "$work/cuda.err" && { cat "$work/cuda.err" >&2; fail "$bin --device cuda:0 panicked"; }
        refused="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["rows"][0].get("refused") or "")' "$work/cuda.json")"
        [[ "$refused" == *"cuda:0: no NVIDIA driver ("* ]] || fail "$bin --device cuda:0 was not refused with the reason: '$refused'"
        echo "cuda-smoke: $name --device cuda:0 refused: $refused" >&2
    fi
done
echo "cuda-smoke: ok (${#bins[@]} CUDA build(s))" >&2
