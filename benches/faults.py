"""Fault injection against `ctxd serve`: what a crash, a reader restart, a flaky bucket and a
full disk do to the index, each reported as figures against a goal.

    ~/.cache/ctxd/py-venv/bin/python benches/faults.py all [--ctxd BIN] [--rounds 20]
    ~/.cache/ctxd/py-venv/bin/python benches/faults.py kill|reader|flaky-s3|disk-full
    ~/.cache/ctxd/py-venv/bin/python benches/faults.py s3-faults|s3-contend|s3-reembed|s3-fence [--kinds k1,k2] [--ops op1,op2] [--rate R]

* `kill`      — `serve --role writer` on a watched folder; each round adds, edits and deletes a
  few files, waits 0–3 s (random) and `kill -9`s the writer, restarts it and waits for /readyz.
  At the end the (path, chunk_id) rows of `<db>/chunks.lance` must equal those of a clean
  `ctxd index` of the final tree: no duplicate, no missing, no extra row.
* `reader`    — a writer and a `--role reader` on a moto bucket; the reader is `kill -9`ed and
  restarted: spawn → first 200 of POST /v1/search (goal ≤ 2 s), 5 tries.
* `flaky-s3`  — a proxy in front of moto answers 10% of requests with 503 SlowDown (without
  forwarding them); the writer ingests 50 files into s3://…/index through it; every file must
  be found (bm25, one unique token per file) and the rows must equal a clean index's.
* `disk-full` — a local index on a 40 MB tmpfs: a few files indexed, the disk filled, files
  added (the daemon must keep serving the last good version and count the failed commit),
  the filler deleted (the pending files must become searchable without a restart).
  `--disk-full-source git`: the source is a git repository polled every second, the files
  committed while the disk is full.
* `s3-faults` — every storage fault (`fault_proxy.py`: resets before/during, timeouts, 500, 503,
  SlowDown, a dripping body, a write whose answer is lost) × every S3 operation (GET, HEAD, PUT,
  conditional PUT, LIST, DELETE, multipart) against a writer on a bucket, then an optional kill -9
  loop under a mild fault mix (`--kill-rounds`); see `faults_s3.py`. Not part of `all`.
  `--pad-kb 400`: big files, so that the writer's uploads go multipart.
* `s3-fence` — a writer paused with SIGSTOP past its lease's TTL while a `ctxd index` takes over
  and commits, then resumed: it must write nothing and exit 75, and the index must equal a clean
  run's; `--fence-rounds` rounds (20); see `faults_fence.py`. Not part of `all`.
* `s3-contend` — two writers on one prefix through the proxy, each restarted when it exits; and
  `s3-reembed` — three `reembed --shard I/3` jobs and the `--commit` through the proxy beside a
  writer; see `faults_s3_jobs.py`. Not part of `all`.

Everything runs on 127.0.0.1 (moto's server from the venv). Prints each scenario's figures
and a summary table; exits 1 when a goal is missed. Uses `ctxd_daemon.py`'s helpers.
"""
import argparse, json, os, random, re, shutil, signal, socket, statistics, subprocess, sys
import tempfile, time, urllib.error, urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ctxd_daemon import free_port  # noqa: E402
from fault_proxy import FaultProxy, Rule  # noqa: E402

VENV = os.path.expanduser("~/.cache/ctxd/py-venv/bin")
CREDS = {"AWS_ACCESS_KEY_ID": "ctxd-test", "AWS_SECRET_ACCESS_KEY": "ctxd-test-secret",
         "AWS_REGION": "us-east-1", "AWS_ALLOW_HTTP": "true"}
LOG = "info,lance=warn,lancedb=warn,lance_io=warn,lance_index=warn,lance_table=warn"
RESULTS = []  # (scenario, figure, value, goal, ok)


def figure(scenario, name, value, goal="", ok=True):
    RESULTS.append((scenario, name, value, goal, ok))
    mark = "" if ok else "   <-- MISSED"
    print(f"  {name:<38} {value!s:<22} {goal}{mark}", flush=True)


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))] if xs else float("nan")


# --------------------------------------------------------------------------------------------
# Processes


