#!/usr/bin/env bash
# Two refs of one git source: what the second costs against the first.
#
#   benches/git_refs.sh CTXD REPO REF_A REF_B [INCLUDE_GLOB]
#
# REPO is a clone or a bare repository (e.g. the search tool's `fetch` of tobymao/sqlglot under
# /work/.mirror/tobymao+sqlglot/repo); INCLUDE_GLOB narrows the files (default "**/*.py").
# 1. `ctxd index --config` with refs = [REF_A]: wall time, chunks embedded, database size;
# 2. the same database with refs = [REF_A, REF_B]: the second ref's wall time, chunks embedded
#    and reused, and the database size after it (compacted both times, so sizes compare): the
#    rows' data files (`chunks.lance/data`: text, vectors, metadata) and the whole directory
#    (with the full-text, vector and B-tree indexes, whose later segments maintenance merges).
# KEEP_WORK=1 keeps the work directory (its path goes to stderr).
# Prints one table; the files shared by the two refs (same path, same blob) are counted with git.
set -euo pipefail
ctxd=$(realpath "$1"); repo=$(realpath "$2"); a=$3; b=$4; include=${5:-"**/*.py"}
work=$(mktemp -d)
[[ -n "${KEEP_WORK:-}" ]] && echo "work: $work" >&2 || trap 'rm -rf "$work"' EXIT
config() {
    cat >"$work/ctxd.toml" <<EOF
[[source]]
name = "repo"
git = "$repo"
refs = [$1]
include = ["$include"]
mirror_dir = "$work/mirror"

[index]
db = "$work/db"
EOF
}
size() { du -sb "$work/db/chunks.lance/data" | cut -f1; }
total() { du -sb "$work/db" | cut -f1; }
run() {
    local t0 t1
    t0=$(date +%s.%N)
    "$ctxd" index --config "$work/ctxd.toml" --json 2>"$work/log" >"$work/out" || { cat "$work/log" >&2; exit 1; }
    t1=$(date +%s.%N)
    # Twice: a pass's compaction writes a version whose superseded files the next pass removes.
    "$ctxd" compact --db "$work/db" --retain-secs 0 >/dev/null 2>&1 || true
    "$ctxd" compact --db "$work/db" --retain-secs 0 >/dev/null 2>&1 || true
    python3 - "$work/out" "$t0" "$t1" "$(size)" "$(total)" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
print(f'{float(sys.argv[3]) - float(sys.argv[2]):.1f} {s["files_indexed"]} {s["chunks_embedded"]} {s["chunks_reused"]} {s.get("index_rows", 0)} {sys.argv[4]} {sys.argv[5]}')
EOF
}
files_a=$(git -C "$repo" ls-tree -r "$a" | wc -l)
shared=$(comm -12 <(git -C "$repo" ls-tree -r "$a" | sort) <(git -C "$repo" ls-tree -r "$b" | sort) | wc -l)
config "\"$a\""
read -r t1 f1 e1 r1 rows1 s1 d1 < <(run)
config "\"$a\", \"$b\""
read -r t2 f2 e2 r2 rows2 s2 d2 < <(run)
echo "| run | wall s | files indexed | chunks embedded | chunks reused | rows | row data bytes | database bytes |"
echo "|---|---|---|---|---|---|---|---|"
echo "| first ref ($a) | $t1 | $f1 | $e1 | $r1 | $rows1 | $s1 | $d1 |"
echo "| + second ref ($b) | $t2 | $f2 | $e2 | $r2 | $rows2 | $s2 | $d2 |"
python3 -c "print(f'second ref: {float($t2)/float($t1):.2f}x the first ref\'s time, rows {int($rows2)/int($rows1):.2f}x, row data {int($s2)/int($s1):.2f}x, whole database {int($d2)/int($d1):.2f}x one ref; files of $a: $files_a, the same blob at the same path in $b: $shared')"
