"""`benches/faults.py s3-faults`: every storage fault × S3 operation against a writer on a bucket.

For each (kind, op) pair (kinds and ops of `fault_proxy.py`): a fresh prefix `s3://faults/<kind>-<op>`
on one moto server, behind one `FaultProxy`; a `ctxd serve --role writer --watch src` with the fault
active from its start; 8 files indexed, then 2 edited and 1 deleted (fault still on, `--hold` s);
the fault turned off; the writer must settle (every file's token found, the edits visible, the
deleted file gone) within `--settle` s; a new file added afterwards must be searchable within
`--settle` s; /readyz and a routed search must answer 200. A writer that exited during the fault
(e.g. code 75: lease lost) is restarted once with the fault off and the check goes on with it.
The writer is stopped and its chunks/symbols/edges rows compared with a clean `ctxd index` of the
same final tree. Then (`--kill-rounds N`, 0 to skip) a kill loop: a mild fault mix on, each round
changes a few files, waits 0–`--kill-delay` s and `kill -9`s the writer, waits for its lease to
expire and restarts it; the end state is compared the same way.

Prints a table "fault × operation → outcome" and the kill loop's figures.
"""
import itertools, json, os, random, time

import faults as F
from fault_proxy import KINDS, OPS, FaultProxy, Rule

INITIAL, EDITED, DELETED, NEW = list(range(8)), (1, 2), 5, 8


def final_tree(root):
    for i in INITIAL:
        F.write_file(root, i, 1 if i in EDITED else 0)
    os.remove(os.path.join(root, F.file_name(DELETED)))
    F.write_file(root, NEW)


def s3_opts(moto):
    return {"aws_endpoint": moto.endpoint, "aws_access_key_id": F.CREDS["AWS_ACCESS_KEY_ID"],
            "aws_secret_access_key": F.CREDS["AWS_SECRET_ACCESS_KEY"], "aws_region": "us-east-1", "allow_http": "true"}


def settled(d, live, rev):
    """The files of `live` whose state the writer does not show yet (token missing, edit not visible),
    plus `gone` files still found. Returns a list of descriptions (empty: settled)."""
    bad = []
    for i in live:
        st, v = d.search(F.token(i), "bm25", 3, timeout=10)
        if st != 200:
            bad.append(f"search {st}")
            return bad
        hits = [r for r in v["results"] if r["path"] == F.file_name(i)]
        if not hits:
            bad.append(f"missing {i}")
        elif rev.get(i, 0) and f"revision {rev[i]}" not in json.dumps(hits):
            bad.append(f"stale {i}")
    return bad


def gone_found(d, gone):
    return [i for i in gone if F.file_name(i) in (d.paths(F.token(i), "bm25", 3) or [])]


def metric_summary(lines):
    """Sum the non-zero fault series by family (labels dropped), short names."""
    fam = {}
    for l in lines:
        name = l.split("{")[0].split(" ")[0]
        try:
            fam[name] = fam.get(name, 0) + float(l.rsplit(" ", 1)[1])
        except ValueError:
            pass
    short = lambda n: n.replace("lance_object_store_", "os_").replace("ctxd_", "").replace("_total", "")
    return ", ".join(f"{short(k)} {int(v)}" for k, v in sorted(fam.items())) or "none"


def compare_all(db, opts, clean):
    out = {}
    for table, key in (("chunks", "chunk_id"), ("symbols", "symbol_id"), ("edges", "edge_id")):
        try:
            out[table] = F.compare(F.rows(db, opts, table=table, key=key), F.rows(clean, table=table, key=key))
        except Exception as e:
            out[table] = ([f"unreadable: {e}"[:120]], [], 0)
    return out


def lease_left(moto, prefix):
    """Seconds until the writer lease under `prefix` expires (0 if none)."""
    try:
        body = json.loads(moto.s3.get_object(Bucket="faults", Key=f"{prefix}/_ctxd/writer.lease")["Body"].read())
        return max(0.0, body["expires_unix_ms"] / 1000 - time.time())
    except Exception:
        return 0.0


