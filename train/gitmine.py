"""Git and ctxd plumbing for mine_pairs.py: reading a bare mirror, filtering commits, and
chunking files through `ctxd chunk`.

Everything here is a plain function (or a small class around one long-running subprocess) so
that mine_pairs.py reads as the recipe: which commits qualify (`commit_drop_reason`,
`classify_files`), which old-side lines a commit touches (`old_side_lines`), what a file's
definitions are (`ChunkClient.chunk`).
"""
import hashlib
import json
import re
import subprocess
import tempfile

SOURCE_EXTS = (
    ".py", ".js", ".jsx", ".mjs", ".ts", ".tsx", ".go", ".rs", ".java", ".c", ".h", ".cpp",
    ".cc", ".hpp", ".cs", ".rb", ".php", ".kt", ".scala", ".lua", ".swift",
)
VENDOR_DIRS = {"vendor", "_vendor", "vendored", "third_party", "extern", "node_modules"}
TEST_DIRS = {"test", "tests", "testing", "__tests__", "spec"}
TEST_NAME = re.compile(
    r"^(test_.*\.py|.*_test\.py|.*_test\.go|.*\.(test|spec)\.(js|jsx|mjs|ts|tsx)|.*Test\.java|conftest\.py)$"
)
BOT_MARKERS = ("[bot]", "dependabot", "renovate", "pre-commit-ci", "github-actions")
BUMP = re.compile(r"^(bump|release|prepare release|version)\b|^v?\d+(\.\d+)+", re.IGNORECASE)
TRAILER_LINE = re.compile(r"^(signed-off-by|co-authored-by|reviewed-by|change-id):", re.IGNORECASE)
TRAILER_BLOCK_LINE = re.compile(r"^[A-Za-z][A-Za-z0-9-]*: \S")
PR_REF = re.compile(r"\s*\((?:#|gh-)\d+\)", re.IGNORECASE)
SKIP_TAG = re.compile(
    r"\s*\[(?:skip[ -]ci|ci[ -]skip|no[ -]ci|skip[ -]actions|actions[ -]skip|skip[ -]travis"
    r"|skip[ -]changelog|skip[ -]news|ci)\]",
    re.IGNORECASE,
)
HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+\d+(?:,\d+)? @@")
MAX_FILE_BYTES = 1_000_000


def git(git_dir, *args, check=True):
    """Runs git on the bare repository `git_dir`; returns stdout as bytes."""
    proc = subprocess.run(["git", "--git-dir", git_dir, "-c", "core.quotePath=false", *args],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if check and proc.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)}: {proc.stderr.decode(errors='replace').strip()}")
    return proc.stdout


def head_commit(git_dir):
    return git(git_dir, "rev-parse", "HEAD").decode().strip()


