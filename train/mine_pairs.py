#!/usr/bin/env python3
"""Mines (query text -> code definition) training pairs for a code embedding model from bare git
mirrors of the repositories listed in shared/eval/training/repos.txt, deterministically.

Why: ctxd embeds definition chunks and answers natural-language queries (questions, issue texts,
commit-like descriptions) with them. Public history gives such pairs for free, in the very form
ctxd embeds, when definitions are found and rendered by ctxd itself (`ctxd chunk`):

1. commit -> definitions: a non-merge, non-bot, non-revert, non-release commit that modifies 1-5
   non-test source files with a message of >= 40 characters (trailers, PR refs and CI tags cut):
   its message is the query, the definitions of the PARENT version whose lines the commit
   changes are the positives (1-5 in all, one pair each).
2. docstring -> definition: at HEAD, a definition's doc (Python docstring, or the comment block
   above it in other languages) is the query, the definition with the doc cut out the positive.
3. issue -> definitions: for an issue of shared/eval/localization/train.jsonl whose fix (a child
   commit of base_commit touching a gold file) is in the mirror, the issue text is the query and
   the definitions at base_commit that the fix changes in gold files are the positives.

Each pair gets hard negatives: the top BM25 definitions of the repository's HEAD for its query
that are not one of its positives, and `bm25_rank`, the positive's rank in that list. Pairs are
filtered (test files, vendored folders, CoSQA duplicates), deduplicated, capped per repository
and kind, and split train/validation by repository. Outputs: pairs.jsonl.gz and stats.json in --out;
each repository's pairs are first written to --out/repos/ and reused when HEAD and options match.

    python3 train/mine_pairs.py [--only owner/name ...] [--out DIR] [--jobs N]
"""
import argparse
import concurrent.futures
import gzip
import hashlib
import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gitmine  # noqa: E402
import textmine  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
VERSION = 2  # bump when the recipe changes: cached per-repository files are then re-mined
POOL_CAP = 60000
POSITIVE_REUSE = 20
ISSUE_CHARS = 2000
KINDS = ("commit", "docstring", "issue")


def parse_args(argv):
    target = Path(os.environ.get("CARGO_TARGET_DIR", Path.home() / ".cache" / "ctxd-target"))
    release = target / "release" / "ctxd"
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repos", default=str(ROOT / "../shared/eval/training/repos.txt"))
    ap.add_argument("--mirrors", default="/work/.mirror")
    ap.add_argument("--ctxd", default=str(release if release.exists() else target / "debug" / "ctxd"))
    ap.add_argument("--train-issues", default=str(ROOT / "../shared/eval/localization/train.jsonl"))
    ap.add_argument("--cosqa", default=str(ROOT / "../shared/eval/cosqa/corpus"))
    ap.add_argument("--out", default=str(Path.home() / ".cache" / "ctxd" / "pairs"))
    ap.add_argument("--only", action="append", default=[], metavar="OWNER/NAME")
    ap.add_argument("--max-commits", type=int, default=4000)
    ap.add_argument("--cap", type=int, default=3000)
    ap.add_argument("--negatives", type=int, default=7)
    ap.add_argument("--jobs", type=int, default=1)
    return ap.parse_args(argv)


def fail(message):
    print(f"mine_pairs: {message}", file=sys.stderr)
    sys.exit(2)


def read_repos(path):
    """[(owner/name, language, train_set)] in file order."""
    repos = []
    for line in Path(path).read_text().splitlines():
        parts = line.split("#", 1)[0].split()
        if len(parts) >= 2:
            repos.append((parts[0], parts[1], "train-set" in parts[2:]))
    return repos


def split_of(repo, train_set):
    if train_set:
        return "train"
    return "validation" if hashlib.sha1(repo.encode()).hexdigest()[0] in "01" else "train"


