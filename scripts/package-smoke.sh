#!/usr/bin/env bash
# Runs a ctxd package the way a new user's machine would: unpacked into a chroot that holds
# nothing but Debian 11's C runtime (glibc 2.31, libgcc-s1, libstdc++6 of GCC 10; no Rust, no
# Python, no git), with no network (its own network namespace), an empty environment (`env -i`)
# and an empty HOME. Indexes examples/demo, searches it, checks that oneDNN came from the
# package's lib/ (its OpenMP runtime too), answers an MCP `initialize` + `tools/call`, and runs
# install.sh (checksum verified) into a prefix inside the chroot.
#   scripts/package-smoke.sh [TARBALL]     (default: the newest dist/ctxd-*-x86_64-linux.tar.gz)
# Needs root for the chroot; without it, the same checks run on this system with `env -i` and
# an empty HOME (and say so). The three .deb files are downloaded once into
# ~/.cache/ctxd/dist-inputs.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

tarball="${1:-$(ls -t dist/ctxd-*-x86_64-linux.tar.gz 2>/dev/null | head -n 1 || true)}"
[[ -f "$tarball" ]] || { echo "package-smoke: no package (scripts/package.sh makes one)" >&2; exit 1; }
tarball="$(cd "$(dirname "$tarball")" && pwd)/$(basename "$tarball")"
name="$(basename "$tarball" .tar.gz)"
inputs="${CTXD_DIST_INPUTS:-$HOME/.cache/ctxd/dist-inputs}"
mkdir -p "$inputs"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

chroot_ok=0
if [[ "$(id -u)" == 0 ]] && unshare -mn true 2>/dev/null; then
    chroot_ok=1
fi
root="$work/root"
mkdir -p "$root"
if ((chroot_ok)); then
    debs=(
        "glibc/libc6_2.31-13+deb11u11_amd64.deb"
        "gcc-10/libgcc-s1_10.2.1-6_amd64.deb"
        "gcc-10/libstdc++6_10.2.1-6_amd64.deb"
    )
    for d in "${debs[@]}"; do
        f="$inputs/$(basename "$d")"
        if [[ ! -f "$f" ]]; then
            curl -fsSL --retry 3 -o "$f.partial" "https://deb.debian.org/debian/pool/main/g/$d"
            mv "$f.partial" "$f"
        fi
        (cd "$work" && rm -f data.tar.* && ar x "$f" && tar -xf data.tar.* -C "$root")
    done
    mkdir -p "$root/proc" "$root/dev" "$root/tmp" "$root/home/empty" "$root/opt"
    chmod 1777 "$root/tmp"
    mknod -m 666 "$root/dev/null" c 1 3
    mknod -m 666 "$root/dev/urandom" c 1 9
    echo "package-smoke: chroot with Debian 11's glibc $(ls "$root"/lib/x86_64-linux-gnu/libc-*.so | sed 's/.*libc-\(.*\)\.so/\1/'), no network, env -i, empty HOME"
else
    mkdir -p "$root/home/empty" "$root/opt"
    echo "package-smoke: chroot skipped (needs root and unshare); env -i with an empty HOME on this system"
fi
tar -xzf "$tarball" -C "$root/opt"
cp "$tarball" "$tarball.sha256" "$root/opt/"
mkdir -p "$root/work"
cp -R examples/demo "$root/work/demo"

# Runs a command in the chroot (paths inside it) or, without one, with the root as prefix.
run() {
    if ((chroot_ok)); then
        env -i HOME=/home/empty /usr/bin/unshare -mn /bin/sh -c \
            'mount -t proc proc "$0/proc" && exec /usr/sbin/chroot "$0" "$@"' "$root" "$@"
    else
        local args=() a
        for a in "$@"; do [[ "$a" == /* ]] && args+=("$root$a") || args+=("$a"); done
        env -i HOME="$root/home/empty" PATH=/usr/bin:/bin "${args[@]}"
    fi
}
exe="/opt/$name/bin/ctxd"
fail() { echo "package-smoke: FAILED: $*" >&2; exit 1; }

run "$exe" --version | grep -q '^ctxd ' || fail "ctxd --version"
run "$exe" index /work/demo --db /work/db >"$work/index.out" 2>"$work/index.err" ||
    fail "index: $(tail -n 5 "$work/index.err")"
grep -q "lib/libdnnl.so.3" "$work/index.err" || fail "oneDNN not loaded from the package: $(cat "$work/index.err")"
grep -o 'indexed .*' "$work/index.out" | head -n 1
run "$exe" search "check whether a password matches the stored hash" --db /work/db --json >"$work/search.json" 2>"$work/search.err" ||
    fail "search"
python_free_first="$(grep -o '"path": *"[^"]*"' "$work/search.json" | head -n 1)"
[[ "$python_free_first" == *'src/auth.rs"' ]] || fail "search's first result: $python_free_first"
# The README's first command serves the package's own example: its config reaches its folder.
run "$exe" config validate "/opt/$name/configs/demo.toml" >/dev/null 2>"$work/demo.err" ||
    fail "configs/demo.toml in the package: $(cat "$work/demo.err")"
run "$exe" ls-files --config "/opt/$name/configs/demo.toml" 2>/dev/null | grep -q '^src/auth.rs$' ||
    fail "the package's configs/demo.toml does not reach its examples/demo"
printf '%s\n' \
    '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"smoke","version":"1"}}}' \
    '{"jsonrpc":"2.0","method":"notifications/initialized"}' \
    '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"search","arguments":{"query":"password hash","k":3}}}' |
    run "$exe" mcp --db /work/db >"$work/mcp.out" 2>"$work/mcp.err" || fail "mcp: $(tail -n 5 "$work/mcp.err")"
grep -q '"id":1,.*"serverInfo"' "$work/mcp.out" || fail "MCP initialize: $(head -c 400 "$work/mcp.out")"
grep -q '"id":2,.*src/auth.rs' "$work/mcp.out" || fail "MCP tools/call search: $(tail -c 400 "$work/mcp.out")"
if ((chroot_ok)); then
    # install.sh is POSIX sh; Debian 11's C runtime has no shell, so it runs on this system's
    # shell against the chroot's folders and the installed binary runs in the chroot.
    env -i HOME="$root/home/empty" PATH=/usr/bin:/bin sh "$root/opt/$name/install.sh" \
        --prefix "$root/home/empty/.local" "$root/opt/$name.tar.gz" >/dev/null || fail "install.sh"
    run "/home/empty/.local/share/ctxd/$name/bin/ctxd" --version >/dev/null || fail "the installed ctxd"
else
    run /bin/sh "/opt/$name/install.sh" --prefix /home/empty/.local "/opt/$name.tar.gz" >/dev/null || fail "install.sh"
    run /home/empty/.local/bin/ctxd --version >/dev/null || fail "the installed ctxd"
fi
printf 'x' >>"$root/opt/$name.tar.gz"
if env -i PATH=/usr/bin:/bin sh "$root/opt/$name/install.sh" --prefix "$work/other" "$root/opt/$name.tar.gz" \
    >/dev/null 2>&1; then
    fail "install.sh installed a tarball whose checksum does not match"
fi
[[ -z "$(ls -A "$root/home/empty" | grep -v '^\.local$' || true)" ]] || fail "something was written under HOME"
echo "package-smoke: ok ($name: index, search, MCP initialize + tools/call, install.sh with checksum)"
