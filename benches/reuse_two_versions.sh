#!/usr/bin/env bash
# Embeddings reused vs computed when the indexed source moves between two versions of a real
# code base: hashbrown 0.16.1 → 0.17.1 from ~/.cargo/registry/src (or OLD_DIR / NEW_DIR).
# Indexes the old version, swaps the folder's contents for the new one, indexes again, and
# prints chunks embedded vs reused; then one compaction pass (versions and fragments
# before/after). Uses the release binary (or the one given).
#   benches/reuse_two_versions.sh [CTXD_BINARY]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
target="${CARGO_TARGET_DIR:-$HOME/.cache/ctxd-target}"
ctxd="${1:-$target/release/ctxd}"
[[ -n "${1:-}" ]] || CARGO_TARGET_DIR="$target" cargo build -q --release -p ctxd
reg=$(ls -d "$HOME"/.cargo/registry/src/*/ | head -1)
old="${OLD_DIR:-${reg}hashbrown-0.16.1}"
new="${NEW_DIR:-${reg}hashbrown-0.17.1}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/src"
cp -r "$old/." "$work/src/"
export CTXD_LOG=warn
a=$("$ctxd" index "$work/src" --db "$work/db" --json)
rm -rf "$work/src" && mkdir -p "$work/src" && cp -r "$new/." "$work/src/"
b=$("$ctxd" index "$work/src" --db "$work/db" --json)
python3 - "$a" "$b" "$(basename "$old")" "$(basename "$new")" <<'PY'
import json, sys
a, b = json.loads(sys.argv[1]), json.loads(sys.argv[2])
print(f"{sys.argv[3]}: {a['files_indexed']} files, {a['chunks_written']} chunks, embedded {a['chunks_embedded']}, {a['seconds']:.1f}s")
total = b["chunks_embedded"] + b["chunks_reused"]
print(f"{sys.argv[4]}: {b['files_indexed']} files changed/added, {b['files_unchanged']} unchanged, {b['files_removed']} removed; "
      f"of {total} chunks in changed files: embedded {b['chunks_embedded']}, reused {b['chunks_reused']} "
      f"({100.0 * b['chunks_reused'] / max(total, 1):.1f}% reused), {b['seconds']:.1f}s")
PY
echo "compaction: $("$ctxd" compact --db "$work/db" --retain-secs 0)"
