#!/usr/bin/env bash
# The GPU path of the code model's training, run on a lent GPU machine in one `device` call:
#   here:  python3 train/pack_pairs.py --out train-bundle      (f16 base + the pairs that fit, ≤ ~54 MiB)
#   there: bash train/gpu-train.sh                              (run with carry ["train-bundle"], timeout_s 480)
#   here:  bash train/gpu-unpack.sh <files_at> <model dir>     (joins the f16 weights, unpacks the small files)
# It trains train/train_encoder.py on CUDA in bf16 autocast (batch 128, queries 64 and documents
# 256 tokens) for at most TRAIN_SECONDS (default 330: the machine's start, the model's load and
# the validation evaluations fit the 8-minute call), early-stopped on the validation repositories'
# pairs, then writes to $OUT five files (a call brings back 8 at most, of 16 MiB each):
# report.tar.gz (each variant's log and training.json, variants.txt), model-files.tar.gz (the
# chosen model's small files) and its weights as f16 in three parts of 15 MiB.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PYTHONUNBUFFERED=1
back="${OUT:-/tmp/gpu-train-out}"
run=/tmp/ctxd-gpu-train
out="$run/report"
rm -rf "$run"
mkdir -p "$back" "$out"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/gpu.txt" || true
"${PYTHON:-python3}" -c "import torch, sentence_transformers as s; print('torch', torch.__version__, 'st', s.__version__, torch.cuda.is_available())"
# TRAIN_DEVICE=cpu TRAIN_STEPS=3 runs the same script here, a few steps, as its smoke test.
device="${TRAIN_DEVICE:-cuda}"
precision=()
[[ "$device" == cuda* ]] && precision=(--bf16)
# The variants, trained one after the other on the same pairs, each early-stopped and judged on
# the same validation repositories' pairs; the best validation MRR@10 is the one brought back. Each
# is NAME:ARGS (ARGS with commas for spaces). Default: all pairs, and SweRank's consistency filter
# at K = 20 and K = 5 (the base model's ranks computed once, shared).
variants="${TRAIN_VARIANTS:-all: filter20:--filter-k,20 filter5:--filter-k,5}"
count=$(wc -w <<<"$variants")
seconds=$(( ${TRAIN_SECONDS:-330} / count ))
mkdir -p "$run"
best="" best_mrr=-1
for variant in $variants; do
    name="${variant%%:*}" extra="${variant#*:}"
    read -r -a extra_args <<<"${extra//,/ }"
    "${PYTHON:-python3}" train/train_encoder.py --pairs train-bundle/pairs.jsonl.xz --base train-bundle/base \
        --out "$run/$name" --ranks-cache "$run/base_ranks.json" \
        --device "$device" "${precision[@]}" --steps "${TRAIN_STEPS:-0}" --batch "${TRAIN_BATCH:-128}" \
        --query-len 64 --doc-len 256 --epochs "${TRAIN_EPOCHS:-4}" --lr "${TRAIN_LR:-5e-5}" \
        --eval-every "${TRAIN_EVAL_EVERY:-100}" --patience 4 --time-budget "$seconds" --hard-negatives 1 \
        "${extra_args[@]}" 2>&1 | tee "$out/train-$name.log" \
        || { echo "variant $name: failed (its log: train-$name.log)" | tee -a "$out/variants.txt"; continue; }
    mrr=$("${PYTHON:-python3}" -c "import json,sys; print(json.load(open(sys.argv[1]))['best_validation_mrr10'])" "$run/$name/training.json")
    echo "variant $name: validation MRR@10 $mrr" | tee -a "$out/variants.txt"
    if "${PYTHON:-python3}" -c "import sys; sys.exit(0 if float(sys.argv[1]) > float(sys.argv[2]) else 1)" "$mrr" "$best_mrr"; then
        best="$name" best_mrr="$mrr"
    fi
done
echo "chosen: ${best:-none} ($best_mrr)" | tee -a "$out/variants.txt"
for variant in $variants; do cp "$run/${variant%%:*}/training.json" "$out/training-${variant%%:*}.json" 2>/dev/null || true; done
if [[ -z "$best" ]]; then
    tar -C "$out" -czf "$back/report.tar.gz" .
    echo "gpu-train: every variant failed; report.tar.gz has their logs" >&2
    exit 1
fi
run="$run/$best"
# The f16 copy with torch here: scripts/convert-f16.sh would pip-install numpy and safetensors,
# and the device machine reaches no registry.
"${PYTHON:-python3}" - "$run/best" "$run/f16" <<'PY'
import sys, torch
from safetensors.torch import load_file, save_file
src, dst = sys.argv[1], sys.argv[2]
import os, shutil
os.makedirs(dst, exist_ok=True)
tensors = load_file(f"{src}/model.safetensors")
save_file({k: v.to(torch.float16) if v.dtype == torch.float32 else v for k, v in sorted(tensors.items())},
          f"{dst}/model.safetensors", metadata={"format": "pt"})
PY
split -b 15M -d "$run/f16/model.safetensors" "$back/model.safetensors.part-"
tar -C "$run/best" --exclude model.safetensors -czf "$back/model-files.tar.gz" .
tar -C "$out" -czf "$back/report.tar.gz" .
ls -l "$back"
cat "$out/variants.txt"
