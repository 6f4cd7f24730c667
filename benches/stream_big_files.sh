#!/usr/bin/env bash
# Streams generated big files through ctxd (load + chunk + commit, embedding off) and prints wall
# time, MB/s and peak RSS: a text log of LOG_MB (default 1024) and a JSONL file of JSONL_MB
# (default 200). Peak memory must not grow with file size (files over 10 MB are streamed).
#   benches/stream_big_files.sh [CTXD_BINARY]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# The release binary, as deployed (a debug build of LanceDB's full-text indexer is ~5x slower).
target="${CARGO_TARGET_DIR:-$HOME/.cache/ctxd-target}"
ctxd="${1:-$target/release/ctxd}"
[[ -n "${1:-}" ]] || CARGO_TARGET_DIR="$target" cargo build -q --release -p ctxd
log_mb="${LOG_MB:-1024}"
jsonl_mb="${JSONL_MB:-200}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
python3 - "$work" "$log_mb" "$jsonl_mb" <<'PY'
import os, random, sys
work, log_mb, jsonl_mb = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
random.seed(7)
words = "error warn info request user id session timeout latency ms ok failed retry backend db query cache".split()
def gen(path, size, jsonl):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        i, buf = 0, []
        while True:
            msg = " ".join(random.choice(words) for _ in range(10))
            if jsonl:
                buf.append('{"ts":"2026-11-22T06:%02d:%02dZ","worker":%d,"msg":"%s","id":%d}\n' % (i % 60, i % 60, i % 17, msg, i))
            else:
                buf.append("2026-11-22T06:%02d:%02dZ worker-%d %s id=%d\n" % (i % 60, i % 60, i % 17, msg, i))
            i += 1
            if len(buf) >= 10000:
                f.write("".join(buf))
                buf = []
                if f.tell() >= size:
                    break
gen(os.path.join(work, "log", "app.log"), log_mb << 20, False)
gen(os.path.join(work, "jsonl", "events.jsonl"), jsonl_mb << 20, True)
PY
printf "%-14s %9s %9s %8s %12s\n" file MB seconds "MB/s" "peak RSS MB"
for kind in log jsonl; do
    dir="$work/$kind"
    bytes=$(du -b "$dir" | cut -f1)
    out=$(CTXD_LOG=warn /usr/bin/time -v "$ctxd" index "$dir" --db "$work/db-$kind" --no-embed 2>&1)
    secs=$(grep -oP 'in \K[0-9.]+(?=s:)' <<<"$out" | head -1)
    rss=$(grep -oP 'Maximum resident set size \(kbytes\): \K[0-9]+' <<<"$out")
    awk -v k="$kind" -v b="$bytes" -v s="$secs" -v r="$rss" \
        'BEGIN { printf "%-14s %9.0f %9.1f %8.2f %12.0f\n", k, b/1048576, s, b/1048576/s, r/1024 }'
done
