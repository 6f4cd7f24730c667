#!/usr/bin/env bash
# The embedding path of an AVX2-only CPU (AMD EPYC without AVX512-BF16), on any x86-64 machine:
# oneDNN is capped with ONEDNN_MAX_CPU_ISA=AVX2, then
#   1. the ctxd-models tests run (the bf16 checks skip, saying why, and check the refusal);
#   2. `ctxd index` on examples/demo must log that auto picked f32 because bf16 is not native;
#   3. `ctxd search` must find the right file;
#   4. a forced `--precision bf16` must fail at start-up with the one clear sentence.
# Usage: scripts/avx2-smoke.sh [PATH/TO/ctxd]   (default: the debug build in CARGO_TARGET_DIR)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
cache="${XDG_CACHE_HOME:-$HOME/.cache}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$cache/ctxd-target}"
bin="${1:-$CARGO_TARGET_DIR/debug/ctxd}"
export ONEDNN_MAX_CPU_ISA=AVX2 CTXD_LOG="info,lance=warn,lancedb=warn"
fail() { echo "avx2-smoke: FAILED: $*" >&2; exit 1; }

echo "avx2-smoke: ctxd-models tests with ONEDNN_MAX_CPU_ISA=AVX2" >&2
# The test binaries `cargo test --workspace` built (`cargo test -p ctxd-models` would build the
# package again with other features: minutes for nothing).
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cargo test --workspace --no-run --message-format=json >"$work/artifacts.json" 2>"$work/build.log" \
    || { cat "$work/build.log" >&2; fail "building the test binaries (cargo test --workspace --no-run)"; }
mapfile -t tests < <(python3 -c '
import json, sys
for line in open(sys.argv[1]):
    m = json.loads(line)
    if (m.get("reason") == "compiler-artifact" and m.get("executable") and "ctxd-models@" in m["package_id"]
            and m["profile"]["test"]):
        print(m["executable"])' "$work/artifacts.json")
(( ${#tests[@]} >= 2 )) || fail "the ctxd-models test binaries were not found (cargo test --workspace --no-run)"
for t in "${tests[@]}"; do
    CARGO_MANIFEST_DIR="$PWD/models" "$t" --nocapture || fail "$t with ONEDNN_MAX_CPU_ISA=AVX2"
done

[[ -x "$bin" ]] || fail "$bin is missing (cargo build -p ctxd builds it)"
"$bin" index examples/demo --db "$work/db" --json >"$work/summary.json" 2>"$work/index.log" \
    || { cat "$work/index.log" >&2; fail "ctxd index on the AVX2 path"; }
grep -q "auto picked f32: oneDNN runs avx2 here, capped by ONEDNN_MAX_CPU_ISA=AVX2: the CPU lacks native bf16" \
    "$work/index.log" || { cat "$work/index.log" >&2; fail "the log does not say f32 was picked for lack of bf16"; }
"$bin" search "check a password against its hash" --db "$work/db" --json >"$work/search.json" 2>"$work/search.log" \
    || { cat "$work/search.log" >&2; fail "ctxd search on the AVX2 path"; }
top="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["results"][0]["path"])' "$work/search.json")"
[[ "$top" == "src/auth.rs" ]] || fail "search found $top first, expected src/auth.rs"
if "$bin" index examples/demo --db "$work/db-bf16" --precision bf16 >/dev/null 2>"$work/bf16.log"; then
    fail "a forced --precision bf16 was accepted with ONEDNN_MAX_CPU_ISA=AVX2"
fi
grep -q "precision bf16 cannot run on this CPU" "$work/bf16.log" || { cat "$work/bf16.log" >&2; fail "no clear bf16 refusal"; }
grep -q "status" "$work/bf16.log" && { cat "$work/bf16.log" >&2; fail "a library status code reached the user"; }
echo "avx2-smoke: index, search and the bf16 refusal on the AVX2 path: 3 passed, 0 failed"
