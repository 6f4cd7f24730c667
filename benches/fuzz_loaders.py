#!/usr/bin/env python3
"""Fuzzing bench of the loaders (stages/src/load/) and of the watch stage's skip rules.

For a fixed time (--seconds, default 120) it writes rounds of generated inputs into a folder
and runs `ctxd index DIR --db DB --json --no-embed` on it with a timeout (hang detection):
per loader kind (PDF, notebook, HTML, JSON/JSONL, TOML, YAML, Markdown, Python, Rust, JS, Go,
C, CSV, text, extension-less files that are sniffed) it feeds random bytes, 0-byte files,
NUL-filled files, invalid UTF-8, huge single lines, deep nesting, byte-order marks, odd line
endings, and truncated / byte-mutated / structurally broken versions of valid seeds the script
writes itself (a hand-written PDF with a classic xref table, one with an xref stream and an
object stream, Flate-compressed and ToUnicode variants, …). Every round also carries the
secret files `stages/src/watch.rs` names (SECRET_NAMES / SECRET_EXTENSIONS, read from the
source) and a list of common secret names it does not name; a BM25 search for a token written
only into them checks that no secret file is ever indexed.

Rounds alternate between a fresh folder and index, and the previous round's folder and index
with files rewritten in place, deleted and added (unchanged / gone / removed paths); every
other round lowers the streaming threshold (CTXD_SOURCE_STREAM_THRESHOLD_BYTES) so files are
also streamed. A round fails on a crash (signal, exit 101/134), a hang (timeout) and, reported
apart, a non-zero exit with an error, or a caught panic in the log. A failing round is reduced
(bisected over its files) to the input that triggers it, saved under --findings.

One last round runs `ctxd serve --watch` (CTXD_SOURCE_EMBED=false) on a fresh corpus, waits
for /readyz, adds files through filesystem events (secret names, renames onto secret names,
symlinks), then reads /metrics: ctxd_load_* and ctxd_watch_skipped_total{reason} counters,
stage errors; and checks a few expectations with BM25 probes (e.g. a notebook with a UTF-8 BOM
is indexed, a PDF over the streaming threshold is not indexed as raw bytes).

    python3 benches/fuzz_loaders.py --ctxd /tmp/fuzz-ctxd [--seconds 120] [--seed 1]
        [--timeout 60] [--files 16] [--huge-mb 5] [--findings /tmp/fuzz-findings] [--no-serve]

Exits 1 on any crash, hang or secret file indexed; 0 otherwise (non-zero exits with an error,
caught panics and odd behaviour are reported but do not fail the bench).
Python 3 standard library only.
"""
import argparse, collections, json, os, random, re, shutil, signal, socket, struct, subprocess
import sys, tempfile, time, urllib.error, urllib.request, zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
try:
    from ctxd_daemon import default_ctxd, free_port, post
except Exception:  # keep the bench usable on its own
    def default_ctxd():
        target = os.environ.get("CARGO_TARGET_DIR", os.path.expanduser("~/.cache/ctxd-target"))
        return os.path.join(target, "release", "ctxd")

    def free_port():
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]

    def post(base, path, body, timeout=30):
        req = urllib.request.Request(base + path, data=json.dumps(body).encode(),
                                     headers={"content-type": "application/json"})
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.load(r)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LEAK_TOKEN = "zzleakprobeqx"       # written only into secret files (and one control file)
CONTROL_NAME = "control_leak_probe.txt"

# --------------------------------------------------------------------------------------------
# What watch.rs skips (read from the source, so the bench follows it; fallback: as of writing)
# --------------------------------------------------------------------------------------------

def _rust_list(src, const):
    m = re.search(r"const\s+" + const + r"\s*:\s*&\[&str\]\s*=\s*&\[(.*?)\];", src, re.S)
    return re.findall(r'"([^"]*)"', m.group(1)) if m else None


def watch_rules():
    names = [".env", "id_rsa", "id_dsa", "id_ecdsa", "id_ed25519", ".npmrc", ".pypirc", ".netrc", "credentials"]
    exts = ["pem", "key", "p12", "pfx", "jks", "keystore", "kdbx", "gpg", "asc"]
    binary = ["png", "zip", "pdfx"]
    prefixes, backups, code = [], [], []
    try:
        with open(os.path.join(REPO, "stages", "src", "watch.rs"), encoding="utf-8") as f:
            src = f.read()
        names = _rust_list(src, "SECRET_NAMES") or names
        exts = _rust_list(src, "SECRET_EXTENSIONS") or exts
        binary = _rust_list(src, "BINARY_EXTENSIONS") or binary
        prefixes = _rust_list(src, "SECRET_PREFIXES") or prefixes
        backups = _rust_list(src, "BACKUP_EXTENSIONS") or backups
        code = _rust_list(src, "CODE_EXTENSIONS") or code
    except OSError:
        pass
    return names, exts, binary, prefixes, backups, code


SECRET_NAMES, SECRET_EXTS, BINARY_EXTS, SECRET_PREFIXES, BACKUP_EXTS, CODE_EXTS = watch_rules()


def _ext(name):
    base = name.rsplit("/", 1)[-1]
    i = base.rfind(".")
    return base[i + 1:] if i > 0 else ""


def intended_secret(name):
    """The rule of watch.rs::classify_name applied to the (lossily decoded) file name: what the
    code means to skip as a secret."""
    n = name.lower()
    template = n.endswith((".example", ".sample"))
    code = _ext(n).rstrip("~") in CODE_EXTS
    named = any(n == s or (n.startswith(s + ".") and not code) for s in SECRET_NAMES) or any(
        n.startswith(p) and not code for p in SECRET_PREFIXES
    )
    if named and not template:
        return True
    parts = n.rstrip("~").split(".")
    last, inner = parts[-1], (parts[-2] if len(parts) >= 2 else "")
    backup_of_secret = last in BACKUP_EXTS and inner in SECRET_EXTS
    return (_ext(n).rstrip("~") in SECRET_EXTS or backup_of_secret) and not template


def rust_skipped_by_scan(rel_bytes):
    """What `Scanner::scan` drops before the loader (hidden, secret, binary extension), as the
    Rust code does it (a name that is not UTF-8 by its lossy form)."""
    parts = rel_bytes.split(b"/")
    if any(p.startswith(b".") for p in parts):
        return "hidden"
    # Names that are not UTF-8 are classified by their lossy form (as watch.rs does).
    name = parts[-1].decode("utf-8", errors="replace")
    if intended_secret(name):
        return "secret"
    if _ext(name.lower()) in BINARY_EXTS:
        return "binary_ext"
    return None


# --------------------------------------------------------------------------------------------
# Seeds: valid files of every format
# --------------------------------------------------------------------------------------------

def pdf_escape(s):
    return s.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def pdf_stream(data, extra=b"", flate=False):
    if flate:
        data = zlib.compress(data)
        extra += b" /Filter /FlateDecode"
    return b"<< /Length %d%s >>\nstream\n" % (len(data), extra) + data + b"\nendstream"


