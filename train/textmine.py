"""Text side of mine_pairs.py: docs cut out of definition chunks, the BM25 index that picks hard
negatives, and the CoSQA near-duplicate filter.

- `split_doc(chunk, path)`: a definition's doc (Python docstring, or the comment block at the
  top of the chunk in other languages) as a query, and the chunk's text with it cut out.
- `Bm25`: k1 0.9, b 0.4 over identifier-aware tokens; terms in more than half the documents are
  skipped when scoring (they weigh little and cost most).
- `CosqaIndex`: exact normalized-token matches and Jaccard >= 0.8 over 5-token shingles, with an
  inverted index of shingle hashes (crc32) as the pre-filter.
"""
import ast
import heapq
import inspect
import io
import math
import os
import re
import tokenize
import zlib
from collections import Counter

WORD = re.compile(r"[A-Za-z0-9_]+")
CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
CODE_TOKEN = re.compile(r"\w+|[^\w\s]")
INLINE_TAG = re.compile(r"\{@\w+\s+([^}]*)\}")
HTML_TAG = re.compile(r"</?(?:p|b|i|em|strong|code|pre|br|ul|ol|li|a|tt|h\d)\b[^>]*>", re.IGNORECASE)
DOC_MAX = 400
DOC_MIN = 20
# Comment blocks that are not a definition's doc: license headers, tool directives, notes.
NOT_DOCS = re.compile(r"copyright|spdx-license|licensed under|do not edit|code generated|auto-?generated"
                      r"|^go:|^\+build|eslint-|nolint|^noqa|^todo\b|^fixme\b|^xxx\b", re.IGNORECASE)

# ---------------------------------------------------------------------------------------------
# Docs


def doc_paragraph(text):
    """The first paragraph of a cleaned doc, on one line, at most DOC_MAX chars (word cut);
    a tag line (`@param`, `@deprecated`) ends it, and Javadoc's inline tags and HTML go."""
    para = []
    for line in text.strip().splitlines():
        line = line.strip()
        if line.startswith("@") or (para and line.lower().startswith("<p>")):
            break
        if not line:
            if para:
                break
            continue
        para.append(line)
    flat = HTML_TAG.sub("", INLINE_TAG.sub(r"\1", " ".join(para)))
    flat = " ".join(flat.split())
    if len(flat) > DOC_MAX:
        flat = flat[:DOC_MAX].rsplit(" ", 1)[0]
    return flat


SKIPPED = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT}


def header_end(toks):
    """Consumes the decorators and the `def`/`class` header of the chunk's first definition,
    up to its closing `:`; False when the chunk does not open with a definition."""
    depth, seen_def = 0, False
    for tok in toks:
        if not seen_def:
            if tok.type in SKIPPED:
                continue
            if tok.type == tokenize.OP and tok.string == "@":  # a decorator: skip its line
                for t in toks:
                    if t.type == tokenize.NEWLINE:
                        break
                continue
            if tok.type == tokenize.NAME and tok.string in ("def", "class"):
                seen_def = True
            elif not (tok.type == tokenize.NAME and tok.string == "async"):
                return False
        elif tok.type == tokenize.OP and tok.string in "([{":
            depth += 1
        elif tok.type == tokenize.OP and tok.string in ")]}":
            depth -= 1
        elif tok.type == tokenize.OP and tok.string == ":" and depth == 0:
            return True
    return False


def python_doc(content):
    """(first, last, doc): the 0-based content lines of the docstring of the chunk's (first)
    definition and its text; None when it has none alone on its own lines. Tokenizes rather
    than parses, so a piece of a long definition (cut after its docstring) works too."""
    toks = tokenize.generate_tokens(io.StringIO(content).readline)
    try:
        if not header_end(toks):
            return None
        if next(toks).type != tokenize.NEWLINE:  # `def f(): return 1`
            return None
        doc = next(t for t in toks if t.type not in SKIPPED)
        after = next(t for t in toks if t.type != tokenize.COMMENT)
    except (tokenize.TokenError, IndentationError, SyntaxError, StopIteration):
        return None
    if doc.type != tokenize.STRING or after.type != tokenize.NEWLINE:
        return None
    try:
        value = ast.literal_eval(doc.string)
    except (ValueError, SyntaxError):
        return None
    if not isinstance(value, str):
        return None
    return doc.start[0] - 1, doc.end[0] - 1, inspect.cleandoc(value)


def comment_markers(path):
    if path.endswith((".rb",)):
        return ("#",)
    if path.endswith(".lua"):
        return ("--",)
    if path.endswith(".php"):
        return ("//", "/*", "#")
    return ("//", "/*")


def strip_marker(line):
    line = line.strip()
    for m in ("/**", "/*!", "/*", "*/", "///", "//!", "//", "---", "--", "#", "*"):
        if line.startswith(m):
            line = line[len(m):]
            break
    return line[:-2].rstrip() if line.endswith("*/") else line


def comment_doc(content, path):
    """(0, last, doc): the comment block opening the chunk (a doc above the definition); None
    when the chunk does not open with one."""
    lines = content.split("\n")
    markers, in_block, last = comment_markers(path), False, -1
    for i, line in enumerate(lines):
        s = line.strip()
        if in_block:
            last = i
            in_block = "*/" not in s
            continue
        if not s.startswith(markers) or s.startswith("#[") or s.startswith("#!"):
            break
        last = i
        in_block = s.startswith("/*") and "*/" not in s[2:]
    if last < 0 or in_block:
        return None
    doc = "\n".join(strip_marker(l) for l in lines[: last + 1])
    return 0, last, doc


