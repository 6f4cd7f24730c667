"""Tests for train/mine_pairs.py: a small fixture repository mined with the real `ctxd chunk`.

    python3 -m unittest train/test_mine_pairs.py

The end-to-end tests need the ctxd binary (CTXD_BIN, else $CARGO_TARGET_DIR/release/ctxd, else
$CARGO_TARGET_DIR/debug/ctxd, CARGO_TARGET_DIR defaulting to ~/.cache/ctxd-target) with its
`chunk` subcommand; without it they are skipped, and the reason is printed.
"""
import gzip
import json
import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import gitmine  # noqa: E402
import textmine  # noqa: E402

MINER = HERE / "mine_pairs.py"
REPO = "fixture-owner/fixture"

# Each function is over ctxd's 48-token merge threshold, so each is a chunk of its own.
MOD_V1 = '''"""Module doc."""


def foo(values, start=0, skip_negative=False):
    """Return the sum of all the given values as one number."""
    total = start
    for value in values:
        if skip_negative and value < 0:
            continue
        if isinstance(value, str):
            value = int(value.strip() or 0)
        total += value
    return total


def bar(name, punctuation="!", upper=False):
    greeting = "hello " + name + punctuation
    greeting = greeting.strip()
    if upper:
        greeting = greeting.upper()
    parts = [part for part in greeting.split(" ") if part]
    return " ".join(parts)
'''
MOD_V2 = MOD_V1.replace("    return total\n", "    return total * 2\n")
MOD_V3 = MOD_V2.replace('"hello " + name', '"hi " + name')
MOD_V4 = MOD_V3.replace("greeting.strip()", "greeting.strip().lower()")
OTHER = '''def parse_config(path, separator="=", comment="#"):
    """Read the configuration file at path and return its settings."""
    settings = {}
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            line = line.split(comment, 1)[0].strip()
            if separator in line:
                key, value = line.split(separator, 1)
                settings[key.strip()] = value.strip()
    return settings


def render_total(values, width=10, label="total"):
    lines = []
    for index, value in enumerate(values):
        lines.append(f"{index:>4} {value:>{width}}")
    lines.append("-" * (width + 5))
    lines.append(f"{label:>4} {sum(values):>{width}}")
    return "\\n".join(lines)
'''
VENDOR = "def vendored(x):\n    y = x + 1\n    z = y * 2\n    return z\n"
COSQA_FUNCTION = (
    "def read_lines_stripped(path, encoding='utf-8'):\n"
    "    with open(path, encoding=encoding) as handle:\n"
    "        return [line.rstrip('\\n') for line in handle if line.strip()]\n"
)
TEST = "from pkg.mod import foo\n\n\ndef test_foo():\n    assert foo([1, 2]) == 6\n"


def find_ctxd():
    """(path, None) for a ctxd binary with a working `chunk` subcommand, else (None, why)."""
    target = Path(os.environ.get("CARGO_TARGET_DIR", Path.home() / ".cache" / "ctxd-target"))
    candidates = [os.environ.get("CTXD_BIN"), target / "release" / "ctxd", target / "debug" / "ctxd"]
    found = next((str(c) for c in candidates if c and os.access(str(c), os.X_OK)), None)
    if not found:
        return None, f"no ctxd binary (looked at {', '.join(str(c) for c in candidates if c)})"
    probe = subprocess.run([found, "chunk"], input=b'{"path": "a.py", "text": "def f():\\n    return 1\\n"}\n',
                           capture_output=True, timeout=120)
    if probe.returncode != 0 or not probe.stdout.strip():
        return None, f"{found} has no working `chunk` subcommand: {probe.stderr.decode()[-300:]}"
    return found, None


CTXD, WHY_NOT = find_ctxd()
if WHY_NOT:
    print(f"\ntest_mine_pairs: SKIPPING the end-to-end tests: {WHY_NOT}", file=sys.stderr)


