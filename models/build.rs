//! With the `cuda` feature, compiles the encoder's fused kernels (`src/encoder_kernels.cu`) to
//! PTX for `CUDA_COMPUTE_CAP` (default 90: H100/H200) with `$NVCC` (default `nvcc` on the PATH;
//! `scripts/fetch-cuda.sh` provides one); `src/encoder_kernels.rs` embeds the PTX and the
//! driver loads it at first use. Without the feature it does nothing.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=src/encoder_kernels.cu");
    println!("cargo:rerun-if-env-changed=NVCC");
    println!("cargo:rerun-if-env-changed=CUDA_COMPUTE_CAP");
    if std::env::var_os("CARGO_FEATURE_CUDA").is_none() {
        return;
    }
    let nvcc = std::env::var("NVCC").unwrap_or_else(|_| "nvcc".into());
    let cap = std::env::var("CUDA_COMPUTE_CAP").unwrap_or_else(|_| "90".into());
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("encoder_kernels.ptx");
    let status = Command::new(&nvcc)
        .args(["--ptx", "-O3", "-std=c++17", &format!("-arch=sm_{cap}"), "src/encoder_kernels.cu", "-o"])
        .arg(&out)
        .status();
    match status {
        Ok(s) if s.success() => {}
        Ok(s) => panic!("{nvcc} failed ({s}) compiling src/encoder_kernels.cu for sm_{cap}"),
        Err(e) => panic!(
            "cannot run {nvcc} ({e}): the cuda feature needs the CUDA toolkit; scripts/build-cuda.sh \
             sets NVCC (scripts/fetch-cuda.sh)"
        ),
    }
}
