#!/usr/bin/env python3
"""Reads `cargo metadata --format-version 1` on stdin and writes THIRD-PARTY.md: every crate
linked into the `ctxd` binary (its normal dependencies, transitively; build scripts and
procedural macros are not shipped) with its version, licence expression and repository, and
the other components a package ships (oneDNN, libgomp, the model). Used by scripts/package.sh."""
import json
import sys

meta = json.load(sys.stdin)
packages = {p["id"]: p for p in meta["packages"]}
nodes = {n["id"]: n for n in meta["resolve"]["nodes"]}
root = next(p["id"] for p in meta["packages"] if p["name"] == "ctxd" and p["source"] is None)
seen, todo = set(), [root]
while todo:
    pid = todo.pop()
    if pid in seen:
        continue
    seen.add(pid)
    for dep in nodes[pid]["deps"]:
        kinds = {k["kind"] for k in dep["dep_kinds"]}
        target = packages[dep["pkg"]]
        is_macro = any("proc-macro" in t["kind"] for t in target["targets"])
        if None in kinds and not is_macro:
            todo.append(dep["pkg"])
crates = sorted((packages[p] for p in seen if packages[p]["source"]), key=lambda p: (p["name"], p["version"]))
out = sys.stdout
out.write("# Third-party components of this package\n\n")
out.write("ctxd itself is licensed under Apache-2.0 (LICENSE). The package also ships:\n\n")
out.write("- `lib/libdnnl.so.3`: oneDNN 2023.2.0 (PyPI wheel `onednn-cpu-gomp`), Apache-2.0; its notices are\n")
out.write("  the `onednn-*` files beside this one.\n")
out.write("- `lib/libgomp.so.1`: the GNU OpenMP runtime of GCC 10.2.1 (Debian 11 package `libgomp1`),\n")
out.write("  GPL-3.0-or-later WITH GCC-exception-3.1; see `libgomp-copyright`.\n")
out.write("- `share/ctxd/models/sentence-transformers/all-MiniLM-L6-v2`: the default embedding model,\n")
out.write("  Apache-2.0 (model card: `model-all-MiniLM-L6-v2-card.md`).\n\n")
out.write(f"## Rust crates compiled into bin/ctxd ({len(crates)})\n\n")
out.write("| crate | version | licence | repository |\n|---|---|---|---|\n")
for p in crates:
    lic = p.get("license") or (f"see {p['license_file']}" if p.get("license_file") else "unstated")
    out.write(f"| {p['name']} | {p['version']} | {lic} | {p.get('repository') or ''} |\n")
