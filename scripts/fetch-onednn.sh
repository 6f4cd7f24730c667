#!/usr/bin/env bash
# Installs oneDNN (libdnnl.so.3, GNU OpenMP build) into ctxd's library cache from the PyPI wheel
# `onednn-cpu-gomp`. ctxd opens it at run time for its fast CPU embedder (bf16/f32 matmuls); without
# it ctxd still runs, on candle's slower kernels. Idempotent. Honours CTXD_LIB_DIR
# (default ~/.cache/ctxd/lib). Linux x86-64 only (the only platform the wheel exists for).
set -euo pipefail

version="2023.2.0"
lib_dir="${CTXD_LIB_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/ctxd/lib}"
dest="$lib_dir/libdnnl.so.3"
if [[ -f "$dest" ]]; then
    exit 0
fi
if [[ "$(uname -s)-$(uname -m)" != "Linux-x86_64" ]]; then
    echo "fetch-onednn: no oneDNN wheel for $(uname -s)-$(uname -m); ctxd will embed with candle" >&2
    exit 0
fi
# shellcheck source=scripts/pip-wheel.sh
source "$(dirname "$0")/pip-wheel.sh"
pip_wheel fetch-onednn "oneDNN wheel" "onednn-cpu-gomp==$version" --only-binary=:all:
wheel="$(ls "$wheel_dir"/onednn_cpu_gomp-*.whl | head -n 1)"
mkdir -p "$lib_dir"
"$python" - "$wheel" "$dest.partial" <<'PY'
import sys, zipfile
wheel, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    name = next(n for n in z.namelist() if n.endswith("/lib/libdnnl.so.3"))
    with z.open(name) as src, open(out, "wb") as dst:
        dst.write(src.read())
PY
chmod 0755 "$dest.partial"
mv "$dest.partial" "$dest"
echo "fetch-onednn: installed $dest" >&2
