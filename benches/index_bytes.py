#!/usr/bin/env python3
"""Bytes an index spends per chunk: the stored late-interaction codes, vectors and contents, and
the folder on disk.

Reads the `chunks` table of an index with pylance (read-only; run it on an index nothing writes
to, after `ctxd compact` so that old versions are not counted). Prints, per chunk: the `late`
column's bytes (and the codec tags found: `07116c45` is the full 8-bit codec), tokens a code holds
(from its header), the vector's and the content's bytes, and the folder's total and per-table
sizes — what BENCHMARKS.md's disk figures are.

    python3 benches/index_bytes.py DB [DB ...]

Needs pylance (`scripts/py-env.sh` installs it in ~/.cache/ctxd/py-venv).
"""
import collections, os, struct, sys

import lance


def folder_bytes(path):
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            try:
                total += os.path.getsize(os.path.join(root, f))
            except OSError:
                pass
    return total


def main(dbs):
    for db in dbs:
        ds = lance.dataset(os.path.join(db, "chunks.lance"))
        rows, late, tokens, content, coded = 0, 0, 0, 0, 0
        tags = collections.Counter()
        dim = 0
        for batch in ds.to_batches(columns=["late", "content", "vector"], batch_size=4096):
            rows += batch.num_rows
            dim = batch.schema.field("vector").type.list_size
            for code in batch.column("late").to_pylist():
                if code:
                    coded += 1
                    late += len(code)
                    tokens += struct.unpack_from("<H", code, 4)[0]
                    tags["%08x" % struct.unpack_from("<I", code, 0)[0]] += 1
            content += sum(len(c.encode()) for c in batch.column("content").to_pylist())
        tables = {t: folder_bytes(os.path.join(db, t)) for t in sorted(os.listdir(db)) if t.endswith(".lance")}
        total = folder_bytes(db)
        per = lambda b: b / max(rows, 1)
        print(f"{db}: {rows:,} chunks, {coded:,} with codes (tags {dict(tags)})")
        print(f"  per chunk: codes {per(late):,.0f} B ({tokens / max(coded, 1):.1f} tokens stored, "
              f"{late / max(tokens, 1):.1f} B a token), vector {dim * 4:,} B, content {per(content):,.0f} B")
        print(f"  on disk: {total / 1e6:,.1f} MB = {per(total):,.0f} B a chunk, {per(total) * 1e5 / 1e9:.2f} GB per 100k "
              f"chunks; " + ", ".join(f"{t} {b / 1e6:,.1f} MB" for t, b in tables.items()))


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