def pdf_classic(objs, root=1, trailer_extra=b"", header=b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n"):
    """Serialises {num: body} with a classic xref table."""
    out = bytearray(header)
    offsets = {}
    for num in sorted(objs):
        offsets[num] = len(out)
        out += b"%d 0 obj\n" % num + objs[num] + b"\nendobj\n"
    xref = len(out)
    size = max(objs) + 1
    out += b"xref\n0 %d\n0000000000 65535 f \n" % size
    for num in range(1, size):
        out += (b"%010d 00000 n \n" % offsets[num]) if num in offsets else b"0000000000 65535 f \n"
    out += b"trailer\n<< /Size %d /Root %d 0 R%s >>\nstartxref\n%d\n%%%%EOF\n" % (size, root, trailer_extra, xref)
    return bytes(out)


def pdf_objects(pages, flate=False, tounicode=False, content_extra=b""):
    """Catalog 1, Pages 2, Font 3 (ToUnicode 4), then page/content pairs from 5."""
    objs = {}
    n = len(pages)
    kids = b" ".join(b"%d 0 R" % (5 + 2 * i) for i in range(n))
    objs[1] = b"<< /Type /Catalog /Pages 2 0 R >>"
    objs[2] = b"<< /Type /Pages /Kids [%s] /Count %d /MediaBox [0 0 612 792] >>" % (kids, n)
    font = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding"
    if tounicode:
        cmap = (b"/CIDInit /ProcSet findresource begin 12 dict begin begincmap /CMapName /Fz def\n"
                b"1 begincodespacerange <00> <FF> endcodespacerange\n"
                b"1 beginbfrange <20> <7E> <0020> endbfrange\n"
                b"2 beginbfchar <41> <0041> <42> <00E9> endbfchar\n"
                b"endcmap CMapName currentdict /CMap defineresource pop end end")
        objs[4] = pdf_stream(cmap, flate=flate)
        font += b" /ToUnicode 4 0 R"
    objs[3] = font + b" >>"
    for i, text in enumerate(pages):
        page, content = 5 + 2 * i, 6 + 2 * i
        objs[page] = (b"<< /Type /Page /Parent 2 0 R /Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>"
                      % content)
        lines = [l for l in text.split("\n")]
        ops = b"BT /F1 12 Tf 72 720 Td 14 TL\n" + b"".join(
            b"(%s) Tj T*\n" % pdf_escape(l).encode("latin-1", "replace") for l in lines) + content_extra + b"ET"
        objs[content] = pdf_stream(ops, flate=flate)
    return objs


def pdf_xref_stream(pages, flate=True):
    """PDF 1.5: catalog, pages and font in a compressed object stream, an xref stream."""
    objs = pdf_objects(pages, flate=flate)
    in_stm = [1, 2, 3]
    body = bytearray()
    header = []
    for num in in_stm:
        header.append(b"%d %d" % (num, len(body)))
        body += objs.pop(num) + b"\n"
    head = b" ".join(header) + b"\n"
    stm_num = max(objs) + 1
    stm_data = head + bytes(body)
    comp = zlib.compress(stm_data)
    objs[stm_num] = (b"<< /Type /ObjStm /N %d /First %d /Length %d /Filter /FlateDecode >>\nstream\n"
                     % (len(in_stm), len(head), len(comp)) + comp + b"\nendstream")
    out = bytearray(b"%PDF-1.5\n%\xe2\xe3\xcf\xd3\n")
    offsets = {}
    for num in sorted(objs):
        offsets[num] = len(out)
        out += b"%d 0 obj\n" % num + objs[num] + b"\nendobj\n"
    xref_num = stm_num + 1
    offsets[xref_num] = len(out)
    rows = bytearray()
    for num in range(0, xref_num + 1):
        if num == 0:
            rows += struct.pack(">BIH", 0, 0, 65535)
        elif num in in_stm:
            rows += struct.pack(">BIH", 2, stm_num, in_stm.index(num))
        elif num in offsets:
            rows += struct.pack(">BIH", 1, offsets[num], 0)
        else:
            rows += struct.pack(">BIH", 0, 0, 0)
    data = zlib.compress(bytes(rows)) if flate else bytes(rows)
    filt = b" /Filter /FlateDecode" if flate else b""
    out += (b"%d 0 obj\n<< /Type /XRef /Size %d /W [1 4 2] /Root 1 0 R /Length %d%s >>\nstream\n"
            % (xref_num, xref_num + 1, len(data), filt) + data + b"\nendstream\nendobj\n")
    out += b"startxref\n%d\n%%%%EOF\n" % offsets[xref_num]
    return bytes(out)


PDF_TEXT = ["Fuzz seed page one: the quick brown fox (parenthesised) jumps.\nSecond line of page one.",
            "Page two talks about pelican migration and \\ backslashes."]


def seeds_pdf():
    return [pdf_classic(pdf_objects(PDF_TEXT)),
            pdf_classic(pdf_objects(PDF_TEXT, flate=True)),
            pdf_classic(pdf_objects(PDF_TEXT, tounicode=True)),
            pdf_xref_stream(PDF_TEXT)]


def notebook_json(cells, lang="python"):
    return {"nbformat": 4, "nbformat_minor": 5,
            "metadata": {"kernelspec": {"name": "python3", "language": lang, "display_name": "Python 3"}},
            "cells": cells}


NOTEBOOK = notebook_json([
    {"cell_type": "markdown", "metadata": {}, "source": ["# Loading data\n", "We read the CSV and plot it.\n"]},
    {"cell_type": "code", "execution_count": 1, "metadata": {}, "source": "import csv\nrows = list(csv.reader(open('a.csv')))\nlen(rows)",
     "outputs": [{"output_type": "execute_result", "execution_count": 1, "metadata": {}, "data": {"text/plain": ["42"]}}]},
    {"cell_type": "code", "execution_count": 2, "metadata": {}, "source": ["for r in rows:\n", "    print(r)\n"],
     "outputs": [{"output_type": "stream", "name": "stdout", "text": ["a,b\n"] * 50}]},
    {"cell_type": "raw", "metadata": {}, "source": "raw cell text"},
])

HTML = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Fuzz seed document</title>
<style>body { color: red; }</style><script>var hidden = "not indexed";</script></head>
<body>
<p>Lead paragraph with <b>bold</b> and <a href="#x">a link</a> &amp; entities &eacute; &#x263A;.</p>
<h1>Setup</h1>
<p>Install it with the package manager.</p>
<h2>Linux</h2><ul><li>apt</li><li>dnf</li></ul>
<h2>Windows</h2><table><tr><td>cell 1</td><td>cell 2</td></tr></table>
<h3>Details</h3><pre>code block
  indented</pre><noscript>noscript text</noscript><template><p>template</p></template>
<!-- a comment --><h1>Usage</h1><p>Run <code>ctxd serve</code>.</p>
</body></html>
"""

JSON_DOC = json.dumps({"name": "fuzz", "version": "1.0.0", "scripts": {"build": "make", "test": "make test"},
                       "dependencies": {"a": "^1", "b": "~2"}, "list": [1, 2.5, -3e10, True, None, "x"],
                       "nested": {"deep": {"deeper": {"key": "value \u00e9 \u263a"}}}}, indent=2, ensure_ascii=False)

JSONL = "\n".join(json.dumps({"id": i, "msg": f"log line {i}", "level": "info"}) for i in range(20)) + "\n"

TOML = """# config
title = "fuzz"
[server]
listen = "127.0.0.1:7700"
ports = [8000, 8001, 8002]
[database]
enabled = true
conn = { host = "h", port = 5432 }
[[products]]
name = "Hammer"
sku = 738594937
[[products]]
name = "Nail"
"""

YAML = """version: 2
services:
  web:
    image: "nginx:latest"
    ports:
      - "80:80"
  db:
    image: postgres
    environment:
      POSTGRES_DB: app
list: [a, b, {c: d}]
multi: |
  line one
  line two
"""

MARKDOWN = """# Title

Intro paragraph with *emphasis* and `code`.

## Install

```sh
cargo install ctxd
```

## Usage

| a | b |
|---|---|
| 1 | 2 |

> quote
> > nested quote

- item
  - nested item
    1. numbered

### Deep heading
Text under the deep heading.
Setext heading
==============
"""

PYTHON = '''"""Module docstring."""
import os, sys
from typing import Optional


class Account:
    """A bank account."""

    rate: float = 0.01

    def __init__(self, owner: str, balance: float = 0.0) -> None:
        self.owner = owner
        self.balance = balance

    @property
    def interest(self) -> float:
        """Yearly interest."""
        return self.balance * self.rate

    async def deposit(self, amount: float) -> "Account":
        if amount <= 0:
            raise ValueError("amount must be positive")
        self.balance += amount
        return self


def check_password(p: str, h: Optional[str] = None) -> bool:
    return bool(h) and p == h  # comment


LAMBDA = lambda x: [y for y in range(x) if y % 2]
'''

RUST = '''//! Crate doc.
use std::collections::HashMap;

/// A point.
#[derive(Debug, Clone)]
pub struct Point { pub x: f64, pub y: f64 }

impl Point {
    /// Norm.
    pub fn norm(&self) -> f64 { (self.x * self.x + self.y * self.y).sqrt() }
}

pub trait Shape { fn area(&self) -> f64; }

impl Shape for Point { fn area(&self) -> f64 { 0.0 } }

macro_rules! square { ($x:expr) => { $x * $x }; }

pub fn verify(p: &str) -> Result<(), String> {
    let r = r#"raw "string""#;
    let _m: HashMap<&str, i32> = HashMap::new();
    if p.is_empty() { return Err(format!("empty {r}")); }
    Ok(())
}

#[cfg(test)]
mod tests { #[test] fn t() { assert_eq!(square!(2), 4); } }
'''

JS = '''import { x } from "./x.js";
export class Cart {
  constructor(items = []) { this.items = items; }
  total() { return this.items.reduce((a, b) => a + b.price, 0); }
}
export function checkout(cart, { tax = 0.2 } = {}) {
  const t = `total: ${cart.total() * (1 + tax)}`;
  return t;
}
const re = /ab+c/gi;
'''

GO = '''package main

import (
\t"fmt"
\t"strings"
)

type Server struct{ Addr string }

func (s *Server) Start() error { return fmt.Errorf("addr %s", strings.ToUpper(s.Addr)) }

func main() { _ = (&Server{Addr: ":80"}).Start() }
'''

C = '''#include <stdio.h>
#include "local.h"
#define MAX(a, b) ((a) > (b) ? (a) : (b))
struct point { int x, y; };
static int add(int a, int b) { return a + b; }
int main(int argc, char **argv) {
#if 1
    printf("%d\\n", MAX(add(1, 2), argc));
#endif
    return 0;
}
'''

CSV = "id,name,price\n1,hammer,9.99\n2,\"nail, steel\",0.1\n3,\"quote \"\"x\"\"\",1\n"

TEXT = "Plain text notes.\nSecond line with unicode: é ü 漢字 🙂\n\nA paragraph after a blank line.\n"

KINDS = {
    # kind: (extension, seeds)
    "pdf": ("pdf", None),
    "ipynb": ("ipynb", [json.dumps(NOTEBOOK, indent=1).encode()]),
    "html": ("html", [HTML.encode()]),
    "json": ("json", [JSON_DOC.encode()]),
    "jsonl": ("jsonl", [JSONL.encode()]),
    "toml": ("toml", [TOML.encode()]),
    "yaml": ("yaml", [YAML.encode()]),
    "md": ("md", [MARKDOWN.encode()]),
    "py": ("py", [PYTHON.encode()]),
    "rs": ("rs", [RUST.encode()]),
    "js": ("js", [JS.encode()]),
    "go": ("go", [GO.encode()]),
    "c": ("c", [C.encode()]),
    "csv": ("csv", [CSV.encode()]),
    "txt": ("txt", [TEXT.encode()]),
    # no extension: the format is sniffed from the first bytes
    "noext": ("", None),
}


def kind_seeds(kind):
    if kind == "pdf":
        return seeds_pdf()
    if kind == "noext":
        return [seeds_pdf()[0], HTML.encode(), json.dumps(NOTEBOOK).encode(), JSON_DOC.encode(),
                b"#!/usr/bin/env python3\n" + PYTHON.encode(), b"#!/bin/sh\necho hi\n", TEXT.encode()]
    return KINDS[kind][1]


# --------------------------------------------------------------------------------------------
# Generators
# --------------------------------------------------------------------------------------------

DICT = {
    "pdf": [b"obj", b"endobj", b"stream\n", b"endstream", b" 0 R", b"<<", b">>", b"[", b"]", b"(", b")", b"<", b">",
            b"xref", b"trailer", b"startxref", b"%%EOF", b"/Length", b"/Type /Page", b"/Kids", b"/Count",
            b"/Filter /FlateDecode", b"/Prev 0", b"/Root 2 0 R", b"4294967295", b"-1", b"99999999999999999999",
            b"1.#INF", b"Tj", b"TJ", b"Tf", b"BT", b"ET", b"\\", b"/Encrypt", b"/ObjStm", b"/ToUnicode"],
    "json": [b"{", b"}", b"[", b"]", b'"', b"\\", b"\\u0000", b"\\ud800", b"\\udc00", b"1e999999", b"-0", b"null",
             b",", b":", b'"cells"', b'"source"', b'"outputs"', b'"cell_type"', b"\xef\xbb\xbf", b"NaN"],
    "html": [b"<script>", b"</script>", b"</", b"<!--", b"-->", b"<![CDATA[", b"&#x110000;", b"&#0;", b"&", b"<h1>",
             b"<h7>", b"<title>", b"</title>", b"<table>", b"<a>", b"<b>", b"<p>", b"<svg>", b"<math>", b"<template>",
             b"<noscript>", b"<plaintext>", b"<textarea>", b"\r", b"<h1>\xcc\x81</h1>"],
    "code": [b'"""', b"'''", b"/*", b"*/", b'r#"', b'"#', b"\\", b"{", b"}", b"(", b")", b"\n", b"\t", b"fn ", b"class ",
             b"def ", b"impl ", b"#[", b"@", b"`${", b"`", b"#!", b"\r", b"\xe2\x80\xa8", b"\xef\xbb\xbf", b"\xcc\x81",
             b"::", b"<<<", b"#define ", b"#if 0\n", b"package ", b"func "],
    "text": [b"\n", b"\r\n", b"\r", b"#", b"##", b"```", b"---", b"===", b"|", b"- ", b"> ", b"[", b"]", b"=", b":",
             b"\t", b"\xe2\x80\xa8", b"\xef\xbb\xbf", b"\xcc\x81", b"\xf0\x9f\x99\x82", b"\"", b","],
}
for _k in ("ipynb", "jsonl"):
    DICT[_k] = DICT["json"]
