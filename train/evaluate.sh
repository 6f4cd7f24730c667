#!/usr/bin/env bash
# Judges an embedding model folder (or hub id) as ctxd uses it: indexes the CoSQA and SciFact
# corpora with it and runs `ctxd eval` (dense-only `vector` and the default `routed`, nDCG@10 and
# the rest) on CoSQA dev and SciFact train — BENCHMARKS.md's retrieval-quality evaluation, per model.
#   bash train/evaluate.sh <MODEL> [OUT_DIR]      # CTXD=<binary> (default: the release build, else debug)
#   EVAL_SETS=cosqa bash train/evaluate.sh ...    # one set only
# Prints one table per set and keeps each index under OUT_DIR (default /tmp/ctxd-eval-<name>-<hash of
# the model's path and weights>).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
model="$1"
# Each model its own indexes: the folder is named after the model's path and weights (every
# trained model is saved as `.../best`, so a name alone would reuse another model's vectors).
weights="$model/model.safetensors"
id="$(realpath -m "$model")"
[[ -f "$weights" ]] && id="$id $(stat -c '%s %Y' "$weights")"
out="${2:-/tmp/ctxd-eval-$(basename "$model")-$(printf '%s' "$id" | sha1sum | cut -c1-12)}"
target="${CARGO_TARGET_DIR:-$HOME/.cache/ctxd-target}"
ctxd="${CTXD:-$target/release/ctxd}"
[[ -x "$ctxd" ]] || ctxd="$target/debug/ctxd"
eval_dir="../shared/eval"
mkdir -p "$out"
for set in ${EVAL_SETS:-cosqa scifact}; do
    case "$set" in
        cosqa) queries="$eval_dir/cosqa/queries-dev.jsonl" ;;
        scifact) queries="$eval_dir/scifact/queries-train.jsonl" ;;
        *) echo "evaluate: unknown set $set (cosqa, scifact)" >&2; exit 2 ;;
    esac
    db="$out/$set"
    if [[ ! -f "$out/$set-index.json" ]]; then  # written once the index is whole
        rm -rf "$db"
        start=$(date +%s)
        "$ctxd" index "$eval_dir/$set/corpus" --db "$db" --model "$model" --json >"$out/$set-index.partial"
        mv "$out/$set-index.partial" "$out/$set-index.json"
        echo "evaluate: indexed $set with $model in $(( $(date +%s) - start )) s" >&2
    fi
    echo "== $set ($model)"
    for mode in vector routed; do
        "$ctxd" eval --db "$db" --queries "$queries" --mode "$mode" --model "$model" 2>/dev/null
    done | awk '/^mode / && !header++ || /^(vector|routed) /' 
done