def split_doc(chunk, path):
    """(query, positive) for a definition chunk with a doc: the doc's first paragraph, and the
    chunk's `text` with the doc's lines cut out (header and the rest unchanged). None when the
    chunk has no usable doc, merges several definitions, or keeps fewer than 3 non-blank lines."""
    content, text = chunk["content"], chunk["text"]
    if chunk.get("kind") == "definitions":  # small definitions merged: a doc speaks for one
        return None
    found = python_doc(content) if path.endswith(".py") else comment_doc(content, path)
    if not found or not text.endswith(content):
        return None
    a, b, doc = found
    query = doc_paragraph(doc)
    if len(query) < DOC_MIN or NOT_DOCS.search(query):
        return None
    lines = content.split("\n")
    rest = lines[:a] + lines[b + 1:]
    if sum(1 for l in rest if l.strip()) < 3:
        return None
    return query, text[: len(text) - len(content)] + "\n".join(rest)


# ---------------------------------------------------------------------------------------------
# BM25


def tokens(text):
    """Lowercased identifiers, each also split on `_` and camelCase (parts of 2+ chars)."""
    out = []
    for word in WORD.findall(text):
        low = word.lower()
        out.append(low)
        parts = [p.lower() for piece in word.split("_") for p in CAMEL.findall(piece)]
        if len(parts) > 1:
            out.extend(p for p in parts if len(p) > 1)
    return out


class Bm25:
    """BM25 over a fixed list of documents (k1 0.9, b 0.4)."""

    K1, B = 0.9, 0.4

    def __init__(self, texts):
        self.n = len(texts)
        self.postings = {}
        self.lengths = []
        for i, text in enumerate(texts):
            toks = tokens(text)
            self.lengths.append(len(toks))
            for term, tf in Counter(toks).items():
                self.postings.setdefault(term, []).append((i, tf))
        self.avgdl = (sum(self.lengths) / self.n) if self.n else 1.0
        self.weighted = {}

    def idf(self, term):
        df = len(self.postings.get(term, ()))
        return math.log(1 + (self.n - df + 0.5) / (df + 0.5))

    def term_weight(self, tf, length):
        return tf * (self.K1 + 1) / (tf + self.K1 * (1 - self.B + self.B * length / self.avgdl))

    def _weights(self, term):
        if term not in self.weighted:
            idf = self.idf(term)
            self.weighted[term] = [(i, idf * self.term_weight(tf, self.lengths[i]))
                                   for i, tf in self.postings[term]]
        return self.weighted[term]

    def query_terms(self, query):
        return sorted(t for t in set(tokens(query))
                      if t in self.postings and len(self.postings[t]) <= max(self.n // 2, 1))

    def scores(self, query):
        """{doc index: score} for the documents sharing a (not too common) term with `query`."""
        acc = {}
        for term in self.query_terms(query):
            for i, w in self._weights(term):
                acc[i] = acc.get(i, 0.0) + w
        return acc

    def score_text(self, query, text):
        """The score an outside document `text` would get for `query` under this index."""
        counts, length = Counter(tokens(text)), len(tokens(text))
        return sum(self.idf(t) * self.term_weight(counts[t], length)
                   for t in self.query_terms(query) if counts[t])


def rank_and_top(scores, excluded, positive_score, k):
    """(rank of the positive among the documents not excluded, or None past 100; the top-k
    document indices, best first, ties by index)."""
    above = sum(1 for i, s in scores.items() if s > positive_score and i not in excluded)
    rank = above + 1 if above < 100 else None
    best = heapq.nsmallest(k + len(excluded), ((-s, i) for i, s in scores.items() if s > 0))
    return rank, [i for _, i in best if i not in excluded][:k]


# ---------------------------------------------------------------------------------------------
# CoSQA near-duplicates


def shingles(toks):
    if len(toks) < 5:
        return {" ".join(toks)} if toks else set()
    return {" ".join(toks[i:i + 5]) for i in range(len(toks) - 4)}


def shingle_hashes(text):
    return {zlib.crc32(s.encode()) for s in shingles(CODE_TOKEN.findall(text))}


class CosqaIndex:
    """The CoSQA corpus functions, for `is_duplicate(text)`: the same normalized token stream,
    Jaccard >= 0.8 over 5-token shingles (hashed), or a CoSQA function 80 % contained in the text
    (a class or merged chunk that holds one)."""

    THRESHOLD = 0.8
    COMMON = 500

    def __init__(self, directory):
        self.exact, self.sets, self.index = set(), [], {}
        names = sorted(os.listdir(directory)) if directory and os.path.isdir(directory) else []
        for name in names:
            with open(os.path.join(directory, name), encoding="utf-8", errors="replace") as f:
                text = f.read()
            self.exact.add(" ".join(CODE_TOKEN.findall(text)))
            hashes = shingle_hashes(text)
            for h in hashes:
                self.index.setdefault(h, []).append(len(self.sets))
            self.sets.append(hashes)
        self.loaded = len(names)

    def is_duplicate(self, text):
        if not self.sets:
            return False
        if " ".join(CODE_TOKEN.findall(text)) in self.exact:
            return True
        mine = shingle_hashes(text)
        shared = Counter()
        for h in mine:
            docs = self.index.get(h, ())
            if len(docs) <= self.COMMON:
                shared.update(docs)
        for doc, inter in sorted(shared.items()):
            other = self.sets[doc]
            if inter < 0.5 * len(other):
                continue  # far from both tests (`shared` leaves out the common shingles: a loose bar)
            inter = len(mine & other)
            if inter >= self.THRESHOLD * len(other) or inter >= self.THRESHOLD * (len(mine) + len(other) - inter):
                return True
        return False