for _k in ("py", "rs", "js", "go", "c"):
    DICT[_k] = DICT["code"]
for _k in ("toml", "yaml", "md", "csv", "txt"):
    DICT[_k] = DICT["text"]
DICT["noext"] = DICT["pdf"] + DICT["json"] + DICT["html"]

BAD_UTF8 = [b"\x80", b"\xbf", b"\xc0\xaf", b"\xe0\x80\xaf", b"\xed\xa0\x80", b"\xed\xbf\xbf", b"\xf4\x90\x80\x80",
            b"\xf8\x88\x80\x80\x80", b"\xff", b"\xfe", b"\xc3", b"\xe2\x82", b"\xf0\x9f\x99"]

INTERESTING_NUMS = [b"0", b"-1", b"-0", b"1e308", b"4294967295", b"4294967296", b"18446744073709551616", b"9" * 400,
                    b"2147483648", b"-2147483649", b"0.0000000000000000000000001"]


def mutate(rng, data, kind, n_ops=None):
    b = bytearray(data)
    for _ in range(n_ops or rng.randint(1, 12)):
        op = rng.randrange(9)
        pos = rng.randint(0, len(b))
        if op == 0 and b:  # flip a bit
            i = rng.randrange(len(b))
            b[i] ^= 1 << rng.randrange(8)
        elif op == 1 and b:  # random byte
            b[rng.randrange(len(b))] = rng.randrange(256)
        elif op == 2:  # insert random bytes
            b[pos:pos] = rng.randbytes(rng.randint(1, 16))
        elif op == 3 and b:  # delete a range
            del b[pos:pos + rng.randint(1, 64)]
        elif op == 4 and b:  # duplicate a range
            i = rng.randrange(len(b))
            chunk = b[i:i + rng.randint(1, 256)]
            b[pos:pos] = chunk * rng.randint(1, 8)
        elif op == 5:  # dictionary token
            b[pos:pos] = rng.choice(DICT.get(kind, DICT["text"]))
        elif op == 6:  # interesting number replacing a digit run
            m = list(re.finditer(rb"\d+", bytes(b)))
            if m:
                x = rng.choice(m)
                b[x.start():x.end()] = rng.choice(INTERESTING_NUMS)
        elif op == 7:  # bad UTF-8
            b[pos:pos] = rng.choice(BAD_UTF8)
        elif op == 8 and len(b) > 2:  # swap two ranges
            i, j = sorted(rng.randrange(len(b)) for _ in range(2))
            n = min(rng.randint(1, 64), j - i)
            b[i:i + n], b[j:j + n] = b[j:j + n], b[i:i + n]
    return bytes(b)


