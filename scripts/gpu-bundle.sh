#!/usr/bin/env bash
# Writes into DIR what a GPU check carries beside the working tree (scripts/gpu-check.sh --bundle DIR
# runs it there), and prints its size against the 64 MiB a GPU session can carry in all:
#   ctxd-forward.xz  the binary (CTXD_BIN, default the small CUDA build of `scripts/build-cuda.sh
#                    --forward`: the embedding path alone), stripped and xz-compressed; a full `ctxd`
#                    binary goes in as ctxd.xz (gpu-check.sh unpacks either)
#   model.tar.xz     the default model's f16 copy (scripts/convert-f16.sh): weights, tokenizer, config,
#                    in one folder named as the model
#   reference.json   sentence-transformers' reference vectors (models/tests/fixtures/reference.json)
#   texts.jsonl.xz   the CoSQA corpus's files as JSON lines (path header + text), the end-to-end texts
# The check script and benches/torch_forward.py travel with the working tree.
#   scripts/gpu-bundle.sh DIR
#   CTXD_BIN=path/to/ctxd-forward scripts/gpu-bundle.sh DIR   # another binary (e.g. a CPU build, to try the flow)
# Exits 1 when the bundle and the tree together exceed 64 MiB (the bundle is still written).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
[[ $# -eq 1 ]] || { sed -n '2,13s/^# \{0,1\}//p' "$0" >&2; exit 2; }
dir="$1"
cache="${XDG_CACHE_HOME:-$HOME/.cache}"
bin="${CTXD_BIN:-${CTXD_CUDA_TARGET_DIR:-$cache/ctxd-target-cuda}/gpu-check/ctxd-forward}"
[[ -x "$bin" ]] || { echo "gpu-bundle: no binary at $bin: build one (scripts/build-cuda.sh --forward) or set CTXD_BIN" >&2; exit 1; }
name="$(basename "$bin")"
scripts/convert-f16.sh
model="${CTXD_MODEL_DIR:-$cache/ctxd/models}/sentence-transformers/all-MiniLM-L6-v2-f16"
corpus="${CTXD_GPU_CHECK_CORPUS:-$repo/../shared/eval/cosqa/corpus}"
[[ -d "$corpus" ]] || { echo "gpu-bundle: no corpus at $corpus (set CTXD_GPU_CHECK_CORPUS)" >&2; exit 1; }

rm -rf "$dir"
mkdir -p "$dir"
strip --strip-all -o "$dir/$name.stripped" "$bin"
xz -T0 -9e -c "$dir/$name.stripped" >"$dir/$name.xz"
rm "$dir/$name.stripped"
files=()
for f in model.safetensors config.json tokenizer.json tokenizer_config.json special_tokens_map.json vocab.txt \
    modules.json sentence_bert_config.json config_sentence_transformers.json 1_Pooling/config.json; do
    [[ -f "$model/$f" ]] && files+=("$(basename "$model")/$f")
done
# One folder named as the model (its name is the model id ctxd reports). f16 weights lose ~10%
# to xz (their exponent bits repeat): worth it in 64 MiB.
tar -C "$(dirname "$model")" -cf - "${files[@]}" | xz -T0 -6 >"$dir/model.tar.xz"
cp models/tests/fixtures/reference.json "$dir/reference.json"
scripts/corpus-texts.py "$corpus" "$dir/texts.jsonl"
xz -T0 -9 "$dir/texts.jsonl"

kib() { du -sk --apparent-size "$1" | cut -f1; }
tree_kib=$(( $(git ls-files -z | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1) / 1024 ))
echo "gpu-bundle: $dir"
(cd "$dir" && du -ah --apparent-size -- * | sed 's/^/  /')
total=$(( $(kib "$dir") + tree_kib ))
echo "gpu-bundle: bundle $(( $(kib "$dir") / 1024 )) MiB + working tree $(( tree_kib / 1024 )) MiB = $(( total / 1024 )) MiB of 64 MiB"
if (( total > 64 * 1024 )); then
    echo "gpu-bundle: too big to carry: the binary must shrink (an embedding-only build)" >&2
    exit 1
fi