def git(cwd, *args, author=("Jane Dev", "jane@example.com"), date="2024-01-01T12:00:00+00:00"):
    env = dict(os.environ, GIT_AUTHOR_NAME=author[0], GIT_AUTHOR_EMAIL=author[1], GIT_AUTHOR_DATE=date,
               GIT_COMMITTER_NAME="Jane Dev", GIT_COMMITTER_EMAIL="jane@example.com",
               GIT_COMMITTER_DATE=date, GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1")
    out = subprocess.run(["git", "-c", "init.defaultBranch=main", *args], cwd=cwd, env=env, check=True,
                         capture_output=True)
    return out.stdout.decode().strip()


def commit(work, files, message, day, author=("Jane Dev", "jane@example.com")):
    for path, text in files.items():
        (work / path).parent.mkdir(parents=True, exist_ok=True)
        (work / path).write_text(text)
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", message, author=author, date=f"2024-01-{day:02d}T12:00:00+00:00")
    return git(work, "rev-parse", "HEAD")


def build_fixture(root):
    """The fixture repository's mirror under root/mirrors, its repos.txt; {name: commit sha}."""
    work = root / "work"
    work.mkdir()
    git(work, "init", "-q")
    shas = {"initial": commit(work, {"pkg/mod.py": MOD_V1, "pkg/other.py": OTHER, "vendor/lib.py": VENDOR,
                                     "tests/test_mod.py": TEST}, "Initial import of the package", 1)}
    shas["foo"] = commit(work, {"pkg/mod.py": MOD_V2},
                         "Double the total returned by foo so callers get the scaled sum (#123)\n\n"
                         "Signed-off-by: Jane Dev <jane@example.com>", 2)
    shas["vendor"] = commit(work, {"vendor/lib.py": VENDOR.replace("+ 1", "+ 2")},
                            "Update the vendored helper library to the newest upstream version", 3)
    shas["tests"] = commit(work, {"tests/test_mod.py": TEST + "\n\ndef test_bar():\n    assert True\n"},
                           "Add a test for bar so the greeting behaviour is covered by the suite", 4)
    shas["bot"] = commit(work, {"pkg/mod.py": MOD_V3}, "Change the greeting word used by bar to a shorter one",
                         5, author=("dependabot[bot]", "49699333+dependabot[bot]@users.noreply.github.com"))
    shas["short"] = commit(work, {"pkg/mod.py": MOD_V4}, "fix bar", 6)
    mirror = root / "mirrors" / REPO.replace("/", "+") / "repo"
    mirror.parent.mkdir(parents=True)
    git(root, "clone", "-q", "--bare", str(work), str(mirror))
    (root / "repos.txt").write_text(f"# fixture\n{REPO} python\nfixture-owner/missing python\n")
    issue = {"id": "fixture-1", "repo": REPO, "base_commit": shas["initial"], "gold_files": ["pkg/mod.py"],
             "query": "foo should scale the total it returns by two"}
    (root / "issues.jsonl").write_text(json.dumps(issue) + "\n")
    (root / "cosqa").mkdir()
    (root / "cosqa" / "00001.py").write_text(COSQA_FUNCTION)
    return shas


def run_miner(root, out, *extra):
    cmd = [sys.executable, str(MINER), "--repos", str(root / "repos.txt"), "--mirrors", str(root / "mirrors"),
           "--ctxd", str(CTXD or "/nonexistent"), "--train-issues", str(root / "issues.jsonl"),
           "--cosqa", str(root / "cosqa"), "--out", str(out), *extra]
    return subprocess.run(cmd, capture_output=True, text=True)


class PureFunctions(unittest.TestCase):
    """What needs no binary: message cleaning, path classes, docstring cutting, BM25."""

    def test_clean_message(self):
        msg = "Fix the parser (#12) [skip ci]\n\nLonger body.\n\nCo-authored-by: A <a@b>\nFixes-Issue: x"
        self.assertEqual(gitmine.clean_message(msg), "Fix the parser\n\nLonger body.")

    def test_paths(self):
        self.assertTrue(gitmine.is_test("src/tests/helpers.py"))
        self.assertTrue(gitmine.is_test("a/b_test.go") and gitmine.is_test("web/x.spec.ts"))
        self.assertTrue(gitmine.is_test("conftest.py") and gitmine.is_test("src/FooTest.java"))
        self.assertFalse(gitmine.is_test("src/testing_utils.py"))
        self.assertTrue(gitmine.is_vendored("pkg/_vendor/six.py"))

    def test_python_docstring_cut(self):
        content = '    @property\n    def size(self):\n        """The number of items in the bag."""\n' \
                  '        n = len(self.items)\n        return n'
        chunk = {"content": content, "text": "bag.py Bag.size\n" + content}
        query, positive = textmine.split_doc(chunk, "bag.py")
        self.assertEqual(query, "The number of items in the bag.")
        self.assertEqual(positive, "bag.py Bag.size\n    @property\n    def size(self):\n"
                                   "        n = len(self.items)\n        return n")

    def test_comment_docstring_cut(self):
        content = "/// Adds two numbers and returns the sum.\n#[inline]\nfn add(a: u32, b: u32) -> u32 {\n" \
                  "    let s = a + b;\n    s\n}"
        query, positive = textmine.split_doc({"content": content, "text": "a.rs add\n" + content}, "a.rs")
        self.assertEqual(query, "Adds two numbers and returns the sum.")
        self.assertTrue(positive.startswith("a.rs add\n#[inline]\nfn add"))

    def test_cosqa_functions_near_equal_or_contained(self):
        with tempfile.TemporaryDirectory() as d:
            Path(d, "00001.py").write_text(COSQA_FUNCTION)
            index = textmine.CosqaIndex(d)
        self.assertTrue(index.is_duplicate(COSQA_FUNCTION.replace("    ", "  ")))
        inside = "class Holder:\n    x = 1\n\n" + COSQA_FUNCTION + "\n\ndef other():\n    return 2\n"
        self.assertTrue(index.is_duplicate(inside), "a chunk holding a CoSQA function is one")
        self.assertFalse(index.is_duplicate(MOD_V1))

    def test_bm25_ranks(self):
        bm25 = textmine.Bm25(["parse config file", "render total values", "http client request"])
        scores = bm25.scores("parseConfig file")
        rank, top = textmine.rank_and_top(scores, {0}, bm25.score_text("parseConfig file", "parse config"), 2)
        self.assertEqual((rank, top), (1, []))


@unittest.skipIf(WHY_NOT, WHY_NOT or "")
class EndToEnd(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.root = Path(cls.tmp.name)
        cls.shas = build_fixture(cls.root)
        cls.out = cls.root / "out1"
        proc = run_miner(cls.root, cls.out)
        if proc.returncode != 0:
            raise AssertionError(f"miner failed: {proc.stderr}")
        with gzip.open(cls.out / "pairs.jsonl.gz", "rt") as f:
            cls.pairs = [json.loads(line) for line in f]
        cls.stats = json.loads((cls.out / "stats.json").read_text())

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def commit_pairs(self, name):
        return [p for p in self.pairs if p["kind"] == "commit" and p["commit"] == self.shas[name]]

    def test_a_commit_positive_is_parent_version(self):
        pairs = self.commit_pairs("foo")
        self.assertEqual([p["symbol"] for p in pairs], ["foo"])
        p = pairs[0]
        self.assertTrue(p["positive"].startswith("pkg/mod.py foo\n"), p["positive"])
        self.assertIn("    return total\n", p["positive"] + "\n")
        self.assertNotIn("total * 2", p["positive"])
        self.assertEqual(p["query"], "Double the total returned by foo so callers get the scaled sum")
        self.assertEqual((p["path"], p["split"], p["repo"]), ("pkg/mod.py", "train", REPO))

    def test_b_unchanged_sibling_is_not_positive(self):
        self.assertFalse([p for p in self.pairs if p["kind"] == "commit" and p["symbol"] == "bar"])

    def test_c_vendored_and_tests_only_commits_yield_nothing(self):
        self.assertFalse(self.commit_pairs("vendor") or self.commit_pairs("tests"))
        self.assertGreaterEqual(self.stats["drops"]["vendored_files_skipped"], 1)
        self.assertEqual(self.stats["drops"]["drop_tests_only"], 1)
        self.assertFalse([p for p in self.pairs if p["path"].startswith(("vendor/", "tests/"))])

    def test_d_docstring_pair_has_doc_removed(self):
        docs = [p for p in self.pairs if p["kind"] == "docstring" and p["symbol"] == "foo"]
        self.assertEqual(len(docs), 1, self.pairs)
        self.assertEqual(docs[0]["query"], "Return the sum of all the given values as one number.")
        self.assertTrue(docs[0]["positive"].startswith("pkg/mod.py foo\n"))
        self.assertNotIn("Return the sum", docs[0]["positive"])
        self.assertIn("total * 2", docs[0]["positive"])

    def test_e_bot_and_short_commits_dropped_and_counted(self):
        self.assertFalse(self.commit_pairs("bot") or self.commit_pairs("short"))
        self.assertEqual(self.stats["drops"]["drop_bot"], 1)
        self.assertEqual(self.stats["drops"]["drop_short_message"], 1)

    def test_f_byte_identical_and_resumable(self):
        out2 = self.root / "out2"
        self.assertEqual(run_miner(self.root, out2).returncode, 0)
        first = (self.out / "pairs.jsonl.gz").read_bytes()
        self.assertEqual(first, (out2 / "pairs.jsonl.gz").read_bytes())
        self.assertEqual(run_miner(self.root, out2).returncode, 0)
        self.assertEqual(json.loads((out2 / "stats.json").read_text())["reused"], [REPO])
        self.assertEqual(first, (out2 / "pairs.jsonl.gz").read_bytes())

    def test_issue_pair_and_absent_repository(self):
        issues = [p for p in self.pairs if p["kind"] == "issue"]
        self.assertEqual([(p["symbol"], p["commit"], p["issue_id"]) for p in issues],
                         [("foo", self.shas["foo"], "fixture-1")])
        self.assertNotIn("total * 2", issues[0]["positive"])
        self.assertEqual(self.stats["repos_absent"], ["fixture-owner/missing"])

    def test_negatives_and_rank(self):
        for p in self.pairs:
            self.assertNotIn(p["positive"], p["negatives"])
            self.assertFalse([n for n in p["negatives"] if n.startswith(f"{p['path']} {p['symbol']}\n")])
            self.assertTrue(p["bm25_rank"] is None or 1 <= p["bm25_rank"] <= 100)
        self.assertTrue(any(p["negatives"] for p in self.pairs))

    def test_unlisted_repository_refused(self):
        proc = run_miner(self.root, self.root / "out3", "--only", "someone/else")
        self.assertEqual(proc.returncode, 2)
        self.assertIn("not listed", proc.stderr)


if __name__ == "__main__":
    unittest.main()