def new_pair(work, name):
    """A pair's folder with the 8 initial files: (folder, src, logs, its index's URI)."""
    pdir = os.path.join(work, name)
    src, logs = os.path.join(pdir, "src"), os.path.join(pdir, "logs")
    os.makedirs(logs)
    for i in INITIAL:
        F.write_file(src, i)
    return pdir, src, logs, f"s3://faults/{name}"


def settle_final_tree(d, within):
    """(seconds until `d` shows the final tree — edits visible, the deleted file gone — or None,
    what it still lacks)."""
    live, rev = [i for i in INITIAL if i != DELETED], {i: 1 for i in EDITED}
    ts, bad = time.time(), ["not ready"]
    while time.time() - ts < within and d.alive():
        bad = settled(d, live, rev) + [f"deleted {i} found" for i in gone_found(d, [DELETED])]
        if not bad:
            break
        time.sleep(1)
    return (None if bad else round(time.time() - ts, 1)), bad


def new_file_found(d, src, within, poll=1.0):
    """Writes the file added after the fault; seconds until `d` finds it (None: never)."""
    F.write_file(src, NEW)
    tn = time.time()
    while time.time() - tn < within and d.alive():
        if F.file_name(NEW) in (d.paths(F.token(NEW), "bm25", 3) or []):
            return round(time.time() - tn, 1)
        time.sleep(poll)
    return None


def end_state(db, moto, clean, row):
    """`row["equal"]` (chunks, symbols and edges as the clean index's), `row["dups"]`, and notes
    naming what differs."""
    cmp = compare_all(db, s3_opts(moto), clean)
    row["equal"] = all(not c[0] and not c[1] for c in cmp.values())
    row["dups"] = sum(c[2] for c in cmp.values())
    if not row["equal"] or row["dups"]:
        row["notes"].append("; ".join(f"{tb} missing {len(c[0])} extra {len(c[1])} dup {c[2]}"
                                      for tb, c in cmp.items() if c[0] or c[1] or c[2]))
        m, x, _ = cmp["chunks"]
        paths = lambda rs: sorted({r[0] if isinstance(r, tuple) else r for r in rs})[:3]
        row["notes"].append(f"missing {paths(m)} extra {paths(x)}")


