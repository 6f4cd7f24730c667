"""`benches/faults.py s3-contend` and `s3-reembed`: the writer lease and the sharded re-embedding
through the fault proxy (issue 58, item 2), each fault kind on each chosen operation.

`s3-contend` — two `serve --role writer` processes on one prefix, started together, each
restarted one second after it exits (a supervisor that never gives up: a StatefulSet whose update
overlapped, or two operators). The fault is on from the start for `--hold` s while two files are
edited and one deleted. Every 0.25 s both processes' `/v1/status` are read: `lease` non-null means
the process says it holds the writer lease. Figures: the samples in which both said so and the
longest such overlap (a holder that lost its lease stops within two thirds of the TTL; the
conditional PUTs keep a stale holder's commits out), the exits by code, then — fault off — the
holder settles the final tree, takes a new file in, and both stop; the chunks, symbols and edges
must equal a clean `ctxd index` of the final tree with no duplicate row.

`s3-reembed` — a writer (fault-free: its own path is `s3-faults`') holds the prefix with 8 files;
then, the fault on, `ctxd reembed --shard I/3` for I = 0, 1, 2 and one `--commit` through the
proxy, each run again when it fails (at most `--job-tries` times, a Kubernetes Job's
backoffLimit); the fault off; the commit must switch the model, the writer must follow it, the
new table must hold exactly the old table's (path, chunk_id) rows with no duplicate, a search
must find file 0 and a file written afterwards must reach the new table.

Prints one table per scenario and reports figures into `faults.RESULTS`.
"""
import json, os, subprocess, time, urllib.request

import faults as F
import faults_s3 as S
from fault_proxy import Rule

SECOND_MODEL = "sentence-transformers/paraphrase-MiniLM-L3-v2"


def status_json(d):
    try:
        with urllib.request.urlopen(d.base + "/v1/status", timeout=2) as r:
            return json.load(r)
    except Exception:
        return None


def start_fault_run(a, work, name):
    """Moto, the proxy, and a clean index of the final tree beside them."""
    logs, moto, proxy = S.bucket_and_proxy(a, work)
    clean_src, clean = os.path.join(work, "clean-src"), os.path.join(work, "clean")
    S.final_tree(clean_src)
    F.clean_index(a.ctxd, clean_src, clean, os.path.join(logs, "clean.log"))
    print(f"\n== {name}", flush=True)
    return moto, proxy, clean


def edit_with_fault_on(src, seconds, tick):
    """The s3-faults edits (two files, one delete), then `tick()` every 0.25 s for `seconds`."""
    for i in S.EDITED:
        F.write_file(src, i, 1)
    os.remove(os.path.join(src, F.file_name(S.DELETED)))
    t0 = time.time()
    while time.time() - t0 < seconds:
        tick()
        time.sleep(0.25)


def contend_pair(a, moto, proxy, kind, op, work, clean):
    pdir, src, logs, db = S.new_pair(work, f"contend-{kind}-{op}")
    cfg = os.path.join(pdir, "ctxd.toml")
    with open(cfg, "w") as f:
        f.write(f"[index]\nlease_ttl_secs = {a.contend_lease_ttl}\n")
    args = ["--role", "writer", "--watch", src, "--db", db, "--config", cfg]
    env = moto.env(proxy.endpoint)
    proxy.reset_counts()
    proxy.set_rules([Rule(kind, op, a.rate, max_inject=a.timeout_max_inject if kind == "timeout" else a.max_inject,
                          seed=a.seed)])
    row = {"kind": kind, "op": op, "notes": [], "exits": {}, "both": 0, "overlap_s": 0.0, "starts": 2}
    t0 = time.time()
    procs = {w: F.Serve(a.ctxd, args, os.path.join(logs, f"{w}-0.log"), env) for w in "AB"}
    since_both = [None]

    def tick():
        for w, d in list(procs.items()):
            if not d.alive():
                rc = d.proc.returncode
                row["exits"][rc] = row["exits"].get(rc, 0) + 1
                d.kill9()
                time.sleep(1)
                row["starts"] += 1
                procs[w] = F.Serve(a.ctxd, args, os.path.join(logs, f"{w}-{row['starts']}.log"), env)
        held = [w for w, d in procs.items() if (status_json(d) or {}).get("lease")]
        if len(held) == 2:
            row["both"] += 1
            since_both[0] = since_both[0] or time.time()
            row["overlap_s"] = max(row["overlap_s"], round(time.time() - since_both[0], 2))
        else:
            since_both[0] = None
    try:
        edit_with_fault_on(src, a.hold, tick)
        row["requests"], row["injected"] = proxy.requests.get(op, 0), proxy.injected.get((kind, op), 0)
        proxy.set_rules([])
        # Fault off: keep supervising until one of them holds the lease and is ready.
        holder, tw = None, time.time()
        while holder is None and time.time() - tw < a.ready_within:
            tick()
            holder = next((d for d in procs.values() if (status_json(d) or {}).get("lease")
                           and d.status("/readyz") == 200), None)
            time.sleep(0.25)
        if holder is None:
            row["stuck"] = True
            row["notes"].append("no writer holds the lease after the fault")
        else:
            row["settle_s"], bad = S.settle_final_tree(holder, a.settle)
            row["new_s"] = S.new_file_found(holder, src, a.settle)
            row["stuck"] = row["new_s"] is None or bool(bad)
            if bad:
                row["notes"].append("unsettled: " + ", ".join(bad[:4]))
        for d in procs.values():
            rc = d.stop() if d.alive() else d.proc.returncode
            if rc not in (0, None, 1, 75):
                row["notes"].append(f"final stop rc {rc}")
        S.end_state(db, moto, clean, row)
    finally:
        proxy.set_rules([])
        for d in procs.values():
            if d.alive():
                d.kill9()
    row["secs"] = round(time.time() - t0)
    return row