class Serve:
    """One `ctxd serve` process: stderr to a log file, HTTP on a free port, no Flight."""

    def __init__(self, ctxd, args, log, env=None):
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log = log
        e = dict(os.environ, CTXD_LOG=os.environ.get("CTXD_LOG", LOG), HF_HUB_OFFLINE="1")
        e.update(env or {})
        self.err = open(log, "ab")
        self.t0 = time.time()
        self.proc = subprocess.Popen([ctxd, "serve", *args, "--listen", f"127.0.0.1:{self.port}",
                                      "--flight-listen", ""], env=e, stdout=self.err, stderr=self.err)

    def alive(self):
        return self.proc.poll() is None

    def status(self, path, timeout=2):
        try:
            with urllib.request.urlopen(self.base + path, timeout=timeout) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code
        except Exception:
            return None

    def wait_ready(self, within):
        """Seconds from spawn to /readyz 200; None if it died or timed out."""
        while time.time() - self.t0 < within:
            if self.status("/readyz") == 200:
                return time.time() - self.t0
            if not self.alive():
                return None
            time.sleep(0.1)
        return None

    def search(self, query, mode=None, k=10, timeout=30):
        body = {"query": query, "k": k}
        if mode:
            body["mode"] = mode
        req = urllib.request.Request(self.base + "/v1/search", data=json.dumps(body).encode(),
                                     headers={"content-type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, json.load(r)
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode(errors="replace")
        except Exception as e:
            return None, str(e)

    def paths(self, query, mode="bm25", k=10):
        st, v = self.search(query, mode, k)
        return [r["path"] for r in v["results"]] if st == 200 else None

    def metrics(self):
        try:
            with urllib.request.urlopen(self.base + "/metrics", timeout=5) as r:
                return r.read().decode()
        except Exception:
            return ""

    def kill9(self):
        if self.alive():
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self.err.close()

    def stop(self, timeout=90):
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.err.close()
        return self.proc.returncode


def fault_metrics(text):
    """The non-zero `ctxd_*` series about errors, retries and failures, and Lance's object-store
    series (`lance_object_store_{errors,throttle,retryable_responses}_total`)."""
    out = []
    for line in text.splitlines():
        if line.startswith("#") or not re.match(r"(ctxd_|lance_object_store_)\S*(error|retr|fail|throttle)", line):
            continue
        if 'error="none"' in line:
            continue
        try:
            if float(line.rsplit(" ", 1)[1]) == 0:
                continue
        except ValueError:
            pass
        out.append(line)
    return out


def log_lines(path, pattern, limit=6, since=0):
    """The log's lines matching `pattern`, from line `since` on (a `log_length` taken earlier)."""
    try:
        text = open(path, errors="replace").read()
    except OSError:
        return []
    hits = [l for l in text.splitlines()[since:] if re.search(pattern, l)]
    return hits if limit is None else hits[:limit]


def log_length(path):
    """Lines the log holds now: where a later `log_lines(..., since=)` starts counting."""
    try:
        return len(open(path, errors="replace").read().splitlines())
    except OSError:
        return 0


def counter_deltas(before, after):
    """How much each `fault_metrics` series grew from `before` to `after` (series → increase > 0)."""
    def values(lines):
        return {l.rsplit(" ", 1)[0]: float(l.rsplit(" ", 1)[1]) for l in lines}
    b, a = values(before), values(after)
    return {k: v - b.get(k, 0.0) for k, v in a.items() if v - b.get(k, 0.0) > 0}


class Moto:
    """moto's S3 server on a free port, with one bucket."""

    def __init__(self, bucket, log):
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.log = open(log, "ab")
        self.proc = subprocess.Popen([os.path.join(VENV, "moto_server"), "-H", "127.0.0.1", "-p", str(self.port)],
                                     stdout=self.log, stderr=self.log)
        t0 = time.time()
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                if time.time() - t0 > 60 or self.proc.poll() is not None:
                    raise SystemExit("moto_server did not start")
                time.sleep(0.2)
        import boto3
        self.s3 = boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id=CREDS["AWS_ACCESS_KEY_ID"],
                               aws_secret_access_key=CREDS["AWS_SECRET_ACCESS_KEY"], region_name="us-east-1")
        try:
            self.s3.create_bucket(Bucket=bucket)
        except Exception:
            self.stop()
            raise

    def env(self, endpoint=None):
        return dict(CREDS, AWS_ENDPOINT_URL=endpoint or self.endpoint)

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


# --------------------------------------------------------------------------------------------
# Corpus and index content


WORDS = ("ledger invoice parser token socket cache bucket lease replica shard cursor schema commit "
         "router filter buffer stream window digest".split())


def token(i):
    """A word no other file holds (and that BM25's tokenizer keeps whole)."""
    return "qz" + "".join("abcdefghij"[int(c)] for c in f"{i:05d}") + "marker"


# Kilobytes of filler prose appended to every file (`s3-faults --pad-kb`): big files make the
# writer's data files pass object_store's 5 MB part size, so its uploads go multipart.
PAD_KB = 0


def file_text(i, rev=0):
    rng = random.Random(i * 1000 + rev)
    if i % 2 == 0:
        fn = f"handle_{rng.choice(WORDS)}_{i}"
        body = "\n".join(f"    total += {rng.randint(1, 99)}  # {rng.choice(WORDS)} {rng.choice(WORDS)}" for _ in range(4))
        text = (f'def {fn}(items):\n    """Process the {rng.choice(WORDS)} {token(i)} (revision {rev})."""\n'
                f"    total = 0\n{body}\n    return total\n")
        lead = "# "
    else:
        lines = " ".join(rng.choice(WORDS) for _ in range(30))
        text = f"# Note {i} revision {rev}\n\nThe {token(i)} section covers {lines}.\n"
        lead = ""
    pad = []
    while sum(map(len, pad)) < PAD_KB * 1024:
        pad.append(lead + " ".join(rng.choice(WORDS) for _ in range(12)) + f" {rng.randint(0, 10**6)}.\n")
    return text + "".join(pad)


def file_name(i):
    return f"pkg{i % 3}/mod_{i}.py" if i % 2 == 0 else f"docs/note_{i}.md"


def write_file(root, i, rev=0):
    p = os.path.join(root, file_name(i))
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "w") as f:
        f.write(file_text(i, rev))


