#!/usr/bin/env bash
# Runs every test of the workspace (unit tests, the model reference test, the end-to-end
# integration tests with the real model, LanceDB and HTTP server). Installs what it needs first.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/ctxd-target}"
scripts/setup.sh
exec cargo test --workspace "$@"
