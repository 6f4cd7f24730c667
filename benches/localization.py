#!/usr/bin/env python3
"""Localization: from an issue's raw text, does ctxd rank the files its fix edits first?

Data: /work/shared/eval/localization/dev.jsonl (45 GitHub issues on six Python repositories,
`{"id","repo","base_commit","query","gold_files"}`; see /work/shared/eval/README.md). Each repository
comes from a bare mirror `<mirrors>/<owner+name>/repo` (the search tool's `fetch`).

How: issues are grouped by repository and their base commits ordered by commit date. Each repository
keeps ONE work tree `<work>/<owner+name>/tree` and ONE index `<work>/<owner+name>/db`. For each base
commit the tree is made equal to the commit restricted to the indexed file set (only new or changed
blobs are written, via one `git ls-tree -r` and one `git cat-file --batch`; `state.json` remembers
path -> blob id; files gone are deleted, empty folders removed; blobs absent from the mirror are
skipped and counted), then `ctxd index <tree> --db <db>` updates the index incrementally. Then, at
that commit, every issue is queried once per variant (the full run, then one per `--ablate` signal),
so the index is built once and no query runs against a later commit's tree.

Indexed file set: every `*.py` and `*.pyi` file, plus `*.toml`, `*.cfg`, `*.ini`, `*.yaml`, `*.yml`
at the top level of the repository only; paths with a hidden (dot-named) part are skipped (ctxd
skips them anyway), so a gold file such as `.pre-commit-config.yaml` can never be found. `--all-files`
indexes every file of the checkout instead (docs, data, other languages), as `ctxd index` of a plain
checkout does and as the held-out sets are run; with `--no-history` and its own `--work`, it measures
that setting (BENCHMARKS.md, "Issue 60: full checkouts").

The tree is a linked worktree of the mirror (`git worktree add --no-checkout`, HEAD moved to each base commit
before indexing; `--no-history` leaves it a plain folder), so `ctxd index` records the history of the base
commit — the recency, co-change and commits signals (`--ablate recency,cochange,commits` measures them). The
tag of each base commit tags the history recorded with it, so `--reuse` queries see that commit's history —
for tags made by a ctxd from 2026-11-28 on; an older tag's query sees the history of the last commit indexed
(measure history signals on a run that indexes, or re-tag). The query adapter is stored once, fitted on the last
history indexed, so a `--reuse` query of an older tag runs without it: measure the adapter on a run that indexes
(`--ablate adapter`; `--adapter-control SEED` puts the shuffled control in its place).

Each indexed base commit is tagged `c-<sha12>` (`ctxd snapshot tag`) and every query runs `--as-of` that
tag; with `--reuse` a commit whose tag the index has is not synced or indexed again (the snapshot has its
chunks, symbols and graph), so tuning runs and ablations cost queries only.

Queries: `--mode locate` (default): `ctxd locate - --db DB --k K --json [--without a,b]`, issue text
on stdin, ranking = `files[].path`. `--mode search` (baseline): `ctxd search -- TEXT --db DB --k 50
--json --mode M` (`--search-mode`, routed unless named: `vector` judges the embedding model alone) with the text cut to 8000 bytes, ranking = files in order of their best chunk. `--mode context
--budget B`: `ctxd context -- TEXT --budget B --json` (text cut to 8000 bytes), ranking = the files of
the packed blocks in relevance order; the report adds `in context` (all gold files somewhere in the
context), `R ctx` (their mean share) and mean tokens used. A query that
fails or times out (120 s) counts as an empty ranking.

Metrics: Acc@1/5/10 (ALL gold files within the top k), Recall@5/10 (mean fraction of gold files in
the top k), MRR@10 (1/rank of the first gold file within 10, else 0); at function level (`--mode locate`)
fn Acc@5/10: every definition the fix edits (benches/gold_functions.py, from the fix commit in the mirror)
among the first k definitions the answer lists (files in rank order, each file's definitions in order;
`fn n` issues have such gold), per-repo Acc@5, and Acc@1/5 and
MRR on the issues whose fix touches a file changed in the 30 days before the base commit against the
others (where the history signals should help).

    python3 benches/localization.py --ctxd BIN [--mode locate|search|context] [--search-mode vector] [--budget B] [--assembly A] [--no-skeletons] [--ablate sig1,sig2]
        [--without sig] [--locate-model fitted|hand] [--repo owner/name] [--limit N] [--per-repo N] [--max-repo-mb MB] [--all-files] [--no-history] [--fresh] [--reuse] [--json OUT]
"""
import argparse, collections, json, os, re, shutil, subprocess, sys, time

