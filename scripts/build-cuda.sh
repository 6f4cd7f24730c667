#!/usr/bin/env bash
# Builds ctxd with candle's CUDA backend (`--features cuda`) against the CUDA 13.0 toolkit that
# scripts/fetch-cuda.sh installs from PyPI wheels: no GPU or driver needed to build.
#   scripts/build-cuda.sh                      # release build of ctxd
#   CTXD_CUDA_PROFILE=dev scripts/build-cuda.sh  # dev profile (much quicker to build)
#   scripts/build-cuda.sh --forward            # ctxd-forward alone (the embedding path, profile gpu-check):
#                                              # the small build a GPU check carries (scripts/gpu-bundle.sh)
#   scripts/build-cuda.sh --bundle DIR         # also copy the binary and its CUDA libraries into DIR
#   scripts/build-cuda.sh --bundle DIR --bundle-libs "curand nvrtc"   # only these (or "none")
#   scripts/build-cuda.sh -- --locked          # arguments after -- go to cargo build
# The binary links no CUDA library: candle 0.11 asks cudarc for `dynamic-linking` (libcuda.so.1,
# cuBLAS, cuRAND NEEDED at load, so it would not start without the driver) and candle-kernels links
# libcudart.so; this script builds against copies of those two crates (scripts/cuda-patch-candle.sh)
# in which cudarc opens the libraries at run time (`dynamic-loading`) and the CUDA runtime is linked
# statically, so the same binary starts on a machine with no driver and says why it runs on the cpu.
# It builds from a copy of the working tree in the target dir (the patch rewrites Cargo.lock there,
# not in the checkout). On a GPU machine (NVIDIA driver >= 580 for CUDA 13.0) it runs as
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
forward=0
bundle_libs="cublas cublasLt curand nvrtc"
cargo_args=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        --bundle) [[ $# -ge 2 ]] || usage; bundle="$2"; shift 2 ;;
        --bundle=*) bundle="${1#--bundle=}"; shift ;;
        --bundle-libs) [[ $# -ge 2 ]] || usage; bundle_libs="$2"; shift 2 ;;
        --bundle-libs=*) bundle_libs="${1#--bundle-libs=}"; shift ;;
        --forward) forward=1; shift ;;
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

if [[ $forward == 1 ]]; then
    profile="${CTXD_CUDA_PROFILE:-gpu-check}" what=(-p ctxd-models --bin ctxd-forward) name=ctxd-forward
else
    profile="${CTXD_CUDA_PROFILE:-release}" what=(-p ctxd) name=ctxd
fi
case "$profile" in
    dev | debug) profile=dev; out=debug ;;
    *) out="$profile" ;;
esac
export CARGO_TARGET_DIR="${CTXD_CUDA_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/ctxd-target-cuda}"
# The copy of the tree, kept in step: a file is written only where its bytes changed (so its time
# is new and cargo rebuilds what uses it, and nothing else), and files gone from the tree go.
# The patched candle crates sit beside it.
src="$CARGO_TARGET_DIR/worktree"
git ls-files -z --cached --others --exclude-standard | python3 -c '
import os, shutil, sys
src = sys.argv[1]
files = [f for f in sys.stdin.buffer.read().decode().split("\0") if f and os.path.isfile(f)]
keep = set(files)
for f in files:
    dst = os.path.join(src, f)
    if os.path.isfile(dst) and open(f, "rb").read() == open(dst, "rb").read():
        continue
    os.makedirs(os.path.dirname(dst) or ".", exist_ok=True)
    shutil.copyfile(f, dst)
    shutil.copymode(f, dst)
for root, _, names in os.walk(src):
    for n in names:
        rel = os.path.relpath(os.path.join(root, n), src)
        if rel not in keep and rel != "Cargo.lock":
            os.remove(os.path.join(root, n))
' "$src"
mapfile -t patch_args < <(scripts/cuda-patch-candle.sh "$CARGO_TARGET_DIR/patched")
cd "$src"
echo "build-cuda: cargo build --profile $profile ${what[*]} --features cuda ${patch_args[*]} ${cargo_args[*]}" \
    "(in $src, CARGO_TARGET_DIR=$CARGO_TARGET_DIR, CUDA_COMPUTE_CAP=$CUDA_COMPUTE_CAP)" >&2
cargo build --profile "$profile" "${what[@]}" --features cuda "${patch_args[@]}" "${cargo_args[@]}"
cd "$repo"

bin="$CARGO_TARGET_DIR/$out/$name"
[[ -x "$bin" ]] || { echo "build-cuda: no binary at $bin" >&2; exit 1; }
size() { du -h --apparent-size "$1" | cut -f1; }
echo "build-cuda: binary $bin ($(size "$bin"))"

# NEEDED must name no CUDA library: they are opened at run time (cudarc's dynamic loading:
# libcuda.so.1, then cuBLAS, cuBLASLt, cuRAND and NVRTC by their CUDA 13 names where asked for).
mapfile -t needed < <(readelf -d "$bin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
echo "build-cuda: NEEDED: ${needed[*]}"
if printf '%s\n' "${needed[@]}" | grep -Eq '^lib(cuda|cudart|cublas|cublasLt|curand|nvrtc)\.so'; then
    echo "build-cuda: the binary links a CUDA library at load: the candle patch did not take" >&2
    exit 1
fi
cuda_libs=(libcublas.so.13 libcublasLt.so.13 libcurand.so.10 libnvrtc.so.13)
echo "build-cuda: CUDA libraries it opens at run time:"
echo "  libcuda.so.1  (the NVIDIA driver's, >= 580 for CUDA 13.0; never bundled)"
for lib in "${cuda_libs[@]}"; do
    echo "  $lib  $CUDA_ROOT/lib/$lib ($(size "$CUDA_ROOT/lib/$lib"))"
done

if [[ -n "$bundle" ]]; then
    mkdir -p "$bundle"
    # The bundled copy is stripped (no debug info or symbol table: backtraces show addresses only);
    # the unstripped binary stays in the target dir.
    strip --strip-all -o "$bundle/$name.partial" "$bin"
    mv "$bundle/$name.partial" "$bundle/$name"
    for lib in "${cuda_libs[@]}"; do
        lib_name="${lib#lib}"
        lib_name="${lib_name%%.so*}"
        if [[ " $bundle_libs " == *" $lib_name "* ]]; then
            cp -L "$CUDA_ROOT/lib/$lib" "$bundle/$lib"
            # nvrtc opens its builtins library at run time (dlopen): it must travel with it.
            if [[ "$lib_name" == nvrtc ]]; then
                cp -L "$CUDA_ROOT"/lib/libnvrtc-builtins.so.13.0 "$bundle/"
            fi
        fi
    done
    echo "build-cuda: bundle $bundle (run: LD_LIBRARY_PATH=$bundle $bundle/$name ...):"
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