def rows(uri, storage_options=None, table="chunks", key="chunk_id"):
    """(path, key) of every row of a table (default: the chunks), in table order (duplicates kept)."""
    import lance
    ds = lance.dataset(f"{uri.rstrip('/')}/{table}.lance", storage_options=storage_options)
    t = ds.to_table(columns=["path", key])
    return list(zip(t.column("path").to_pylist(), t.column(key).to_pylist()))


def clean_index(ctxd, src, db, log, env=None):
    e = dict(os.environ, CTXD_LOG="warn", HF_HUB_OFFLINE="1")
    e.update(env or {})
    with open(log, "ab") as err:
        out = subprocess.run([ctxd, "index", src, "--db", db, "--json"], env=e, stdout=subprocess.PIPE, stderr=err,
                             timeout=900)
    if out.returncode != 0:
        raise SystemExit(f"clean `ctxd index` failed (see {log})")
    return json.loads(out.stdout.decode().strip().splitlines()[-1])


def compare(got, want):
    """(missing, extra, duplicate rows) of `got` against the clean rows `want`."""
    g, w = set(got), set(want)
    return sorted(w - g), sorted(g - w), len(got) - len(g)


# --------------------------------------------------------------------------------------------
# Scenarios


def scenario_kill(a, work):
    print(f"\n== kill: {a.rounds} rounds of edits + kill -9 of the writer at a random point", flush=True)
    rng = random.Random(a.seed)
    src, db, logs = os.path.join(work, "src"), os.path.join(work, "db"), os.path.join(work, "logs")
    os.makedirs(logs)
    live, rev, next_id = set(), {}, 0
    for _ in range(a.files):
        write_file(src, next_id)
        live.add(next_id)
        rev[next_id] = 0
        next_id += 1
    args = ["--role", "writer", "--watch", src, "--db", db]
    d = Serve(a.ctxd, args, os.path.join(logs, "writer-0.log"))
    first = d.wait_ready(a.ready_within)
    if first is None:
        figure("kill", "writer ready", "never", f"≤ {a.ready_within}s", False)
        d.kill9()
        return
    print(f"  first ready after {first:.1f}s ({len(live)} files)", flush=True)
    ready, crashes, log_of = [], 0, {}
    for r in range(1, a.rounds + 1):
        ops = []
        for _ in range(rng.randint(1, 2)):  # add
            write_file(src, next_id)
            live.add(next_id)
            rev[next_id] = 0
            ops.append(f"+{next_id}")
            next_id += 1
        for i in rng.sample(sorted(live), min(len(live), rng.randint(1, 2))):  # edit
            rev[i] += 1
            write_file(src, i, rev[i])
            ops.append(f"~{i}")
        if len(live) > 5 and rng.random() < 0.7:  # delete
            i = rng.choice(sorted(live))
            os.remove(os.path.join(src, file_name(i)))
            live.discard(i)
            ops.append(f"-{i}")
        delay = rng.uniform(0, 3)
        time.sleep(delay)
        if not d.alive():
            crashes += 1
            print(f"  round {r}: the writer had exited with {d.proc.returncode} before the kill", flush=True)
        d.kill9()
        d = Serve(a.ctxd, args, os.path.join(logs, f"writer-{r}.log"))
        log_of[r] = d.log
        t = d.wait_ready(a.ready_within)
        print(f"  round {r:2}: {' '.join(ops):<22} killed after {delay:.2f}s, ready again after "
              f"{'never' if t is None else f'{t:.2f}s'}", flush=True)
        if t is None:
            crashes += 1
            print("    last log lines:\n      " + "\n      ".join(open(d.log, errors="replace").read().splitlines()[-8:]))
            break
        ready.append(t)
    # Let the last (clean) writer settle, then stop it gracefully before reading the table.
    time.sleep(2)
    rc = d.stop()
    got = rows(db)
    clean = clean_index(a.ctxd, src, os.path.join(work, "clean"), os.path.join(logs, "clean.log"))
    want = rows(os.path.join(work, "clean"))
    missing, extra, dups = compare(got, want)
    paths_missing = sorted({p for p, _ in missing})
    paths_extra = sorted({p for p, _ in extra})
    print(f"  final tree: {len(live)} files; clean index: {clean['chunks_written']} chunks; "
          f"daemon index: {len(got)} rows ({len(set(got))} distinct); last writer exit code {rc}")
    if missing or extra:
        print(f"  missing rows of {paths_missing[:8]}; extra rows of {paths_extra[:8]}")
    figure("kill", "rounds completed", f"{len(ready)}/{a.rounds}", f"= {a.rounds}", len(ready) == a.rounds)
    figure("kill", "unexpected exits / never ready", crashes, "= 0", crashes == 0)
    figure("kill", "missing rows (vs clean index)", len(missing), "= 0", not missing)
    figure("kill", "extra rows (stale or foreign)", len(extra), "= 0", not extra)
    figure("kill", "duplicate rows", dups, "= 0", dups == 0)
    side = []
    for table, key in (("symbols", "symbol_id"), ("edges", "edge_id")):
        m, x, dd = compare(rows(db, table=table, key=key), rows(os.path.join(work, "clean"), table=table, key=key))
        side.append(f"{table} {len(m)}/{len(x)}/{dd}")
    ok_side = all(part.endswith(" 0/0/0") for part in side)
    figure("kill", "side tables missing/extra/dup", ", ".join(side), "all 0", ok_side)
    if ready:
        figure("kill", "restart -> ready p50 / max (s)", f"{statistics.median(ready):.2f} / {max(ready):.2f}", "(reported)")