import gold_functions
from mirrors import commit_time, git

TOP_EXT = (".toml", ".cfg", ".ini", ".yaml", ".yml")


def indexed(path, every=False):
    """Whether the bench indexes `path`: the Python set, or with `every` (`--all-files`) every file
    of the checkout, as `ctxd index` of a plain checkout reads it."""
    if any(p.startswith(".") for p in path.split("/")):
        return False
    return every or path.endswith((".py", ".pyi")) or ("/" not in path and path.endswith(TOP_EXT))


def indexed_mb(gitdir, issues, every=False):
    """MB of the indexed files at the latest base commit of `issues`."""
    latest = max({x["base_commit"] for x in issues}, key=lambda c: commit_time(gitdir, c))
    size = 0
    for rec in git(gitdir, "ls-tree", "-r", "-l", "-z", latest).split(b"\0"):
        if rec:
            meta, path = rec.split(b"\t", 1)
            mode, kind, _, length = meta.decode().split()
            # a blob the mirror lacks lists its size as "BAD" (sync_tree counts it absent)
            if kind == "blob" and mode != "120000" and length.isdigit() and indexed(path.decode("utf-8", "surrogateescape"), every):
                size += int(length)
    return size / 1e6


def sync_tree(gitdir, commit, tree, state_path, every=False):
    """Make `tree` equal to `commit` restricted to the indexed set; return (written, deleted, absent)."""
    state = json.load(open(state_path)) if os.path.exists(state_path) else {}
    want = {}
    for rec in git(gitdir, "ls-tree", "-r", "-z", commit).split(b"\0"):
        if not rec:
            continue
        meta, path = rec.split(b"\t", 1)
        mode, kind, sha = meta.decode().split()
        path = path.decode("utf-8", "surrogateescape")
        if kind == "blob" and mode != "120000" and indexed(path, every):
            want[path] = sha
    todo = [p for p, s in want.items() if state.get(p) != s or not os.path.exists(os.path.join(tree, p))]
    written = absent = 0
    if todo:
        out = git(gitdir, "cat-file", "--batch", input="".join(want[p] + "\n" for p in todo).encode())
        pos = 0
        for p in todo:
            nl = out.index(b"\n", pos)
            header = out[pos:nl].split()
            pos = nl + 1
            dest = os.path.join(tree, p)
            if header[1] == b"missing":
                absent += 1
                state.pop(p, None)
                if os.path.exists(dest):
                    os.remove(dest)
                continue
            size = int(header[2])
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            with open(dest, "wb") as f:
                f.write(out[pos:pos + size])
            pos += size + 1
            state[p] = want[p]
            written += 1
    gone = [p for p in state if p not in want]
    for p in gone:
        dest = os.path.join(tree, p)
        if os.path.exists(dest):
            os.remove(dest)
        del state[p]
        d = os.path.dirname(dest)
        while d.startswith(tree + os.sep) and os.path.isdir(d) and not os.listdir(d):
            os.rmdir(d)
            d = os.path.dirname(d)
    tmp = state_path + ".tmp"
    json.dump(state, open(tmp, "w"))
    os.replace(tmp, state_path)
    return written, len(gone), absent


def ensure_worktree(gitdir, tree, commit):
    """Make `tree` a linked worktree of the mirror without checking anything out (`sync_tree` writes the
    files), so `ctxd index` records the history of its HEAD (recency and co-change signals)."""
    if os.path.exists(os.path.join(tree, ".git")):
        return
    tmp = tree.rstrip("/") + ".wt"
    shutil.rmtree(tmp, ignore_errors=True)
    git(gitdir, "worktree", "prune")
    git(gitdir, "worktree", "add", "--no-checkout", "--detach", tmp, commit)
    os.makedirs(tree, exist_ok=True)
    os.replace(os.path.join(tmp, ".git"), os.path.join(tree, ".git"))
    shutil.rmtree(tmp)
    git(gitdir, "worktree", "repair", os.path.abspath(tree))


