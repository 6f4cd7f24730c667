//! What the ctxd-models integration tests share.

/// The package's directory: cargo's run-time `CARGO_MANIFEST_DIR` (right even when a cached test
/// binary built from another checkout of the same sources is reused), else the build-time one.
pub fn manifest_dir() -> std::path::PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into())
}
