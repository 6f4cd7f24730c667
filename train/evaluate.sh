#!/usr/bin/env bash
# Judges an embedding model folder (or hub id) as ctxd uses it: indexes the CoSQA and SciFact
# corpora with it and runs `ctxd eval` (dense-only `vector` and the default `routed`, nDCG@10 and
# the rest) on CoSQA dev and SciFact train — BENCHMARKS.md's retrieval-quality evaluation, per model.
#   bash train/evaluate.sh <MODEL> [OUT_DIR]      # CTXD=<binary> (default: the release build, else debug)
#   EVAL_SETS=cosqa bash train/evaluate.sh ...    # one set only
#   EVAL_SETS=localization bash train/evaluate.sh ...  # the 45 localization dev issues: `ctxd locate`
#       and the model alone (`ctxd search --mode vector`), each base commit indexed with the model
#       (benches/localization.py --model; the indexes under OUT_DIR/loc; ~20-40 min on 2 cores;
#       LOC_ARGS="--repo marshmallow-code/marshmallow" for a two-issue trial, any of its flags)
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
    if [[ "$set" == localization ]]; then
        echo "== localization dev ($model)"
        first_table='/^\| run \| n /&&!done{on=1} on&&/^$/{on=0;done=1} on'
        python3 benches/localization.py --ctxd "$ctxd" --model "$model" --work "$out/loc" ${LOC_ARGS:-} \
            --json "$out/locate.json" | awk "$first_table" | sed 's/^| full /| locate /'
        python3 benches/localization.py --ctxd "$ctxd" --model "$model" --work "$out/loc" ${LOC_ARGS:-} --mode search \
            --search-mode vector --reuse --json "$out/dense.json" | awk "$first_table" | sed 's/^| full /| vector /'
        continue
    fi
    case "$set" in
        cosqa) queries="$eval_dir/cosqa/queries-dev.jsonl" ;;
        scifact) queries="$eval_dir/scifact/queries-train.jsonl" ;;
        *) echo "evaluate: unknown set $set (cosqa, scifact, localization)" >&2; exit 2 ;;
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
