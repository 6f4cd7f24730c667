"""The load bench's writers: an editor that rewrites SciFact abstracts in the watched folder at a
set rate and commits them to git (`edit_side`, the default ingest), the earlier bench's one-shot
copy of files (`ingest_side`, `--edit-rate 0`), each measuring when its last write became
searchable, and the clean-up of what they wrote (`remove_ingested`)."""
import os, shutil, subprocess, threading, time

from load_probe import post_json, version_of

SCIFACT = "/work/shared/eval/scifact/corpus"
INGEST_PREFIX = "_load_ingest_"


def letters(n):
    """`n` in letters (a word the code tokenizer keeps whole: no digits, no case change)."""
    return "".join(chr(ord("a") + int(c)) for c in str(n))


def git(src, *argv):
    subprocess.run(["git", "-C", src, *argv], check=True, capture_output=True)


def git_commit(src, message, who="load"):
    """Commits everything in the work tree as `who` (nothing when nothing changed); True if it did."""
    git(src, "add", "-A")
    if subprocess.run(["git", "-C", src, "diff", "--cached", "--quiet"]).returncode == 0:
        return False
    git(src, "-c", f"user.name={who}", "-c", f"user.email={who}@example.org", "commit", "-q", "-m", message)
    return True


def edit_side(base, src, n_files, run_tag, args):
    """Returns a `during(t0)` whose editor writes `args.edit_rate` files a second into the watched
    folder (n_files SciFact abstracts, created, then rewritten over and over, each write with a
    word of its own) and commits them to git every `args.git_commit_secs`, until its `finish()`;
    which then measures how long the last write took to be searchable."""
    pool = sorted(os.listdir(SCIFACT))[:n_files]
    texts = []
    for name in pool:
        with open(os.path.join(SCIFACT, name), encoding="utf-8", errors="replace") as f:
            texts.append(f.read().rstrip("\n"))
    dest = os.path.join(src, f"{INGEST_PREFIX}{run_tag}")
    enc = letters(sum(map(ord, run_tag)))
    info = {"edit_files": len(pool), "version_before": version_of(base), "edits": 0, "git_commits": 0, "git_commit_times": []}
    stop = threading.Event()
    last = {}

    def editor(c0):
        os.makedirs(dest, exist_ok=True)
        i, next_commit = 0, c0 + args.git_commit_secs
        while not stop.is_set():
            k = i % len(pool)
            word = f"edit{letters(i)}x{enc}"
            tmp = os.path.join(dest, "." + pool[k] + ".tmp")
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(f"{texts[k]}\n\nLoad bench edit {word}.\n")
            os.rename(tmp, os.path.join(dest, pool[k]))
            last.update(word=word, at=time.monotonic())
            info["edits"] += 1
            i += 1
            if args.git_commit_secs > 0 and time.monotonic() >= next_commit:
                if git_commit(src, f"load bench edits {run_tag} {i}"):
                    info["git_commits"] += 1
                    info["git_commit_times"].append(time.monotonic())
                next_commit = time.monotonic() + args.git_commit_secs
            # Paced from the start: `edit_rate` writes a second on average, whatever a write took.
            stop.wait(max(0.0, c0 + i / args.edit_rate - time.monotonic()))

    def during(t0):
        th = threading.Thread(target=editor, args=(time.monotonic(),), daemon=True)
        th.start()

        def finish():
            stop.set()
            th.join(timeout=60)
            info["edit_rate_s"] = info["edits"] / args.seconds
            word, at = last.get("word"), last.get("at")
            info["last_edit_searchable_s"] = None
            while word and time.monotonic() - at < args.ingest_wait:
                status, payload, _ = post_json(base, "/v1/search", {"query": word, "k": 5, "mode": "bm25"}, timeout=60)
                if status == 200 and any(word in h.get("content", "") for h in (payload or {}).get("results", [])):
                    info["last_edit_searchable_s"] = time.monotonic() - at
                    break
                time.sleep(0.5)
            info["version_after"] = version_of(base)
            return info

        return finish

    return during


def ingest_side(base, src, n_files, offset, run_tag, args):
    """Returns a `during(t0)` that copies files into the watched folder and polls for them."""
    pool = sorted(os.listdir(SCIFACT))[offset : offset + n_files]
    dest = os.path.join(src, f"{INGEST_PREFIX}{run_tag}")
    # Two marker words (k ≤ 200 per search), lowercase letters only: the code tokenizer splits
    # words at letter/digit and case changes, and markers sharing a part would match each other.
    enc = "".join(chr(ord("a") + int(c)) if c.isdigit() else c for c in run_tag.lower())
    tokens = [f"quokka{enc}marker", f"wombat{enc}signal"]
    info = {"ingest_files": len(pool), "version_before": version_of(base)}
    result = {}

    def searchable_count():
        paths = set()
        for tok in tokens:
            status, payload, _ = post_json(base, "/v1/search", {"query": tok, "k": 200, "mode": "bm25"}, timeout=60)
            if status != 200 or not payload:
                return None
            paths |= {h["path"] for h in payload.get("results", []) if tok in h.get("content", "")}
        return len(paths)

    def during(t0):
        c0 = time.monotonic()
        os.makedirs(dest, exist_ok=True)
        for i, name in enumerate(pool):
            with open(os.path.join(SCIFACT, name), encoding="utf-8", errors="replace") as f:
                text = f.read()
            tmp = os.path.join(dest, "." + name + ".tmp")
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(text.rstrip("\n") + f"\n\nLoad bench marker {tokens[i * len(tokens) // len(pool)]}.\n")
            os.rename(tmp, os.path.join(dest, name))
        copied = time.monotonic()
        info["ingest_copy_s"] = copied - c0
        stop = threading.Event()

        def poll():
            last = None
            while not stop.is_set():
                try:
                    n = searchable_count()
                except Exception:
                    n = None
                if n is not None:
                    last = n
                    if n >= len(pool):
                        result["all"] = time.monotonic() - c0
                        return
                stop.wait(1.0)
            result["last_count"] = last

        th = threading.Thread(target=poll, daemon=True)
        th.start()

        def finish():
            # After the load: keep polling (now unloaded) until all are searchable or the wait is over.
            th.join(timeout=max(0.0, args.ingest_wait - (time.monotonic() - c0)))
            stop.set()
            th.join(timeout=70)
            info["ingest_all_searchable_s"] = result.get("all")
            info["ingest_searchable_at_give_up"] = result.get("last_count")
            info["version_after"] = version_of(base)
            return info

        return finish

    return during


def remove_ingested(src):
    for name in os.listdir(src):
        if name.startswith(INGEST_PREFIX):
            shutil.rmtree(os.path.join(src, name), ignore_errors=True)
    if os.path.isdir(os.path.join(src, ".git")):
        git_commit(src, "load bench: ingested files removed")
