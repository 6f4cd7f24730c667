#!/usr/bin/env bash
# The GPU path of the code model's training, run on a lent GPU machine in one `device` call:
#   here:  python3 train/pack_pairs.py --out train-bundle      (f16 base + the pairs that fit, ≤ ~54 MiB)
#   there: bash train/gpu-train.sh                              (run with carry ["train-bundle"], timeout_s 480)
#   here:  bash train/gpu-unpack.sh <files_at> <model dir>     (joins the weights, converts to the shipped form)
# It trains train/train_encoder.py on CUDA in bf16 autocast (batch 128, queries 64 and documents
# 256 tokens) for at most TRAIN_SECONDS (default 330: the machine's start, the model's load and
# the held-out evaluations fit the 8-minute call), early-stopped on the held-out repositories'
# pairs, then writes to $OUT the log, training.json, the small model files (a tar) and the
# weights as f16 in parts of 15 MiB (a call brings back files of 16 MiB at most).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PYTHONUNBUFFERED=1
out="${OUT:-/tmp/gpu-train-out}"
mkdir -p "$out"
run=/tmp/ctxd-gpu-train
rm -rf "$run"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/gpu.txt" || true
"${PYTHON:-python3}" -c "import torch, sentence_transformers as s; print('torch', torch.__version__, 'st', s.__version__, torch.cuda.is_available())"
# TRAIN_DEVICE=cpu TRAIN_STEPS=3 runs the same script here, a few steps, as its smoke test.
device="${TRAIN_DEVICE:-cuda}"
precision=()
[[ "$device" == cuda* ]] && precision=(--bf16)
"${PYTHON:-python3}" train/train_encoder.py --pairs train-bundle/pairs.jsonl.xz --base train-bundle/base --out "$run" \
    --device "$device" "${precision[@]}" --steps "${TRAIN_STEPS:-0}" --batch "${TRAIN_BATCH:-128}" --query-len 64 --doc-len 256 --epochs "${TRAIN_EPOCHS:-4}" \
    --lr "${TRAIN_LR:-5e-5}" --eval-every "${TRAIN_EVAL_EVERY:-100}" --patience 4 \
    --time-budget "${TRAIN_SECONDS:-330}" --hard-negatives 1 2>&1 | tee "$out/train.log"
cp "$run/training.json" "$out/"
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
split -b 15M -d "$run/f16/model.safetensors" "$out/model.safetensors.part-"
tar -C "$run/best" --exclude model.safetensors -czf "$out/model-files.tar.gz" .
ls -l "$out"
