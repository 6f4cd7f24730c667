#!/usr/bin/env bash
# Everything a fresh machine needs before building ctxd: a C toolchain and protoc (LanceDB's
# build), the Rust toolchain check, and the default embedding model. Idempotent.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

need_apt=()
command -v protoc >/dev/null 2>&1 || need_apt+=(protobuf-compiler)
command -v cc >/dev/null 2>&1 || need_apt+=(build-essential)
if (( ${#need_apt[@]} )); then
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "setup: please install: ${need_apt[*]} (protoc is needed to build LanceDB)" >&2
        exit 1
    fi
    sudo=""
    [[ "$(id -u)" == 0 ]] || sudo="sudo"
    echo "setup: installing ${need_apt[*]}" >&2
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi
if ! command -v cargo >/dev/null 2>&1; then
    echo "setup: cargo not found: install Rust (https://rustup.rs) first" >&2
    exit 1
fi
"$here/fetch-model.sh"
"$here/fetch-onednn.sh"
