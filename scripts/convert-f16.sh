#!/usr/bin/env bash
# Writes a half-precision copy of an embedding model: every float32 tensor of model.safetensors
# stored as float16 (all-MiniLM-L6-v2: 87 MiB -> 44 MiB), the tokenizer and config files copied as
# they are. The copy is a model directory like any other (`--model DIR`, `[model] name = "DIR"`):
# the CPU paths widen the weights to f32 (or bf16) when they load them, candle on a GPU loads them
# as f16 directly. It is what travels to a GPU machine (scripts/gpu-bundle.sh), where 64 MiB is
# all there is room for.
#   scripts/convert-f16.sh                 # the default model -> <model cache>/.../all-MiniLM-L6-v2-f16
#   scripts/convert-f16.sh SRC_DIR DEST_DIR
# Idempotent (an existing DEST with its weights is left alone). Deterministic: the same input
# gives the same bytes (round to nearest even, tensors in name order). Needs python3 with pip;
# installs numpy and safetensors into a venv in the cache (the one scripts/fetch-second-model.sh
# uses). Honours CTXD_MODEL_DIR.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

cache="${XDG_CACHE_HOME:-$HOME/.cache}"
model_root="${CTXD_MODEL_DIR:-$cache/ctxd/models}"
src="${1:-$model_root/sentence-transformers/all-MiniLM-L6-v2}"
dest="${2:-$src-f16}"
if [[ -f "$dest/model.safetensors" && -f "$dest/tokenizer.json" && -f "$dest/config.json" ]]; then
    exit 0
fi
if [[ $# -eq 0 ]]; then
    scripts/fetch-model.sh
fi
[[ -f "$src/model.safetensors" ]] || {
    echo "convert-f16: $src has no model.safetensors: give a model directory (scripts/fetch-model.sh fetches the default)" >&2
    exit 1
}

venv="$cache/ctxd/convert-venv"
if ! "$venv/bin/python" -c "import numpy, safetensors" >/dev/null 2>&1; then
    echo "convert-f16: installing numpy and safetensors into $venv" >&2
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check numpy safetensors
fi
rm -rf "$dest.partial"
mkdir -p "$dest.partial"
"$venv/bin/python" - "$src" "$dest.partial" <<'PY'
import os, shutil, sys

import numpy as np
from safetensors.numpy import load_file, save_file

src, out = sys.argv[1], sys.argv[2]
tensors = load_file(os.path.join(src, "model.safetensors"))
half = {}
for name in sorted(tensors):
    t = tensors[name]
    if t.dtype == np.float32:
        big = np.abs(t).max(initial=0.0)
        if big > 65504.0:
            sys.exit(f"convert-f16: {name} holds {big}, beyond float16's range: this model cannot be stored as f16")
        t = t.astype(np.float16)
    half[name] = np.ascontiguousarray(t)
save_file(half, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
for entry in sorted(os.listdir(src)):
    path = os.path.join(src, entry)
    if entry == "model.safetensors" or entry.endswith((".bin", ".onnx", ".h5", ".msgpack", ".ot")):
        continue
    if os.path.isdir(path):
        shutil.copytree(path, os.path.join(out, entry))
    else:
        shutil.copyfile(path, os.path.join(out, entry))
PY
rm -rf "$dest"
chmod -R a+rX "$dest.partial"
mv "$dest.partial" "$dest"
size() { du -h --apparent-size "$1" | cut -f1; }
echo "convert-f16: $dest (model.safetensors $(size "$src/model.safetensors") -> $(size "$dest/model.safetensors"))" >&2
