#!/usr/bin/env bash
# Writes copies of candle-core and candle-kernels (the versions in Cargo.lock, from cargo's registry
# sources) into DIR with two changes, and prints the cargo arguments that build against them:
#   * candle-core asks cudarc for `dynamic-loading` instead of `dynamic-linking`: libcuda.so.1,
#     cuBLAS, cuBLASLt, cuRAND and NVRTC are opened when first used (dlopen), not linked at load,
#     so a CUDA build starts on a machine with no NVIDIA driver;
#   * candle-kernels links the CUDA runtime statically (libcudart_static.a, found by the linker on
#     LIBRARY_PATH, which scripts/fetch-cuda.sh sets; it opens the driver at run time itself)
#     instead of libcudart.so.
# The same change is proposed upstream (huggingface/candle#3916, for #3900); drop this script when a
# candle release has it. scripts/build-cuda.sh runs it:
#   mapfile -t args < <(scripts/cuda-patch-candle.sh DIR); cargo build "${args[@]}" ...
# Each edit is checked: a candle whose files no longer match fails here, naming the file.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
[[ $# -eq 1 ]] || { sed -n '2,12s/^# \{0,1\}//p' "$0" >&2; exit 2; }
dir="$1"
cd "$repo"

log() { echo "cuda-patch-candle: $*" >&2; }
locked() { awk -v n="$1" '$0 == "name = \"" n "\"" { getline; gsub(/version = |"/, ""); print; exit }' Cargo.lock; }
# Replaces the line `from` by `to` in `file`, which must hold it exactly once.
edit() {
    local file="$1" from="$2" to="$3" n
    n=$(grep -cxF -- "$from" "$file" || true)
    [[ "$n" == 1 ]] || { log "$file: expected the line '$from' once, found it $n times: candle changed; update this script"; exit 1; }
    FROM="$from" TO="$to" perl -0pi -e 's/^\Q$ENV{FROM}\E$/$ENV{TO}/m' "$file"
}

cargo fetch --quiet
registry="${CARGO_HOME:-$HOME/.cargo}/registry/src"
args=()
for crate in candle-core candle-kernels; do
    version="$(locked "$crate")"
    [[ -n "$version" ]] || { log "$crate is not in Cargo.lock"; exit 1; }
    from="$(find "$registry" -mindepth 2 -maxdepth 2 -type d -name "$crate-$version" | head -1)"
    [[ -d "$from" ]] || { log "no sources of $crate $version under $registry (cargo fetch failed?)"; exit 1; }
    to="$dir/$crate"
    stamp="$to/.ctxd-patched-$version"
    if [[ ! -f "$stamp" ]]; then
        rm -rf "$to.new"
        mkdir -p "$to.new"
        # cp -p keeps the files' times, so cargo's fingerprints survive a rewrite.
        cp -pR "$from/." "$to.new/"
        case "$crate" in
            candle-core)
                edit "$to.new/Cargo.toml" '    "dynamic-linking",' '    "dynamic-loading",' ;;
            candle-kernels)
                edit "$to.new/build.rs" '    println!("cargo:rustc-link-lib=dylib=cudart");' \
                    '    println!("cargo:rustc-link-lib=cudart_static");
    println!("cargo:rustc-link-lib=dylib=dl");
    println!("cargo:rustc-link-lib=dylib=rt");' ;;
        esac
        touch "$to.new/.ctxd-patched-$version"
        rm -rf "$to"
        mv "$to.new" "$to"
        log "$crate $version patched in $to"
    fi
    args+=(--config "patch.crates-io.$crate.path=\"$to\"")
done
printf '%s\n' "${args[@]}"