def set_head(tree, commit):
    subprocess.run(["git", "-C", tree, "update-ref", "--no-deref", "HEAD", commit], check=True, capture_output=True)


def norm(path, tree):
    if os.path.isabs(path):
        path = os.path.relpath(path, tree)
    return path[2:] if path.startswith("./") else path


def dedup(paths):
    seen, out = set(), []
    for p in paths:
        if p not in seen:
            seen.add(p)
            out.append(p)
    return out


def tag_of(commit):
    return "c-" + commit[:12]


def model_flags(args):
    """`--model DIR` for every ctxd command when the run measures another model (its own work folder)."""
    return ["--model", args.model] if args.model else []


def query(args, db, tree, text, without, commit):
    """Return (ranking, error, extra): extra holds the row's further fields (`tokens` used by a context,
    `features` of a locate's candidates), empty when there are none."""
    text = text.replace("\0", "")
    if args.mode == "locate":
        cmd = [args.ctxd, "locate", "-", "--db", db, "--k", str(args.k), "--json", "--as-of", tag_of(commit)]
        # `adapter` is no signal: leaving it out is `--no-adapter` (the index's query adapter unused)
        if "adapter" in without:
            cmd.append("--no-adapter")
            without = [w for w in without if w != "adapter"]
        if without:
            cmd += ["--without", ",".join(without)]
        if args.locate_model:
            cmd += ["--locate-model", args.locate_model]
        if args.features and not without:
            cmd += ["--features", str(args.features)]
        cmd += model_flags(args)
        stdin = text
    else:
        cut = text.encode()[:8000].decode("utf-8", "ignore")
        if args.mode == "search":
            cmd = [args.ctxd, "search", "--db", db, "--k", str(max(50, args.k)), "--json", "--as-of", tag_of(commit),
                   "--mode", args.search_mode]
        else:
            cmd = [args.ctxd, "context", "--db", db, "--budget", str(args.budget), "--json", "--as-of", tag_of(commit),
                   "--assembly", args.assembly] + (["--no-skeletons"] if args.no_skeletons else [])
        cmd += model_flags(args) + ["--", cut]  # flags before the `--` that ends them
        stdin = None
    try:
        r = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        return [], "timeout after 120 s", {}
    if r.returncode != 0:
        lines = r.stderr.strip().splitlines() or ["(no stderr)"]
        errs = [l for l in lines if "error" in l.lower()]  # clap's last line is only "try '--help'"
        return [], f"rc {r.returncode}: {(errs or lines)[-1].strip()}", {}
    try:
        out = json.loads(r.stdout)
        extra = {}
        if args.mode == "context":
            items = sorted(out["blocks"], key=lambda b: b["relevance_rank"])
            extra["tokens"] = out["tokens_used"]
        else:
            items = out["files"] if args.mode == "locate" else out["results"]
        ranking = dedup(norm(x["path"], tree) for x in items)
    except (ValueError, KeyError, TypeError) as e:
        return [], f"bad output ({e}): {r.stdout[:200]!r}", {}
    if args.mode == "locate":  # the definitions in answer order: the function-level ranking
        extra["definitions"] = [{**d, "path": norm(d["path"], tree)} for f in out["files"] for d in f.get("definitions", [])]
    if args.mode == "locate" and out.get("features"):
        for c in out["features"]:
            c["path"] = norm(c["path"], tree)
        extra["features"] = out["features"]
    return ranking, None if ranking else "empty ranking", extra