def has_commit(git_dir, sha):
    return bool(sha) and subprocess.run(
        ["git", "--git-dir", git_dir, "cat-file", "-e", f"{sha}^{{commit}}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0


# ---------------------------------------------------------------------------------------------
# Paths and messages


def segments(path):
    return path.split("/")


def is_source(path):
    return path.endswith(SOURCE_EXTS)


def is_vendored(path):
    return any(s in VENDOR_DIRS for s in segments(path)[:-1])


def is_generated(path):
    """Built bundles (a `dist` folder, `*.min.js`, `*.bundle.js`): copies of the real sources."""
    name = segments(path)[-1]
    return "dist" in segments(path)[:-1] or name.endswith((".min.js", ".bundle.js"))


def is_test(path):
    parts = segments(path)
    return any(s in TEST_DIRS for s in parts[:-1]) or bool(TEST_NAME.match(parts[-1]))


def clean_message(message):
    """The commit message without trailers, PR/issue refs and CI tags; blank runs collapsed."""
    lines = [l.rstrip() for l in message.strip().splitlines() if not TRAILER_LINE.match(l.strip())]
    paragraphs, cur = [], []
    for line in lines + [""]:
        if line.strip():
            cur.append(line)
        elif cur:
            paragraphs.append(cur)
            cur = []
    # A final `Key-Name: value` block (not the subject) is a trailer block.
    if len(paragraphs) > 1 and all(TRAILER_BLOCK_LINE.match(l.strip()) for l in paragraphs[-1]):
        paragraphs.pop()
    text = "\n\n".join("\n".join(p) for p in paragraphs)
    text = SKIP_TAG.sub("", PR_REF.sub("", text))
    return "\n".join(l.rstrip() for l in text.splitlines()).strip()


def commit_drop_reason(commit, cleaned):
    """Why a commit's message or author disqualifies it (None when they do not)."""
    if len(commit["parents"]) > 1:
        return "merge"
    if not commit["parents"]:
        return "root"
    who = (commit["author_name"] + " " + commit["author_email"]).lower()
    if any(m in who for m in BOT_MARKERS):
        return "bot"
    subject = cleaned.splitlines()[0].strip() if cleaned else ""
    if subject.lower().startswith("revert"):
        return "revert"
    if BUMP.match(subject):
        return "bump"
    if len(cleaned) < 40:
        return "short_message"
    return None


def classify_files(changes):
    """Splits a commit's (status, path) changes into mineable source files and the rest.

    Returns (modified, mineable_count, tests, vendored): `modified` are the non-test,
    non-vendored source files the commit modifies (status M), `mineable_count` how many such
    files it changes in any way, `tests` how many test source files, `vendored` how many
    vendored files it touches (never mined). Built bundles are neither mined nor counted."""
    modified, mineable, tests, vendored = [], 0, 0, 0
    for status, path in changes:
        if is_vendored(path):
            vendored += 1
        elif not is_source(path) or is_generated(path):
            continue
        elif is_test(path):
            tests += 1
        else:
            mineable += 1
            if status == "M":
                modified.append(path)
    return sorted(modified), mineable, tests, vendored


def file_drop_reason(modified, mineable, tests):
    if mineable == 0:
        return "tests_only" if tests else "no_source_files"
    if not modified or mineable > 5:
        return "file_count"
    return None


# ---------------------------------------------------------------------------------------------
# History


def iter_commits(git_dir):
    """Yields the commits reachable from HEAD, newest first, as dicts with `sha`, `parents`,
    author, `message` and `changes` [(status, path)] (renames as delete + add)."""
    proc = subprocess.Popen(
        ["git", "--git-dir", git_dir, "-c", "core.quotePath=false", "log", "--no-renames",
         "--name-status", "--format=%x1e%H%x1f%P%x1f%an%x1f%ae%x1f%B%x1d", "HEAD"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        buf = b""
        while True:
            block = proc.stdout.read(1 << 20)
            buf += block
            records = buf.split(b"\x1e")
            buf = records.pop() if block else b""
            for rec in records:
                if rec.strip():
                    yield parse_commit(rec.decode("utf-8", errors="replace"))
            if not block:
                break
    finally:
        proc.stdout.close()
        proc.kill()
        proc.wait()


def parse_commit(record):
    head, _, files = record.partition("\x1d")
    sha, parents, name, email, message = head.split("\x1f", 4)
    changes = []
    for line in files.splitlines():
        status, _, path = line.partition("\t")
        if path and not path.startswith('"'):
            changes.append((status[:1], path))
    return {"sha": sha, "parents": parents.split(), "author_name": name, "author_email": email,
            "message": message, "changes": changes}


def old_side_lines(git_dir, parent, commit, paths):
    """{path: set of 1-based old-side line numbers} that `commit` changes relative to `parent`;
    a pure insertion after line a (`-a,0`) counts as touching line a."""
    out = git(git_dir, "diff", "-U0", "--no-color", "--no-renames", "--no-ext-diff", parent, commit,
              "--", *paths).decode("utf-8", errors="replace")
    touched, path = {}, None
    for line in out.splitlines():
        if line.startswith("diff --git "):
            path = None
        elif line.startswith("--- "):
            # git ends the name with a tab when it holds a space
            path = line[6:].rstrip("\t") if line.startswith("--- a/") else None
        elif path is not None and (m := HUNK.match(line)):
            start, count = int(m.group(1)), int(m.group(2) if m.group(2) is not None else 1)
            lines = range(start, start + count) if count else [max(start, 1)]
            touched.setdefault(path, set()).update(lines)
    return touched


def first_parent_children(git_dir, parents_wanted):
    """{commit: sorted children whose first parent is that commit}, for commits in
    `parents_wanted`, over every ref of the mirror."""
    out = git(git_dir, "rev-list", "--all", "--parents").decode()
    children = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) > 1 and parts[1] in parents_wanted:
            children.setdefault(parts[1], []).append(parts[0])
    return {k: sorted(v) for k, v in children.items()}


def changed_files(git_dir, parent, commit):
    out = git(git_dir, "diff", "--name-status", "--no-renames", parent, commit).decode("utf-8", "replace")
    return [(l[:1], l.partition("\t")[2]) for l in out.splitlines() if "\t" in l]


def tree_files(git_dir, rev):
    """[(path, size)] of the blobs in `rev`'s tree, sorted by path."""
    out = git(git_dir, "ls-tree", "-r", "-z", "--long", rev).decode("utf-8", errors="replace")
    files = []
    for entry in out.split("\0"):
        meta, _, path = entry.partition("\t")
        parts = meta.split()
        if len(parts) == 4 and parts[1] == "blob" and parts[3].isdigit():
            files.append((path, int(parts[3])))
    return sorted(files)


class BlobReader:
    """One `git cat-file --batch` process: `read(rev, path)` gives the file's text or None."""

    def __init__(self, git_dir):
        self.proc = subprocess.Popen(["git", "--git-dir", git_dir, "cat-file", "--batch"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def read(self, rev, path):
        if "\n" in path:
            return None  # the batch protocol is line-based
        self.proc.stdin.write(f"{rev}:{path}\n".encode())
        self.proc.stdin.flush()
        # "<sha> <type> <size>", or "<rev>:<path> missing" (a path may hold spaces; a mirror
        # lacks blobs of 4 MiB and more): anything but the first form has no body to read.
        header = self.proc.stdout.readline().split()
        if len(header) != 3 or not header[2].isdigit():
            return None
        size = int(header[2])
        data = self.proc.stdout.read(size + 1)[:size]
        if header[1] != b"blob" or size > MAX_FILE_BYTES or b"\0" in data:
            return None
        return data.decode("utf-8", errors="replace")

    def close(self):
        self.proc.stdin.close()
        self.proc.wait()


class ChunkClient:
    """One `ctxd chunk` process: `chunk(path, text)` gives the file's chunk dicts (one JSON line
    written, one read). Recent results are memoised by (path, text digest): a file unchanged
    across nearby commits is chunked once."""

    def __init__(self, binary):
        self.binary = binary
        self.stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen([binary, "chunk"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.stderr)
        self.memo = {}

    def chunk(self, path, text):
        key = (path, hashlib.sha1(text.encode()).digest())
        if key not in self.memo:
            if len(self.memo) >= 2000:
                self.memo.clear()
            self.memo[key] = self._ask(path, text)
        return self.memo[key]

    def _ask(self, path, text):
        line = json.dumps({"path": path, "text": text}) + "\n"
        try:
            self.proc.stdin.write(line.encode())
            self.proc.stdin.flush()
            answer = self.proc.stdout.readline()
        except BrokenPipeError:
            answer = b""
        if not answer:
            self.stderr.seek(0)
            said = self.stderr.read().decode(errors="replace").strip()[-2000:]
            raise RuntimeError(f"`{self.binary} chunk` stopped answering (at {path}): {said}")
        reply = json.loads(answer)
        if reply.get("path") != path:
            raise RuntimeError(f"`{self.binary} chunk` answered for {reply.get('path')!r}, not {path!r}")
        return reply

    def close(self):
        try:
            self.proc.stdin.close()
        except BrokenPipeError:
            pass
        self.proc.wait()
        self.stderr.close()


def definitions(reply):
    """The definition chunks of a `ctxd chunk` reply."""
    return [c for c in reply.get("chunks", []) if c.get("definition")]
