#!/usr/bin/env bash
# Installs a CUDA 13.0 toolkit (13.0 Update 1: nvcc, headers, cudart, nvrtc, cuBLAS, cuRAND) into
# ctxd's cache from NVIDIA's PyPI wheels, laid out as a normal toolkit (bin/nvcc, include/, lib/ with
# lib64 -> lib, nvvm/), so that `cargo build -p ctxd --features cuda` (candle's CUDA backend: cudarc
# links cuda/cublas/cublasLt/curand/nvrtc, candle-kernels compiles its .cu files with nvcc) builds
# on a machine with no GPU and no driver. No wheel ships libcuda, so lib/stubs/libcuda.so is a
# link-time stub made here from cuda.h (SONAME libcuda.so.1; the driver's library is used at run
# time -- never put lib/stubs on LD_LIBRARY_PATH).
#
# Idempotent: downloads and unpacks only when the pinned wheels changed; then checks nvcc (version,
# host compiler, an sm_90 PTX and object build) and prints the environment to build with on stdout:
#   eval "$(scripts/fetch-cuda.sh)"
# Honours CTXD_CUDA_DIR (default ~/.cache/ctxd/cuda), CUDA_COMPUTE_CAP (default 90 = H100/H200) and
# NVCC_CCBIN (host compiler for nvcc; default: gcc on PATH). Linux x86-64 only.
set -euo pipefail

cuda_release="13.0.1"
# The component versions of CUDA 13.0 Update 1 (cuBLAS and cuRAND number their own releases).
wheels=(
    nvidia-cuda-nvcc==13.0.88
    nvidia-cuda-crt==13.0.88
    nvidia-nvvm==13.0.88
    nvidia-cuda-runtime==13.0.88
    nvidia-cuda-nvrtc==13.0.88
    nvidia-cuda-cccl==13.0.85
    nvidia-cublas==13.0.2.14
    nvidia-curand==10.4.0.35
)
cuda_dir="${CTXD_CUDA_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/ctxd/cuda}"
compute_cap="${CUDA_COMPUTE_CAP:-90}"
stamp="$cuda_dir/.ctxd-cuda-wheels"
want="$(printf '%s\n' "$cuda_release" "${wheels[@]}")"

log() { echo "fetch-cuda: $*" >&2; }

if [[ "$(uname -s)-$(uname -m)" != "Linux-x86_64" ]]; then
    log "the CUDA wheels used here exist for Linux x86-64 only, not $(uname -s)-$(uname -m)"
    exit 1
fi

install_toolkit() {
    local python tmp
    python="$(command -v python3 || command -v python || true)"
    if [[ -z "$python" ]]; then
        log "python3 with pip is needed to download the CUDA wheels"
        exit 1
    fi
    if ! command -v gcc >/dev/null; then
        log "gcc is needed (nvcc's host compiler, and to build the libcuda link stub)"
        exit 1
    fi
    mkdir -p "$(dirname "$cuda_dir")"
    tmp="$(mktemp -d "$(dirname "$cuda_dir")/.fetch-cuda.XXXXXX")"
    # shellcheck disable=SC2064
    trap "rm -rf '$tmp'" EXIT
    log "downloading CUDA $cuda_release wheels from PyPI (about 700 MB): ${wheels[*]}"
    "$python" -m pip download --quiet --no-deps --only-binary=:all: --dest "$tmp/wheels" "${wheels[@]}"

    local root="$tmp/cuda"
    log "unpacking into $cuda_dir"
    # Every wheel holds nvidia/cu13/{bin,include,lib,nvvm}: merge them into one toolkit root, keeping
    # the executable bits. Skipped: the .alt builds of nvrtc (unused), NVBLAS, NVIDIA's scan metadata.
    "$python" - "$root" "$tmp"/wheels/*.whl <<'PY'
import os, sys, zipfile
root, wheels = sys.argv[1], sys.argv[2:]
prefix = "nvidia/cu13/"
for wheel in wheels:
    with zipfile.ZipFile(wheel) as z:
        for info in z.infolist():
            name = info.filename
            if not name.startswith(prefix) or name.endswith("/"):
                continue
            rel = name[len(prefix):]
            base = os.path.basename(rel)
            if rel.startswith(".metadata/") or ".alt.so" in base or base.startswith("libnvblas"):
                continue
            target = os.path.join(root, rel)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with z.open(info) as src, open(target, "wb") as dst:
                while chunk := src.read(1 << 20):
                    dst.write(chunk)
            mode = (info.external_attr >> 16) & 0o777
            os.chmod(target, 0o755 if mode & 0o111 else 0o644)
PY

    # The unversioned names the linker looks for (-lcudart -lcublas ...), and lib64 where nvcc.profile,
    # cudarc and cudaforge look.
    (
        cd "$root/lib"
        for lib in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libcurand.so.10 libnvrtc.so.13 \
            libnvrtc-builtins.so.13.0 libnvvm.so.4; do
            [[ -f "$lib" ]] || { log "missing $lib in the wheels"; exit 1; }
            ln -sfn "$lib" "${lib%%.so*}.so"
        done
    )
    ln -sfn lib "$root/lib64"
    mkdir -p "$root/nvvm/lib64" "$root/nvvm/include"
    ln -sfn ../../lib/libnvvm.so.4 "$root/nvvm/lib64/libnvvm.so.4"
    ln -sfn libnvvm.so.4 "$root/nvvm/lib64/libnvvm.so"
    [[ -f "$root/include/nvvm.h" ]] && ln -sfn ../../include/nvvm.h "$root/nvvm/include/nvvm.h"

    # libcuda link stub: every driver API entry point that cuda.h declares, under both its versioned
    # name (cuMemAlloc_v2, what cudarc's bindings call) and its legacy one. Never called: at run time
    # the loader finds the driver's libcuda.so.1 instead.
    mkdir -p "$root/lib/stubs"
    # (A failing preprocessor or an empty match is caught by the count below, with a message.)
    {
        gcc -E -P -x c -I "$root/include" "$root/include/cuda.h" || true
        gcc -E -P -x c -D__CUDA_API_VERSION_INTERNAL -I "$root/include" "$root/include/cuda.h" || true
        # cudaProfiler.h (not in these wheels) declares three more that libcuda exports.
        printf '%s(\n' cuProfilerInitialize cuProfilerStart cuProfilerStop
    } | { grep -oE '\bcu[A-Z][A-Za-z0-9_]*[[:space:]]*\(' || true; } | tr -d '( \t' | sort -u \
        | awk '{ printf "int %s(void) { return 34; /* CUDA_ERROR_STUB_LIBRARY */ }\n", $1 }' >"$tmp/libcuda_stub.c"
    if [[ "$(wc -l <"$tmp/libcuda_stub.c")" -lt 300 ]]; then
        log "found too few driver API functions in cuda.h for the libcuda stub"
        exit 1
    fi
    gcc -shared -fPIC -w -Wl,-soname,libcuda.so.1 -o "$root/lib/stubs/libcuda.so" "$tmp/libcuda_stub.c"

    printf '%s\n' "$want" >"$root/.ctxd-cuda-wheels"
    rm -rf "$cuda_dir"
    mv "$root" "$cuda_dir"
    rm -rf "$tmp"
    trap - EXIT
    log "installed CUDA $cuda_release in $cuda_dir ($(du -sh "$cuda_dir" | cut -f1))"
}