def run_pair(a, moto, proxy, kind, op, work, clean):
    name = f"{kind}-{op}"
    pdir, src, logs, db = new_pair(work, name)
    cfg = os.path.join(pdir, "ctxd.toml")
    with open(cfg, "w") as f:
        f.write(f"[index]\nlease_ttl_secs = {a.lease_ttl}\n")
        if a.maintenance:  # compaction and cleanup (the DELETEs) every few seconds
            f.write(f"maintenance_interval_secs = {a.maintenance}\nretain_versions_secs = 1\n")
    args = ["--role", "writer", "--watch", src, "--db", db, "--config", cfg]
    if a.readers:
        with open(cfg, "a") as f:
            f.write("\n[server]\nreader_poll_ms = 200\n")
    cap = a.timeout_max_inject if kind == "timeout" else a.max_inject
    proxy.reset_counts()
    rule = Rule(kind, op, a.rate, max_inject=cap, seed=a.seed)
    if a.arm == "start":
        proxy.set_rules([rule])
    row = {"kind": kind, "op": op, "notes": []}
    t0 = time.time()
    d = F.Serve(a.ctxd, args, os.path.join(logs, "writer.log"), moto.env(proxy.endpoint))
    exits, rstat = [], {"200": 0, "503": 0, "other": 0, "wrong": 0}
    # Readers on the same prefix, through the same proxy (their requests meet the fault too).
    readers = [F.Serve(a.ctxd, ["--role", "reader", "--db", db, "--config", cfg], os.path.join(logs, f"reader-{n}.log"),
                       moto.env(proxy.endpoint)) for n in range(a.readers)]

    def ask_reader(reader):
        """One bm25 search of file 0's unique token: 200 (right or wrong), a clean 503, or other."""
        st, v = reader.search(F.token(0), "bm25", 3, timeout=10)
        if st == 200:
            rstat["200"] += 1
            rstat["wrong"] += any(r["path"] != F.file_name(0) for r in v["results"])
        elif st == 503:
            rstat["503"] += 1
        else:
            rstat["other"] += 1
    try:
        t = d.wait_ready(a.ready_within)
        if t is None:
            exits.append(d.proc.returncode if not d.alive() else "not ready")
        if a.arm == "ready":  # the fault on once the first 8 files are in: commits and lease renewals only
            proxy.reset_counts()
            proxy.set_rules([rule])
        # The edits and the delete happen with the fault on, whether or not the writer is up.
        for i in EDITED:
            F.write_file(src, i, 1)
        os.remove(os.path.join(src, F.file_name(DELETED)))
        th = time.time()
        while time.time() - th < a.hold:
            for reader in readers:
                if reader.alive():
                    ask_reader(reader)
            time.sleep(0.3)
        proxy.set_rules([])
        row["requests"] = proxy.requests.get(op, 0)
        row["injected"] = proxy.injected.get((kind, op), 0)
        row["all_requests"] = dict(sorted(proxy.requests.items()))
        if d.alive() and t is None:  # alive but never ready: give it the settle time with the fault off
            t = d.wait_ready(a.ready_within + a.settle)
            if t is None:
                exits.append("stuck")
        if not d.alive():
            rc = d.proc.returncode
            if not exits or exits[-1] != rc:
                exits.append(rc)
            tail = F.log_lines(d.log, r"ERROR|lease|exit", 3)
            row["notes"] += [l.split("  ", 1)[-1][:160] for l in tail[-2:]]
            d.kill9()
            w = lease_left(moto, name)
            time.sleep(w + 0.5 if w else 0)
            d = F.Serve(a.ctxd, args, os.path.join(logs, "writer-2.log"), moto.env(proxy.endpoint))
            t = d.wait_ready(a.ready_within)
            if t is None:
                row["notes"].append(f"restarted writer not ready (rc {d.proc.returncode})")
        # Settle with the fault off, then a new file.
        row["settle_s"], bad = settle_final_tree(d, a.settle)
        if bad:
            row["notes"].append("unsettled: " + ", ".join(bad[:4]))
        row["new_s"] = new_file_found(d, src, a.settle)
        new_ok = row["new_s"] is not None
        row["reader_ok"] = True
        for n, reader in enumerate(readers):
            tr, seen = time.time(), False
            while time.time() - tr < a.settle and reader.alive() and not seen:
                ask_reader(reader)
                seen = F.file_name(NEW) in (reader.paths(F.token(NEW), "bm25", 3) or [])
                time.sleep(0.5)
            row["notes"].append(f"reader {n}: new file {'in ' + str(round(time.time() - tr, 1)) + ' s' if seen else 'NOT seen'}"
                                + ("" if reader.alive() else f"; reader exited {reader.proc.returncode}"))
            row["reader_ok"] &= seen
        if readers:
            row["notes"].append(f"readers: {rstat['200']}×200 ({rstat['wrong']} wrong), {rstat['503']}×503, "
                                f"{rstat['other']}×other")
            row["reader_ok"] &= not rstat["wrong"] and not rstat["other"]
        ready = d.status("/readyz") == 200
        st, _ = d.search("process the ledger invoice")
        row["stuck"] = not (ready and st == 200 and new_ok and not bad)
        if row["stuck"]:
            row["notes"].append(f"readyz {'200' if ready else 'not 200'}, search {st}, new file {new_ok}")
        row["metrics"] = metric_summary(F.fault_metrics(d.metrics())) if d.alive() else "(dead)"
        row["exits"] = exits
        rc = d.stop() if d.alive() else d.proc.returncode
        if rc not in (0, None):
            row["notes"].append(f"final stop rc {rc}")
        end_state(db, moto, clean, row)
        errs = F.log_lines(d.log, r" ERROR ", None)
        if errs:
            row["notes"].append(f"{len(errs)} ERROR lines, first: {errs[0][:200]}")
    finally:
        proxy.set_rules([])
        if d.alive():
            d.kill9()
        for reader in readers:
            if reader.alive():
                reader.kill9()
    row["secs"] = round(time.time() - t0)
    return row


