#!/usr/bin/env bash
# Runs the ctxd daemon on examples/demo with the default model and an embedded LanceDB index
# in .ctxd/demo-db, listening on 127.0.0.1:7700. Installs what it needs first.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/ctxd-target}"
scripts/setup.sh
exec cargo run -p ctxd -- serve --config configs/demo.toml "$@"