def run_queries(args, repo, db, tree, c, issues, variants, results):
    for x in issues:
        for label, without in variants:
            t0 = time.time()
            ranking, error, extra = query(args, db, tree, x["query"], without, c)
            row = {"id": x["id"], "repo": repo, "commit": c, "gold": x["gold_files"], "category": x.get("category"),
                   "gold_functions": x.get("gold_functions", []), "ranking": ranking, "error": error, "query_s": round(time.time() - t0, 1), **extra}
            results[label].append(row)
            hit = next((i + 1 for i, p in enumerate(ranking) if p in x["gold_files"]), None)
            msg = f"  FAIL {error}" if error and not ranking else ""
            print(f"  {x['id']} [{label}] first gold at {hit} ({row['query_s']}s){msg}", flush=True)


def metrics(rows):
    n = len(rows) or 1
    m = collections.defaultdict(float, {c: 0.0 for c in COLS})
    for row in rows:
        rank, gold = row["ranking"], set(row["gold"])
        for k in (1, 5, 10):
            m[f"Acc@{k}"] += gold <= set(rank[:k])
        for k in (5, 10):
            m[f"R@{k}"] += len(gold & set(rank[:k])) / len(gold)
        m["MRR@10"] += next((1 / (i + 1) for i, p in enumerate(rank[:10]) if p in gold), 0.0)
        if row.get("gold_functions"):  # a failed query lists no definitions: a miss, as at file level
            m["fn n"] += 1
            for k in (5, 10):
                top = row.get("definitions", [])[:k]
                m[f"fn Acc@{k}"] += all(any(gold_functions.matches(p, g) for p in top) for g in row["gold_functions"])
        if "tokens" in row:
            m["in context"] += gold <= set(rank)
            m["R ctx"] += len(gold & set(rank)) / len(gold)
            m["tokens"] += row["tokens"]
    fn = m.pop("fn n", 0)
    out = {key: round(v / (fn if key.startswith("fn ") else n), 3) if fn or not key.startswith("fn ") else 0.0
           for key, v in m.items()}
    out["fn n"] = int(fn)
    out["n"], out["fail"] = len(rows), sum(1 for r in rows if r["error"])
    return out


COLS = ("Acc@1", "Acc@5", "Acc@10", "R@5", "R@10", "MRR@10")
CONTEXT_COLS = ("in context", "R ctx", "tokens")
FN_COLS = ("fn n", "fn Acc@5", "fn Acc@10")  # function level: every edited definition in the first k listed


