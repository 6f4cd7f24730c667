#!/usr/bin/env python3
"""Writes every file under CORPUS as one JSON line to DEST: its path relative to CORPUS, a newline, its text
(invalid UTF-8 replaced) — the texts scripts/gpu-check.sh embeds end to end and scripts/gpu-bundle.sh carries.
Files in sorted order, so the same corpus gives the same bytes.

    scripts/corpus-texts.py ../shared/eval/cosqa/corpus texts.jsonl
"""
import json
import os
import sys

if len(sys.argv) != 3:
    sys.exit(__doc__)
corpus, dest = sys.argv[1], sys.argv[2]
with open(dest, "w") as f:
    for root, dirs, files in os.walk(corpus):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(root, name)
            with open(path, encoding="utf-8", errors="replace") as src:
                f.write(json.dumps(os.path.relpath(path, corpus) + "\n" + src.read()) + "\n")
