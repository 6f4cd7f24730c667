#!/bin/sh
# Installs a ctxd package under ~/.local (or --prefix DIR): the package folder goes to
# <prefix>/share/ctxd/<package>/ and <prefix>/bin/ctxd links to its binary (which finds its
# libraries and model beside itself). Re-running it replaces that version; other versions stay.
#   install.sh [--prefix DIR]                     from inside an unpacked package folder
#   install.sh [--prefix DIR] ctxd-…-x86_64-linux.tar.gz
# A tarball is installed only when its SHA-256 matches the `<tarball>.sha256` file beside it.
set -eu

prefix="${HOME:?HOME is not set; pass --prefix DIR}/.local"
tarball=""
while [ $# -gt 0 ]; do
    case "$1" in
        --prefix) prefix="$2"; shift 2 ;;
        -h|--help) sed -n '2,7p' "$0"; exit 0 ;;
        *) tarball="$1"; shift ;;
    esac
done

work=""
cleanup() { [ -n "$work" ] && rm -rf "$work"; }
trap cleanup EXIT
if [ -n "$tarball" ]; then
    [ -f "$tarball" ] || { echo "install: $tarball: no such file" >&2; exit 1; }
    sums="$tarball.sha256"
    [ -f "$sums" ] || { echo "install: $sums is missing: download it beside the tarball to verify it" >&2; exit 1; }
    want="$(cut -d' ' -f1 < "$sums")"
    got="$(sha256sum "$tarball" | cut -d' ' -f1)"
    if [ "$want" != "$got" ]; then
        echo "install: checksum mismatch for $tarball (expected $want, got $got): download it again" >&2
        exit 1
    fi
    work="$(mktemp -d)"
    tar -xzf "$tarball" -C "$work"
    src="$(ls -d "$work"/ctxd-*-x86_64-linux | head -n 1)"
else
    src="$(cd "$(dirname "$0")" && pwd)"
fi
[ -x "$src/bin/ctxd" ] || { echo "install: $src is not a ctxd package (no bin/ctxd)" >&2; exit 1; }
name="$(basename "$src")"
dest="$prefix/share/ctxd/$name"
mkdir -p "$prefix/bin" "$prefix/share/ctxd"
rm -rf "$dest.partial"
cp -R "$src" "$dest.partial"
rm -rf "$dest"
mv "$dest.partial" "$dest"
ln -sfn "$dest/bin/ctxd" "$prefix/bin/ctxd"
"$prefix/bin/ctxd" --version >/dev/null || { echo "install: $prefix/bin/ctxd does not run" >&2; exit 1; }
echo "installed $name: $prefix/bin/ctxd -> $dest/bin/ctxd"
case ":${PATH:-}:" in
    *":$prefix/bin:"*) ;;
    *) echo "add $prefix/bin to PATH (e.g. export PATH=\"$prefix/bin:\$PATH\")" ;;
esac