def dev_set_args(ap):
    """The arguments of a bench over this script's indexes: the binary, the issues, the work folder."""
    ap.add_argument("--ctxd", required=True)
    ap.add_argument("--data", default="/work/shared/eval/localization/dev.jsonl")
    ap.add_argument("--work", default=os.path.expanduser("~/.cache/ctxd/loc"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    dev_set_args(ap)
    ap.add_argument("--mirrors", default="/work/.mirror")
    ap.add_argument("--mode", choices=("locate", "search", "context"), default="locate")
    ap.add_argument("--search-mode", default="routed", choices=("routed", "hybrid", "vector", "bm25"),
                    help="--mode search: the search's own mode (vector: the embedding model alone, dense-only)")
    ap.add_argument("--budget", type=int, default=8000, help="--mode context: the token budget")
    ap.add_argument("--assembly", default="auto", help="--mode context: auto, balanced, hierarchical, sequential or thematic")
    ap.add_argument("--no-skeletons", action="store_true", help="--mode context: whole blocks only (the assembly before skeletons)")
    ap.add_argument("--without", default="", help="signals to leave out in every locate query")
    ap.add_argument("--locate-model", choices=("fitted", "hand"),
                    help="the ranking model every locate query names (default: the binary's, fitted)")
    ap.add_argument("--adapter-control", type=int, default=None, metavar="SEED",
                    help="after indexing each base commit, store the shuffled control as the query adapter "
                         "(`ctxd adapt --shuffled SEED`): what the history teaches beyond which files change often")
    ap.add_argument("--ablate", default="", help="after the full run, one extra run per signal left out")
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--model", help="embedding model directory or id to measure (its indexes under --work/model-<name>)")
    ap.add_argument("--features", type=int, default=0,
                    help="locate: also keep the feature rows of this many best candidates per issue (the full run; "
                         "benches/fit_locate.py fits the ranking model on them)")
    ap.add_argument("--limit", type=int, help="only the first N issues (file order)")
    ap.add_argument("--repo", help="only this owner/name")
    ap.add_argument("--max-repo-mb", type=float, help="leave out repositories whose indexed files at their latest "
                    "selected base commit exceed N MB (their first index is most of the cost)")
    ap.add_argument("--per-repo", type=int, help="only each repository's N issues with the latest base commits "
                    "(fewer commits to index; ties broken by file order)")
    ap.add_argument("--fresh", action="store_true", help="delete the selected repos' db, tree and state first")
    ap.add_argument("--json", help="write per-issue rankings and metrics here")
    ap.add_argument("--no-history", action="store_true",
                    help="index plain folders (no git history: the recency and co-change signals stay silent)")
    ap.add_argument("--all-files", action="store_true",
                    help="index every file of each checkout (docs, data, other languages), as the held-out sets are "
                         "indexed; keep its indexes apart with --work")
    ap.add_argument("--reuse", action="store_true",
                    help="skip indexing a commit whose snapshot tag c-<sha> the index already has (query it as of that tag)")
    args = ap.parse_args()
    args.ctxd = os.path.abspath(args.ctxd)
    if args.model:
        # Indexes of another model are other vectors: kept apart from the default model's.
        args.work = os.path.join(args.work, "model-" + os.path.basename(os.path.normpath(args.model)))
    base_without = [s for s in args.without.split(",") if s]
    ablate = [s for s in args.ablate.split(",") if s]
    if args.mode != "locate" and (base_without or ablate):
        sys.exit("--without/--ablate need --mode locate")
    variants = [("full" if not base_without else "without " + ",".join(base_without), base_without)]
    variants += [(f"without {s}", base_without + [s]) for s in ablate]

    issues = [json.loads(line) for line in open(args.data) if line.strip()]
    if args.repo:
        issues = [x for x in issues if x["repo"] == args.repo]
    if args.limit:
        issues = issues[: args.limit]
    by_repo = collections.defaultdict(list)
    for x in issues:
        by_repo[x["repo"]].append(x)
    if args.per_repo:
        for repo, xs in by_repo.items():
            gitdir = os.path.join(args.mirrors, repo.replace("/", "+"), "repo")
            keep = sorted(range(len(xs)), key=lambda i: (-commit_time(gitdir, xs[i]["base_commit"]), i))[: args.per_repo]
            by_repo[repo] = [xs[i] for i in sorted(keep)]
        kept = {id(x) for xs in by_repo.values() for x in xs}
        issues = [x for x in issues if id(x) in kept]
    if args.max_repo_mb:
        for repo in sorted(by_repo):
            mb = indexed_mb(os.path.join(args.mirrors, repo.replace("/", "+"), "repo"), by_repo[repo], args.all_files)
            if mb > args.max_repo_mb:
                print(f"## {repo}: left out ({mb:.1f} MB indexed > --max-repo-mb {args.max_repo_mb})", flush=True)
                del by_repo[repo]
        issues = [x for x in issues if x["repo"] in by_repo]

    if args.mode == "locate":  # function-level gold from each fix commit (see gold_functions.py)
        gold = gold_functions.cached(os.path.join(args.work, "gold-functions.json"), args.mirrors, issues)
        for x in issues:
            x["gold_functions"] = gold[x["id"]]["functions"]
        print(f"function-level gold for {sum(1 for x in issues if x['gold_functions'])} of {len(issues)} issues",
              flush=True)

    results = {label: [] for label, _ in variants}
    index_log = []
    for repo in sorted(by_repo):
        name = repo.replace("/", "+")
        gitdir = os.path.join(args.mirrors, name, "repo")
        wdir = os.path.join(args.work, name)
        tree, db, state = (os.path.join(wdir, n) for n in ("tree", "db", "state.json"))
        if args.fresh:
            for p in (tree, db):
                shutil.rmtree(p, ignore_errors=True)
            if os.path.exists(state):
                os.remove(state)
        os.makedirs(tree, exist_ok=True)
        commits = collections.defaultdict(list)
        for x in by_repo[repo]:
            commits[x["base_commit"]].append(x)
        order = sorted(commits, key=lambda c: commit_time(gitdir, c))
        print(f"## {repo}: {len(by_repo[repo])} issues at {len(order)} commits", flush=True)
        tags = set()
        if args.reuse and os.path.isdir(db):
            snaps = subprocess.run([args.ctxd, "snapshots", "--db", db, "--json"], capture_output=True, text=True)
            if snaps.returncode == 0:
                tags = {t for s in json.loads(snaps.stdout)["snapshots"] for t in s["tags"]}
        for c in order:
            if tag_of(c) in tags:
                print(f"{c[:10]}: reusing snapshot {tag_of(c)}", flush=True)
                run_queries(args, repo, db, tree, c, commits[c], variants, results)
                continue
            w, d, a = sync_tree(gitdir, c, tree, state, args.all_files)
            if not args.no_history:
                ensure_worktree(gitdir, tree, c)
                set_head(tree, c)
            t0 = time.time()
            r = subprocess.run([args.ctxd, "index", tree, "--db", db, "--json"] + model_flags(args),
                               capture_output=True, text=True)
            secs = time.time() - t0
            index_log.append({"repo": repo, "commit": c, "written": w, "deleted": d, "absent": a,
                              "index_s": round(secs, 1), "rc": r.returncode, "summary": r.stdout.strip()[-400:]})
            note = f" ABSENT {a}" if a else ""
            err = "" if r.returncode == 0 else f"  INDEX FAILED rc {r.returncode}: {(r.stderr.strip().splitlines() or [''])[-1]}"
            print(f"{c[:10]}: wrote {w}, deleted {d}{note}, index {secs:.1f}s{err}", flush=True)
            if args.adapter_control is not None:
                ctl = subprocess.run([args.ctxd, "adapt", "--db", db, "--shuffled", str(args.adapter_control)]
                                     + model_flags(args), capture_output=True, text=True)
                print(f"{c[:10]}: {(ctl.stdout.strip() or ctl.stderr.strip())[-200:]}", flush=True)
            # A tag per base commit: later runs query it as of the tag (`--reuse`); a tag left by an earlier
            # run is moved to this version (its history, and a query adapter fitted on it, are this run's).
            subprocess.run([args.ctxd, "snapshot", "untag", tag_of(c), "--db", db], capture_output=True)
            subprocess.run([args.ctxd, "snapshot", "tag", tag_of(c), "--db", db], capture_output=True)
            run_queries(args, repo, db, tree, c, commits[c], variants, results)
        if args.json:  # the rows so far (a run cut short keeps them; the end rewrites it whole)
            with open(args.json, "w") as f:
                json.dump({"mode": args.mode, "partial": True, "runs": {l: {"issues": r} for l, r in results.items()}}, f)

    print("\n### index time per repo")
    for repo in sorted(by_repo):
        logs = [l for l in index_log if l["repo"] == repo]
        print(f"{repo}: {len(logs)} commits, {sum(l['index_s'] for l in logs):.1f}s, wrote "
              f"{sum(l['written'] for l in logs)}, deleted {sum(l['deleted'] for l in logs)}, "
              f"absent {sum(l['absent'] for l in logs)}, failed {sum(1 for l in logs if l['rc'])}")
    cols = COLS + {"context": CONTEXT_COLS, "locate": FN_COLS}.get(args.mode, ())
    budget = f", budget {args.budget}" if args.mode == "context" else ""
    how = f" {args.search_mode}" if args.mode == "search" else ""
    print(f"\n### {args.mode}{how} (k={args.k}{budget}, {len(issues)} issues)\n")
    print("| run | n | " + " | ".join(cols) + " | failures |")
    print("|---|" + "---|" * (len(cols) + 2))
    report = {"mode": args.mode, "ctxd": args.ctxd, "index": index_log, "runs": {}}
    for label, _ in variants:
        m = metrics(results[label])
        per_repo = {repo: metrics([r for r in results[label] if r["repo"] == repo]) for repo in sorted(by_repo)}
        report["runs"][label] = {"metrics": m, "per_repo": per_repo, "issues": results[label]}
        print(f"| {label} | {m['n']} | " + " | ".join(f"{m.get(c, 0)}" if c == "fn n" else f"{m.get(c, 0):.3f}" for c in cols)
              + f" | {m['fail']} |")
    print("\n| repo | n | " + " | ".join(f"Acc@5 {label}" for label, _ in variants) + " |")
    print("|---|---|" + "---|" * len(variants))
    for repo in sorted(by_repo):
        cells = [report["runs"][label]["per_repo"][repo] for label, _ in variants]
        print(f"| {repo} | {cells[0]['n']} | " + " | ".join(f"{c.get('Acc@5', 0):.3f}" for c in cells) + " |")
    categories = sorted({r.get("category") for r in results[variants[0][0]] if r.get("category")})
    if categories:
        print("\n| category | n | " + " | ".join(f"Acc@1 / Acc@5 / MRR {label}" for label, _ in variants) + " |")
        print("|---|---|" + "---|" * len(variants))
        for cat in categories:
            cells = [metrics([r for r in results[label] if r.get("category") == cat]) for label, _ in variants]
            print(f"| {cat} | {cells[0]['n']} | " + " | ".join(
                f"{c['Acc@1']:.3f} / {c['Acc@5']:.3f} / {c['MRR@10']:.3f}" for c in cells) + " |")
    print("\n| text read as | n | " + " | ".join(f"Acc@1 / Acc@5 / MRR {label}" for label, _ in variants) + " |")
    print("|---|---|" + "---|" * len(variants))
    kinds = {x["id"]: text_kind(x["query"]) for x in issues}
    for kind in TEXT_KINDS:
        cells = [metrics([r for r in results[label] if kinds[r["id"]] == kind]) for label, _ in variants]
        print(f"| {kind} | {cells[0]['n']} | " + " | ".join(
            f"{c['Acc@1']:.3f} / {c['Acc@5']:.3f} / {c['MRR@10']:.3f}" for c in cells) + " |")
    # Issues whose fix touches a recently changed file (a gold file's last first-parent commit before
    # the base commit is at most RECENT_DAYS older than it): where the recency signal should help.
    recent = {x["id"] for x in issues if gold_age_days(args.mirrors, x) <= RECENT_DAYS}
    print(f"\n| run | recent n | Acc@1 | Acc@5 | MRR@10 | other n | Acc@1 | Acc@5 | MRR@10 |")
    print("|---|---|---|---|---|---|---|---|---|")
    for label, _ in variants:
        parts = [metrics([r for r in results[label] if (r["id"] in recent) == side]) for side in (True, False)]
        print(f"| {label} | " + " | ".join(f"{m['n']} | {m['Acc@1']:.3f} | {m['Acc@5']:.3f} | {m['MRR@10']:.3f}" for m in parts) + " |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)


RECENT_DAYS = 30
TEXT_KINDS = ("traceback", "error message", "prose")


def text_kind(text):
    """What the text gives locate to read: a traceback (frames: Python's `File "x", line N`, Java/JS
    `at f(x.js:N)`), else an error message (`SomeError: …`, `raise SomeError`), else prose only."""
    if re.search(r'File "[^"]+", line \d+|^\s+at \S+\(\S+:\d+', text, re.M):
        return "traceback"
    if re.search(r"\b[A-Z]\w*(Error|Exception|Warning)\b", text):
        return "error message"
    return "prose"


def gold_age_days(mirrors, issue):
    """Days from the last first-parent commit that changed a gold file to the issue's base commit."""
    gitdir = os.path.join(mirrors, issue["repo"].replace("/", "+"), "repo")
    base = commit_time(gitdir, issue["base_commit"])
    ages = []
    for g in issue["gold_files"]:
        last = git(gitdir, "log", "-1", "--first-parent", "--format=%ct", issue["base_commit"], "--", g).decode().strip()
        ages.append((base - int(last)) / 86400 if last else float("inf"))
    return min(ages, default=float("inf"))


if __name__ == "__main__":
    main()
