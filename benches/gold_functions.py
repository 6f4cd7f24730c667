#!/usr/bin/env python3
"""The definitions an issue's fix edits: function-level gold for benches/localization.py.

The localization sets name the files a fix edits (`gold_files`), not its functions. Their ids are
`owner__repo-N` with N the pull request that fixed the issue, so the fix is in the repository's
mirror: a commit whose subject says `(#N)` (a squash merge) or `Merge pull request #N ` (a merge,
diffed against its first parent). Among such commits, the one that touches every gold file is taken,
preferring one whose parent is the base commit, else the earliest after it.

From the fix's diff (`git diff -U0 PARENT FIX -- gold files`), each hunk's removed or changed old
lines (for a pure insertion, the two lines around it) are mapped with Python's `ast` to the outermost
function or method that holds them (a closure's edit is its enclosing function's) — or, outside any
function, the innermost class — in the parent's
version of the file. Those definitions, by qualified name (`Class.method`), are then looked up in the
base commit's version of the file (the indexed one): its `def`/`class` line and last line. Definitions
the fix only adds, module-level edits and non-Python gold files give no function-level gold; an issue
with none is left out of the function-level figures (counted).

    python3 benches/gold_functions.py --data FILE.jsonl [--mirrors DIR] [--out gold-functions.json]

prints, per issue, the fix commit and the definitions found. `localization.py` imports `gold_for`
(cached in `<work>/gold-functions.json`).
"""
import argparse, ast, json, os, re, subprocess

from mirrors import commit_time, git


def changed_files(gitdir, parent, commit):
    return set(git(gitdir, "diff", "--name-only", parent, commit).decode("utf-8", "surrogateescape").split("\n")) - {""}


def fix_commit(gitdir, issue):
    """(parent, fix) of the pull request named by the issue id, or None."""
    number = issue["id"].rsplit("-", 1)[1]
    out = git(gitdir, "log", "--all", "--format=%H %P%x09%ct%x09%s", "-E",
              f"--grep=\\(#{number}\\)|pull request #{number} ").decode("utf-8", "replace")
    base_time = commit_time(gitdir, issue["base_commit"])
    found = []
    for line in out.splitlines():
        head, when, subject = line.split("\t", 2)
        commit, *parents = head.split()
        if not parents or not (f"(#{number})" in subject or f"pull request #{number} " in subject + " "):
            continue
        parent = parents[0]
        if set(issue["gold_files"]) <= changed_files(gitdir, parent, commit):
            found.append((parent != issue["base_commit"], int(when) < base_time, int(when), parent, commit))
    if not found:
        return None
    _, _, _, parent, commit = min(found)
    return parent, commit


def old_lines(diff):
    """Old-side line numbers a unified -U0 diff removes or changes; a pure insertion after line a
    gives the pair (a, a + 1) — both must lie in a definition for it to count."""
    spans = []
    for m in re.finditer(rb"^@@ -(\d+)(?:,(\d+))? \+\d+(?:,\d+)? @@", diff, re.M):
        start, count = int(m.group(1)), int(m.group(2) or 1)
        spans.append(range(start, start + count) if count else (start, start + 1))
    return spans


def definitions(source):
    """[(qualname, kind, first line, last line)] of every function, method and class (first line =
    the `def`/`class` line), or None when the file does not parse."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    out = []

    def walk(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = prefix + child.name
                kind = "class" if isinstance(child, ast.ClassDef) else "function"
                out.append((name, kind, child.lineno, child.end_lineno))
                walk(child, name + ".")
            else:
                walk(child, prefix)

    walk(tree, "")
    return out


def holder(defs, lines):
    """The outermost function holding all `lines` (a closure's change is its enclosing function's, the
    unit a developer reads and the index lists), else the innermost class, else None."""
    around = [d for d in defs if all(d[2] <= n <= d[3] for n in lines)]
    functions = [d for d in around if d[1] == "function"]
    if functions:
        return min(functions, key=lambda d: d[2])
    classes = [d for d in around if d[1] == "class"]
    return max(classes, key=lambda d: d[2]) if classes else None


def gold_for(gitdir, issue):
    """{"fix": sha, "functions": [{"path", "name", "start", "end"}]} at the base commit, or
    {"fix": None, "why": ...} when there is none."""
    fix = fix_commit(gitdir, issue)
    if fix is None:
        return {"fix": None, "functions": [], "why": "no commit names the pull request and touches every gold file"}
    parent, commit = fix
    functions = []
    for path in issue["gold_files"]:
        if not path.endswith((".py", ".pyi")):
            continue
        try:
            before = definitions(git(gitdir, "show", f"{parent}:{path}"))
            at_base = definitions(git(gitdir, "show", f"{issue['base_commit']}:{path}"))
        except subprocess.CalledProcessError:
            continue  # the file is new in the fix (or absent at the base): nothing of it to find
        if before is None or at_base is None:
            continue
        edited = {holder(before, lines) for lines in old_lines(git(gitdir, "diff", "-U0", parent, commit, "--", path))}
        by_name = {d[0]: d for d in at_base}
        for d in sorted(e for e in edited if e):
            if d[0] in by_name:
                _, kind, start, end = by_name[d[0]]
                functions.append({"path": path, "name": d[0], "kind": kind, "start": start, "end": end})
    return {"fix": commit, "functions": functions}


def cached(cache_path, mirrors, issues):
    """gold_for every issue, read from / added to the JSON cache at `cache_path`."""
    cache = json.load(open(cache_path)) if os.path.exists(cache_path) else {}
    changed = False
    for x in issues:
        if x["id"] not in cache:
            cache[x["id"]] = gold_for(os.path.join(mirrors, x["repo"].replace("/", "+"), "repo"), x)
            changed = True
    if changed:
        os.makedirs(os.path.dirname(os.path.abspath(cache_path)), exist_ok=True)
        tmp = cache_path + ".tmp"
        json.dump(cache, open(tmp, "w"), indent=1)
        os.replace(tmp, cache_path)
    return cache


def matches(place, gold):
    """A located definition (`path`, `start_line`, `end_line`, `symbol`) is the gold one: same file,
    the gold `def` line inside it (decorators may start it earlier) and the same last name part."""
    name = (place.get("symbol") or "").rsplit(".", 1)[-1].rsplit("::", 1)[-1]
    return (place["path"] == gold["path"] and place["start_line"] <= gold["start"] <= place["end_line"]
            and name == gold["name"].rsplit(".", 1)[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--mirrors", default="/work/.mirror")
    ap.add_argument("--out", default=os.path.expanduser("~/.cache/ctxd/gold-functions.json"))
    args = ap.parse_args()
    issues = [json.loads(line) for line in open(args.data) if line.strip()]
    cache = cached(args.out, args.mirrors, issues)
    with_gold = 0
    for x in issues:
        g = cache[x["id"]]
        with_gold += bool(g["functions"])
        names = ", ".join(f"{f['path']}:{f['name']}" for f in g["functions"]) or g.get("why", "no edited definition")
        print(f"{x['id']}: {(g['fix'] or '-')[:10]} {names}")
    print(f"{with_gold} of {len(issues)} issues have function-level gold")


if __name__ == "__main__":
    main()
