#!/usr/bin/env bash
# Runs every test of the workspace (unit tests, the model reference test, the end-to-end
# integration tests with the real model, LanceDB, HTTP and Arrow Flight servers, and the real
# pyarrow / pylance / lancedb Python clients). Installs what it needs first.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
cache="${XDG_CACHE_HOME:-$HOME/.cache}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$cache/ctxd-target}"
scripts/setup.sh
# Python clients the integration tests drive (from PyPI, in a venv of their own).
venv="$cache/ctxd/py-venv"
if ! "$venv/bin/python" -c "import pyarrow.flight, lance, lancedb" >/dev/null 2>&1; then
    echo "test: installing pyarrow, pylance and lancedb into $venv" >&2
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check pyarrow==26.0.1 pylance==14.0.2 lancedb==0.40.0
fi
export CTXD_TEST_PYTHON="$venv/bin/python"
exec cargo test --workspace "$@"