def wait_search_200(d, body, within, poll=0.02):
    """Seconds from spawn to the first 200 of POST /v1/search with `body`, else None."""
    data = json.dumps(body).encode()
    while time.time() - d.t0 < within:
        req = urllib.request.Request(d.base + "/v1/search", data=data, headers={"content-type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=max(1, within - (time.time() - d.t0))) as r:
                if r.status == 200:
                    return time.time() - d.t0, json.load(r)
        except Exception:
            if not d.alive():
                return None, None
            time.sleep(poll)
    return None, None


def scenario_reader(a, work):
    print(f"\n== reader: kill -9 of a --role reader, restart → first 200 of POST /v1/search ({a.tries} tries)",
          flush=True)
    src, logs = os.path.join(work, "src"), os.path.join(work, "logs")
    os.makedirs(logs)
    for i in range(12):
        write_file(src, i)
    moto = Moto("faults", os.path.join(logs, "moto.log"))
    db = "s3://faults/index"
    cfg = os.path.join(work, "ctxd.toml")
    with open(cfg, "w") as f:
        f.write("[server]\nreader_poll_ms = 200\n")
    readers, writer = [], None
    try:
        writer = Serve(a.ctxd, ["--role", "writer", "--watch", src, "--db", db, "--config", cfg],
                       os.path.join(logs, "writer.log"), moto.env())
        t = writer.wait_ready(a.ready_within)
        if t is None:
            figure("reader", "writer ready", "never", "", False)
            return
        print(f"  writer ready after {t:.1f}s", flush=True)
        body = {"query": "process the ledger invoice", "k": 3}
        bm25 = {"query": token(3), "k": 3, "mode": "bm25"}
        r = Serve(a.ctxd, ["--role", "reader", "--db", db, "--config", cfg], os.path.join(logs, "reader-0.log"),
                  moto.env())
        readers.append(r)
        t, v = wait_search_200(r, body, a.ready_within)
        print(f"  first reader: search 200 after {'never' if t is None else f'{t:.2f}s'}", flush=True)
        times, warm, health, wrong = [], [], [], 0
        for i in range(1, a.tries + 1):
            r.kill9()
            r = Serve(a.ctxd, ["--role", "reader", "--db", db, "--config", cfg],
                      os.path.join(logs, f"reader-{i}.log"), moto.env())
            readers.append(r)
            h = None
            # /healthz first (when the HTTP server answers), then the search itself.
            while time.time() - r.t0 < a.ready_within and r.alive():
                if r.status("/healthz", timeout=0.5) == 200:
                    h = time.time() - r.t0
                    break
                time.sleep(0.02)
            t, v = wait_search_200(r, body, a.ready_within)
            q0 = time.time()
            st, _ = r.search(body["query"])  # the same search on the now warm reader
            q = time.time() - q0
            tb, vb = wait_search_200(r, bm25, a.ready_within)
            ok_answer = vb is not None and any(x["path"] == file_name(3) for x in vb["results"])
            wrong += not ok_answer
            print(f"  try {i}: /healthz 200 at {'never' if h is None else f'{h:.2f}s'}, first search 200 at "
                  f"{'never' if t is None else f'{t:.2f}s'} (the same search warm: {q:.2f}s), bm25 answer right: "
                  f"{ok_answer}", flush=True)
            if t is None:
                print("    reader log tail:\n      " + "\n      ".join(open(r.log, errors="replace").read().splitlines()[-8:]))
                break
            warm.append(q)
            times.append(t)
            health.append(h or float("nan"))
        figure("reader", "tries completed", f"{len(times)}/{a.tries}", f"= {a.tries}", len(times) == a.tries)
        if times:
            figure("reader", "spawn -> search 200 p50 / max (s)", f"{statistics.median(times):.2f} / {max(times):.2f}",
                   "max ≤ 2.0", max(times) <= 2.0)
            figure("reader", "spawn -> /healthz 200 p50 (s)", f"{statistics.median(health):.2f}", "(reported)")
            figure("reader", "same search on the warm reader p50 (s)", f"{statistics.median(warm):.2f}", "(reported)")
        figure("reader", "wrong answers after restart", wrong, "= 0", wrong == 0)
        figure("reader", "writer alive at the end", writer.alive(), "= True", writer.alive())
    finally:
        for r in readers:
            if r.alive():
                r.kill9()
        if writer:
            writer.stop()
        moto.stop()


def scenario_flaky(a, work):
    print(f"\n== flaky-s3: {int(a.fail_rate * 100)}% of S3 requests answered 503 SlowDown; 50 files into s3://flaky/index",
          flush=True)
    src, logs = os.path.join(work, "src"), os.path.join(work, "logs")
    os.makedirs(logs)
    initial, later = 40, 10
    for i in range(initial):
        write_file(src, i)
    moto = Moto("flaky", os.path.join(logs, "moto.log"))
    # A share of every request answered 503 SlowDown without forwarding it (fault_proxy.py).
    proxy = FaultProxy(moto.port)
    proxy.set_rules([Rule("slowdown", "any", rate=a.fail_rate, seed=a.seed)])
    db = "s3://flaky/index"
    cfg = os.path.join(work, "ctxd.toml")
    with open(cfg, "w") as f:
        f.write("[index]\nlease_ttl_secs = 15\n")
    d = None
    try:
        d = Serve(a.ctxd, ["--role", "writer", "--watch", src, "--db", db, "--config", cfg],
                  os.path.join(logs, "writer.log"), moto.env(proxy.endpoint))
        t = d.wait_ready(a.ready_within)
        print(f"  ready after {'never' if t is None else f'{t:.1f}s'} ({initial} files); proxy: "
              f"{sum(proxy.requests.values())} requests, {sum(proxy.injected.values())} injected 503s", flush=True)
        if t is not None:
            for i in range(initial, initial + later):
                write_file(src, i)
                time.sleep(0.3)
        # Settle: every file's token found, or the deadline.
        deadline = time.time() + a.settle
        lost = list(range(initial + later))
        while time.time() < deadline and d.alive():
            lost = [i for i in lost if file_name(i) not in (d.paths(token(i), "bm25", 3) or [])]
            if not lost:
                break
            time.sleep(1)
        alive = d.alive()
        fm = fault_metrics(d.metrics()) if alive else []
        rc = d.stop() if alive else d.proc.returncode
        opts = {"aws_endpoint": moto.endpoint, "aws_access_key_id": CREDS["AWS_ACCESS_KEY_ID"],
                "aws_secret_access_key": CREDS["AWS_SECRET_ACCESS_KEY"], "aws_region": "us-east-1",
                "allow_http": "true"}
        got = rows(db, opts)
        clean_index(a.ctxd, src, os.path.join(work, "clean"), os.path.join(logs, "clean.log"))
        missing, extra, dups = compare(got, rows(os.path.join(work, "clean")))
        print(f"  proxy: requests {dict(sorted(proxy.requests.items()))}, injected 503 {dict(sorted(proxy.injected.items()))}")
        print(f"  writer exit code {rc}; ctxd fault counters (non-zero):")
        for line in fm or ["(none)"]:
            print(f"    {line}")
        for line in log_lines(d.log, r"WARN|ERROR", 8):
            print(f"    log: {line[:240]}")
        n_inj = sum(proxy.injected.values())
        figure("flaky-s3", "proxy requests / injected 503s", f"{sum(proxy.requests.values())} / {n_inj}", "(reported)")
        figure("flaky-s3", "writer alive until stopped", alive, "= True", alive)
        figure("flaky-s3", "lost files (bm25 token not found)", len(lost), "= 0", not lost)
        figure("flaky-s3", "missing / extra rows vs clean", f"{len(missing)} / {len(extra)}", "= 0 / 0",
               not missing and not extra)
        figure("flaky-s3", "duplicate rows", dups, "= 0", dups == 0)
        if lost:
            print(f"  lost: {[file_name(i) for i in lost][:10]}")
    finally:
        if d and d.alive():
            d.kill9()
        proxy.stop()
        moto.stop()


def mount_small(mnt, size_mb):
    """A small filesystem at `mnt`: tmpfs, else a loop-mounted ext4 image. Returns a description."""
    os.makedirs(mnt, exist_ok=True)
    if os.path.ismount(mnt):
        subprocess.run(["umount", mnt], check=False)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_mb}m", "tmpfs", mnt], capture_output=True, text=True)
    if r.returncode == 0:
        return f"tmpfs size={size_mb}m"
    err = r.stderr.strip()
    img = mnt.rstrip("/") + ".img"
    subprocess.run(["truncate", "-s", f"{size_mb}M", img], check=True)
    r2 = subprocess.run(["mkfs.ext4", "-q", "-F", img], capture_output=True, text=True)
    r3 = subprocess.run(["mount", "-o", "loop", img, mnt], capture_output=True, text=True) if r2.returncode == 0 else r2
    if r3.returncode == 0:
        return f"loop ext4 {size_mb}M (tmpfs refused: {err})"
    raise RuntimeError(f"no small filesystem: tmpfs: {err}; loop ext4: {r3.stderr.strip()}")


def scenario_disk_full(a, work):
    git_source = a.disk_full_source == "git"
    print(f"\n== disk-full: local index on a 40 MB filesystem, filled up, then freed ({a.disk_full_source} source)", flush=True)
    mnt = "/tmp/ctxd-small"
    try:
        how = mount_small(mnt, 40)
    except Exception as e:
        print(f"  {e}")
        figure("disk-full", "small filesystem", "unavailable", "mounted", False)
        return
    print(f"  {mnt}: {how}", flush=True)
    src, logs = os.path.join(work, "src"), os.path.join(work, "logs")
    os.makedirs(logs)
    db, filler = os.path.join(mnt, "db"), os.path.join(mnt, "filler")
    for i in range(8):
        write_file(src, i)
    # A git source reads commits of `main` (polled every second) instead of watching the folder.
    def commit():
        if git_source:
            for args in (["add", "-A"], ["commit", "-q", "-m", "more files"]):
                subprocess.run(["git", "-C", src, *args], check=True, capture_output=True)
    stored = (lambda i: f"repo@main/{file_name(i)}") if git_source else file_name
    serve_args = ["--role", "writer", "--watch", src, "--db", db]
    if git_source:
        subprocess.run(["git", "init", "-q", "-b", "main", src], check=True)
        for k, v in (("user.email", "bench@example.com"), ("user.name", "bench")):
            subprocess.run(["git", "-C", src, "config", k, v], check=True)
        commit()
        cfg = os.path.join(work, "ctxd.toml")
        with open(cfg, "w") as fh:
            fh.write(f'[[source]]\nname = "repo"\ngit = "{src}"\nrefs = ["main"]\npoll_interval_secs = 1\n'
                     f'mirror_dir = "{work}/mirror"\n\n[index]\ndb = "{db}"\n')
        serve_args = ["--role", "writer", "--config", cfg]
    d = None
    try:
        d = Serve(a.ctxd, serve_args, os.path.join(logs, "writer.log"))
        t = d.wait_ready(a.ready_within)
        if t is None:
            figure("disk-full", "writer ready", "never", "", False)
            return
        du = subprocess.run(["du", "-sh", db], capture_output=True, text=True).stdout.split()[0]
        print(f"  step 1: 8 files indexed, ready after {t:.1f}s; index size {du}", flush=True)
        # Step 2: fill the disk. Failures are counted from the moment it is full (the log's lines and
        # the counters from then on), not since start-up.
        with open(filler, "wb") as f:
            try:
                while True:
                    f.write(b"\0" * (1 << 20))
                    f.flush()
            except OSError as e:
                print(f"  step 2: filler written until {e.strerror} ({os.path.getsize(filler) >> 20} MiB)", flush=True)
        before, full_at = fault_metrics(d.metrics()), log_length(d.log)
        # Step 3: new files while the disk is full.
        for i in range(8, 12):
            write_file(src, i)
        rev_edit = 1
        write_file(src, 0, rev_edit)  # and an edit of an indexed file
        commit()
        time.sleep(a.full_wait)
        alive = d.alive()
        old_ok = alive and all(stored(i) in (d.paths(token(i), "bm25", 3) or []) for i in range(1, 8))
        st, _ = d.search("process the ledger invoice") if alive else (None, None)
        new_visible = [i for i in range(8, 12) if alive and stored(i) in (d.paths(token(i), "bm25", 3) or [])]
        during = fault_metrics(d.metrics()) if alive else []
        errs = log_lines(d.log, r"WARN|ERROR|No space|ENOSPC|os error 28", None, since=full_at)
        print(f"  step 3 ({a.full_wait:.0f}s after adding 4 files and editing 1 on a full disk): alive={alive}, "
              f"old files found={old_ok}, routed search status={st}, new files visible={len(new_visible)}/4")
        grew = counter_deltas(before, during)
        print(f"    fault counters grown since the disk filled: {grew or '(none)'}")
        for line in errs[:6]:
            print(f"    log: {line[:300]}")
        print(f"    ({len(errs)} WARN/ERROR lines since the disk filled)")
        figure("disk-full", "alive while the disk is full", alive, "= True", alive)
        figure("disk-full", "serves the last good version", old_ok and st == 200, "= True", old_ok and st == 200)
        counted = any("upsert" in k or "commit" in k or "retr" in k for k in grew)
        figure("disk-full", "failed commit logged and counted", f"log={bool(errs)} metric={counted}", "both",
               bool(errs) and counted)
        if not alive:
            return
        # Step 4: free the disk.
        os.remove(filler)
        t_free = time.time()
        pending = list(range(8, 12))
        while time.time() - t_free < a.settle and pending and d.alive():
            pending = [i for i in pending if stored(i) not in (d.paths(token(i), "bm25", 3) or [])]
            time.sleep(1)
        edited = d.alive() and f"revision {rev_edit}" in json.dumps(d.search(token(0), "bm25", 3)[1])
        print(f"  step 4: filler deleted; after {time.time() - t_free:.0f}s pending files still missing: "
              f"{[file_name(i) for i in pending]}; edit of {file_name(0)} visible: {edited}", flush=True)
        figure("disk-full", "pending files searchable after freeing", f"{4 - len(pending)}/4", "= 4/4", not pending)
        figure("disk-full", "pending edit visible after freeing", edited, "= True", edited)
        if pending or not edited:
            # Diagnosis: does a new event for a pending file bring it in? Does a restart?
            p = pending[0] if pending else 8
            write_file(src, p, 5)
            commit()
            t0 = time.time()
            seen = False
            while time.time() - t0 < 20 and not seen:
                seen = stored(p) in (d.paths(token(p), "bm25", 3) or [])
                time.sleep(0.5)
            print(f"  diagnosis: touching {file_name(p)} again → searchable: {seen} ({time.time() - t0:.1f}s)")
            d.stop()
            d = Serve(a.ctxd, serve_args, os.path.join(logs, "writer-2.log"))
            t = d.wait_ready(a.ready_within)
            still = [i for i in range(8, 12) if stored(i) not in (d.paths(token(i), "bm25", 3) or [])]
            edited = f"revision {rev_edit}" in json.dumps(d.search(token(0), "bm25", 3)[1])
            print(f"  diagnosis: after a restart (ready {t and round(t, 1)}s): missing {[file_name(i) for i in still]}, "
                  f"edit visible: {edited}")
    finally:
        if d and d.alive():
            d.stop()
        if os.path.exists(filler):
            os.remove(filler)
        subprocess.run(["umount", mnt], check=False)


def scenario_s3(name):
    """The bucket scenarios live in faults_s3.py / faults_s3_jobs.py and report into RESULTS."""
    def run(a, work):
        sys.modules.setdefault("faults", sys.modules[__name__])
        import faults_s3, faults_s3_jobs, faults_fence
        {"s3-faults": faults_s3.scenario_s3_faults, "s3-contend": faults_s3_jobs.scenario_s3_contend,
         "s3-reembed": faults_s3_jobs.scenario_s3_reembed, "s3-fence": faults_fence.scenario_s3_fence}[name](a, work)
    return run


SCENARIOS = {"kill": scenario_kill, "reader": scenario_reader, "flaky-s3": scenario_flaky, "disk-full": scenario_disk_full,
             **{n: scenario_s3(n) for n in ("s3-faults", "s3-contend", "s3-reembed", "s3-fence")}}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("scenario", choices=[*SCENARIOS, "all"])
    ap.add_argument("--ctxd", default=os.environ.get("CTXD_BIN", "/tmp/faults-ctxd"),
                    help="the ctxd binary (default: /tmp/faults-ctxd, a copy of the debug build)")
    ap.add_argument("--work", default=None, help="working folder (default: a fresh temp dir, kept)")
    ap.add_argument("--rounds", type=int, default=20, help="kill: rounds")
    ap.add_argument("--files", type=int, default=12, help="kill: files at the start")
    ap.add_argument("--tries", type=int, default=5, help="reader: restarts")
    ap.add_argument("--fail-rate", type=float, default=0.10, help="flaky-s3: share of requests answered 503")
    ap.add_argument("--ready-within", type=float, default=240, help="seconds a start may take")
    ap.add_argument("--settle", type=float, default=90, help="seconds to wait for files to become searchable")
    ap.add_argument("--full-wait", type=float, default=12, help="disk-full: seconds with the disk full")
    ap.add_argument("--disk-full-source", choices=["folder", "git"], default="folder",
                    help="disk-full: the source is a watched folder or a git repository polled every second")
    ap.add_argument("--seed", type=int, default=1)
    sys.modules.setdefault("faults", sys.modules[__name__])
    import faults_s3, faults_s3_jobs, faults_fence
    faults_s3.add_args(ap)
    faults_s3_jobs.add_args(ap)
    faults_fence.add_args(ap)
    a = ap.parse_args()
    if not os.access(a.ctxd, os.X_OK):
        sys.exit(f"{a.ctxd} is not an executable ctxd binary")
    root = a.work or tempfile.mkdtemp(prefix="ctxd-faults-")
    print(f"ctxd: {a.ctxd}; work: {root}")
    # `all`: the four original scenarios; the s3-* matrices (long) run only when named.
    for name in ([n for n in SCENARIOS if not n.startswith("s3-")] if a.scenario == "all" else [a.scenario]):
        work = os.path.join(root, name)
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(work)
        t0 = time.time()
        try:
            SCENARIOS[name](a, work)
        except Exception as e:  # a scenario that breaks is a missed goal, not the end of the run
            import traceback
            traceback.print_exc()
            figure(name, "scenario ran", f"error: {e}"[:60], "no error", False)
        print(f"  ({name}: {time.time() - t0:.0f}s)", flush=True)
    print("\nsummary")
    print(f"  {'scenario':<10} {'figure':<38} {'value':<22} {'goal':<12} ok")
    for s, n, v, g, ok in RESULTS:
        print(f"  {s:<10} {n:<38} {v!s:<22} {g:<12} {'yes' if ok else 'NO'}")
    sys.exit(0 if all(r[4] for r in RESULTS) else 1)


if __name__ == "__main__":
    main()