def print_row(r):
    ex = ",".join(map(str, r.get("exits") or [])) or "-"
    print(f"  | {r['kind']} | {r['op']} | {r.get('requests', '?')} | {r.get('injected', '?')} | {ex} | "
          f"{'yes' if r.get('equal') else 'NO'} | {r.get('dups', '?')} | {'YES' if r.get('stuck') else 'no'} | "
          f"{r.get('settle_s')} / {r.get('new_s')} | {r.get('metrics', '')} | {'; '.join(r['notes'])} |", flush=True)


TABLE_HEAD = ("  | fault | op | op requests | injected | writer exits | end state equal | duplicates | stuck | "
              "settle / new file (s) | counted (non-zero fault series) | notes |\n  |---|---|---|---|---|---|---|---|---|---|---|")


def parse_mix(text):
    rules = []
    for k, part in enumerate(p for p in text.split(",") if p):
        kind, op, rate = part.split(":")
        rules.append(Rule(kind, op, float(rate), seed=100 + k))
    return rules


def kill_loop(a, moto, proxy, work, opts):
    print(f"\n== s3-faults kill loop: {a.kill_rounds} rounds, kill -9 at 0–{a.kill_delay} s, fault mix {a.kill_mix}",
          flush=True)
    rng = random.Random(a.seed)
    kdir = os.path.join(work, "kill-loop")
    src, logs = os.path.join(kdir, "src"), os.path.join(kdir, "logs")
    os.makedirs(logs)
    live, rev, next_id = set(), {}, 0
    for _ in range(8):
        F.write_file(src, next_id)
        live.add(next_id)
        rev[next_id] = 0
        next_id += 1
    db, prefix = "s3://faults/kill-loop", "kill-loop"
    cfg = os.path.join(kdir, "ctxd.toml")
    with open(cfg, "w") as f:
        f.write(f"[index]\nlease_ttl_secs = {a.kill_lease_ttl}\n")
    args = ["--role", "writer", "--watch", src, "--db", db, "--config", cfg]
    proxy.reset_counts()
    proxy.set_rules(parse_mix(a.kill_mix))
    env = moto.env(proxy.endpoint)

    def start(r):
        """Spawn a writer (waiting for the previous lease to expire); retried while refused."""
        for attempt in range(6):
            w = lease_left(moto, prefix)
            if w:
                time.sleep(w + 0.2)
            d = F.Serve(a.ctxd, args, os.path.join(logs, f"writer-{r}-{attempt}.log"), env)
            t = d.wait_ready(a.ready_within)
            if t is not None:
                return d, t, attempt
            rc = d.proc.returncode
            d.kill9()
            print(f"    round {r}: start {attempt} not ready (rc {rc}): "
                  f"{(F.log_lines(d.log, r'ERROR|lease', 1) or [''])[0][:200]}", flush=True)
        return None, None, 6

    d, t, _ = start(0)
    if d is None:
        return {"ok": False, "note": "first writer never ready"}
    ready, refused, unexpected = [t], 0, 0
    try:
        for r in range(1, a.kill_rounds + 1):
            ops = []
            for _ in range(rng.randint(1, 2)):
                F.write_file(src, next_id)
                live.add(next_id)
                rev[next_id] = 0
                ops.append(f"+{next_id}")
                next_id += 1
            for i in rng.sample(sorted(live), min(len(live), rng.randint(0, 2))):
                rev[i] += 1
                F.write_file(src, i, rev[i])
                ops.append(f"~{i}")
            if len(live) > 6 and rng.random() < 0.5:
                i = rng.choice(sorted(live))
                os.remove(os.path.join(src, F.file_name(i)))
                live.discard(i)
                ops.append(f"-{i}")
            delay = rng.uniform(0, a.kill_delay)
            time.sleep(delay)
            if not d.alive():
                unexpected += 1
                print(f"  round {r}: writer had exited with {d.proc.returncode}: "
                      f"{(F.log_lines(d.log, r'ERROR', 1) or [''])[0][:200]}", flush=True)
            d.kill9()
            d, t, attempts = start(r)
            refused += attempts
            print(f"  round {r:2}: {' '.join(ops):<18} killed after {delay:.2f}s, ready after "
                  f"{'never' if t is None else f'{t:.1f}s'}" + (f" ({attempts} refused starts)" if attempts else ""),
                  flush=True)
            if d is None:
                break
            ready.append(t)
        injected = {f"{k}×{o}": n for (k, o), n in sorted(proxy.injected.items())}
        proxy.set_rules([])
        # Settle with the fault off: every live file's token found, current revisions.
        ts, bad = time.time(), ["no writer"]
        while d is not None and time.time() - ts < a.settle and d.alive():
            bad = settled(d, sorted(live), rev)
            if not bad:
                break
            time.sleep(1)
        gone = [i for i in range(next_id) if i not in live]
        found_gone = gone_found(d, gone) if d is not None and d.alive() else []
        rc = d.stop() if d is not None and d.alive() else None
        clean_src, clean_db = os.path.join(kdir, "clean-src"), os.path.join(kdir, "clean")
        for i in sorted(live):
            F.write_file(clean_src, i, rev[i])
        F.clean_index(a.ctxd, clean_src, clean_db, os.path.join(logs, "clean.log"))
        cmp = compare_all(db, opts, clean_db)
        res = {"rounds": len(ready) - 1, "of": a.kill_rounds, "unexpected": unexpected, "refused": refused,
               "ready_p50": sorted(ready)[len(ready) // 2], "ready_max": max(ready), "unsettled": bad,
               "gone_found": found_gone, "cmp": {k: (len(v[0]), len(v[1]), v[2]) for k, v in cmp.items()},
               "injected": injected, "requests": dict(proxy.requests), "rc": rc}
        res["ok"] = (res["rounds"] == a.kill_rounds and not bad and not found_gone
                     and all(v == (0, 0, 0) for v in res["cmp"].values()))
        return res
    finally:
        proxy.set_rules([])
        if d is not None and d.alive():
            d.kill9()


def chosen_kinds_ops(a, default_ops):
    """The fault kinds and operations `--kinds` / `--ops` name (default: every kind, `default_ops`)."""
    kinds = [k for k in a.kinds.split(",") if k] if a.kinds else list(KINDS)
    ops = [o for o in a.ops.split(",") if o] if a.ops else list(default_ops)
    for k in kinds:
        if k not in KINDS:
            raise SystemExit(f"unknown fault kind {k} (one of {', '.join(KINDS)})")
    for o in ops:
        if o not in OPS:
            raise SystemExit(f"unknown operation {o} (one of {', '.join(OPS)})")
    return kinds, ops


def bucket_and_proxy(a, work):
    """`work/logs`, a moto server with the bucket `faults`, and a fault proxy in front of it."""
    logs = os.path.join(work, "logs")
    os.makedirs(logs, exist_ok=True)
    moto = F.Moto("faults", os.path.join(logs, "moto.log"))
    return logs, moto, FaultProxy(moto.port, timeout_delay=a.timeout_delay)


def scenario_s3_faults(a, work):
    kinds, ops = chosen_kinds_ops(a, OPS)
    print(f"\n== s3-faults: {len(kinds)} faults × {len(ops)} operations at rate {a.rate}, on from {a.arm} (max "
          f"{a.max_inject} injections, timeout {a.timeout_delay:.0f}s max {a.timeout_max_inject}); "
          f"{len(INITIAL)} files, {len(EDITED)} edited, 1 deleted, 1 added after", flush=True)
    F.PAD_KB = a.pad_kb
    logs, moto, proxy = bucket_and_proxy(a, work)
    clean = os.path.join(work, "clean")
    results = []
    try:
        clean_src = os.path.join(work, "clean-src")
        final_tree(clean_src)
        if kinds and ops and a.rate > 0:
            F.clean_index(a.ctxd, clean_src, clean, os.path.join(logs, "clean.log"))
        print(TABLE_HEAD, flush=True)
        if a.rate > 0:
            for kind, op in itertools.product(kinds, ops):
                try:
                    r = run_pair(a, moto, proxy, kind, op, work, clean)
                except Exception as e:
                    import traceback
                    traceback.print_exc()
                    r = {"kind": kind, "op": op, "notes": [f"harness error: {e}"[:200]], "stuck": True}
                results.append(r)
                print_row(r)
                print(f"    (requests while the fault was on: {r.get('all_requests')}; {r.get('secs')} s)", flush=True)
        for r in results:
            seen = r.get("requests", 0)
            ok = r.get("equal") and not r.get("dups") and not r.get("stuck") and r.get("reader_ok", True)
            F.figure("s3-faults", f"{r['kind']} × {r['op']}",
                     f"inj {r.get('injected', '?')}/{seen} eq={'y' if r.get('equal') else 'N'} "
                     f"dup={r.get('dups', '?')} stuck={'Y' if r.get('stuck') else 'n'}", "eq, 0 dup, not stuck", ok)
        if a.kill_rounds:
            k = kill_loop(a, moto, proxy, work, s3_opts(moto))
            for key, v in k.items():
                print(f"  kill loop {key}: {v}", flush=True)
            F.figure("s3-faults", "kill loop rounds", f"{k.get('rounds')}/{a.kill_rounds}", f"= {a.kill_rounds}",
                     k.get("rounds") == a.kill_rounds)
            F.figure("s3-faults", "kill loop end state vs clean", json.dumps(k.get("cmp"))[:60], "all 0/0/0",
                     k.get("ok", False))
    finally:
        proxy.stop()
        moto.stop()


def add_args(ap):
    ap.add_argument("--kinds", default="", help=f"s3-faults: fault kinds ({','.join(KINDS)}; default all)")
    ap.add_argument("--ops", default="", help=f"s3-faults: operations ({','.join(OPS)}; default all)")
    ap.add_argument("--rate", type=float, default=0.3, help="s3-faults: share of the op's requests that fail")
    ap.add_argument("--max-inject", type=int, default=8, help="s3-faults: injections per pair at most (0: no limit)")
    ap.add_argument("--timeout-delay", type=float, default=35, help="s3-faults: seconds a `timeout` holds a request")
    ap.add_argument("--timeout-max-inject", type=int, default=2, help="s3-faults: `timeout` injections per pair")
    ap.add_argument("--hold", type=float, default=6, help="s3-faults: seconds the fault stays on after the edits")
    ap.add_argument("--arm", choices=["start", "ready"], default="start",
                    help="s3-faults: the fault on from the writer's start, or once it is ready (after the first files)")
    ap.add_argument("--maintenance", type=int, default=0,
                    help="s3-faults: maintenance_interval_secs (compaction, cleanup: DELETEs) with 1 s retention; 0: default")
    ap.add_argument("--reader", dest="readers", action="store_const", const=1, default=0,
                    help="s3-faults: also a --role reader through the proxy (200 or a clean 503, never a wrong answer)")
    ap.add_argument("--readers", type=int, help="s3-faults: that many readers (--reader: one)")
    ap.add_argument("--lease-ttl", type=int, default=15, help="s3-faults: the writer lease's TTL (s)")
    ap.add_argument("--pad-kb", type=int, default=0,
                    help="s3-faults: KB of filler per file (e.g. 400: the first commit's data files pass 5 MB: multipart)")
    ap.add_argument("--kill-rounds", type=int, default=0, help="s3-faults: kill -9 rounds after the matrix (0: none)")
    ap.add_argument("--kill-delay", type=float, default=2.0, help="s3-faults: kill after 0..this many s")
    ap.add_argument("--kill-lease-ttl", type=int, default=4, help="s3-faults: lease TTL in the kill loop (s)")
    ap.add_argument("--kill-mix", default="slowdown:any:0.03,reset-before:any:0.02,reset-during:get:0.03,"
                                         "lost-after-write:put:0.05,500:list:0.05",
                    help="s3-faults: the kill loop's faults, kind:op:rate,...")