def scenario_s3_contend(a, work):
    kinds, ops = S.chosen_kinds_ops(a, ("cput", "get"))
    moto, proxy, clean = start_fault_run(a, work, f"s3-contend: {len(kinds)} faults × {ops}, two writers, "
                                                  f"lease TTL {a.contend_lease_ttl} s, fault on {a.hold} s")
    print("  | fault | op | injected / requests | starts | exits by code | samples both holding | longest overlap (s) "
          "| end state equal | duplicates | stuck | settle / new file (s) | notes |\n"
          "  |---|---|---|---|---|---|---|---|---|---|---|---|", flush=True)
    try:
        for kind in kinds:
            for op in ops:
                r = contend_pair(a, moto, proxy, kind, op, work, clean)
                print(f"  | {kind} | {op} | {r.get('injected')}/{r.get('requests')} | {r['starts']} | "
                      f"{json.dumps(r['exits'])} | {r['both']} | {r['overlap_s']} | {'yes' if r.get('equal') else 'NO'}"
                      f" | {r.get('dups')} | {'YES' if r.get('stuck') else 'no'} | {r.get('settle_s')} / "
                      f"{r.get('new_s')} | {'; '.join(r['notes'])} |", flush=True)
                ok = r.get("equal") and not r.get("dups") and not r.get("stuck") \
                    and r["overlap_s"] <= a.contend_lease_ttl
                F.figure("s3-contend", f"{kind} × {op}", f"eq={'y' if r.get('equal') else 'N'} dup={r.get('dups')} "
                         f"both={r['overlap_s']}s", "eq, 0 dup, overlap ≤ TTL", ok)
    finally:
        proxy.stop()
        moto.stop()


def job(a, env, args, log, tries):
    """`ctxd reembed …` run until it exits 0, at most `tries` times: (report or None, attempts)."""
    e = dict(os.environ, CTXD_LOG="warn", HF_HUB_OFFLINE="1", **env)
    for n in range(1, tries + 1):
        with open(log, "ab") as err:
            try:
                out = subprocess.run([a.ctxd, "reembed", "--json", "--block-rows", "4", "--model", SECOND_MODEL,
                                      *args], env=e, stdout=subprocess.PIPE, stderr=err, timeout=300)
            except subprocess.TimeoutExpired:
                continue
        if out.returncode == 0:
            return json.loads(out.stdout.decode().strip().splitlines()[-1]), n
    return None, tries


