#!/usr/bin/env bash
# cargo's RUSTC_WORKSPACE_WRAPPER in scripts/test.sh: every workspace crate (libraries, binaries,
# tests) is compiled by clippy-driver with warnings denied — the lints `cargo clippy --workspace
# --all-targets -- -D warnings` runs, in the test build itself, so the dependencies are not
# compiled a second time for a separate check build. Dependencies are compiled by rustc as usual.
# cargo calls it as `clippy-rustc.sh <rustc> <args…>`.
exec clippy-driver "$@" -D warnings
