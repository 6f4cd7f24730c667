#!/usr/bin/env python3
"""Builds a long-file code retrieval set for the context-assembly token figures.

Real code with long files: modules of Python's standard library of at least --min-lines lines.
For --queries functions (sampled with a fixed seed) whose docstring's first sentence has at
least 6 words, that sentence becomes the query and its file the gold answer; the docstring is
removed from the corpus copy, so the query never appears verbatim (the CodeSearchNet recipe).
Everything else in the files is left as is.

    python3 benches/make_docstring_eval.py OUT_DIR [--queries 200] [--min-lines 400]
    ctxd index OUT_DIR/corpus --db OUT_DIR/db
    ctxd eval --db OUT_DIR/db --queries OUT_DIR/queries.jsonl --mode routed --context-budgets 1000,2000,4000
"""
import argparse, ast, json, os, random, sysconfig


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--min-lines", type=int, default=400)
    ap.add_argument("--max-files", type=int, default=120)
    args = ap.parse_args()
    rng = random.Random(5)
    std = sysconfig.get_paths()["stdlib"]
    files = []
    for name in sorted(os.listdir(std)):
        p = os.path.join(std, name)
        if name.endswith(".py") and os.path.isfile(p) and not name.startswith("_"):
            src = open(p, encoding="utf-8", errors="replace").read()
            if src.count("\n") >= args.min_lines:
                files.append((name, src))
    rng.shuffle(files)
    files = files[: args.max_files]
    candidates = []
    for name, src in files:
        try:
            tree = ast.parse(src)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
                first = node.body[0]
                if isinstance(first, ast.Expr) and isinstance(getattr(first, "value", None), ast.Constant) \
                        and isinstance(first.value.value, str):
                    sentence = first.value.value.strip().split("\n\n")[0].replace("\n", " ").split(". ")[0].strip()
                    if len(sentence.split()) >= 6:
                        candidates.append((name, node.name, first.lineno, first.end_lineno, sentence))
    rng.shuffle(candidates)
    picked, per_file = [], {}
    for c in candidates:
        if per_file.get(c[0], 0) >= 3:
            continue
        per_file[c[0]] = per_file.get(c[0], 0) + 1
        picked.append(c)
        if len(picked) >= args.queries:
            break
    strip = {}
    for name, _, a, b, _ in picked:
        strip.setdefault(name, []).append((a, b))
    corpus = os.path.join(args.out, "corpus")
    os.makedirs(corpus, exist_ok=True)
    for name, src in files:
        lines = src.split("\n")
        for a, b in sorted(strip.get(name, []), reverse=True):
            indent = lines[a - 1][: len(lines[a - 1]) - len(lines[a - 1].lstrip())]
            lines[a - 1 : b] = [indent + "pass  # (docstring removed for the evaluation)"]
        with open(os.path.join(corpus, name), "w", encoding="utf-8") as f:
            f.write("\n".join(lines))
    with open(os.path.join(args.out, "queries.jsonl"), "w") as f:
        for i, (name, fn, _, _, sentence) in enumerate(picked):
            f.write(json.dumps({"id": f"q{i}", "query": sentence, "gold": [name], "function": fn}) + "\n")
    total = sum(s.count("\n") for _, s in files)
    print(f"{len(files)} files ({total} lines, mean {total // max(1, len(files))}), {len(picked)} queries -> {args.out}")


if __name__ == "__main__":
    main()
