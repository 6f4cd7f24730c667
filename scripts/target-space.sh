#!/usr/bin/env bash
# Keeps the build's target directory from filling its disk before scripts/test.sh builds.
#
# Cargo never deletes what it built: every change to a crate or to the dependency set leaves the
# old artifacts beside the new ones, so a target directory kept warm between runs (CI keeps one in
# ~/.cache/ctxd-target) grows run after run until the disk fills. A full disk does not say so: the
# linker, writing a test binary through a memory map, dies with "ld terminated with signal 7 [Bus
# error]". So before a build this script:
#   1. removes the incremental-compilation caches (`*/incremental`: ctxd's own crates only, rebuilt
#      in seconds) when the target directory is over CTXD_TARGET_MAX_GIB or the disk holding it has
#      less than CTXD_TARGET_MIN_FREE_GIB free;
#   2. if that is still not enough, removes the target directory whole (the next build is cold:
#      11–30 minutes of the debug build on 2 cores, BENCHMARKS.md#build-times-and-the-package);
#   3. if the disk is still short of CTXD_TARGET_MIN_FREE_GIB, says so — with what the link failure
#      will look like — and goes on (the build may still fit).
# Usage: scripts/target-space.sh TARGET_DIR
set -euo pipefail
target="${1:?usage: scripts/target-space.sh TARGET_DIR}"
# A cold debug build of the workspace's tests is ~9 GiB, and the tests write their indexes, models'
# copies and browser profiles to the temporary directory (BENCHMARKS.md#build-times-and-the-package).
min_free_gib="${CTXD_TARGET_MIN_FREE_GIB:-20}"
max_gib="${CTXD_TARGET_MAX_GIB:-40}"

gib() { echo $(( $1 / 1024 / 1024 )); }
# Measures, into `free` and `size`: the KiB free on the disk that holds the target directory (or
# would hold it), and the KiB the directory holds (du's total even where it could not read
# everything: a file vanishing under a build running beside this one). `short` says whether
# the last measure is over a bound.
measure() {
    local at="$target" kib=""
    while [[ ! -e "$at" ]]; do at="$(dirname "$at")"; done
    free="$(df -Pk "$at" | awk 'NR == 2 { print $4 }')"
    [[ -d "$target" ]] && kib="$(du -sk "$target" 2>/dev/null | awk 'NR == 1 { print $1 }')" || true
    size="${kib:-0}"
}
short() { (( free < min_free_gib * 1024 * 1024 || size > max_gib * 1024 * 1024 )); }

[[ -d "$target" ]] || exit 0
measure
if short; then
    echo "target-space: $target is $(gib "$size") GiB with $(gib "$free") GiB free on its disk (wanted: at most ${max_gib} GiB, at least ${min_free_gib} GiB free): removing its incremental caches" >&2
    find "$target" -maxdepth 3 -type d -name incremental -prune -exec rm -rf {} +
    measure
fi
if short; then
    echo "target-space: still $(gib "$size") GiB with $(gib "$free") GiB free: removing $target whole (the next build is cold)" >&2
    rm -rf "$target"
    measure
fi
if (( free < min_free_gib * 1024 * 1024 )); then
    echo "target-space: only $(gib "$free") GiB free on the disk of $target (a cold build and the tests want about ${min_free_gib} GiB); if a link fails with 'ld terminated with signal 7 [Bus error]', that is the disk filling: free space there or set CARGO_TARGET_DIR to a larger disk" >&2
fi
