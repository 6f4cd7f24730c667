#!/usr/bin/env bash
# Puts a GPU training run's output back together (see train/gpu-train.sh):
#   bash train/gpu-unpack.sh <folder the device call's files came back to> <model dir>
# joins the f16 weight parts into model.safetensors and unpacks the model's small files beside it.
set -euo pipefail
from="$1" to="$2"
mkdir -p "$to"
tar -C "$to" -xzf "$from/model-files.tar.gz"
cat "$from"/model.safetensors.part-* > "$to/model.safetensors"
mkdir -p "$to/report"
tar -C "$to/report" -xzf "$from/report.tar.gz"
echo "gpu-unpack: $to ($(du -h "$to/model.safetensors" | cut -f1) of weights)"