def reembed_pair(a, moto, proxy, kind, op, work):
    _, src, logs, db = S.new_pair(work, f"reembed-{kind}-{op}")
    row = {"kind": kind, "op": op, "notes": [], "tries": []}
    t0 = time.time()
    # The writer talks to moto directly: only the job's requests meet the fault.
    d = F.Serve(a.ctxd, ["--role", "writer", "--watch", src, "--db", db], os.path.join(logs, "writer.log"), moto.env())
    try:
        if d.wait_ready(a.ready_within) is None:
            row["notes"].append("writer not ready")
            return row
        before = F.rows(db, S.s3_opts(moto))
        proxy.reset_counts()
        proxy.set_rules([Rule(kind, op, a.rate, max_inject=a.timeout_max_inject if kind == "timeout"
                              else a.max_inject, seed=a.seed)])
        env = moto.env(proxy.endpoint)
        staged = 0
        for i in range(3):
            rep, n = job(a, env, ["--db", db, "--shard", f"{i}/3"], os.path.join(logs, f"shard-{i}.log"), a.job_tries)
            row["tries"].append(n)
            staged += (rep or {}).get("embedded", 0)
            if rep is None:
                row["notes"].append(f"shard {i}/3 failed {n} times")
        rep, n = job(a, env, ["--db", db, "--commit"], os.path.join(logs, "commit.log"), a.job_tries)
        row["tries"].append(n)
        row["requests"], row["injected"] = proxy.requests.get(op, 0), proxy.injected.get((kind, op), 0)
        proxy.set_rules([])
        row["switched"] = bool(rep and rep.get("switched"))
        if not row["switched"]:
            row["notes"].append(f"commit: {rep}" if rep else f"commit failed {n} times: "
                                + (F.log_lines(os.path.join(logs, "commit.log"), r"rror", 1) or [""])[0][:200])
            return row
        if rep.get("staged_rows") != staged:  # a commit run again after it published: the rows are in already
            row["notes"].append(f"staged {staged}, the last commit run published {rep.get('staged_rows')}")
        tw = time.time()
        while time.time() - tw < 120 and (status_json(d) or {}).get("model") != SECOND_MODEL:
            time.sleep(0.5)
        table = (status_json(d) or {}).get("table", "")
        row["followed_s"] = round(time.time() - tw, 1) if table.startswith("chunks__") else None
        after = F.rows(db, S.s3_opts(moto), table=table) if row["followed_s"] is not None else []
        row["equal"] = sorted(set(after)) == sorted(set(before))
        row["dups"] = len(after) - len(set(after))
        found = F.file_name(0) in (d.paths(F.token(0), None, 3) or [])
        row["new_s"] = S.new_file_found(d, src, a.settle, poll=0.5)
        new_ok = row["new_s"] is not None
        row["ok"] = row["equal"] and not row["dups"] and found and new_ok and not any("failed" in n for n in row["notes"])
        if not found:
            row["notes"].append("file 0 not found after the switch")
    finally:
        proxy.set_rules([])
        d.stop()
        row["secs"] = round(time.time() - t0)
    return row


def scenario_s3_reembed(a, work):
    kinds, ops = S.chosen_kinds_ops(a, ("get", "put", "cput", "list"))
    _, moto, proxy = S.bucket_and_proxy(a, work)
    print(f"\n== s3-reembed: {len(kinds)} faults × {ops}, 3 shards + commit, each job tried at most {a.job_tries}×",
          flush=True)
    print("  | fault | op | injected / requests | tries (shard 0, 1, 2, commit) | switched | writer followed (s) | "
          "new table equal | duplicates | new file (s) | notes |\n  |---|---|---|---|---|---|---|---|---|---|",
          flush=True)
    try:
        for kind in kinds:
            for op in ops:
                r = reembed_pair(a, moto, proxy, kind, op, work)
                print(f"  | {kind} | {op} | {r.get('injected')}/{r.get('requests')} | {r['tries']} | "
                      f"{'yes' if r.get('switched') else 'NO'} | {r.get('followed_s')} | "
                      f"{'yes' if r.get('equal') else 'NO'} | {r.get('dups')} | {r.get('new_s')} | "
                      f"{'; '.join(r['notes'])} |", flush=True)
                F.figure("s3-reembed", f"{kind} × {op}", f"switched={'y' if r.get('switched') else 'N'} "
                         f"eq={'y' if r.get('equal') else 'N'} dup={r.get('dups')}", "switched, eq, 0 dup",
                         bool(r.get("ok")))
    finally:
        proxy.stop()
        moto.stop()


def add_args(ap):
    ap.add_argument("--contend-lease-ttl", type=int, default=6, help="s3-contend: the writer lease's TTL (s)")
    ap.add_argument("--job-tries", type=int, default=4, help="s3-reembed: runs of each shard / the commit at most")