def huge_line(rng, kind, size):
    """One line of about `size` bytes, shaped for the kind."""
    flavour = rng.randrange(5)
    if flavour == 0:
        body = "a" * size
    elif flavour == 1:
        body = "é" * (size // 2)
    elif flavour == 2:
        body = "\U0001D11E" * (size // 4)
    elif flavour == 3:
        words = ["alpha", "beta", "gamma", "delta", "漢字", "x", "fooBarBaz", "::", "->"]
        out, n = [], 0
        while n < size:
            w = rng.choice(words)
            out.append(w)
            n += len(w.encode()) + 1
        body = " ".join(out)
    else:
        body = "".join(rng.choices("abcdefghij0123456789{}()[];,.", k=size))
    if kind == "pdf":
        text = body.encode("latin-1", "replace")[:size]
        return pdf_classic(pdf_objects([text.decode("latin-1").replace("\n", " ")]))
    if kind == "ipynb" or (kind == "noext" and rng.random() < 0.5):
        return json.dumps(notebook_json([{"cell_type": "markdown", "source": body}]), ensure_ascii=False).encode()
    if kind in ("json", "jsonl"):
        return json.dumps({"k": body}, ensure_ascii=False).encode()
    if kind == "html":
        return ("<!DOCTYPE html><html><body><h1>" + body[:1000] + "</h1><p>" + body + "</p></body></html>").encode()
    if kind == "py":
        return ('x = "' + body.replace('"', "'") + '"').encode()
    if kind == "rs":
        return ('const S: &str = "' + body.replace('"', "'") + '"; fn f() {}').encode()
    if kind == "csv":
        return ",".join(body[i:i + 7] for i in range(0, len(body), 7)).encode()
    return body.encode()


def many_lines(rng, kind, size):
    unit = rng.choice([b"\n", b"x\n", b"\r\n", b"\r", b"#\n", b"- a\n", b"{\n", b"}\n", b"<p>\n", b"a,b\n"])
    return unit * max(1, size // len(unit))


def deep_nesting(rng, kind, depth):
    d = depth
    if kind == "pdf":
        shape = rng.randrange(4)
        if shape == 0:   # nested arrays in the page dictionary
            extra = b"/Deep " + b"[" * d + b"]" * d
            objs = pdf_objects(PDF_TEXT)
            objs[5] = objs[5][:-2] + extra + b" >>"
        elif shape == 1:  # nested dictionaries
            objs = pdf_objects(PDF_TEXT)
            objs[5] = objs[5][:-2] + b"/Deep " + b"<< /K " * d + b"1" + b" >>" * d + b" >>"
        elif shape == 2:  # nested literal strings in the content stream
            objs = pdf_objects(PDF_TEXT, content_extra=b"(" * d + b"x" + b")" * d + b" Tj\n")
        else:             # nested arrays in the content stream (TJ)
            objs = pdf_objects(PDF_TEXT, content_extra=b"[" * d + b"(x)" + b"]" * d + b" TJ\n")
        return pdf_classic(objs)
    if kind in ("json", "jsonl"):
        return rng.choice([b"[" * d + b"]" * d, b'{"a":' * d + b"1" + b"}" * d, b"[" * d, b'{"a":' * d])
    if kind == "ipynb" or kind == "noext":
        inner = rng.choice([b"[" * d + b"]" * d, b'{"a":' * d + b"1" + b"}" * d])
        return b'{"nbformat": 4, "cells": [{"cell_type": "code", "source": ' + inner + b', "outputs": []}]}'
    if kind == "html":
        tag = rng.choice([b"div", b"a", b"b", b"table", b"svg", b"ul><li", b"p><b", b"select", b"h1"])
        unclosed = rng.random() < 0.5
        body = (b"<" + tag + b">") * d + b"text" + (b"" if unclosed else (b"</" + tag.split(b">")[0] + b">") * d)
        return b"<!DOCTYPE html><html><body>" + body + b"</body></html>"
    if kind == "py":
        return rng.choice([b"x = " + b"(" * d + b"1" + b")" * d + b"\n",
                           b"x = " + b"[" * d + b"]" * d + b"\n",
                           b"".join(b"    " * i + b"if x:\n" for i in range(min(d, 1000))) + b"    " * min(d, 1000) + b"pass\n",
                           b"".join(b"    " * i + b"def f%d():\n" % i for i in range(min(d, 1000))) + b"    " * min(d, 1000) + b"pass\n"])
    if kind in ("rs", "c", "go", "js"):
        return rng.choice([b"fn a() {" * d + b"}" * d, b"{" * d + b"}" * d, b"int x = " + b"(" * d + b"1" + b")" * d + b";",
                           b"struct A {" * d, b"mod m {" * d + b"}" * d, b"`${" * d + b"}`" * d,
                           b"#if 1\n" * min(d, 5000) + b"#endif\n" * min(d, 5000)])
    if kind == "toml":
        return rng.choice([b"a = " + b"[" * d + b"]" * d + b"\n", b"a = " + b"{b=" * d + b"1" + b"}" * d + b"\n",
                           b"".join(b"[" + b".".join([b"t"] * (i + 1)) + b"]\nk = 1\n" for i in range(min(d, 300)))])
    if kind == "yaml":
        return rng.choice([b"a: " + b"[" * d + b"]" * d + b"\n", b"".join(b"  " * i + b"k%d:\n" % i for i in range(min(d, 1000))),
                           b"- " * d + b"x\n"])
    if kind == "md":
        return rng.choice([b">" * d + b" quote\n", b"#" * d + b" heading\n",
                           b"".join(b"  " * i + b"- item\n" for i in range(min(d, 1000))), b"[" * d + b"]" * d + b"\n"])
    return b"(" * d + b")" * d + b"\n"


def pdf_nasty(rng):
    """A PDF broken in one structural way."""
    objs = pdf_objects(PDF_TEXT)
    choice = rng.randrange(17)
    name = ""
    if choice == 0:
        name = "pages_cycle"
        objs[2] = b"<< /Type /Pages /Kids [2 0 R 5 0 R 7 0 R] /Count 3 >>"
    elif choice == 1:
        name = "page_parent_cycle"
        objs[5] = b"<< /Type /Page /Parent 5 0 R /Contents 6 0 R >>"
        objs[2] = b"<< /Type /Pages /Kids [5 0 R 7 0 R 2 0 R] /Count 2 /Parent 2 0 R /Resources 2 0 R >>"
    elif choice == 2:
        name = "length_self_reference"
        data = b"BT /F1 12 Tf 72 720 Td (self length) Tj ET"
        objs[6] = b"<< /Length 6 0 R >>\nstream\n" + data + b"\nendstream"
    elif choice == 3:
        name = "length_out_of_range"
        data = b"BT /F1 12 Tf 72 720 Td (bad length) Tj ET"
        objs[6] = b"<< /Length %s >>\nstream\n" % rng.choice([b"-1", b"99999999999", b"18446744073709551616", b"0", b"1.5"]) + data + b"\nendstream"
    elif choice == 4:
        name = "xref_prev_loop"
        out = pdf_classic(objs)
        xref = int(out.rsplit(b"startxref\n", 1)[1].split(b"\n")[0])
        return out.replace(b"/Root 1 0 R >>", b"/Root 1 0 R /Prev %d >>" % xref), name
    elif choice == 5:
        name = "startxref_garbage"
        out = pdf_classic(objs)
        head, _ = out.rsplit(b"startxref\n", 1)
        return head + b"startxref\n" + rng.choice([b"0", b"-5", b"999999999", b"18446744073709551616", b"abc"]) + b"\n%%EOF\n", name
    elif choice == 6:
        name = "count_huge"
        objs[2] = b"<< /Type /Pages /Kids [5 0 R 7 0 R] /Count 4294967295 >>"
    elif choice == 7:
        name = "object_number_huge"
        out = pdf_classic(objs)
        return out.replace(b"\n5 0 obj", b"\n4294967295 65535 obj", 1).replace(b"5 0 R", b"4294967295 65535 R"), name
    elif choice == 8:
        name = "contents_array_cycle"
        objs[5] = b"<< /Type /Page /Parent 2 0 R /Contents 9 0 R >>"
        objs[9] = b"[9 0 R 6 0 R 9 0 R]"
    elif choice == 9:
        name = "encrypt_garbage"
        objs[9] = b"<< /Filter /Standard /V 99 /R 99 /O <00> /U <00> /P -1 /Length 4096 >>"
        return pdf_classic(objs, trailer_extra=b" /Encrypt 9 0 R /ID [<01> <02>]"), name
    elif choice == 10:
        name = "font_differences_garbage"
        objs[3] = (b"<< /Type /Font /Subtype /Type1 /BaseFont /X /FirstChar 4294967295 /LastChar -5 /Widths [1 2] "
                   b"/Encoding << /Type /Encoding /BaseEncoding /Nope /Differences [99999999999 /a -1 /b 255 /c 256 /d] >> >>")
    elif choice == 11:
        name = "tounicode_huge_range"
        cmap = rng.choice([
            b"1 begincodespacerange <00000000> <FFFFFFFF> endcodespacerange\n1 beginbfrange <00000000> <FFFFFFFF> <0000> endbfrange\n",
            b"1 begincodespacerange <0000> <FFFF> endcodespacerange\n1 beginbfrange <0000> <FFFF> [<0041>] endbfrange\n",
            b"1 begincodespacerange <00> <FF> endcodespacerange\n1 beginbfrange <FF> <00> <0041> endbfrange\n",
            b"1 begincodespacerange <> <> endcodespacerange\n2 beginbfchar <> <> <41> <D800> endbfchar\n",
            b"99999999 begincodespacerange <00> endcodespacerange\nbeginbfchar <4> <00410042004300440045> endbfchar\n"])
        objs[4] = pdf_stream(b"begincmap\n" + cmap + b"endcmap\n")
        objs[3] = b"<< /Type /Font /Subtype /Type0 /BaseFont /X /Encoding /Identity-H /ToUnicode 4 0 R >>"
        objs[6] = pdf_stream(b"BT /F1 12 Tf 72 720 Td <00410042FFFFFFFF0000> Tj [<0041> -250 <FFFF>] TJ ET")
    elif choice == 12:
        name = "inline_image_garbage"
        objs[6] = pdf_stream(b"BT /F1 12 Tf (before) Tj ET\nBI /W 4294967295 /H 2 /BPC 8 /CS /RGB ID \x00\xff EI garbage\nBT (after) Tj ET")
    elif choice == 13:
        name = "operators_without_operands"
        objs[6] = pdf_stream(b"BT Tj TJ Tf Td TD Tm ' \" T* /F1 Tf (x) (y) (z) Td 1 2 3 4 5 6 7 8 Tm <ABC> Tj [1 (a) /N] TJ ET ET ET")
    elif choice == 14:
        name = "flate_bomb"
        raw = zlib.compress(b"\0" * (rng.choice([16, 64]) << 20), 9)
        objs[6] = b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(raw) + raw + b"\nendstream"
    elif choice == 15:
        name = "bad_filters"
        data = rng.choice([b"not zlib at all", b"\x78\x9c\x00\x00", zlib.compress(b"BT (ok) Tj ET")[:-4]])
        filt = rng.choice([b"/FlateDecode", b"[/FlateDecode /FlateDecode]", b"/LZWDecode", b"/ASCIIHexDecode", b"/ASCII85Decode",
                           b"/RunLengthDecode", b"/DCTDecode", b"/Nope", b"[/ASCIIHexDecode /FlateDecode]"])
        parms = rng.choice([b"", b" /DecodeParms << /Predictor 15 /Columns 0 >>", b" /DecodeParms << /Predictor 2 /Colors 0 /BitsPerComponent 99 /Columns 4294967295 >>"])
        objs[6] = b"<< /Length %d /Filter %s%s >>\nstream\n" % (len(data), filt, parms) + data + b"\nendstream"
    else:
        name = "objstm_garbage"
        out = pdf_xref_stream(PDF_TEXT)
        out = re.sub(rb"/N \d+ /First \d+", rng.choice([b"/N 4294967295 /First 0", b"/N 3 /First 999999", b"/N -1 /First -1", b"/N 0 /First 0"]), out)
        return out, name
    return pdf_classic(objs), name


def generate(rng, kind, strategy, huge_bytes):
    """Bytes for `kind` by `strategy` (and a note on the variant)."""
    seeds = kind_seeds(kind)
    if strategy == "valid":
        i = rng.randrange(len(seeds))
        return seeds[i], f"seed{i}"
    if strategy == "random_bytes":
        n = rng.choice([1, 7, 512, 4096, 9000, 65536])
        prefix = rng.choice([b"", b"%PDF-1.4\n", b"{", b"<!DOCTYPE html>", b"#!/usr/bin/env python\n", b"\xff\xfe", b"\xef\xbb\xbf"])
        return prefix + rng.randbytes(n), f"{n}B prefix={prefix[:9]!r}"
    if strategy == "empty":
        return b"", "0B"
    if strategy == "nul_filled":
        n = rng.choice([1, 100, 8191, 8192, 8193, 100000])
        return b"\0" * n, f"{n}B"
    if strategy == "invalid_utf8":
        data = bytearray(rng.choice(seeds))
        for _ in range(rng.randint(1, 20)):
            pos = rng.randint(0, len(data))
            data[pos:pos] = rng.choice(BAD_UTF8)
        if rng.random() < 0.3:
            data += rng.choice([b"\xc3", b"\xe2\x82", b"\xf0\x9f\x99"])  # cut multibyte at the end
        return bytes(data), "bad sequences"
    if strategy == "huge_line":
        return huge_line(rng, kind, huge_bytes), f"{huge_bytes}B"
    if strategy == "many_lines":
        return many_lines(rng, kind, min(huge_bytes, 2 << 20)), "many short lines"
    if strategy == "truncated":
        s = rng.choice(seeds)
        cut = rng.randint(0, max(0, len(s) - 1))
        return s[:cut], f"{cut}/{len(s)}B"
    if strategy == "mutated":
        return mutate(rng, rng.choice(seeds), kind), "mutated seed"
    if strategy == "structural":
        if kind == "pdf" or (kind == "noext" and rng.random() < 0.3):
            data, name = pdf_nasty(rng)
            if rng.random() < 0.3:
                data, name = mutate(rng, data, "pdf", 3), name + "+mutated"
            return data, name
        depth = rng.choice([50, 99, 100, 101, 128, 129, 1000, 100000])
        return deep_nesting(rng, kind, depth), f"depth {depth}"
    if strategy == "bom":
        s = rng.choice(seeds)
        v = rng.randrange(5)
        if v == 0:
            return b"\xef\xbb\xbf" + s, "utf-8 bom"
        text = s.decode("utf-8", "replace")
        if v == 1:
            return b"\xff\xfe" + text.encode("utf-16-le"), "utf-16le bom"
        if v == 2:
            return b"\xfe\xff" + text.encode("utf-16-be"), "utf-16be bom"
        if v == 3:
            return b"\xff\xfe" + text.encode("utf-16-le")[:-1] + b"\x00\xd8", "utf-16 odd length + lone surrogate"
        return rng.choice([b"\xff\xfe", b"\xfe\xff", b"\xef\xbb\xbf", b"\xff\xfe\x00"]), "bom only"
    if strategy == "line_endings":
        s = rng.choice(seeds)
        v = rng.choice([b"\r\n", b"\r", b"\n\r", b"\x0b", b"\x0c", b"\xe2\x80\xa8", b"\xc2\x85"])
        return s.replace(b"\n", v), f"newline={v!r}"
    if strategy == "odd_chars":
        s = bytearray(rng.choice(seeds))
        junk = ["\u200b", "\u200e", "\u202e", "\u0301" * 50, "\ufeff", "\x1b[31m", "\x07", "\x7f", "\ufffd", "\U0010ffff",
                "\ud7ff", "\t" * 100, " " * 5000]
        for _ in range(rng.randint(1, 30)):
            pos = rng.randint(0, len(s))
            s[pos:pos] = rng.choice(junk).encode("utf-8", "surrogatepass")
        return bytes(s), "control / combining / bidi chars"
    raise ValueError(strategy)


STRATEGIES = [("valid", 1), ("random_bytes", 2), ("empty", 1), ("nul_filled", 1), ("invalid_utf8", 2),
              ("huge_line", 1), ("many_lines", 1), ("truncated", 3), ("mutated", 5), ("structural", 3),
              ("bom", 1), ("line_endings", 1), ("odd_chars", 1)]
BIG = {"huge_line", "many_lines"}


def pick_strategy(rng, allow_big):
    items = [(s, w) for s, w in STRATEGIES if allow_big or s not in BIG]
    r = rng.uniform(0, sum(w for _, w in items))
    for s, w in items:
        r -= w
        if r <= 0:
            return s
    return items[-1][0]


# --------------------------------------------------------------------------------------------
# Secret files
# --------------------------------------------------------------------------------------------

# Common credential files watch.rs does not name (informational: reported when indexed).
NOT_LISTED = ["secrets.yaml", "secrets.json", "secrets.toml", "service-account.json", "client_secret.json",
              "application_default_credentials.json", "terraform.tfvars", "terraform.tfstate", "production.env",
              "prod.env", "kubeconfig", "htpasswd", "id_rsa~", "id_rsa.bak", "id_rsa_old", "server.pem.bak",
              "server.key.orig", "putty.ppk", "AuthKey_ABC123.p8", "keystore.jceks", "client.ovpn", "wallet.dat",
              "token.json", "my.cnf", "settings_secret.py", "vault-token", "git-credentials", "pgpass",
              ".git-credentials", ".pgpass", ".envrc", ".dockercfg", ".vault-token", "docker/config.json",
              "aws/credentials", "ssh/id_rsa"]


def secret_files():
    """(relative path bytes, expected by watch.rs to be skipped as secret) for every listed name
    and extension, variants, and the not-listed common names."""
    out = []
    for n in SECRET_NAMES:
        out += [n, n + ".production", n + ".local", n + ".json", n + ".pub", "sub/" + n, n.upper()]
        out += [n + ".example", n + ".sample"]  # meant to be indexable (if not hidden)
    for e in SECRET_EXTS:
        out += ["server." + e, "deep/dir/tls." + e, "CERT." + e.upper(), "a.b." + e]
    out += NOT_LISTED
    seen, res = set(), []
    for p in out:
        if p in seen:
            continue
        seen.add(p)
        res.append(p.encode())
    # A secret extension in a file name that is not UTF-8.
    res += [b"srv-\xff.pem", b"key-\xe9.key", b"id_rsa\xff"]
    return res


def write_secrets(root, rng):
    paths = []
    for rel in secret_files():
        token = "secretprobe" + "".join(rng.choice("abcdefghijklmnop") for _ in range(8))
        full = os.path.join(os.fsencode(root), rel)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "wb") as f:
            f.write(b"-----BEGIN PRIVATE KEY-----\n%s %s\npassword=hunter2 %s\n-----END PRIVATE KEY-----\n"
                    % (LEAK_TOKEN.encode(), token.encode(), LEAK_TOKEN.encode()))
        paths.append(rel)
    with open(os.path.join(root, CONTROL_NAME), "w") as f:
        f.write(f"control file, not secret: {LEAK_TOKEN}\n")
    return paths


BIN_TOKEN = "zzbinextprobeqx"      # written only into files with a binary extension


def write_binary_ext(root):
    """Files whose extension watch.rs lists as binary, holding BIN_TOKEN in plain text (a zip
    stores its member uncompressed): none may be indexed."""
    import io, zipfile
    text = f"not really binary {BIN_TOKEN}\n".encode()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        z.writestr("readme.txt", text)
    files = {b"logo.png": text, b"bundle.zip": buf.getvalue(), b"data.sqlite": text, b"model.onnx": text,
             b"lib.so": text, b"LOGO.PNG": text, b"img-\xff.png": text, b"bundle-\xe9.zip": buf.getvalue()}
    for rel, data in files.items():
        with open(os.path.join(os.fsencode(root), rel), "wb") as f:
            f.write(data)
    return list(files)


def actual_paths(root, lossy_rel):
    """The files under root whose lossily decoded relative path is `lossy_rel`."""
    rootb = os.fsencode(root)
    out = []
    for dirpath, _, filenames in os.walk(rootb):
        for fn in filenames:
            full = os.path.join(dirpath, fn)
            if os.path.relpath(full, rootb).decode("utf-8", "replace") == lossy_rel:
                out.append(full)
    return out


def classify_leaks(result_paths):
    """Splits indexed paths holding the leak token into (secret leaks, not-listed names indexed)."""
    leaks, unlisted = set(), set()
    for p in result_paths:
        name = p.rsplit("/", 1)[-1]
        if name == CONTROL_NAME or name.lower().endswith((".example", ".sample")):
            continue
        if intended_secret(name.replace("\ufffd", "_")) or name.startswith("link_"):  # link_*: a followed symlink
            leaks.add(p)
        else:
            unlisted.add(p)
    return sorted(leaks), sorted(unlisted)


# --------------------------------------------------------------------------------------------
# Running ctxd
# --------------------------------------------------------------------------------------------

def base_env(extra=None):
    env = dict(os.environ)
    env.update({"CTXD_LOG": "warn", "HF_HUB_OFFLINE": "1", "RUST_BACKTRACE": "1", "NO_COLOR": "1"})
    env.update(extra or {})
    return env


def run_cmd(cmd, env, timeout):
    """Runs cmd in its own process group; returns (rc, stdout, stderr, seconds, timed_out)."""
    t0 = time.time()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
        return p.returncode, out, err, time.time() - t0, False
    except subprocess.TimeoutExpired:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, err = p.communicate()
        return p.returncode, out, err, time.time() - t0, True


PANIC_RE = re.compile(r"panicked at ([^\n:]+:\d+:\d+):\n([^\n]*)")
CRASHED_ON_RE = re.compile(r"(\w+) stage crashed on (.*?): (.*)")


def analyse(rc, out, err, timed_out):
    """Outcome of one `ctxd index` run."""
    text = err.decode("utf-8", "replace")
    res = {"rc": rc, "timed_out": timed_out, "summary": None, "panics": [], "crashed_on": [], "error": None}
    for m in PANIC_RE.finditer(text):
        res["panics"].append((m.group(1), m.group(2)[:200]))
    for m in CRASHED_ON_RE.finditer(text):
        res["crashed_on"].append((m.group(1), m.group(2), m.group(3)[:200]))
    for line in reversed(out.decode("utf-8", "replace").strip().splitlines()):
        try:
            res["summary"] = json.loads(line)
            break
        except ValueError:
            continue
    overflow = "has overflowed its stack" in text
    if timed_out:
        res["status"] = "hang"
    elif rc is not None and (rc < 0 or rc in (101, 134, 137, 139) or overflow):
        res["status"] = "crash"
    elif rc != 0:
        res["status"] = "error_exit"
        lines = [l for l in text.strip().splitlines() if l.strip()]
        res["error"] = lines[-1][:300] if lines else "(no message)"
    elif res["summary"] is None:
        res["status"] = "no_summary"
    elif res["panics"] or res["crashed_on"]:
        res["status"] = "caught_panic"
    else:
        res["status"] = "ok"
    if overflow:
        res["error"] = "stack overflow"
    return res


def signature(res):
    """What identifies a failure when reducing it."""
    if res["status"] == "caught_panic":
        return ("caught_panic", tuple(sorted({p[0] for p in res["panics"]})))
    return (res["status"],)


def index_cmd(ctxd, root, db):
    return [ctxd, "index", root, "--db", db, "--json", "--no-embed"]


def search_paths(ctxd, db, query, env, timeout):
    rc, out, err, _, to = run_cmd([ctxd, "search", query, "--db", db, "--mode", "bm25", "--k", "200", "--json"], env, timeout)
    if to or rc != 0:
        return None, (err.decode("utf-8", "replace").strip().splitlines() or ["timeout"])[-1]
    try:
        res = json.loads(out.decode("utf-8", "replace"))
        return [r["path"] for r in res.get("results", []) if query in r.get("content", "")], None
    except ValueError as e:
        return None, f"unparsable search output: {e}"


# --------------------------------------------------------------------------------------------
# Rounds
# --------------------------------------------------------------------------------------------

class Bench:
    def __init__(self, args):
        self.args = args
        self.work = args.work or tempfile.mkdtemp(prefix="fuzz-loaders-")
        os.makedirs(self.work, exist_ok=True)
        self.fed = collections.Counter()          # (kind, strategy) -> files
        self.rounds = []                          # per-round records
        self.findings = []                        # dicts
        self.totals = collections.Counter()
        self.leaks, self.unlisted = set(), set()
        self.secret_written = 0
        self.binext_written = 0
        self.binext_indexed = set()
        self.leak_saved = set()
        self.odd = []                             # strings
        self.panic_sites = collections.Counter()
        self.seen_sigs = set()
        self.bisect_left = args.bisect_seconds
        self.reduce_queue = []
        self.reduce_timeout = None
        os.makedirs(args.findings, exist_ok=True)

    # -- file sets ----------------------------------------------------------------------------
    def new_file(self, rng, root, n, allow_big, files):
        kind = rng.choice(list(KINDS))
        strategy = pick_strategy(rng, allow_big)
        data, note = generate(rng, kind, strategy, self.args.huge_mb << 20)
        ext = KINDS[kind][0]
        sub = rng.choice(["", "", "", "docs/", "src/deep/er/", "ünïcode dir/"])
        name = f"{sub}f{n:04d}_{strategy}" + (f".{ext}" if ext else "_NOEXT")
        path = os.path.join(root, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
        files[name] = {"kind": kind, "strategy": strategy, "note": note, "bytes": len(data)}
        self.fed[(kind, strategy)] += 1
        return strategy in BIG

    def odd_names(self, rng, root, files):
        names = ["name with spaces.md", "new\nline.txt", "tab\tname.py", "back\\slash.rs", "-dash.txt", "ütf8-名前.md",
                 "e\u0301-nfd.txt", "x" * 240 + ".txt", "a.b.c.d.json", "trailing.dot.", "UPPER.PY", "semi;colon.sh",
                 "quote'\"name.js", "emoji-🙂.html"]
        for nm in rng.sample(names, 4):
            with open(os.path.join(root, nm), "wb") as f:
                f.write(PYTHON.encode() if nm.lower().endswith(".py") else TEXT.encode())
            files[nm] = {"kind": "odd_name", "strategy": "odd_name", "note": repr(nm), "bytes": len(TEXT)}
            self.fed[("odd_name", "valid")] += 1
        bad = b"latin1-\xe9-name.txt"
        with open(os.path.join(os.fsencode(root), bad), "wb") as f:
            f.write(TEXT.encode())
        files[os.fsdecode(bad)] = {"kind": "odd_name", "strategy": "odd_name", "note": "non-UTF-8 file name", "bytes": len(TEXT)}
        self.fed[("odd_name", "valid")] += 1

    def expected_seen(self, root):
        n = 0
        rootb = os.fsencode(root)
        for dirpath, dirnames, filenames in os.walk(rootb):
            dirnames[:] = [d for d in dirnames if not d.startswith(b".")]
            for fn in filenames:
                full = os.path.join(dirpath, fn)
                if os.path.islink(full) or not os.path.isfile(full):
                    continue
                rel = os.path.relpath(full, rootb)
                if rust_skipped_by_scan(rel) is None:
                    n += 1
        return n

    def big_round(self, i):
        """Rounds that may carry one huge-line / many-lines file (a 5 MB line takes 10-25 s to
        index with a debug build): every fourth."""
        return i % 4 == 2

    # -- one round ----------------------------------------------------------------------------
    def round(self, i):
        args = self.args
        rng = random.Random(f"{args.seed}-round-{i}")
        fresh = i % 3 == 0 or not self.rounds or self.rounds[-1]["status"] != "ok"
        rdir = os.path.join(self.work, f"r{i:04d}")
        if fresh:
            if getattr(self, "cur", None):
                self.past = (getattr(self, "past", []) + [{"files": dict(self.cur["files"])}])[-50:]
            self.cur = {"dir": rdir, "root": os.path.join(rdir, "src"), "db": os.path.join(rdir, "db"), "files": {}, "n": 0}
            os.makedirs(self.cur["root"])
            root, files = self.cur["root"], self.cur["files"]
            big = not self.big_round(i)
            for _ in range(args.files):
                big |= self.new_file(rng, root, self.cur["n"], not big, files)
                self.cur["n"] += 1
            self.secret_written += len(write_secrets(root, rng))
            self.binext_written += len(write_binary_ext(root))
            self.odd_names(rng, root, files)
        else:
            root, files = self.cur["root"], self.cur["files"]
            names = sorted(k for k, v in files.items() if v["kind"] in KINDS)
            big = not self.big_round(i)
            for nm in names:
                r = rng.random()
                if r < 0.15:
                    os.remove(os.path.join(root, nm))
                    del files[nm]
                elif r < 0.6:  # rewritten in place: same name, new content of the same kind
                    v = files[nm]
                    strategy = pick_strategy(rng, not big)
                    big |= strategy in BIG
                    data, note = generate(rng, v["kind"], strategy, args.huge_mb << 20)
                    with open(os.path.join(root, nm), "wb") as f:
                        f.write(data)
                    files[nm] = dict(v, strategy=strategy, note=note + " (in place)", bytes=len(data))
                    self.fed[(v["kind"], strategy)] += 1
            for _ in range(rng.randint(1, 4)):
                big |= self.new_file(rng, root, self.cur["n"], not big, files)
                self.cur["n"] += 1
        stream = i % 2 == 1
        env = base_env({"CTXD_SOURCE_STREAM_THRESHOLD_BYTES": "65536"} if stream else None)
        t0 = time.time()
        # A 5 MB line takes ~30 s to index with a debug build on a loaded machine: rounds that may
        # carry one get three times the hang timeout (and are reported as slow past --slow).
        timeout = args.timeout * (3 if self.big_round(i) else 1)
        rc, out, err, secs, to = run_cmd(index_cmd(args.ctxd, root, self.cur["db"]), env, timeout)
        res = analyse(rc, out, err, to)
        res["timeout"] = timeout
        rec = {"round": i, "fresh": fresh, "stream_threshold": 65536 if stream else None, "files": len(files),
               "seconds": round(secs, 1), "status": res["status"], "summary": res["summary"]}
        self.rounds.append(rec)
        s = res["summary"]
        if s:
            for k in ("files_seen", "files_indexed", "files_unchanged", "files_removed", "files_skipped", "files_failed", "chunks_written"):
                self.totals[k] += s.get(k, 0)
            exp = self.expected_seen(root)
            if s.get("files_seen") != exp:
                self.odd.append(f"round {i}: files_seen {s.get('files_seen')} but {exp} files are indexable by name")
            parts = sum(s.get(k, 0) for k in ("files_indexed", "files_unchanged", "files_skipped", "files_failed"))
            if parts != s.get("files_seen"):
                self.odd.append(f"round {i}: indexed+unchanged+skipped+failed = {parts} != files_seen {s.get('files_seen')}")
        for site, msg in res["panics"]:
            self.panic_sites[(site, msg)] += 1
        if res["status"] == "ok" and secs > args.slow:
            res["status"], res["error"] = "slow", f"{secs:.1f}s (> --slow {args.slow:g}s)"
            rec["status"] = "ok (slow)"
        if res["status"] != "ok":
            self.record_failure(i, res, err, env, fresh)
        # Secret leak check after every fresh round (BM25 search for the token only secret files hold).
        if fresh and res["summary"]:
            paths, why = search_paths(args.ctxd, self.cur["db"], LEAK_TOKEN, base_env(), args.timeout)
            if paths is None:
                self.odd.append(f"round {i}: leak search failed: {why}")
            else:
                leaks, unlisted = classify_leaks(paths)
                self.leaks.update(leaks)
                self.unlisted.update(unlisted)
                if not any(p.endswith(CONTROL_NAME) for p in paths):
                    self.odd.append(f"round {i}: the control file with the leak token was not found by bm25 search")
                rec["leak_check"] = {"hits": len(paths), "leaks": leaks}
                self.save_leaks(f"secret-leak-r{i}", "secret_leak", leaks, root, err)
            bpaths, why = search_paths(args.ctxd, self.cur["db"], BIN_TOKEN, base_env(), args.timeout)
            if bpaths is None:
                self.odd.append(f"round {i}: binary-extension search failed: {why}")
            else:
                self.binext_indexed.update(bpaths)
                self.save_leaks(f"binary-ext-indexed-r{i}", "binary_ext_indexed", sorted(set(bpaths)), root, err)
        status = res["status"] + (f" ({res['error']})" if res.get("error") else "")
        print(f"round {i:3d} {'fresh' if fresh else 'reuse'}{' stream' if stream else ''}: {len(files)} fuzz files, "
              f"{secs:5.1f}s, {status}"
              + (f", seen {s['files_seen']} indexed {s['files_indexed']} skipped {s['files_skipped']} failed {s['files_failed']}" if s else ""),
              flush=True)
        return time.time() - t0

    def record_failure(self, i, res, err, env, fresh):
        sig = signature(res)
        fid = f"r{i:04d}-{res['status']}"
        info = {"round": i, "status": res["status"], "rc": res["rc"], "error": res["error"], "panics": res["panics"],
                "crashed_on": res["crashed_on"], "fresh_db": fresh,
                "env": {k: v for k, v in env.items() if k.startswith(("CTXD_", "RUST_"))},
                "command": " ".join(index_cmd(self.args.ctxd, "SRC", "DB"))}
        # A stage that names the file it crashed on: save that file.
        named = []
        for stage, path, msg in res["crashed_on"]:
            rel = path
            if rel.startswith(self.cur["root"]):
                rel = os.path.relpath(rel, self.cur["root"])
            src = os.path.join(self.cur["root"], rel)
            if os.path.exists(src):
                named.append((rel, src))
        d = self.save_finding(fid, res["status"], info, err, named, round_dir=self.cur["root"])
        self.findings[-1]["named_inputs"] = [r for r, _ in named]
        key = sig if sig != ("slow",) else ("slow", min(3, sum(1 for k in self.seen_sigs if k[0] == "slow")))
        if key not in self.seen_sigs:
            self.seen_sigs.add(key)
            # Reduced later from the saved copy (a reused folder changes in the next rounds).
            self.findings[-1]["timeout"] = res["timeout"]
            self.reduce_queue.append((self.findings[-1], sig, os.path.join(d, "round"), dict(env), d))

    def save_leaks(self, fid, status, paths, root, err):
        """A finding for indexed paths that must not be (once per distinct set of names)."""
        key = (status, tuple(sorted({p.rsplit("/", 1)[-1] for p in paths})))
        if not paths or key in self.leak_saved:
            return
        self.leak_saved.add(key)
        inputs = []
        for p in paths:
            for full in actual_paths(root, p):
                inputs.append((os.fsdecode(os.path.relpath(full, os.fsencode(root))), os.fsdecode(full)))
        self.save_finding(fid, status, {"indexed paths": paths, "actual names": [repr(os.fsencode(r)) for r, _ in inputs]},
                          err, inputs)

    def save_finding(self, fid, status, info, err, inputs, round_dir=None):
        d = os.path.join(self.args.findings, fid)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        with open(os.path.join(d, "stderr.txt"), "wb") as f:
            f.write(err[-200000:])
        with open(os.path.join(d, "info.json"), "w") as f:
            json.dump(info, f, indent=1, default=str)
        for rel, src in inputs:
            dst = os.path.join(d, "input", rel)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copyfile(src, dst)
        if round_dir:
            shutil.copytree(round_dir, os.path.join(d, "round"), symlinks=True)
        self.findings.append({"id": fid, "status": status, "dir": d, "info": info})
        return d

    def cur_files_note(self, root, rel):
        size = os.path.getsize(os.path.join(root, rel))
        for rnd in [self.cur] + getattr(self, "past", []):
            v = rnd["files"].get(rel)
            if v:
                return f"{v['kind']}/{v['strategy']}: {v['note']}, {size} B"
        return f"{size} B"

    # -- reduction ----------------------------------------------------------------------------
    def reproduces(self, root, rels, env, sig):
        if self.bisect_left <= 0:
            return None
        tmp = tempfile.mkdtemp(prefix="reduce-", dir=self.work)
        src = os.path.join(tmp, "src")
        os.makedirs(src)
        for rel in rels:
            dst = os.path.join(src, rel)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copyfile(os.path.join(root, rel), dst)
        timeout = self.reduce_timeout or self.args.timeout
        rc, out, err, secs, to = run_cmd(index_cmd(self.args.ctxd, src, os.path.join(tmp, "db")), env, timeout)
        self.bisect_left -= secs
        shutil.rmtree(tmp, ignore_errors=True)
        res = analyse(rc, out, err, to)
        if sig == ("slow",):
            return res["status"] == "ok" and secs > self.args.slow / 2
        return signature(res) == sig

    def reduce(self, finding, sig, root, env, d):
        self.reduce_timeout = finding.get("timeout")
        rels = []
        for dirpath, _, filenames in os.walk(root):
            for fn in filenames:
                rels.append(os.path.relpath(os.path.join(dirpath, fn), root))
        rels.sort()
        if not self.reproduces(root, rels, env, sig):
            finding["reduced"] = ("not reproduced on a fresh index" + (" (slow under load, not a hang?)" if sig == ("hang",) else "")
                                  if self.bisect_left > 0 else "out of reduction time")
            return
        while len(rels) > 1:
            half = len(rels) // 2
            a, b = rels[:half], rels[half:]
            ra = self.reproduces(root, a, env, sig)
            if ra:
                rels = a
                continue
            rb = self.reproduces(root, b, env, sig)
            if rb:
                rels = b
                continue
            # Neither half alone: try the files one by one (largest first), else keep the set.
            one = next((r for r in sorted(rels, key=lambda r: -os.path.getsize(os.path.join(root, r)))[:8]
                        if self.reproduces(root, [r], env, sig)), None)
            if one:
                rels = [one]
            break
        finding["reduced"] = rels
        finding["files"] = {r: self.cur_files_note(root, r) for r in rels}
        for rel in rels:
            dst = os.path.join(d, "input", rel)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copyfile(os.path.join(root, rel), dst)

    # -- the daemon round ---------------------------------------------------------------------
    def serve_round(self):
        args = self.args
        rng = random.Random(f"{args.seed}-serve")
        rdir = os.path.join(self.work, "serve")
        root, db = os.path.join(rdir, "src"), os.path.join(rdir, "db")
        os.makedirs(root)
        files = {}
        n = 0
        # One file per (kind, strategy) where it is cheap, a single big one.
        for kind in KINDS:
            for strategy, _ in STRATEGIES:
                if strategy in BIG:
                    continue
                data, note = generate(rng, kind, strategy, args.huge_mb << 20)
                ext = KINDS[kind][0]
                name = f"s{n:04d}_{kind}_{strategy}" + (f".{ext}" if ext else "_NOEXT")
                with open(os.path.join(root, name), "wb") as f:
                    f.write(data)
                files[name] = kind
                self.fed[(kind, strategy)] += 1
                n += 1
        with open(os.path.join(root, "huge_line.md"), "wb") as f:
            f.write(huge_line(rng, "md", args.huge_mb << 20))
        self.fed[("md", "huge_line")] += 1
        self.secret_written += len(write_secrets(root, rng))
        self.binext_written += len(write_binary_ext(root))
        probes = self.write_probes(root)
        # Indexed by the scan, then changed after it (checked once the events are committed).
        keep_pdf = pdf_classic(pdf_objects(["keep me probekeeppdf", "page two"]))
        later = [("probe_keep.pdf", keep_pdf, lambda p: open(p, "wb").write(keep_pdf[:len(keep_pdf) // 3]),
                  "probekeeppdf", True, "a PDF truncated after being indexed keeps its indexed version (by design)"),
                 ("probe_gone.txt", b"soon binary probegonetxt\n", lambda p: open(p, "wb").write(b"\0" * 64),
                  "probegonetxt", False, "a text file that turns binary is removed from the index"),
                 ("probe_rename.txt", b"renamed to a secret name proberenamesecret\n",
                  lambda p: os.rename(p, p[:-4] + ".pem"),
                  "proberenamesecret", False, "an indexed file renamed to a secret name (.pem) leaves the index"),
                 ("probe_delete.md", b"# deleted probedeletemd\n", os.remove,
                  "probedeletemd", False, "a deleted file leaves the index")]
        self.originals = {}
        for name, data, _, _, _, _ in later:
            with open(os.path.join(root, name), "wb") as f:
                f.write(data)
            self.originals[name] = os.path.join(rdir, name + ".as-indexed")
            with open(self.originals[name], "wb") as f:
                f.write(data)
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        env = base_env({"CTXD_SOURCE_EMBED": "false", "CTXD_SOURCE_STREAM_THRESHOLD_BYTES": "65536",
                        "CTXD_SOURCE_MAX_FILE_BYTES": str(4 << 20), "CTXD_SOURCE_DEBOUNCE_MS": "200"})
        log = open(os.path.join(rdir, "serve.stderr"), "wb")
        cmd = [args.ctxd, "serve", "--watch", root, "--db", db, "--listen", f"127.0.0.1:{port}",
               "--flight-listen", "127.0.0.1:0"]
        proc = subprocess.Popen(cmd, stdout=log, stderr=log, env=env, start_new_session=True)
        out = {"command": " ".join(cmd), "status": "ok"}
        t0 = time.time()
        try:
            ready = False
            while time.time() - t0 < args.ready_timeout:
                if proc.poll() is not None:
                    break
                try:
                    with urllib.request.urlopen(base + "/readyz", timeout=2) as r:
                        if r.status == 200:
                            ready = True
                            break
                except Exception:
                    pass
                time.sleep(0.5)
            out["ready_s"] = round(time.time() - t0, 1)
            if not ready:
                out["status"] = "crash" if proc.poll() is not None else "hang"
                out["rc"] = proc.poll()
                return out
            pre = self.check_probes(base, [(n, t, True, "indexed by the scan") for n, _, _, t, _, _ in later])
            for name, _, change, _, _, _ in later:
                change(os.path.join(root, name))
            # Events after the scan: secret names, renames onto secret names, symlinks, new fuzz files.
            ev = os.path.join(root, "events")
            os.makedirs(ev)
            write_secrets(ev, rng)
            for nm in ["id_rsa", "server.pem", "credentials"]:
                tmp = os.path.join(ev, f"renamed_{nm}_src.txt")
                with open(tmp, "w") as f:
                    f.write(f"renamed onto a secret name {LEAK_TOKEN}\n")
                time.sleep(0.05)
                os.rename(tmp, os.path.join(ev, "r_" + nm.replace("server", "moved")))  # r_id_rsa is not secret; moved.pem is
            os.symlink(os.path.join(root, "server.pem"), os.path.join(ev, "link_to_secret.txt"))
            os.symlink("/etc/hostname", os.path.join(ev, "link_outside.txt"))
            for j in range(12):
                kind = rng.choice(list(KINDS))
                strategy = pick_strategy(rng, False)
                data, _ = generate(rng, kind, strategy, 0)
                ext = KINDS[kind][0]
                with open(os.path.join(ev, f"e{j:03d}_{strategy}" + (f".{ext}" if ext else "_NOEXT")), "wb") as f:
                    f.write(data)
                self.fed[(kind, strategy)] += 1
            control = "eventcontrolprobe"
            with open(os.path.join(ev, "event_control.txt"), "w") as f:
                f.write(f"{control} written last\n")
            visible = False
            t1 = time.time()
            while time.time() - t1 < 60:
                try:
                    hits = post(base, "/v1/search", {"query": control, "k": 5, "mode": "bm25"}, timeout=10)["results"]
                    if any(control in h["content"] for h in hits):
                        visible = True
                        break
                except Exception:
                    pass
                time.sleep(0.5)
            out["events_visible_s"] = round(time.time() - t1, 1) if visible else None
            if not visible:
                self.odd.append("serve: files written after the scan were not searchable within 60 s")
            time.sleep(3)  # let the other event files commit
            hits = post(base, "/v1/search", {"query": LEAK_TOKEN, "k": 200, "mode": "bm25"}, timeout=30)["results"]
            paths = sorted({h["path"] for h in hits if LEAK_TOKEN in h["content"]})
            leaks, unlisted = classify_leaks(paths)
            # r_id_rsa / r_credentials hold the token but are not secret names; the renamed moved.pem is.
            unlisted = [p for p in unlisted if not p.rsplit("/", 1)[-1].startswith("r_")]
            self.leaks.update(leaks)
            self.unlisted.update(unlisted)
            self.save_leaks("serve-secret-leak", "secret_leak", leaks, root, b"")
            hits = post(base, "/v1/search", {"query": BIN_TOKEN, "k": 200, "mode": "bm25"}, timeout=30)["results"]
            bpaths = sorted({h["path"] for h in hits if BIN_TOKEN in h["content"]})
            self.binext_indexed.update(bpaths)
            self.save_leaks("serve-binary-ext-indexed", "binary_ext_indexed", bpaths, root, b"")
            out["leak_hits"] = len(paths)
            out["probes"] = pre + self.check_probes(base, probes + [(n, t, e, w) for n, _, _, t, e, w in later], root)
            with urllib.request.urlopen(base + "/metrics", timeout=10) as r:
                out["metrics"] = parse_metrics(r.read().decode())
        except Exception as e:  # a dead daemon mid-round
            out["status"] = "crash" if proc.poll() is not None else "error"
            out["error"] = repr(e)
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    out["rc"] = proc.wait(timeout=60)
                    out["stop_s"] = round(time.time() - t0, 1)
                except subprocess.TimeoutExpired:
                    out["status"] = "hang (did not drain within 60 s of SIGTERM)"
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
            else:
                out["rc"] = proc.returncode
            log.close()
            with open(os.path.join(rdir, "serve.stderr"), "rb") as f:
                err = f.read()
            text = err.decode("utf-8", "replace")
            out["panics"] = [(m.group(1), m.group(2)[:200]) for m in PANIC_RE.finditer(text)]
            out["crashed_on"] = [(m.group(1), m.group(2), m.group(3)[:200]) for m in CRASHED_ON_RE.finditer(text)]
            if out.get("rc") not in (0, None) and out["status"] == "ok":
                out["status"] = "error_exit"
            if out["status"] != "ok" or out["panics"]:
                self.save_finding("serve-" + out["status"].split()[0], out["status"], {k: v for k, v in out.items() if k != "metrics"},
                                  err, [], round_dir=root)
        return out

    def write_probes(self, root):
        """Files with a token each and what a BM25 search for it should find."""
        probes = []

        def probe(name, data, token, expect, why):
            with open(os.path.join(root, name), "wb") as f:
                f.write(data)
            probes.append((name, token, expect, why))

        tok = "probenbbom"
        nb = json.dumps(notebook_json([{"cell_type": "markdown", "source": f"notebook with bom {tok}"}])).encode()
        probe("probe_bom.ipynb", b"\xef\xbb\xbf" + nb, tok, True, "a notebook saved with a UTF-8 BOM is indexed")
        tok = "probenbutf"
        nb16 = json.dumps(notebook_json([{"cell_type": "markdown", "source": f"utf16 notebook {tok}"}]))
        probe("probe_utf16.ipynb", b"\xff\xfe" + nb16.encode("utf-16-le"), tok, True, "a UTF-16 notebook (with BOM) is indexed")
        tok = "probehtmlutf"
        probe("probe_utf16.html", b"\xff\xfe" + f"<html><body><p>utf16 html {tok}</p></body></html>".encode("utf-16-le"),
              tok, True, "a UTF-16 HTML file (with BOM) is indexed")
        tok = "probepdfnoext"
        probe("PROBE_REPORT", pdf_classic(pdf_objects([f"sniffed pdf {tok}"])), tok, True, "an extension-less PDF is sniffed and its text indexed")
        tok = "probepdfbig"
        pad = b"%" + b"padding comment probepdfraw " * 4000 + b"\n"
        big = pdf_classic(pdf_objects([f"big pdf text {tok}"]), header=b"%PDF-1.4\n" + pad)
        probe("probe_big.pdf", big, tok, True, "a PDF over the streaming threshold (64 KiB here) has its page text indexed")
        probes.append(("probe_big.pdf", "probepdfraw", False, "… and is not indexed as raw PDF syntax"))
        tok = "probepdfflatebig"
        prng = random.Random(7)
        words = ["".join(prng.choices("abcdefghijklmnopqrstuvwxyz", k=prng.randint(3, 9))) for _ in range(40000)]
        pages = [" ".join(words[i:i + 1200]) for i in range(0, len(words), 1200)]
        pages[0] = f"compressed big pdf {tok} " + pages[0]
        probe("probe_big_flate.pdf", pdf_classic(pdf_objects(pages, flate=True)), tok, True,
              "a compressed PDF over the streaming threshold has its page text indexed")
        tok = "probenbcut"
        cells = [{"cell_type": "code", "source": "x = 1", "outputs": [{"output_type": "stream", "text": "y" * 400 + f" {tok}"}]}]
        cells += [{"cell_type": "markdown", "source": "filler " * 50} for _ in range(300)]
        probe("probe_big.ipynb", json.dumps(notebook_json(cells)).encode(), tok, False,
              "a notebook over the streaming threshold keeps outputs cut (≤300 chars): text past them not indexed")
        tok = "probehtmlscript"
        page = "<html><head><script>var s = '" + tok + "';</script></head><body>" + "<p>filler text</p>\n" * 5000 + "</body></html>"
        probe("probe_big.html", page.encode(), tok, False, "an HTML file over the streaming threshold: <script> text not indexed")
        tok = "probeutfsixteenbig"
        probe("probe_big_utf16.txt", b"\xff\xfe" + (("utf16 line\n" * 4000) + tok + "\n").encode("utf-16-le"), tok, True,
              "a UTF-16 text over the streaming threshold is transcoded")
        tok = "probenulafter"
        probe("probe_nul_after_8k.txt", b"a" * 9000 + b"\n" + tok.encode() + b"\n" + b"\0" * 100, tok, True,
              "NUL bytes after the first 8 KiB: indexed (by design, only 8 KiB are sniffed)")
        tok = "probecrlfonly"
        probe("probe_cr_only.md", f"# Title\r\rText {tok}\r".encode(), tok, True, "a CR-only Markdown file is indexed")
        for i, seed in enumerate(["classic", "flate", "tounicode", "xrefstream"]):
            tok = "probeseedpdf" + "abcd"[i]
            text = [f"seed pdf {seed} {tok}", "second page"]
            data = [pdf_classic(pdf_objects(text)), pdf_classic(pdf_objects(text, flate=True)),
                    pdf_classic(pdf_objects(text, tounicode=True)), pdf_xref_stream(text)][i]
            probe(f"probe_seed_{seed}.pdf", data, tok, True, f"the {seed} PDF seed is valid (its text is indexed)")
        tok = "probeemptypdfpage"
        objs = pdf_objects(["", f"second page {tok}"])
        probe("probe_empty_page.pdf", pdf_classic(objs), tok, True, "a PDF whose first page has no text keeps its second page")
        return probes

    def check_probes(self, base, probes, root=None):
        res = []
        for name, token, expect, why in probes:
            try:
                hits = post(base, "/v1/search", {"query": token, "k": 10, "mode": "bm25"}, timeout=30)["results"]
                found = sorted({h["path"] for h in hits if token in h["content"]})
            except Exception as e:
                found = [f"error {e!r}"]
            ok = bool(found) == expect
            res.append({"file": name, "token": token, "expect_found": expect, "found_in": found, "ok": ok, "why": why})
            if not ok:
                self.odd.append(f"probe {name}: expected {'found' if expect else 'not found'}, got {found or 'nothing'} — {why}")
                if root:
                    full = os.path.join(root, name)
                    originals = [(name + ".as-indexed", self.originals[name])] if name in self.originals else []
                    self.save_finding(f"probe-{name}", "probe", {"probe": name, "token": token, "expect_found": expect,
                                                                 "found_in": found, "why": why},
                                      b"", ([(name, full)] if os.path.exists(full) else []) + originals)
        return res


def parse_metrics(text):
    want = re.compile(r"^(ctxd_load_\w+|ctxd_watch_skipped_total|ctxd_watch_files_total|ctxd_stage_errors_total|"
                      r"ctxd_chunk_stream_\w+)(\{[^}]*\})?\s+([0-9.eE+-]+)$")
    out = {}
    for line in text.splitlines():
        m = want.match(line.strip())
        if m and float(m.group(3)) != 0:
            out[m.group(1) + (m.group(2) or "")] = float(m.group(3))
    return out


# --------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------

def report(b, serve, wall):
    args = b.args
    st = collections.Counter(r["status"] for r in b.rounds)
    print("\n=== fuzz_loaders summary ===")
    print(f"command: {' '.join(sys.argv)}")
    print(f"binary: {args.ctxd}   seed {args.seed}   budget {args.seconds}s   wall {wall:.0f}s   timeout {args.timeout}s")
    print(f"rounds: {len(b.rounds)} (fresh {sum(r['fresh'] for r in b.rounds)}, reused {sum(not r['fresh'] for r in b.rounds)}, "
          f"streaming threshold 64 KiB in {sum(1 for r in b.rounds if r['stream_threshold'])}), "
          f"mean {sum(r['seconds'] for r in b.rounds) / max(1, len(b.rounds)):.1f}s per index run")
    print(f"outcomes: " + ", ".join(f"{k} {v}" for k, v in sorted(st.items())))
    crashes = st["crash"] + (serve or {}).get("status", "").startswith("crash")
    hangs = st["hang"] + (serve or {}).get("status", "").startswith("hang")
    print(f"crashes: {crashes}   hangs: {hangs}   non-zero exits: {st['error_exit']}   "
          f"runs with caught panics: {st['caught_panic']}   no summary: {st['no_summary']}")
    kinds = list(KINDS) + ["odd_name"]
    strategies = [s for s, _ in STRATEGIES]
    print("\nfiles fed (kind × strategy):")
    w = 6
    print("  " + "kind".ljust(9) + "".join(s[:w].rjust(w + 1) for s in strategies) + "  total")
    for k in kinds:
        row = [b.fed[(k, s)] for s in strategies]
        if k == "odd_name":
            row = [0] * len(strategies)
            row[0] = b.fed[("odd_name", "valid")]
        print("  " + k.ljust(9) + "".join(str(x).rjust(w + 1) for x in row) + f"  {sum(row):5d}")
    print(f"  total {sum(b.fed.values())} generated files, plus {b.secret_written} secret-name files")
    t = b.totals
    print(f"\nctxd index summaries (summed): seen {t['files_seen']}, indexed {t['files_indexed']}, unchanged {t['files_unchanged']}, "
          f"removed {t['files_removed']}, skipped {t['files_skipped']}, failed {t['files_failed']}, chunks {t['chunks_written']}")
    if serve:
        print(f"\nserve round: {serve.get('status')} (ready {serve.get('ready_s')}s, event files visible after "
              f"{serve.get('events_visible_s')}s, exit {serve.get('rc')} after SIGTERM)")
        for k, v in sorted((serve.get("metrics") or {}).items()):
            print(f"  {k} {v:g}")
        if serve.get("panics") or serve.get("crashed_on"):
            print(f"  panics in the daemon log: {serve.get('panics')} {serve.get('crashed_on')}")
        if serve.get("probes"):
            print("probes (BM25 over HTTP):")
            for p in serve["probes"]:
                print(f"  {'ok  ' if p['ok'] else 'ODD '} {p['file']}: expect {'found' if p['expect_found'] else 'absent'}, "
                      f"{'found' if p['found_in'] else 'absent'} — {p['why']}")
    print(f"\nsecret files indexed: {len(b.leaks)} (must be 0){': ' + ', '.join(map(repr, sorted(b.leaks))) if b.leaks else ''}")
    print(f"binary-extension files indexed: {len(b.binext_indexed)} of {b.binext_written} written"
          f"{': ' + ', '.join(map(repr, sorted(b.binext_indexed))) if b.binext_indexed else ''}")
    names = sorted({p.rsplit("/", 1)[-1] for p in b.unlisted})
    print(f"common secret names not excluded by watch.rs (indexed, by scan or by event): {len(names)}")
    print("  " + ", ".join(map(repr, names)))
    hidden = [n for n in NOT_LISTED if n.rsplit("/", 1)[-1].startswith(".")]
    print(f"  (not indexed only because hidden files are skipped: {', '.join(hidden)})")
    if b.panic_sites:
        print("\ncaught panics (site: message × runs):")
        for (site, msg), n in b.panic_sites.most_common():
            print(f"  {site}: {msg} × {n}")
    if b.odd:
        print("\nodd behaviour:")
        for o in dict.fromkeys(b.odd):
            print(f"  {o}")
    if b.findings:
        print("\nfindings (inputs saved):")
        for f in b.findings:
            red = f.get("reduced")
            extra = f" reduced to {red}" if isinstance(red, list) else (f" ({red})" if red else "")
            print(f"  {f['status']}: {f['dir']}{extra}  {f['info'].get('error') or ''} {f['info'].get('crashed_on') or ''}")
            for r, note in (f.get("files") or {}).items():
                print(f"      {r!r}: {note}")
    return crashes + hangs + len(b.leaks)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ctxd", default=default_ctxd())
    ap.add_argument("--seconds", type=float, default=120, help="fuzzing time (the serve round and reductions come after)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=60,
                    help="per ctxd run: longer is a hang (x3 for the rounds that may carry a huge file)")
    ap.add_argument("--files", type=int, default=16, help="generated files per fresh round")
    ap.add_argument("--slow", type=float, default=45, help="an index run longer than this is reported (and reduced)")
    ap.add_argument("--huge-mb", type=int, default=5, help="size of the huge single-line files")
    ap.add_argument("--findings", default="/tmp/fuzz-findings")
    ap.add_argument("--work", help="working folder (default: a new temporary one, deleted unless --keep)")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--no-serve", action="store_true")
    ap.add_argument("--ready-timeout", type=float, default=300)
    ap.add_argument("--bisect-seconds", type=float, default=180, help="time allowed for reducing failures to one input")
    ap.add_argument("--max-rounds", type=int, default=0)
    args = ap.parse_args()
    if not os.access(args.ctxd, os.X_OK):
        sys.exit(f"no ctxd binary at {args.ctxd}")
    b = Bench(args)
    t0 = time.time()
    i = 0
    try:
        while time.time() - t0 < args.seconds and (not args.max_rounds or i < args.max_rounds):
            b.round(i)
            i += 1
        serve = None if args.no_serve else b.serve_round()
        for finding, sig, root, env, d in b.reduce_queue:
            print(f"reducing {finding['id']} …", flush=True)
            b.reduce(finding, sig, root, env, d)
        code = report(b, serve, time.time() - t0)
    finally:
        if not args.keep and not args.work:
            shutil.rmtree(b.work, ignore_errors=True)
    sys.exit(1 if code else 0)


if __name__ == "__main__":
    main()