def read_issues(path):
    """{owner/name: [issue]} sorted by id; empty when the file is absent."""
    issues = {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                if line.strip():
                    row = json.loads(line)
                    issues.setdefault(row["repo"], []).append(row)
    return {k: sorted(v, key=lambda r: r["id"]) for k, v in issues.items()}


def digest(*parts):
    h = hashlib.sha1()
    for p in parts:
        h.update(p if isinstance(p, bytes) else str(p).encode())
        h.update(b"\0")
    return h.hexdigest()


# Files in each language the miner reads: what a ctxd build makes of them is its chunker's
# fingerprint (the cache key), so a rebuilt binary that chunks alike reuses the cache.
PROBES = {
    "probe/a.py": 'import os\n\n\nclass Store:\n    """Keeps rows."""\n\n    def __init__(self, root):\n'
                  '        self.root = root\n        self.rows = []\n\n    def add(self, row, *, flush=False):\n'
                  '        """Adds a row; flushes when asked."""\n        self.rows.append(row)\n'
                  '        if flush:\n            self.flush()\n\n    def flush(self):\n'
                  '        with open(os.path.join(self.root, "rows"), "a") as f:\n'
                  '            f.writelines(str(r) for r in self.rows)\n        self.rows.clear()\n',
    "probe/b.rs": '/// A counter.\npub struct Counter { n: u64 }\n\nimpl Counter {\n    /// Adds one.\n'
                  '    pub fn bump(&mut self) -> u64 {\n        self.n += 1;\n        self.n\n    }\n}\n',
    "probe/c.go": 'package p\n\n// Sum adds the values.\nfunc Sum(v []int) int {\n\ts := 0\n'
                  '\tfor _, x := range v {\n\t\ts += x\n\t}\n\treturn s\n}\n',
    "probe/d.ts": '/** Joins parts. */\nexport function join(parts: string[], sep = "/"): string {\n'
                  '  return parts.filter(Boolean).join(sep);\n}\n',
    "probe/E.java": 'class E {\n  /** Doubles x. */\n  static int twice(int x) {\n    return 2 * x;\n  }\n}\n',
}


def chunker_fingerprint(binary):
    """sha1 of `ctxd chunk`'s answers for PROBES."""
    lines = "".join(json.dumps({"path": p, "text": t}) + "\n" for p, t in sorted(PROBES.items()))
    out = subprocess.run([binary, "chunk"], input=lines.encode(), capture_output=True, check=True).stdout
    return digest(out)


def cosqa_fingerprint(directory):
    if not os.path.isdir(directory):
        return "absent"
    names = sorted(os.listdir(directory))
    return digest(*(f"{n}:{os.path.getsize(os.path.join(directory, n))}" for n in names))


def pair_key(pair):
    return digest(pair["query"], pair["positive"])


def norm(text):
    return " ".join(text.split())


# ---------------------------------------------------------------------------------------------
# One repository


_COSQA = {}


def cosqa_index(directory):
    """The CoSQA index, loaded once per process."""
    if directory not in _COSQA:
        _COSQA[directory] = textmine.CosqaIndex(directory)
    return _COSQA[directory]


class RepoMiner:
    """Mines one repository's pairs: the HEAD snapshot (pool and docstring pairs), the commit
    pairs, the issue pairs, then filters, negatives and split (`run`)."""

    def __init__(self, repo, git_dir, task):
        self.repo, self.git_dir, self.task = repo, git_dir, task
        self.stats = Counter()
        self.blobs = gitmine.BlobReader(git_dir)
        self.chunker = gitmine.ChunkClient(task["ctxd"])

    def close(self):
        self.blobs.close()
        self.chunker.close()

    def run(self, head):
        try:
            pool, pairs = self.head_snapshot(head)
            pairs += self.commit_pairs()
            pairs += self.issue_pairs(self.task["issues"])
        finally:
            self.close()
        pairs = self.drop_cosqa(pairs)
        pairs = self.dedup_and_cap(pairs)
        self.add_negatives(pairs, pool)
        return pairs

    def source_definitions(self, rev, path):
        text = self.blobs.read(rev, path)
        if text is None:
            return "", []
        reply = self.chunker.chunk(path, text)
        return reply.get("language") or "", gitmine.definitions(reply)

    def head_snapshot(self, head):
        """(pool, docstring pairs): HEAD's non-test, non-vendored definitions (CoSQA duplicates
        out, at most POOL_CAP), and a pair for each definition with a usable doc."""
        pool, pairs = [], []
        cosqa = cosqa_index(self.task["cosqa"])
        for path, size in gitmine.tree_files(self.git_dir, head):
            if not gitmine.is_source(path):
                continue
            if gitmine.is_vendored(path):
                self.stats["vendored_files_skipped"] += 1
                continue
            if gitmine.is_generated(path):
                self.stats["generated_files_skipped"] += 1
                continue
            if gitmine.is_test(path) or size > gitmine.MAX_FILE_BYTES:
                continue
            language, defs = self.source_definitions(head, path)
            for d in defs:
                if language == "python" and cosqa.is_duplicate(d["content"]):
                    self.stats["pool_cosqa_duplicates"] += 1
                    continue
                pool.append({"path": path, "symbol": d.get("symbol"), "text": d["text"],
                             "start_line": d["start_line"]})
                found = textmine.split_doc(d, path)
                if found:
                    pairs.append(self.pair("docstring", language, found[0], found[1], None, path, d))
        if len(pool) > POOL_CAP:
            pool = sorted(pool, key=lambda p: digest(p["path"], p["start_line"]))[:POOL_CAP]
            pool.sort(key=lambda p: (p["path"], p["start_line"]))
        self.stats["pool_definitions"] = len(pool)
        return pool, pairs

    def pair(self, kind, language, query, positive, commit, path, chunk, issue_id=None):
        return {"kind": kind, "repo": self.repo, "language": language, "query": query,
                "positive": positive, "commit": commit, "path": path, "symbol": chunk.get("symbol"),
                "issue_id": issue_id, "_content": chunk["content"]}

    def changed_definitions(self, parent, commit, paths):
        """[(path, language, chunk)]: the definitions at `parent` overlapping the old-side lines
        that `commit` changes in `paths`."""
        touched = gitmine.old_side_lines(self.git_dir, parent, commit, paths)
        found = []
        for path in sorted(touched):
            language, defs = self.source_definitions(parent, path)
            lines = touched[path]
            for d in defs:
                if any(d["start_line"] <= l <= d["end_line"] for l in lines):
                    found.append((path, language, d))
        return found

    def commit_pairs(self):
        pairs, qualifying = [], 0
        for commit in gitmine.iter_commits(self.git_dir):
            if qualifying >= self.task["max_commits"]:
                break
            self.stats["commits_scanned"] += 1
            cleaned = gitmine.clean_message(commit["message"])
            reason = gitmine.commit_drop_reason(commit, cleaned)
            if not reason:
                modified, mineable, tests, vendored = gitmine.classify_files(commit["changes"])
                self.stats["vendored_files_skipped"] += vendored
                reason = gitmine.file_drop_reason(modified, mineable, tests)
            if reason:
                self.stats["drop_" + reason] += 1
                continue
            qualifying += 1
            positives = self.changed_definitions(commit["parents"][0], commit["sha"], modified)
            if not positives:
                self.stats["drop_no_definitions"] += 1
            elif len(positives) > 5:
                self.stats["drop_too_many_definitions"] += 1
            else:
                self.stats["commits_kept"] += 1
                pairs += [self.pair("commit", lang, cleaned, d["text"], commit["sha"], path, d)
                          for path, lang, d in positives]
        self.stats["commits_qualifying"] = qualifying
        return pairs

    def find_fix(self, base, children, gold):
        """The child of `base` modifying the most gold files (ties: smallest sha), with those
        files; (None, []) when none modifies one."""
        best = (None, [])
        for child in children.get(base, []):
            modified = sorted(p for s, p in gitmine.changed_files(self.git_dir, base, child)
                              if s == "M" and p in gold and gitmine.is_source(p))
            if len(modified) > len(best[1]):
                best = (child, modified)
        return best

    def issue_pairs(self, issues):
        pairs = []
        bases = {i["base_commit"] for i in issues if gitmine.has_commit(self.git_dir, i["base_commit"])}
        children = gitmine.first_parent_children(self.git_dir, bases) if bases else {}
        for issue in issues:
            self.stats["issues"] += 1
            base = issue["base_commit"]
            if base not in bases:
                self.stats["issue_drop_base_absent"] += 1
                continue
            fix, gold = self.find_fix(base, children, set(issue["gold_files"]))
            positives = self.changed_definitions(base, fix, gold) if fix else []
            if not fix:
                self.stats["issue_drop_no_fix"] += 1
            elif not positives:
                self.stats["issue_drop_no_definitions"] += 1
            else:
                self.stats["issues_kept"] += 1
                query = issue["query"][:ISSUE_CHARS]
                pairs += [self.pair("issue", lang, query, d["text"], fix, path, d, issue["id"])
                          for path, lang, d in positives]
        return pairs

    def drop_cosqa(self, pairs):
        cosqa, kept = cosqa_index(self.task["cosqa"]), []
        for p in pairs:
            if p["language"] == "python" and (cosqa.is_duplicate(p["_content"])
                                              or cosqa.is_duplicate(p["positive"])):
                self.stats["drop_cosqa_duplicates"] += 1
            else:
                kept.append(p)
        return kept

    def dedup_and_cap(self, pairs):
        """One pair per normalized (query, positive); a positive in at most POSITIVE_REUSE pairs;
        at most --cap pairs per kind; in (kind, sha1 of query+positive) order."""
        pairs.sort(key=lambda p: (p["kind"], pair_key(p)))
        seen, uses, per_kind, kept = set(), Counter(), Counter(), []
        for p in pairs:
            qp = (norm(p["query"]), norm(p["positive"]))
            if qp in seen:
                self.stats["drop_dedup"] += 1
                continue
            seen.add(qp)
            uses[qp[1]] += 1
            if uses[qp[1]] > POSITIVE_REUSE:
                self.stats["drop_dedup_positive_reuse"] += 1
                continue
            per_kind[p["kind"]] += 1
            if per_kind[p["kind"]] > self.task["cap"]:
                self.stats["drop_cap"] += 1
                continue
            kept.append(p)
        return kept

    def add_negatives(self, pairs, pool):
        """Sets `negatives` (top --negatives pool texts by BM25; none sharing a path and a
        symbol name or the text with a positive of the same query) and `bm25_rank` on every
        pair, one BM25 pass per distinct query."""
        bm25 = textmine.Bm25([d["text"] for d in pool])
        by_id, by_text = {}, {}
        for i, d in enumerate(pool):
            for name in symbol_names(d["symbol"]):
                by_id.setdefault((d["path"], name), []).append(i)
            by_text.setdefault(d["text"], []).append(i)
        groups = {}
        for p in pairs:
            groups.setdefault(norm(p["query"]), []).append(p)
        for query in sorted(groups):
            group = groups[query]
            excluded = set()
            for p in group:
                excluded.update(by_text.get(p["positive"], []))
                for name in symbol_names(p["symbol"]):
                    excluded.update(by_id.get((p["path"], name), []))
            scores = bm25.scores(group[0]["query"])
            for p in group:
                positive_score = bm25.score_text(p["query"], p["positive"])
                rank, top = textmine.rank_and_top(scores, excluded, positive_score, self.task["negatives"])
                p["negatives"], p["bm25_rank"] = [pool[i]["text"] for i in top], rank


def symbol_names(symbol):
    """The definitions a chunk's symbol names: ctxd merges small siblings as `f, g`."""
    return [s for s in (symbol or "").split(", ") if s]


def output_pair(pair, split):
    keys = ("kind", "repo", "language", "query", "positive", "negatives", "commit", "path",
            "symbol", "split", "bm25_rank", "issue_id")
    full = dict(pair, split=split)
    return {k: full[k] for k in keys}


# ---------------------------------------------------------------------------------------------
# Per-repository files, the run, the outputs


def write_gzip_lines(path, lines):
    """Writes `lines` gzipped (mtime 0, no file name: byte-identical for the same lines)."""
    tmp = f"{path}.tmp"
    with open(tmp, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as f:
        for line in lines:
            f.write(line.encode() + b"\n")
    os.replace(tmp, path)


def repo_paths(out, repo):
    base = Path(out) / "repos" / repo.replace("/", "+")
    return Path(f"{base}.jsonl.gz"), Path(f"{base}.meta.json")


def cached_stats(task, key):
    pairs_path, meta_path = repo_paths(task["out"], task["repo"])
    if pairs_path.exists() and meta_path.exists():
        meta = json.loads(meta_path.read_text())
        if meta.get("key") == key:
            return dict(meta["stats"], reused=True)
    return None


def mine_repo(task):
    """Mines (or reuses) one repository; returns its stats. Runs in a worker under --jobs."""
    repo = task["repo"]
    git_dir = os.path.join(task["mirrors"], repo.replace("/", "+"), "repo")
    if not os.path.isdir(git_dir):
        return {"repo": repo, "absent": True}
    try:
        head = gitmine.head_commit(git_dir)
    except Exception as e:  # a mirror without a HEAD: counted, named
        return {"repo": repo, "absent": True, "failed": f"{type(e).__name__}: {e}"}
    key = digest(VERSION, head, task["options"], task["split"],
                 json.dumps(task["issues"], sort_keys=True))
    cached = cached_stats(task, key)
    if cached:
        return cached
    started = time.monotonic()
    miner = RepoMiner(repo, git_dir, task)
    try:
        pairs = miner.run(head)
    except Exception as e:  # one repository's surprise must not end a run of hours: counted, named
        return {"repo": repo, "absent": True, "failed": f"{type(e).__name__}: {e}"}
    lines = [json.dumps(output_pair(p, task["split"]), ensure_ascii=False) for p in pairs]
    pairs_path, meta_path = repo_paths(task["out"], repo)
    pairs_path.parent.mkdir(parents=True, exist_ok=True)
    write_gzip_lines(pairs_path, lines)
    stats = {"repo": repo, "head": head, "split": task["split"], "seconds": round(time.monotonic() - started, 2),
             "pairs": len(pairs), "by_kind": dict(sorted(Counter(p["kind"] for p in pairs).items())),
             "by_language": dict(sorted(Counter(p["language"] for p in pairs).items())),
             "counts": dict(sorted(miner.stats.items()))}
    meta_path.write_text(json.dumps({"key": key, "stats": stats}, indent=1, sort_keys=True) + "\n")
    return dict(stats, reused=False)


def progress(stats):
    if stats.get("failed"):
        line = f"{stats['repo']}: FAILED, left out: {stats['failed']}"
    elif stats.get("absent"):
        line = f"{stats['repo']}: absent (no mirror)"
    else:
        kinds = " ".join(f"{k}={stats['by_kind'].get(k, 0)}" for k in KINDS)
        line = f"{stats['repo']}: {kinds} {stats['seconds']:.1f}s" + (" (reused)" if stats["reused"] else "")
    print(line, file=sys.stderr, flush=True)


def select_repos(args):
    listed = read_repos(args.repos)
    names = {r for r, _, _ in listed}
    for only in args.only:
        if only not in names:
            fail(f"{only} is not listed in {args.repos}; only listed repositories may be mined.")
    chosen = [r for r in listed if not args.only or r[0] in args.only]
    return sorted(chosen)


def make_tasks(args, chosen):
    issues = read_issues(args.train_issues)
    # ctxd's chunk budget follows its config (CTXD_* variables), so they are part of the key too.
    ctxd_env = sorted((k, v) for k, v in os.environ.items() if k.startswith("CTXD_"))
    # The miner's own code is part of the recipe, and so of the key.
    code = [Path(__file__).resolve().parent / f for f in ("mine_pairs.py", "gitmine.py", "textmine.py")]
    options = digest(args.max_commits, args.cap, args.negatives, chunker_fingerprint(args.ctxd),
                     *(digest(f.read_bytes()) for f in code),
                     cosqa_fingerprint(args.cosqa), ctxd_env)
    return [{"repo": repo, "split": split_of(repo, train_set), "issues": issues.get(repo, []),
             "mirrors": args.mirrors, "ctxd": args.ctxd, "cosqa": args.cosqa, "out": args.out,
             "options": options, "max_commits": args.max_commits, "cap": args.cap,
             "negatives": args.negatives} for repo, _, train_set in chosen]


def run_tasks(tasks, jobs):
    results = []
    if jobs <= 1:
        for task in tasks:
            results.append(mine_repo(task))
            progress(results[-1])
        return results
    with concurrent.futures.ProcessPoolExecutor(max_workers=jobs) as ex:
        for stats in ex.map(mine_repo, tasks):
            progress(stats)
            results.append(stats)
    return results


def merge_pairs(out, results):
    """pairs.jsonl.gz: the repositories' files concatenated in repository order (each is sorted
    by kind, then sha1 of query+positive)."""
    def lines():
        for stats in sorted(results, key=lambda s: s["repo"]):
            if not stats.get("absent"):
                with gzip.open(repo_paths(out, stats["repo"])[0], "rt", encoding="utf-8") as f:
                    for line in f:
                        yield line.rstrip("\n")
    write_gzip_lines(Path(out) / "pairs.jsonl.gz", lines())


def summarize(results, args, seconds):
    mined = [s for s in results if not s.get("absent")]
    total = lambda field: dict(sorted(sum((Counter(s[field]) for s in mined), Counter()).items()))
    by_split = Counter()
    for s in mined:
        by_split[s["split"]] += s["pairs"]
    counts = total("counts")
    return {
        "pairs": sum(s["pairs"] for s in mined),
        "by_kind": total("by_kind"),
        "by_language": total("by_language"),
        "by_split": dict(sorted(by_split.items())),
        "by_repo": {s["repo"]: s["by_kind"] for s in mined},
        "commits": {k: counts.get(k, 0) for k in ("commits_scanned", "commits_qualifying", "commits_kept")},
        "drops": {k: v for k, v in counts.items() if "drop" in k or "cosqa" in k or k.endswith("files_skipped")},
        "counts": counts,
        "repos_absent": sorted(s["repo"] for s in results if s.get("absent") and not s.get("failed")),
        "repos_failed": {s["repo"]: s["failed"] for s in results if s.get("failed")},
        "seconds_by_repo": {s["repo"]: s["seconds"] for s in mined},
        "reused": sorted(s["repo"] for s in mined if s.get("reused")),
        "seconds": round(seconds, 2),
        "ctxd": os.path.abspath(args.ctxd),
        "heads": {s["repo"]: s["head"] for s in mined},
        "options": {"max_commits": args.max_commits, "cap": args.cap, "negatives": args.negatives},
        "recipe": VERSION,
    }


def main(argv=None):
    args = parse_args(argv)
    started = time.monotonic()
    if not os.path.isfile(args.repos):
        fail(f"the repository list {args.repos} does not exist.")
    if not os.access(args.ctxd, os.X_OK):
        fail(f"the ctxd binary {args.ctxd} does not exist (build it, or pass --ctxd).")
    if not os.path.isdir(args.cosqa) or not os.listdir(args.cosqa):
        fail(f"the CoSQA corpus {args.cosqa} is absent or empty: its functions must be filtered out "
             "of the pairs (pass --cosqa DIR).")
    chosen = select_repos(args)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    results = run_tasks(make_tasks(args, chosen), args.jobs)
    merge_pairs(args.out, results)
    stats = summarize(results, args, time.monotonic() - started)
    (Path(args.out) / "stats.json").write_text(json.dumps(stats, indent=1) + "\n")
    print(f"{stats['pairs']} pairs {stats['by_kind']} in {stats['seconds']:.1f}s -> {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
