#!/usr/bin/env bash
# Builds ctxd with candle's CUDA backend (`--features cuda`) against the CUDA 13.0 toolkit that
# scripts/fetch-cuda.sh installs from PyPI wheels: no GPU or driver needed to build.
#   scripts/build-cuda.sh                      # release build
#   CTXD_CUDA_PROFILE=dev scripts/build-cuda.sh  # dev profile (much quicker to build)
#   scripts/build-cuda.sh --bundle DIR         # also copy the binary and its CUDA libraries into DIR
#   scripts/build-cuda.sh --bundle DIR --bundle-libs "cudart nvrtc"   # only these (or "none")
#   scripts/build-cuda.sh -- --locked          # arguments after -- go to cargo build
# A bundle runs on a machine with an NVIDIA driver >= 580 (CUDA 13.0) as
#   LD_LIBRARY_PATH=DIR DIR/ctxd ...
# libcuda never goes in a bundle: it is the driver's. A machine that already has CUDA 13 runtime
# libraries (e.g. PyTorch's cu130 wheels: site-packages/nvidia/cu13/lib) needs only the binary
# (--bundle-libs none) with LD_LIBRARY_PATH pointing there.
# The target dir is CTXD_CUDA_TARGET_DIR (default ~/.cache/ctxd-target-cuda), kept apart from the
# CPU build's. CUDA_COMPUTE_CAP (default 90: H100/H200) picks the GPU the kernels are built for.
set -euo pipefail

usage() {
    awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0" >&2
    exit 2
}

bundle=""
bundle_libs="cudart cublas cublasLt curand nvrtc"
cargo_args=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        --bundle) [[ $# -ge 2 ]] || usage; bundle="$2"; shift 2 ;;
        --bundle=*) bundle="${1#--bundle=}"; shift ;;
        --bundle-libs) [[ $# -ge 2 ]] || usage; bundle_libs="$2"; shift 2 ;;
        --bundle-libs=*) bundle_libs="${1#--bundle-libs=}"; shift ;;
        --) shift; cargo_args=("$@"); break ;;
        -h | --help) usage ;;
        *) echo "build-cuda: unknown argument $1" >&2; usage ;;
    esac
done
[[ "$bundle_libs" == none ]] && bundle_libs=""

start=$(date +%s)
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

env_lines="$("$repo/scripts/fetch-cuda.sh")"
eval "$env_lines"
echo "build-cuda: environment (from scripts/fetch-cuda.sh):" >&2
sed 's/^/  /' <<<"$env_lines" >&2

profile="${CTXD_CUDA_PROFILE:-release}"
case "$profile" in
    dev | debug) profile=dev; out=debug ;;
    *) out="$profile" ;;
esac
export CARGO_TARGET_DIR="${CTXD_CUDA_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/ctxd-target-cuda}"
echo "build-cuda: cargo build --profile $profile -p ctxd --features cuda ${cargo_args[*]}" \
    "(CARGO_TARGET_DIR=$CARGO_TARGET_DIR, CUDA_COMPUTE_CAP=$CUDA_COMPUTE_CAP)" >&2
cargo build --profile "$profile" -p ctxd --features cuda "${cargo_args[@]}"

bin="$CARGO_TARGET_DIR/$out/ctxd"
[[ -x "$bin" ]] || { echo "build-cuda: no binary at $bin" >&2; exit 1; }
size() { du -h --apparent-size "$1" | cut -f1; }
echo "build-cuda: binary $bin ($(size "$bin"))"

# The shared libraries it needs. NEEDED holds only what it calls directly (the linker drops unused
# ones such as nvrtc); ldd adds their own dependencies (libcublas needs libcublasLt), resolved here
# against the toolkit. libcuda.so.1 resolves nowhere on a machine with no driver; the link stub in
# lib/stubs must not be used at run time.
mapfile -t needed < <(readelf -d "$bin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
echo "build-cuda: NEEDED: ${needed[*]}"
echo "build-cuda: ldd:"
ldd "$bin" | sed 's/^/ /' || true
mapfile -t cuda_libs < <(ldd "$bin" | awk -v root="$CUDA_ROOT/lib/" 'index($3, root) == 1 { print $1 }' | sort -u)
echo "build-cuda: CUDA libraries it loads:"
echo "  libcuda.so.1  (the NVIDIA driver's, >= 580 for CUDA 13.0; never bundled)"
for lib in "${cuda_libs[@]}"; do
    echo "  $lib  $CUDA_ROOT/lib/$lib ($(size "$CUDA_ROOT/lib/$lib"))"
done

if [[ -n "$bundle" ]]; then
    mkdir -p "$bundle"
    # The bundled copy is stripped (no debug info or symbol table: backtraces show addresses only);
    # the unstripped binary stays in the target dir.
    strip --strip-all -o "$bundle/ctxd.partial" "$bin"
    mv "$bundle/ctxd.partial" "$bundle/ctxd"
    for lib in "${cuda_libs[@]}"; do
        name="${lib#lib}"
        name="${name%%.so*}"
        if [[ " $bundle_libs " == *" $name "* ]]; then
            cp -L "$CUDA_ROOT/lib/$lib" "$bundle/$lib"
            # nvrtc opens its builtins library at run time (dlopen): it must travel with it.
            if [[ "$name" == nvrtc ]]; then
                cp -L "$CUDA_ROOT"/lib/libnvrtc-builtins.so.13.0 "$bundle/"
            fi
        fi
    done
    echo "build-cuda: bundle $bundle (run: LD_LIBRARY_PATH=$bundle $bundle/ctxd ...):"
    (cd "$bundle" && du -h --apparent-size -- * | sed 's/^/  /')
    total_kib=$(du -sk --apparent-size "$bundle" | cut -f1)
    echo "build-cuda: bundle total $((total_kib / 1024)) MiB"
    if [[ $total_kib -gt $((64 * 1024)) ]]; then
        if [[ " $bundle_libs " == *" cublas"* ]]; then
            echo "build-cuda: note: over 64 MiB (cuBLAS + cuBLASLt alone are ~570 MiB). Where the target" \
                "has CUDA 13 libraries already (PyTorch's cu130 wheels: site-packages/nvidia/cu13/lib)," \
                "--bundle-libs none carries the binary only" >&2
        else
            echo "build-cuda: note: over 64 MiB; the release profile is smaller, and zstd -19 --long=27" \
                "shrinks the binary about 6-fold" >&2
        fi
    fi
fi

elapsed=$(($(date +%s) - start))
printf 'build-cuda: done in %dm%02ds\n' $((elapsed / 60)) $((elapsed % 60))