if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
    install_toolkit
fi

# Checks: nvcc runs and is 13.0, the host compiler is accepted, and a kernel builds to PTX for sm_90
# (what candle-kernels does for its PTX) and to an sm_90 object (what it does for libmoe.a).
nvcc="$cuda_dir/bin/nvcc"
version="$("$nvcc" --version)" || { log "$nvcc --version failed"; exit 1; }
release="$(sed -n 's/.*release \([0-9]*\.[0-9]*\),.*/\1/p' <<<"$version")"
if [[ "$release" != "13.0" ]]; then
    log "expected nvcc release 13.0, got: $version"
    exit 1
fi
ccbin="${NVCC_CCBIN:-$(command -v gcc || true)}"
[[ -n "$ccbin" ]] || { log "no host compiler (gcc) for nvcc"; exit 1; }
smoke="$(mktemp -d)"
# shellcheck disable=SC2064
trap "rm -rf '$smoke'" EXIT
cat >"$smoke/smoke.cu" <<'CU'
#include <cuda_fp16.h>
#include <cuda_bf16.h>
extern "C" __global__ void axpy_half(int n, float a, const __half *x, __half *y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = __float2half(a * __half2float(x[i]) + __half2float(y[i]));
}
CU
ccflags=()
[[ -n "${NVCC_CCBIN:-}" ]] && ccflags=(-ccbin "$NVCC_CCBIN")
if ! "$nvcc" "${ccflags[@]}" -std=c++17 -arch=compute_90 --ptx -o "$smoke/smoke.ptx" "$smoke/smoke.cu" >&2 \
    || ! "$nvcc" "${ccflags[@]}" -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Xcompiler -fPIC -c \
        -o "$smoke/smoke.o" "$smoke/smoke.cu" >&2; then
    log "nvcc could not build a test kernel with host compiler $ccbin ($("$ccbin" -dumpfullversion 2>/dev/null || echo '?'))"
    exit 1
fi
ptx_isa="$(sed -n 's/^\.version //p' "$smoke/smoke.ptx" | head -n 1)"
grep -q '^\.target sm_90' "$smoke/smoke.ptx" || { log "the test PTX does not target sm_90"; exit 1; }
log "nvcc $(sed -n 's/.*, \(V[0-9.]*\)$/\1/p' <<<"$version") OK with host compiler $ccbin $("$ccbin" -dumpfullversion 2>/dev/null || true); sm_90 PTX (ISA $ptx_isa) and object built"

q() { printf '%q' "$1"; }
cat <<EOF
export CUDA_ROOT=$(q "$cuda_dir")
export CUDA_PATH=$(q "$cuda_dir")
export CUDA_HOME=$(q "$cuda_dir")
export CUDA_TOOLKIT_ROOT_DIR=$(q "$cuda_dir")
export NVCC=$(q "$nvcc")
export CUDARC_CUDA_VERSION=13000
export CUDA_COMPUTE_CAP=$(q "$compute_cap")
export PATH=$(q "$cuda_dir/bin"):"\$PATH"
export LIBRARY_PATH=$(q "$cuda_dir/lib"):$(q "$cuda_dir/lib/stubs")\${LIBRARY_PATH:+:\$LIBRARY_PATH}
export LD_LIBRARY_PATH=$(q "$cuda_dir/lib")\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}
EOF
